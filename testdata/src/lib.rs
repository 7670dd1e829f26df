//! Test-only helper shared by the unit tests of the library crates and the end-to-end tests: where
//! the shared datasets are, whether a missing one skips the test or fails it, seeded random
//! tensors, and a pool of a given number of threads for tests of thread-count independence. A leaf crate, so depending on
//! it adds no upward edge.

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
    missing(&format!("{} not found", dir.display()));
    None
}

/// A dataset the running test needs is missing: a failure under `CPTSIM_REQUIRE_DATA=1`, else a
/// printed skip.
fn missing(what: &str) {
    assert!(
        std::env::var("CPTSIM_REQUIRE_DATA").as_deref() != Ok("1"),
        "CPTSIM_REQUIRE_DATA=1 but {what}"
    );
    skip(&format!(
        "{what} (set CPTSIM_REQUIRE_DATA=1 to fail instead)"
    ));
}

/// Where Debian's `fortunes` package keeps its English text (≈ 2.6 MB).
pub const FORTUNES_DIR: &str = "/usr/share/games/fortunes";

/// The `fortunes` corpus as one UTF-8 text file (every fortune file of [`FORTUNES_DIR`] in name
/// order, the `%` separator lines dropped, invalid UTF-8 replaced), written once into `dir`; or
/// `None` with a printed reason when the package is missing — unless `CPTSIM_REQUIRE_DATA=1`
/// (CI, whose `.ci/run` installs it), which fails instead. Reading or writing a file that is
/// there is an error.
pub fn fortunes_corpus(dir: &std::path::Path) -> std::io::Result<Option<PathBuf>> {
    let src = std::path::Path::new(FORTUNES_DIR);
    let mut names: Vec<PathBuf> = std::fs::read_dir(src)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_none())
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        missing(&format!(
            "{FORTUNES_DIR} has no fortune files (apt-get install fortunes)"
        ));
        return Ok(None);
    }
    names.sort();
    let mut text = String::new();
    for p in &names {
        let bytes = std::fs::read(p)?;
        for line in String::from_utf8_lossy(&bytes).lines() {
            if line != "%" {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    let out = dir.join("fortunes.txt");
    std::fs::write(&out, text)?;
    Ok(Some(out))
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

/// A tensor of uniform values in `[-a, a]`, seeded (the layer and kernel tests' operands).
pub fn rand_tensor(shape: &[usize], a: f32, seed: u64) -> ndarray::ArrayD<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    ndarray::ArrayD::from_shape_simple_fn(shape.to_vec(), || rng.random_range(-a..=a))
}

/// Runs `f` on a fresh rayon pool of `threads` threads (tests that a result does not depend on
/// the thread count); an error when the pool cannot be built.
pub fn with_threads<R: Send>(
    threads: usize,
    f: impl FnOnce() -> R + Send,
) -> Result<R, rayon::ThreadPoolBuildError> {
    Ok(rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?
        .install(f))
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
    }
}
