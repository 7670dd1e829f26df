//! ONNX import: `ModelProto` → [`Graph`].
//!
//! Modelled on tract's importer: a typed node wrapper ([`node`]), one module per op family
//! ([`ops`]) behind an op-type → handler table ([`registry`]). Handlers see each ONNX tensor
//! either as a run-time tensor of the IR or as a constant; integer shape subgraphs
//! (`Shape → Gather → Unsqueeze → Concat → Reshape`, `F.pad`'s pad-building chains) are thereby
//! evaluated at import and leave no trace in the IR.

mod context;
mod fuse;
mod node;
pub mod ops;
pub mod registry;
mod tensor;
mod value;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use onnx_protobuf::tensor_shape_proto::dimension::Value as Dim;
use onnx_protobuf::type_proto::Value as TypeValue;
use onnx_protobuf::{Message, ModelProto, NodeProto, ValueInfoProto};

use crate::error::ModelError;
use crate::ir::{Graph, Op};
use context::Importer;
use node::NodeView;
pub use registry::supported_ops;
use value::{Const, Val};

/// Reads and imports an ONNX file, binding a symbolic batch dimension to `batch`.
pub fn import_file(path: &Path, batch: usize) -> Result<Graph, ModelError> {
    import_file_with(path, batch, None)
}

/// [`import_file`] also binding a sequence model's sequence length (see [`import_proto_with`]).
pub fn import_file_with(
    path: &Path,
    batch: usize,
    seq_len: Option<usize>,
) -> Result<Graph, ModelError> {
    let (proto, file) = read_file(path)?;
    import_named(path, &proto, &file, batch, seq_len)
}

/// The decoded model in `path` and the file name errors use.
fn read_file(path: &Path) -> Result<(ModelProto, String), ModelError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|err| ModelError::Io {
        path: file.clone(),
        err,
    })?;
    Ok((decode(&bytes, &file)?, file))
}

/// [`import_proto_with`] of the model read from `path`, named after the file's stem.
fn import_named(
    path: &Path,
    proto: &ModelProto,
    file: &str,
    batch: usize,
    seq_len: Option<usize>,
) -> Result<Graph, ModelError> {
    let mut g = import_proto_with(proto, file, batch, seq_len)?;
    if let Some(stem) = path.file_stem() {
        g.name = stem.to_string_lossy().into_owned();
    }
    Ok(g)
}

/// The one-line notice `inspect`, `forward` and `train` print for a graph with
/// [`Graph::bn_folded`] set: it trains as conv with bias, without BatchNorm.
pub const BN_FOLDED_NOTE: &str = "note: no BatchNormalization in the graph but convs carry \
    biases: BN was most likely folded into conv (eval-mode export); it runs and trains as conv \
    with bias, and BN ops count 0";

/// Adds to a node's error, when the file's fixed batch was being rebound, that this node pins it.
fn pinned_batch(e: ModelError, file_batch: Option<usize>, batch: usize) -> ModelError {
    match (e, file_batch) {
        (
            ModelError::Node {
                file,
                node,
                op,
                msg,
            },
            Some(fb),
        ) => ModelError::Node {
            msg: format!(
                "{msg}; the file was exported with a fixed batch of {fb} and this node pins it, \
                 so it cannot run at batch {batch} (re-export with a dynamic batch axis, or use \
                 batch {fb})"
            ),
            file,
            node,
            op,
        },
        (e, _) => e,
    }
}

/// Why constant `c` cannot be a weight, if so: a NaN anywhere, or an infinity in a tensor of
/// more than one element (a scalar ±inf is a legitimate bound or fill value, e.g. of `Clip`,
/// and so is the `-inf` of an additive causal attention mask).
fn non_finite(c: &Const) -> Option<String> {
    let Const::F32(a) = c else {
        return None;
    };
    let (i, v) = a
        .iter()
        .enumerate()
        .find(|(_, v)| v.is_nan() || (v.is_infinite() && a.len() > 1))?;
    if ops::mask::is_additive_causal(a) {
        return None;
    }
    Some(format!(
        "holds {v} at element {i} of {}: the file's weights are corrupt or diverged",
        a.len()
    ))
}

