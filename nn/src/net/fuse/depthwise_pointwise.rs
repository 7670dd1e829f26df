//! Evaluation: a depthwise conv (with its epilogue) and the 1×1 conv reading its output (with
//! its own) run part by part ([`Conv2d::forward_depthwise_then_pointwise`]): the depthwise
//! output, the widest tensor of an inverted-residual block, stays in cache.

use super::{layer_as, Input, Node, Scope};
use crate::error::{Result, SimError};
use crate::layers::{Conv2d, Epilogue, Layer, Tensor};

/// The node of the 1×1 conv that may run with the depthwise conv at node `i`, whose epilogue
/// ends at node `last`: the next node, inside the run, reading only the chain's output, which
/// nothing else reads ([`Conv2d::fuses_with_pointwise`]).
pub(super) fn pointwise_after(
    nodes: &mut [Node],
    i: usize,
    last: usize,
    scope: &Scope<'_>,
) -> Option<usize> {
    let k = last + 1;
    let alone = k < scope.end
        && nodes[i].inputs.len() == 1
        && nodes[k].inputs == [k]
        && scope.last_use.get(k - scope.start) == Some(&k);
    if !alone {
        return None;
    }
    let (head, tail) = nodes.split_at_mut(k);
    let dw = layer_as::<Conv2d>(head, i)?;
    let pw = layer_as::<Conv2d>(tail, 0)?;
    dw.fuses_with_pointwise(pw).then_some(k)
}

/// The depthwise conv `nodes[0]` with epilogue `first` and the 1×1 conv `nodes[at]` with
/// epilogue `second`, run on `input`.
pub(super) fn forward(
    nodes: &mut [Node],
    input: Input<'_>,
    first: &Epilogue,
    at: usize,
    second: &Epilogue,
) -> Result<Tensor> {
    let missing = || SimError::shape("network", "no depthwise and 1×1 convs to fuse");
    if at == 0 || at >= nodes.len() {
        return Err(missing());
    }
    let (head, tail) = nodes.split_at_mut(at);
    let dw = layer_as::<Conv2d>(head, 0).ok_or_else(missing)?;
    let pw = layer_as::<Conv2d>(tail, 0).ok_or_else(missing)?;
    let x = input.one(dw.name())?;
    let y = dw.forward_depthwise_then_pointwise(x, first, pw, second)?;
    // The parts checked only the part of a residual operand they read.
    second.check_output(&y)?;
    Ok(y)
}
