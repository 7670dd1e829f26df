//! Masking layers of sequence models: the [`CausalMask`] on attention scores and inverted
//! [`Dropout`] with a deterministic, checkpointed mask stream.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::from_ir::{one_any, Ctx, Layout, Val};
use super::{cached, check_grad, expect_inputs, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use crate::quant::mix64;
use crate::quant::LayerQuant;
use cptsim_models::ir::Node;

/// A standard-layout copy of `t` as a contiguous vector, and its shape.
fn contiguous(t: &Tensor) -> (Vec<usize>, Vec<f32>) {
    // A standard-layout tensor (every layer's output) is one copy of its slice; element by
    // element, a dynamic-rank iterator cost an LSTM LM step 10 %.
    let v = match t.as_slice() {
        Some(s) => s.to_vec(),
        None => t.iter().copied().collect(),
    };
    (t.shape().to_vec(), v)
}

fn tensor(name: &str, shape: Vec<usize>, v: Vec<f32>) -> Result<Tensor> {
    Tensor::from_shape_vec(shape, v).map_err(|e| SimError::shape(name, e.to_string()))
}

/// Causal mask on scores `[..., Tq, Tk]` (`Tq ≤ Tk`, the IR's `CausalMask`): entry `(i, j)` keeps
/// its value when `j ≤ i + (Tk − Tq)` and becomes `-inf` otherwise (for square scores: every
/// column right of the diagonal), so a following softmax gives those keys weight 0. The gradient
/// passes at the kept entries and is 0 at the masked ones.
pub struct CausalMask {
    name: String,
    /// Training pass: the input shape.
    shape: Option<Vec<usize>>,
}

impl CausalMask {
    /// A causal mask layer.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            shape: None,
        }
    }

    /// `(Tq, Tk)` of scores of this shape, or an error naming the layer.
    fn dims(&self, shape: &[usize]) -> Result<(usize, usize)> {
        match shape {
            [.., tq, tk] if tq <= tk => Ok((*tq, *tk)),
            _ => Err(SimError::shape(
                &self.name,
                format!("causal mask needs scores [..., Tq, Tk] with Tq ≤ Tk, got {shape:?}"),
            )),
        }
    }

    /// `t` with every masked entry set to `fill`: in row `i` of each `Tq × Tk` block, the
    /// entries after column `i + Tk − Tq`.
    fn apply(&self, t: Tensor, fill: f32) -> Result<Tensor> {
        let (tq, tk) = self.dims(t.shape())?;
        let mut t = super::standard(t);
        let v = t
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "scores not contiguous"))?;
        for (r, row) in v.chunks_exact_mut(tk.max(1)).enumerate() {
            let i = r % tq.max(1);
            row[(i + tk - tq + 1).min(tk)..].fill(fill);
        }
        Ok(t)
    }
}

impl Layer for CausalMask {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let y = self.apply(x.clone(), f32::NEG_INFINITY)?;
        self.shape = (mode == Mode::Train).then(|| x.shape().to_vec());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.shape)?;
        check_grad(&self.name, &grad_out, shape)?;
        Ok(vec![self.apply(grad_out, 0.0)?])
    }
}

/// Inverted dropout: in training each element is kept with probability `1 − p` and scaled by
/// `1 / (1 − p)`, otherwise zeroed; the identity in eval. The mask of training forward number
/// `calls` comes from a ChaCha8 stream seeded with `mix64(seed ^ mix64(calls))`, so a run is
/// reproducible; `calls` is the layer's one buffer (checkpointed with the batch-norm statistics).
pub struct Dropout {
    name: String,
    p: f32,
    seed: u64,
    /// The training-forward counter as four 16-bit chunks, low first (each exact in f32).
    counter: Vec<f32>,
    /// Training pass: the mask (0 or `1 / (1 − p)`) and its shape.
    mask: Option<(Vec<usize>, Vec<f32>)>,
}

/// `calls` as four 16-bit chunks, low first.
fn encode(calls: u64) -> Vec<f32> {
    (0..4)
        .map(|k| ((calls >> (16 * k)) & 0xFFFF) as f32)
        .collect()
}

