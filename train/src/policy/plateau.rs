//! The loss-plateau indicator (FracTrain, spec §5): at each check point the mean minibatch loss
//! since the previous check enters a window of five; when every older entry lies within the
//! threshold of the newest (relative to the loss scale of the first ten checks), the stage rises.
//! PFQ turns stages into precisions; FracTrain turns them into cp targets.

use serde::{Deserialize, Serialize};

use cptsim_nn::error::{Result, SimError};

/// Losses compared by the plateau test.
const WINDOW: usize = 5;
/// Checks over which the loss scale is averaged.
const SCALE_CHECKS: usize = 10;

/// The indicator's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlateauConfig {
    /// Initial threshold ε.
    pub epsilon: f64,
    /// Threshold decay α, applied after the first and second turning points.
    pub alpha: f64,
    /// Number of stages (the indicator stops at the last, `stages − 1`).
    pub stages: usize,
}

impl PlateauConfig {
    /// Checks that ε and α are positive and there is at least one stage.
    pub fn validate(&self) -> Result<()> {
        if !(self.epsilon > 0.0 && self.alpha > 0.0) {
            return Err(SimError::invalid(
                "PFQ indicator",
                format!(
                    "ε = {} and α = {} must be positive",
                    self.epsilon, self.alpha
                ),
            ));
        }
        if self.stages == 0 {
            return Err(SimError::invalid("PFQ indicator", "needs at least 1 stage"));
        }
        Ok(())
    }
}

/// The indicator's running state (what a checkpoint keeps; the constants come from the run's
/// configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plateau {
    /// Current stage `k`.
    pub stage: usize,
    threshold: f64,
    window: Vec<f64>,
    scale_losses: Vec<f64>,
    sum: f64,
    count: u64,
    /// Iterations at which the stage rose (each the first iteration of its stage).
    pub turns: Vec<u64>,
}

impl Plateau {
    /// The indicator at stage 0 with threshold ε.
    pub fn new(config: &PlateauConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            stage: 0,
            threshold: config.epsilon,
            window: Vec::new(),
            scale_losses: Vec::new(),
            sum: 0.0,
            count: 0,
            turns: Vec::new(),
        })
    }

    /// Adds one minibatch loss.
    pub fn observe(&mut self, loss: f32) {
        self.sum += f64::from(loss);
        self.count += 1;
    }

    /// A check point after iteration `t`: the mean loss since the last check enters the plateau
    /// test; a turning point raises the stage from the next iteration on.
    pub fn check(&mut self, t: u64, config: &PlateauConfig) {
        if self.count == 0 {
            return;
        }
        let mean = self.sum / self.count as f64;
        (self.sum, self.count) = (0.0, 0);
        if self.scale_losses.len() < SCALE_CHECKS {
            self.scale_losses.push(mean);
        }
        let scale = self.scale_losses.iter().sum::<f64>() / self.scale_losses.len() as f64;
        if self.stage + 1 >= config.stages {
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
                self.threshold *= config.alpha;
            }
            self.window.clear();
            self.turns.push(t + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(p: &mut Plateau, cfg: &PlateauConfig, loss: f32, t: u64) {
        for _ in 0..10 {
            p.observe(loss);
        }
        p.check(t, cfg);
    }

    #[test]
    fn plateau_raises_stage_after_five_checks_and_decays_threshold() {
        let cfg = PlateauConfig {
            epsilon: 0.1,
            alpha: 0.5,
            stages: 3,
        };
        let mut p = Plateau::new(&cfg).unwrap();
        // Falling fast: no plateau (|2.0 − 1.0| / 1.5 > 0.1).
        for (i, l) in [2.0, 1.75, 1.5, 1.25, 1.0].into_iter().enumerate() {
            feed(&mut p, &cfg, l, i as u64 * 10 + 9);
        }
        assert_eq!(p.stage, 0);
        // Flat: the window [1.25, 1.0, 1.0, 1.0, 1.0] still spans 0.25/1.35 > 0.1, then plateau.
        for i in 5..9 {
            feed(&mut p, &cfg, 1.0, i * 10 + 9);
        }
        assert_eq!(p.stage, 1, "turns {:?}", p.turns);
        assert_eq!(p.turns, vec![90]);
        // Needs five fresh checks before the next turn; threshold now 0.05.
        for i in 9..13 {
            feed(&mut p, &cfg, 1.0, i * 10 + 9);
        }
        assert_eq!(p.stage, 1);
        feed(&mut p, &cfg, 1.0, 139);
        assert_eq!(p.stage, 2);
        // Last stage: the indicator stops.
        for i in 14..30 {
            feed(&mut p, &cfg, 1.0, i * 10 + 9);
        }
        assert_eq!((p.stage, p.turns.len()), (2, 2));
    }

    #[test]
    fn bad_constants_are_rejected() {
        let cfg = PlateauConfig {
            epsilon: 0.0,
            alpha: 0.5,
            stages: 3,
        };
        assert!(Plateau::new(&cfg).is_err());
        assert!(Plateau::new(&PlateauConfig { stages: 0, ..cfg }).is_err());
    }
}
