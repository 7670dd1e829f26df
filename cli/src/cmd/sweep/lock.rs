//! The per-cell lock file, so two processes (local workers, Slurm tasks, a second `sweep run`)
//! never run one cell.
//!
//! `CELL/lock` is created with `O_EXCL` and holds `pid host unix-seconds`; its holder touches it
//! every [`HEARTBEAT`] while the cell runs. A lock is **stale** (and may be broken) when its
//! owner is on this host and its PID is gone, or when it has not been touched for [`STALE_AFTER`]
//! (an owner on another node that died with its machine). Breaking goes through a second
//! `O_EXCL` file, `CELL/lock.break`, whose holder re-reads the lock before removing it, so two
//! processes judging the same lock stale cannot both take the cell.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::Context;

/// How often a running cell touches its lock.
pub const HEARTBEAT: Duration = Duration::from_secs(30);
/// A lock untouched this long is stale, wherever its owner runs.
pub const STALE_AFTER: Duration = Duration::from_secs(300);

/// A held lock; removed on drop.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

/// Who holds a lock, as written in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub pid: u32,
    pub host: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PID {} on {}", self.pid, self.host)
    }
}

/// This machine's host name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_string())
}

/// Whether process `pid` exists on this machine.
fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks for existence and permission; it sends nothing.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn read_owner(path: &Path) -> Option<Owner> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut parts = text.split_whitespace();
    let pid = parts.next()?.parse().ok()?;
    let host = parts.next()?.to_string();
    Some(Owner { pid, host })
}

/// The locks this process holds. A lock naming this process's PID that is not one of them was
/// left by an earlier process that had the same PID (PIDs are reused): it is stale, and the
/// sweep must not report itself as running the cell "elsewhere".
static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn held_here(path: &Path) -> bool {
    HELD.lock().is_ok_and(|held| held.iter().any(|p| p == path))
}

/// The lock's owner when it is held and not stale.
pub fn live_owner(path: &Path) -> Option<Owner> {
    let meta = std::fs::metadata(path).ok()?;
    let age = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or_default();
    // An unreadable lock (being written) counts as live until it goes stale by age.
    let owner = read_owner(path).unwrap_or(Owner {
        pid: 0,
        host: String::new(),
    });
    let here = owner.host == host_name() && owner.pid != 0;
    let ours = owner.pid == std::process::id();
    let dead_here = here
        && if ours {
            !held_here(path)
        } else {
            !pid_alive(owner.pid)
        };
    (!dead_here && age < STALE_AFTER).then_some(owner)
}

/// What [`Lock::acquire`] found.
#[derive(Debug)]
pub enum Acquired {
    Held(Lock),
    /// Another live process holds the cell.
    Busy(Owner),
}

impl Lock {
    /// Takes `path`, breaking it first if it is stale.
    pub fn acquire(path: &Path) -> anyhow::Result<Acquired> {
        for _ in 0..3 {
            match create_with_owner(path) {
                Ok(()) => {
                    if let Ok(mut held) = HELD.lock() {
                        held.push(path.to_path_buf());
                    }
                    return Ok(Acquired::Held(Lock {
                        path: path.to_path_buf(),
                    }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if let Some(owner) = live_owner(path) {
                        return Ok(Acquired::Busy(owner));
                    }
                    break_stale(path)?;
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("creating lock {}", path.display()))
                }
            }
        }
        match live_owner(path) {
            Some(owner) => Ok(Acquired::Busy(owner)),
            None => anyhow::bail!("lock {}: could not be taken or broken", path.display()),
        }
    }

    /// Marks the lock as still held.
    pub fn touch(&self) {
        if let Ok(file) = OpenOptions::new().append(true).open(&self.path) {
            // Best effort: a failed touch only lets the lock go stale sooner.
            let _ = file.set_modified(SystemTime::now());
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Ok(mut held) = HELD.lock() {
            held.retain(|p| *p != self.path);
        }
    }
}

/// Creates the lock `path` holding this process's PID, host and time, atomically: the owner is
/// written to a file of this process's own and hard-linked to `path` (which fails if `path`
/// exists), so a lock is never seen empty, even when the process is killed while taking it.
fn create_with_owner(path: &Path) -> std::io::Result<()> {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let pid = std::process::id();
    let mut own = path.as_os_str().to_owned();
    own.push(format!(".{pid}"));
    let own = PathBuf::from(own);
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&own)
        .and_then(|mut file| {
            writeln!(file, "{pid} {} {now}", host_name())?;
            file.sync_all()
        });
    let linked = written.and_then(|()| std::fs::hard_link(&own, path));
    let _ = std::fs::remove_file(&own);
    linked
}

/// Removes a stale lock under the `lock.break` guard (itself broken after [`STALE_AFTER`]).
fn break_stale(path: &Path) -> anyhow::Result<()> {
    let guard = path.with_extension("break");
    match OpenOptions::new().write(true).create_new(true).open(&guard) {
        Ok(_) => {
            // Re-check under the guard: the lock may have been broken and retaken meanwhile.
            let result = if live_owner(path).is_none() {
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        Err(e).with_context(|| format!("removing stale lock {}", path.display()))
                    }
                    _ => Ok(()),
                }
            } else {
                Ok(())
            };
            let _ = std::fs::remove_file(&guard);
            result
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let old = std::fs::metadata(&guard)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok())
                .is_some_and(|age| age > STALE_AFTER);
            if old {
                let _ = std::fs::remove_file(&guard);
            }
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("creating {}", guard.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_is_busy_and_a_dead_owner_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let Acquired::Held(lock) = Lock::acquire(&path).unwrap() else {
            panic!("first acquire must hold");
        };
        match Lock::acquire(&path).unwrap() {
            Acquired::Busy(owner) => assert_eq!(owner.pid, std::process::id()),
            Acquired::Held(_) => panic!("a held lock was taken twice"),
        }
        drop(lock);
        assert!(!path.exists());
        // A lock left by a process that is gone (PIDs above the kernel's limit never exist).
        std::fs::write(&path, format!("4194305 {} 0\n", host_name())).unwrap();
        assert!(matches!(Lock::acquire(&path).unwrap(), Acquired::Held(_)));
        // A lock naming this process that it does not hold was left by an earlier process
        // with the same PID: stale, not "running elsewhere".
        std::fs::write(&path, format!("{} {} 0\n", std::process::id(), host_name())).unwrap();
        assert!(live_owner(&path).is_none());
        let Acquired::Held(again) = Lock::acquire(&path).unwrap() else {
            panic!("a lock left under this process's PID was not broken");
        };
        assert!(live_owner(&path).is_some());
        drop(again);
        // A fresh lock of another host is live.
        std::fs::write(&path, "1 some-other-node 0\n").unwrap();
        assert!(matches!(Lock::acquire(&path).unwrap(), Acquired::Busy(_)));
        // Untouched for longer than STALE_AFTER, it is stale wherever its owner runs.
        let old = SystemTime::now() - STALE_AFTER - Duration::from_secs(1);
        std::fs::File::options()
            .append(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(live_owner(&path).is_none());
        assert!(matches!(Lock::acquire(&path).unwrap(), Acquired::Held(_)));
    }
}