impl Dropout {
    /// A dropout layer dropping with probability `p` (`0 ≤ p < 1`), mask stream seeded by `seed`.
    pub fn new(name: &str, p: f32, seed: u64) -> Result<Self> {
        if !(0.0..1.0).contains(&p) {
            return Err(SimError::shape(
                name,
                format!("dropout probability {p} is not in [0, 1)"),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            p,
            seed,
            counter: encode(0),
            mask: None,
        })
    }

    /// The number of training forward passes so far, decoded from the buffer; an error naming
    /// the layer if the buffer does not hold four 16-bit integers.
    pub fn calls(&self) -> Result<u64> {
        let ok = self.counter.len() == 4
            && self
                .counter
                .iter()
                .all(|&c| c.fract() == 0.0 && (0.0..65536.0).contains(&c));
        if !ok {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "dropout counter buffer {:?} is not four 16-bit integers",
                    self.counter
                ),
            ));
        }
        Ok(self
            .counter
            .iter()
            .enumerate()
            .fold(0u64, |acc, (k, &c)| acc | (c as u64) << (16 * k)))
    }

    /// Sets the training-forward counter.
    pub fn set_calls(&mut self, calls: u64) {
        self.counter = encode(calls);
    }

    /// The mask of training forward number `calls` over `len` elements.
    fn mask(&self, calls: u64, len: usize) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(mix64(self.seed ^ mix64(calls)));
        let scale = 1.0 / (1.0 - self.p);
        // The generator's words drawn in bulk (the same stream, word by word) and read as
        // `rng.random::<f32>()` reads one, its top 24 bits over 2²⁴: the same mask as drawing a
        // float per element, without a call and a buffer check per element (7 % of an LSTM LM
        // step).
        let mut words = vec![0u32; len];
        rng.fill(&mut words[..]);
        let unit = 1.0 / (1u32 << 24) as f32;
        words
            .iter()
            .map(|&w| {
                if (w >> 8) as f32 * unit < self.p {
                    0.0
                } else {
                    scale
                }
            })
            .collect()
    }
}

impl Layer for Dropout {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        if mode == Mode::Eval {
            self.mask = None;
            return Ok(x.clone());
        }
        let calls = self.calls()?;
        let (shape, mut v) = contiguous(x);
        let mask = self.mask(calls, v.len());
        v.iter_mut().zip(&mask).for_each(|(e, m)| *e *= m);
        self.set_calls(calls.wrapping_add(1));
        self.mask = Some((shape.clone(), mask));
        tensor(&self.name, shape, v)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (shape, mask) = cached(&self.name, &self.mask)?;
        check_grad(&self.name, &grad_out, shape)?;
        // The gradient is ours: scaled in place once in standard layout.
        let mut g = super::standard(grad_out);
        g.as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?
            .iter_mut()
            .zip(mask)
            .for_each(|(e, m)| *e *= m);
        Ok(vec![g])
    }

    fn buffers_mut(&mut self) -> Vec<&mut Vec<f32>> {
        vec![&mut self.counter]
    }
}

impl Dropout {
    /// The layer of an IR `Dropout` node; its mask stream is drawn from the layer's seed and
    /// its place in the network.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        ratio: f32,
        quant: &LayerQuant,
    ) -> Result<Val> {
        let x = one_any(node, ins)?;
        let seed = mix64(quant.seed ^ mix64(ctx.net.layers() as u64));
        ctx.same_layout(Dropout::new(&node.name, ratio, seed)?, x)
    }
}

impl CausalMask {
    /// The layer of an IR causal-mask node on attention scores.
    pub(crate) fn build<R: Rng>(ctx: &mut Ctx<'_, R>, node: &Node, ins: &[Val]) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        ctx.push(CausalMask::new(&node.name), &[x.id], Layout::AsIs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn bulk_masks_equal_a_float_drawn_per_element() {
        let d = Dropout::new("d", 0.3, 7).unwrap();
        for (calls, len) in [
            (0, 0),
            (1, 1),
            (2, 15),
            (3, 16),
            (4, 17),
            (5, 65),
            (6, 4099),
        ] {
            let mut rng = ChaCha8Rng::seed_from_u64(mix64(d.seed ^ mix64(calls)));
            let want: Vec<f32> = (0..len)
                .map(|_| {
                    if rng.random::<f32>() < d.p {
                        0.0
                    } else {
                        1.0 / (1.0 - d.p)
                    }
                })
                .collect();
            assert_eq!(d.mask(calls, len), want, "draw {calls}, {len} values");
        }
    }

    #[test]
    fn causal_mask_values_and_gradient() {
        let mut m = CausalMask::new("mask");
        let x = rand_tensor(&[2, 3, 3], 1.0, 1);
        let y = m.forward(&[&x], Mode::Eval).unwrap();
        for b in 0..2 {
            for i in 0..3 {
                for j in 0..3 {
                    if j > i {
                        assert_eq!(y[[b, i, j]], f32::NEG_INFINITY);
                    } else {
                        assert_eq!(y[[b, i, j]], x[[b, i, j]]);
                    }
                }
            }
        }
        // Tq < Tk: the last query sees every key
        let y = m.forward(&[&Tensor::ones(vec![2, 4])], Mode::Eval).unwrap();
        assert!(y.index_axis(ndarray::Axis(0), 1).iter().all(|&v| v == 1.0));
        assert_eq!(y[[0, 3]], f32::NEG_INFINITY);
        assert_eq!(y[[0, 2]], 1.0);
        // the gradient is 0 at the masked entries and passes elsewhere
        m.forward(&[&x], Mode::Train).unwrap();
        let g = m.backward(Tensor::ones(vec![2, 3, 3])).unwrap().remove(0);
        assert_eq!(g[[1, 0, 1]], 0.0);
        assert_eq!(g[[1, 1, 0]], 1.0);
    }

