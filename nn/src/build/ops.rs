//! Translation of one IR node into engine layers: each op goes to the `build` function in the
//! file of the layer that runs it (see [`crate::layers`]), which also moves its tensors to the
//! engine's layout (images channels-last).

use cptsim_models::ir::{self, Node, Op};
use rand::Rng;

use crate::error::Result;
use crate::layers::embedding::Embedding;
use crate::layers::from_ir::{unsupported, Ctx, Val};
use crate::layers::index_ops::{CumSum, Gather, GatherElements};
use crate::layers::lastaxis::{Gelu, LayerNorm, Softmax};
use crate::layers::reduce::{Reduce, ReduceKind};
use crate::layers::select::Where;
use crate::layers::{
    pointwise, Activation, ActivationKind, BatchNorm, CausalMask, ClassToken, Concat, Conv2d,
    Dropout, Elementwise, GlobalAvgPool, GroupNorm, Gru, Linear, Lstm, MatMul, PRelu, Pad, Pool2d,
    PoolKind, PositionEmbedding, Reshape, SliceLayer, Transpose, UnaryLayer,
};
use crate::quant::LayerQuant;

/// Appends the engine layer(s) for `node` reading `ins`; returns the value of its output.
/// `quant` is consumed by the quantized GEMM layers (conv, linear, matmul, recurrent).
pub(super) fn node<R: Rng>(
    ctx: &mut Ctx<'_, R>,
    node: &Node,
    ins: &[Val],
    quant: LayerQuant,
) -> Result<Val> {
    match &node.op {
        Op::Conv(c) => Conv2d::build(ctx, node, c, ins, quant),
        Op::BatchNorm(b) => BatchNorm::build(ctx, node, b, ins),
        Op::Relu => Activation::build(ctx, node, ins, ActivationKind::Relu),
        Op::Clip { min, max } if *min == 0.0 && *max == 6.0 => {
            Activation::build(ctx, node, ins, ActivationKind::Relu6)
        }
        Op::Clip { min, max } if *min == 0.0 && *max == f32::INFINITY => {
            Activation::build(ctx, node, ins, ActivationKind::Relu)
        }
        Op::Clip { .. } | Op::Sigmoid | Op::Tanh => pointwise::build(ctx, node, ins),
        Op::Pad { pads, value } => Pad::build(ctx, node, ins, pads, *value),
        Op::Slice { axes } => SliceLayer::build(ctx, node, ins, axes),
        Op::Concat { axis } => Concat::build(ctx, node, ins, *axis),
        Op::Binary(b) => Elementwise::build(ctx, node, ins, b),
        Op::MaxPool(p) => Pool2d::build(ctx, node, ins, PoolKind::Max, p, false),
        Op::AveragePool(a) => {
            Pool2d::build(ctx, node, ins, PoolKind::Avg, &a.pool, a.count_include_pad)
        }
        Op::GlobalAveragePool => GlobalAvgPool::build(ctx, node, ins, true),
        Op::ReduceMean { axes, keepdims } if axes.as_slice() == [2, 3] && rank(ctx, node) == 4 => {
            GlobalAvgPool::build(ctx, node, ins, *keepdims)
        }
        Op::Flatten { axis: 1 } | Op::Reshape { .. } => Reshape::build(ctx, node, ins),
        Op::Linear(l) => Linear::build(ctx, node, l, ins, quant),
        Op::MatMul => MatMul::build(ctx, node, ins, quant),
        Op::Transpose { perm } => Transpose::build(ctx, node, ins, perm),
        Op::Embedding(e) => Embedding::build(ctx, node, e, ins),
        Op::LayerNorm(l) => LayerNorm::build(ctx, node, l, ins),
        Op::Softmax { axis, log } => Softmax::build(ctx, node, ins, *axis, *log),
        Op::Gelu { tanh_approx } => Gelu::build(ctx, node, ins, *tanh_approx),
        Op::Dropout { ratio } => Dropout::build(ctx, node, ins, *ratio, &quant),
        Op::CausalMask => CausalMask::build(ctx, node, ins),
        Op::ClassToken { token } => ClassToken::build(ctx, node, ins, token),
        Op::PositionEmbedding { table, axis } => {
            PositionEmbedding::build(ctx, node, ins, table, *axis)
        }
        Op::Recurrent(r) => match r.kind {
            ir::CellKind::Lstm => Lstm::build(ctx, node, r, ins, quant),
            ir::CellKind::Gru {
                linear_before_reset,
            } => Gru::build(ctx, node, r, ins, linear_before_reset, quant),
            ir::CellKind::Rnn => Err(unsupported(
                node,
                "no engine layer for a plain RNN cell (LSTM and GRU train)",
            )),
        },
        Op::Unary(u) => UnaryLayer::build(ctx, node, ins, *u),
        Op::PRelu { slope } => PRelu::build(ctx, node, ins, slope),
        Op::GroupNorm(n) => GroupNorm::build(ctx, node, n, ins),
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => CumSum::build(ctx, node, ins, *axis, *exclusive, *reverse),
        Op::GatherElements { data, axis } => GatherElements::build(ctx, node, ins, data, *axis),
        Op::Gather(g) => Gather::build(ctx, node, ins, g),
        Op::Where(w) => Where::build(ctx, node, ins, w),
        Op::ReduceL2 { axes, keepdims } => {
            Reduce::build(ctx, node, ins, ReduceKind::L2, axes, *keepdims)
        }
        Op::ReduceMean { axes, keepdims } => {
            Reduce::build(ctx, node, ins, ReduceKind::Mean, axes, *keepdims)
        }
        Op::ReduceSum { axes, keepdims } => {
            Reduce::build(ctx, node, ins, ReduceKind::Sum, axes, *keepdims)
        }
        Op::Resize { .. } => Err(unsupported(node, "not trainable yet (no engine layer)")),
        // Every other op is listed, so a new IR op fails to compile here until it is mapped.
        Op::Flatten { .. } => Err(unsupported(
            node,
            "only a flatten at axis 1 has an engine layer",
        )),
    }
}

/// The IR rank of `node`'s first input (0 when it has none).
fn rank<R: Rng>(ctx: &Ctx<'_, R>, node: &Node) -> usize {
    node.inputs.first().map_or(0, |&i| ctx.shape(i).len())
}

#[cfg(test)]
#[path = "tests/ops.rs"]
mod tests;
