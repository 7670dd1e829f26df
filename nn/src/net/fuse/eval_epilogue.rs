//! Evaluation: the batch norms (running statistics), activations (ReLU, clip, sigmoid, SiLU as
//! a sigmoid and a product, HardSwish and the other `Unary` functions) and residual adds after a
//! layer run as its [`Epilogue`]. A conv or an add applies it to each block of its output while the block
//! is in cache; any other layer to its whole output. The fused layers do not run.

use super::{layer_as, Input, Node, Scope};
use crate::error::Result;
use crate::layers::{
    standard, Activation, Add, BatchNorm, Conv2d, Elementwise, Epilogue, EpilogueStep, Layer, Mode,
    Sigmoid, Tensor, UnaryLayer,
};

/// The epilogue of node `i`, in a fused chain starting at node `head` (`i` itself when alone):
/// the nodes after it, inside the run, that each read the value before them, which nothing else
/// reads, and map it by a per-channel rule (or, as SiLU, a sigmoid and the product of its input
/// and output, which nothing else reads), or add to it a value computed before the chain, not
/// read by node `head`, that nothing reads afterwards (a residual add: that value is taken out
/// of `values`, indexed from `scope.start`). Returns it with the last node it covers (`i` when
/// none).
pub(super) fn find(
    nodes: &mut [Node],
    (head, i): (usize, usize),
    scope: &Scope<'_>,
    values: &mut [Option<Tensor>],
) -> Result<(Epilogue, usize)> {
    let (start, last_use) = (scope.start, scope.last_use);
    let mut steps = Vec::new();
    let mut j = i + 1;
    while j < scope.end {
        if let Some(step) = silu_step(nodes, j, scope) {
            steps.push(step);
            j += 2;
            continue;
        }
        if last_use[j - start] != j {
            break;
        }
        let step = match nodes[j].inputs[..] {
            [v] if v == j => per_channel_step(nodes, j),
            [a, b] if (a == j) != (b == j) => {
                let s = if a == j { b } else { a };
                // Computed already, not read by node `i`, read by nothing after node `j`.
                let at = s.checked_sub(start).filter(|_| s <= head);
                let movable = at.is_some_and(|at| {
                    last_use.get(at) == Some(&j)
                        && !nodes[head].inputs.contains(&s)
                        && values.get(at).is_some_and(Option::is_some)
                });
                let add = movable.then(|| layer_as::<Add>(nodes, j)).flatten();
                add.map(|add| {
                    add.fold_into_epilogue();
                    let other = at.and_then(|at| values[at].take()).unwrap_or_default();
                    Ok(EpilogueStep::Add {
                        layer: add.name().to_string(),
                        other: standard(other),
                    })
                })
            }
            _ => None,
        };
        match step {
            Some(step) => steps.push(step?),
            None => break,
        }
        j += 1;
    }
    Ok((Epilogue(steps), j - 1))
}

/// Node `j`'s evaluation pass as a per-channel step, if it is a batch norm or an activation.
fn per_channel_step(nodes: &mut [Node], j: usize) -> Option<Result<EpilogueStep>> {
    if let Some(bn) = layer_as::<BatchNorm>(nodes, j) {
        return Some(bn.eval_step());
    }
    if let Some(s) = layer_as::<Sigmoid>(nodes, j) {
        return Some(Ok(s.eval_step(false)));
    }
    if let Some(u) = layer_as::<UnaryLayer>(nodes, j) {
        return Some(Ok(u.eval_step()));
    }
    layer_as::<Activation>(nodes, j).map(|act| Ok(act.eval_step()))
}

/// SiLU at node `j`: a sigmoid of value `j` and, at node `j + 1`, the product of value `j` and
/// the sigmoid's output, inside the run, with nothing else reading either value.
fn silu_step(nodes: &mut [Node], j: usize, scope: &Scope<'_>) -> Option<EpilogueStep> {
    let (start, last_use) = (scope.start, scope.last_use);
    let k = j + 1;
    let shape = k < scope.end
        && nodes[j].inputs == [j]
        && matches!(nodes[k].inputs[..], [a, b] if (a, b) == (j, k) || (a, b) == (k, j))
        && last_use[j - start] == k
        && last_use[k - start] == k;
    if !shape || !layer_as::<Elementwise>(nodes, k).is_some_and(|m| m.is_product()) {
        return None;
    }
    let step = layer_as::<Sigmoid>(nodes, j)?.eval_step(true);
    layer_as::<Elementwise>(nodes, k)?.fold_into_epilogue();
    Some(step)
}

/// A layer with the epilogue that follows it.
pub(super) struct WithEpilogue<'a> {
    layer: &'a mut dyn Layer,
    epilogue: &'a Epilogue,
}

impl<'a> WithEpilogue<'a> {
    /// The fused layer of `layer` and `epilogue`.
    pub(super) fn new(layer: &'a mut dyn Layer, epilogue: &'a Epilogue) -> Self {
        Self { layer, epilogue }
    }

    /// The evaluation forward pass of the layer and its epilogue.
    pub(super) fn forward(self, input: Input<'_>) -> Result<Tensor> {
        let e = self.epilogue;
        let any: &mut dyn std::any::Any = &mut *self.layer;
        let y = if let Some(conv) = any.downcast_mut::<Conv2d>() {
            let x = input.one(conv.name())?;
            conv.forward_then(x, e)?
        } else if let (Some(add), Input::Borrowed(ins)) = (any.downcast_mut::<Add>(), &input) {
            add.forward_then(ins, e)?
        } else {
            let mut y = input.forward(self.layer, Mode::Eval)?;
            e.apply_to(&mut y)?;
            y
        };
        // The blocks checked only the part of a residual operand they read.
        e.check_output(&y)?;
        Ok(y)
    }
}
