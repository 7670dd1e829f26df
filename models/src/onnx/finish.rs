//! The steps after the last node: the graph output checked against its declaration, linear
//! biases absorbed, dead nodes pruned, the graph validated.

use onnx_protobuf::tensor_shape_proto::dimension::Value as Dim;
use onnx_protobuf::type_proto::Value as TypeValue;
use onnx_protobuf::ValueInfoProto;

use onnx_protobuf::GraphProto;

use super::context::Importer;
use super::value::Val;
use crate::error::ModelError;
use crate::ir::{Graph, Op};

/// Sets the graph's output to the tensor the file's one declared output names, after checking
/// it is a run-time tensor of the declared shape.
pub fn resolve_output(imp: &mut Importer, g: &GraphProto, source: &str) -> Result<(), ModelError> {
    let fail = |m: String| ModelError::graph(source, m);
    let out = g
        .output
        .first()
        .ok_or_else(|| fail("the graph declares no output".into()))?;
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
    let rebound = imp.file_batch.map(|file| (file, imp.graph.batch));
    check_declared_output(out, imp.graph.shape(imp.graph.output), rebound)
        .map_err(|m| fail(format!("graph output '{}': {m}", out.name)))
}

/// The imported graph made final: linear biases absorbed, dead nodes pruned, every shape
/// re-checked, and [`Graph::bn_folded`] set when no BatchNorm is left but a conv has a bias.
pub fn finish(mut graph: Graph, source: &str) -> Result<Graph, ModelError> {
    absorb_linear_biases(&mut graph);
    graph.prune();
    graph
        .validate()
        .map_err(|(node, msg)| ModelError::graph(source, format!("node {node}: {msg}")))?;
    let has_bn = graph.nodes.iter().any(|n| matches!(n.op, Op::BatchNorm(_)));
    let conv_bias = graph
        .nodes
        .iter()
        .any(|n| matches!(&n.op, Op::Conv(c) if c.bias.is_some()));
    graph.bn_folded = !has_bn && conv_bias;
    Ok(graph)
}

/// Gives a bias-free `Linear` (ONNX `MatMul` with a constant) the bias of the `Add` of a
/// constant `[out]` that alone reads it — how exporters write `nn.Linear` on a rank-3 input — so
/// that the bias counts as the layer's parameter; the `Add` is left dead for `prune`.
///
/// One consumer index serves the whole pass: a rewiring moves the readers of an `Add`'s output to
/// the output of the linear layer before it, which changes no other linear layer's readers.
fn absorb_linear_biases(graph: &mut Graph) {
    let users = graph.consumer_index();
    for i in 0..graph.nodes.len() {
        let out = graph.nodes[i].output;
        let Op::Linear(l) = &graph.nodes[i].op else {
            continue;
        };
        if l.bias.is_some() || out == graph.output {
            continue;
        }
        let features = l.out_features();
        let [user] = users.of(out)[..] else {
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
        for &r in users.of(added) {
            graph.nodes[r]
                .inputs
                .iter_mut()
                .filter(|v| **v == added)
                .for_each(|v| *v = out);
        }
        if graph.output == added {
            graph.output = out;
        }
    }
}

/// Compares the inferred output shape with the fixed dimensions the file declares (batch aside:
/// axis 0, and with `rebound` = (the file's fixed batch, the bound one) any axis where the file
/// declares its batch and the graph computes the bound one — a sequence-first model's axis 1).
fn check_declared_output(
    out: &ValueInfoProto,
    shape: &[usize],
    rebound: Option<(usize, usize)>,
) -> Result<(), String> {
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
            let batch_axis = rebound
                .is_some_and(|(file, bound)| i64::try_from(file) == Ok(v) && shape[i] == bound);
            if v != shape[i] as i64 && !batch_axis {
                return Err(format!(
                    "declared size {v} at dimension {i} but the graph computes {shape:?}"
                ));
            }
        }
    }
    Ok(())
}