/// Decodes ONNX bytes; `source` names them in errors.
pub fn decode(bytes: &[u8], source: &str) -> Result<ModelProto, ModelError> {
    if bytes.is_empty() {
        return Err(ModelError::Empty {
            file: source.to_string(),
        });
    }
    let proto = ModelProto::parse_from_bytes(bytes).map_err(|e| ModelError::Decode {
        file: source.to_string(),
        msg: e.to_string(),
    })?;
    if proto.graph.is_none() {
        return Err(ModelError::graph(
            source,
            "not an ONNX model: it has no graph (truncated or not ONNX?)",
        ));
    }
    if proto.graph.node.is_empty() {
        return Err(ModelError::graph(source, "the graph has no nodes"));
    }
    Ok(proto)
}

/// Imports a decoded model. `source` (file name or `zoo:NAME`) appears in every error; `batch`
/// binds the batch dimension of the graph input.
pub fn import_proto(proto: &ModelProto, source: &str, batch: usize) -> Result<Graph, ModelError> {
    import_proto_with(proto, source, batch, None)
}

/// [`import_proto`] for sequence models too: `seq_len` binds the graph input's symbolic
/// sequence dimension (required when it has one), or must equal a token-id input's fixed one.
///
/// Which symbolic dimension is which: one named like a batch (`batch`, `N`, `B`) is the batch,
/// one named like a sequence (`seq…`, `…len…`, `time`, `token…`, `T`, `S`, `L`) the sequence;
/// otherwise the first symbolic dimension is the batch and a second one the sequence. With no
/// symbolic batch the batch is axis 0 (a fixed batch there is rebound). Besides the main input,
/// a graph may have inputs that only feed recurrent layers' initial states (`h0`, `c0` of a
/// PyTorch LM export): they are bound to zeros, the state a fresh sequence starts from.
pub fn import_proto_with(
    proto: &ModelProto,
    source: &str,
    batch: usize,
    seq_len: Option<usize>,
) -> Result<Graph, ModelError> {
    let opts = ImportOptions {
        seq_len,
        ..ImportOptions::default()
    };
    import_proto_opts(proto, source, batch, opts)
}

/// How [`import_proto_opts`] reads a model besides its batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The sequence length (see [`import_proto_with`]).
    pub seq_len: Option<usize>,
    /// Float initializers may be stored as dims without values (a [`crate::zoo::build_shapes`]
    /// model); they import as zeros. Off, such a tensor is an error, as in any ONNX file.
    pub shapes_only: bool,
}

impl ImportOptions {
    /// Options for a model built for its shapes ([`crate::zoo::build_shapes`]).
    pub fn shapes_only() -> Self {
        ImportOptions {
            shapes_only: true,
            ..ImportOptions::default()
        }
    }
}

