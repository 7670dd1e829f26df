//! Helpers for the end-to-end tests in `tests/tests/`: locate the `cptsim` binary that cargo built
//! beside the test executable and run it as a user would.

pub mod fuzz;

use std::path::PathBuf;
use std::process::{Command, Output};

/// Path of the `cptsim` binary of the same build profile as the running test.
///
/// Cargo builds it because the `cptsim` package has integration tests of its own; test executables
/// live in `target/<profile>/deps/`, the binary in `target/<profile>/`.
pub fn cptsim_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .unwrap_or_default();
    profile_dir.join(format!("cptsim{}", std::env::consts::EXE_SUFFIX))
}

/// A `Command` for the `cptsim` binary, run from the workspace root.
pub fn cptsim() -> Command {
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

/// Stdout as UTF-8 text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as UTF-8 text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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

/// The dataset folder `sub` of `../shared/data` beside the workspace (or of `$CPTSIM_DATA_DIR`
/// when set), or `None` after [`skip`] reports why — unless `CPTSIM_REQUIRE_DATA=1`, which turns
/// the skip into a failure (CI sets it).
pub fn shared_data(sub: &str) -> Option<PathBuf> {
    let root = std::env::var_os("CPTSIM_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/data"));
    let dir = root.join(sub);
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CPTSIM_REQUIRE_DATA").as_deref() != Ok("1"),
        "CPTSIM_REQUIRE_DATA=1 but {} is missing",
        dir.display()
    );
    skip(&format!(
        "{} not found (set CPTSIM_REQUIRE_DATA=1 to fail instead)",
        dir.display()
    ));
    None
}

/// Reports that the running test skips its work: a `SKIPPED: <test>: <reason>` line written to
/// the process's stderr directly, which the test harness does not capture, so `cargo test` shows
/// it even for a passing test and a run without data is visibly partial.
pub fn skip(reason: &str) {
    use std::io::Write;
    let line = skip_line(std::thread::current().name(), reason);
    // Nothing sensible to do if stderr is closed; the test still passes as a skip.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The line [`skip`] prints for test `name` (libtest names each test's thread after the test).
fn skip_line(name: Option<&str>, reason: &str) -> String {
    format!("SKIPPED: {}: {reason}\n", name.unwrap_or("(unnamed test)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_names_the_test_and_the_reason() {
        assert_eq!(
            skip_line(Some("train::mnist"), "no data"),
            "SKIPPED: train::mnist: no data\n"
        );
        assert!(skip_line(None, "x").starts_with("SKIPPED: (unnamed test): x"));
    }
}
