//! The layer IR: a DAG of nodes in topological order with static shapes (batch bound).
//!
//! A [`Graph`] has one input tensor and one output tensor. Every node reads runtime tensors
//! ([`ValueId`]s produced earlier, or the graph input) and produces exactly one tensor; all
//! constants (weights, biases, BN statistics, constant operands) live inside the node's [`Op`]
//! and are owned by it. Shapes include the batch dimension and are checked by [`shape::infer`]
//! when a node is added, so a built graph is always shape-consistent. Where the batch sits in a
//! tensor (axis 0 for images and batch-first sequences, axis 1 for sequence-first ones) is
//! described in [`op`]; a language model's graph input is its token ids, `[B, T]` or `[T, B]`.

pub mod batch_axes;
pub mod index_ops;
pub mod op;
pub mod rebatch;
pub mod rules;
pub mod shape;
mod summary;

pub use op::{
    AvgPool, BatchNorm, Binary, BinaryKind, CellKind, ConstOperand, Conv, Embedding, Gather,
    GroupNorm, LayerNorm, Linear, Op, Pool, Recurrent, SliceAxis, Unary, Where, MAX_VOCAB,
};

/// Index of a tensor in [`Graph::values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub usize);

/// A runtime tensor: its name in the source model and its static shape (with batch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// Tensor name as in the ONNX file.
    pub name: String,
    /// Static shape, batch included (axis 0, or axis 1 of a sequence-first tensor).
    pub shape: Vec<usize>,
}

/// One operation applied to runtime tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Unique node name (the ONNX node name, or `OpType_index` when the file has none).
    pub name: String,
    /// The operation with its parameters.
    pub op: Op,
    /// Tensor inputs, in operand order.
    pub inputs: Vec<ValueId>,
    /// The produced tensor.
    pub output: ValueId,
}

/// The nodes reading each tensor of a graph ([`Graph::consumer_index`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumers {
    /// `nodes[start[v]..start[v + 1]]` read tensor `v`.
    start: Vec<usize>,
    nodes: Vec<usize>,
}

