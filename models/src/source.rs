//! Resolving a model named on the command line: `zoo:NAME` is a built-in model, anything else
//! an ONNX file path.

use std::path::Path;

use crate::error::ModelError;
use crate::ir::Graph;
use crate::summary::ModelSummary;
use crate::zoo;

/// Seed of the built-in models' initial weights when the caller does not choose one.
pub const DEFAULT_ZOO_SEED: u64 = 0;

/// Loads the model `spec` names, with the batch dimension bound to `batch`.
///
/// `zoo:NAME` builds the zoo model with its default class count and [`DEFAULT_ZOO_SEED`].
pub fn load_graph(spec: &str, batch: usize) -> Result<Graph, ModelError> {
    load_graph_with(spec, batch, None)
}

/// [`load_graph`] of a sequence model at `seq_len` tokens (a zoo sequence model's default when
/// `None`; an ONNX file with a symbolic sequence axis needs it, see
/// [`crate::onnx::import_proto_with`]).
pub fn load_graph_with(
    spec: &str,
    batch: usize,
    seq_len: Option<usize>,
) -> Result<Graph, ModelError> {
    check_request(spec, batch, seq_len)?;
    let name = spec.strip_prefix("zoo:");
    let sequence = name.and_then(zoo::seq::entry);
    if let (Some(name), Some(seq_len)) = (name, seq_len) {
        if sequence.is_none_or(|e| e.seq_len.is_none()) {
            let name = name.to_string();
            return Err(zoo::ZooError::NoSequence { name, seq_len }.into());
        }
    }
    match name {
        Some(name) if sequence.is_some() => {
            zoo::seq::graph(name, spec, batch, seq_len).map_err(|m| ModelError::graph(spec, m))
        }
        Some(name) => zoo_graph(name, None, spec, batch),
        None => crate::onnx::import_file_with(Path::new(spec), batch, seq_len),
    }
}

/// [`load_graph_with`] bound to the shape of the data the model will run on: for a file, the
/// batch and sequence length its input declares there ([`crate::onnx::binding_for_shape`]); for
/// a zoo model, the batch is axis 0 (images, `[B, T]` token ids) or axis 1 (`[T, B]` ids,
/// [`zoo::seq::is_seq_first`]) and a language model's sequence length the other axis.
pub fn load_graph_for_shape(spec: &str, shape: &[usize]) -> Result<Graph, ModelError> {
    let Some(name) = spec.strip_prefix("zoo:") else {
        return crate::onnx::import_file_for_shape(Path::new(spec), shape);
    };
    let lm = zoo::seq::entry(name).is_some_and(|e| e.seq_len.is_some());
    match shape {
        [t, b] if lm && zoo::seq::is_seq_first(name) => load_graph_with(spec, *b, Some(*t)),
        [b, t] if lm => load_graph_with(spec, *b, Some(*t)),
        _ => load_graph_with(spec, shape.first().copied().unwrap_or(0), None),
    }
}

/// A language model to train on a corpus of `vocab` tokens, at `batch` streams of `seq_len`
/// tokens (the model's default, or a file's fixed length, when `None`): a zoo LM is built with
/// that vocabulary (see [`zoo::seq::graph_with_vocab`]); an ONNX LM keeps its own, and its head
/// must have an output for every token of the corpus.
pub fn load_lm_graph(
    spec: &str,
    batch: usize,
    seq_len: Option<usize>,
    vocab: usize,
) -> Result<Graph, ModelError> {
    check_request(spec, batch, seq_len)?;
    match spec.strip_prefix("zoo:") {
        Some(name) if zoo::seq::is_lm(name) => {
            zoo::seq::graph_with_vocab(name, spec, batch, seq_len, Some(vocab))
                .map_err(|m| ModelError::graph(spec, m))
        }
        Some(name) => Err(ModelError::graph(
            spec,
            format!(
                "zoo:{name} is not a language model (zoo language models: lstm-lm, \
                 transformer-lm, ptb-lstm, transformer-wt103)"
            ),
        )),
        None => {
            let g = crate::onnx::import_file_with(Path::new(spec), batch, seq_len)?;
            let head = g.head_outputs();
            if head < vocab {
                return Err(ModelError::graph(
                    spec,
                    format!(
                        "the model's head has {head} outputs but the corpus has {vocab} tokens \
                         (a language model needs an output per token)"
                    ),
                ));
            }
            Ok(g)
        }
    }
}

/// A batch of 0 or a sequence of 0 tokens fits no model: a usage error before anything loads.
fn check_request(spec: &str, batch: usize, seq_len: Option<usize>) -> Result<(), ModelError> {
    let msg = match (batch, seq_len) {
        (0, _) => "batch must be at least 1",
        (_, Some(0)) => "the sequence length must be at least 1",
        _ => return Ok(()),
    };
    Err(ModelError::Request {
        file: spec.to_string(),
        msg: msg.into(),
    })
}

