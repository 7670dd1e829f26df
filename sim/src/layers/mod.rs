//! Layers with hand-written forward and backward passes. A network is a sequence or DAG of
//! [`Layer`]s: each takes one or more input tensors, returns one output, and in backward maps the
//! gradient of its output to the gradients of its inputs while storing the gradients of its own
//! parameters ([`Param::grad`], overwritten at every backward call).
//!
//! Image tensors are channels-last `[N, H, W, C]`; flat tensors `[N, F]`.

pub mod activation;
pub mod add;
pub mod batchnorm;
mod cell;
pub mod conv2d;
pub mod elementwise;
pub mod embedding;
pub mod epilogue;
pub mod flatten;
pub mod gru;
pub mod lastaxis;
pub mod linear;
pub mod loss;
pub mod lstm;
pub mod masks;
pub mod matmul;
pub mod pointwise;
pub mod pool;
mod qgemm;
mod reduce;
pub mod shape_ops;
pub mod tensor_ops;
pub mod tokens;

#[cfg(test)]
pub(crate) mod gradcheck;

use ndarray::{ArrayD, Ix2, Ix4};

use crate::error::{Result, SimError};
use crate::quant::LayerQuant;

pub use activation::{Activation, ActivationKind};
pub use add::Add;
pub use batchnorm::BatchNorm;
pub use conv2d::{Conv2d, Conv2dSpec};
pub use elementwise::{Elementwise, ElementwiseKind};
pub use epilogue::{Epilogue, EpilogueStep};
pub use flatten::{Flatten, Unflatten};
pub use gru::Gru;
pub use linear::Linear;
pub use loss::SoftmaxCrossEntropy;
pub use lstm::Lstm;
pub use masks::{CausalMask, Dropout};
pub use matmul::MatMul;
pub use pointwise::{Clip, Sigmoid, Tanh};
pub use pool::{GlobalAvgPool, Pool2d, PoolKind, PoolSpec};
pub use shape_ops::{Reshape, Transpose};
pub use tensor_ops::{Concat, Pad, SliceLayer};
pub use tokens::{ClassToken, PositionEmbedding};

/// The tensor type flowing between layers.
pub type Tensor = ArrayD<f32>;

/// Training (batch statistics, caches for backward) or evaluation (running statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Training: batch statistics, caches kept for backward, running statistics updated.
    Train,
    /// Evaluation: running statistics, nothing cached.
    Eval,
}

/// A trainable tensor with its gradient (same shape).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Parameter name within its layer (`weight`, `bias`, `gamma`, `beta`).
    pub name: &'static str,
    /// Current (fp32 master) value.
    pub value: Tensor,
    /// Gradient from the last backward pass.
    pub grad: Tensor,
    /// Whether weight decay applies (weights: yes; BN parameters and biases: by caller's choice).
    pub decay: bool,
}

impl Param {
    /// A parameter with a zero gradient.
    pub fn new(name: &'static str, value: Tensor, decay: bool) -> Self {
        let grad = Tensor::zeros(value.raw_dim());
        Self {
            name,
            value,
            grad,
            decay,
        }
    }
}

/// One node of a network.
pub trait Layer: Send {
    /// The layer's name (used in every error it raises).
    fn name(&self) -> &str;

    /// Computes the output from the inputs (one input for every layer but [`Add`]). In
    /// [`Mode::Train`] it keeps what [`Layer::backward`] needs.
    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor>;

    /// [`Layer::forward`] of a one-input layer on an input nobody reads afterwards: layers that
    /// can reuse its storage (in-place element-wise passes, a GEMM layer keeping it for backward)
    /// do, the others borrow it. Same results as `forward`.
    fn forward_owned(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.forward(&[&x], mode)
    }

    /// Maps the gradient of the output to the gradients of the inputs (same order as in
    /// `forward`) and stores the parameter gradients. Needs a preceding training forward pass.
    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>>;

    /// [`Layer::backward`] when nobody wants the input gradients (the layer reads only the
    /// network's input): the same parameter gradients and state; GEMM layers skip the input
    /// gradient's work.
    fn backward_params(&mut self, grad_out: Tensor) -> Result<()> {
        self.backward(grad_out).map(drop)
    }

    /// Training fusion, producer side: whether [`Layer::forward_owned_clamped`] is supported.
    fn clamps_in_training(&self) -> bool {
        false
    }

    /// A training [`Layer::forward_owned`] followed by `clamp(·, 0, hi)` in the same pass; the
    /// backward pass then also masks the gradient where the clamp blocks it (see
    /// [`Layer::train_clamp`]). Only where [`Layer::clamps_in_training`] says so.
    fn forward_owned_clamped(&mut self, _x: Tensor, _hi: f32) -> Result<Tensor> {
        Err(SimError::invalid(
            self.name(),
            "cannot apply a following activation in training",
        ))
    }

    /// Training fusion, consumer side: for a clamp activation (ReLU, ReLU6), its upper bound.
    /// The graph may then have the layer before it apply the clamp and its gradient mask
    /// ([`Layer::forward_owned_clamped`]) and skip this layer in both passes.
    fn train_clamp(&self) -> Option<f32> {
        None
    }

