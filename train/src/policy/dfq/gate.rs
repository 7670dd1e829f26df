//! The DFQ gate (spec §6.2): per attach point a feature head (global average pool → 1×1 conv
//! C→32 → ReLU → 1×1 conv →16), one LSTM cell (hidden 16) shared over depth and stepped once per
//! block, a linear layer to the K candidate options and a softmax. The hard decision is the
//! one-hot of the argmax; with the straight-through trick `m = onehot − p.detach() + p` the
//! gradient of the loss with respect to `m` reaches the probabilities `p` unchanged, which is what
//! [`Gate::backward`] takes.
//!
//! The gate's input is detached from the network: its gradient does not flow back into the block
//! outputs it reads (a simplification; the cost term is the gate's only gradient by default).

use ndarray::{Array2, Axis, Ix2, Ix4};
use rand_chacha::ChaCha8Rng;

use super::dense::Dense;
use super::lstm::{LstmCache, LstmCell};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Param, Tensor};

/// Width of the first 1×1 conv of a feature head (CIFAR setting).
pub const GATE_DIM: usize = 32;
/// Width of the embedding fed to the LSTM.
pub const EMBED_DIM: usize = 16;
/// LSTM hidden size.
pub const HIDDEN: usize = 16;

/// What the backward pass needs of one gate step.
#[derive(Clone, Debug)]
struct StepCache {
    attach: usize,
    pooled: Array2<f32>,
    hidden_pre: Array2<f32>,
    lstm: LstmCache,
    h: Array2<f32>,
    probs: Array2<f32>,
}

/// The gate with its recurrent state for the current forward pass.
#[derive(Clone, Debug)]
pub struct Gate {
    feats: Vec<(Dense, Dense)>,
    lstm: LstmCell,
    head: Dense,
    h: Array2<f32>,
    c: Array2<f32>,
    steps: Vec<StepCache>,
}

/// Global average pool of `[B, H, W, C]` (or a flat `[B, F]`) to `[B, C]`.
fn pool(x: &Tensor) -> Result<Array2<f32>> {
    if let Ok(x2) = x.view().into_dimensionality::<Ix2>() {
        return Ok(x2.to_owned());
    }
    let x4 = x.view().into_dimensionality::<Ix4>().map_err(|_| {
        SimError::shape(
            "dfq gate",
            format!("expects [N, H, W, C], got {:?}", x.shape()),
        )
    })?;
    let (n, h, w, c) = x4.dim();
    let flat = x4
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((n, h * w, c))
        .map_err(|e| SimError::shape("dfq gate", e.to_string()))?;
    flat.mean_axis(Axis(1))
        .ok_or_else(|| SimError::shape("dfq gate", "empty feature map"))
}

/// Row-wise softmax.
fn softmax(z: &Array2<f32>) -> Array2<f32> {
    let mut p = z.clone();
    for mut row in p.axis_iter_mut(Axis(0)) {
        let m = row.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        row.mapv_inplace(|v| (v - m).exp());
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    p
}

/// The hard decision per row: the index of the largest probability (the first on ties).
pub fn argmax_rows(p: &Array2<f32>) -> Vec<usize> {
    p.axis_iter(Axis(0))
        .map(|row| {
            row.iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                    if v > bv {
                        (i, v)
                    } else {
                        (bi, bv)
                    }
                })
                .0
        })
        .collect()
}

impl Gate {
    /// A gate with one feature head per attach point (`channels[i]` input channels) and
    /// `options` candidates.
    pub fn new(rng: &mut ChaCha8Rng, channels: &[usize], options: usize) -> Self {
        let feats = channels
            .iter()
            .map(|&c| {
                (
                    Dense::new(rng, c, GATE_DIM),
                    Dense::new(rng, GATE_DIM, EMBED_DIM),
                )
            })
            .collect();
        Self {
            feats,
            lstm: LstmCell::new(rng, EMBED_DIM, HIDDEN),
            head: Dense::new(rng, HIDDEN, options),
            h: Array2::zeros((0, HIDDEN)),
            c: Array2::zeros((0, HIDDEN)),
            steps: Vec::new(),
        }
    }

    /// Starts a forward pass: recurrent state zero, caches cleared.
    pub fn reset(&mut self) {
        self.h = Array2::zeros((0, HIDDEN));
        self.c = Array2::zeros((0, HIDDEN));
        self.steps.clear();
    }

    /// One step at attach point `attach` on the block output `x`: the option probabilities
    /// `[B, K]`. In training the step is kept for [`Gate::backward`].
    pub fn step(&mut self, attach: usize, x: &Tensor, train: bool) -> Result<Array2<f32>> {
        let pooled = pool(x)?;
        let n = pooled.nrows();
        let (f1, f2) = self.feats.get(attach).ok_or_else(|| {
            SimError::invalid(
                "dfq gate",
                format!("no feature head for attach point {attach}"),
            )
        })?;
        let hidden_pre = f1.forward(&pooled)?;
        let emb = f2.forward(&hidden_pre.mapv(|v| v.max(0.0)))?;
        if self.h.nrows() != n {
            self.h = Array2::zeros((n, HIDDEN));
            self.c = Array2::zeros((n, HIDDEN));
        }
        let (h, c, lstm) = self.lstm.forward(&emb, &self.h, &self.c)?;
        let probs = softmax(&self.head.forward(&h)?);
        if train {
            self.steps.push(StepCache {
                attach,
                pooled,
                hidden_pre,
                lstm,
                h: h.clone(),
                probs: probs.clone(),
            });
        }
        (self.h, self.c) = (h, c);
        Ok(probs)
    }