/// The model `spec` names, for costing: a `zoo:` model is built without drawing weights (its
/// conv and linear weights are zeros never written, see [`zoo::build_shapes`]), so shapes,
/// MACs and costs come at a fraction of [`load_graph_with`]'s time and memory; an ONNX file is
/// imported as by [`load_graph_with`]. Not for running the model.
pub fn load_shapes(spec: &str, batch: usize, seq_len: Option<usize>) -> Result<Graph, ModelError> {
    check_request(spec, batch, seq_len)?;
    match spec.strip_prefix("zoo:") {
        Some(name) if zoo::seq::entry(name).is_none() && seq_len.is_none() => {
            let proto = zoo::build_shapes(name, None)?;
            zoo_import(
                &proto,
                spec,
                batch,
                crate::onnx::ImportOptions::shapes_only(),
            )
        }
        _ => load_graph_with(spec, batch, seq_len),
    }
}

/// The zoo model `name` (head of `classes` outputs, or its default) as a graph. A zoo model is
/// built as defined, so a conv bias without batch norm (LeNet-5) is not a folded BN.
pub(crate) fn zoo_graph(
    name: &str,
    classes: Option<usize>,
    spec: &str,
    batch: usize,
) -> Result<Graph, ModelError> {
    let proto = zoo::build(name, classes, DEFAULT_ZOO_SEED)?;
    zoo_import(&proto, spec, batch, crate::onnx::ImportOptions::default())
}

/// Imports a zoo model's proto. A zoo model is built as defined, so a conv bias without batch
/// norm (LeNet-5) is not a folded BN.
fn zoo_import(
    proto: &onnx_protobuf::ModelProto,
    spec: &str,
    batch: usize,
    opts: crate::onnx::ImportOptions,
) -> Result<Graph, ModelError> {
    let mut graph = crate::onnx::import_proto_opts(proto, spec, batch, opts)?;
    graph.bn_folded = false;
    Ok(graph)
}

/// The per-layer summary of the model `spec` names (see [`load_graph`]).
pub fn load_summary(spec: &str, batch: usize) -> Result<ModelSummary, ModelError> {
    Ok(load_shapes(spec, batch, None)?.summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec methods.md §2.3: conv+FC MACs and BN output elements per image of every model in the
    /// table, through the full path a user takes (zoo → ONNX bytes → importer → summary).
    #[test]
    fn zoo_totals_match_the_spec_table() {
        let table: &[(&str, u64, u64)] = &[
            ("resnet20", 40_818_944, 200_704),
            ("resnet38", 83_286_272, 372_736),
            ("resnet74", 168_220_928, 716_800),
            ("resnet110", 253_155_584, 1_060_864),
            ("resnet152", 352_246_016, 1_462_272),
            ("resnet164", 380_557_568, 1_576_960),
            ("mobilenetv2", 91_270_144, 1_724_928),
            ("resnet18", 1_814_073_344, 2_483_712),
            ("resnet34", 3_663_761_408, 3_738_112),
            ("resnet50", 4_089_184_256, 11_113_984),
        ];
        for &(name, macs, bn) in table {
            let s = match load_summary(&format!("zoo:{name}"), 1) {
                Ok(s) => s,
                Err(e) => panic!("{name}: {e}"),
            };
            assert_eq!(s.total_macs(), macs, "{name} MACs");
            assert_eq!(s.bn_elements, bn, "{name} BN elements");
        }
    }

    /// The costing path sees the same model: every zoo model's summary from [`load_shapes`]
    /// equals the one from the weighted graph, and its conv/linear weights carry no values.
    #[test]
    fn shapes_only_zoo_models_have_the_same_summary_and_no_weight_values() {
        for name in zoo::names() {
            let spec = format!("zoo:{name}");
            let full = load_graph(&spec, 2).unwrap_or_else(|e| panic!("{name}: {e}"));
            let shapes = load_shapes(&spec, 2, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(shapes.summary(), full.summary(), "{name}");
            assert_eq!(shapes.bn_folded, full.bn_folded, "{name}");
            let proto = zoo::build_shapes(name, None).unwrap();
            let graph = proto.graph.unwrap_or_default();
            let weights: Vec<_> = graph
                .initializer
                .iter()
                .filter(|t| t.name.ends_with(".weight") && t.dims.len() > 1)
                .collect();
            assert!(!weights.is_empty(), "{name}");
            assert!(weights.iter().all(|t| t.raw_data.is_empty()), "{name}");
        }
    }

    /// A float initializer without values is an error in an ordinary import: only the costing
    /// path of a zoo model accepts it.
    #[test]
    fn a_weight_without_values_is_an_error_outside_the_shapes_path() {
        let proto = zoo::build_shapes("lenet5", None).unwrap();
        let err = crate::onnx::import_proto(&proto, "x.onnx", 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.onnx") && err.contains("weight"), "{err}");
    }

    #[test]
    fn unknown_zoo_name_lists_the_valid_ones() {
        let err = load_graph("zoo:resnet9000", 1).map(|_| ()).err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains("resnet9000") && msg.contains("resnet74"),
            "{msg}"
        );
    }
}
