//! Binding the graph input: which declared dimension is the batch and which the sequence, the
//! static shape they bind to, and the zero initial states of recurrent layers' state inputs.

use std::collections::{HashMap, HashSet};

use onnx_protobuf::tensor_shape_proto::dimension::Value as Dim;
use onnx_protobuf::type_proto::Value as TypeValue;
use onnx_protobuf::{GraphProto, ModelProto, NodeProto, ValueInfoProto};

use super::node::read_attr;
use super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::Graph;

/// The graph with its one data input bound (rules in [`super::import_proto_with`]), and the
/// file's fixed batch when it differs from `batch`. Inputs that only feed recurrent layers'
/// initial states are bound to zeros in `vals`, beside the initializers already there; the data
/// input is bound to the graph's input tensor.
pub fn bind_graph_input(
    g: &GraphProto,
    source: &str,
    batch: usize,
    seq_len: Option<usize>,
    vals: &mut HashMap<String, Val>,
) -> Result<(Graph, Option<usize>), ModelError> {
    let fail = |m: String| ModelError::graph(source, m);
    let state_only = initial_state_inputs(&g.node);
    let mut inputs: Vec<&ValueInfoProto> = Vec::new();
    let runtime: Vec<&ValueInfoProto> = g
        .input
        .iter()
        .filter(|i| !vals.contains_key(&i.name))
        .collect();
    for i in runtime {
        if state_only.contains(i.name.as_str()) {
            let zeros = zero_state(i, batch)
                .map_err(|m| fail(format!("graph input '{}' (an initial state): {m}", i.name)))?;
            vals.insert(i.name.clone(), Val::Const(zeros));
        } else {
            inputs.push(i);
        }
    }
    let [input] = inputs.as_slice() else {
        let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
        return Err(fail(format!(
            "expected exactly one graph input besides initializers, found {names:?}"
        )));
    };
    let graph_axis = graph_batch_axis(g, &input.name);
    let bound = bind_input_shape(input, batch, seq_len, graph_axis)
        .map_err(|m| fail(format!("graph input '{}': {m}", input.name)))?;
    let name = if g.name.is_empty() { source } else { &g.name };
    let mut graph = Graph::new(name, source, batch, &input.name, bound.shape);
    graph.seq_len = bound.seq_len;
    vals.insert(input.name.clone(), Val::Tensor(graph.input));
    Ok((graph, bound.file_batch))
}

/// Names of graph inputs whose every use is a recurrent layer's initial state (`LSTM` inputs
/// 5 and 6, `GRU` / `RNN` input 5), directly or through ops that only pick from it (`Slice`,
/// `Gather`, `Squeeze`, `Unsqueeze`, `Reshape`, `Identity`: a multi-layer LM's `state[i]`).
pub fn initial_state_inputs(nodes: &[NodeProto]) -> HashSet<&str> {
    // Every use of every tensor: (node, input slot).
    let mut uses: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (k, n) in nodes.iter().enumerate() {
        for (slot, name) in n.input.iter().enumerate() {
            uses.entry(name.as_str()).or_default().push((k, slot));
        }
    }
    // Whether every use of `name` ends in an initial state, following picking ops a bounded
    // number of steps (graphs are acyclic; the bound keeps a malformed one finite).
    fn state_only(
        name: &str,
        nodes: &[NodeProto],
        uses: &HashMap<&str, Vec<(usize, usize)>>,
        depth: usize,
    ) -> bool {
        let Some(list) = uses.get(name) else {
            return false;
        };
        depth < 16
            && list.iter().all(|&(k, slot)| {
                let n = &nodes[k];
                match (n.op_type.as_str(), slot) {
                    ("LSTM", 5 | 6) | ("GRU" | "RNN", 5) => true,
                    ("Slice" | "Gather" | "Squeeze" | "Unsqueeze" | "Reshape" | "Identity", 0) => n
                        .output
                        .iter()
                        .all(|o| !o.is_empty() && state_only(o, nodes, uses, depth + 1)),
                    _ => false,
                }
            })
    }
    let mut state = HashSet::new();
    for n in nodes {
        for name in &n.input {
            if !name.is_empty() && state_only(name, nodes, &uses, 0) {
                state.insert(name.as_str());
            }
        }
    }
    state
}