    /// For a one-input layer whose evaluation forward maps each value by a per-channel rule
    /// (batch norm, ReLU): that rule, to be applied by the layer producing its input (see
    /// [`Epilogue`]). The layer will then not run; it drops what an evaluation forward drops.
    fn eval_epilogue(&mut self) -> Option<Result<EpilogueStep>> {
        None
    }

    /// An evaluation [`Layer::forward`] followed by `epilogue`. Layers that produce their output
    /// in blocks apply it to each block while in cache; the default applies it afterwards. Same
    /// values either way.
    fn forward_then(&mut self, inputs: &[&Tensor], epilogue: &Epilogue) -> Result<Tensor> {
        let mut y = self.forward(inputs, Mode::Eval)?;
        epilogue.apply_to(&mut y)?;
        Ok(y)
    }

    /// [`Layer::forward_then`] on an input nobody reads afterwards (see
    /// [`Layer::forward_owned`]).
    fn forward_owned_then(&mut self, x: Tensor, epilogue: &Epilogue) -> Result<Tensor> {
        let mut y = self.forward_owned(x, Mode::Eval)?;
        epilogue.apply_to(&mut y)?;
        Ok(y)
    }

    /// The trainable parameters (empty for parameter-free layers).
    fn params_mut(&mut self) -> Vec<&mut Param> {
        Vec::new()
    }

    /// The quantization state of a quantized GEMM layer (conv, linear, matmul, recurrent).
    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        None
    }

    /// Non-trainable state that evaluation or resumption depends on (batch-norm running
    /// statistics, a dropout counter), for checkpoints. Empty for most layers.
    fn buffers_mut(&mut self) -> Vec<&mut Vec<f32>> {
        Vec::new()
    }
}

/// The parameter list of a layer with a weight and an optional bias.
pub(crate) fn weight_and_bias<'a>(
    w: &'a mut Param,
    b: &'a mut Option<Param>,
) -> Vec<&'a mut Param> {
    let mut v = vec![w];
    if let Some(b) = b {
        v.push(b);
    }
    v
}

/// Exactly `n` inputs, or an error naming the layer.
pub(crate) fn expect_inputs<'a>(
    layer: &str,
    inputs: &[&'a Tensor],
    n: usize,
) -> Result<Vec<&'a Tensor>> {
    if inputs.len() != n {
        return Err(SimError::shape(
            layer,
            format!("expects {n} input(s), got {}", inputs.len()),
        ));
    }
    Ok(inputs.to_vec())
}

/// A 4-D `[N, H, W, C]` view of `t`, or an error naming the layer.
/// `t` in standard layout: moved when it already is (and owned), copied otherwise.
pub(crate) fn standard<S: ndarray::Data<Elem = f32>>(
    t: ndarray::ArrayBase<S, ndarray::IxDyn>,
) -> Tensor {
    if t.is_standard_layout() {
        t.into_owned()
    } else {
        t.as_standard_layout().into_owned()
    }
}

pub(crate) fn as4<'a, S: ndarray::Data<Elem = f32>>(
    layer: &str,
    t: &'a ndarray::ArrayBase<S, ndarray::IxDyn>,
) -> Result<ndarray::ArrayView4<'a, f32>> {
    t.view()
        .into_dimensionality::<Ix4>()
        .map_err(|_| SimError::shape(layer, format!("expects [N, H, W, C], got {:?}", t.shape())))
}

/// A 2-D `[N, F]` view of `t`, or an error naming the layer.
pub(crate) fn as2<'a, S: ndarray::Data<Elem = f32>>(
    layer: &str,
    t: &'a ndarray::ArrayBase<S, ndarray::IxDyn>,
) -> Result<ndarray::ArrayView2<'a, f32>> {
    t.view()
        .into_dimensionality::<Ix2>()
        .map_err(|_| SimError::shape(layer, format!("expects [N, F], got {:?}", t.shape())))
}

/// The cached value of a training forward pass, or the "no forward" error.
pub(crate) fn cached<'a, T>(layer: &str, cache: &'a Option<T>) -> Result<&'a T> {
    cache.as_ref().ok_or_else(|| SimError::NoForward {
        layer: layer.to_string(),
    })
}

/// Checks that a gradient has the shape of the output it belongs to.
pub(crate) fn check_grad(layer: &str, grad: &Tensor, out_shape: &[usize]) -> Result<()> {
    if grad.shape() != out_shape {
        return Err(SimError::shape(
            layer,
            format!(
                "gradient shape {:?} differs from output shape {out_shape:?}",
                grad.shape()
            ),
        ));
    }
    Ok(())
}

/// Output `(OH, OW)` of a sliding window over an `H×W` input: the project's one window formula
/// ([`cptsim_models::ir::shape::window_out`], floor mode) per axis, `pads` in ONNX order (top,
/// left, bottom, right), or an error naming the layer.
pub(crate) fn window_hw(
    layer: &str,
    (h, w): (usize, usize),
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pads: [usize; 4],
) -> Result<(usize, usize)> {
    let dim = |axis: usize, len: usize| {
        let pad = pads[axis].saturating_add(pads[axis + 2]);
        cptsim_models::ir::shape::window_out(
            len,
            pad,
            kernel[axis],
            stride[axis],
            dilation[axis],
            false,
        )
        .map_err(|m| {
            let msg = format!("input {h}×{w} is smaller than the window {kernel:?}: {m}");
            SimError::shape(layer, msg)
        })
    };
    Ok((dim(0, h)?, dim(1, w)?))
}
