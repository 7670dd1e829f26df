//! One test per row of the exit-code table (`docs/src/reference/exit-codes.md`): each code comes
//! from the kinds of failure the table gives it. A full disk is a small tmpfs filled to the brim
//! (root only: elsewhere the test prints `SKIPPED:`, and fails under `CPTSIM_REQUIRE_TMPFS=1`),
//! and a full stdout is `/dev/full`.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use cptsim_e2e::{cptsim, run, stderr, workspace_root, write_npy};

/// The code `out` exited with, with its stderr for the failure message.
fn code(out: &Output) -> (Option<i32>, String) {
    (out.status.code(), stderr(out))
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Asserts that `args` exits with `want` and says `needle` on stderr.
fn exits(args: &[&str], want: i32, needle: &str) {
    let (got, err) = code(&run(args));
    assert_eq!(got, Some(want), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

/// The codes the table lists, in order.
fn documented_codes() -> Vec<i32> {
    let page = workspace_root().join("docs/src/reference/exit-codes.md");
    let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect()
}

/// Each code of the table and the test that holds it to its promise (`file::function`).
const ROW_TESTS: [(i32, &str); 7] = [
    (0, "exit_codes::row_0_success_and_a_closed_stdout"),
    (2, "exit_codes::row_2_usage"),
    (3, "exit_codes::row_3_bad_input_data"),
    (4, "exit_codes::row_4_an_output_that_cannot_be_written"),
    (
        5,
        "cli_exit::a_diverged_run_exits_5_and_keeps_its_checkpoint",
    ),
    (
        6,
        "train_eval_bits::a_collapsed_run_warns_and_records_it_or_stops_with_its_own_code",
    ),
    (
        130,
        "train::sigterm_checkpoints_the_iteration_reached_and_the_run_resumes_there",
    ),
];

#[test]
fn every_row_of_the_table_has_its_test() {
    let codes = documented_codes();
    assert_eq!(
        codes,
        ROW_TESTS.map(|(c, _)| c),
        "the exit-code table and this list differ"
    );
    for (code, test) in ROW_TESTS {
        let (file, function) = test.split_once("::").unwrap_or((test, ""));
        let path = workspace_root().join(format!("tests/tests/{file}.rs"));
        let source = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            source.contains(&format!("fn {function}()")),
            "exit {code}: no test {function} in {}",
            path.display()
        );
    }
}

#[test]
fn row_0_success_and_a_closed_stdout() {
    exits(&["zoo", "list"], 0, "");
    // the reader closed the pipe before anything was written
    let mut child = cptsim()
        .args(["run", "--model", "zoo:resnet20", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(code(&out), (Some(0), String::new()));
}

#[test]
fn row_2_usage() {
    exits(
        &["run", "--model", "zoo:lenet5", "--bits", "9:3"],
        2,
        "--bits",
    );
    exits(
        &["run", "--model", "zoo:lenet5", "--accel", "nosuch"],
        2,
        "--accel nosuch",
    );
    exits(&["zoo", "export", "nosuch", "-o", "x.onnx"], 2, "nosuch");
    exits(
        &["plot", "curves", "/nonexistent/run", "-o", "/tmp/x.svg"],
        2,
        "/nonexistent/run",
    );
    // the argument parser's own errors
    exits(&["run", "--no-such-flag"], 2, "--no-such-flag");
}

#[test]
fn row_3_bad_input_data() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.path().join("bad.onnx");
    std::fs::write(&bad, b"not an onnx model").unwrap_or_else(|e| panic!("{e}"));
    exits(&["inspect", &s(&bad)], 3, "bad.onnx");
    // a NaN in a .npy input
    let npy = dir.path().join("nan.npy");
    write_npy(
        &npy,
        &[1, 1, 28, 28],
        |i| if i == 5 { f32::NAN } else { 0.5 },
    );
    let out = dir.path().join("y.npy");
    exits(
        &[
            "forward",
            "--model",
            "zoo:lenet5",
            "--input",
            &s(&npy),
            "--output",
            &s(&out),
        ],
        3,
        "element 5 is NaN",
    );
    assert!(!out.exists());
    // a results table with a cost that is not a number
    let csv = dir.path().join("results.csv");
    std::fs::write(
        &csv,
        "schedule,seed,gbitops,static_gbitops,final_test_acc\ncosine,0,abc,2,0.5\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let svg = dir.path().join("p.svg");
    exits(
        &["plot", "pareto", &s(&csv), "-o", &s(&svg)],
        3,
        "line 2, column 'gbitops'",
    );
    // a sweep plan that is not UTF-8 text
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, b"out = \"runs/x\"\n# \xff\xfe\n").unwrap_or_else(|e| panic!("{e}"));
    exits(&["sweep", "run", &s(&plan), "--dry-run"], 3, "valid UTF-8");
    // a trace that does not fit its model
    let trace = dir.path().join("t.csv");
    std::fs::write(
        &trace,
        "iter_start,iter_end,layer,layer_name,b_w,b_a,b_g,samples\n0,1,9,nope,8,8,8,1\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    exits(
        &["run", "--model", "zoo:lenet5", "--trace", &s(&trace)],
        3,
        "t.csv",
    );
}

/// A small tmpfs on a fresh directory, filled until a write fails: a full disk.
fn full_disk(dir: &Path) -> Option<cptsim_testdata::Tmpfs> {
    let fs = cptsim_testdata::small_tmpfs(dir, 256 * 1024)?;
    cptsim_testdata::fill(fs.path()).unwrap_or_else(|e| panic!("filling {}: {e}", dir.display()));
    Some(fs)
}

#[test]
fn row_4_an_output_that_cannot_be_written() {
    // stdout on a full device
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if let Ok(full) = full {
        let out = cptsim()
            .args(["zoo", "list", "--format", "json"])
            .stdout(full)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let (got, err) = code(&out);
        assert_eq!(got, Some(4), "zoo list > /dev/full: {err}");
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mnt = dir.path().join("disk");
    let Some(_disk) = full_disk(&mnt) else {
        return;
    };
    let onnx = mnt.join("m.onnx");
    exits(&["zoo", "export", "lenet5", "-o", &s(&onnx)], 4, "m.onnx");
    let svg = mnt.join("s.svg");
    exits(&["plot", "schedule", "-o", &s(&svg)], 4, "s.svg");
    let report = mnt.join("rep");
    exits(&report_run(&s(&report)), 4, "rep");
    // nothing half-written is left behind
    let left: Vec<_> = std::fs::read_dir(&mnt)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert_eq!(left, [std::ffi::OsString::from(cptsim_testdata::FILLER)]);
}

/// `run` of LeNet-5 costed on ZC706 with its report written to `report`.
fn report_run(report: &str) -> [&str; 9] {
    [
        "run",
        "--model",
        "zoo:lenet5",
        "--iters",
        "100",
        "--accel",
        "zc706",
        "--report",
        report,
    ]
}

/// `run --report`'s index.html is the last thing written: with room for the CSVs but not for the
/// page (a tmpfs just too small for it), the run still exits 4 and leaves no report.
#[test]
fn row_4_a_report_page_that_does_not_fit() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // the report's CSVs of LeNet-5 on one accelerator take a few kB, its page over 100 kB
    let mnt = dir.path().join("disk");
    let Some(_disk) = cptsim_testdata::small_tmpfs(&mnt, 64 * 1024) else {
        return;
    };
    let report = mnt.join("rep");
    let out = Command::new(cptsim_e2e::cptsim_path())
        .current_dir(workspace_root())
        .args(report_run(&s(&report)))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let (got, err) = code(&out);
    assert_eq!(got, Some(4), "{err}");
    assert!(err.contains("index.html"), "{err}");
    assert!(!report.exists());
}
