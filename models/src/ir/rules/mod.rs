//! Per-op rules of the IR: each op's output shape, checked against its parameters, and for the
//! GEMM ops the layer geometry and forward MACs the summary reports. The rules live with their
//! op family, as methods of the op's payload ([`super::Conv`], [`super::Pool`],
//! [`super::Linear`], …) or as functions of the fields of an op without one; [`Op::output_shape`]
//! and [`Op::layer`] hand each op to its rule.

mod dense;
pub(crate) mod layout;
mod norm;
mod window;

pub(crate) use dense::matmul;

use super::op::Op;
use super::shape::element_count;
use crate::summary::LayerInfo;

/// What a GEMM rule needs to describe its node as a layer: the node's name and parameter count,
/// its first input's and its output's shapes, and the batch bound into them.
pub struct LayerIo<'a> {
    /// The node's name.
    pub name: &'a str,
    /// The node's trainable parameters.
    pub params: u64,
    /// Shape of the first tensor input (batch included).
    pub input: &'a [usize],
    /// Shape of the output (batch included).
    pub output: &'a [usize],
    /// The graph's batch.
    pub batch: usize,
}

impl LayerIo<'_> {
    /// Elements per sample of a tensor of shape `s` (wherever its batch axis sits).
    fn per_sample(&self, s: &[usize]) -> usize {
        s.iter().product::<usize>() / self.batch.max(1)
    }
}

impl Op {
    /// Tensor inputs the op reads (`None`: one or more, as `Concat`).
    fn tensor_inputs(&self) -> Option<usize> {
        match self {
            Op::Binary(b) if b.constant.is_none() => Some(2),
            Op::Where(w) if w.fill.is_none() => Some(2),
            Op::MatMul => Some(2),
            Op::Concat { .. } => None,
            _ => Some(1),
        }
    }

    /// Output shape of the op on inputs of the given shapes, or what does not fit. The result
    /// has no zero-size dimension and at most [`super::shape::MAX_ELEMENTS`] elements.
    pub fn output_shape(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let want = self.tensor_inputs().unwrap_or(inputs.len().max(1));
        if inputs.len() != want {
            return Err(format!(
                "expected {want} tensor input(s), got {}",
                inputs.len()
            ));
        }
        let x = inputs[0];
        let out = match self {
            Op::Conv(c) => c.output_shape(x)?,
            Op::BatchNorm(b) => b.output_shape(x)?,
            Op::Relu | Op::Clip { .. } | Op::Sigmoid | Op::Gelu { .. } | Op::Tanh => x.to_vec(),
            Op::Binary(b) => b.output_shape(inputs)?,
            Op::MaxPool(p) => p.output_shape(x)?,
            Op::AveragePool(a) => a.pool.output_shape(x)?,
            Op::GlobalAveragePool => window::global_pool(x)?,
            Op::ReduceMean { axes, keepdims } => layout::reduce_mean(axes, *keepdims, x)?,
            Op::Flatten { axis } => layout::flatten(*axis, x)?,
            Op::Reshape { shape } => layout::reshape(shape, x)?,
            Op::Linear(l) => l.output_shape(x)?,
            Op::MatMul => matmul(x, inputs[1])?,
            Op::Concat { axis } => layout::concat(inputs, *axis)?,
            Op::Slice { axes } => layout::slice(axes, x)?,
            Op::Pad { pads, .. } => layout::pad(pads, x)?,
            Op::Transpose { perm } => layout::transpose(perm, x)?,
            Op::Embedding(e) => e.output_shape(x)?,
            Op::LayerNorm(l) => l.output_shape(x)?,
            Op::Softmax { axis, .. } => layout::softmax(*axis, x)?,
            Op::Dropout { ratio } => norm::dropout(*ratio, x)?,
            Op::CausalMask => layout::causal_mask(x)?,
            Op::ClassToken { token } => layout::class_token(token, x)?,
            Op::PositionEmbedding { table, axis } => layout::position_embedding(table, *axis, x)?,
            Op::Recurrent(r) => r.output_shape(x)?,
            Op::Unary(_) => x.to_vec(),
            Op::PRelu { slope } => norm::prelu(slope.shape(), x)?,
            Op::GroupNorm(n) => n.output_shape(x)?,
            Op::ReduceL2 { axes, keepdims } | Op::ReduceSum { axes, keepdims } => {
                layout::reduce_mean(axes, *keepdims, x)?
            }
            Op::Resize { shape, .. } => layout::resize(shape, x)?,
            Op::CumSum { axis, .. } => layout::cumsum(*axis, x)?,
            Op::GatherElements { data, axis } => layout::gather_elements(data.shape(), *axis, x)?,
            Op::Gather(g) => g.output_shape(x)?,
            Op::Where(w) => w.output_shape(inputs)?,
        };
        if out.contains(&0) {
            return Err(format!("output shape {out:?} has a zero-size dimension"));
        }
        if element_count(&out).is_none() {
            return Err(format!(
                "output shape {out:?} has more than 2^40 elements (too large a batch?)"
            ));
        }
        Ok(out)
    }

    /// The GEMM layer the op runs, as the summary lists it (role `Body`, or `Depthwise` for a
    /// depthwise conv: the roles that need the rest of the graph are the summary's to set);
    /// `None` for the ops that are no GEMM.
    pub fn layer(&self, io: &LayerIo) -> Option<LayerInfo> {
        match self {
            Op::Conv(c) => Some(c.layer(io)),
            Op::Linear(l) => Some(l.layer(io)),
            Op::MatMul => Some(dense::matmul_layer(io)),
            Op::Recurrent(r) => Some(r.layer(io)),
            _ => None,
        }
    }
}

/// Checks that every axis in `axes` is below `rank`.
fn check_axes(axes: &[usize], rank: usize) -> Result<(), String> {
    match axes.iter().find(|&&a| a >= rank) {
        Some(a) => Err(format!("axis {a} out of range for rank {rank}")),
        None => Ok(()),
    }
}
