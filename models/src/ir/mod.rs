//! The layer IR: a DAG of nodes in topological order with static shapes (batch bound).
//!
//! A [`Graph`] has one input tensor and one output tensor. Every node reads runtime tensors
//! ([`ValueId`]s produced earlier, or the graph input) and produces exactly one tensor; all
//! constants (weights, biases, BN statistics, constant operands) live inside the node's [`Op`]
//! and are owned by it. Shapes include the batch dimension and are checked by [`shape::infer`]
//! when a node is added, so a built graph is always shape-consistent. Where the batch sits in a
//! tensor (axis 0 for images and batch-first sequences, axis 1 for sequence-first ones) is
//! described in [`op`]; a language model's graph input is its token ids, `[B, T]` or `[T, B]`.

pub mod op;
pub mod rules;
pub mod shape;
mod summary;

pub use op::{
    AvgPool, BatchNorm, Binary, BinaryKind, CellKind, ConstOperand, Conv, Embedding, LayerNorm,
    Linear, Op, Pool, Recurrent, SliceAxis, MAX_VOCAB,
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

    /// Indices of the nodes reading `id`.
    pub fn consumers(&self, id: ValueId) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].inputs.contains(&id))
            .collect()
    }

    /// Number of trainable parameters.
    pub fn params(&self) -> u64 {
        self.nodes.iter().map(|n| n.op.params()).sum()
    }

    /// Removes nodes whose output nobody reads and that do not produce the graph output (their
    /// tensors stay in `values`, unreferenced). Node order stays topological.
    pub fn prune(&mut self) {
        loop {
            let dead: Vec<usize> = (0..self.nodes.len())
                .filter(|&i| {
                    let out = self.nodes[i].output;
                    out != self.output && self.consumers(out).is_empty()
                })
                .collect();
            if dead.is_empty() {
                break;
            }
            let mut i = 0;
            self.nodes.retain(|_| {
                i += 1;
                !dead.contains(&(i - 1))
            });
        }
    }
}