/// The batch axis of graph input `input` as the graph uses it, following it (through
/// `Dropout`, `Identity`, `Cast`, an embedding `Gather` and element-wise ops) to the first of:
/// - a recurrent layer reading it: batch on axis 1 for the default sequence-first `layout = 0`
///   (`[T, B]` ids of PyTorch's word-language-model), on axis 0 for `layout = 1`;
/// - after the embedding, an element-wise op with a constant `[S, 1, E]` or `[1, S, E]` (a
///   positional-encoding table added to every sequence): the batch is the axis the constant
///   broadcasts over (1 for `[T, B]` ids, 0 for `[B, T]`).
///
/// `None` when neither is found.
fn graph_batch_axis(g: &GraphProto, input: &str) -> Option<usize> {
    let nodes = &g.node;
    let mut readers: HashMap<&str, Vec<&NodeProto>> = HashMap::new();
    for n in nodes {
        for i in &n.input {
            readers.entry(i.as_str()).or_default().push(n);
        }
    }
    let dims = constant_dims(g);
    let mut cur = input;
    let mut embedded = false;
    for _ in 0..8 {
        let next = readers.get(cur)?.iter().find_map(|n| {
            let other = || n.input.iter().find(|i| i.as_str() != cur);
            match n.op_type.as_str() {
                "LSTM" | "GRU" | "RNN" if n.input.first().map(String::as_str) == Some(cur) => {
                    let layout = read_attr::<i64>(n, "layout").ok().flatten();
                    Some(Step::Batch(if layout == Some(1) { 0 } else { 1 }))
                }
                "Gather" if n.input.get(1).map(String::as_str) == Some(cur) => {
                    n.output.first().map(|o| Step::Embedded(o.as_str()))
                }
                "Add" | "Sub" | "Mul" | "Div" if embedded => {
                    match other()
                        .and_then(|o| dims.get(o.as_str()))
                        .map(Vec::as_slice)
                    {
                        Some([1, s, _]) if *s > 1 => Some(Step::Batch(0)),
                        Some([s, 1, _]) if *s > 1 => Some(Step::Batch(1)),
                        _ => n.output.first().map(|o| Step::Next(o.as_str())),
                    }
                }
                "Dropout" | "Identity" | "Cast" => n.output.first().map(|o| Step::Next(o.as_str())),
                _ => None,
            }
        })?;
        match next {
            Step::Next(out) => cur = out,
            Step::Embedded(out) => (cur, embedded) = (out, true),
            Step::Batch(axis) => return Some(axis),
        }
    }
    None
}

/// One step of [`graph_batch_axis`]'s walk.
enum Step<'a> {
    /// Follow this tensor.
    Next(&'a str),
    /// Follow the embedding's output.
    Embedded(&'a str),
    /// The batch axis is found.
    Batch(usize),
}

/// The dimensions of every initializer and `Constant` node output.
fn constant_dims(g: &GraphProto) -> HashMap<&str, Vec<i64>> {
    let mut dims: HashMap<&str, Vec<i64>> = g
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), t.dims.clone()))
        .collect();
    for n in g.node.iter().filter(|n| n.op_type == "Constant") {
        let value = n.attribute.iter().find(|a| a.name == "value");
        if let (Some(out), Some(a)) = (n.output.first(), value) {
            if let Some(t) = a.t.as_ref() {
                dims.insert(out.as_str(), t.dims.clone());
            }
        }
    }
    dims
}

/// Zeros of an initial-state input's declared shape, symbolic dimensions bound to `batch`.
fn zero_state(input: &ValueInfoProto, batch: usize) -> Result<Const, String> {
    let Some(TypeValue::TensorType(t)) = input.type_.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err("is not a tensor with a declared type".into());
    };
    let dims = &t.shape.as_ref().ok_or("has no declared shape")?.dim;
    // A state is `[num_directions · layers, B, H]`: axis 1 follows the bound batch.
    let shape: Vec<usize> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| match d.value {
            Some(Dim::DimValue(_)) if i == 1 && dims.len() == 3 => Ok(batch),
            Some(Dim::DimValue(v)) if v > 0 => Ok(v as usize),
            Some(Dim::DimValue(v)) => Err(format!("dimension of size {v}")),
            _ => Ok(batch),
        })
        .collect::<Result<_, _>>()?;
    // A state is `[1, B, H]`: far below 2^24 elements for any real model.
    if crate::ir::shape::element_count(&shape).is_none_or(|n| n > 1 << 24) {
        return Err(format!("shape {shape:?} is too large for an initial state"));
    }
    Ok(Const::F32(ndarray::ArrayD::zeros(shape)))
}

