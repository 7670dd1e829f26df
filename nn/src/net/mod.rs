//! A trainable network as a DAG of [`Layer`]s in topological order. Value 0 is the network input;
//! node `i` reads the values listed in its inputs and produces value `i + 1`; the last node's
//! value is the output. Backward runs the nodes in reverse and sums the gradients of values that
//! feed several nodes (residual branches) in a fixed order.

use std::ops::Range;

use crate::error::{Result, SimError};
use crate::layers::add::accumulate;
use crate::layers::{Epilogue, EpilogueStep, Layer, Mode, Param, Tensor};
use crate::quant::LayerQuant;

struct Node {
    layer: Box<dyn Layer>,
    inputs: Vec<usize>,
    /// Run by the node before it in the last training forward (a clamp fused into a batch
    /// norm): its backward passes the gradient through, which that node has masked.
    fused: bool,
}

/// What a node's forward pass reads: its one input to keep, or its inputs to borrow.
enum Input<'a> {
    Owned(Tensor),
    Borrowed(Vec<&'a Tensor>),
}

/// The layers after a node that its forward pass runs too.
enum Fusion {
    None,
    /// Evaluation: per-channel steps applied to the node's output ([`Epilogue`]).
    Epilogue(Epilogue),
    /// Training: a clamp activation with this upper bound ([`Layer::forward_owned_clamped`]).
    Clamp(f32),
    /// Training: the next node, a batch norm, given the sums of this node's output
    /// ([`Layer::forward_summed`]), with the clamp after it when there is one.
    Sums(Option<f32>),
}

