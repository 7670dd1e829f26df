//! PyTorch sequence-model exports (tests/fixtures/seq/, made by tests/python/make_seq_fixtures.py)
//! import with the MACs their definitions give, whichever exporter wrote them.

use cptsim_e2e::{run, stderr, stdout};

fn inspect(file: &str, extra: &[&str]) -> serde_json::Value {
    let path = format!("tests/fixtures/seq/{file}");
    let mut args = vec!["inspect", path.as_str(), "--batch", "3", "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "{file}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or(serde_json::Value::Null)
}

fn ops(j: &serde_json::Value) -> Vec<String> {
    j["layers"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|l| l["op"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Vocabulary 50, embedding 16, hidden 24, 7 tokens (the script's constants).
#[test]
fn recurrent_language_models() {
    let per_token_lstm = 4 * 24 * (16 + 24) + 4 * 24 * (24 + 24) + 24 * 50;
    let j = inspect("lstm_lm_legacy_opset14.onnx", &["--seq-len", "7"]);
    assert_eq!(j["totals"]["macs"], 7 * per_token_lstm);
    assert_eq!(ops(&j), ["Recurrent", "Recurrent", "Linear"]);
    assert_eq!(j["input"], serde_json::json!([7, 3]));
    // Embedding 50·16, two LSTMs with both biases, the decoder.
    let lstm = |i: u64| 4 * 24 * (i + 24) + 2 * 4 * 24;
    assert_eq!(
        j["totals"]["params"],
        50 * 16 + lstm(16) + lstm(24) + 24 * 50 + 50
    );
    // A symbolic sequence: any length.
    let j = inspect("lstm_lm_legacy_opset14.onnx", &["--seq-len", "40"]);
    assert_eq!(j["totals"]["macs"], 40 * per_token_lstm);
    let j = inspect("gru_lm_legacy_opset14.onnx", &["--seq-len", "7"]);
    assert_eq!(j["totals"]["macs"], 7 * (3 * 24 * (16 + 24) + 24 * 50));
}

/// d 32, 4 heads, FFN 64, 2 layers, vocabulary 50.
#[test]
fn transformer_lm_agrees_across_exporters() {
    let per_token = 2 * (32 * 96 + 32 * 32 + 32 * 64 + 64 * 32) + 32 * 50;
    let attn = |t: u64| 2 * 2 * t * t * 32;
    for file in [
        "transformer_lm_legacy_opset14.onnx",
        "transformer_lm_dynamo_opset18.onnx",
    ] {
        let j = inspect(file, &["--seq-len", "7"]);
        assert_eq!(j["totals"]["macs"], 7 * per_token + attn(7), "{file}");
        let aa = j["layers"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter(|l| l["gemm"]["operands"] == "activation_activation")
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(aa, 4, "{file}");
    }
    let j = inspect("transformer_lm_dynamo_opset18.onnx", &["--seq-len", "12"]);
    assert_eq!(j["totals"]["macs"], 12 * per_token + attn(12));
    // The legacy exporter baked the traced length into a reshape (onnxruntime fails the same
    // way): another length is an error naming the node.
    let out = run(&[
        "inspect",
        "tests/fixtures/seq/transformer_lm_legacy_opset14.onnx",
        "--seq-len",
        "12",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("Reshape") && err.lines().count() == 1, "{err}");
    // Without --seq-len the symbolic axis is named.
    let out = run(&[
        "inspect",
        "tests/fixtures/seq/transformer_lm_dynamo_opset18.onnx",
    ]);
    assert!(stderr(&out).contains("--seq-len"), "{}", stderr(&out));
}

/// 16×16 images, 8×8 patches, d 32, 2 heads, MLP 64, 2 layers, 10 classes.
#[test]
fn vit_agrees_across_exporters() {
    let tokens = 5u64;
    let patch = 4 * 32 * 3 * 64;
    let blocks = 2 * tokens * (32 * 96 + 32 * 32 + 32 * 64 + 64 * 32);
    let attn = 2 * 2 * 2 * tokens * tokens * 16;
    for file in ["vit_legacy_opset14.onnx", "vit_dynamo_opset18.onnx"] {
        let j = inspect(file, &[]);
        assert_eq!(
            j["totals"]["macs"],
            patch + blocks + attn + 32 * 10,
            "{file}"
        );
        assert_eq!(ops(&j).first().map(String::as_str), Some("Conv"), "{file}");
    }
}
