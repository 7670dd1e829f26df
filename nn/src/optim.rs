//! SGD with momentum and weight decay (PyTorch semantics) and learning-rate schedules
//! (multi-step, cosine, optional linear warm-up). The CIFAR paper recipe is [`LrPolicy::paper_cifar`]
//! with [`Sgd::paper`] (spec §3.4, §9.4).

use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};
use crate::layers::{Param, Tensor};

/// How the learning rate evolves after warm-up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum LrSchedule {
    /// The base rate throughout.
    Constant,
    /// Multiplied by `gamma` at each milestone iteration (`lr = base·gamma^#{m ≤ t}`).
    MultiStep {
        /// Iterations at which the rate drops.
        milestones: Vec<u64>,
        /// Factor per drop.
        gamma: f32,
    },
    /// Cosine annealing from the base rate to `min_lr` over `total` iterations.
    Cosine {
        /// Iterations of the whole run.
        total: u64,
        /// Final rate.
        min_lr: f32,
    },
}

/// Base learning rate, schedule and warm-up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LrPolicy {
    /// Base learning rate.
    pub base_lr: f32,
    /// Schedule after (and underneath) the warm-up.
    pub schedule: LrSchedule,
    /// Warm-up iterations: the rate ramps linearly `base·(t+1)/warmup` for `t < warmup`.
    pub warmup: u64,
}

impl LrPolicy {
    /// The CIFAR recipe: 0.1, ×0.1 at iterations 32 000 and 48 000, no warm-up (spec §9.4).
    pub fn paper_cifar() -> Self {
        Self {
            base_lr: 0.1,
            schedule: LrSchedule::MultiStep {
                milestones: vec![32_000, 48_000],
                gamma: 0.1,
            },
            warmup: 0,
        }
    }

    /// The learning rate of iteration `t` (0-based).
    pub fn lr_at(&self, t: u64) -> f32 {
        let base = self.base_lr;
        let lr = match &self.schedule {
            LrSchedule::Constant => base,
            LrSchedule::MultiStep { milestones, gamma } => {
                let drops = milestones.iter().filter(|&&m| m <= t).count() as i32;
                base * gamma.powi(drops)
            }
            LrSchedule::Cosine { total, min_lr } => {
                let frac = (t.min(*total) as f64) / (*total).max(1) as f64;
                let c = 0.5 * (1.0 + (std::f64::consts::PI * frac).cos());
                (*min_lr as f64 + (base - min_lr) as f64 * c) as f32
            }
        };
        if t < self.warmup {
            lr * (t + 1) as f32 / self.warmup as f32
        } else {
            lr
        }
    }
}

/// Stochastic gradient descent with momentum and L2 weight decay:
/// `d = g + wd·w; v ← μ·v + d; w ← w − lr·v` (velocity starts at 0, as in PyTorch).
#[derive(Clone, Debug, PartialEq)]
pub struct Sgd {
    /// Momentum μ.
    pub momentum: f32,
    /// Weight decay.
    pub weight_decay: f32,
    /// Decay every parameter (PyTorch reference behaviour, default) or only those with
    /// [`Param::decay`] set (weights, not biases or norm parameters).
    pub decay_all: bool,
    /// One velocity per parameter, in the order the parameters are passed to [`Sgd::step`].
    pub velocity: Vec<Tensor>,
}

impl Sgd {
    /// An optimiser with the given momentum and weight decay.
    pub fn new(momentum: f32, weight_decay: f32) -> Self {
        Self {
            momentum,
            weight_decay,
            decay_all: true,
            velocity: Vec::new(),
        }
    }

    /// Momentum 0.9, weight decay 1e-4 (spec §9.4).
    pub fn paper() -> Self {
        Self::new(0.9, 1e-4)
    }

    /// Updates `params` (always passed in the same order) with learning rate `lr`.
    pub fn step(&mut self, params: &mut [&mut Param], lr: f32) -> Result<()> {
        if self.velocity.is_empty() {
            self.velocity = params
                .iter()
                .map(|p| Tensor::zeros(p.value.raw_dim()))
                .collect();
        }
        if self.velocity.len() != params.len() {
            return Err(SimError::invalid(
                "optimizer state",
                format!(
                    "{} velocities for {} parameters",
                    self.velocity.len(),
                    params.len()
                ),
            ));
        }
        for (p, v) in params.iter_mut().zip(self.velocity.iter_mut()) {
            if v.shape() != p.value.shape() || p.grad.shape() != p.value.shape() {
                return Err(SimError::invalid(
                    "optimizer state",
                    format!(
                        "parameter `{}` shape {:?} vs velocity {:?} / gradient {:?}",
                        p.name,
                        p.value.shape(),
                        v.shape(),
                        p.grad.shape()
                    ),
                ));
            }
            let wd = if self.decay_all || p.decay {
                self.weight_decay
            } else {
                0.0
            };
            let mu = self.momentum;
            ndarray::Zip::from(&mut p.value)
                .and(v)
                .and(&p.grad)
                .for_each(|w, v, &g| {
                    *v = mu * *v + g + wd * *w;
                    *w -= lr * *v;
                });
        }
        Ok(())
    }
}