/// [`import_proto_with`] under `opts`.
pub fn import_proto_opts(
    proto: &ModelProto,
    source: &str,
    batch: usize,
    opts: ImportOptions,
) -> Result<Graph, ModelError> {
    let seq_len = opts.seq_len;
    let fail = |m: String| ModelError::graph(source, m);
    if seq_len == Some(0) {
        return Err(fail("the sequence length must be at least 1".into()));
    }
    if batch == 0 {
        return Err(fail("batch must be at least 1".into()));
    }
    let g = proto
        .graph
        .as_ref()
        .ok_or_else(|| fail("the model has no graph".into()))?;
    let opset = proto
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(1, |o| o.version);

    let mut vals = HashMap::new();
    for init in &g.initializer {
        let at = |m: String| fail(format!("initializer '{}': {m}", init.name));
        if opts.shapes_only {
            if let Some(zeros) = tensor::zeros_without_values(init).map_err(at)? {
                vals.insert(init.name.clone(), Val::Const(zeros));
                continue;
            }
        }
        let c = tensor::decode(init).map_err(at)?;
        if let Some(m) = non_finite(&c) {
            return Err(fail(format!("initializer '{}' {m}", init.name)));
        }
        vals.insert(init.name.clone(), Val::Const(c));
    }
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
    let BoundInput {
        shape,
        file_batch,
        seq_len: bound_seq,
    } = bind_input_shape(input, batch, seq_len)
        .map_err(|m| fail(format!("graph input '{}': {m}", input.name)))?;
    let name = if g.name.is_empty() {
        source.to_string()
    } else {
        g.name.clone()
    };
    let mut graph = Graph::new(&name, source, batch, &input.name, shape);
    graph.seq_len = bound_seq;
    vals.insert(input.name.clone(), Val::Tensor(graph.input));
    let nodes = fuse::fuse(&g.node, &g.initializer, &g.output);
    let mut readers = HashMap::new();
    let read = nodes
        .iter()
        .flat_map(|n| &n.input)
        .chain(g.output.iter().map(|o| &o.name));
    for name in read {
        *readers.entry(name.clone()).or_insert(0) += 1;
    }
    let mut imp = Importer {
        graph,
        vals,
        file_batch,
        readers,
    };

    let mut used_names = HashSet::new();
    for (i, proto_node) in topological(&nodes).map_err(fail)?.into_iter().enumerate() {
        let mut name = if proto_node.name.is_empty() {
            format!("{}_{i}", proto_node.op_type)
        } else {
            proto_node.name.clone()
        };
        while !used_names.insert(name.clone()) {
            name = format!("{name}_{i}");
        }
        let view = NodeView {
            proto: proto_node,
            name,
            file: source,
            opset,
        };
        let domain_ok = proto_node.domain.is_empty() || proto_node.domain == "ai.onnx";
        let handler = registry::lookup(&proto_node.op_type)
            .filter(|_| domain_ok)
            .ok_or_else(|| {
                let op = if domain_ok {
                    proto_node.op_type.clone()
                } else {
                    format!("{}:{}", proto_node.domain, proto_node.op_type)
                };
                ModelError::Unsupported {
                    file: source.to_string(),
                    node: view.name.clone(),
                    op,
                    supported: supported_ops().join(", "),
                }
            })?;
        let out = handler(&mut imp, &view).map_err(|e| pinned_batch(e, file_batch, batch))?;
        // A multi-output node may leave its first output unnamed (a GRU read only through Y_h).
        if let Some(first) = proto_node.output.first().filter(|n| !n.is_empty()) {
            imp.vals.insert(first.clone(), out);
        }
    }

    let out = g
        .output
        .first()
        .ok_or_else(|| fail("the graph declares no output".into()))?;
    if g.output.len() > 1 {
        return Err(fail(format!(
            "expected one graph output, found {}",
            g.output.len()
        )));
    }
    match imp.vals.get(&out.name) {
        Some(Val::Tensor(t)) => imp.graph.output = *t,
        Some(Val::Const(_)) => {
            return Err(fail(format!("graph output '{}' is a constant", out.name)))
        }
        None => {
            return Err(fail(format!(
                "graph output '{}' is not produced by any node",
                out.name
            )))
        }
    }
    check_declared_output(out, imp.graph.shape(imp.graph.output))
        .map_err(|m| fail(format!("graph output '{}': {m}", out.name)))?;
    let mut graph = imp.graph;
    absorb_linear_biases(&mut graph);
    graph.prune();
    graph
        .validate()
        .map_err(|(node, msg)| fail(format!("node {node}: {msg}")))?;
    let conv_biases: Vec<bool> = graph
        .nodes
        .iter()
        .filter_map(|n| {
            if let Op::Conv(c) = &n.op {
                Some(c.bias.is_some())
            } else {
                None
            }
        })
        .collect();
    let has_bn = graph.nodes.iter().any(|n| matches!(n.op, Op::BatchNorm(_)));
    graph.bn_folded = !has_bn && conv_biases.iter().any(|&b| b);
    Ok(graph)
}

