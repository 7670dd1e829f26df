//! Running a cell: take its lock, run its `cptsim` children (train, inspect, cost) with their
//! output in the cell's logs, and mark it done only when its result rows read back.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::cell::{
    unix_now, write_file, Cell, Outcome, CELL_JSON, COST_JSON, DONE, ERROR, INSPECT_JSON, LOCK,
    LOG_START, STDERR_LOG, STDOUT_LOG,
};
use super::collect;
use super::lock::{Acquired, Lock, HEARTBEAT};

impl Cell {
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
        // Ctrl-C / SIGTERM: the child (a training run checkpoints its iteration) is told and
        // waited for instead of being killed with this process.
        let _deferred = crate::interrupt::defer();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        let mut forwarded = false;
        let mut beat = Instant::now();
        let mut shown = Instant::now();
        let body_start = err_start + line.len() as u64;
        let sub = argv.first().map_or("", String::as_str);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if !forwarded && crate::interrupt::requested() {
                // Its process group may have been signalled too: within the same-interrupt
                // window a second signal does not cut its checkpoint short.
                // SAFETY: kill(2) on the PID of a child not yet reaped (so not reused).
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
                forwarded = true;
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
