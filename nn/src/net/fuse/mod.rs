//! The fusion pass: before each node runs, the network looks at the chain of layers starting
//! there and, where nothing else reads the values inside the chain, runs the chain as one fused
//! layer. Same values as layer by layer, bit for bit; fewer passes over memory. One module per
//! fusion:
//!
//! - `conv_bn_relu` (training): a conv sums each block of its output for the batch norm after it
//!   while the block is in cache, and that batch norm applies the ReLU after it, if any;
//! - `bn_relu` (training): a batch norm applies the ReLU (or ReLU6) after it, and masks its
//!   gradient in backward;
//! - `eval_epilogue` (evaluation): the batch norms, ReLUs and residual adds after a layer run
//!   as its epilogue, on each block of its output while the block is in cache;
//! - `depthwise_block` (evaluation): the convs of an inverted-residual block (a 1×1 conv
//!   expanding into a depthwise conv, the depthwise conv, the 1×1 conv after it), each with its
//!   epilogue, run part by part, so the wide tensors between them are never stored whole.
//!
//! The pass recognises the layers it fuses by their type, so [`Layer`] carries no fusion hooks;
//! a fused layer calls the layers' own fused passes, which call `cptsim_kernels`.

mod bn_relu;
mod conv_bn_relu;
mod depthwise_block;
mod eval_epilogue;

use std::any::Any;

use ndarray::{CowArray, IxDyn};

use super::Node;
use crate::error::{Result, SimError};
use crate::layers::{expect_inputs, Epilogue, EpilogueStep, Layer, Mode, Tensor};

/// What a node's forward pass reads: its one input to keep, or its inputs to borrow.
pub(super) enum Input<'a> {
    Owned(Tensor),
    Borrowed(Vec<&'a Tensor>),
}

impl<'a> Input<'a> {
    /// The one input of a one-input layer, owned if it was handed over, or an error naming it.
    fn one(self, layer: &str) -> Result<CowArray<'a, f32, IxDyn>> {
        Ok(match self {
            Input::Owned(x) => CowArray::from(x),
            Input::Borrowed(ins) => CowArray::from(expect_inputs(layer, &ins, 1)?[0].view()),
        })
    }

    /// Runs `layer`'s plain forward pass on this input.
    fn forward(self, layer: &mut dyn Layer, mode: Mode) -> Result<Tensor> {
        match self {
            Input::Owned(x) => layer.forward_owned(x, mode),
            Input::Borrowed(ins) => layer.forward(&ins, mode),
        }
    }
}

/// The nodes one run covers (`start..end`) and the last node reading each of their values
/// (`last_use[v - start]` for value `v`).
pub(super) struct Scope<'a> {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) last_use: &'a [usize],
}

impl Scope<'_> {
    /// Whether node `i` has one input and node `i + 1`, inside the run, reads only its output,
    /// which nothing else reads: the two may run as one pass.
    fn feeds_only_next(&self, nodes: &[Node], i: usize) -> bool {
        let j = i + 1;
        j < self.end
            && nodes[j].inputs == [j]
            && self.last_use[j - self.start] == j
            && nodes[i].inputs.len() == 1
    }
}

/// Node `i`'s layer as a `T`, if it is one.
fn layer_as<T: Layer>(nodes: &mut [Node], i: usize) -> Option<&mut T> {
    let layer: &mut dyn Any = nodes.get_mut(i)?.layer.as_mut();
    layer.downcast_mut()
}

/// Whether node `i`'s layer is a `T`.
fn is<T: Layer>(nodes: &[Node], i: usize) -> bool {
    nodes
        .get(i)
        .is_some_and(|n| (n.layer.as_ref() as &dyn Any).is::<T>())
}

/// The first two of `nodes` as a `A` and a `B`, or an error naming what is missing.
fn pair<'a, A: Layer, B: Layer>(
    nodes: &'a mut [Node],
    what: &str,
) -> Result<(&'a mut A, &'a mut B)> {
    let missing = || SimError::shape("network", format!("no {what} to fuse"));
    let (first, rest) = nodes.split_first_mut().ok_or_else(missing)?;
    let a = (first.layer.as_mut() as &mut dyn Any).downcast_mut::<A>();
    let b = rest
        .first_mut()
        .and_then(|n| (n.layer.as_mut() as &mut dyn Any).downcast_mut::<B>());
    a.zip(b).ok_or_else(missing)
}

