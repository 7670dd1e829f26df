//! Exit codes and a closed stdout: `cptsim … | head -1` ends quietly with 0 (the reader closed the
//! pipe before the command wrote), a diverged training run exits 5 keeping its checkpoint.

use std::process::Stdio;

use cptsim_e2e::{cptsim, run, stderr};

/// Runs `cptsim args` with stdout a pipe whose reading end is closed at once, as `| head -0`
/// would; returns the exit code and stderr.
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = cptsim()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn a_closed_pipe_ends_quietly_with_exit_0() {
    for args in [
        &["zoo", "list"][..],
        &["run", "--model", "zoo:resnet20", "--schedule", "cosine"],
        &["run", "--model", "zoo:resnet20", "--format", "json"],
        &["accel", "list"],
        &["inspect", "zoo:lenet5"],
    ] {
        let (code, err) = with_closed_stdout(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn a_diverged_run_exits_5_and_keeps_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = dir.path().to_string_lossy().into_owned();
    let out = run(&[
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--batch",
        "16",
        "--iters",
        "40",
        "--eval-every",
        "2",
        "--lr",
        "1000000",
        "--max-loss",
        "5",
        "--out",
        &o,
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("diverged at iteration"), "{err}");
    assert!(
        err.contains("last good checkpoint") || err.contains("no checkpoint was written yet"),
        "{err}"
    );
}

#[test]
fn usage_and_bad_data_have_their_own_codes() {
    let out = run(&[
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--batch",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.path().join("bad.onnx");
    std::fs::write(&bad, b"not an onnx model").unwrap_or_else(|e| panic!("{e}"));
    let out = run(&["inspect", &bad.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

#[test]
fn an_unknown_vector_path_is_a_usage_error_naming_the_variable() {
    let out = cptsim()
        .env("CPTSIM_VECTOR_PATH", "avx3")
        .args(["inspect", "zoo:lenet5"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("CPTSIM_VECTOR_PATH=avx3"), "{err}");
    assert!(err.contains("portable"), "{err}");
    cptsim_e2e::assert_one_clear_line(&err);
}

#[test]
fn one_format_flag_for_every_command() {
    // csv is printed by inspect only; the others name themselves in a usage error
    let out = run(&["run", "--model", "zoo:resnet20", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`cptsim run` prints table or json"),
        "{}",
        stderr(&out)
    );
    let out = run(&["inspect", "zoo:lenet5", "--format", "csv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // `text` stays an alias of `table`
    let layer = [
        "layer",
        "--accel",
        "bitfusion",
        "--k",
        "3",
        "--stride",
        "1",
        "--pad",
        "1",
        "--ic",
        "16",
        "--oc",
        "16",
        "--hw",
        "8",
        "--batch",
        "2",
        "--act-bits",
        "4",
        "--wgt-bits",
        "4",
    ];
    let text = run(&[&layer[..], &["--format", "text"]].concat());
    let table = run(&[&layer[..], &["--format", "table"]].concat());
    assert!(text.status.success(), "{}", stderr(&text));
    assert_eq!(text.stdout, table.stdout);
}
