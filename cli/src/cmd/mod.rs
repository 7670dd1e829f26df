//! One module per subcommand.

pub mod accel;
pub mod accel_costs;
pub mod compare;
pub mod inspect;
pub mod layer;
pub mod run;
pub mod train;
pub mod train_output;
pub mod train_setup;
pub mod zoo;
