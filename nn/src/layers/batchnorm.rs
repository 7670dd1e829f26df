//! Batch normalisation over the last (channel) axis of `[N, H, W, C]` or `[N, F]` tensors:
//! batch statistics in training (biased variance for normalising, unbiased for the running
//! variance, PyTorch semantics), running statistics in evaluation.

use rayon::prelude::*;

use super::epilogue::EpilogueStep;
use super::from_ir::{unsupported, Ctx, Init, Layout, Val};
use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use cptsim_kernels::elementwise::{clamp_passes, normalize};
use cptsim_kernels::gemm::block_samples;
use cptsim_kernels::reduce::{chunk_sums, chunk_sums_by, sums_and_squares, ROWS_PER_CHUNK};
use cptsim_models::ir::{self, Node};
use rand::Rng;

/// Rows per parallel task in the element-wise passes (fixed, so results are thread independent).
const ROWS: usize = 1024;

struct BnCache {
    xhat: Tensor,
    inv_std: Vec<f32>,
    /// The clamp fused after the layer in training ([`BatchNorm::forward_clamped`]).
    clamp: Option<Clamp>,
}

/// A clamp `y = clamp(γ·x̂ + β, 0, hi)` applied by the batch norm itself: γ and β as the forward
/// pass used them, to find where the gradient passes in backward.
struct Clamp {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    hi: f32,
}

/// `g` where the clamp passed the gradient ([`clamp_passes`] on `γ·x̂ + β`, the value the
/// forward pass computed), else `+0`: the activation layer's own mask.
#[inline(always)]
fn passed(g: f32, h: f32, gamma: f32, beta: f32, hi: f32) -> f32 {
    if clamp_passes(gamma * h + beta, hi) {
        g
    } else {
        0.0
    }
}

/// A batch-norm layer with scale `gamma`, shift `beta` and running statistics.
pub struct BatchNorm {
    name: String,
    /// Scale `[C]` (starts at 1).
    pub gamma: Param,
    /// Shift `[C]` (starts at 0).
    pub beta: Param,
    /// Running mean `[C]`.
    pub running_mean: Vec<f32>,
    /// Running (unbiased) variance `[C]`.
    pub running_var: Vec<f32>,
    /// Weight of the new batch statistic in the running update (PyTorch: 0.1).
    pub momentum: f32,
    /// Added to the variance (PyTorch: 1e-5).
    pub eps: f32,
    cache: Option<BnCache>,
}

impl BatchNorm {
    /// A batch-norm layer over `channels` with γ = 1, β = 0, running mean 0 and variance 1.
    pub fn new(name: &str, channels: usize) -> Self {
        Self {
            name: name.to_string(),
            gamma: Param::new("gamma", Tensor::ones(vec![channels]), false),
            beta: Param::new("beta", Tensor::zeros(vec![channels]), false),
            running_mean: vec![0.0; channels],
            running_var: vec![1.0; channels],
            momentum: 0.1,
            eps: 1e-5,
            cache: None,
        }
    }

    fn channels(&self) -> usize {
        self.running_mean.len()
    }

    /// A training forward pass given `[Σx | Σx²]` of its input `x` (from
    /// [`super::Conv2d::forward_summed`]), optionally followed by `clamp(·, 0, hi)` as
    /// [`BatchNorm::forward_clamped`]. Same values as without the sums.
    pub(crate) fn forward_with_sums(
        &mut self,
        x: Tensor,
        sums: Vec<f64>,
        hi: Option<f32>,
    ) -> Result<Tensor> {
        self.normalize_owned(x, Mode::Train, hi, Some(sums))
    }

    /// A training forward pass followed by `clamp(·, 0, hi)` (the ReLU after it,
    /// `net::fuse::bn_relu`); backward then also masks the gradient where the clamp blocks it.
    pub(crate) fn forward_clamped(&mut self, x: Tensor, hi: f32) -> Result<Tensor> {
        self.normalize_owned(x, Mode::Train, Some(hi), None)
    }

    /// The layer's evaluation forward pass as an epilogue step of the layer before it
    /// (`net::fuse::eval_epilogue`). The layer will then not run, so it drops what an
    /// evaluation forward drops (its training cache).
    pub(crate) fn eval_step(&mut self) -> Result<EpilogueStep> {
        self.cache = None;
        let (mean, inv_std) = self.eval_statistics();
        let gamma = slice(&self.name, &self.gamma)?.to_vec();
        let beta = slice(&self.name, &self.beta)?.to_vec();
        Ok(EpilogueStep::Normalize {
            layer: self.name.clone(),
            per_channel: [mean, inv_std, gamma, beta],
        })
    }

