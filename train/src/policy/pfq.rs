//! PFQ (FracTrain, spec §5): precision rises through stage lists when the loss-plateau indicator
//! ([`super::plateau`]) fires at a check point (every evaluation interval).

use cptsim_traces::schedule::Precision;
use serde::{Deserialize, Serialize};

use super::plateau::{Plateau, PlateauConfig};
use super::{from_state, to_state, Policy, PolicyReport};
use crate::TrainNet;
use cptsim_nn::error::{Result, SimError};
use cptsim_traces::TraceRow;

/// The stage lists and indicator constants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PfqConfig {
    /// Forward bits per stage `f_0..f_K`.
    pub fw: Vec<u8>,
    /// Backward bits per stage `g_0..g_K`.
    pub bw: Vec<u8>,
    /// Initial threshold ε.
    pub epsilon: f64,
    /// Threshold decay α, applied after the first and second turning points.
    pub alpha: f64,
}

impl PfqConfig {
    /// The FracTrain README example for CIFAR: FW 3,4,6,8 / BW 6,6,8,8, ε = 0.05, α = 0.3.
    pub fn readme_cifar() -> Self {
        Self {
            fw: vec![3, 4, 6, 8],
            bw: vec![6, 6, 8, 8],
            epsilon: 0.05,
            alpha: 0.3,
        }
    }

    /// The indicator's constants: one stage per list entry.
    pub fn plateau(&self) -> PlateauConfig {
        PlateauConfig {
            epsilon: self.epsilon,
            alpha: self.alpha,
            stages: self.fw.len(),
        }
    }

    /// Checks the stage lists (same non-zero length, bits in 1..=32) and constants.
    pub fn validate(&self) -> Result<()> {
        if self.fw.is_empty() || self.fw.len() != self.bw.len() {
            return Err(SimError::invalid(
                "PFQ stages",
                format!(
                    "forward list has {} stages, backward list {} (need the same number, ≥ 1)",
                    self.fw.len(),
                    self.bw.len()
                ),
            ));
        }
        if let Some(b) = self
            .fw
            .iter()
            .chain(&self.bw)
            .find(|&&b| !(1..=32).contains(&b))
        {
            return Err(SimError::invalid(
                "PFQ stages",
                format!("bit-width {b} not in 1..=32"),
            ));
        }
        self.plateau().validate()
    }
}

/// The PFQ policy: stage lists and the indicator's running state.
#[derive(Clone, Debug, PartialEq)]
pub struct Pfq {
    /// Stage lists and constants.
    pub config: PfqConfig,
    /// The plateau indicator (its stage indexes the lists).
    pub plateau: Plateau,
}

impl Pfq {
    /// The policy at stage 0.
    pub fn new(config: PfqConfig) -> Result<Self> {
        config.validate()?;
        let plateau = Plateau::new(&config.plateau())?;
        Ok(Self { config, plateau })
    }

    /// The precision of the current stage.
    pub fn current(&self) -> Precision {
        let k = self.plateau.stage.min(self.config.fw.len() - 1);
        Precision {
            fw: self.config.fw[k],
            bw: self.config.bw[k],
        }
    }
}

impl Policy for Pfq {
    fn name(&self) -> &'static str {
        "pfq"
    }

    fn precision(&self, _t: u64) -> Precision {
        self.current()
    }

    fn observe(&mut self, loss: f32, _train_acc: f64) -> Result<()> {
        self.plateau.observe(loss);
        Ok(())
    }

    fn check(&mut self, t: u64) {
        self.plateau.check(t, &self.config.plateau());
    }

    fn state(&self) -> Result<serde_json::Value> {
        to_state(self.name(), &self.plateau)
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        self.plateau = from_state(self.name(), state)?;
        Ok(())
    }

    fn report(&self, _net: &mut TrainNet, _rows: &[TraceRow], _iterations: u64) -> PolicyReport {
        PolicyReport {
            turns: Some(self.plateau.turns.clone()),
            ..PolicyReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_follow_the_indicator_and_the_state_round_trips() {
        let mut p = Pfq::new(PfqConfig {
            fw: vec![3, 4],
            bw: vec![6, 8],
            epsilon: 10.0,
            alpha: 0.5,
        })
        .unwrap();
        assert_eq!(p.precision(0), Precision { fw: 3, bw: 6 });
        for t in 0..5 {
            p.observe(1.0, 0.5).unwrap();
            p.check(t);
        }
        assert_eq!(p.precision(5), Precision { fw: 4, bw: 8 });
        let mut fresh = Pfq::new(p.config.clone()).unwrap();
        fresh.restore(p.state().unwrap()).unwrap();
        assert_eq!(fresh, p);
        assert_eq!(p.report(&mut dummy_net(), &[], 5).turns, Some(vec![5]));
    }

    fn dummy_net() -> TrainNet {
        crate::trainer::tests::small_net(1)
    }

    #[test]
    fn bad_stage_lists_are_rejected() {
        let bad = PfqConfig {
            fw: vec![3, 4],
            bw: vec![8],
            ..PfqConfig::readme_cifar()
        };
        assert!(Pfq::new(bad)
            .unwrap_err()
            .to_string()
            .contains("PFQ stages"));
        let zero = PfqConfig {
            fw: vec![0],
            bw: vec![8],
            ..PfqConfig::readme_cifar()
        };
        assert!(Pfq::new(zero).is_err());
    }
}