impl Fusion {
    /// Runs the first of `nodes` on `input` with the fused nodes after it, in `mode`.
    fn forward(&self, nodes: &mut [Node], input: Input<'_>, mode: Mode) -> Result<Tensor> {
        let (first, rest) = nodes
            .split_first_mut()
            .ok_or_else(|| SimError::shape("network", "no node to run"))?;
        let layer = first.layer.as_mut();
        match (self, input) {
            (Fusion::Sums(hi), input) => {
                let bn = rest
                    .first_mut()
                    .ok_or_else(|| SimError::shape(layer.name(), "no batch norm after it"))?;
                let (y, sums) = match input {
                    Input::Owned(x) => layer.forward_owned_summed(x)?,
                    Input::Borrowed(ins) => layer.forward_summed(&ins)?,
                };
                bn.layer.forward_owned_with_sums(y, sums, *hi)
            }
            (Fusion::Clamp(hi), Input::Owned(x)) => layer.forward_owned_clamped(x, *hi),
            (Fusion::Clamp(hi), Input::Borrowed(ins)) => match ins[..] {
                [x] => layer.forward_owned_clamped(x.clone(), *hi),
                _ => Err(SimError::shape(
                    layer.name(),
                    "a fused clamp needs one input",
                )),
            },
            (Fusion::Epilogue(e), input) if !e.is_empty() => {
                let y = match input {
                    Input::Owned(x) => layer.forward_owned_then(x, e)?,
                    Input::Borrowed(ins) => layer.forward_then(&ins, e)?,
                };
                // The blocks checked only the part of a residual operand they read.
                e.check_output(&y)?;
                Ok(y)
            }
            (_, Input::Owned(x)) => layer.forward_owned(x, mode),
            (_, Input::Borrowed(ins)) => layer.forward(&ins, mode),
        }
    }
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
        let id = self.nodes.len() + 1;
        if let Some(&bad) = inputs.iter().find(|&&v| v >= id) {
            return Err(SimError::shape(
                layer.name(),
                format!("reads value {bad}, but only values 0..{id} exist so far"),
            ));
        }
        self.nodes.push(Node {
            layer: Box::new(layer),
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
    /// else reads a layer's output, the per-channel element-wise layers after it run inside it:
    /// in evaluation batch norm, ReLU and a residual add whose other operand is not read later as
    /// its epilogue ([`Epilogue`]), in training a ReLU
    /// after a batch norm ([`Layer::train_clamp`]). Same values, fewer passes.
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

    /// In training, the clamp bound of node `i + 1` when node `i` can apply it (see
    /// [`Layer::train_clamp`]): it reads only the value node `i` produces, which nothing else
    /// reads, and lies before `end`.
    fn clamp_after(
        &mut self,
        i: usize,
        end: usize,
        last_use: &[usize],
        start: usize,
    ) -> Option<f32> {
        let j = i + 1;
        let fusable = j < end
            && self.nodes[j].inputs == [j]
            && last_use[j - start] == j
            && self.nodes[i].inputs.len() == 1
            && self.nodes[i].layer.clamps_in_training();
        fusable.then(|| self.nodes[j].layer.train_clamp()).flatten()
    }

    /// In training, whether node `i` may sum its output for node `i + 1`, a batch norm (see
    /// [`Layer::forward_summed`]): node `i + 1` reads only that value, which nothing else reads,
    /// and lies before `end`.
    fn sums_after(&self, i: usize, end: usize, last_use: &[usize], start: usize) -> bool {
        let j = i + 1;
        j < end
            && self.nodes[j].inputs == [j]
            && last_use[j - start] == j
            && self.nodes[i].inputs.len() == 1
            && self.nodes[i].layer.gives_train_sums()
            && self.nodes[j].layer.takes_train_sums()
    }

    /// The epilogue of node `i`: the nodes after it, up to `end`, that each read the value before
    /// them, which nothing else reads, and map it by a per-channel rule, or add to it a value
    /// computed before node `i` that nothing reads afterwards (a residual add: that value is
    /// taken out of `values`, indexed from `start`). Returns it with the last node it covers (`i`
    /// when none).
    fn epilogue_after(
        &mut self,
        i: usize,
        end: usize,
        last_use: &[usize],
        start: usize,
        values: &mut [Option<Tensor>],
    ) -> Result<(Epilogue, usize)> {
        let mut steps = Vec::new();
        let mut j = i + 1;
        while j < end && last_use[j - start] == j {
            let step = match self.nodes[j].inputs[..] {
                [v] if v == j => self.nodes[j].layer.eval_epilogue(),
                [a, b] if (a == j) != (b == j) => {
                    let s = if a == j { b } else { a };
                    // Computed already, not read by node `i`, read by nothing after node `j`.
                    let at = s.checked_sub(start).filter(|_| s <= i);
                    let movable = at.is_some_and(|at| {
                        last_use.get(at) == Some(&j)
                            && !self.nodes[i].inputs.contains(&s)
                            && values.get(at).is_some_and(Option::is_some)
                    });
                    (movable && self.nodes[j].layer.eval_sum()).then(|| {
                        let other = at.and_then(|at| values[at].take()).unwrap_or_default();
                        Ok(EpilogueStep::Add {
                            layer: self.nodes[j].layer.name().to_string(),
                            other: crate::layers::standard(other),
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
        let mut values: Vec<Option<Tensor>> = vec![None; end - start + 1];
        values[0] = Some(x);
        let mut i = start;
        while i < end {
            let (fusion, last) = match () {
                _ if !fuse => (Fusion::None, i),
                _ if mode == Mode::Eval => {
                    let (epilogue, last) =
                        self.epilogue_after(i, end, &last_use, start, &mut values)?;
                    (Fusion::Epilogue(epilogue), last)
                }
                _ if self.sums_after(i, end, &last_use, start) => {
                    match self.clamp_after(i + 1, end, &last_use, start) {
                        Some(hi) => (Fusion::Sums(Some(hi)), i + 2),
                        None => (Fusion::Sums(None), i + 1),
                    }
                }
                _ => match self.clamp_after(i, end, &last_use, start) {
                    Some(hi) => (Fusion::Clamp(hi), i + 1),
                    None => (Fusion::None, i),
                },
            };
            // A clamp run by the batch norm before it: its backward is the batch norm's.
            for (k, n) in self.nodes[i..=last].iter_mut().enumerate() {
                n.fused = match fusion {
                    Fusion::Clamp(_) => k == 1,
                    Fusion::Sums(Some(_)) => k == 2,
                    _ => false,
                };
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
            let node = &self.nodes[i];
            for &v in &node.inputs {
                if last_use[v - start] == i {
                    values[v - start] = None;
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

/// The error of a node whose input value `v` does not exist.
fn not_computed(layer: &str, v: usize) -> SimError {
    SimError::shape(layer, format!("input value {v} was not computed"))
}

#[cfg(test)]
mod tests;
