//! Evaluation precision: a cyclic run whose length is not a multiple of its cycles
//! still ends its last cycle on the last iteration, so its final evaluation runs at the top of
//! `--bits`; `--eval-bits max|fp32` fix every evaluation's bits; `summary.json` names the bits of
//! the final and the best evaluation.

use std::path::Path;

use cptsim_e2e::{run, stderr};
use serde_json::Value;

/// Trains LeNet-5 on synthetic data for 30 iterations in 4 cycles (30 % 4 ≠ 0), evaluating every
/// 7 iterations; returns metrics.csv's (iteration, fw_bits, bw_bits) rows and summary.json.
fn cpt_run(dir: &Path, extra: &[&str]) -> (Vec<(u64, u8, u8)>, Value) {
    let o = dir.to_string_lossy().into_owned();
    let mut args = vec![
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--schedule",
        "cosine",
        "--bits",
        "3:8",
        "--grad-bits",
        "6:8",
        "--cycles",
        "4",
        "--iters",
        "30",
        "--batch",
        "8",
        "--eval-every",
        "7",
        "--seed",
        "0",
        "--out",
        &o,
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let metrics = std::fs::read_to_string(dir.join("metrics.csv")).unwrap_or_default();
    let mut lines = metrics.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or(usize::MAX);
    let (it, fw, bw) = (col("iteration"), col("fw_bits"), col("bw_bits"));
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(999);
            (num(it), num(fw) as u8, num(bw) as u8)
        })
        .collect();
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap_or_default();
    let summary = serde_json::from_str(&summary).unwrap_or(Value::Null);
    (rows, summary)
}

#[test]
fn a_cyclic_run_of_partial_cycles_ends_its_last_evaluation_at_the_top() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (rows, summary) = cpt_run(dir.path(), &[]);
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [7, 14, 21, 28, 30]
    );
    // 30 iterations in 4 whole cycles of 7 or 8: the last iteration is the top of its rise.
    assert_eq!(rows.last().map(|r| (r.1, r.2)), Some((8, 8)), "{rows:?}");
    // Evaluations inside a cycle run at that iteration's bits, below the top somewhere.
    assert!(rows.iter().any(|r| r.1 < 8), "{rows:?}");
    assert_eq!(summary["eval_bits"], "current");
    assert_eq!(summary["final_eval_bits"], serde_json::json!([8, 8]));
    let best = summary["best_iteration"].as_u64().unwrap_or(0);
    let best_row = rows.iter().find(|r| r.0 == best).copied();
    let want = best_row.map(|r| serde_json::json!([r.1, r.2]));
    assert_eq!(Some(summary["best_eval_bits"].clone()), want, "{summary}");
}

#[test]
fn eval_bits_max_and_fp32_fix_every_evaluation() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (rows, summary) = cpt_run(dir.path(), &["--eval-bits", "max"]);
    assert!(rows.iter().all(|r| (r.1, r.2) == (8, 8)), "{rows:?}");
    assert_eq!(summary["eval_bits"], "max");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (rows, summary) = cpt_run(dir.path(), &["--eval-bits", "fp32"]);
    assert!(rows.iter().all(|r| (r.1, r.2) == (0, 0)), "{rows:?}");
    assert_eq!(summary["final_eval_bits"], serde_json::json!([0, 0]));
    // The training trace is the policy's, whatever the evaluations ran at.
    let trace = std::fs::read_to_string(dir.path().join("trace.csv")).unwrap_or_default();
    assert!(
        trace.lines().skip(1).any(|l| l.contains(",3,3,")),
        "{trace}"
    );
}

#[test]
fn eval_bits_other_than_current_are_an_error_under_a_gated_policy() {
    let out = run(&[
        "train",
        "--model",
        "zoo:resnet20",
        "--data",
        "synthetic",
        "--policy",
        "dfq",
        "--target-cp",
        "3",
        "--iters",
        "2",
        "--batch",
        "4",
        "--eval-bits",
        "max",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--eval-bits max") && err.contains("dfq"),
        "{err}"
    );
}

/// LeNet-5 on synthetic data at a learning rate too small to move it: its test loss stays at
/// ln 10 with chance accuracy, which the collapse detector reports after 3 evaluations.
fn frozen_run(dir: &Path, extra: &[&str]) -> std::process::Output {
    let o = dir.to_string_lossy().into_owned();
    let mut args = vec![
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--iters",
        "40",
        "--batch",
        "16",
        "--eval-every",
        "10",
        "--lr",
        "0.000001",
        "--seed",
        "0",
        "--out",
        &o,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn a_collapsed_run_warns_and_records_it_or_stops_with_its_own_code() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = frozen_run(dir.path(), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("warning: training collapsed").count(),
        1,
        "{err}"
    );
    let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap_or_default();
    let summary: Value = serde_json::from_str(&summary).unwrap_or(Value::Null);
    assert_eq!(summary["collapsed"], true, "{summary}");

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = frozen_run(dir.path(), &["--stop-on-collapse"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("collapsed at iteration 30"), "{err}");
    // Stopped at the third collapsed evaluation, with the run's outputs up to there kept.
    let metrics = std::fs::read_to_string(dir.path().join("metrics.csv")).unwrap_or_default();
    assert_eq!(metrics.lines().count(), 4, "{metrics}");
    assert!(dir.path().join("checkpoint.bin").is_file());
}
