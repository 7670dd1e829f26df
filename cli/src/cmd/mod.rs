//! One module per subcommand.

pub mod accel;
pub mod accel_costs;
pub mod bench;
pub mod compare;
pub mod forward;
pub mod inspect;
pub mod layer;
pub mod quant_scope;
pub mod run;
pub mod sweep;
pub mod train;
pub mod train_dfq;
pub mod train_ldp;
pub mod train_output;
pub mod train_setup;
pub mod zoo;
