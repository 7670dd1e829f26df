//! Helpers of the `cptsim sweep` tests (`tests/sweep.rs`, `tests/sweep_slurm.rs`).

use std::path::Path;
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
