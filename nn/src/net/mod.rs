//! A trainable network as a DAG of [`Layer`]s in topological order. Value 0 is the network input;
//! node `i` reads the values listed in its inputs and produces value `i + 1`; the last node's
//! value is the output. Backward runs the nodes in reverse and sums the gradients of values that
//! feed several nodes (residual branches) in a fixed order.

use std::ops::Range;

use crate::arena::{self, Arena};
use crate::error::{Result, SimError};
use crate::layers::add::accumulate;
use crate::layers::from_ir::Sink;
use crate::layers::{Layer, Mode, Param, Tensor};
use crate::quant::LayerQuant;

pub mod fuse;
pub mod lsuv;

use fuse::{Fusion, Input, Scope};

struct Node {
    layer: Box<dyn Layer>,
    inputs: Vec<usize>,
    /// Run by the node before it in the last training forward (a clamp fused into a batch
    /// norm): its backward passes the gradient through, which that node has masked.
    fused: bool,
}

/// The layers a forward hook may still change: nodes `first..` of the graph.
pub struct Pending<'a> {
    nodes: &'a mut [Node],
    first: usize,
}

impl Pending<'_> {
    /// The quantization state of node `node` if it has not run yet and is a conv/linear layer.
    pub fn quant(&mut self, node: usize) -> Option<&mut LayerQuant> {
        let i = node.checked_sub(self.first)?;
        self.nodes.get_mut(i)?.layer.quant_mut()
    }
}

/// A network of layers.
#[derive(Default)]
pub struct Graph {
    nodes: Vec<Node>,
}

impl Graph {
    /// An empty network (its output is its input).
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a layer reading the given values; returns the id of the value it produces.
    pub fn push(&mut self, layer: impl Layer + 'static, inputs: &[usize]) -> Result<usize> {
        self.push_boxed(Box::new(layer), inputs)
    }

    /// [`Graph::push`] of a boxed layer.
    pub fn push_boxed(&mut self, layer: Box<dyn Layer>, inputs: &[usize]) -> Result<usize> {
        let id = self.nodes.len() + 1;
        if let Some(&bad) = inputs.iter().find(|&&v| v >= id) {
            return Err(SimError::shape(
                layer.name(),
                format!("reads value {bad}, but only values 0..{id} exist so far"),
            ));
        }
        self.nodes.push(Node {
            layer,
            inputs: inputs.to_vec(),
            fused: false,
        });
        Ok(id)
    }

    /// Appends a layer reading the most recent value.
    pub fn then(&mut self, layer: impl Layer + 'static) -> Result<usize> {
        let last = self.nodes.len();
        self.push(layer, &[last])
    }

    /// Id of the most recent value (the current output).
    pub fn last(&self) -> usize {
        self.nodes.len()
    }

    /// Runs the network; intermediate values are dropped after their last use. Where nothing
    /// else reads a layer's output, the per-channel element-wise layers after it run inside it
    /// ([`fuse`]): in evaluation batch norm, ReLU and a residual add whose other operand is not
    /// read later as its epilogue, in training a batch norm's statistics summed by the conv
    /// before it and a ReLU after a batch norm. Same values, fewer passes.
    pub fn forward(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.run(0..self.nodes.len(), x, mode, true, &mut |_, _, _| Ok(()))
    }

