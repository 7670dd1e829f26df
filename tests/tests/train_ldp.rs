//! `cptsim train --policy ldp`: the summary reports target, achieved cost and final per-layer bits,
//! the learned-precision plot is a PNG, the per-layer trace is costed by `cptsim run --trace`, a
//! resumed run equals an uninterrupted one, and bad LDP input exits 2 with one clear line.

use std::path::Path;

use cptsim_e2e::{assert_one_clear_line, run, stderr, stdout};
use serde_json::Value;

fn train(args: &[&str]) -> std::process::Output {
    let mut all = vec!["train"];
    all.extend_from_slice(args);
    run(&all)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn ldp_reports_target_achieved_bits_plot_and_a_costable_trace() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = dir.path().to_string_lossy().into_owned();
    let out = train(&[
        "--model",
        "zoo:resnet20",
        "--data",
        "synthetic",
        "--policy",
        "ldp",
        "--iters",
        "4",
        "--batch",
        "8",
        "--out",
        &o,
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s: Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    assert_eq!(s["policy"], "ldp", "{s}");
    assert_eq!(s["target"], 0.6, "{s}");
    let achieved = s["achieved"].as_f64().unwrap_or(-1.0);
    assert!(achieved > 0.0 && achieved <= 1.0, "{s}");
    let bits = s["ldp"]["final_bits"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(bits.len(), 21, "resnet20: every conv, classifier fp32: {s}");
    assert!(bits
        .iter()
        .all(|b| (3..=8).contains(&b["bits"].as_u64().unwrap_or(0))));
    let (inf, stat) = (
        s["ldp"]["inference_gbitops"].as_f64().unwrap_or(0.0),
        s["ldp"]["static_inference_gbitops"].as_f64().unwrap_or(0.0),
    );
    assert!(
        inf > 0.0 && inf < stat,
        "bits ≤ 8 everywhere, some below: {s}"
    );
    let png = std::fs::read(dir.path().join("ldp_bits.png")).unwrap_or_default();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "ldp_bits.png");
    let summary: Value =
        serde_json::from_str(&read(&dir.path().join("summary.json"))).unwrap_or_default();
    assert_eq!(summary["achieved"], s["achieved"]);
    // Per-layer bits start at the middle of 3:8 (5.5 → 6) and the trace carries them.
    let trace = read(&dir.path().join("trace.csv"));
    assert!(trace.contains("\n0,1,0,conv1,6,6,8,8"), "{trace}");
    let path = dir.path().join("trace.pb").to_string_lossy().into_owned();
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--trace",
        &path,
        "--accel",
        "zc706",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    assert_eq!(r["gbitops"], s["gbitops"], "{r}");
}

/// LDP on LeNet-5 and synthetic data.
const LENET_LDP: [&str; 6] = [
    "--model",
    "zoo:lenet5",
    "--data",
    "synthetic",
    "--policy",
    "ldp",
];

#[test]
fn ldp_resumes_exactly() {
    let run_in = |dir: &Path, extra: &[&str]| {
        let o = dir.to_string_lossy().into_owned();
        let mut args = LENET_LDP.to_vec();
        args.extend([
            "--bits",
            "2:8",
            "--iters",
            "12",
            "--batch",
            "16",
            "--eval-every",
            "4",
            // The task gradient is ~1e-4 per iteration: a large rate makes the bits move at once.
            "--ldp-lr",
            "1000",
            "--out",
            &o,
        ]);
        args.extend_from_slice(extra);
        let out = train(&args);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let full = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    run_in(full.path(), &[]);
    let split = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    run_in(split.path(), &["--stop-at", "5"]);
    let out = train(&["--resume", &split.path().to_string_lossy()]);
    assert!(out.status.success(), "{}", stderr(&out));
    for f in ["trace.csv", "metrics.csv"] {
        assert_eq!(
            read(&full.path().join(f)),
            read(&split.path().join(f)),
            "{f}"
        );
    }
    let trace = read(&full.path().join("trace.csv"));
    let quantized: Vec<&str> = trace.lines().filter(|l| l.contains(",8,16")).collect();
    assert!(
        quantized.iter().any(|l| !l.contains(",5,5,8,")),
        "the bits moved away from the initial 5: {trace}"
    );
}

#[test]
fn bad_ldp_input_exits_2_with_one_clear_line() {
    let base = [&LENET_LDP[..], &["--iters", "1"]].concat();
    for (extra, needle) in [
        (&["--target", "0"][..], "--target 0"),
        (&["--target", "1.5"][..], "--target 1.5"),
        (&["--bits", "8"][..], "--bits 8"),
        (&["--quantizer", "dorefa"][..], "--quantizer sbm"),
        (&["--grad-bits", "4:8"][..], "--grad-bits 4:8"),
    ] {
        let args = [&base[..], extra].concat();
        let out = train(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_one_clear_line(&err);
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}
