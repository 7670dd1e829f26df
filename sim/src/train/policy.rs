//! Precision policies: which forward/backward bits the network runs at in each iteration — a
//! schedule of the traces crate (static, CPT cosine and its variants), PFQ's loss-plateau
//! indicator, or a cyclic schedule whose lower bound the Precision Range Test finds first.

use cptsim_traces::schedule::{BitRange, Precision, Schedule, ScheduleArgs};
use serde::{Deserialize, Serialize};

use super::net::TrainNet;
use super::pfq::Pfq;
use super::prt::Prt;
use crate::error::{Result, SimError};
use crate::ldp::{Ldp, LdpState};
use cptsim_traces::Bits;

/// A precision policy with its state.
#[derive(Clone, Debug)]
pub enum PrecisionPolicy {
    /// A fixed function of the iteration.
    Schedule(Schedule),
    /// Stages raised by the loss-plateau indicator.
    Pfq(Pfq),
    /// PRT in the first iterations, then `args` with `B_min` set to the bound found.
    Prt {
        /// The running test.
        prt: Prt,
        /// The schedule to follow afterwards (its `--bits` minimum is replaced).
        args: ScheduleArgs,
        /// Backward bits during the test.
        grad_bits: u8,
        /// The schedule once the bound is known.
        schedule: Option<Schedule>,
    },
    /// LDP: learned per-layer forward bits (spec §8).
    Ldp(Ldp),
}

/// What a checkpoint keeps of a policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PolicyState {
    /// A schedule: nothing beyond the configuration.
    Schedule,
    /// PFQ indicator state.
    Pfq(Pfq),
    /// PRT state.
    Prt(Prt),
    /// LDP's β per layer.
    Ldp(LdpState),
}

fn schedule_err(e: impl std::fmt::Display) -> SimError {
    SimError::invalid("schedule", e.to_string())
}

impl PrecisionPolicy {
    /// PRT first, then `args` from the bound found on; `grad_bits` during the test.
    pub fn prt(prt: Prt, args: ScheduleArgs, grad_bits: u8) -> Self {
        Self::Prt {
            prt,
            args,
            grad_bits,
            schedule: None,
        }
    }

    /// The precision of iteration `t`.
    pub fn precision(&self, t: u64) -> Precision {
        match self {
            Self::Schedule(s) => s.at(t),
            Self::Pfq(p) => p.precision(),
            Self::Prt {
                prt,
                grad_bits,
                schedule,
                ..
            } => match schedule {
                Some(s) => s.at(t),
                None => Precision {
                    fw: prt.bits(),
                    bw: *grad_bits,
                },
            },
            Self::Ldp(l) => l.precision(),
        }
    }

    /// Per-layer precision on top of the uniform one (LDP): adjusts the layers and the trace
    /// entries `bits` that [`Self::precision`] set.
    pub fn layer_bits(&self, net: &mut TrainNet, bits: &mut [(u32, Bits)]) -> Result<()> {
        match self {
            Self::Ldp(l) => l.apply(net, bits),
            _ => Ok(()),
        }
    }

    /// Learns from the backward pass just done (LDP's β step).
    pub fn learn(&mut self, net: &mut TrainNet) {
        if let Self::Ldp(l) = self {
            l.learn(net);
        }
    }

    /// Feeds iteration `t`'s minibatch loss and training accuracy (fraction).
    pub fn observe(&mut self, loss: f32, train_acc: f64) -> Result<()> {
        match self {
            Self::Schedule(_) | Self::Ldp(_) => Ok(()),
            Self::Pfq(p) => {
                p.observe(loss);
                Ok(())
            }
            Self::Prt {
                prt,
                args,
                schedule,
                ..
            } => {
                if schedule.is_none() {
                    if let Some(bits) = prt.observe(train_acc) {
                        *schedule = Some(Self::after_prt(args, prt, bits)?);
                    }
                }
                Ok(())
            }
        }
    }