    /// As [`Graph::forward`], calling `hook(value id, value, layers not yet run)` after every
    /// node; the hook may change the quantization state of the layers still to run (DFQ gates).
    pub fn forward_with(
        &mut self,
        x: Tensor,
        mode: Mode,
        hook: &mut dyn FnMut(usize, &Tensor, Pending<'_>) -> Result<()>,
    ) -> Result<Tensor> {
        self.run(0..self.nodes.len(), x, mode, false, hook)
    }

    /// Runs nodes `range` on `x`, the value with id `range.start`; returns value `range.end`.
    /// The nodes may read only values produced inside the range (see [`Graph::is_closed`]).
    /// Fuses as [`Graph::forward`] does.
    pub fn forward_range(&mut self, range: Range<usize>, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.run(range, x, mode, true, &mut |_, _, _| Ok(()))
    }

    fn run(
        &mut self,
        range: Range<usize>,
        x: Tensor,
        mode: Mode,
        fuse: bool,
        hook: &mut dyn FnMut(usize, &Tensor, Pending<'_>) -> Result<()>,
    ) -> Result<Tensor> {
        let Range { start, end } = self.check_range(&range)?;
        let mut last_use = vec![0usize; end - start + 1];
        for i in start..end {
            let node = &self.nodes[i];
            for &v in &node.inputs {
                let l = v.checked_sub(start).ok_or_else(|| {
                    SimError::shape(
                        node.layer.name(),
                        format!("reads value {v}, produced before nodes {start}..{end}"),
                    )
                })?;
                last_use[l] = i;
            }
        }
        // Evaluation reuses the storage of the values it is done with.
        let _arena = (mode == Mode::Eval).then(Arena::open);
        let mut values: Vec<Option<Tensor>> = vec![None; end - start + 1];
        values[0] = Some(x);
        let mut i = start;
        let scope = Scope {
            start,
            end,
            last_use: &last_use,
        };
        while i < end {
            let (fusion, last) = if fuse {
                Fusion::find(&mut self.nodes, i, &scope, mode, &mut values)?
            } else {
                (Fusion::None, i)
            };
            for (k, n) in self.nodes[i..=last].iter_mut().enumerate() {
                n.fused = fusion.passes_gradient(k);
            }
            let node = &mut self.nodes[i];
            let input = match node.inputs[..] {
                // The only input, read by no later node: hand it over (its storage is reusable).
                [v] if last_use[v - start] == i => Input::Owned(
                    values[v - start]
                        .take()
                        .ok_or_else(|| not_computed(node.layer.name(), v))?,
                ),
                _ => Input::Borrowed(
                    node.inputs
                        .iter()
                        .map(|&v| {
                            values[v - start]
                                .as_ref()
                                .ok_or_else(|| not_computed(node.layer.name(), v))
                        })
                        .collect::<Result<Vec<&Tensor>>>()?,
                ),
            };
            let out = fusion.forward(&mut self.nodes[i..=last], input, mode)?;
            fusion.recycle();
            let node = &self.nodes[i];
            for &v in &node.inputs {
                if last_use[v - start] == i {
                    if let Some(t) = values[v - start].take() {
                        arena::give(t);
                    }
                }
            }
            hook(
                last + 1,
                &out,
                Pending {
                    nodes: &mut self.nodes[last + 1..],
                    first: last + 1,
                },
            )?;
            values[last + 1 - start] = Some(out);
            i = last + 1;
        }
        values[end - start]
            .take()
            .ok_or_else(|| SimError::shape("network", "no output"))
    }

    fn check_range(&self, range: &Range<usize>) -> Result<Range<usize>> {
        if range.start > range.end || range.end > self.nodes.len() {
            return Err(SimError::shape(
                "network",
                format!(
                    "nodes {}..{} are not a range of the {} nodes",
                    range.start,
                    range.end,
                    self.nodes.len()
                ),
            ));
        }
        Ok(range.clone())
    }

    /// True when nodes `range` form a single-input, single-output region: they read only values
    /// `range.start..range.end`, and no later node reads any of those values (only value
    /// `range.end`, the region's output).
    pub fn is_closed(&self, range: Range<usize>) -> bool {
        let Range { start, end } = range;
        if start > end || end > self.nodes.len() {
            return false;
        }
        let inside = self.nodes[start..end]
            .iter()
            .all(|n| n.inputs.iter().all(|&v| v >= start));
        let after = self.nodes[end..]
            .iter()
            .all(|n| n.inputs.iter().all(|&v| v < start || v >= end));
        inside && after
    }

    /// Back-propagates the gradient of the output; returns the gradient of the input and leaves
    /// every parameter's gradient in its [`Param::grad`].
    pub fn backward(&mut self, grad: Tensor) -> Result<Tensor> {
        self.backward_range(0..self.nodes.len(), grad)
    }

    /// Back-propagates the gradient of value `range.end` through nodes `range` (after a
    /// training [`Graph::forward_range`] over them); returns the gradient of value `range.start`.
    pub fn backward_range(&mut self, range: Range<usize>, grad: Tensor) -> Result<Tensor> {
        self.back_propagate(range, grad, true)?
            .ok_or_else(|| SimError::shape("network", "the input receives no gradient"))
    }

    /// [`Graph::backward`] for training: the parameter gradients only. Layers that read only
    /// the input skip its gradient (for a CIFAR ResNet, the first conv's transposed GEMM).
    pub fn backward_params(&mut self, grad: Tensor) -> Result<()> {
        self.backward_params_range(0..self.nodes.len(), grad)
    }

    /// [`Graph::backward_range`] without the gradient of value `range.start`.
    pub fn backward_params_range(&mut self, range: Range<usize>, grad: Tensor) -> Result<()> {
        self.back_propagate(range, grad, false).map(drop)
    }

    /// The body of [`Graph::backward_range`]: with `input_grad` false, nodes whose inputs are
    /// all value `range.start` run [`Layer::backward_params`] and the result is `None`.
    fn back_propagate(
        &mut self,
        range: Range<usize>,
        grad: Tensor,
        input_grad: bool,
    ) -> Result<Option<Tensor>> {
        let Range { start, end } = self.check_range(&range)?;
        let mut grads: Vec<Option<Tensor>> = vec![None; end - start + 1];
        grads[end - start] = Some(grad);
        for i in (start..end).rev() {
            let Some(g) = grads[i + 1 - start].take() else {
                continue;
            };
            let node = &mut self.nodes[i];
            let dins = if node.fused {
                vec![g]
            } else if !input_grad && node.inputs.iter().all(|&v| v == start) {
                node.layer.backward_params(g)?;
                continue;
            } else {
                node.layer.backward(g)?
            };
            if dins.len() != node.inputs.len() {
                return Err(SimError::shape(
                    node.layer.name(),
                    "backward returned the wrong number of gradients",
                ));
            }
            for (&v, d) in node.inputs.iter().zip(dins) {
                let slot = v
                    .checked_sub(start)
                    .and_then(|l| grads.get_mut(l))
                    .ok_or_else(|| {
                        SimError::shape(
                            node.layer.name(),
                            format!("reads value {v} outside the range"),
                        )
                    })?;
                *slot = Some(match slot.take() {
                    Some(mut acc) => {
                        accumulate(node.layer.name(), &mut acc, &d)?;
                        acc
                    }
                    None => d,
                });
            }
        }
        Ok(grads[0].take().filter(|_| input_grad))
    }

    /// The layer of node `node`.
    pub fn layer_mut(&mut self, node: usize) -> Option<&mut (dyn Layer + 'static)> {
        self.nodes.get_mut(node).map(|n| n.layer.as_mut())
    }

    /// All parameters, in a fixed order (node order, then each layer's order).
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        self.nodes
            .iter_mut()
            .flat_map(|n| n.layer.params_mut())
            .collect()
    }

    /// Every layer's non-trainable state (batch-norm running statistics), in a fixed order.
    pub fn buffers_mut(&mut self) -> Vec<&mut Vec<f32>> {
        self.nodes
            .iter_mut()
            .flat_map(|n| n.layer.buffers_mut())
            .collect()
    }

    /// A copy of [`Graph::buffers_mut`].
    pub fn buffer_values(&mut self) -> Vec<Vec<f32>> {
        self.buffers_mut().into_iter().map(|b| b.clone()).collect()
    }

    /// The quantization states of the conv/linear layers, with their layer names, in node order.
    pub fn quant_layers_mut(&mut self) -> Vec<(String, &mut LayerQuant)> {
        self.nodes
            .iter_mut()
            .filter_map(|n| {
                let name = n.layer.name().to_string();
                n.layer.quant_mut().map(|q| (name, q))
            })
            .collect()
    }

    /// Node indices of the conv/linear layers (those with a quantization state), in node order.
    pub fn quant_nodes(&mut self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].layer.quant_mut().is_some())
            .collect()
    }

    /// The values node `node` reads (`None` past the end).
    pub fn node_inputs(&self, node: usize) -> Option<&[usize]> {
        self.nodes.get(node).map(|n| n.inputs.as_slice())
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the network has no layers.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

impl Sink for Graph {
    fn push_layer(&mut self, layer: Box<dyn Layer>, inputs: &[usize]) -> Result<usize> {
        self.push_boxed(layer, inputs)
    }

    fn layers(&self) -> usize {
        self.len()
    }
}

/// The error of a node whose input value `v` does not exist.
fn not_computed(layer: &str, v: usize) -> SimError {
    SimError::shape(layer, format!("input value {v} was not computed"))
}

#[cfg(test)]
mod tests;
