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
pub(crate) mod from_ir;
pub mod groupnorm;
pub mod gru;
pub mod index_ops;
mod intgemm;
pub mod lastaxis;
pub mod linear;
pub mod loss;
pub mod lstm;
pub mod masks;
pub mod matmul;
pub mod pointwise;
pub mod pool;
pub mod prelu;
mod qgemm;
pub mod reduce;
pub mod select;
pub mod shape_ops;
pub mod tensor_ops;
pub mod tokens;
pub mod unary;

#[cfg(test)]
pub(crate) mod gradcheck;

use std::mem::MaybeUninit;

use ndarray::{ArrayD, CowArray, Ix2, Ix4, IxDyn};
use rayon::prelude::*;

use crate::error::{Result, SimError};
use crate::quant::LayerQuant;

pub use activation::{Activation, ActivationKind};
pub use add::Add;
pub use batchnorm::BatchNorm;
pub use conv2d::{Conv2d, Conv2dSpec};
pub use elementwise::{Elementwise, ElementwiseKind};
pub use epilogue::{Epilogue, EpilogueStep};
pub use flatten::{Flatten, Unflatten};
pub use groupnorm::GroupNorm;
pub use gru::Gru;
pub use linear::Linear;
pub use loss::SoftmaxCrossEntropy;
pub use lstm::Lstm;
pub use masks::{CausalMask, Dropout};
pub use matmul::MatMul;
pub use pointwise::{Clip, Sigmoid, Tanh};
pub use pool::{GlobalAvgPool, Pool2d, PoolKind, PoolSpec};
pub use prelu::PRelu;
pub use shape_ops::{Reshape, Transpose};
pub use tensor_ops::{Concat, Pad, SliceLayer};
pub use tokens::{ClassToken, PositionEmbedding};
pub use unary::UnaryLayer;

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

/// One node of a network. What every layer does: run forward and backward, and show its
/// parameters, quantizer and buffers. Fusing a chain of layers into one pass is the network's
/// business ([`crate::net::fuse`]), which recognises the layers it can fuse by their type.
pub trait Layer: std::any::Any + Send {
    /// The layer's name (used in every error it raises).
    fn name(&self) -> &str;

    /// Computes the output from the inputs (one input for every layer but [`Add`]). In
    /// [`Mode::Train`] it keeps what [`Layer::backward`] needs.
    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor>;

    /// [`Layer::forward`] of a one-input layer on an input nobody reads afterwards: layers that
    /// can reuse its storage (in-place element-wise passes, a GEMM layer keeping it for backward)
    /// do, the others borrow it. Same results as `forward`.
    fn forward_owned(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        let y = self.forward(&[&x], mode);
        crate::arena::give(x);
        y
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

/// A vector of `len` values written in parallel, `block` at a time, without zeroing it first:
/// `fill(i, out)` writes block `i` (`out`; the last one may be shorter) and returns it, now
/// initialised. A block returned other than whole is an error, so no value is left unwritten.
pub(crate) fn filled_by_blocks<F>(len: usize, block: usize, fill: F) -> Result<Vec<f32>>
where
    F: for<'b> Fn(usize, &'b mut [MaybeUninit<f32>]) -> Result<&'b mut [f32]> + Sync,
{
    // In evaluation, storage an earlier layer is done with ([`crate::arena`]).
    let mut v = crate::arena::take(len);
    v.spare_capacity_mut()[..len]
        .par_chunks_mut(block.max(1))
        .enumerate()
        .try_for_each(|(i, out)| {
            let (ptr, n) = (out.as_ptr() as *const f32, out.len());
            let done = fill(i, out)?;
            if done.as_ptr() != ptr || done.len() != n {
                return Err(SimError::invalid(
                    "filled_by_blocks",
                    format!("block {i} was not written whole"),
                ));
            }
            Ok(())
        })?;
    // SAFETY: each block came back as an initialised `&mut [f32]` over all of its own memory,
    // and the blocks cover the first `len` values.
    unsafe { v.set_len(len) };
    Ok(v)
}

/// Block `i` of `s` cut into blocks of `size` values (the last may be shorter; empty past the end).
pub(crate) fn block_of(s: &[f32], size: usize, i: usize) -> &[f32] {
    s.chunks(size.max(1)).nth(i).unwrap_or_default()
}

/// `t` in standard layout: moved when it already is (and owned), copied otherwise.
pub fn standard<S: ndarray::Data<Elem = f32>>(t: ndarray::ArrayBase<S, ndarray::IxDyn>) -> Tensor {
    if t.is_standard_layout() {
        return t.into_owned();
    }
    // A view whose last axis is contiguous (a slice of an image's channels, a split's part):
    // its rows copied whole, not value by value.
    if t.ndim() >= 2 && t.strides().last() == Some(&1) {
        let mut out = Vec::with_capacity(t.len());
        for row in t.rows() {
            match row.as_slice() {
                Some(r) => out.extend_from_slice(r),
                None => out.extend(row.iter()),
            }
        }
        if let Ok(y) = Tensor::from_shape_vec(t.shape(), out) {
            return y;
        }
    }
    t.as_standard_layout().into_owned()
}

/// Elements per task of [`owned`]'s parallel copy.
const COPY_BLOCK: usize = 1 << 15;

/// `t` owned and in standard layout: moved when it is both, copied in parallel blocks when it is
/// a view in standard layout (a layer's borrowed input, about to be quantized in place), else
/// copied as by [`standard`].
pub(crate) fn owned(t: CowArray<'_, f32, IxDyn>) -> Tensor {
    if let (true, Some(src)) = (t.is_view(), t.as_slice()) {
        let copied = filled_by_blocks(src.len(), COPY_BLOCK, |i, out| {
            let from = block_of(src, COPY_BLOCK, i);
            if from.len() != out.len() {
                return Err(SimError::shape("copy", "blocks of different lengths"));
            }
            Ok(out.write_copy_of_slice(from))
        });
        if let Some(y) = copied
            .ok()
            .and_then(|v| Tensor::from_shape_vec(t.raw_dim(), v).ok())
        {
            return y;
        }
    }
    standard(t)
}

/// A 4-D `[N, H, W, C]` view of `t`, or an error naming the layer.
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

#[cfg(test)]
mod block_tests {
    use super::*;

    /// Writes `i·100 + j` into the `j`-th value of block `i`.
    fn write(i: usize, out: &mut [MaybeUninit<f32>]) -> &mut [f32] {
        for (j, v) in out.iter_mut().enumerate() {
            v.write((i * 100 + j) as f32);
        }
        // SAFETY: every value was written just above.
        unsafe { &mut *(out as *mut [MaybeUninit<f32>] as *mut [f32]) }
    }

    #[test]
    fn blocks_fill_the_whole_vector_and_a_partial_block_is_an_error() {
        let v = filled_by_blocks(7, 3, |i, out| Ok(write(i, out))).unwrap();
        assert_eq!(v, [0.0, 1.0, 2.0, 100.0, 101.0, 102.0, 200.0]);
        assert_eq!(block_of(&v, 3, 2), [200.0]);
        assert!(block_of(&v, 3, 3).is_empty());
        let e = filled_by_blocks(7, 3, |i, out| {
            let n = out.len();
            Ok(&mut write(i, out)[..n.min(2)])
        })
        .unwrap_err();
        assert!(e.to_string().contains("not written whole"), "{e}");
        assert!(filled_by_blocks(0, 3, |i, out| Ok(write(i, out)))
            .unwrap()
            .is_empty());
    }
}
