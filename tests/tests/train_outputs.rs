//! Outputs as one unit and the flags around them: a failing or interrupted `train` / `run`
//! leaves the user's earlier outputs byte-identical, `--resume` refuses flags that contradict its
//! checkpoint and works from another directory, the head follows `--classes`, and `--epochs`
//! overflow is an error.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use cptsim_e2e::{cptsim, run, shared_data, stderr};

/// Every file under `dir` (relative path → bytes).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn train_into(dir: &Path, extra: &[&str]) -> Output {
    let o = dir.to_string_lossy().into_owned();
    let mut args = vec![
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--iters",
        "8",
        "--batch",
        "8",
        "--eval-every",
        "2",
        "--out",
        &o,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn a_diverging_train_leaves_the_earlier_run_in_out_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let first = train_into(&dir, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let before = snapshot(tmp.path());
    assert!(before.contains_key("run/summary.json"), "{before:?}");
    // Diverges at iteration 2, after the evaluation there wrote a checkpoint.
    let failed = train_into(&dir, &["--lr", "50"]);
    assert_eq!(code(&failed), Some(5), "{}", stderr(&failed));
    assert!(
        stderr(&failed).contains("keeps its earlier outputs"),
        "{}",
        stderr(&failed)
    );
    assert!(snapshot(tmp.path()) == before, "outputs changed");
    // A run that succeeds replaces them, keeping the user's own file.
    let second = train_into(&dir, &["--seed", "3", "--stop-at", "4"]);
    assert!(second.status.success(), "{}", stderr(&second));
    let after = snapshot(tmp.path());
    assert_ne!(after["run/checkpoint.bin"], before["run/checkpoint.bin"]);
    assert!(
        !after.contains_key("run/summary.json"),
        "stale summary kept"
    );
    assert_eq!(after["run/notes.txt"], b"mine");
    assert!(after.keys().all(|k| k.starts_with("run/")), "{after:?}");
}

#[test]
fn a_failing_run_keeps_the_saved_trace_and_report() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.csv").display().to_string();
    let report = tmp.path().join("report").display().to_string();
    let base = ["run", "--model", "zoo:resnet20", "--schedule", "static"];
    let mut ok = base.to_vec();
    ok.extend_from_slice(&[
        "--iters",
        "100",
        "--save-trace",
        &trace,
        "--accel",
        "zc706",
        "--report",
        &report,
    ]);
    let first = run(&ok);
    assert!(first.status.success(), "{}", stderr(&first));
    let before = snapshot(tmp.path());
    // The trace's sample count overflows while it is written: a late failure.
    let mut bad = base.to_vec();
    bad.extend_from_slice(&[
        "--iters",
        "1000000000000000000",
        "--batch",
        "1000000",
        "--save-trace",
        &trace,
        "--accel",
        "zc706",
        "--report",
        &report,
    ]);
    let failed = run(&bad);
    assert_eq!(code(&failed), Some(3), "{}", stderr(&failed));
    let err = stderr(&failed);
    assert!(err.contains(&trace) && !err.contains("staging"), "{err}");
    assert!(snapshot(tmp.path()) == before, "outputs changed");
}

#[test]
fn ctrl_c_removes_the_unfinished_trace_and_keeps_the_old_one() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.csv");
    std::fs::write(&trace, "old").unwrap();
    // About a million spans × 166 layers: seconds of writing.
    let child = cptsim()
        .args(["run", "--model", "zoo:resnet164", "--schedule", "cosine"])
        .args(["--iters", "64000000", "--cycles", "1000000", "--save-trace"])
        .arg(&trace)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the writing has started (its staging directory exists).
    let started = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(25));
        std::fs::read_dir(tmp.path()).unwrap().count() > 1
    });
    assert!(started, "no staging directory appeared");
    let pid = child.id().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "temporaries left: {left:?}");
    assert_eq!(std::fs::read(&trace).unwrap(), b"old");
}