    fn after_prt(args: &ScheduleArgs, prt: &Prt, bits: u8) -> Result<Schedule> {
        let range = BitRange {
            min: bits.min(prt.config.max_bits),
            max: prt.config.max_bits,
        };
        args.clone().bits(range).build().map_err(schedule_err)
    }

    /// A check point (evaluation) after iteration `t`.
    pub fn check(&mut self, t: u64) {
        if let Self::Pfq(p) = self {
            p.check(t);
        }
    }

    /// The state to checkpoint.
    pub fn state(&self) -> PolicyState {
        match self {
            Self::Schedule(_) => PolicyState::Schedule,
            Self::Pfq(p) => PolicyState::Pfq(p.clone()),
            Self::Prt { prt, .. } => PolicyState::Prt(prt.clone()),
            Self::Ldp(l) => PolicyState::Ldp(l.state.clone()),
        }
    }

    /// Restores a checkpointed state into a policy built from the same configuration.
    pub fn restore(&mut self, state: PolicyState) -> Result<()> {
        match (self, state) {
            (Self::Schedule(_), PolicyState::Schedule) => Ok(()),
            (Self::Pfq(p), PolicyState::Pfq(s)) => {
                *p = s;
                Ok(())
            }
            (Self::Ldp(l), PolicyState::Ldp(s)) => l.restore(s),
            (
                Self::Prt {
                    prt,
                    args,
                    schedule,
                    ..
                },
                PolicyState::Prt(s),
            ) => {
                *schedule = match s.found {
                    Some(bits) => Some(Self::after_prt(args, &s, bits)?),
                    None => None,
                };
                *prt = s;
                Ok(())
            }
            (_, s) => Err(SimError::invalid(
                "checkpoint",
                format!("policy state {s:?} does not fit the configured precision policy"),
            )),
        }
    }

    /// The bound found by the PRT, if this policy ran one and it finished.
    pub fn prt_bound(&self) -> Option<&Prt> {
        match self {
            Self::Prt { prt, .. } if prt.found.is_some() => Some(prt),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::pfq::PfqConfig;
    use super::super::prt::PrtConfig;
    use super::*;

    #[test]
    fn prt_hands_over_to_the_schedule_with_the_bound() {
        let cfg = PrtConfig {
            iters_per_step: 2,
            window: 1,
            ..PrtConfig::new(8)
        };
        let args = ScheduleArgs::new("cosine", 100).cycles(4);
        let mut p = PrecisionPolicy::prt(Prt::new(cfg).unwrap(), args, 8);
        assert_eq!(p.precision(0), Precision { fw: 2, bw: 8 });
        for acc in [0.1, 0.1, 0.5, 0.5] {
            p.observe(1.0, acc).unwrap();
        }
        assert_eq!(p.prt_bound().and_then(|t| t.found), Some(3));
        // Cycle 2 starts at 25 with B_min = 3.
        assert_eq!(p.precision(25), Precision { fw: 3, bw: 8 });
        let state = p.state();
        let mut fresh = PrecisionPolicy::prt(
            Prt::new(PrtConfig::new(8)).unwrap(),
            ScheduleArgs::new("cosine", 100).cycles(4),
            8,
        );
        fresh.restore(state).unwrap();
        assert_eq!(fresh.precision(25), p.precision(25));
        assert!(fresh.restore(PolicyState::Schedule).is_err());
    }

    #[test]
    fn pfq_and_schedule_policies() {
        let s = ScheduleArgs::new("static", 10).build().unwrap();
        let p = PrecisionPolicy::Schedule(s);
        assert_eq!(p.precision(3), Precision { fw: 8, bw: 8 });
        let mut q = PrecisionPolicy::Pfq(Pfq::new(PfqConfig::readme_cifar()).unwrap());
        assert_eq!(q.precision(0), Precision { fw: 3, bw: 6 });
        q.observe(1.0, 0.5).unwrap();
        q.check(0);
        assert!(matches!(q.state(), PolicyState::Pfq(_)));
    }
}
