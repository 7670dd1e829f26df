//! ONNX import: `ModelProto` → [`Graph`].
//!
//! A node wrapper with typed, checked attribute getters (`node`), one module per op family
//! ([`ops`]), each registering its op types' handlers into the op-type → handler table
//! ([`registry`]). Handlers see each ONNX tensor either as a run-time tensor of the IR or as a
//! constant; integer shape subgraphs (`Shape → Gather → Unsqueeze → Concat → Reshape`, `F.pad`'s
//! pad-building chains) are thereby evaluated at import and leave no trace in the IR. The IR
//! nodes handlers emit are shape-checked by their op's rule ([`crate::ir::rules`]).

mod context;
mod external;
mod finish;
mod fold;
mod fuse;
mod input;
mod node;
pub mod ops;
mod order;
pub mod registry;
mod scope;
mod tensor;
mod value;

use std::collections::HashMap;
use std::path::Path;

use onnx_protobuf::{GraphProto, Message, ModelProto, NodeProto};

use crate::error::ModelError;
use crate::ir::Graph;
use context::Importer;
pub use input::{binding_for_shape, fixed_batch};
use node::NodeView;
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
    let (proto, file) = read_model(path)?;
    import_named(path, &proto, &file, batch, seq_len)
}

/// [`read_file`] with the tensors it keeps in external data files loaded.
fn read_model(path: &Path) -> Result<(ModelProto, String), ModelError> {
    let (mut proto, file) = read_file(path)?;
    external::load(&mut proto, path)?;
    Ok((proto, file))
}

/// The decoded model in `path` (its external data, if any, not read) and the file name errors
/// use.
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

/// Reads and imports an ONNX file with its graph input bound to `shape` (see
/// [`binding_for_shape`]).
pub fn import_file_for_shape(path: &Path, shape: &[usize]) -> Result<Graph, ModelError> {
    let (proto, file) = read_model(path)?;
    let (batch, seq_len) = binding_for_shape(&proto, &file, shape)?;
    import_named(path, &proto, &file, batch, seq_len)
}

/// The batch the ONNX file at `path` fixes on its data input ([`fixed_batch`]); `None` when
/// its batch is symbolic or the file cannot be read (its import then reports why).
pub fn file_batch(path: &Path) -> Option<usize> {
    read_file(path)
        .ok()
        .and_then(|(proto, _)| fixed_batch(&proto))
}

/// The graph inputs of the ONNX file at `path` that are recurrent layers' initial states (see
/// [`import_proto_with`]): the import binds them to zeros. Empty when there are none or the file
/// cannot be read.
pub fn zero_state_inputs(path: &Path) -> Vec<String> {
    let Ok((proto, _)) = read_file(path) else {
        return Vec::new();
    };
    let Some(g) = proto.graph.as_ref() else {
        return Vec::new();
    };
    let states = input::initial_state_inputs(&g.node);
    g.input
        .iter()
        .filter(|i| states.contains(i.name.as_str()))
        .map(|i| i.name.clone())
        .collect()
}

/// The supported op types (default domain), family by family.
pub fn supported_ops() -> Vec<&'static str> {
    ops::registry().op_types().to_vec()
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

