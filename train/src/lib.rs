//! Training: the seeded, deterministic loop ([`Trainer`]), the precision-policy seam ([`Policy`])
//! with every policy under [`policy`] (static and cyclic schedules, PFQ, PRT, DFQ/FracTrain,
//! LDP, the plateau indicator), the run-length-encoded trace recorder and exact-resume
//! checkpoints; and a whole run as a library call: a typed [`TrainPlan`] (or [`CostPlan`])
//! validated by itself, then [`Run::new`] and [`Run::execute`] with an [`Observer`].

pub mod checkpoint;
pub mod feed;
pub mod net;
pub mod plan;
pub mod policy;
pub mod recorder;
pub mod run;
mod snapshot;
pub mod trainer;

pub use net::{QuantSlot, TrainNet};
pub use plan::{CostPlan, PlanError, TrainPlan};
pub use policy::pfq::{Pfq, PfqConfig};
pub use policy::plateau::{Plateau, PlateauConfig};
pub use policy::prt::{Prt, PrtConfig, PrtPolicy, PrtStep};
pub use policy::schedule::SchedulePolicy;
pub use policy::{apply_uniform, LayerBits, LayerBitsReport, Policy, PolicyReport};
pub use recorder::Recorder;
pub use run::{ErrorKind, Observer, Run, RunError, RunResult, SavedRun};
pub use trainer::{EvalBits, EvalRecord, RunState, StepReport, TrainConfig, TrainData, Trainer};