/// Scales every gradient by `max_norm / norm` when their global L2 norm (over all of `params`,
/// summed in order in f64) exceeds `max_norm`, as PyTorch's `clip_grad_norm_` (its `1e-6` guard
/// included); returns the norm before clipping.
pub fn clip_grad_norm(params: &mut [&mut Param], max_norm: f32) -> f64 {
    let norm = params
        .iter()
        .flat_map(|p| p.grad.iter())
        .map(|&g| f64::from(g) * f64::from(g))
        .sum::<f64>()
        .sqrt();
    if norm > f64::from(max_norm) {
        let scale = (f64::from(max_norm) / (norm + 1e-6)) as f32;
        for p in params.iter_mut() {
            p.grad.mapv_inplace(|g| g * scale);
        }
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        let p = LrPolicy::paper_cifar();
        assert_eq!(p.lr_at(0), 0.1);
        assert!((p.lr_at(32_000) - 0.01).abs() < 1e-8);
        assert!((p.lr_at(63_999) - 0.001).abs() < 1e-9);
        let c = LrPolicy {
            base_lr: 1.0,
            schedule: LrSchedule::Cosine {
                total: 100,
                min_lr: 0.0,
            },
            warmup: 10,
        };
        assert!(
            (c.lr_at(0) - 0.1).abs() < 1e-6,
            "warm-up starts at base/warmup"
        );
        assert!((c.lr_at(50) - 0.5).abs() < 1e-6);
        assert!(c.lr_at(100).abs() < 1e-6 && c.lr_at(500).abs() < 1e-6);
    }

    #[test]
    fn sgd_matches_hand_computation() {
        let mut w = Param::new("weight", Tensor::from_elem(vec![1], 1.0), true);
        let mut b = Param::new("bias", Tensor::from_elem(vec![1], 1.0), false);
        w.grad.fill(0.5);
        b.grad.fill(0.5);
        let mut opt = Sgd::new(0.9, 0.1);
        opt.decay_all = false;
        opt.step(&mut [&mut w, &mut b], 0.1).unwrap();
        // w: v = 0.5 + 0.1·1 = 0.6 → 0.94; b: v = 0.5 → 0.95
        assert!((w.value[[0]] - 0.94).abs() < 1e-6 && (b.value[[0]] - 0.95).abs() < 1e-6);
        opt.step(&mut [&mut w, &mut b], 0.1).unwrap();
        // w: v = 0.9·0.6 + 0.5 + 0.094 = 1.134 → 0.94 − 0.1134
        assert!((w.value[[0]] - (0.94 - 0.1134)).abs() < 1e-6);
        let mut extra = Param::new("x", Tensor::zeros(vec![2]), true);
        assert!(opt.step(&mut [&mut w, &mut b, &mut extra], 0.1).is_err());
    }

    #[test]
    fn clipping_scales_the_global_norm_to_the_bound_and_leaves_small_gradients() {
        let mut a = Param::new("a", Tensor::zeros(vec![2]), true);
        let mut b = Param::new("b", Tensor::zeros(vec![1]), true);
        a.grad = Tensor::from_shape_vec(vec![2], vec![3.0, 0.0]).unwrap();
        b.grad = Tensor::from_shape_vec(vec![1], vec![4.0]).unwrap();
        let norm = clip_grad_norm(&mut [&mut a, &mut b], 1.0);
        assert!((norm - 5.0).abs() < 1e-12);
        let after: f32 = a.grad.iter().chain(b.grad.iter()).map(|g| g * g).sum();
        assert!((after.sqrt() - 1.0).abs() < 1e-5, "{after}");
        assert!(
            (a.grad[0] / b.grad[0] - 0.75).abs() < 1e-6,
            "direction kept"
        );
        let before = a.grad.clone();
        assert!(clip_grad_norm(&mut [&mut a], 10.0) < 10.0);
        assert_eq!(a.grad, before, "below the bound nothing changes");
    }
}
