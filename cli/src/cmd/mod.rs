//! One module per subcommand.
pub mod accel;
pub mod layer;
