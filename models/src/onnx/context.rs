//! The import state: the IR graph being built and what every ONNX tensor name stands for.

use std::collections::HashMap;

use ndarray::ArrayD;
use onnx_protobuf::{NodeProto, ValueInfoProto};

use super::node::NodeView;
use super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::batch_axes::{BatchAt, BatchTracker};
use crate::ir::{Graph, Op, ValueId};

/// Import state shared by all op handlers.
pub struct Importer {
    /// The graph built so far.
    pub graph: Graph,
    /// ONNX tensor name → runtime tensor or constant.
    pub vals: HashMap<String, Val>,
    /// The fixed batch the file was exported with, when it differs from the batch bound into
    /// the graph: a constant reshape target that starts with it (`x.view(x.size(0), -1)` traced
    /// at batch 1 gives `Reshape(x, [1, -1])`) is rebound to the graph's batch.
    pub file_batch: Option<usize>,
    /// ONNX tensor name → how many node inputs not yet imported read it: a constant's last
    /// reader takes it without a copy ([`Importer::take_f32`]).
    pub readers: HashMap<String, usize>,
    /// Where the batch sits in the graph's tensors, followed as the graph grows.
    batch: BatchTracker,
}

impl Importer {
    /// The state before the first of `nodes` imports: `graph` with its input bound, `vals` the
    /// initializers and bound inputs, and every tensor's reader count over `nodes` and the
    /// graph `outputs`.
    pub fn new(
        graph: Graph,
        vals: HashMap<String, Val>,
        file_batch: Option<usize>,
        nodes: &[&NodeProto],
        outputs: &[ValueInfoProto],
    ) -> Self {
        let mut readers = HashMap::new();
        let read = nodes
            .iter()
            .flat_map(|n| &n.input)
            .chain(outputs.iter().map(|o| &o.name));
        for name in read {
            *readers.entry(name.clone()).or_insert(0) += 1;
        }
        Importer {
            graph,
            vals,
            file_batch,
            readers,
            batch: BatchTracker::default(),
        }
    }

    /// Where the batch sits in run-time tensor `x` ([`crate::ir::batch_axes`]), when the graph
    /// so far tells it.
    pub fn batch_at(&mut self, x: ValueId) -> Option<BatchAt> {
        self.batch.at(&self.graph, x)
    }

    /// Input `i` of `node`, `None` when the optional input is absent.
    pub fn opt_input(&self, node: &NodeView, i: usize) -> Result<Option<Val>, ModelError> {
        let Some(name) = node.input_name(i) else {
            return Ok(None);
        };
        self.vals.get(name).cloned().map(Some).ok_or_else(|| {
            node.err(format!(
                "input '{name}' is not produced by any node, initializer or graph input"
            ))
        })
    }

    /// Required input `i` of `node`.
    pub fn input(&self, node: &NodeView, i: usize) -> Result<Val, ModelError> {
        self.opt_input(node, i)?
            .ok_or_else(|| node.err(format!("required input {i} is missing")))
    }

    /// Optional input `i` that must be known at import time (weights, shapes, axes).
    pub fn opt_const(&self, node: &NodeView, i: usize) -> Result<Option<Const>, ModelError> {
        match self.opt_input(node, i)? {
            None => Ok(None),
            Some(Val::Const(c)) => Ok(Some(c)),
            Some(Val::Tensor(_)) => Err(node.err(format!(
                "input {i} ('{}') must be a constant (initializer or foldable shape computation), \
                 but it is computed at run time",
                node.input_name(i).unwrap_or_default()
            ))),
        }
    }

    /// Required constant input `i` as f32, moved out of the import state when this node is its
    /// last reader (a conv or linear weight: no copy of what may be hundreds of MB), else copied.
    pub fn take_f32(&mut self, node: &NodeView, i: usize) -> Result<ArrayD<f32>, ModelError> {
        let name = node.input_name(i).unwrap_or_default();
        let last = self.readers.get_mut(name).is_some_and(|n| {
            *n = n.saturating_sub(1);
            *n == 0
        });
        if last && matches!(self.vals.get(name), Some(Val::Const(_))) {
            if let Some(Val::Const(c)) = self.vals.remove(name) {
                return Ok(c.into_f32());
            }
        }
        Ok(self.constant(node, i)?.into_f32())
    }

    /// Required constant input `i`.
    pub fn constant(&self, node: &NodeView, i: usize) -> Result<Const, ModelError> {
        self.opt_const(node, i)?
            .ok_or_else(|| node.err(format!("required input {i} is missing")))
    }

    /// Required input `i` that must be a runtime tensor.
    pub fn tensor(&self, node: &NodeView, i: usize) -> Result<ValueId, ModelError> {
        match self.input(node, i)? {
            Val::Tensor(t) => Ok(t),
            Val::Const(_) => Err(node.err(format!(
                "input {i} ('{}') is a constant where a run-time tensor is expected",
                node.input_name(i).unwrap_or_default()
            ))),
        }
    }

    /// Shape of a runtime tensor.
    pub fn shape(&self, id: ValueId) -> Vec<usize> {
        self.graph.shape(id).to_vec()
    }

    /// Adds `op` to the graph as `node`'s computation (shape-checked) and returns its output.
    pub fn push(
        &mut self,
        node: &NodeView,
        op: Op,
        inputs: Vec<ValueId>,
    ) -> Result<Val, ModelError> {
        let out = node.output_name()?.to_string();
        self.push_named(node, &node.name, op, inputs, &out)
    }

    /// Like [`push`](Self::push) for an extra node a handler emits (e.g. a transpose before a
    /// Gemm with `transA`), under its own node and tensor names.
    pub fn push_named(
        &mut self,
        node: &NodeView,
        name: &str,
        op: Op,
        inputs: Vec<ValueId>,
        out: &str,
    ) -> Result<Val, ModelError> {
        self.graph
            .push(name, op, inputs, out)
            .map(Val::Tensor)
            .map_err(|m| node.err(m))
    }
}
