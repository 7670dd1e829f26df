//! Writes a long ONNX chain and times its import, to check that import time grows linearly with
//! the node count.
//!
//! ```text
//! cargo run --release -p cptsim-models --example onnx_chain -- write relu 100000 chain.onnx [--reverse]
//! cargo run --release -p cptsim-models --example onnx_chain -- time chain.onnx
//! ```
//!
//! `relu` is a chain of `Relu` nodes on a `[N, 8]` input; `linear` repeats `MatMul` by a
//! constant `[8, 8]`, `Add` of a constant bias `[8]` and `Relu` on a `[N, 4, 8]` input (three
//! nodes per layer; the importer folds each bias into its linear layer). `--reverse` lists the
//! nodes in reverse order, as some tools write them. `time` prints the seconds spent decoding,
//! importing (batch 1) and summarising the file.

use std::time::Instant;

use cptsim_models::export::{batched_value_info, float_tensor, node};
use cptsim_models::onnx::{decode, import_proto};
use onnx_protobuf::{GraphProto, Message, ModelProto, OperatorSetIdProto};

/// `n` small deterministic weights of layer `seed`.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|k| ((k + seed) % 7) as f32 * 0.01).collect()
}

/// The chain model: `kind` `relu` or `linear`, `n` nodes (rounded down to whole layers).
fn chain(kind: &str, n: usize, reverse: bool) -> ModelProto {
    let mut g = GraphProto {
        name: format!("{kind}_chain_{n}"),
        ..Default::default()
    };
    let mut x = "x".to_string();
    match kind {
        "relu" => {
            g.input.push(batched_value_info("x", "N", &[8]));
            for i in 0..n {
                let y = format!("t{i}");
                g.node
                    .push(node("Relu", &format!("relu{i}"), &[&x], &y, vec![]));
                x = y;
            }
            g.output.push(batched_value_info(&x, "N", &[8]));
        }
        "linear" => {
            g.input.push(batched_value_info("x", "N", &[4, 8]));
            for i in 0..n / 3 {
                let (w, b) = (format!("w{i}"), format!("b{i}"));
                g.initializer
                    .push(float_tensor(&w, &[8, 8], &values(64, i)));
                g.initializer.push(float_tensor(&b, &[8], &values(8, i)));
                let (m, a, r) = (format!("m{i}"), format!("a{i}"), format!("r{i}"));
                g.node
                    .push(node("MatMul", &format!("mm{i}"), &[&x, &w], &m, vec![]));
                g.node
                    .push(node("Add", &format!("add{i}"), &[&m, &b], &a, vec![]));
                g.node
                    .push(node("Relu", &format!("relu{i}"), &[&a], &r, vec![]));
                x = r;
            }
            g.output.push(batched_value_info(&x, "N", &[4, 8]));
        }
        other => panic!("unknown chain kind {other} (relu or linear)"),
    }
    if reverse {
        g.node.reverse();
    }
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            version: 13,
            ..Default::default()
        }],
        graph: Some(g).into(),
        ..Default::default()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", kind, n, path, ref rest @ ..] => {
            let n: usize = n.parse().expect("node count");
            let reverse = rest.contains(&"--reverse");
            let bytes = chain(kind, n, reverse).write_to_bytes().expect("encode");
            std::fs::write(path, &bytes).expect("write");
            println!("{path}: {} bytes", bytes.len());
        }
        ["time", path] => {
            let bytes = std::fs::read(path).expect("read");
            let t = Instant::now();
            let proto = decode(&bytes, path).expect("decode");
            let decoded = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let graph = import_proto(&proto, path, 1).expect("import");
            let imported = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let summary = graph.summary();
            let summarised = t.elapsed().as_secs_f64();
            println!(
                "{path}: {} ONNX nodes -> {} IR nodes, {} GEMM layers; decode {decoded:.3} s, \
                 import {imported:.3} s, summary {summarised:.3} s",
                proto.graph.node.len(),
                graph.nodes.len(),
                summary.layers.len()
            );
        }
        _ => {
            eprintln!("usage: onnx_chain write relu|linear N FILE [--reverse] | time FILE");
            std::process::exit(2);
        }
    }
}