    fn check_input<'a>(&self, x: &'a Tensor) -> Result<&'a [f32]> {
        let c = self.channels();
        if x.shape().last() != Some(&c) || x.ndim() < 2 {
            return Err(SimError::shape(
                &self.name,
                format!("expects [N, …, {c}] (channels last), got {:?}", x.shape()),
            ));
        }
        x.as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "input is not contiguous"))
    }

    /// The forward pass, in training optionally followed by `clamp(·, 0, hi)` in the same pass.
    /// In training `sums` are the input's `[Σx | Σx²]` when the layer producing it summed them
    /// (see [`train_sum_rows`]).
    fn normalize_owned(
        &mut self,
        mut x: Tensor,
        mode: Mode,
        hi: Option<f32>,
        sums: Option<Vec<f64>>,
    ) -> Result<Tensor> {
        let data = self.check_input(&x)?;
        let c = self.channels();
        let rows = data.len() / c;
        let (mean, inv_std): (Vec<f32>, Vec<f32>) = if mode == Mode::Train {
            if rows < 2 {
                return Err(SimError::shape(
                    &self.name,
                    "training needs more than one value per channel",
                ));
            }
            let s = match sums {
                Some(s) if s.len() == 2 * c => s,
                Some(s) => {
                    return Err(SimError::shape(
                        &self.name,
                        format!("given {} input sums for {c} channels", s.len()),
                    ))
                }
                None => {
                    let chunk = train_sum_rows(x.shape()).unwrap_or(ROWS_PER_CHUNK);
                    chunk_sums_by(data, c, 2, chunk, |_, rows, acc| {
                        sums_and_squares(rows, acc)
                    })
                }
            };
            let m = rows as f64;
            let mean: Vec<f64> = s[..c].iter().map(|v| v / m).collect();
            let var: Vec<f64> = s[c..]
                .iter()
                .zip(&mean)
                .map(|(q, mu)| (q / m - mu * mu).max(0.0))
                .collect();
            let mo = self.momentum;
            for i in 0..c {
                self.running_mean[i] = (1.0 - mo) * self.running_mean[i] + mo * mean[i] as f32;
                let unbiased = (var[i] * m / (m - 1.0)) as f32;
                self.running_var[i] = (1.0 - mo) * self.running_var[i] + mo * unbiased;
            }
            let inv = var
                .iter()
                .map(|v| 1.0 / (*v as f32 + self.eps).sqrt())
                .collect();
            (mean.iter().map(|&v| v as f32).collect(), inv)
        } else {
            self.eval_statistics()
        };
        let gamma = slice(&self.name, &self.gamma)?;
        let beta = slice(&self.name, &self.beta)?;
        let per_channel = [&mean[..], &inv_std[..], gamma, beta];
        let len = data.len();
        let y = x
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "input is not contiguous"))?;
        if mode == Mode::Train {
            // x̂ is kept for backward: reuse the previous step's buffer (every element is
            // overwritten) instead of allocating and zeroing a new one.
            let mut xhat = match self.cache.take() {
                Some(old) if old.xhat.len() == len => old.xhat.into_raw_vec_and_offset().0,
                _ => vec![0.0f32; len],
            };
            let blocks = xhat
                .par_chunks_mut(ROWS * c)
                .zip(y.par_chunks_mut(ROWS * c));
            match hi {
                None => blocks.for_each(|(h, xy)| normalize(xy, Some(h), per_channel)),
                Some(hi) => {
                    blocks.for_each(|(h, xy)| normalize_clamped(xy, h, per_channel, hi));
                }
            }
            let xhat = Tensor::from_shape_vec(x.shape(), xhat)
                .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
            let clamp = hi.map(|hi| Clamp {
                gamma: gamma.to_vec(),
                beta: beta.to_vec(),
                hi,
            });
            self.cache = Some(BnCache {
                xhat,
                inv_std,
                clamp,
            });
        } else {
            // Eval keeps no x̂ (same arithmetic, so the same y).
            y.par_chunks_mut(ROWS * c)
                .for_each(|xy| normalize(xy, None, per_channel));
            self.cache = None;
        }
        Ok(x)
    }

    /// The evaluation statistics `(mean, inv_std)`: the running mean and `1/√(var + ε)`.
    fn eval_statistics(&self) -> (Vec<f32>, Vec<f32>) {
        let inv = self
            .running_var
            .iter()
            .map(|v| 1.0 / (v + self.eps).sqrt())
            .collect();
        (self.running_mean.clone(), inv)
    }
}

