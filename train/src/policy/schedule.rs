//! The schedule policy: the precision is a fixed function of the iteration (static, CPT cosine
//! and the other schedules of the traces crate); it has no state.

use cptsim_traces::schedule::{Precision, Schedule};

use super::Policy;
use cptsim_nn::error::{Result, SimError};

/// A schedule as a [`Policy`].
#[derive(Clone, Debug)]
pub struct SchedulePolicy(pub Schedule);

impl Policy for SchedulePolicy {
    fn name(&self) -> &'static str {
        "schedule"
    }

    fn precision(&self, t: u64) -> Precision {
        self.0.at(t)
    }

    fn state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        match state {
            serde_json::Value::Null => Ok(()),
            s => Err(SimError::invalid(
                "checkpoint",
                format!("a schedule has no state, the checkpoint holds {s}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_traces::schedule::ScheduleArgs;

    #[test]
    fn follows_the_schedule_and_has_no_state() {
        let mut p = SchedulePolicy(ScheduleArgs::new("static", 10).build().unwrap());
        assert_eq!(p.precision(3), Precision { fw: 8, bw: 8 });
        assert_eq!(p.state().unwrap(), serde_json::Value::Null);
        assert!(p.restore(serde_json::json!({"stage": 1})).is_err());
    }
}
