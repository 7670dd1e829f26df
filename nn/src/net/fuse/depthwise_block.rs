//! Evaluation: the convs of an inverted-residual block — a 1×1 conv expanding into a depthwise
//! conv, the depthwise conv, the 1×1 conv reading its output, each with its epilogue, the
//! depthwise conv with either or both 1×1 convs — run as one pass
//! ([`forward_depthwise_block`]): the wide tensors between them stay in cache.

use super::{eval_epilogue, layer_as, Fusion, Input, Node, Scope};
use crate::error::{Result, SimError};
use crate::layers::conv2d::{forward_depthwise_block, Stage};
use crate::layers::{Conv2d, Epilogue, Layer, Tensor};

/// The node after node `last` when it is inside the run and reads only the value of node
/// `last`, which nothing else reads, node `i` (the chain's first) having one input.
fn next_alone(nodes: &[Node], i: usize, last: usize, scope: &Scope<'_>) -> Option<usize> {
    let k = last + 1;
    (k < scope.end
        && nodes[i].inputs.len() == 1
        && nodes[k].inputs == [k]
        && scope.last_use.get(k - scope.start) == Some(&k))
    .then_some(k)
}

/// Nodes `i` and `k > i` as convs, if both are.
fn convs(nodes: &mut [Node], i: usize, k: usize) -> Option<(&mut Conv2d, &mut Conv2d)> {
    let (head, tail) = nodes.split_at_mut(k);
    Some((layer_as::<Conv2d>(head, i)?, layer_as::<Conv2d>(tail, 0)?))
}

/// The pass at node `i`, whose epilogue `first` ends at node `last`: the block starting there
/// when node `i` is a depthwise conv with a 1×1 conv after it, or a 1×1 conv expanding into a
/// depthwise conv; else node `i` with its epilogue. Returns it with the last node it covers.
pub(super) fn find(
    nodes: &mut [Node],
    i: usize,
    (first, last): (Epilogue, usize),
    scope: &Scope<'_>,
    values: &mut [Option<Tensor>],
) -> Result<(Fusion, usize)> {
    let Some(k) = next_alone(nodes, i, last, scope) else {
        return Ok((Fusion::Epilogue(first), last));
    };
    let (expand, dw, (dw_epilogue, dw_last)) = match convs(nodes, i, k) {
        Some((a, b)) if a.fuses_with_pointwise(b) => {
            let (second, last) = eval_epilogue::find(nodes, (i, k), scope, values)?;
            let block = Fusion::DepthwiseBlock {
                expand: None,
                dw_at: 0,
                first,
                pointwise: Some((k - i, second)),
            };
            return Ok((block, last));
        }
        Some((a, b)) if a.expands_into(b) => {
            (first, k, eval_epilogue::find(nodes, (i, k), scope, values)?)
        }
        _ => return Ok((Fusion::Epilogue(first), last)),
    };
    let pw = next_alone(nodes, dw, dw_last, scope)
        .filter(|&p| convs(nodes, dw, p).is_some_and(|(a, b)| a.fuses_with_pointwise(b)));
    let (pointwise, last) = match pw {
        Some(p) => {
            let (e, last) = eval_epilogue::find(nodes, (i, p), scope, values)?;
            (Some((p - i, e)), last)
        }
        None => (None, dw_last),
    };
    let block = Fusion::DepthwiseBlock {
        expand: Some(expand),
        dw_at: dw - i,
        first: dw_epilogue,
        pointwise,
    };
    Ok((block, last))
}

/// Runs the block on `input`, `nodes` starting at its first node: the expanding conv there if
/// `expand` holds its epilogue, the depthwise conv `dw_at` nodes on with epilogue `first`, the
/// 1×1 conv after it `pointwise` nodes from the first, if any, with its own.
pub(super) fn forward(
    nodes: &mut [Node],
    input: Input<'_>,
    expand: Option<&Epilogue>,
    (dw_at, first): (usize, &Epilogue),
    pointwise: Option<&(usize, Epilogue)>,
) -> Result<Tensor> {
    let missing = || SimError::shape("network", "no block of convs to fuse");
    let (head, rest) = nodes.split_at_mut(dw_at);
    let ex: Option<Stage<'_>> = match expand {
        Some(e) => Some((layer_as::<Conv2d>(head, 0).ok_or_else(missing)?, e)),
        None => None,
    };
    let pw_at = pointwise.map_or(Ok(rest.len()), |(at, _)| {
        at.checked_sub(dw_at)
            .filter(|&at| at > 0 && at < rest.len())
            .ok_or_else(missing)
    })?;
    let (mid, tail) = rest.split_at_mut(pw_at);
    let dw = layer_as::<Conv2d>(mid, 0).ok_or_else(missing)?;
    let pw: Option<Stage<'_>> = match pointwise {
        Some((_, e)) => Some((layer_as::<Conv2d>(tail, 0).ok_or_else(missing)?, e)),
        None => None,
    };
    let x = input.one(dw.name())?;
    let y = forward_depthwise_block(x, ex, (dw, first), pw)?;
    // The parts checked only the part of a residual operand they read.
    if let Some((_, e)) = pointwise {
        e.check_output(&y)?;
    }
    Ok(y)
}
