//! DFQ candidates, costs and the target rule (spec §6.1, §6.4, §6.5, §7).

use serde::{Deserialize, Serialize};

use cptsim_nn::error::{Result, SimError};

/// One candidate precision pair of a gated block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// Activation bits `a_k`.
    pub act: u32,
    /// Error bits `g_k`.
    pub err: u32,
}

/// The published candidate lists (spec §6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CandidateSet {
    /// CIFAR: (3,6), (4,6), (4,8), (6,8), (6,12).
    Cifar,
    /// ImageNet: (3,6), (4,8), (6,12), (8,16).
    Imagenet,
}

impl CandidateSet {
    /// The candidates in option order.
    pub fn candidates(self) -> Vec<Candidate> {
        let (a, g): (&[u32], &[u32]) = match self {
            Self::Cifar => (&[3, 4, 4, 6, 6], &[6, 6, 8, 8, 12]),
            Self::Imagenet => (&[3, 4, 6, 8], &[6, 8, 12, 16]),
        };
        a.iter()
            .zip(g)
            .map(|(&act, &err)| Candidate { act, err })
            .collect()
    }
}

impl Candidate {
    /// `c_fw + c_eb + c_gc = (a·w + g·w + a·g) / 1024` at weight bits `w` (spec §6.4).
    pub fn cost(self, w: u32) -> f64 {
        let (a, g, w) = (f64::from(self.act), f64::from(self.err), f64::from(w));
        (a * w + g * w + a * g) / 1024.0
    }
}

/// `cp` in percent of an fp32 iteration: `100·cost / (samples·3·Σ info)`, where `cost` is
/// `Σ_blocks Σ_samples c_k·info_block`.
pub fn cp_percent(cost: f64, samples: usize, info_sum: f64) -> f64 {
    100.0 * cost / (samples.max(1) as f64 * 3.0 * info_sum.max(f64::MIN_POSITIVE))
}

/// The sign of the cost term (spec §6.5): −1 below the target (push the cost up), +1 at or
/// above it; with a dead band `relax > 0`, ∓0.1 within `target ± relax`.
pub fn reg_sign(cp: f64, target: f64, relax: f64) -> f64 {
    if relax > 0.0 && (cp - target).abs() <= relax {
        if cp < target {
            -0.1
        } else {
            0.1
        }
    } else if cp < target {
        -1.0
    } else {
        1.0
    }
}

/// FracTrain's target after `k` turning points: `cp_0 + k·Δcp` (spec §7).
pub fn fractrain_target(cp0: f64, step: f64, k: usize) -> f64 {
    cp0 + k as f64 * step
}

/// Checks a target cp (percent of an fp32 iteration).
pub fn check_target(flag: &str, cp: f64) -> Result<()> {
    if !(cp > 0.0 && cp <= 100.0) {
        return Err(SimError::invalid(
            flag,
            format!("{cp} (a cost target in percent of an fp32 iteration, in (0, 100])"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_references_of_spec_6_4() {
        let c = |a, g, w| Candidate { act: a, err: g }.cost(w);
        // one block, one sample, info 1
        assert!((cp_percent(c(8, 8, 8), 1, 1.0) - 6.25).abs() < 1e-12);
        assert!((cp_percent(c(3, 6, 4), 1, 1.0) - 1.7578125).abs() < 1e-12);
        assert!((cp_percent(c(6, 12, 4), 1, 1.0) - 4.6875).abs() < 1e-12);
        // 9 blocks × 8 samples all at (3,6) is the same ratio
        assert!((cp_percent(72.0 * c(3, 6, 4), 8, 9.0) - 1.7578125).abs() < 1e-12);
    }

    #[test]
    fn candidate_lists() {
        let cifar = CandidateSet::Cifar.candidates();
        assert_eq!(cifar.len(), 5);
        assert_eq!(cifar[4], Candidate { act: 6, err: 12 });
        assert_eq!(
            CandidateSet::Imagenet.candidates()[3],
            Candidate { act: 8, err: 16 }
        );
    }

    #[test]
    fn sign_rule() {
        assert_eq!(reg_sign(2.9, 3.0, 0.0), -1.0);
        assert_eq!(reg_sign(3.0, 3.0, 0.0), 1.0);
        assert_eq!(reg_sign(3.5, 3.0, 0.0), 1.0);
        assert_eq!(reg_sign(2.95, 3.0, 0.1), -0.1);
        assert_eq!(reg_sign(3.05, 3.0, 0.1), 0.1);
        assert_eq!(reg_sign(2.5, 3.0, 0.1), -1.0);
        assert_eq!(reg_sign(3.5, 3.0, 0.1), 1.0);
        assert_eq!(fractrain_target(1.5, 0.5, 3), 3.0);
        assert!(check_target("--target-cp", 0.0).is_err());
        assert!(check_target("--target-cp", 3.0).is_ok());
    }
}