/// [`import_proto_with`] under `opts`, in the steps below: check the requested sizes, decode
/// the initializers, bind the graph input, fuse decomposed op chains, import the nodes in
/// dependency order, then resolve the output and finish the graph.
pub fn import_proto_opts(
    proto: &ModelProto,
    source: &str,
    batch: usize,
    opts: ImportOptions,
) -> Result<Graph, ModelError> {
    let fail = |m: &str| ModelError::graph(source, m);
    if opts.seq_len == Some(0) {
        return Err(fail("the sequence length must be at least 1"));
    }
    if batch == 0 {
        return Err(fail("batch must be at least 1"));
    }
    let g = proto
        .graph
        .as_ref()
        .ok_or_else(|| fail("the model has no graph"))?;
    let mut vals = initializers(g, source, opts.shapes_only)?;
    let (graph, file_batch) = input::bind_graph_input(g, source, batch, opts.seq_len, &mut vals)?;
    let fused = fuse::fuse(&g.node, &g.initializer, &g.output);
    let nodes: Vec<&NodeProto> = fused.iter().map(|n| n.as_ref()).collect();
    // The whole graph holds together (each value made once, no cycle) before the nodes only
    // further outputs need are dropped.
    order::topological(&nodes).map_err(|m| fail(&m))?;
    let nodes = order::needed_for_first_output(&nodes, &g.output).map_err(|m| fail(&m))?;
    let mut imp = Importer::new(graph, vals, file_batch, &nodes, &g.output);
    let order = order::topological(&nodes).map_err(|m| fail(&m))?;
    import_nodes(&mut imp, &order, source, opset(proto), batch)?;
    finish::resolve_output(&mut imp, g, source)?;
    finish::finish(imp.graph, source)
}

/// The default-domain opset the model imports (1 when it declares none).
fn opset(proto: &ModelProto) -> i64 {
    proto
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(1, |o| o.version)
}

/// Every initializer decoded, by name; with `shapes_only` a float tensor without values reads
/// as zeros. A non-finite weight is an error naming the initializer.
fn initializers(
    g: &GraphProto,
    source: &str,
    shapes_only: bool,
) -> Result<HashMap<String, Val>, ModelError> {
    let mut vals = HashMap::with_capacity(g.initializer.len());
    for init in &g.initializer {
        let at = |m: String| ModelError::graph(source, format!("initializer '{}': {m}", init.name));
        if shapes_only {
            if let Some(zeros) = tensor::zeros_without_values(init).map_err(at)? {
                vals.insert(init.name.clone(), Val::Const(zeros));
                continue;
            }
        }
        let c = tensor::decode(init).map_err(at)?;
        if let Some(m) = non_finite(&c) {
            let msg = format!("initializer '{}' {m}", init.name);
            return Err(ModelError::graph(source, msg));
        }
        vals.insert(init.name.clone(), Val::Const(c));
    }
    Ok(vals)
}

/// Imports `order`'s nodes one by one, folding those on constants and handing the others to
/// their op's handler, recording what each first output stands for. Nodes get unique names:
/// the PyTorch module path the file records, else the file's name, else `OpType_index`
/// ([`scope::names`]).
fn import_nodes(
    imp: &mut Importer,
    order: &[&NodeProto],
    source: &str,
    opset: i64,
    batch: usize,
) -> Result<(), ModelError> {
    let names = scope::names(order);
    for (proto_node, (name, label)) in order.iter().copied().zip(names) {
        let view = NodeView {
            proto: proto_node,
            name,
            label,
            file: source,
            opset,
        };
        let out = match fold::try_fold(imp, &view) {
            Some(folded) => folded,
            None => handler_for(&view)?(imp, &view),
        }
        .map_err(|e| pinned_batch(e, imp.file_batch, batch))?;
        // A multi-output node may leave its first output unnamed (a GRU read only through Y_h).
        if let Some(first) = proto_node.output.first().filter(|n| !n.is_empty()) {
            imp.vals.insert(first.clone(), out);
        }
    }
    Ok(())
}

/// The handler of `node`'s op type, or an error listing the supported ones (ops of another
/// domain are named with it).
fn handler_for(node: &NodeView) -> Result<registry::Handler, ModelError> {
    let p = node.proto;
    let domain_ok = p.domain.is_empty() || p.domain == "ai.onnx";
    ops::registry()
        .get(&p.op_type)
        .filter(|_| domain_ok)
        .ok_or_else(|| ModelError::Unsupported {
            file: node.file.to_string(),
            node: node.label.clone(),
            op: if domain_ok {
                p.op_type.clone()
            } else {
                format!("{}:{}", p.domain, p.op_type)
            },
            supported: supported_ops().join(", "),
        })
}

#[cfg(test)]
mod tests;
