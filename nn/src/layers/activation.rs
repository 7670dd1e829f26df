//! Element-wise activations: ReLU and ReLU6 (clip to `[0, 6]`).

use super::epilogue::EpilogueStep;
use super::from_ir::{unsupported, Ctx, Val};
use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_kernels::elementwise::{clamp_and_mark, clamp_in_place, mask};
use cptsim_models::ir::Node;
use rand::Rng;
use rayon::prelude::*;

/// Which activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationKind {
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, 0), 6)`.
    Relu6,
}

impl ActivationKind {
    fn upper(self) -> f32 {
        match self {
            Self::Relu => f32::INFINITY,
            Self::Relu6 => 6.0,
        }
    }
}

/// An element-wise activation layer; the gradient passes where `0 < x < upper`.
pub struct Activation {
    name: String,
    kind: ActivationKind,
    /// Training pass: the input shape and, per element, whether the gradient passes.
    cache: Option<(Vec<usize>, Vec<bool>)>,
}

impl Activation {
    /// A new activation layer.
    pub fn new(name: &str, kind: ActivationKind) -> Self {
        Self {
            name: name.to_string(),
            kind,
            cache: None,
        }
    }

    /// The clamp's upper bound, for the batch norm before it to apply in training
    /// (`net::fuse::bn_relu`). The layer will then not run in either pass, so it drops what
    /// it kept from an earlier pass (a stale mask must neither take memory nor be read).
    pub(crate) fn train_clamp(&mut self) -> f32 {
        self.cache = None;
        self.kind.upper()
    }

    /// The layer's evaluation forward pass as an epilogue step of the layer before it
    /// (`net::fuse::eval_epilogue`); it drops its training cache, as that pass would.
    pub(crate) fn eval_step(&mut self) -> EpilogueStep {
        self.cache = None;
        EpilogueStep::Clamp {
            hi: self.kind.upper(),
        }
    }
}

/// Elements per task of the element-wise passes, which run in parallel chunks (element-wise,
/// so the results do not depend on the split).
const CHUNK: usize = 1 << 15;

/// `x ← clamp(x, 0, hi)` element-wise, returning where the gradient passes (`0 < x < hi`
/// before clamping): training's one pass.
fn clamp_and_passes(x: &mut [f32], hi: f32) -> Vec<bool> {
    // Not zeroed first: every flag is written by the chunks, in parallel.
    let n = x.len();
    let mut pass = Vec::with_capacity(n);
    x.par_chunks_mut(CHUNK)
        .zip(pass.spare_capacity_mut()[..n].par_chunks_mut(CHUNK))
        .for_each(|(x, p)| clamp_and_mark(x, hi, p));
    // SAFETY: the chunks of `x` and of the spare capacity pair up one to one, and
    // `clamp_and_mark` wrote each flag of its chunk.
    unsafe { pass.set_len(n) };
    pass
}

impl Layer for Activation {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        // The output is written over a copy of the input.
        self.forward_owned(standard(x.view()), mode)
    }

    fn forward_owned(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        let hi = self.kind.upper();
        let mut x = standard(x);
        let shape = x.shape().to_vec();
        let data = x
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "input not contiguous"))?;
        self.cache = match mode {
            Mode::Train => Some((shape, clamp_and_passes(data, hi))),
            Mode::Eval => {
                data.par_chunks_mut(CHUNK)
                    .for_each(|x| clamp_in_place(x, hi));
                None
            }
        };
        Ok(x)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (shape, pass) = cached(&self.name, &self.cache)?;
        check_grad(&self.name, &grad_out, shape)?;
        let mut dx = standard(grad_out);
        let d = dx
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
        d.par_chunks_mut(CHUNK)
            .zip(pass.par_chunks(CHUNK))
            .for_each(|(g, p)| mask(g, p));
        Ok(vec![dx])
    }
}

impl Activation {
    /// The layer of an IR `Relu` node, or of a `Clip` to `[0, 6]` or `[0, ∞)`.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        kind: ActivationKind,
    ) -> Result<Val> {
        let [x] = ins else {
            return Err(unsupported(node, "expected one input"));
        };
        ctx.same_layout(Activation::new(&node.name, kind), *x)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn values_and_gradients() {
        let mut r6 = Activation::new("r6", ActivationKind::Relu6);
        let x = Tensor::from_shape_vec(vec![1, 4], vec![-1.0, 2.0, 7.0, 5.0]).unwrap();
        let y = r6.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(y.as_slice().unwrap(), &[0.0, 2.0, 6.0, 5.0]);
        let g = Tensor::from_shape_vec(vec![1, 4], vec![1.0; 4]).unwrap();
        let dx = r6.backward(g.clone()).unwrap();
        // In place on an owned input: the same values and the same gradient mask.
        assert_eq!(r6.forward_owned(x, Mode::Train).unwrap(), y);
        assert_eq!(r6.backward(g).unwrap(), dx);
        // Inputs kept away from the kinks at 0 and 6 so finite differences are valid.
        let x = rand_tensor(&[3, 2, 2, 4], 8.0, 1).mapv(|v| {
            if v.abs() < 0.1 || (v - 6.0).abs() < 0.1 {
                v + 0.5
            } else {
                v
            }
        });
        check_layer(&mut r6, std::slice::from_ref(&x), 1e-2, 1e-3, 40).unwrap();
        check_layer(
            &mut Activation::new("r", ActivationKind::Relu),
            &[x],
            1e-2,
            1e-3,
            40,
        )
        .unwrap();
    }

    #[test]
    fn a_fused_activation_forgets_its_earlier_mask() {
        let mut r = Activation::new("relu3", ActivationKind::Relu);
        let x = Tensor::from_shape_vec(vec![1, 2], vec![-1.0, 2.0]).unwrap();
        r.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(r.train_clamp(), f32::INFINITY);
        // Its backward now has nothing to read instead of a mask from another batch.
        let e = r.backward(x).unwrap_err();
        assert!(e.to_string().contains("relu3"), "{e}");
    }
}
