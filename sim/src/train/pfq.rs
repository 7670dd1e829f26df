//! PFQ (FracTrain, spec §5): precision rises through stage lists when a loss-plateau indicator
//! fires at a check point (every evaluation interval).

use cptsim_traces::schedule::Precision;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};

/// Losses compared by the plateau test.
const WINDOW: usize = 5;
/// Checks over which the loss scale is averaged.
const SCALE_CHECKS: usize = 10;

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
        if !(self.epsilon > 0.0 && self.alpha > 0.0) {
            return Err(SimError::invalid(
                "PFQ indicator",
                format!(
                    "ε = {} and α = {} must be positive",
                    self.epsilon, self.alpha
                ),
            ));
        }
        Ok(())
    }
}

/// The indicator's running state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pfq {
    /// Stage lists and constants.
    pub config: PfqConfig,
    /// Current stage `k`.
    pub stage: usize,
    threshold: f64,
    window: Vec<f64>,
    scale_losses: Vec<f64>,
    sum: f64,
    count: u64,
    /// Iterations at which the stage rose.
    pub turns: Vec<u64>,
}

impl Pfq {
    /// The indicator at stage 0.
    pub fn new(config: PfqConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            threshold: config.epsilon,
            config,
            stage: 0,
            window: Vec::new(),
            scale_losses: Vec::new(),
            sum: 0.0,
            count: 0,
            turns: Vec::new(),
        })
    }

    /// The precision of the current stage.
    pub fn precision(&self) -> Precision {
        let k = self.stage.min(self.config.fw.len() - 1);
        Precision {
            fw: self.config.fw[k],
            bw: self.config.bw[k],
        }
    }

    /// Adds one minibatch loss.
    pub fn observe(&mut self, loss: f32) {
        self.sum += f64::from(loss);
        self.count += 1;
    }

    /// A check point after iteration `t`: the mean loss since the last check enters the plateau
    /// test; a turning point raises the stage from the next iteration on.
    pub fn check(&mut self, t: u64) {
        if self.count == 0 {
            return;
        }
        let mean = self.sum / self.count as f64;
        (self.sum, self.count) = (0.0, 0);
        if self.scale_losses.len() < SCALE_CHECKS {
            self.scale_losses.push(mean);
        }
        let scale = self.scale_losses.iter().sum::<f64>() / self.scale_losses.len() as f64;
        let last_stage = self.config.fw.len() - 1;
        if self.stage >= last_stage {
            return;
        }
        self.window.push(mean);
        if self.window.len() > WINDOW {
            self.window.remove(0);
        }
        if self.window.len() < WINDOW {
            return;
        }
        let newest = self.window[WINDOW - 1];
        let plateau = self.window[..WINDOW - 1]
            .iter()
            .all(|&l| (l - newest).abs() / scale.max(f64::MIN_POSITIVE) <= self.threshold);
        if plateau {
            self.stage += 1;
            if self.stage <= 2 {
                self.threshold *= self.config.alpha;
            }
            self.window.clear();
            self.turns.push(t + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(p: &mut Pfq, loss: f32, t: u64) {
        for _ in 0..10 {
            p.observe(loss);
        }
        p.check(t);
    }

    #[test]
    fn plateau_raises_stage_after_five_checks_and_decays_threshold() {
        let mut p = Pfq::new(PfqConfig {
            fw: vec![3, 4, 6],
            bw: vec![6, 8, 8],
            epsilon: 0.1,
            alpha: 0.5,
        })
        .unwrap();
        assert_eq!(p.precision(), Precision { fw: 3, bw: 6 });
        // Falling fast: no plateau (|2.0 − 1.0| / 1.5 > 0.1).
        for (i, l) in [2.0, 1.75, 1.5, 1.25, 1.0].into_iter().enumerate() {
            feed(&mut p, l, i as u64 * 10 + 9);
        }
        assert_eq!(p.stage, 0);
        // Flat: the window [1.25, 1.0, 1.0, 1.0, 1.0] still spans 0.25/1.35 > 0.1, then plateau.
        for i in 5..9 {
            feed(&mut p, 1.0, i * 10 + 9);
        }
        assert_eq!(p.stage, 1, "turns {:?}", p.turns);
        assert_eq!(p.turns, vec![90]);
        assert_eq!(p.precision(), Precision { fw: 4, bw: 8 });
        // Needs five fresh checks before the next turn; threshold now 0.05.
        for i in 9..13 {
            feed(&mut p, 1.0, i * 10 + 9);
        }
        assert_eq!(p.stage, 1);
        feed(&mut p, 1.0, 139);
        assert_eq!(p.stage, 2);
        // Last stage: the indicator stops.
        for i in 14..30 {
            feed(&mut p, 1.0, i * 10 + 9);
        }
        assert_eq!((p.stage, p.turns.len()), (2, 2));
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