/// Whether a symbolic dimension's name says it is a sequence length.
fn is_seq_name(p: &str) -> bool {
    let l = p.to_ascii_lowercase();
    ["seq", "len", "time", "token", "step"]
        .iter()
        .any(|k| l.contains(k))
        || matches!(l.as_str(), "t" | "s" | "l")
}

/// Whether a symbolic dimension's name says it is the batch.
fn is_batch_name(p: &str) -> bool {
    let l = p.to_ascii_lowercase();
    l.contains("batch") || matches!(l.as_str(), "n" | "b")
}

/// The batch axis of an input declared with `dims` (rules in [`import_proto_with`]): a
/// dimension named like a batch, else the axis the graph reads as its batch (`graph`, see
/// [`graph_batch_axis`]), else the first symbolic dimension not named like a sequence, else 0.
fn batch_axis(
    dims: &[onnx_protobuf::tensor_shape_proto::Dimension],
    graph: Option<usize>,
) -> usize {
    let params: Vec<Option<&str>> = dims
        .iter()
        .map(|d| match &d.value {
            Some(Dim::DimParam(p)) => Some(p.as_str()),
            None => Some(""),
            _ => None,
        })
        .collect();
    params
        .iter()
        .position(|p| p.is_some_and(is_batch_name))
        .or(graph.filter(|&a| a < dims.len()))
        .or_else(|| {
            params
                .iter()
                .position(|p| p.is_some_and(|p| !is_seq_name(p)))
        })
        .unwrap_or(0)
}

/// The batch and sequence length that bind `proto`'s graph input to `shape`, the shape of the
/// data it will run on: the batch is `shape`'s size on the input's batch axis (rules in
/// [`import_proto_with`]) and, for an input of rank 2 or 3, the sequence length its size on the
/// other symbolic axis (none when every other axis is fixed). A graph without exactly one data
/// input gives `(shape[0], None)` and the import reports it; a declared rank other than
/// `shape`'s is an error naming the input.
pub fn binding_for_shape(
    proto: &ModelProto,
    source: &str,
    shape: &[usize],
) -> Result<(usize, Option<usize>), ModelError> {
    let fallback = (shape.first().copied().unwrap_or(0), None);
    let Some((g, input, t, dims)) = data_input(proto) else {
        return Ok(fallback);
    };
    if dims.len() != shape.len() {
        return Err(ModelError::graph(
            source,
            format!(
                "graph input '{}' has rank {} but the data has shape {shape:?}",
                input.name,
                dims.len()
            ),
        ));
    }
    let b = batch_axis(dims, graph_batch_axis(g, &input.name));
    // Token ids ([B, T] or [T, B] of integers) have their sequence on the other axis, fixed or
    // not; other inputs on the first free axis beside the batch.
    let token_ids = matches!(t.elem_type, 6 | 7) && dims.len() == 2;
    let seq = match token_ids {
        true => Some(1 - b.min(1)),
        false => (shape.len() <= 3)
            .then(|| {
                (0..dims.len())
                    .find(|&i| i != b && !matches!(dims[i].value, Some(Dim::DimValue(_))))
            })
            .flatten(),
    }
    .map(|i| shape[i]);
    Ok((shape.get(b).copied().unwrap_or(0), seq))
}

/// The one data input of `proto`'s graph (not an initializer, not a recurrent initial state)
/// with its tensor type and declared dimensions; `None` when there is not exactly one.
#[allow(clippy::type_complexity)]
fn data_input(
    proto: &ModelProto,
) -> Option<(
    &GraphProto,
    &ValueInfoProto,
    &onnx_protobuf::type_proto::Tensor,
    &[onnx_protobuf::tensor_shape_proto::Dimension],
)> {
    let g = proto.graph.as_ref()?;
    let state_only = initial_state_inputs(&g.node);
    let weights: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    let data: Vec<&ValueInfoProto> = g
        .input
        .iter()
        .filter(|i| !state_only.contains(i.name.as_str()) && !weights.contains(i.name.as_str()))
        .collect();
    let [input] = data.as_slice() else {
        return None;
    };
    let Some(TypeValue::TensorType(t)) = input.type_.as_ref().and_then(|t| t.value.as_ref()) else {
        return None;
    };
    let dims = t.shape.as_ref().map(|s| s.dim.as_slice())?;
    Some((g, input, t, dims))
}