#[test]
fn resume_refuses_contradicting_flags_and_works_from_another_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("lenet.onnx");
    let export = run(&[
        "zoo",
        "export",
        "lenet5",
        "-o",
        &model.display().to_string(),
    ]);
    assert!(export.status.success(), "{}", stderr(&export));
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // A relative model path, from `tmp`.
    let first = cptsim()
        .current_dir(tmp.path())
        .args(["train", "--model", "lenet.onnx", "--data", "synthetic"])
        .args(["--iters", "6", "--batch", "8", "--eval-every", "2"])
        .args(["--stop-at", "2", "--out", "run", "--lr", "0.05"])
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let resume = |extra: &[&str]| {
        cptsim()
            .current_dir(&work)
            .args(["train", "--resume", "../run"])
            .args(extra)
            .output()
            .unwrap()
    };
    let conflict = resume(&["--lr", "0.1"]);
    assert_eq!(code(&conflict), Some(2), "{}", stderr(&conflict));
    let err = stderr(&conflict);
    for needle in ["--lr", "0.1", "0.05", "checkpoint"] {
        assert!(err.contains(needle), "`{needle}` not in {err}");
    }
    let conflict = resume(&["--iters", "7"]);
    assert!(
        stderr(&conflict).contains("--iters"),
        "{}",
        stderr(&conflict)
    );
    // The same values, and the flags that may change, are accepted.
    let ok = resume(&["--iters", "6", "--stop-at", "4", "--format", "json"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let ok = resume(&[]);
    assert!(ok.status.success(), "{}", stderr(&ok));
}

#[test]
fn the_head_follows_classes_and_a_disagreeing_onnx_head_needs_reinit() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("lenet.onnx").display().to_string();
    let export = run(&["zoo", "export", "lenet5", "-o", &model, "--classes", "7"]);
    assert!(export.status.success(), "{}", stderr(&export));
    let base = [
        "train",
        "--data",
        "synthetic",
        "--iters",
        "2",
        "--batch",
        "4",
    ];
    let with = |extra: &[&str]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        run(&v)
    };
    let mismatch = with(&["--model", &model, "--classes", "10"]);
    assert_eq!(code(&mismatch), Some(3), "{}", stderr(&mismatch));
    let err = stderr(&mismatch);
    for needle in [model.as_str(), "7 outputs", "10 classes", "--reinit-head"] {
        assert!(err.contains(needle), "`{needle}` not in {err}");
    }
    let reinit = with(&["--model", &model, "--classes", "10", "--reinit-head"]);
    assert!(reinit.status.success(), "{}", stderr(&reinit));
    assert!(stderr(&reinit).contains("replaced the 7-output head"));
    // Synthetic data follows the file's own head; a zoo model is built with --classes.
    assert!(with(&["--model", &model]).status.success());
    assert!(with(&["--model", "zoo:lenet5", "--classes", "3"])
        .status
        .success());
    let zero = with(&["--model", "zoo:lenet5", "--classes", "0"]);
    assert_eq!(code(&zero), Some(2), "{}", stderr(&zero));
    if let Some(dir) = shared_data("mnist") {
        let data = format!("mnist:{}", dir.display());
        let out = run(&[
            "train",
            "--model",
            "zoo:lenet5",
            "--data",
            &data,
            "--iters",
            "1",
            "--classes",
            "5",
        ]);
        assert_ne!(code(&out), Some(0));
        let err = stderr(&out);
        assert!(
            err.contains("--classes 5") && err.contains("train-labels"),
            "{err}"
        );
    }
}

#[test]
fn epochs_overflow_is_an_error_naming_the_flag() {
    let out = run(&[
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--epochs",
        "18446744073709551615",
    ]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--epochs"), "{}", stderr(&out));
}

#[test]
fn oversized_prt_and_bad_rates_are_errors_naming_the_flag() {
    let base = ["train", "--model", "zoo:lenet5", "--data", "synthetic"];
    for (extra, needle) in [
        (
            &["--prt", "--prt-iters-per-step", "18446744073709551615"][..],
            "--prt-iters-per-step",
        ),
        (
            &["--prt", "--prt-start-bits", "9", "--bits", "3:8"],
            "--prt-start-bits 9",
        ),
        (&["--val-split", "NaN"], "--val-split"),
        (
            &[
                "--iters",
                "18446744073709551615",
                "--lr-schedule",
                "paper",
                "--stop-at",
                "1",
            ],
            "",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = run(&args);
        if needle.is_empty() {
            assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
            continue;
        }
        assert_eq!(code(&out), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
    }
}

/// The test metrics of `metrics.csv`: (test_loss, test_acc) per evaluation.
fn test_metrics(dir: &Path) -> Vec<(f64, f64)> {
    let csv = std::fs::read_to_string(dir.join("metrics.csv")).expect("metrics.csv");
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[3].parse().expect("test_loss"),
                f[4].parse().expect("test_acc"),
            )
        })
        .collect()
}

#[test]
fn test_subset_evaluates_on_the_first_test_samples_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, all) = (tmp.path().join("one"), tmp.path().join("all"));
    let out = train_into(&one, &["--test-subset", "1"]);
    assert_eq!(
        code(&out),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = train_into(&all, &[]);
    assert_eq!(
        code(&out),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (one, all) = (test_metrics(&one), test_metrics(&all));
    assert_eq!(one.len(), all.len());
    // One test image is right or wrong; its loss is not the whole set's mean.
    assert!(
        one.iter().all(|&(_, acc)| acc == 0.0 || acc == 1.0),
        "{one:?}"
    );
    assert!(
        one.iter().zip(&all).any(|(a, b)| a.0 != b.0),
        "{one:?} {all:?}"
    );
    let out = run(&[
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--test-subset",
        "0",
    ]);
    assert_eq!(code(&out), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--test-subset"));
}