/// Rows per partial sum of batch norm's training statistics on an input of `shape`: for
/// `[N, H, W, C]` the rows of one output block of a conv ([`block_samples`] samples of `H·W`
/// rows), so that a conv before it may sum its blocks while it writes them, with the same
/// result; `None` (fixed chunks) for other ranks.
pub(crate) fn train_sum_rows(shape: &[usize]) -> Option<usize> {
    match *shape {
        [_, h, w, _] => {
            let per_sample = h.checked_mul(w)?;
            block_samples(per_sample).checked_mul(per_sample)
        }
        _ => None,
    }
}

fn slice<'a>(layer: &str, p: &'a Param) -> Result<&'a [f32]> {
    p.value
        .as_slice()
        .ok_or_else(|| SimError::shape(layer, "parameter is not contiguous"))
}

cptsim_kernels::simd::multiversion! {
    /// `x̂ = (x − mean)·inv_std` and `y = clamp(γ·x̂ + β, 0, hi)` for the rows of `xy`, `y`
    /// written over `x`, with `per_channel = [mean, inv_std, γ, β]`: the training normalisation
    /// and the activation after it in one pass, with the arithmetic of each.
    fn normalize_clamped(xy: &mut [f32], xhat: &mut [f32], per_channel: [&[f32]; 4], hi: f32) {
        let [mean, inv_std, gamma, beta] = per_channel;
        let c = mean.len();
        let (inv_std, gamma, beta) = (&inv_std[..c], &gamma[..c], &beta[..c]);
        for (hr, r) in xhat.chunks_exact_mut(c).zip(xy.chunks_exact_mut(c)) {
            for i in 0..c {
                hr[i] = (r[i] - mean[i]) * inv_std[i];
                r[i] = cptsim_kernels::simd::clamp(gamma[i] * hr[i] + beta[i], 0.0, hi);
            }
        }
    }
}

cptsim_kernels::simd::multiversion! {
    /// Adds `Σ g` and `Σ g·x̂` per channel of the rows `g`, `xhat` (`[rows, c]`) into
    /// `acc = [Σg | Σg·x̂]`, row by row; `g` masked by a fused clamp, if any.
    fn sums_and_products(g: &[f32], xhat: &[f32], acc: &mut [f64], clamp: Option<&Clamp>) {
        let c = acc.len() / 2;
        let (a, b) = acc.split_at_mut(c);
        for (gr, hr) in g.chunks_exact(c).zip(xhat.chunks_exact(c)) {
            let sums = a.iter_mut().zip(b.iter_mut()).zip(gr.iter().zip(hr));
            match clamp {
                None => {
                    for ((s1, s2), (&gv, &hv)) in sums {
                        *s1 += gv as f64;
                        *s2 += gv as f64 * hv as f64;
                    }
                }
                Some(cl) => {
                    let per_channel = cl.gamma[..c].iter().zip(&cl.beta[..c]);
                    for (((s1, s2), (&gv, &hv)), (&ga, &be)) in sums.zip(per_channel) {
                        let gv = passed(gv, hv, ga, be, cl.hi);
                        *s1 += gv as f64;
                        *s2 += gv as f64 * hv as f64;
                    }
                }
            }
        }
    }
}

cptsim_kernels::simd::multiversion! {
    /// The input gradient `dx = k·(m·g − Σg − x̂·Σg·x̂)` for the rows of `g` and `xhat`, written
    /// over `g`, with `per_channel = [k, Σg, Σg·x̂]`; `g` masked by a fused clamp, if any.
    fn input_grad(
        g: &mut [f32],
        xhat: &[f32],
        m: f32,
        per_channel: [&[f32]; 3],
        clamp: Option<&Clamp>,
    ) {
        let [k, dbeta, dgamma] = per_channel;
        let c = k.len();
        let (dbeta, dgamma) = (&dbeta[..c], &dgamma[..c]);
        for (gr, hr) in g.chunks_exact_mut(c).zip(xhat.chunks_exact(c)) {
            match clamp {
                None => {
                    for i in 0..c {
                        gr[i] = k[i] * (m * gr[i] - dbeta[i] - hr[i] * dgamma[i]);
                    }
                }
                Some(cl) => {
                    let (ga, be) = (&cl.gamma[..c], &cl.beta[..c]);
                    for i in 0..c {
                        let gv = passed(gr[i], hr[i], ga[i], be[i], cl.hi);
                        gr[i] = k[i] * (m * gv - dbeta[i] - hr[i] * dgamma[i]);
                    }
                }
            }
        }
    }
}

