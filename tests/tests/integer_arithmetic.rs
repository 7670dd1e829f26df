//! `--arithmetic int` and `--accumulator`: integer forward GEMMs close to the fp32 emulation,
//! a narrow accumulator that changes the logits, and bad values as usage errors naming the flag.

use std::path::Path;

use cptsim_e2e::{assert_one_clear_line, read_npy, run, run_forward, stderr, write_npy};

/// `forward` of zoo:lenet5 at 8 bits with `extra` flags; the logits, or the failed output.
fn forward(dir: &Path, name: &str, extra: &[&str]) -> Result<Vec<f32>, std::process::Output> {
    let (x, y) = (dir.join("x.npy"), dir.join(format!("{name}.npy")));
    write_npy(&x, &[4, 1, 28, 28], |i| {
        ((i * 37) % 101) as f32 / 50.0 - 1.0
    });
    let mut args = vec!["--bits", "8"];
    args.extend_from_slice(extra);
    let out = run_forward("zoo:lenet5", &x, &y, &args);
    if out.status.success() {
        Ok(read_npy(&y).1)
    } else {
        Err(out)
    }
}

#[test]
fn integer_logits_are_close_to_the_fp32_emulation_and_narrow_sums_move_them() {
    let dir = tempfile::tempdir().unwrap();
    let fp = forward(dir.path(), "fp", &[]).unwrap();
    let int = forward(dir.path(), "int", &["--arithmetic", "int"]).unwrap();
    let wide = forward(
        dir.path(),
        "wide",
        &["--arithmetic", "int", "--accumulator", "fw=32:saturate"],
    )
    .unwrap();
    let narrow = forward(
        dir.path(),
        "narrow",
        &["--arithmetic", "int", "--accumulator", "12"],
    )
    .unwrap();
    let scale = fp.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
    assert!(
        fp.iter()
            .zip(&int)
            .all(|(a, b)| (a - b).abs() <= 1e-3 * scale),
        "{fp:?}\n{int:?}"
    );
    assert_eq!(int, wide, "a 32-bit register holds LeNet-5's 8-bit sums");
    assert_ne!(int, narrow, "a 12-bit register wraps them");
}

#[test]
fn bad_arithmetic_flags_are_usage_errors_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (flags, want) in [
        (&["--arithmetic", "int8"][..], "--arithmetic int8"),
        (
            &["--arithmetic", "int", "--accumulator", "1"][..],
            "--accumulator 1",
        ),
        (
            &["--arithmetic", "int", "--accumulator", "24:clip"][..],
            "--accumulator 24:clip",
        ),
        (
            &["--arithmetic", "int", "--accumulator", "fw=24,bw=32"][..],
            "backward GEMMs run in fp32",
        ),
        (&["--accumulator", "24"][..], "add --arithmetic int"),
        (
            &["--arithmetic", "int", "--quantizer", "dorefa"][..],
            "--quantizer sbm",
        ),
    ] {
        let out = forward(dir.path(), "bad", flags).unwrap_err();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(want), "{flags:?}: {err}");
        assert_one_clear_line(&err);
    }
}

/// A short integer LeNet-5 run on synthetic data with `--accel`, its stderr and summary.json.
fn train_int(dir: &Path, accumulator: &str, accel: &str) -> (String, serde_json::Value) {
    let out = dir.to_string_lossy().into_owned();
    let o = run(&[
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--bits",
        "8",
        "--iters",
        "4",
        "--batch",
        "8",
        "--eval-every",
        "4",
        "--arithmetic",
        "int",
        "--accumulator",
        accumulator,
        "--accel",
        accel,
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    (stderr(&o), serde_json::from_str(&text).unwrap())
}

#[test]
fn summary_records_the_accumulator_and_accelerators_with_other_widths_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let (err, summary) = train_int(&dir.path().join("a"), "24:saturate", "zc706,eyeriss");
    assert_eq!(
        summary["accumulator"],
        serde_json::json!({"bits": 24, "mode": "saturate"})
    );
    assert_eq!(summary["arithmetic"], "int (accumulator fw=24:saturate)");
    let flagged = summary["accumulator_mismatches"].as_array().unwrap();
    let relation: Vec<_> = flagged
        .iter()
        .map(|m| {
            (
                m["accelerator"].as_str().unwrap(),
                m["run_is"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(relation, [("zc706", "narrower"), ("eyeriss", "wider")]);
    assert_eq!(flagged[0]["accelerator_bits"], 32);
    assert!(
        err.contains("warning: the run's accumulator (24:saturate, 24 bits) is narrower than zc706's 32-bit one"),
        "{err}"
    );
    assert!(err.contains("is wider than eyeriss's 16-bit one"), "{err}");
    // The width the accelerator has: nothing to flag.
    let (err, summary) = train_int(&dir.path().join("b"), "32:wrap", "zc706");
    assert!(summary.get("accumulator_mismatches").is_none(), "{summary}");
    assert!(!err.contains("warning:"), "{err}");
    assert_eq!(summary["accumulator"]["mode"], "wrap");
}

#[test]
fn run_flags_accelerators_whose_accumulator_differs_from_the_given_one() {
    let cost = |acc: &str| {
        run(&[
            "run",
            "--model",
            "zoo:lenet5",
            "--iters",
            "100",
            "--accel",
            "zc706,eyeriss",
            "--accumulator",
            acc,
            "--format",
            "json",
        ])
    };
    let o = cost("exact");
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let flagged = report["accumulator_mismatches"].as_array().unwrap();
    assert_eq!(flagged.len(), 2);
    assert!(flagged
        .iter()
        .all(|m| m["run_is"] == "wider" && m["run_bits"] == 64));
    assert_eq!(stderr(&o).matches("warning: ").count(), 2, "{}", stderr(&o));
    let o = cost("16");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["accumulator_mismatches"][0]["run_is"], "narrower");
    assert_eq!(
        report["accumulator_mismatches"].as_array().unwrap().len(),
        1
    );
    let bad = cost("16:clip");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("--accumulator 16:clip"),
        "{}",
        stderr(&bad)
    );
    assert_one_clear_line(&stderr(&bad));
}
