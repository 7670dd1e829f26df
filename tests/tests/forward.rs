//! `cptsim forward`: .npy in, eval-mode forward, .npy out; errors for bad inputs.

use std::path::Path;

use cptsim_e2e::{read_npy, run, run_forward, stderr, write_i64_npy, write_npy};

/// `cptsim forward --model MODEL --input X --output Y`.
fn forward(model: &str, x: &Path, y: &Path) -> std::process::Output {
    run_forward(model, x, y, &[])
}

#[test]
fn forward_writes_logits_fp32_and_quantized() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y, yq) = (
        dir.path().join("x.npy"),
        dir.path().join("y.npy"),
        dir.path().join("yq.npy"),
    );
    write_npy(&x, &[3, 1, 28, 28], |i| {
        ((i * 37) % 101) as f32 / 50.0 - 1.0
    });
    let args = |out: &Path, bits: Option<&str>| {
        let extra = bits.map_or(vec![], |b| vec!["--bits", b]);
        run_forward("zoo:lenet5", &x, out, &extra)
    };
    let out = args(&y, None);
    assert!(out.status.success(), "{}", stderr(&out));
    let (shape, fp) = read_npy(&y);
    assert_eq!(shape, "(3, 10)");
    assert!(fp.iter().all(|v| v.is_finite()) && fp.iter().any(|&v| v != 0.0));
    let out = args(&yq, Some("4"));
    assert!(out.status.success(), "{}", stderr(&out));
    let (shape, q) = read_npy(&yq);
    assert_eq!(shape, "(3, 10)");
    // 4-bit weights and activations change the logits, but not beyond recognition.
    let diff: f32 = fp
        .iter()
        .zip(&q)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    let scale: f32 = fp.iter().map(|v| v.abs()).fold(0.0, f32::max);
    assert!(diff > 0.0 && diff < scale, "diff {diff}, scale {scale}");
    // Deterministic.
    let out = args(&yq, Some("4"));
    assert!(out.status.success());
    assert_eq!(read_npy(&yq).1, q);
    // The classifier is fp32 by default (spec §1.4); quantizing it too changes the logits.
    let mut a = vec![
        "forward",
        "--model",
        "zoo:lenet5",
        "--input",
        x.to_str().unwrap(),
    ];
    a.extend([
        "--output",
        yq.to_str().unwrap(),
        "--bits",
        "4",
        "--quantize-last",
        "true",
    ]);
    let out = run(&a);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_ne!(read_npy(&yq).1, q);
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let fwd = |model: &str| forward(model, &x, &y);

    // bad input data: exit code 3
    write_npy(&x, &[2, 3, 32, 32], |_| 0.5);
    let out = fwd("zoo:lenet5");
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("[2, 1, 28, 28]"), "{}", stderr(&out));

    std::fs::write(&x, b"\x93NUMPY\x01\x00").unwrap();
    let out = fwd("zoo:lenet5");
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("x.npy"), "{}", stderr(&out));

    write_npy(&x, &[2, 1, 28, 28], |i| if i == 7 { f32::NAN } else { 0.5 });
    let out = fwd("zoo:lenet5");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("x.npy: element 7 is NaN"),
        "{}",
        stderr(&out)
    );

    // Finite input that overflows inside the model: no silent inf/NaN logits.
    write_npy(&x, &[2, 1, 28, 28], |_| 3e38);
    let out = fwd("zoo:lenet5");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("output element 0 of 20 is") && err.contains("not written"),
        "{err}"
    );

    assert!(!y.exists(), "no output on error");
}

#[test]
fn pytorch_fixture_with_pad_slice_concat_sigmoid_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_npy(&x, &[2, 3, 16, 16], |i| (i as f32 * 0.1).sin());
    let model = "tests/fixtures/mixed_legacy_opset11.onnx";
    let out = forward(model, &x, &y);
    assert!(out.status.success(), "{}", stderr(&out));
    let (shape, v) = read_npy(&y);
    assert_eq!(shape, "(2, 10)");
    assert!(v.iter().all(|x| x.is_finite()));
}

/// The fixture is a legacy export with BN folded into conv bias: it runs and says so once.
#[test]
fn a_file_with_bn_folded_into_conv_runs_with_a_one_line_notice() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_npy(&x, &[4, 1, 6, 6], |i| (i as f32 * 0.3).cos());
    let out = forward("tests/fixtures/tiny_legacy_folded_bn.onnx", &x, &y);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("BN was most likely folded").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(read_npy(&y).0, "(4, 3)");
}

/// The LSTM LM fixture (vocabulary 50, ids `[seq, batch]`) runs on int64 ids of 7 tokens × 3
/// sequences; an id outside the vocabulary is a one-line error naming the embedding node.
#[test]
fn lstm_lm_runs_on_int64_token_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let model = "tests/fixtures/seq/lstm_lm_legacy_opset14.onnx";
    let mut ids: Vec<i64> = (0..21).map(|i| (i * 17 + 3) % 50).collect();
    write_i64_npy(&x, &[7, 3], &ids);
    let out = forward(model, &x, &y);
    assert!(out.status.success(), "{}", stderr(&out));
    let (shape, v) = read_npy(&y);
    assert_eq!(shape, "(7, 3, 50)");
    assert!(v.iter().all(|x| x.is_finite()) && v.iter().any(|&x| x != 0.0));
    // Changing id (0, 1), the first token of sequence 1, leaves sequence 0's logits as they
    // were: the batch is axis 1.
    ids[1] = (ids[1] + 1) % 50;
    write_i64_npy(&x, &[7, 3], &ids);
    let out = forward(model, &x, &y);
    assert!(out.status.success(), "{}", stderr(&out));
    let (_, w) = read_npy(&y);
    let seq0 = |v: &[f32]| -> Vec<f32> {
        (0..7)
            .flat_map(|t| v[t * 150..t * 150 + 50].to_vec())
            .collect()
    };
    assert_eq!(seq0(&v), seq0(&w));
    assert_ne!(v[50..100], w[50..100], "sequence 1 changed");

    std::fs::remove_file(&y).unwrap();
    ids[4] = 50;
    write_i64_npy(&x, &[7, 3], &ids);
    let out = forward(model, &x, &y);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    cptsim_e2e::assert_one_clear_line(&err);
    assert!(
        err.contains("/encoder/Gather") && err.contains("token id 50 at position 4"),
        "{err}"
    );
    assert!(!y.exists(), "no output on error");
}
