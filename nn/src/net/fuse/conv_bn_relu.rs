//! Training: a conv, the batch norm after it and, if there is one, the ReLU after that, as one
//! pass. The conv sums each block of its output per channel while the block is in cache, so the
//! batch norm's statistics need no pass of their own; the batch norm applies the clamp
//! ([`super::bn_relu`]).

use super::{bn_relu, is, pair, Input, Node, Scope};
use crate::error::Result;
use crate::layers::{BatchNorm, Conv2d, Layer, Tensor};

/// Whether node `i`, a conv, may sum its output for node `i + 1`, a batch norm reading only that
/// output, which nothing else reads; then also the clamp the batch norm applies, if it can
/// ([`bn_relu::find`]).
pub(super) fn find(nodes: &mut [Node], i: usize, scope: &Scope<'_>) -> Option<Option<f32>> {
    let fusable =
        scope.feeds_only_next(nodes, i) && is::<Conv2d>(nodes, i) && is::<BatchNorm>(nodes, i + 1);
    fusable.then(|| bn_relu::find(nodes, i + 1, scope))
}

/// A conv with the batch norm after it and that batch norm's clamp.
pub(super) struct ConvBnRelu<'a> {
    conv: &'a mut Conv2d,
    bn: &'a mut BatchNorm,
    hi: Option<f32>,
}

impl<'a> ConvBnRelu<'a> {
    /// The fused layer over `nodes`, a conv then a batch norm (then the clamp at `hi`).
    pub(super) fn of(nodes: &'a mut [Node], hi: Option<f32>) -> Result<Self> {
        let (conv, bn) = pair::<Conv2d, BatchNorm>(nodes, "conv and batch norm")?;
        Ok(Self { conv, bn, hi })
    }

    /// The training forward pass of the chain.
    pub(super) fn forward(self, input: Input<'_>) -> Result<Tensor> {
        let x = input.one(self.conv.name())?;
        let (y, sums) = self.conv.forward_summed(x)?;
        self.bn.forward_with_sums(y, sums, self.hi)
    }
}