/// The chain a node's forward pass runs: the node alone or the layers after it as well.
pub(super) enum Fusion {
    None,
    /// Evaluation: per-channel steps applied to the node's output ([`Epilogue`]).
    Epilogue(Epilogue),
    /// Evaluation: the expanding 1×1 conv at the first node with its epilogue, if `expand`
    /// holds one, the depthwise conv `dw_at` nodes on with epilogue `first`, and the 1×1 conv
    /// `pointwise.0` nodes from the first, if any, with epilogue `pointwise.1`.
    DepthwiseBlock {
        expand: Option<Epilogue>,
        dw_at: usize,
        first: Epilogue,
        pointwise: Option<(usize, Epilogue)>,
    },
    /// Training: a batch norm, then a clamp activation with this upper bound.
    BnRelu(f32),
    /// Training: a conv, then a batch norm given the sums of its output, then the clamp after
    /// that when there is one.
    ConvBnRelu(Option<f32>),
}

impl Fusion {
    /// The pass at node `i`: the chain starting there, with the last node it covers (`i` when
    /// none). It readies the layers it fuses: those that will not run drop what their own pass
    /// would drop; a residual add's other operand is taken out of `values` (indexed from
    /// `scope.start`).
    pub(super) fn find(
        nodes: &mut [Node],
        i: usize,
        scope: &Scope<'_>,
        mode: Mode,
        values: &mut [Option<Tensor>],
    ) -> Result<(Fusion, usize)> {
        if mode == Mode::Eval {
            let first = eval_epilogue::find(nodes, (i, i), scope, values)?;
            return depthwise_block::find(nodes, i, first, scope, values);
        }
        Ok(match conv_bn_relu::find(nodes, i, scope) {
            Some(Some(hi)) => (Fusion::ConvBnRelu(Some(hi)), i + 2),
            Some(None) => (Fusion::ConvBnRelu(None), i + 1),
            None => match bn_relu::find(nodes, i, scope) {
                Some(hi) => (Fusion::BnRelu(hi), i + 1),
                None => (Fusion::None, i),
            },
        })
    }

    /// Hands the residual operands its epilogue holds to the evaluation free list
    /// ([`crate::arena`]).
    pub(super) fn recycle(self) {
        let epilogues = match self {
            Fusion::Epilogue(e) => vec![e],
            Fusion::DepthwiseBlock {
                expand,
                first,
                pointwise,
                ..
            } => expand
                .into_iter()
                .chain([first])
                .chain(pointwise.map(|(_, e)| e))
                .collect(),
            _ => Vec::new(),
        };
        for step in epilogues.into_iter().flat_map(|e| e.0) {
            if let EpilogueStep::Add { other, .. } = step {
                crate::arena::give(other);
            }
        }
    }

    /// Whether the `k`-th node of the chain (0: the first) is a clamp run by the batch norm
    /// before it: its backward passes the gradient through, which that batch norm has masked.
    pub(super) fn passes_gradient(&self, k: usize) -> bool {
        match self {
            Fusion::BnRelu(_) => k == 1,
            Fusion::ConvBnRelu(Some(_)) => k == 2,
            _ => false,
        }
    }

    /// Runs the chain, `nodes` starting at its first node, on `input`, in `mode`.
    pub(super) fn forward(
        &self,
        nodes: &mut [Node],
        input: Input<'_>,
        mode: Mode,
    ) -> Result<Tensor> {
        match self {
            Fusion::ConvBnRelu(hi) => conv_bn_relu::ConvBnRelu::of(nodes, *hi)?.forward(input),
            Fusion::BnRelu(hi) => bn_relu::BnRelu::of(nodes, *hi)?.forward(input),
            Fusion::DepthwiseBlock {
                expand,
                dw_at,
                first,
                pointwise,
            } => depthwise_block::forward(
                nodes,
                input,
                expand.as_ref(),
                (*dw_at, first),
                pointwise.as_ref(),
            ),
            Fusion::Epilogue(e) if !e.is_empty() => {
                let first = nodes
                    .first_mut()
                    .ok_or_else(|| SimError::shape("network", "no node to run"))?;
                eval_epilogue::WithEpilogue::new(first.layer.as_mut(), e).forward(input)
            }
            _ => {
                let first = nodes
                    .first_mut()
                    .ok_or_else(|| SimError::shape("network", "no node to run"))?;
                input.forward(first.layer.as_mut(), mode)
            }
        }
    }
}
