//! One cell: its stable id, its directory `DIR/cells/<id>/` and running it — under its lock, as
//! `cptsim` child processes (train, resumed from its checkpoint when one is there; inspect; run),
//! logging each command to `stdout.log` / `stderr.log`, writing `cell.json`, `inspect.json`,
//! `cost.json` atomically and the `done` marker last, or `error.txt` on failure.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};

use super::collect;
use super::command::Commands;
use super::grid::CellSpec;
use super::lock::{Acquired, Lock, Owner, HEARTBEAT};
use super::plan::Scalar;

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

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Cell {
    /// Whether the cell finished.
    pub fn is_done(&self) -> bool {
        self.dir.join(DONE).exists()
    }

    /// Runs the cell unless it is done or held by another process; `threads` caps each child's
    /// worker threads; `phase` hears which step starts.
    pub fn execute(&self, threads: Option<usize>, phase: &dyn Fn(&str)) -> anyhow::Result<Outcome> {
        if self.is_done() {
            return Ok(Outcome::AlreadyDone);
        }
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let lock = match Lock::acquire(&self.dir.join(LOCK))? {
            Acquired::Held(lock) => lock,
            Acquired::Busy(owner) => return Ok(Outcome::Busy(owner)),
        };
        // It may have finished between the first look and the lock.
        if self.is_done() {
            return Ok(Outcome::AlreadyDone);
        }
        let _ = std::fs::remove_file(self.dir.join(ERROR));
        let result = self.steps(&lock, threads, phase);
        match result {
            Ok(()) => {
                write_file(&self.dir.join(DONE), &format!("{}\n", unix_now()))?;
                Ok(Outcome::Ran)
            }
            Err(e) => {
                let text = format!("{e:#}\n");
                write_file(&self.dir.join(ERROR), &text)?;
                Err(e)
            }
        }
    }

    fn steps(
        &self,
        lock: &Lock,
        threads: Option<usize>,
        phase: &dyn Fn(&str),
    ) -> anyhow::Result<()> {
        let mut keys = serde_json::Map::new();
        for (k, v) in &self.spec.keys {
            keys.insert(k.clone(), v.json());
        }
        let record = serde_json::json!({
            "id": self.id,
            "index": self.index,
            "keys": keys,
            "accel": self.spec.accel,
            "commands": self.commands,
        });
        write_file(
            &self.dir.join(CELL_JSON),
            &serde_json::to_string_pretty(&record)?,
        )?;
        let child = Child {
            cell: self,
            lock,
            threads,
            phase,
        };
        if let Some(train) = &self.commands.train {
            let run_dir = self.dir.join("run");
            if !run_dir.join("summary.json").exists() {
                if run_dir.join("checkpoint.bin").exists() {
                    phase("train (resumed)");
                    let resume = vec![
                        "train".to_string(),
                        format!("--resume={}", run_dir.display()),
                        format!("--out={}", run_dir.display()),
                    ];
                    child.run(&resume, false)?;
                } else {
                    phase("train");
                    child.run(train, false)?;
                }
            }
        }
        phase("inspect");
        let inspect = child.run(&self.commands.inspect, true)?;
        write_file(&self.dir.join(INSPECT_JSON), &inspect)?;
        phase("cost");
        let cost = child.run(&self.commands.cost, true)?;
        write_file(&self.dir.join(COST_JSON), &cost)?;
        // Done only when the cell's rows can be read back.
        collect::cell_rows(self).map(|_| ())
    }
}

/// Runs a cell's `cptsim` children, logging to the cell's logs and keeping its lock fresh.
struct Child<'a> {
    cell: &'a Cell,
    lock: &'a Lock,
    threads: Option<usize>,
    /// Hears the child's latest stderr line (a training run's progress) about once a second.
    phase: &'a dyn Fn(&str),
}

impl Child<'_> {
    /// Runs `cptsim ARGV`; returns its stdout when `capture`, else appends it to `stdout.log`.
    fn run(&self, argv: &[String], capture: bool) -> anyhow::Result<String> {
        let dir = &self.cell.dir;
        let exe = std::env::current_exe().context("locating the cptsim binary")?;
        let open_log = |name: &str| {
            let path = dir.join(name);
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))
        };
        let mut err_log = open_log(STDERR_LOG)?;
        let err_start = err_log.seek(SeekFrom::End(0)).unwrap_or(0);
        let line = format!(
            "{LOG_START} {} pid {}: cptsim {}\n",
            unix_now(),
            std::process::id(),
            argv.join(" ")
        );
        err_log.write_all(line.as_bytes())?;
        let part = dir.join(".stdout.part");
        let out: File = if capture {
            File::create(&part).with_context(|| format!("creating {}", part.display()))?
        } else {
            open_log(STDOUT_LOG)?
        };
        let mut cmd = Command::new(&exe);
        cmd.args(argv)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err_log.try_clone()?);
        if let Some(n) = self.threads {
            cmd.env("RAYON_NUM_THREADS", n.to_string());
        }
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        let mut beat = Instant::now();
        let mut shown = Instant::now();
        let body_start = err_start + line.len() as u64;
        let sub = argv.first().map_or("", String::as_str);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if beat.elapsed() >= HEARTBEAT {
                self.lock.touch();
                beat = Instant::now();
            }
            if shown.elapsed() >= Duration::from_secs(1) {
                let last = last_line(&dir.join(STDERR_LOG), body_start);
                (self.phase)(&format!("{sub}: {last}"));
                shown = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        writeln!(err_log, "# cptsim-sweep end: {status}")?;
        if !status.success() {
            let _ = std::fs::remove_file(&part);
            let last = last_line(&dir.join(STDERR_LOG), body_start);
            bail!(
                "`cptsim {sub}` failed ({status}): {last} (log: {})",
                dir.join(STDERR_LOG).display()
            );
        }
        if !capture {
            return Ok(String::new());
        }
        let mut text = String::new();
        File::open(&part)
            .and_then(|mut f| f.read_to_string(&mut text))
            .with_context(|| format!("reading {}", part.display()))?;
        let _ = std::fs::remove_file(&part);
        Ok(text)
    }
}

/// The last non-empty line a child wrote to the log after `from` (read from its last 4 KiB).
fn last_line(log: &Path, from: u64) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut f) = File::open(log) {
        let end = f.seek(SeekFrom::End(0)).unwrap_or(0);
        if f.seek(SeekFrom::Start(from.max(end.saturating_sub(4096))))
            .is_ok()
        {
            let _ = f.read_to_end(&mut bytes);
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("# cptsim-sweep"))
        .unwrap_or("no message")
        .trim()
        .trim_start_matches("error: ")
        .to_string()
}

/// Makes the child die when the thread that started it dies, so a killed sweep leaves no
/// orphan writing into a cell whose lock has gone stale.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and calls only prctl, which is
    // async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

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
