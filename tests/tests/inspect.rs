//! `cptsim inspect` end to end: real PyTorch exports import with the expected totals, and every
//! kind of bad input gives one clear error line and exit code 2.

use cptsim_e2e::{run, stderr, stdout, workspace_root};

fn fixture(name: &str) -> String {
    format!("tests/fixtures/{name}")
}

fn json_of(model: &str) -> serde_json::Value {
    let out = run(&["inspect", model, "--batch", "3", "--format", "json"]);
    assert!(out.status.success(), "{model}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or(serde_json::Value::Null)
}

#[test]
fn mixed_cnn_exports_agree_across_exporters() {
    for (file, bn) in [
        ("mixed_legacy_opset11.onnx", 0),
        ("mixed_legacy_opset14_train.onnx", 6144),
        ("mixed_dynamo_opset18.onnx", 0),
    ] {
        let j = json_of(&fixture(file));
        assert_eq!(j["input"], serde_json::json!([3, 3, 16, 16]), "{file}");
        assert_eq!(j["totals"]["macs"], 296_588, "{file}");
        assert_eq!(j["totals"]["bn_elements"], bn, "{file}");
        assert_eq!(j["totals"]["ops_per_image"], 296_588 + 2 * bn, "{file}");
        let layers = j["layers"].as_array().cloned().unwrap_or_default();
        assert_eq!(layers.len(), 7, "{file}");
        let dw = &layers[4];
        assert_eq!(
            (dw["groups"].as_u64(), dw["macs"].as_u64()),
            (Some(16), Some(9216)),
            "{file}"
        );
        for key in [
            "name",
            "op",
            "in_shape",
            "out_shape",
            "kernel",
            "stride",
            "groups",
            "params",
            "macs",
        ] {
            assert!(dw.get(key).is_some(), "{file}: layer lacks {key}");
        }
    }
}

#[test]
fn folded_batchnorm_is_announced() {
    let out = run(&["inspect", &fixture("tiny_legacy_folded_bn.onnx")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("BN was most likely folded into conv"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        json_of(&fixture("tiny_dynamo_opset20.onnx"))["totals"]["macs"],
        588
    );
}

#[test]
fn csv_has_a_row_per_layer() {
    let out = run(&[
        "inspect",
        &fixture("mixed_legacy_opset11.onnx"),
        "--format",
        "csv",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 8);
    assert!(
        text.lines()
            .nth(5)
            .unwrap_or_default()
            .contains(",depthwise,"),
        "{text}"
    );
}

/// A bad model file: exit code 3 (bad input data) and one clear line.
fn fails_with(model: &str, expected: &[&str]) {
    fails_with_code(3, model, expected);
}

fn fails_with_code(code: i32, model: &str, expected: &[&str]) {
    let out = run(&["inspect", model]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{model}: {err}");
    assert_eq!(err.lines().count(), 1, "{model}: {err}");
    for e in expected {
        assert!(err.contains(e), "{model}: expected '{e}' in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_models_give_one_clear_error_line() {
    fails_with_code(
        2,
        "tests/fixtures/no_such_model.onnx",
        &["cannot read tests/fixtures/no_such_model.onnx"],
    );
    fails_with(
        &fixture("bad_unsupported_op.onnx"),
        &[
            "bad_unsupported_op.onnx",
            "node norm1",
            "'LRN'",
            "supported ops: Conv",
        ],
    );
    fails_with(
        &fixture("bad_missing_initializer.onnx"),
        &["node conv1 (Conv)", "input 'conv1.weight' is not produced"],
    );
    fails_with(
        &fixture("bad_inconsistent_shapes.onnx"),
        &["node conv1 (Conv)", "does not fit input"],
    );
    fails_with(
        &fixture("bad_conv_weight_rank.onnx"),
        &["node conv1 (Conv)", "has rank 3"],
    );
    fails_with(
        &fixture("bad_zero_size_dim.onnx"),
        &["bad_zero_size_dim.onnx", "graph input 'x'", "size 0"],
    );
    fails_with_code(2, "zoo:nonexistent", &["unknown zoo model `nonexistent`"]);
}

#[test]
fn absurd_batches_are_rejected_not_wrapped() {
    // Shape products used to wrap around, giving wrong shapes or confusing Reshape errors.
    for model in ["zoo:resnet50", &fixture("mixed_legacy_opset11.onnx")] {
        let out = run(&["inspect", model, "--batch", "18446744073709551615"]);
        let err = stderr(&out);
        // the graph's shapes do not fit: bad input data
        assert_eq!(out.status.code(), Some(3), "{model}: {err}");
        assert_eq!(err.lines().count(), 1, "{model}: {err}");
        assert!(
            err.contains("graph input") && err.contains("2^40 elements"),
            "{model}: {err}"
        );
    }
}

#[test]
fn empty_random_and_truncated_files_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("write: {e}"));
        p.display().to_string()
    };
    let empty = write("empty.onnx", &[]);
    fails_with(&empty, &["empty.onnx: empty file"]);
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let random = write("random.onnx", &random);
    fails_with(&random, &["random.onnx: "]);
    let full = std::fs::read(workspace_root().join(fixture("mixed_legacy_opset11.onnx")))
        .unwrap_or_default();
    let cut = write("cut.onnx", &full[..full.len() * 2 / 3]);
    fails_with(&cut, &["cut.onnx: "]);
}
