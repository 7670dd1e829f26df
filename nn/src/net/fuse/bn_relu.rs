//! Training: a batch norm followed by a ReLU or ReLU6 as one pass. The batch norm clamps its
//! output and keeps what it needs to mask the gradient where the clamp blocks it; the activation
//! runs in neither pass.

use super::{is, layer_as, pair, Input, Node, Scope};
use crate::error::Result;
use crate::layers::{Activation, BatchNorm, Layer, Tensor};

/// The clamp bound of node `i + 1` when node `i`, a batch norm, can apply it: node `i + 1` is an
/// activation reading only node `i`'s output, which nothing else reads. The activation then drops
/// what it kept from an earlier pass.
pub(super) fn find(nodes: &mut [Node], i: usize, scope: &Scope<'_>) -> Option<f32> {
    if !(scope.feeds_only_next(nodes, i) && is::<BatchNorm>(nodes, i)) {
        return None;
    }
    layer_as::<Activation>(nodes, i + 1).map(Activation::train_clamp)
}

/// A batch norm with the clamp after it.
pub(super) struct BnRelu<'a> {
    bn: &'a mut BatchNorm,
    hi: f32,
}

impl<'a> BnRelu<'a> {
    /// The fused layer over `nodes`, a batch norm then the activation clamping at `hi`.
    pub(super) fn of(nodes: &'a mut [Node], hi: f32) -> Result<Self> {
        let (bn, _) = pair::<BatchNorm, Activation>(nodes, "batch norm and activation")?;
        Ok(Self { bn, hi })
    }

    /// The training forward pass of both layers.
    pub(super) fn forward(self, input: Input<'_>) -> Result<Tensor> {
        let x = input.one(self.bn.name())?.into_owned();
        self.bn.forward_clamped(x, self.hi)
    }
}
