//! One module per subcommand.
pub mod zoo;
