//! Training: the seeded, deterministic loop ([`Trainer`]), precision policies (schedules, PFQ,
//! PRT), the run-length-encoded trace recorder and exact-resume checkpoints.

pub mod checkpoint;
pub mod net;
pub mod pfq;
pub mod policy;
pub mod prt;
pub mod recorder;
pub mod trainer;

pub use net::{QuantSlot, TrainNet};
pub use pfq::{Pfq, PfqConfig};
pub use policy::{PolicyState, PrecisionPolicy};
pub use prt::{Prt, PrtConfig, PrtStep};
pub use recorder::Recorder;
pub use trainer::{EvalRecord, RunState, StepReport, TrainConfig, TrainData, Trainer};
