//! [`SavedRun`]: a run checkpointed in a directory — its plan (the one it was started with, read
//! back from the checkpoint, an older version converted), the training time it had used, and the
//! checkpoint to continue from.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value;

use super::error::RunError;
use super::outputs::CHECKPOINT;
use crate::checkpoint::{self, Checkpoint};
use crate::plan::{upgrade_v2, TrainPlan, PLAN_VERSION};

/// A checkpointed run.
pub struct SavedRun {
    /// The run's plan. Its invocation keys ([`crate::plan::INVOCATION_KEYS`]) may be changed
    /// before [`super::Run::resume`]; `out` unset writes into [`SavedRun::dir`].
    pub plan: TrainPlan,
    /// The directory holding the checkpoint.
    pub dir: PathBuf,
    /// Training seconds of the invocations before.
    pub seconds: f64,
    /// The plan as stored, to check that only invocation keys changed.
    pub(crate) stored: TrainPlan,
    pub(crate) checkpoint: Checkpoint,
}

/// What a checkpoint's `settings` hold.
pub(crate) fn settings(plan: &TrainPlan, seconds: f64) -> Value {
    let mut json = plan.to_json();
    json.insert("version".into(), Value::from(PLAN_VERSION));
    serde_json::json!({ "plan": json, "seconds": seconds })
}

impl SavedRun {
    /// Reads the checkpoint in `dir` (`checkpoint.bin`, as a run's outputs hold it).
    pub fn open(dir: &Path) -> Result<Self, RunError> {
        let path = dir.join(CHECKPOINT);
        if !path.is_file() {
            return Err(anyhow::anyhow!(
                "--resume {}: no {CHECKPOINT} in it (a directory that `train --out` wrote?)",
                dir.display()
            )
            .into());
        }
        let checkpoint = checkpoint::load(&path)
            .context("--resume")
            .map_err(RunError::from)?;
        let (plan, seconds) = read_settings(&path, &checkpoint.header.settings)?;
        plan.validate()
            .with_context(|| format!("--resume: {}", path.display()))
            .map_err(RunError::from)?;
        let mut out = plan.clone();
        out.out = None;
        Ok(Self {
            plan: out,
            dir: dir.to_path_buf(),
            seconds,
            stored: plan,
            checkpoint,
        })
    }

    /// The checkpoint's iteration.
    pub fn iteration(&self) -> u64 {
        self.checkpoint.header.state.iteration
    }
}

/// The plan and earlier training time stored in the checkpoint `path`'s `settings`.
fn read_settings(path: &Path, settings: &Value) -> anyhow::Result<(TrainPlan, f64)> {
    let p = path.display();
    let Some(Value::Object(stored)) = settings.get("plan") else {
        if settings.get("args").is_some() {
            bail!(
                "--resume: {p}: written by an older cptsim (its settings are the command-line flags \
                 of before the train plan, which this version no longer reads); rerun the training"
            );
        }
        bail!("--resume: {p}: no train plan in the checkpoint");
    };
    let mut stored = stored.clone();
    let version = stored.remove("version").and_then(|v| v.as_u64());
    let keys = match version {
        Some(v) if v == u64::from(PLAN_VERSION) => stored,
        Some(2) => upgrade_v2(stored).map_err(|e| {
            anyhow::anyhow!("--resume: {p}: a train plan of version 2 that does not read: {e}")
        })?,
        Some(v) if v < u64::from(PLAN_VERSION) => bail!(
            "--resume: {p}: written by an older cptsim (train plan version {v}, this one reads {PLAN_VERSION})"
        ),
        v => bail!(
            "--resume: {p}: train plan version {v:?} (this cptsim reads {PLAN_VERSION}; written by a newer cptsim?)"
        ),
    };
    let plan: TrainPlan = serde_json::from_value(Value::Object(keys))
        .with_context(|| format!("--resume: {p}: settings unreadable"))?;
    let seconds = settings
        .get("seconds")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    Ok((plan, seconds))
}
