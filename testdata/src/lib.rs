//! Test-only helper shared by the unit tests of the library crates and the end-to-end tests: where
//! the shared datasets are, and whether a missing one skips the test or fails it. A leaf crate,
//! so depending on it adds no upward edge.

use std::path::PathBuf;

/// The dataset folder `sub` of `../shared/data` beside the workspace (or of `$CPTSIM_DATA_DIR`
/// when set), or `None` with a printed reason when it is missing — unless `CPTSIM_REQUIRE_DATA=1`,
/// which turns the skip into a failure (CI sets it).
pub fn shared_data(sub: &str) -> Option<PathBuf> {
    let root = std::env::var_os("CPTSIM_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let dir = root.join(sub);
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CPTSIM_REQUIRE_DATA").as_deref() != Ok("1"),
        "CPTSIM_REQUIRE_DATA=1 but {} is missing",
        dir.display()
    );
    eprintln!(
        "skipped: {} not found (set CPTSIM_REQUIRE_DATA=1 to fail instead)",
        dir.display()
    );
    None
}