impl Consumers {
    /// Indices of the nodes reading `id`, ascending, each once.
    pub fn of(&self, id: ValueId) -> &[usize] {
        match (self.start.get(id.0), self.start.get(id.0 + 1)) {
            (Some(&a), Some(&b)) => self.nodes.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// A whole model in IR form.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// Model name (file stem or zoo name).
    pub name: String,
    /// Where it came from: file path or `zoo:NAME` (used in messages).
    pub source: String,
    /// The batch size bound into all shapes.
    pub batch: usize,
    /// The sequence length bound into all shapes of a sequence model (`None` for image models).
    pub seq_len: Option<usize>,
    /// All tensors; the input is `values[input.0]`.
    pub values: Vec<Value>,
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// The graph input (e.g. `[B, 3, 32, 32]`, or token ids `[B, T]`).
    pub input: ValueId,
    /// The graph output (e.g. `[B, classes]`).
    pub output: ValueId,
    /// True when the model has no BatchNorm but some conv carries a bias: most likely an
    /// eval-mode export that folded BN into the preceding convs. Its BN outputs count 0.
    pub bn_folded: bool,
}

impl Graph {
    /// An empty graph whose output is, for now, its input.
    pub fn new(
        name: &str,
        source: &str,
        batch: usize,
        input_name: &str,
        input_shape: Vec<usize>,
    ) -> Self {
        Graph {
            name: name.to_string(),
            source: source.to_string(),
            batch,
            seq_len: None,
            values: vec![Value {
                name: input_name.to_string(),
                shape: input_shape,
            }],
            nodes: Vec::new(),
            input: ValueId(0),
            output: ValueId(0),
            bn_folded: false,
        }
    }

    /// True when some node normalizes its input by its statistics (batch, layer, group or
    /// instance norm).
    pub fn has_normalization(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| matches!(n.op, Op::BatchNorm(_) | Op::LayerNorm(_) | Op::GroupNorm(_)))
    }

    /// Outputs of the head: the last axis of the graph output (a classifier's classes, a
    /// language model's vocabulary).
    pub fn head_outputs(&self) -> usize {
        self.shape(self.output).last().copied().unwrap_or(0)
    }

    /// Shape of a tensor.
    pub fn shape(&self, id: ValueId) -> &[usize] {
        self.values.get(id.0).map_or(&[], |v| v.shape.as_slice())
    }

    /// Appends a node after checking its inputs exist and inferring its output shape; returns the
    /// new output tensor. On error the graph is unchanged and the message says what mismatched.
    pub fn push(
        &mut self,
        name: &str,
        op: Op,
        inputs: Vec<ValueId>,
        output_name: &str,
    ) -> Result<ValueId, String> {
        if let Some(bad) = inputs.iter().find(|i| i.0 >= self.values.len()) {
            return Err(format!("input tensor #{} does not exist", bad.0));
        }
        let shapes: Vec<&[usize]> = inputs.iter().map(|&i| self.shape(i)).collect();
        let shape = shape::infer(&op, &shapes)?;
        let output = ValueId(self.values.len());
        self.values.push(Value {
            name: output_name.to_string(),
            shape,
        });
        self.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs,
            output,
        });
        Ok(output)
    }

    /// Re-runs shape inference over the whole graph and checks topological order; returns the
    /// first inconsistency as `(node name, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let mut defined = vec![false; self.values.len()];
        if let Some(d) = defined.get_mut(self.input.0) {
            *d = true;
        }
        for n in &self.nodes {
            let fail = |m: String| Err((n.name.clone(), m));
            if let Some(i) = n
                .inputs
                .iter()
                .find(|i| !defined.get(i.0).copied().unwrap_or(false))
            {
                return fail(format!("reads tensor #{} before it is produced", i.0));
            }
            let shapes: Vec<&[usize]> = n.inputs.iter().map(|&i| self.shape(i)).collect();
            match shape::infer(&n.op, &shapes) {
                Ok(s) if s == self.shape(n.output) => {}
                Ok(s) => {
                    return fail(format!(
                        "infers {s:?} but records {:?}",
                        self.shape(n.output)
                    ))
                }
                Err(m) => return fail(m),
            }
            match defined.get_mut(n.output.0) {
                Some(d) => *d = true,
                None => return fail(format!("writes tensor #{} that does not exist", n.output.0)),
            }
        }
        Ok(())
    }

    /// Index of the node producing `id` (`None` for the graph input).
    pub fn producer(&self, id: ValueId) -> Option<usize> {
        self.nodes.iter().position(|n| n.output == id)
    }

    /// Indices of the nodes reading `id` (one pass over the graph; for many queries build
    /// [`Graph::consumer_index`] once).
    pub fn consumers(&self, id: ValueId) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].inputs.contains(&id))
            .collect()
    }

    /// The readers of every tensor: [`Graph::consumers`] of all tensors, in one pass.
    pub fn consumer_index(&self) -> Consumers {
        // node i is counted once per tensor it reads, however often it reads it
        let reads = |f: &mut dyn FnMut(usize, usize)| {
            let mut last_reader = vec![usize::MAX; self.values.len()];
            for (i, n) in self.nodes.iter().enumerate() {
                for v in &n.inputs {
                    if last_reader.get(v.0).is_some_and(|&r| r != i) {
                        last_reader[v.0] = i;
                        f(v.0, i);
                    }
                }
            }
        };
        let mut start = vec![0usize; self.values.len() + 1];
        reads(&mut |v, _| start[v + 1] += 1);
        for v in 0..self.values.len() {
            start[v + 1] += start[v];
        }
        let mut next = start.clone();
        let mut nodes = vec![0usize; start[self.values.len()]];
        reads(&mut |v, i| {
            nodes[next[v]] = i;
            next[v] += 1;
        });
        Consumers { start, nodes }
    }

    /// Number of trainable parameters.
    pub fn params(&self) -> u64 {
        self.nodes.iter().map(|n| n.op.params()).sum()
    }

    /// Removes nodes whose output nobody reads and that do not produce the graph output, until
    /// none is left (their tensors stay in `values`, unreferenced): what remains are the nodes
    /// the output depends on. One backward pass; node order stays topological.
    pub fn prune(&mut self) {
        let mut needed = vec![false; self.values.len()];
        if let Some(n) = needed.get_mut(self.output.0) {
            *n = true;
        }
        let mut keep = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().rev() {
            if needed.get(node.output.0).copied().unwrap_or(false) {
                keep[i] = true;
                for v in &node.inputs {
                    if let Some(n) = needed.get_mut(v.0) {
                        *n = true;
                    }
                }
            }
        }
        let mut i = 0;
        self.nodes.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x → a = relu(x) → b = relu(a)`, a dead `d = sigmoid(a) → e = tanh(d)`, and
    /// `m = a · a` (one node reading a tensor twice) as the output.
    fn graph() -> Graph {
        let mut g = Graph::new("g", "test", 1, "x", vec![1, 4, 4]);
        let a = g.push("a", Op::Relu, vec![g.input], "a").unwrap();
        g.push("b", Op::Relu, vec![a], "b").unwrap();
        let d = g.push("d", Op::Sigmoid, vec![a], "d").unwrap();
        g.push("e", Op::Tanh, vec![d], "e").unwrap();
        g.output = g.push("m", Op::MatMul, vec![a, a], "m").unwrap();
        g
    }

    #[test]
    fn the_consumer_index_matches_consumers() {
        let g = graph();
        let index = g.consumer_index();
        for v in 0..g.values.len() {
            assert_eq!(index.of(ValueId(v)), g.consumers(ValueId(v)), "tensor #{v}");
        }
        // `m` reads `a` twice and is listed once
        assert_eq!(index.of(ValueId(1)), [1, 2, 4]);
        assert_eq!(index.of(ValueId(99)), [0usize; 0]);
    }

    #[test]
    fn prune_keeps_what_the_output_depends_on() {
        let mut g = graph();
        g.prune();
        let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "m"]);
        assert_eq!(g.validate(), Ok(()));
    }

    #[test]
    fn a_layer_norm_anywhere_is_normalization() {
        let mut g = graph();
        assert!(!g.has_normalization());
        let ln = LayerNorm {
            scale: ndarray::ArrayD::ones(ndarray::IxDyn(&[4])),
            bias: ndarray::ArrayD::zeros(ndarray::IxDyn(&[4])),
            epsilon: 1e-5,
        };
        g.push("ln", Op::LayerNorm(ln), vec![g.output], "ln")
            .unwrap();
        assert!(g.has_normalization());
    }
}