impl Layer for BatchNorm {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        // The output is written over a copy of the input.
        self.forward_owned(x.clone(), mode)
    }

    fn forward_owned(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.normalize_owned(x, mode, None, None)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let cache = cached(&self.name, &self.cache)?;
        check_grad(&self.name, &grad_out, cache.xhat.shape())?;
        let c = self.channels();
        let err = || SimError::shape(&self.name, "tensor is not contiguous");
        // The input gradient is written over the output gradient.
        let mut dx = standard(grad_out);
        let g = dx.as_slice().ok_or_else(err)?;
        let xhat = cache.xhat.as_slice().ok_or_else(err)?;
        let rows = g.len() / c;
        // Σ dy and Σ dy·x̂ per channel, row r of g paired with row r of x̂.
        let clamp = cache.clamp.as_ref();
        let s = chunk_sums(g, c, 2, |r, rows, acc| {
            sums_and_products(rows, &xhat[r * c..r * c + rows.len()], acc, clamp)
        });
        let dbeta: Vec<f32> = s[..c].iter().map(|&v| v as f32).collect();
        let dgamma: Vec<f32> = s[c..].iter().map(|&v| v as f32).collect();
        let gamma = slice(&self.name, &self.gamma)?;
        let m = rows as f32;
        let k: Vec<f32> = (0..c).map(|i| gamma[i] * cache.inv_std[i] / m).collect();
        dx.as_slice_mut()
            .ok_or_else(err)?
            .par_chunks_mut(ROWS * c)
            .zip(xhat.par_chunks(ROWS * c))
            .for_each(|(gs, hs)| input_grad(gs, hs, m, [&k[..], &dbeta[..], &dgamma[..]], clamp));
        self.gamma.grad = Tensor::from_shape_vec(vec![c], dgamma)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        self.beta.grad = Tensor::from_shape_vec(vec![c], dbeta)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        Ok(vec![dx])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.gamma, &mut self.beta]
    }

    fn buffers_mut(&mut self) -> Vec<&mut Vec<f32>> {
        vec![&mut self.running_mean, &mut self.running_var]
    }
}