/// The batch `proto`'s data input is exported at, when its batch axis (as [`import_proto_with`]
/// finds it) has a fixed size: the batch a file is read at unless another is asked for.
pub fn fixed_batch(proto: &ModelProto) -> Option<usize> {
    let (g, input, _, dims) = data_input(proto)?;
    let b = batch_axis(dims, graph_batch_axis(g, &input.name));
    match dims.get(b)?.value {
        Some(Dim::DimValue(v)) if v > 0 => usize::try_from(v).ok(),
        _ => None,
    }
}

/// Static input shape with the batch and the sequence length bound (rules in
/// [`import_proto_with`]); also returns the file's fixed batch when it is rebound (so that the
/// importer can rebind constant reshape targets that carry it, [`super::context::Importer::file_batch`]) and
/// the bound sequence length of a sequence model.
fn bind_input_shape(
    input: &ValueInfoProto,
    batch: usize,
    seq_len: Option<usize>,
    graph_axis: Option<usize>,
) -> Result<BoundInput, String> {
    let mut file_batch = None;
    let Some(TypeValue::TensorType(t)) = input.type_.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err("is not a tensor with a declared type".into());
    };
    let dims = &t.shape.as_ref().ok_or("has no declared shape")?.dim;
    let batch_axis = batch_axis(dims, graph_axis);
    // A token-id input ([B, T] or [T, B] of integers) has its sequence on the other axis.
    let token_ids = matches!(t.elem_type, 6 | 7) && dims.len() == 2;
    let mut bound_seq = None;
    let mut shape = Vec::with_capacity(dims.len());
    for (i, d) in dims.iter().enumerate() {
        let v = match (&d.value, i == batch_axis) {
            (Some(Dim::DimValue(v)), true) if *v > 0 => {
                if *v as usize != batch {
                    file_batch = Some(*v as usize);
                }
                batch
            }
            (Some(Dim::DimParam(_)) | None, true) => batch,
            (Some(Dim::DimValue(v)), false) if *v > 0 => {
                let v = *v as usize;
                if token_ids {
                    match seq_len {
                        Some(s) if s > v => {
                            return Err(format!(
                                "a sequence of {s} tokens is longer than the file's fixed \
                                 sequence length {v} (re-export with a dynamic sequence axis)"
                            ))
                        }
                        Some(s) if s != v => {
                            return Err(format!(
                                "the file was exported with a fixed sequence length of {v}; \
                                 --seq-len {s} differs (re-export with a dynamic sequence axis)"
                            ))
                        }
                        _ => bound_seq = Some(v),
                    }
                }
                v
            }
            (Some(Dim::DimValue(v)), false) => {
                return Err(format!(
                    "dimension {i} has size {v}; zero-size or negative dimensions are not allowed"
                ))
            }
            (Some(Dim::DimParam(p)), false) if bound_seq.is_none() => match seq_len {
                Some(s) => {
                    bound_seq = Some(s);
                    s
                }
                None if dims.len() >= 4 => {
                    return Err(format!(
                        "dimension {i} is symbolic ('{p}'): an image input needs a fixed size \
                         on every axis but the batch (re-export with a fixed input size)"
                    ))
                }
                None => {
                    return Err(format!(
                        "dimension {i} is the symbolic sequence length '{p}': give --seq-len"
                    ))
                }
            },
            (Some(Dim::DimParam(p)), false) => {
                return Err(format!(
                    "dimension {i} is symbolic ('{p}'); only the batch and one sequence axis may be"
                ))
            }
            (None, false) => return Err(format!("dimension {i} has no size")),
            (Some(_), _) => return Err(format!("dimension {i} has no size")),
        };
        shape.push(v);
    }
    if let (Some(s), None) = (seq_len, bound_seq) {
        return Err(format!(
            "--seq-len {s} was given but the input {shape:?} has no sequence axis"
        ));
    }
    if crate::ir::shape::element_count(&shape).is_none() {
        return Err(format!(
            "shape {shape:?} (batch {batch}) has more than 2^40 elements"
        ));
    }
    Ok(BoundInput {
        shape,
        file_batch,
        seq_len: bound_seq,
    })
}

/// The graph input's shape as bound by [`bind_input_shape`].
struct BoundInput {
    shape: Vec<usize>,
    /// The file's fixed batch, when it differs from the bound one.
    file_batch: Option<usize>,
    /// The bound sequence length of a sequence model.
    seq_len: Option<usize>,
}
