//! One module per subcommand.

pub mod accel;
pub mod accel_costs;
pub mod accumulator_check;
pub mod arith;
pub mod bench;
pub mod compare;
pub mod forward;
pub mod infer;
pub mod inspect;
pub mod layer;
pub mod plot;
pub mod quant_scope;
pub mod run;
pub mod shared;
pub mod sweep;
pub mod sweep_args;
pub mod train;
pub mod validate;
pub mod zoo;
