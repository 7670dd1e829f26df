//! Executors: who runs a study's pending cells. Each cell runs through [`Cell::execute`] (lock,
//! children, `done` marker) wherever it runs, so an executor only decides where and when; a new
//! one (Kubernetes Jobs, Ray, HTCondor) implements [`Executor`] and touches no cell logic.

pub mod local;
pub mod slurm;

use super::cell::Cell;
use super::study::Study;

/// How an executor returned.
#[derive(Debug)]
pub enum Finished {
    /// Every pending cell was attempted.
    Yes,
    /// The cells were handed to a scheduler that runs them later, under this job id.
    Submitted(String),
}

/// Runs cells of a study.
pub trait Executor {
    /// Runs the study's `pending` cells, or hands them to a scheduler.
    fn execute(&self, study: &Study, pending: &[&Cell]) -> anyhow::Result<Finished>;
}
