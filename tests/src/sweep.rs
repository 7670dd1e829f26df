//! Helpers of the `cptsim sweep` tests (`tests/sweep.rs`, `tests/sweep_slurm.rs`).

use std::path::{Path, PathBuf};
use std::process::Output;

/// A cost-only plan of 6 cells (8 combinations, 2 excluded) on 2 accelerators.
pub const COST_PLAN: &str = r#"
name = "e2e-cost"
[grid]
model = ["zoo:lenet5", "zoo:mlp"]
schedule = ["static", "cosine"]
bits = ["8", "3:8"]
iters = 2000
accel = ["zc706", "stripes"]
[[exclude]]
schedule = "static"
bits = "3:8"
"#;

/// Runs `cptsim sweep ARGS` in `dir`.
pub fn sweep(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = crate::cptsim();
    cmd.current_dir(dir).arg("sweep").args(args);
    match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {}: {e}", crate::cptsim_path().display()),
    }
}

/// Writes `text` as `dir/plan.toml`; returns its path.
pub fn write_plan(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("plan.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The cell directories of the study in `out`, sorted.
pub fn cell_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out.join("cells"))
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// The comma-separated fields of each line of `path`.
pub fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(String::from).collect())
        .collect()
}
