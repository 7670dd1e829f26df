//! Helpers for the end-to-end tests in `tests/tests/`: locate the `cptsim` binary that cargo built
//! beside the test executable and run it as a user would.

pub mod fuzz;
pub mod sweep;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of the `cptsim` binary of the same build profile as the running test.
///
/// Cargo builds it because the `cptsim` package has integration tests of its own; test executables
/// live in `target/<profile>/deps/`, the binary in `target/<profile>/`. (`CARGO_BIN_EXE_cptsim`
/// is set only for the integration tests of the package that owns the binary, and these live in
/// their own package, so the path is found here; [`cptsim`] refuses a binary older than its
/// sources.)
pub fn cptsim_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .unwrap_or_default();
    profile_dir.join(format!("cptsim{}", std::env::consts::EXE_SUFFIX))
}

/// The crates the `cptsim` binary is built from.
pub const BINARY_SOURCES: [&str; 9] = [
    "cli", "kernels", "nn", "train", "bench", "models", "traces", "accel", "plot",
];

/// Newest modification time of the `.rs` files under `dir`.
fn newest_source(dir: &std::path::Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_source(&path)
        } else if path.extension().is_some_and(|e| e == "rs") {
            entry.metadata().and_then(|m| m.modified()).ok()
        } else {
            None
        };
        newest = newest.max(time);
    }
    newest
}

/// Fails the test when a source file of the binary is newer than the binary: `cargo test -p
/// cptsim-e2e` does not rebuild `cptsim`, and a stale binary makes the end-to-end tests check old
/// behaviour (`cargo test --workspace` builds it).
fn assert_binary_fresh() {
    static CHECKED: std::sync::Once = std::sync::Once::new();
    CHECKED.call_once(|| {
        let built = std::fs::metadata(cptsim_path()).and_then(|m| m.modified());
        let Ok(built) = built else { return };
        let root = workspace_root();
        let newest = BINARY_SOURCES
            .iter()
            .filter_map(|c| newest_source(&root.join(c).join("src")))
            .max();
        if newest.is_some_and(|t| t > built) {
            panic!(
                "{} is older than its sources: run `cargo build --release -p cptsim` (or `cargo \
                 test --workspace`) before the end-to-end tests",
                cptsim_path().display()
            );
        }
    });
}

/// A `Command` for the `cptsim` binary, run from the workspace root.
pub fn cptsim() -> Command {
    assert_binary_fresh();
    let mut cmd = Command::new(cptsim_path());
    cmd.current_dir(workspace_root());
    cmd
}

/// The workspace root (parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `cptsim` with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    match cptsim().args(args).output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {}: {e}", cptsim_path().display()),
    }
}

/// A small LeNet-5 training run on synthetic data into `dir` (40 iterations of 16, an evaluation
/// every 10, FW 3:8 and BW 8 bits) with the `policy` flags; panics when it fails.
pub fn train_small(dir: &std::path::Path, policy: &[&str]) {
    let out = dir.to_string_lossy().into_owned();
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
        "--bits",
        "3:8",
        "--grad-bits",
        "8",
        "--out",
        &out,
    ];
    args.extend_from_slice(policy);
    let o = run(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
}

/// A `train` run on synthetic data: `--model model --data synthetic`, then `flags`, into a
/// temporary `--out`; panics when it fails. Returns the rows of `metrics.csv` as (iteration,
/// train loss, test accuracy) and stderr.
pub fn train_synthetic(model: &str, flags: &[&str]) -> (Vec<(u64, f64, f64)>, String) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("run");
    let out_s = out.to_string_lossy().into_owned();
    let mut args = vec!["train", "--model", model, "--data", "synthetic"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--out", &out_s]);
    let res = run(&args);
    let err = stderr(&res);
    assert!(res.status.success(), "{args:?}: {err}");
    let csv = std::fs::read_to_string(out.join("metrics.csv")).expect("metrics.csv");
    let field = |f: &[&str], i: usize| -> f64 {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("metrics.csv field {i} of {f:?}"))
    };
    let rows = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (field(&f, 0) as u64, field(&f, 1), field(&f, 4))
        })
        .collect();
    (rows, err)
}

/// Stdout as UTF-8 text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as UTF-8 text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `cptsim forward --model MODEL --input X --output Y`, then `extra` flags.
pub fn run_forward(model: &str, x: &Path, y: &Path, extra: &[&str]) -> Output {
    let (x, y) = (x.to_string_lossy(), y.to_string_lossy());
    let mut args = vec!["forward", "--model", model, "--input", &x, "--output", &y];
    args.extend_from_slice(extra);
    run(&args)
}

/// (shape as numpy prints it, values) of a float32 `.npy` written by cptsim.
pub fn read_npy(path: &Path) -> (String, Vec<f32>) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let hlen = usize::from(u16::from_le_bytes([b[8], b[9]]));
    let header = String::from_utf8_lossy(&b[10..10 + hlen]).to_string();
    let shape = header
        .split("'shape': ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("{}: no shape in {header}", path.display()))
        .to_string()
        + ")";
    let data = b[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (shape, data)
}

/// Writes a float32 C-order `.npy` (version 1.0) of `shape` filled with `f(i)`.
pub fn write_npy(path: &std::path::Path, shape: &[usize], f: impl Fn(usize) -> f32) {
    let n: usize = shape.iter().product();
    let data = (0..n).flat_map(|i| f(i).to_le_bytes());
    write_npy_raw(path, "<f4", shape, data.collect());
}

/// Writes an int64 C-order `.npy` of `values` in `shape` (what `np.save` writes for token ids).
pub fn write_i64_npy(path: &std::path::Path, shape: &[usize], values: &[i64]) {
    let data = values.iter().flat_map(|v| v.to_le_bytes());
    write_npy_raw(path, "<i8", shape, data.collect());
}

/// Writes a C-order `.npy` (version 1.0) of dtype `descr` and `shape` around the element bytes.
fn write_npy_raw(path: &std::path::Path, descr: &str, shape: &[usize], data: Vec<u8>) {
    // A Python tuple: one element needs its trailing comma.
    let dims: String = shape.iter().map(|d| format!("{d}, ")).collect();
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({}), }}",
        dims.trim_end()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    if let Err(e) = std::fs::write(path, bytes) {
        panic!("{}: {e}", path.display());
    }
}

/// Asserts that `err` (a failed run's stderr) is one line and prints no cause twice in a row
/// (`file: X: X`, the sign of an error that both formats and chains its source).
pub fn assert_one_clear_line(err: &str) {
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    let parts: Vec<&str> = err.trim_end().split(": ").collect();
    assert!(
        parts.windows(2).all(|w| w[0] != w[1]),
        "repeated cause: {err}"
    );
}

pub use cptsim_testdata::{fortunes_corpus, shared_data, skip};