    /// Back-propagates `dL/dm = dL/dp` of every step of the last training forward pass (same
    /// order as the steps) through the softmax, head, LSTM (over depth) and feature heads;
    /// overwrites the parameter gradients.
    pub fn backward(&mut self, dprobs: &[Array2<f32>]) -> Result<()> {
        if dprobs.len() != self.steps.len() {
            return Err(SimError::invalid(
                "dfq gate",
                format!(
                    "{} gradients for {} gate steps",
                    dprobs.len(),
                    self.steps.len()
                ),
            ));
        }
        for p in self.params_mut() {
            p.grad.fill(0.0);
        }
        let steps = std::mem::take(&mut self.steps);
        let n = steps.first().map_or(0, |s| s.probs.nrows());
        let (mut dh_next, mut dc_next) = (Array2::zeros((n, HIDDEN)), Array2::zeros((n, HIDDEN)));
        for (st, dp) in steps.iter().zip(dprobs).rev() {
            let dz = logit_grad(&st.probs, dp);
            let dh = self.head.backward(&st.h, &dz)? + &dh_next;
            let (demb, dh_prev, dc_prev) = self.lstm.backward(&st.lstm, &dh, &dc_next)?;
            (dh_next, dc_next) = (dh_prev, dc_prev);
            let relu = st.hidden_pre.mapv(|v| v.max(0.0));
            let (f1, f2) = self.feats.get_mut(st.attach).ok_or_else(|| {
                SimError::invalid("dfq gate", format!("no feature head {}", st.attach))
            })?;
            let mut dhid = f2.backward(&relu, &demb)?;
            dhid.zip_mut_with(&st.hidden_pre, |d, &v| {
                if v <= 0.0 {
                    *d = 0.0
                }
            });
            f1.backward(&st.pooled, &dhid)?;
        }
        Ok(())
    }

    /// The Euclidean norm over all steps of the logit gradient `dL/dz` that `dprobs` would give
    /// (before [`Gate::backward`] consumes the steps); compares parts of the gate's signal.
    pub fn logit_grad_norm(&self, dprobs: &[Array2<f32>]) -> f64 {
        self.steps
            .iter()
            .zip(dprobs)
            .map(|(st, dp)| {
                logit_grad(&st.probs, dp)
                    .iter()
                    .map(|&v| f64::from(v) * f64::from(v))
                    .sum::<f64>()
            })
            .sum::<f64>()
            .sqrt()
    }

    /// All parameters: feature heads in attach order, LSTM, head.
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        let mut v: Vec<&mut Param> = self
            .feats
            .iter_mut()
            .flat_map(|(a, b)| a.params_mut().into_iter().chain(b.params_mut()))
            .collect();
        v.extend(self.lstm.params_mut());
        v.extend(self.head.params_mut());
        v
    }
}

/// Softmax backward: `dL/dz = p ⊙ (dp − ⟨p, dp⟩)` per row.
fn logit_grad(p: &Array2<f32>, dp: &Array2<f32>) -> Array2<f32> {
    let inner = (p * dp).sum_axis(Axis(1)).insert_axis(Axis(1));
    p * &(dp - &inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn inputs() -> Vec<Tensor> {
        (0..3)
            .map(|i| {
                let c = [6, 6, 8][i];
                cptsim_testdata::rand_tensor(&[4, 3, 3, c], 1.0, 20 + i as u64)
            })
            .collect()
    }

    /// `Σ_t Σ r_t·p_t`: with the straight-through trick the gate sees exactly this gradient.
    fn surrogate(g: &mut Gate, xs: &[Tensor], rs: &[Array2<f32>]) -> f64 {
        g.reset();
        xs.iter()
            .enumerate()
            .map(|(i, x)| (&g.step(i, x, false).unwrap() * &rs[i]).sum() as f64)
            .sum()
    }

    #[test]
    fn straight_through_gradient_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut g = Gate::new(&mut rng, &[6, 6, 8], 5);
        let xs = inputs();
        let rs: Vec<Array2<f32>> = (0..3)
            .map(|i| {
                cptsim_testdata::rand_tensor(&[4, 5], 1.0, 40 + i)
                    .into_dimensionality()
                    .unwrap()
            })
            .collect();
        g.reset();
        for (i, x) in xs.iter().enumerate() {
            let p = g.step(i, x, true).unwrap();
            let m = argmax_rows(&p);
            assert_eq!(m.len(), 4);
            assert!(m.iter().all(|&k| k < 5));
        }
        g.backward(&rs).unwrap();
        let checked = crate::policy::dfq::tests::check_param_grads(
            &mut g,
            Gate::params_mut,
            |g| surrogate(g, &xs, &rs),
            7,
            3e-2,
        );
        assert!(checked > 100, "{checked}");
    }

    #[test]
    fn softmax_rows_sum_to_one_and_argmax_takes_the_first_tie() {
        let z = ndarray::array![[1.0f32, 3.0, 3.0], [0.0, -1.0, -2.0]];
        let p = softmax(&z);
        for r in p.axis_iter(Axis(0)) {
            assert!((r.sum() - 1.0).abs() < 1e-6);
        }
        assert_eq!(argmax_rows(&p), vec![1, 0]);
    }
}
