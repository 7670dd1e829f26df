//! Test-only helper shared by the unit tests of the library crates and the end-to-end tests: where
//! the shared datasets are, whether a missing one skips the test or fails it, seeded random
//! tensors, a pool of a given number of threads for tests of thread-count independence, and a
//! small tmpfs for the full-disk tests. A leaf crate, so depending on it adds no upward edge.

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
    skip_unless_required("CPTSIM_REQUIRE_DATA", what);
}

/// Something the running test needs (a dataset, a program, a service) is missing, as `reason`
/// says: the test fails when the environment variable `require` is `1` (CI sets those of what it
/// installs), else it prints a [`skip`] naming the variable; the caller then returns.
pub fn skip_unless_required(require: &str, reason: &str) {
    assert!(
        std::env::var(require).as_deref() != Ok("1"),
        "{require}=1 but {reason}"
    );
    skip(&format!("{reason} (set {require}=1 to fail instead)"));
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

/// A tmpfs mounted on a directory for the running test (a disk that fills up), unmounted and
/// removed when dropped.
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// The mount point.
    pub fn path(&self) -> &std::path::Path {
        &self.dir
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Nothing sensible to do if the unmount fails: the directory stays, the test is over.
        let _ = std::process::Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Mounts a tmpfs of `bytes` on `dir` (created), or `None` with a printed `SKIPPED:` reason when
/// this process may not mount (not root, no `mount`) — unless `CPTSIM_REQUIRE_TMPFS=1` (CI, which
/// runs as root), which fails instead.
pub fn small_tmpfs(dir: &std::path::Path, bytes: u64) -> Option<Tmpfs> {
    let why = match std::fs::create_dir_all(dir) {
        Err(e) => format!("cannot create {}: {e}", dir.display()),
        Ok(()) => match std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::piped())
            .output()
        {
            Ok(out) if out.status.success() => {
                return Some(Tmpfs {
                    dir: dir.to_path_buf(),
                })
            }
            Ok(out) => format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => format!("cannot run mount: {e}"),
        },
    };
    assert!(
        std::env::var("CPTSIM_REQUIRE_TMPFS").as_deref() != Ok("1"),
        "CPTSIM_REQUIRE_TMPFS=1 but {why}"
    );
    skip(&format!(
        "{why} (a full-disk test needs root; set CPTSIM_REQUIRE_TMPFS=1 to fail instead)"
    ));
    None
}

/// The file [`fill`] writes.
pub const FILLER: &str = "filler";

/// Fills the file system `dir` is on: writes [`FILLER`] in `dir` until the disk is full (the
/// write that fails for lack of room ends it); any other error is returned.
pub fn fill(dir: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join(FILLER))?;
    let block = [0u8; 4096];
    loop {
        match f.write_all(&block) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => return Ok(()),
            Err(e) => return Err(e),
        }
    }
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
    fn a_required_dependency_fails_instead_of_skipping() {
        let var = "CPTSIM_REQUIRE_TESTDATA_SELFTEST";
        std::env::set_var(var, "1");
        let failed = std::panic::catch_unwind(|| skip_unless_required(var, "no widget"));
        std::env::remove_var(var);
        let msg = failed
            .err()
            .and_then(|e| e.downcast_ref::<String>().cloned());
        assert_eq!(
            msg.as_deref(),
            Some("CPTSIM_REQUIRE_TESTDATA_SELFTEST=1 but no widget")
        );
        skip_unless_required(var, "no widget (this skip line is expected)");
    }

    #[test]
    fn a_skip_names_the_test_and_the_reason() {
        assert_eq!(
            skip_line(Some("train::mnist"), "no data"),
            "SKIPPED: train::mnist: no data\n"
        );
    }
}