    /// A causal mask whose `-inf` entries are replaced by 0 afterwards, so the loss of the
    /// finite-difference check stays finite: the gradient check of the mask's backward.
    struct Finite(CausalMask);

    impl Layer for Finite {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
            Ok(self
                .0
                .forward(inputs, mode)?
                .mapv(|v| if v.is_finite() { v } else { 0.0 }))
        }
        fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
            self.0.backward(grad_out)
        }
    }

    #[test]
    fn causal_mask_gradient_checks() {
        let mut m = Finite(CausalMask::new("mask"));
        check_layer(&mut m, &[rand_tensor(&[2, 4, 4], 1.0, 2)], 1e-2, 1e-3, 30).unwrap();
    }

    #[test]
    fn causal_mask_bad_shapes_name_the_layer() {
        let mut m = CausalMask::new("cm");
        for s in [vec![4], vec![2, 5, 4]] {
            let e = m
                .forward(&[&Tensor::zeros(s)], Mode::Eval)
                .unwrap_err()
                .to_string();
            assert!(e.contains("`cm`") && e.contains("Tq ≤ Tk"), "{e}");
        }
    }

    #[test]
    fn dropout_eval_is_identity_and_train_keeps_the_mean() {
        let mut d = Dropout::new("drop", 0.25, 3).unwrap();
        let x = rand_tensor(&[4, 5], 1.0, 1);
        assert_eq!(d.forward(&[&x], Mode::Eval).unwrap(), x);
        assert_eq!(d.calls().unwrap(), 0, "eval does not advance the stream");
        let ones = Tensor::ones(vec![100, 100]);
        let y = d.forward(&[&ones], Mode::Train).unwrap();
        let mean = y.mean().unwrap_or(0.0);
        let dropped = y.iter().filter(|&&v| v == 0.0).count() as f32 / 1e4;
        assert!((mean - 1.0).abs() < 0.03, "{mean}");
        assert!((dropped - 0.25).abs() < 0.02, "{dropped}");
        assert!(y.iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
        // backward multiplies by the same mask
        let g = d.backward(Tensor::ones(vec![100, 100])).unwrap().remove(0);
        assert_eq!(g, y);
    }

    #[test]
    fn dropout_masks_are_reproducible_and_advance() {
        let x = rand_tensor(&[3, 7], 1.0, 2);
        let (mut a, mut b) = (
            Dropout::new("d", 0.5, 9).unwrap(),
            Dropout::new("d", 0.5, 9).unwrap(),
        );
        let ya = a.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(ya, b.forward(&[&x], Mode::Train).unwrap());
        let ya2 = a.forward(&[&x], Mode::Train).unwrap();
        assert_ne!(ya, ya2, "the next training pass draws a new mask");
        let mut c = Dropout::new("d", 0.5, 10).unwrap();
        assert_ne!(ya, c.forward(&[&x], Mode::Train).unwrap());
    }

    #[test]
    fn dropout_counter_round_trips_through_the_buffer() {
        let mut a = Dropout::new("d", 0.3, 1).unwrap();
        let calls = (1u64 << 50) + 0xABCD_1234_5678;
        a.set_calls(calls);
        let saved: Vec<f32> = a.buffers_mut()[0].clone();
        let mut b = Dropout::new("d", 0.3, 1).unwrap();
        *b.buffers_mut()[0] = saved;
        assert_eq!(b.calls().unwrap(), calls);
        let x = rand_tensor(&[5, 5], 1.0, 3);
        assert_eq!(
            a.forward(&[&x], Mode::Train).unwrap(),
            b.forward(&[&x], Mode::Train).unwrap()
        );
        assert_eq!(a.calls().unwrap(), calls + 1);
        *b.buffers_mut()[0] = vec![1.5, 0.0, 0.0, 0.0];
        let e = b.forward(&[&x], Mode::Train).unwrap_err().to_string();
        assert!(e.contains("`d`") && e.contains("counter"), "{e}");
    }

    /// Dropout with its counter reset before every forward: the same mask in every pass of the
    /// finite-difference check.
    struct SameMask(Dropout);

    impl Layer for SameMask {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
            self.0.set_calls(0);
            self.0.forward(inputs, mode)
        }
        fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
            self.0.backward(grad_out)
        }
    }

    #[test]
    fn dropout_gradient_checks_and_bad_p_is_an_error() {
        let mut d = SameMask(Dropout::new("d", 0.4, 5).unwrap());
        check_layer(&mut d, &[rand_tensor(&[4, 6], 1.0, 4)], 1e-2, 1e-3, 20).unwrap();
        for p in [1.0, -0.1, f32::NAN] {
            let e = Dropout::new("dr", p, 0).err().unwrap().to_string();
            assert!(e.contains("`dr`") && e.contains("[0, 1)"), "{p}: {e}");
        }
        let mut d = Dropout::new("d", 0.4, 5).unwrap();
        d.forward(&[&Tensor::ones(vec![2, 2])], Mode::Train)
            .unwrap();
        assert!(d.backward(Tensor::ones(vec![3])).is_err());
    }
}