impl BatchNorm {
    /// The layer of an IR `BatchNormalization` node: the model's scale, bias and statistics, or
    /// γ = 1, β = 0, mean 0 and variance 1. ONNX weighs the old running value by `momentum`;
    /// the engine weighs the new batch value.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        b: &ir::BatchNorm,
        ins: &[Val],
    ) -> Result<Val> {
        // Channels last: an image, or features `[N, C]` / `[N, T, C]`-style tensors as held.
        let rank = node.inputs.first().map(|&i| ctx.shape(i).len());
        let x = match rank {
            Some(4) => ctx.one_as(node, ins, Layout::Image)?,
            _ => ins
                .first()
                .copied()
                .ok_or_else(|| unsupported(node, "no input"))?,
        };
        let name = node.name.as_str();
        let c = b.scale.len();
        let mut bn = BatchNorm::new(name, c);
        bn.momentum = 1.0 - b.momentum;
        bn.eps = b.epsilon;
        if ctx.init == Init::FromModel {
            let vec1 = |t: &ndarray::ArrayD<f32>, what: &str| -> Result<Vec<f32>> {
                if t.len() != c {
                    return Err(SimError::shape(
                        name,
                        format!("{what} has {} entries, expected {c}", t.len()),
                    ));
                }
                Ok(t.iter().copied().collect())
            };
            bn.gamma.value = Tensor::from_shape_vec(vec![c], vec1(&b.scale, "scale")?)
                .map_err(|e| SimError::shape(name, e.to_string()))?;
            bn.beta.value = Tensor::from_shape_vec(vec![c], vec1(&b.bias, "bias")?)
                .map_err(|e| SimError::shape(name, e.to_string()))?;
            bn.running_mean = vec1(&b.mean, "mean")?;
            bn.running_var = vec1(&b.var, "var")?;
        }
        ctx.push(bn, &[x.id], x.layout)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    fn bn(c: usize) -> BatchNorm {
        let mut b = BatchNorm::new("bn", c);
        b.gamma.value = rand_tensor(&[c], 1.0, 11).mapv(|v| v + 1.5);
        b.beta.value = rand_tensor(&[c], 1.0, 12);
        b
    }

    #[test]
    fn given_sums_of_the_wrong_width_are_an_error_naming_the_layer() {
        let mut bn = BatchNorm::new("bn_sums", 4);
        let x = Tensor::ones(vec![2, 2, 2, 4]);
        let e = bn.forward_with_sums(x, vec![0.0; 6], None).unwrap_err();
        assert!(e.to_string().contains("bn_sums"), "{e}");
    }

    #[test]
    fn normalizing_without_xhat_gives_the_same_output_bit_for_bit() {
        let c = 5;
        let x = rand_tensor(&[300, c], 3.0, 13);
        let xs = x.as_slice().unwrap();
        let stats = [
            rand_tensor(&[c], 1.0, 14),
            rand_tensor(&[c], 1.0, 15).mapv(|v| v.abs() + 0.5),
            rand_tensor(&[c], 1.0, 16),
            rand_tensor(&[c], 1.0, 17),
        ];
        let pc = stats.each_ref().map(|t| t.as_slice().unwrap());
        let (mut h, mut y, mut ye) = (vec![0.0; xs.len()], xs.to_vec(), xs.to_vec());
        normalize(&mut y, Some(&mut h), pc);
        normalize(&mut ye, None, pc);
        assert_eq!(y, ye);
    }

    #[test]
    fn a_fused_clamp_equals_the_activation_layer_bit_for_bit() {
        use super::super::{Activation, ActivationKind};
        for kind in [ActivationKind::Relu, ActivationKind::Relu6] {
            let x = rand_tensor(&[6, 4, 3, 5], 3.0, 21);
            let g = rand_tensor(&[6, 4, 3, 5], 1.0, 22);
            let (mut b1, mut act) = (bn(5), Activation::new("r", kind));
            let y1 = b1.forward(&[&x], Mode::Train).unwrap();
            let y1 = act.forward_owned(y1, Mode::Train).unwrap();
            let dx1 = act.backward(g.clone()).unwrap().remove(0);
            let dx1 = b1.backward(dx1).unwrap().remove(0);
            let mut b2 = bn(5);
            let hi = act.train_clamp();
            let y2 = b2.forward_clamped(x.clone(), hi).unwrap();
            let dx2 = b2.backward(g).unwrap().remove(0);
            assert!(
                y1.iter().any(|&v| v == 0.0),
                "{kind:?}: some values are clamped"
            );
            assert_eq!(y1, y2, "{kind:?}");
            assert_eq!(dx1, dx2, "{kind:?}");
            assert_eq!(b1.gamma.grad, b2.gamma.grad, "{kind:?}");
            assert_eq!(b1.beta.grad, b2.beta.grad, "{kind:?}");
        }
        // A wrong-width input is still an error naming the layer.
        let e = bn(4).forward_clamped(Tensor::zeros(vec![2, 5]), 6.0);
        assert!(e.unwrap_err().to_string().contains("bn"));
    }

    #[test]
    fn gradients_match_finite_differences() {
        check_layer(
            &mut bn(3),
            &[rand_tensor(&[4, 3, 2, 3], 2.0, 1)],
            1e-2,
            1e-2,
            30,
        )
        .unwrap();
        check_layer(&mut bn(5), &[rand_tensor(&[6, 5], 2.0, 2)], 1e-2, 1e-2, 30).unwrap();
    }

    #[test]
    fn train_normalises_and_eval_uses_running_stats() {
        let mut b = BatchNorm::new("bn", 1);
        let x = Tensor::from_shape_vec(vec![4, 1], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let y = b.forward(&[&x], Mode::Train).unwrap();
        // mean 2.5, biased var 1.25
        let want = (1.0f32 - 2.5) / (1.25f32 + 1e-5).sqrt();
        assert!((y[[0, 0]] - want).abs() < 1e-5);
        assert!((b.running_mean[0] - 0.25).abs() < 1e-6);
        // unbiased var 5/3: 0.9·1 + 0.1·5/3
        assert!((b.running_var[0] - (0.9 + 0.5 / 3.0)).abs() < 1e-6);
        let e = b.forward(&[&x], Mode::Eval).unwrap();
        let want = (1.0f32 - 0.25) / (b.running_var[0] + 1e-5).sqrt();
        assert!((e[[0, 0]] - want).abs() < 1e-5);
        assert!(b.backward(x.clone()).is_err(), "no backward after eval");
    }
}
