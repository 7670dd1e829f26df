//! Sequence models end to end: `inspect` shows each GEMM's kind, operands and M/N/K at the
//! chosen `--batch` / `--seq-len`, and `run` costs the zoo's language models with their papers'
//! defaults.

use cptsim_e2e::{run, stderr, stdout};

fn json(args: &[&str]) -> serde_json::Value {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or(serde_json::Value::Null)
}

#[test]
fn inspect_shows_gemm_dims_and_operands() {
    let j = json(&[
        "inspect",
        "zoo:transformer-wt103",
        "--batch",
        "2",
        "--seq-len",
        "64",
        "--format",
        "json",
    ]);
    assert_eq!(j["seq_len"], 64);
    let layers = j["layers"].as_array().cloned().unwrap_or_default();
    let qk = layers
        .iter()
        .find(|l| l["name"] == "layers.0.attn.qk")
        .cloned()
        .unwrap_or_default();
    assert_eq!(qk["op"], "MatMul");
    assert_eq!(qk["gemm"]["operands"], "activation_activation");
    // 16 heads × 2 samples of [64 × 64] · [64 × 64].
    assert_eq!(
        [
            &qk["gemm"]["groups"],
            &qk["gemm"]["m"],
            &qk["gemm"]["n"],
            &qk["gemm"]["k"]
        ],
        [32, 64, 64, 64]
    );
    let proj = &layers[0];
    assert_eq!(proj["gemm"]["operands"], "weight_activation");
    assert_eq!(proj["gemm"]["m"], 128);
    // Doubling the sequence doubles the projections and quadruples attention.
    let macs = |t: &str| {
        json(&[
            "inspect",
            "zoo:transformer-wt103",
            "--seq-len",
            t,
            "--format",
            "json",
        ])["totals"]["macs"]
            .as_u64()
            .unwrap_or(0)
    };
    let (a, b) = (macs("64"), macs("128"));
    let attn64 = 16 * 2 * 64 * 64 * 1024u64;
    assert_eq!(b - 4 * attn64, 2 * (a - attn64));
}

#[test]
fn run_costs_the_lms_with_their_paper_defaults() {
    let j = json(&[
        "run",
        "--model",
        "zoo:ptb-lstm",
        "--schedule",
        "cosine",
        "--bits",
        "5:8",
        "--format",
        "json",
    ]);
    assert_eq!(j["iterations"], 53_120);
    assert_eq!(j["batch"], 20);
    // The cosine formula's 5-8/8 reduction (spec §2.4: 23.16 %).
    let r = j["reduction"].as_f64().unwrap_or(0.0);
    assert!((r - 0.2316).abs() < 5e-4, "{r}");
    let short = json(&[
        "run",
        "--model",
        "zoo:ptb-lstm",
        "--schedule",
        "static",
        "--bits",
        "8",
        "--seq-len",
        "70",
        "--iters",
        "10",
        "--batch",
        "1",
        "--format",
        "json",
    ]);
    // 70 tokens of 2·4·650·1300 + 650·10 000 MACs, 10 iterations, (8² + 2·8·8) bits.
    let macs = 70.0 * (2.0 * 4.0 * 650.0 * 1300.0 + 650.0 * 10_000.0);
    let want = macs * 10.0 * 192.0 / 1e9;
    let got = short["gbitops"].as_f64().unwrap_or(0.0);
    assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
}

#[test]
fn seq_len_on_an_image_model_is_one_clear_error() {
    let out = run(&["inspect", "zoo:resnet20", "--seq-len", "5"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "a usage error: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no sequence axis"), "{err}");
    let out = run(&["run", "--model", "zoo:deit-tiny", "--seq-len", "5"]);
    assert!(
        stderr(&out).contains("no sequence axis"),
        "{}",
        stderr(&out)
    );
}
