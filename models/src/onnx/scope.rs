//! Node names for layers and errors. PyTorch's dynamo exporter names nodes after their op
//! (`n0`, `node_Conv_1082`) and records the PyTorch module each comes from in the node's
//! metadata (`pkg.torch.onnx.name_scopes`: `['', 'features', 'features.0', 'features.0.2',
//! 'hardswish']`, the module path, then the traced call). A node with such a path becomes a
//! layer named after its module (`features.0.2`) and its errors name both (`node n0 (module
//! features.0.2)`); a node without one is named in errors after the nearest node that has one
//! (a producer of its inputs, else a reader of its output).

use std::collections::{HashMap, HashSet};

use onnx_protobuf::NodeProto;

/// The metadata key of the dynamo exporter's scope list.
const NAME_SCOPES: &str = "pkg.torch.onnx.name_scopes";

/// The module path and the traced call a node's metadata records, if it records one with a
/// module.
fn scopes(node: &NodeProto) -> Option<(String, String)> {
    let raw = &node
        .metadata_props
        .iter()
        .find(|p| p.key == NAME_SCOPES)?
        .value;
    let items: Vec<&str> = raw
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim().trim_matches(|c| c == '\'' || c == '"'))
        .collect();
    match items.as_slice() {
        [.., module, call] if !module.is_empty() => Some((module.to_string(), call.to_string())),
        _ => None,
    }
}

/// Whether a node's traced `call` is the node's own multiply when the node multiplies (a
/// `Conv` traced from `conv2d`, a `Gemm` from `linear`); any call for other ops.
fn names_its_multiply(op_type: &str, call: &str) -> bool {
    const GEMM_OPS: [&str; 8] = [
        "Conv",
        "ConvTranspose",
        "Gemm",
        "MatMul",
        "Einsum",
        "LSTM",
        "GRU",
        "RNN",
    ];
    const GEMM_CALLS: [&str; 9] = [
        "conv",
        "linear",
        "matmul",
        "mm",
        "einsum",
        "lstm",
        "gru",
        "rnn",
        "attention",
    ];
    let call = call.to_ascii_lowercase();
    !GEMM_OPS.contains(&op_type) || GEMM_CALLS.iter().any(|c| call.contains(c))
}

/// Per node of `order`: its unique IR name and the label its errors use.
pub fn names(order: &[&NodeProto]) -> Vec<(String, String)> {
    let own: Vec<Option<(String, String)>> = order.iter().map(|n| scopes(n)).collect();
    let mut by_output: HashMap<&str, &str> = HashMap::new();
    let mut by_input: HashMap<&str, &str> = HashMap::new();
    for (n, s) in order.iter().zip(&own) {
        let Some((module, _)) = s else { continue };
        for o in &n.output {
            by_output.insert(o, module);
        }
        for i in &n.input {
            by_input.entry(i).or_insert(module);
        }
    }
    let mut used = HashSet::with_capacity(order.len());
    let mut out = Vec::with_capacity(order.len());
    for (i, (n, s)) in order.iter().zip(&own).enumerate() {
        let file_name = if n.name.is_empty() {
            format!("{}_{i}", n.op_type)
        } else {
            n.name.clone()
        };
        let (mut name, label) = match s {
            // A multiply the export folded another module into (a conv with its batch norm
            // folded records the norm's module): named after the file, labelled with the module.
            Some((module, call)) if !names_its_multiply(&n.op_type, call) => {
                (file_name.clone(), format!("{file_name} (module {module})"))
            }
            Some((module, call)) => {
                let name = if used.contains(module) {
                    format!("{module}/{call}")
                } else {
                    module.clone()
                };
                (name, format!("{file_name} (module {module})"))
            }
            None => {
                let near = n
                    .input
                    .iter()
                    .find_map(|i| by_output.get(i.as_str()))
                    .or_else(|| n.output.iter().find_map(|o| by_input.get(o.as_str())));
                let label = match near {
                    Some(m) => format!("{file_name} (near module {m})"),
                    None => file_name.clone(),
                };
                (file_name, label)
            }
        };
        while !used.insert(name.clone()) {
            name = format!("{name}_{i}");
        }
        out.push((name, label));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_protobuf::StringStringEntryProto;

    fn node(
        name: &str,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        scope: Option<&str>,
    ) -> NodeProto {
        let mut n = NodeProto::new();
        n.name = name.into();
        n.op_type = op.into();
        n.input = inputs.iter().map(|s| s.to_string()).collect();
        n.output = outputs.iter().map(|s| s.to_string()).collect();
        if let Some(v) = scope {
            let mut p = StringStringEntryProto::new();
            p.key = NAME_SCOPES.into();
            p.value = v.into();
            n.metadata_props.push(p);
        }
        n
    }

    #[test]
    fn a_multiply_traced_from_another_module_keeps_the_file_name() {
        let conv = node(
            "node_Conv_183",
            "Conv",
            &["x", "w"],
            &["y"],
            Some("['', 'bn1', '_native_batch_norm_legit_no_training']"),
        );
        let fc = node(
            "node_linear",
            "Gemm",
            &["y"],
            &["z"],
            Some("['', 'fc', 'linear']"),
        );
        let got = names(&[&conv, &fc]);
        assert_eq!(got[0].0, "node_Conv_183");
        assert_eq!(got[0].1, "node_Conv_183 (module bn1)");
        assert_eq!(got[1].0, "fc");
    }

    #[test]
    fn dynamo_nodes_take_their_module_path_and_neighbours_lend_theirs() {
        let a = node(
            "n0",
            "HardSwish",
            &["x"],
            &["a"],
            Some("['', 'features', 'features.0.2', 'hardswish']"),
        );
        let b = node(
            "n1",
            "Relu",
            &["a"],
            &["b"],
            Some("['', 'features', 'features.0.2', 'relu']"),
        );
        let c = node("", "Identity", &["b"], &["c"], None);
        let d = node("legacy", "Relu", &["z"], &["d"], None);
        let top = node("n4", "Relu", &["d"], &["e"], Some("['', 'head', 'relu']"));
        let got = names(&[&a, &b, &c, &d, &top]);
        assert_eq!(
            got[0],
            ("features.0.2".into(), "n0 (module features.0.2)".into())
        );
        assert_eq!(got[1].0, "features.0.2/relu");
        assert_eq!(
            got[2],
            (
                "Identity_2".into(),
                "Identity_2 (near module features.0.2)".into()
            )
        );
        assert_eq!(
            got[3],
            ("legacy".into(), "legacy (near module head)".into())
        );
        assert_eq!(got[4].0, "head");
        // The top-level scope alone ('') is no module.
        let root = node("n9", "Add", &[], &["f"], Some("['', 'add']"));
        assert_eq!(names(&[&root])[0], ("n9".into(), "n9".into()));
    }
}
