//! Training: the seeded, deterministic loop ([`Trainer`]), the precision-policy seam ([`Policy`])
//! with the schedule, PFQ, PRT, DFQ/FracTrain and LDP policies and the plateau indicator, the
//! run-length-encoded trace recorder and exact-resume checkpoints; and a whole run as a library
//! call: a typed [`TrainPlan`] (or [`CostPlan`]) validated by itself, then [`Run::new`] and
//! [`Run::execute`] with an [`Observer`].

pub mod checkpoint;
pub mod dfq;
pub mod feed;
pub mod ldp;
pub mod net;
pub mod pfq;
pub mod plan;
pub mod plateau;
pub mod policy;
pub mod prt;
pub mod recorder;
pub mod run;
pub mod schedule;
mod snapshot;
pub mod trainer;

pub use net::{QuantSlot, TrainNet};
pub use pfq::{Pfq, PfqConfig};
pub use plan::{CostPlan, PlanError, TrainPlan};
pub use plateau::{Plateau, PlateauConfig};
pub use policy::{apply_uniform, LayerBits, LayerBitsReport, Policy, PolicyReport};
pub use prt::{Prt, PrtConfig, PrtPolicy, PrtStep};
pub use recorder::Recorder;
pub use run::{ErrorKind, Observer, Run, RunError, RunResult, SavedRun};
pub use schedule::SchedulePolicy;
pub use trainer::{EvalBits, EvalRecord, RunState, StepReport, TrainConfig, TrainData, Trainer};
