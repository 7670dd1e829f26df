//! DFQ's and FracTrain's settings and their checks.

use serde::{Deserialize, Serialize};

use super::cost::{self, Candidate, CandidateSet};
use crate::policy::plateau::PlateauConfig;
use cptsim_nn::error::{Result, SimError};

/// β of the cost term (spec §6.5).
pub const BETA: f64 = 1e-3;

/// FracTrain: the PFQ indicator steps the target `cp_0 + k·Δcp`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FracTrainConfig {
    /// Target increase per turning point Δcp (percent).
    pub cp_step: f64,
    /// Turning points K.
    pub turns: usize,
    /// Indicator threshold ε.
    pub epsilon: f64,
    /// Threshold decay α.
    pub alpha: f64,
}

impl FracTrainConfig {
    /// The plateau indicator's constants: stage `k` (0..=K) is the target `cp_0 + k·Δcp`.
    pub fn plateau(&self) -> PlateauConfig {
        PlateauConfig {
            epsilon: self.epsilon,
            alpha: self.alpha,
            stages: self.turns + 1,
        }
    }
}

/// How a gated block runs in training (spec §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DfqExec {
    /// Only each sample's selected candidate; the gate learns from the cost term alone.
    Selected,
    /// Every candidate over the whole batch, mixed by the masks; the gate also gets the task
    /// gradient `⟨dL/dx, y_k⟩` (needs one network replica per candidate).
    All,
}

/// DFQ settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DfqConfig {
    /// Candidate (activation, error) bit pairs.
    pub candidates: Vec<Candidate>,
    /// Fixed weight bits of the gated layers.
    pub weight_bits: u32,
    /// Target cp in percent (FracTrain: the initial target `cp_0`).
    pub target_cp: f64,
    /// Cost-term weight β.
    pub beta: f64,
    /// Dead band of the sign rule (0 = none).
    pub relax: f64,
    /// FracTrain's target stepping, if on.
    pub fractrain: Option<FracTrainConfig>,
}

impl DfqConfig {
    /// DFQ with the candidate list `set`, weights at `weight_bits`, target `target_cp` %.
    pub fn new(set: CandidateSet, weight_bits: u32, target_cp: f64) -> Self {
        Self {
            candidates: set.candidates(),
            weight_bits,
            target_cp,
            beta: BETA,
            relax: 0.0,
            fractrain: None,
        }
    }

    /// The cp (percent) of the cheapest and of the dearest candidate, every sample on it.
    pub fn cp_range(&self) -> (f64, f64) {
        let cps = self
            .candidates
            .iter()
            .map(|c| cost::cp_percent(c.cost(self.weight_bits), 1, 1.0));
        cps.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), cp| {
            (lo.min(cp), hi.max(cp))
        })
    }

    /// The targets of the run (FracTrain: every step) outside [`DfqConfig::cp_range`]: there the
    /// sign rule never flips, and the gate piles every sample onto one end.
    pub fn unreachable_targets(&self) -> Vec<f64> {
        let (lo, hi) = self.cp_range();
        let steps = self.fractrain.as_ref().map_or(0, |f| f.turns);
        (0..=steps)
            .map(|k| match &self.fractrain {
                Some(f) => cost::fractrain_target(self.target_cp, f.cp_step, k),
                None => self.target_cp,
            })
            .filter(|&t| t <= lo || t > hi)
            .collect()
    }

    /// Checks the bits and target.
    pub fn validate(&self) -> Result<()> {
        if !(2..=32).contains(&self.weight_bits) {
            return Err(SimError::invalid(
                "--weight-bits",
                format!("{} (DFQ weight bits must be in 2..=32)", self.weight_bits),
            ));
        }
        cost::check_target("--target-cp", self.target_cp)?;
        if self.candidates.is_empty()
            || self
                .candidates
                .iter()
                .any(|c| !(1..=32).contains(&c.act) || !(1..=32).contains(&c.err))
        {
            return Err(SimError::invalid(
                "--candidates",
                "every candidate needs activation and error bits in 1..=32",
            ));
        }
        if let Some(f) = &self.fractrain {
            if f.cp_step.is_nan() || f.cp_step < 0.0 || f.turns == 0 {
                return Err(SimError::invalid(
                    "--cp-step",
                    format!(
                        "{} with {} turning points (need Δcp ≥ 0, K ≥ 1)",
                        f.cp_step, f.turns
                    ),
                ));
            }
        }
        Ok(())
    }
}