/// Gives a bias-free `Linear` (ONNX `MatMul` with a constant) the bias of the `Add` of a
/// constant `[out]` that alone reads it — how exporters write `nn.Linear` on a rank-3 input — so
/// that the bias counts as the layer's parameter; the `Add` is left dead for `prune`.
fn absorb_linear_biases(graph: &mut Graph) {
    for i in 0..graph.nodes.len() {
        let out = graph.nodes[i].output;
        let Op::Linear(l) = &graph.nodes[i].op else {
            continue;
        };
        if l.bias.is_some() || out == graph.output {
            continue;
        }
        let features = l.out_features();
        let [user] = graph.consumers(out)[..] else {
            continue;
        };
        let bias = match &graph.nodes[user].op {
            Op::Binary(crate::ir::Binary {
                kind: crate::ir::BinaryKind::Add,
                constant: Some(c),
            }) if c.value.len() == features && c.value.shape().last() == Some(&features) => {
                c.value.clone().into_shape_with_order(vec![features]).ok()
            }
            _ => None,
        };
        let Some(bias) = bias else { continue };
        let added = graph.nodes[user].output;
        if let Op::Linear(l) = &mut graph.nodes[i].op {
            l.bias = Some(bias);
        }
        for n in &mut graph.nodes {
            n.inputs
                .iter_mut()
                .filter(|v| **v == added)
                .for_each(|v| *v = out);
        }
        if graph.output == added {
            graph.output = out;
        }
    }
}

/// Names of graph inputs whose every use is a recurrent layer's initial state (`LSTM` inputs
/// 5 and 6, `GRU` / `RNN` input 5).
fn initial_state_inputs(nodes: &[NodeProto]) -> HashSet<&str> {
    let mut state = HashSet::new();
    let mut other = HashSet::new();
    for n in nodes {
        let slots: &[usize] = match n.op_type.as_str() {
            "LSTM" => &[5, 6],
            "GRU" | "RNN" => &[5],
            _ => &[],
        };
        for (k, name) in n.input.iter().enumerate() {
            if slots.contains(&k) {
                state.insert(name.as_str());
            } else {
                other.insert(name.as_str());
            }
        }
    }
    state.retain(|n| !other.contains(n) && !n.is_empty());
    state
}

