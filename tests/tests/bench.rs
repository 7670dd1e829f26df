//! `cptsim bench train|eval`: the JSON fields users read, sane values, clear errors.

use cptsim_e2e::{run, stderr, stdout};

/// Asserts that each of `keys` in `v` is a finite number above zero.
fn assert_positive(v: &serde_json::Value, keys: &[&str]) {
    for key in keys {
        let x = v[key].as_f64().unwrap_or(-1.0);
        assert!(x > 0.0 && x.is_finite(), "{key} = {}", v[key]);
    }
}

#[test]
fn bench_train_prints_the_issue_fields() {
    let out = run(&[
        "bench",
        "train",
        "--model",
        "zoo:lenet5",
        "--batch",
        "16",
        "--steps",
        "2",
        "--quantizer",
        "sbm",
        "--threads",
        "1",
        "--peak-secs",
        "0.1",
        "--shape-secs",
        "0.01",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_positive(
        &v,
        &[
            "images_per_s",
            "images_per_cpu_s",
            "step_ms_median",
            "gemm_gflops",
            "peak_gflops",
            "stream_gbs",
        ],
    );
    // One thread: the all-threads streaming rate is the one-thread figure.
    assert_eq!(v["stream_gbs_all_threads"], v["stream_gbs"]);
    assert!(v.get("load_avg").is_some());
    // The peak comes from its own FMA kernel on a named vector path, not from the GEMM.
    let path = v["vector_path"].as_str().unwrap_or("");
    assert!(
        ["AVX-512", "AVX2", "portable"]
            .iter()
            .any(|p| path.starts_with(p)),
        "{path}"
    );
    let flops = table_flops(&v);
    assert!((flops / 1e9 - v["gemm_gflop_per_step"].as_f64().unwrap()).abs() < 1e-9);
    // The same FLOPs as a profiled step ran them, with their share of the GEMM time.
    let flops = in_run_flops(&v, "step");
    assert!((flops / 1e9 - v["gemm_gflop_per_step"].as_f64().unwrap()).abs() < 1e-9);
    assert_eq!(v["threads"], 1);
    // Three GEMMs per layer at 2 FLOPs per MAC, less the first conv's input gradient (its
    // 117 600 MACs; training does not need it): (6 · 416 520 − 2 · 117 600) MACs · 16 images.
    let per_step = v["gemm_gflop_per_step"].as_f64().unwrap();
    assert!(
        (per_step - (6.0 * 416_520.0 - 2.0 * 117_600.0) * 16.0 / 1e9).abs() < 1e-9,
        "{per_step}"
    );
}

#[test]
fn bench_times_language_models_on_token_ids_with_the_shapes_their_steps_run() {
    // Sequence-first LSTM (ids [35, 4]), batch-first Transformer (ids [4, 64]) and an imported
    // GRU LM with a symbolic sequence axis (ids [7, 4]): ids drawn from the vocabulary, a label
    // per token, linear layers' rows counted per token, the recurrent cells' products listed.
    let gru = "tests/fixtures/seq/gru_lm_legacy_opset14.onnx";
    for (model, seq) in [
        ("zoo:lstm-lm", "35"),
        ("zoo:transformer-lm", "64"),
        (gru, "7"),
    ] {
        let out = run(&[
            "bench",
            "train",
            "--model",
            model,
            "--seq-len",
            seq,
            "--batch",
            "4",
            "--steps",
            "1",
            "--threads",
            "1",
            "--peak-secs",
            "0.01",
            "--shape-secs",
            "0.001",
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["samples"], "sequences", "{model}");
        assert_positive(&v, &["images_per_s", "gemm_gflop_per_step"]);
        let per_step = v["gemm_gflop_per_step"].as_f64().unwrap();
        let table = table_flops(&v);
        assert!(
            (table / 1e9 - per_step).abs() < 1e-9,
            "{model}: {table} vs {per_step}"
        );
        assert!(
            (in_run_flops(&v, "step") / 1e9 - per_step).abs() < 1e-9,
            "{model}"
        );

        let out = run(&[
            "bench",
            "eval",
            "--model",
            model,
            "--seq-len",
            seq,
            "--batch",
            "4",
            "--passes",
            "1",
            "--threads",
            "1",
            "--peak-secs",
            "0.01",
        ]);
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        assert!(stdout(&out).contains("sequences/s"), "{}", stdout(&out));
    }
}

/// The FLOPs of one step by the shape table (`gemm_shapes`), after checking that every row has
/// a positive rate.
fn table_flops(v: &serde_json::Value) -> f64 {
    let mut flops = 0.0;
    for s in v["gemm_shapes"].as_array().expect("gemm_shapes") {
        let f = s["fraction_of_peak"].as_f64().unwrap_or(-1.0);
        assert!(f > 0.0 && f.is_finite(), "{s}");
        let dim = |k: &str| s[k].as_f64().unwrap_or(0.0);
        flops += 2.0 * dim("m") * dim("k") * dim("n") * dim("calls_per_step");
    }
    flops
}

/// The FLOPs of one profiled step or pass (`run`) in `gemm_shapes_in_RUN`, after checking that its
/// rows name how `A` was read, have a positive rate and share all of the GEMM time.
fn in_run_flops(v: &serde_json::Value, run: &str) -> f64 {
    let key = format!("gemm_shapes_in_{run}");
    let rows = v[&key].as_array().expect(&key);
    let (mut flops, mut share) = (0.0, 0.0);
    for s in rows {
        let dim = |k: &str| s[k].as_f64().unwrap_or(0.0);
        flops += 2.0 * dim("m") * dim("k") * dim("n") * dim(&format!("calls_per_{run}"));
        share += dim("fraction_of_gemm_time");
        assert!(dim("fraction_of_peak") > 0.0, "{s}");
        let operand = s["operand"].as_str().unwrap_or("");
        assert!(
            ["strided", "patches", "patches-t", "winograd"].contains(&operand),
            "{s}"
        );
    }
    assert!(
        (share - 1.0).abs() < 1e-9,
        "{key}: shares add up to {share}"
    );
    flops
}

#[test]
fn bench_rejects_bad_flags() {
    let out = run(&["bench", "train", "--model", "zoo:lenet5", "--threads", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--threads"), "{}", stderr(&out));
    let out = run(&[
        "bench",
        "train",
        "--model",
        "zoo:lenet5",
        "--peak-secs",
        "NaN",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--peak-secs"), "{}", stderr(&out));
    let out = run(&["bench", "train", "--model", "zoo:nope", "--steps", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
    // Sized against memory before allocating: an error, not an allocation abort (exit 134).
    let args = [
        "bench",
        "train",
        "--model",
        "zoo:lenet5",
        "--batch",
        "100000000",
    ];
    let out = run(&[&args[..], &["--steps", "1"]].concat());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--batch") && err.contains("GiB"), "{err}");
    // --seq-len: zero or on a model without a sequence axis (usage), missing where the file's
    // input has a symbolic sequence axis (the file needs it: bad input).
    let gru = "tests/fixtures/seq/gru_lm_legacy_opset14.onnx";
    for (model, seq, code, want) in [
        ("zoo:lstm-lm", Some("0"), 2, "at least 1"),
        (gru, Some("0"), 2, "at least 1"),
        ("zoo:lenet5", Some("5"), 2, "no sequence axis"),
        (gru, None, 3, "--seq-len"),
    ] {
        let mut args = vec!["bench", "train", "--model", model, "--steps", "1"];
        args.extend(seq.map(|s| ["--seq-len", s]).into_iter().flatten());
        let out = run(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{model}: {err}");
        assert!(err.contains(want), "{model}: {err}");
        cptsim_e2e::assert_one_clear_line(&err);
    }
}

#[test]
fn bench_eval_times_forward_passes_and_rejects_bad_flags() {
    let args = ["bench", "eval", "--model", "zoo:lenet5", "--batch", "8"];
    let out = run(&[
        &args[..],
        &["--passes", "2", "--threads", "1", "--format", "json"],
    ]
    .concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_positive(
        &v,
        &[
            "images_per_s",
            "images_per_cpu_s",
            "pass_ms_median",
            "gemm_cpu_share",
        ],
    );
    assert_eq!(
        (v["threads"].as_u64(), v["passes"].as_u64()),
        (Some(1), Some(2))
    );
    assert_positive(&v, &["gemm_gflops", "peak_gflops"]);
    // The passes' GEMMs, per shape: 2 FLOPs per MAC of LeNet-5 (the sum of `inspect`'s
    // MACs/sample column: 416 520) for each of the 8 samples, and all of the GEMM time.
    assert_eq!(in_run_flops(&v, "pass"), 2.0 * 416_520.0 * 8.0);
    for (flag, value) in [
        ("--passes", "0"),
        ("--threads", "0"),
        ("--batch", "0"),
        ("--peak-secs", "100"),
    ] {
        let out = run(&[&args[..], &[flag, value]].concat());
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(stderr(&out).contains(flag), "{}", stderr(&out));
    }
    // Sized against memory before allocating: an error, not an allocation abort (exit 134).
    let big = [
        "bench",
        "eval",
        "--model",
        "zoo:lenet5",
        "--batch",
        "100000000",
    ];
    let out = run(&big);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--batch") && err.contains("forward pass"),
        "{err}"
    );
}
