//! Seeded weight initialisation (spec §9.1): normal and uniform draws from one ChaCha stream, so
//! the same seed gives the same bytes on every machine.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A deterministic source of initial weights, or of zeros for a model built for its shapes only.
pub(crate) struct Init {
    rng: Option<ChaCha8Rng>,
}

impl Init {
    /// A stream seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Init {
            rng: Some(ChaCha8Rng::seed_from_u64(seed)),
        }
    }

    /// No draws: every request is zeros (allocated zeroed, so pages nobody writes stay unmapped).
    pub(crate) fn zeros() -> Self {
        Init { rng: None }
    }

    /// `n` draws from `N(0, std²)` (Box–Muller, both outputs of each pair used).
    pub(crate) fn normal(&mut self, n: usize, std: f64) -> Vec<f32> {
        let Some(rng) = &mut self.rng else {
            return vec![0.0; n];
        };
        let mut out = Vec::with_capacity(n + 1);
        while out.len() < n {
            // 1 − U[0, 1) lies in (0, 1], so the logarithm is finite.
            let u1 = 1.0 - rng.random::<f64>();
            let u2 = rng.random::<f64>();
            let r = (-2.0 * u1.ln()).sqrt() * std;
            let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
            out.push((r * c) as f32);
            out.push((r * s) as f32);
        }
        out.truncate(n);
        out
    }

    /// `n` draws from `U(−bound, bound)`.
    pub(crate) fn uniform(&mut self, n: usize, bound: f64) -> Vec<f32> {
        let Some(rng) = &mut self.rng else {
            return vec![0.0; n];
        };
        (0..n)
            .map(|_| ((2.0 * rng.random::<f64>() - 1.0) * bound) as f32)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_has_requested_moments() {
        let v = Init::new(7).normal(200_001, 0.5);
        assert_eq!(v.len(), 200_001);
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 0.005, "mean {mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.005, "std {}", var.sqrt());
    }

    #[test]
    fn uniform_stays_in_bounds_and_fills_them() {
        let v = Init::new(3).uniform(100_000, 0.25);
        assert!(v.iter().all(|x| x.abs() <= 0.25));
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(max > 0.249);
    }

    #[test]
    fn same_seed_same_draws_other_seed_other_draws() {
        assert_eq!(Init::new(1).normal(10, 1.0), Init::new(1).normal(10, 1.0));
        assert_ne!(Init::new(1).normal(10, 1.0), Init::new(2).normal(10, 1.0));
    }
}