/// Zeros of an initial-state input's declared shape, symbolic dimensions bound to `batch`.
fn zero_state(input: &ValueInfoProto, batch: usize) -> Result<Const, String> {
    let Some(TypeValue::TensorType(t)) = input.type_.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err("is not a tensor with a declared type".into());
    };
    let dims = &t.shape.as_ref().ok_or("has no declared shape")?.dim;
    let shape: Vec<usize> = dims
        .iter()
        .map(|d| match d.value {
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

/// The batch axis of an input declared with `dims` (rules in [`import_proto_with`]).
fn batch_axis(dims: &[onnx_protobuf::tensor_shape_proto::Dimension]) -> usize {
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
    let Some(g) = proto.graph.as_ref() else {
        return Ok(fallback);
    };
    let state_only = initial_state_inputs(&g.node);
    let data: Vec<&ValueInfoProto> = g
        .input
        .iter()
        .filter(|i| {
            !state_only.contains(i.name.as_str()) && !g.initializer.iter().any(|t| t.name == i.name)
        })
        .collect();
    let [input] = data.as_slice() else {
        return Ok(fallback);
    };
    let Some(TypeValue::TensorType(t)) = input.type_.as_ref().and_then(|t| t.value.as_ref()) else {
        return Ok(fallback);
    };
    let Some(dims) = t.shape.as_ref().map(|s| &s.dim) else {
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
    let b = batch_axis(dims);
    let seq = (shape.len() <= 3)
        .then(|| {
            (0..dims.len()).find(|&i| i != b && !matches!(dims[i].value, Some(Dim::DimValue(_))))
        })
        .flatten()
        .map(|i| shape[i]);
    Ok((shape.get(b).copied().unwrap_or(0), seq))
}

/// Reads and imports an ONNX file with its graph input bound to `shape` (see
/// [`binding_for_shape`]).
pub fn import_file_for_shape(path: &Path, shape: &[usize]) -> Result<Graph, ModelError> {
    let (proto, file) = read_file(path)?;
    let (batch, seq_len) = binding_for_shape(&proto, &file, shape)?;
    import_named(path, &proto, &file, batch, seq_len)
}

/// Static input shape with the batch and the sequence length bound (rules in
/// [`import_proto_with`]); also returns the file's fixed batch when it is rebound (so that the
/// importer can rebind constant reshape targets that carry it, [`Importer::file_batch`]) and
/// the bound sequence length of a sequence model.
fn bind_input_shape(
    input: &ValueInfoProto,
    batch: usize,
    seq_len: Option<usize>,
) -> Result<BoundInput, String> {
    let mut file_batch = None;
    let Some(TypeValue::TensorType(t)) = input.type_.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err("is not a tensor with a declared type".into());
    };
    let dims = &t.shape.as_ref().ok_or("has no declared shape")?.dim;
    let batch_axis = batch_axis(dims);
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

/// Compares the inferred output shape with the fixed dimensions the file declares (batch aside).
fn check_declared_output(out: &ValueInfoProto, shape: &[usize]) -> Result<(), String> {
    let Some(TypeValue::TensorType(t)) = out.type_.as_ref().and_then(|t| t.value.as_ref()) else {
        return Ok(());
    };
    let Some(declared) = t.shape.as_ref() else {
        return Ok(());
    };
    if declared.dim.len() != shape.len() {
        return Err(format!(
            "declared rank {} but the graph computes {shape:?}",
            declared.dim.len()
        ));
    }
    for (i, d) in declared.dim.iter().enumerate().skip(1) {
        if let Some(Dim::DimValue(v)) = d.value {
            if v != shape[i] as i64 {
                return Err(format!(
                    "declared size {v} at dimension {i} but the graph computes {shape:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The nodes in an order where each runs after the nodes whose outputs it reads (ONNX files are
/// sorted already; some tools write them unsorted). An input no node produces (an initializer,
/// the graph input, or a dangling name the op handler reports) does not constrain the order. A
/// value produced by two nodes, or a cycle, is an error naming the nodes.
fn topological(nodes: &[NodeProto]) -> Result<Vec<&NodeProto>, String> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for out in n.output.iter().filter(|o| !o.is_empty()) {
            if let Some(&first) = producer.get(out.as_str()) {
                return Err(format!(
                    "value '{out}' is produced by two nodes, {} and {}",
                    describe(nodes, first),
                    describe(nodes, i)
                ));
            }
            producer.insert(out, i);
        }
    }
    let mut ready: HashSet<&str> = HashSet::new();
    let mut done = vec![false; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    while order.len() < nodes.len() {
        let waits_for = |i: usize| {
            nodes[i].input.iter().find(|x| {
                !x.is_empty() && !ready.contains(x.as_str()) && producer.contains_key(x.as_str())
            })
        };
        let Some(i) = (0..nodes.len()).find(|&i| !done[i] && waits_for(i).is_none()) else {
            let start = (0..nodes.len()).find(|&i| !done[i]).unwrap_or(0);
            return Err(cycle(nodes, &producer, &done, start));
        };
        done[i] = true;
        ready.extend(nodes[i].output.iter().map(String::as_str));
        order.push(&nodes[i]);
    }
    Ok(order)
}

/// `name (Op)` of node `i`, or `#i (Op)` for an unnamed one.
fn describe(nodes: &[NodeProto], i: usize) -> String {
    let n = &nodes[i];
    if n.name.is_empty() {
        format!("#{i} ({})", n.op_type)
    } else {
        format!("{} ({})", n.name, n.op_type)
    }
}

/// The message for a cycle among the nodes not yet placed: from `start`, follow an input that an
/// unplaced node produces until a node repeats, then list that loop.
fn cycle(
    nodes: &[NodeProto],
    producer: &HashMap<&str, usize>,
    done: &[bool],
    start: usize,
) -> String {
    let mut path: Vec<usize> = Vec::new();
    let mut at = start;
    let first = loop {
        if let Some(pos) = path.iter().position(|&p| p == at) {
            break pos;
        }
        path.push(at);
        let next = nodes[at]
            .input
            .iter()
            .filter_map(|x| producer.get(x.as_str()).copied())
            .find(|&p| !done[p]);
        match next {
            Some(p) => at = p,
            // cannot happen: an unplaced node that waits for nothing would have been placed
            None => break path.len() - 1,
        }
    };
    // path[k] reads an output of path[k + 1]; print the loop in data-flow order
    let lp: Vec<String> = path[first..]
        .iter()
        .rev()
        .map(|&i| describe(nodes, i))
        .collect();
    format!(
        "the graph has a cycle: {} → {} (each node reads the one before)",
        lp.join(" → "),
        lp[0]
    )
}

#[cfg(test)]
mod tests;
