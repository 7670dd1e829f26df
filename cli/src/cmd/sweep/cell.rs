//! One cell: its stable id, its directory `DIR/cells/<id>/` and running it — under its lock, as
//! `cptsim` child processes (train, resumed from its checkpoint when one is there; inspect; run),
//! logging each command to `stdout.log` / `stderr.log`, writing `cell.json`, `inspect.json`,
//! `cost.json` atomically and the `done` marker last, or `error.txt` on failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;

use super::command::Commands;
use super::grid::CellSpec;
use super::lock::Owner;
use super::plan::Scalar;
use super::typed::Plans;

/// File names inside a cell directory.
pub const DONE: &str = "done";
pub const ERROR: &str = "error.txt";
pub const LOCK: &str = "lock";
pub const CELL_JSON: &str = "cell.json";
pub const INSPECT_JSON: &str = "inspect.json";
pub const COST_JSON: &str = "cost.json";
pub const STDERR_LOG: &str = "stderr.log";
pub const STDOUT_LOG: &str = "stdout.log";
/// The first word of the line `stderr.log` gets before each command (tests count them).
pub const LOG_START: &str = "# cptsim-sweep start";

/// One cell of a sweep.
#[derive(Debug)]
pub struct Cell {
    /// Position in the plan's expansion (the Slurm array index).
    pub index: usize,
    pub id: String,
    pub spec: CellSpec,
    /// Its training run and cost, typed and validated.
    pub plans: Plans,
    pub commands: Commands,
    pub dir: PathBuf,
}

/// What running a cell did.
#[derive(Debug)]
pub enum Outcome {
    Ran,
    AlreadyDone,
    /// Another live process holds the cell's lock.
    Busy(Owner),
}

/// FNV-1a, 64 bits: a hash whose value never changes across builds or Rust versions.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The readable part of a value in an id: a model's or file's stem, other characters to `-`.
fn readable(v: &Scalar) -> String {
    let text = v.text();
    let text = text.strip_prefix("zoo:").unwrap_or(&text);
    let stem = Path::new(text)
        .file_stem()
        .filter(|_| text.contains('/'))
        .map_or(text.to_string(), |s| s.to_string_lossy().into_owned());
    stem.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The cell's id: its values (up to 40 characters), then 12 hex digits of the hash of its
/// canonical key/value list — keys sorted, `_` as `-`, the `[train]` table and the accelerators
/// included — so the same settings always map to the same directory.
pub fn cell_id(spec: &CellSpec, train: Option<&[(String, Scalar)]>) -> String {
    let mut canon: Vec<String> = spec
        .keys
        .iter()
        .chain(train.into_iter().flatten())
        .map(|(k, v)| format!("{}={}", k.replace('_', "-"), v.text()))
        .collect();
    canon.sort();
    canon.push(format!("accel={}", spec.accel.join(",")));
    canon.push(format!("train={}", train.is_some()));
    let hash = fnv1a(canon.join("\n").as_bytes());
    let mut prefix: String = spec
        .keys
        .iter()
        .map(|(_, v)| readable(v))
        .collect::<Vec<_>>()
        .join("_");
    if prefix.len() > 40 {
        prefix.truncate(40);
    }
    if prefix.is_empty() {
        format!("{:012x}", hash >> 16)
    } else {
        format!("{prefix}-{:012x}", hash >> 16)
    }
}

/// Writes `text` to `path` atomically.
pub fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    cptsim_models::atomic::write_atomically(path, |out| out.write_all(text.as_bytes()), |_, e| e)
        .with_context(|| format!("writing {}", path.display()))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Cell {
    /// Whether the cell finished.
    pub fn is_done(&self) -> bool {
        self.dir.join(DONE).exists()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(keys: &[(&str, Scalar)]) -> CellSpec {
        CellSpec {
            keys: keys
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            accel: vec!["zc706".into()],
            origins: Vec::new(),
            accel_from: None,
            table: crate::cmd::sweep::spans::Table::Grid,
        }
    }

    #[test]
    fn ids_are_stable_readable_and_distinct() {
        let a = spec(&[
            ("model", Scalar::Str("zoo:resnet20".into())),
            ("bits", Scalar::Str("3:8".into())),
        ]);
        let id = cell_id(&a, None);
        // Pinned: ids name directories of earlier runs, so they must never change.
        assert_eq!(id, "resnet20_3-8-2e02b0d95754");
        assert!(id.starts_with("resnet20_3-8-"), "{id}");
        assert_eq!(id.len(), "resnet20_3-8-".len() + 12);
        // Key order and `_`/`-` spelling do not matter; values, [train] and accel do.
        let b = spec(&[
            ("bits", Scalar::Str("3:8".into())),
            ("model", Scalar::Str("zoo:resnet20".into())),
        ]);
        assert_eq!(id[id.len() - 12..], cell_id(&b, None)[id.len() - 12..]);
        let train = [("iters".to_string(), Scalar::Int(2))];
        assert_ne!(cell_id(&a, Some(&train)), id);
        let mut c = a.clone();
        c.accel.push("stripes".into());
        assert_ne!(cell_id(&c, None), id);
        let path = spec(&[("model", Scalar::Str("models/my net.onnx".into()))]);
        assert!(cell_id(&path, None).starts_with("my-net-"));
    }
}
