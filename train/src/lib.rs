//! Training: the seeded, deterministic loop ([`Trainer`]), the precision-policy seam ([`Policy`])
//! with every policy under [`policy`] (static and cyclic schedules, PFQ, PRT, DFQ/FracTrain,
//! LDP, the plateau indicator), the run-length-encoded trace recorder and exact-resume
//! checkpoints.

pub mod checkpoint;
pub mod feed;
pub mod net;
pub mod policy;
pub mod recorder;
mod snapshot;
pub mod trainer;

pub use net::{QuantSlot, TrainNet};
pub use policy::pfq::{Pfq, PfqConfig};
pub use policy::plateau::{Plateau, PlateauConfig};
pub use policy::prt::{Prt, PrtConfig, PrtPolicy, PrtStep};
pub use policy::schedule::SchedulePolicy;
pub use policy::{apply_uniform, LayerBits, LayerBitsReport, Policy, PolicyReport};
pub use recorder::Recorder;
pub use trainer::{EvalBits, EvalRecord, RunState, StepReport, TrainConfig, TrainData, Trainer};
