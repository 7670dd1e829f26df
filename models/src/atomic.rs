//! Atomic file output shared by every writer of the project: the data goes to a temporary sibling
//! of the target, is flushed and synced, and is renamed over the target, so readers see either the
//! old file or the complete new one. On failure the temporary file is removed. [`Staged`] outputs
//! go further: several files appear together, or none does. Every temporary is registered, so an
//! interrupt handler can remove them all ([`remove_temporaries`]).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Temporary files and staging directories in use, removed on interrupt.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temporaries() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(path: &Path) {
    temporaries().push(path.to_path_buf());
}

fn unregister(path: &Path) {
    temporaries().retain(|p| p != path);
}

/// Removes every temporary file and staging directory in use (for an interrupt handler, which
/// then exits) and returns how many there were. Holds the registry while it works, so a
/// [`Staged::commit`] in progress finishes first or does not start.
pub fn remove_temporaries() -> usize {
    let mut list = temporaries();
    for p in list.iter() {
        let _ = match p.is_dir() {
            true => std::fs::remove_dir_all(p),
            false => std::fs::remove_file(p),
        };
    }
    let n = list.len();
    list.clear();
    // Keep the registry locked: the caller exits, and no commit may start after the removal.
    std::mem::forget(list);
    n
}

/// Writes `path` through `fill`; the file appears only if `fill`, the flush and the rename succeed.
///
/// `io_err` turns an I/O failure into the caller's error type; it is given the path the user asked
/// for (never the hidden temporary one).
pub fn write_atomically<T, E>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<T, E>,
    io_err: impl Fn(&Path, io::Error) -> E,
) -> Result<T, E> {
    if path.is_dir() {
        return Err(io_err(
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "is a directory"),
        ));
    }
    let Some(tmp) = temp_sibling(path) else {
        return Err(io_err(
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
        ));
    };
    register(&tmp);
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| io_err(path, e))?;
        let mut out = BufWriter::new(file);
        let value = fill(&mut out)?;
        let file = out.into_inner().map_err(|e| io_err(path, e.into_error()))?;
        file.sync_all().map_err(|e| io_err(path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))?;
        Ok(value)
    })();
    if result.is_err() {
        // Best effort: the temporary file may not exist if creating it failed.
        let _ = std::fs::remove_file(&tmp);
    }
    unregister(&tmp);
    result
}

/// One staged output: its staging directory and what it stands in for.
struct Stage {
    staging: PathBuf,
    target: PathBuf,
    /// The target is a directory: the staging directory's files replace its files of the same
    /// names, and `replaces` names files of an earlier run that are removed if not rewritten.
    dir: Option<Vec<String>>,
}

/// Outputs written as one unit: each is written into a hidden staging directory beside its target
/// (`.NAME.staging-PID`) and renamed into place by [`Staged::commit`]. Dropped uncommitted (a
/// failed run) or removed on interrupt, the staging directories vanish and the targets stay as
/// they were.
#[derive(Default)]
pub struct Staged {
    stages: Vec<Stage>,
}

impl Staged {
    /// Nothing staged yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The path to write instead of the file `target`.
    pub fn file(&mut self, target: &Path) -> io::Result<PathBuf> {
        let name = target
            .file_name()
            .ok_or_else(|| invalid(target, "not a file path"))?;
        if target.is_dir() {
            return Err(invalid(target, "is a directory"));
        }
        Ok(self.stage(target, None)?.join(name))
    }

    /// The directory to write instead of the directory `target` (created, with its parents, at
    /// commit). At commit its files replace `target`'s files of the same names; `target`'s files
    /// named in `replaces` that the new output lacks (an earlier run's) are removed; other files
    /// of `target` stay.
    pub fn dir(&mut self, target: &Path, replaces: &[&str]) -> io::Result<PathBuf> {
        if target.exists() && !target.is_dir() {
            return Err(invalid(target, "is not a directory"));
        }
        let replaces = replaces.iter().map(|s| s.to_string()).collect();
        self.stage(target, Some(replaces))
    }

    fn stage(&mut self, target: &Path, dir: Option<Vec<String>>) -> io::Result<PathBuf> {
        let staging = sibling(target, "staging").ok_or_else(|| invalid(target, "no file name"))?;
        if let Some(parent) = staging.parent().filter(|p| !p.as_os_str().is_empty()) {
            if dir.is_some() {
                std::fs::create_dir_all(parent).map_err(|e| at(parent, e))?;
            }
        }
        if staging.exists() {
            // A leftover of a killed process that had this PID.
            std::fs::remove_dir_all(&staging).map_err(|e| at(&staging, e))?;
        }
        std::fs::create_dir(&staging).map_err(|e| at(target, e))?;
        register(&staging);
        self.stages.push(Stage {
            staging: staging.clone(),
            target: target.to_path_buf(),
            dir,
        });
        Ok(staging)
    }

    /// `text` (an error message) with the staging paths replaced by the targets they stand for.
    pub fn unstage(&self, text: &str) -> String {
        let mut text = text.to_string();
        for st in &self.stages {
            let staged = match &st.dir {
                Some(_) => st.staging.clone(),
                None => st.staging.join(st.target.file_name().unwrap_or_default()),
            };
            text = text.replace(
                &staged.display().to_string(),
                &st.target.display().to_string(),
            );
        }
        text
    }

    /// Renames every staged output into place (under the registry lock, so an interrupt does not
    /// cut it in half) and removes the staging directories.
    pub fn commit(mut self) -> io::Result<()> {
        let _held = temporaries();
        for st in &self.stages {
            match &st.dir {
                None => {
                    let name = st.target.file_name().unwrap_or_default();
                    std::fs::rename(st.staging.join(name), &st.target)
                        .map_err(|e| at(&st.target, e))?;
                }
                Some(replaces) => {
                    std::fs::create_dir_all(&st.target).map_err(|e| at(&st.target, e))?;
                    for name in replaces {
                        let old = st.target.join(name);
                        if old.is_file() && !st.staging.join(name).exists() {
                            std::fs::remove_file(&old).map_err(|e| at(&old, e))?;
                        }
                    }
                    move_into(&st.staging, &st.target)?;
                }
            }
        }
        drop(_held);
        self.remove();
        Ok(())
    }

    fn remove(&mut self) {
        for st in self.stages.drain(..) {
            let _ = std::fs::remove_dir_all(&st.staging);
            unregister(&st.staging);
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Moves the contents of `from` into `to`, file by file (directories merged).
fn move_into(from: &Path, to: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(from).map_err(|e| at(from, e))? {
        let entry = entry.map_err(|e| at(from, e))?;
        let dest = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&dest).map_err(|e| at(&dest, e))?;
            move_into(&entry.path(), &dest)?;
        } else {
            std::fs::rename(entry.path(), &dest).map_err(|e| at(&dest, e))?;
        }
    }
    Ok(())
}

fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn invalid(path: &Path, msg: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {msg}", path.display()),
    )
}

/// `dir/.name.tmp-PID` beside `path`, or `None` when `path` has no file name.
fn temp_sibling(path: &Path) -> Option<PathBuf> {
    sibling(path, "tmp")
}

/// `dir/.name.KIND-PID` beside `path`, or `None` when `path` has no file name.
fn sibling(path: &Path, kind: &str) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    Some(path.with_file_name(format!(".{name}.{kind}-{}", std::process::id())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
        write_atomically(path, |f| f.write_all(bytes), |_, e| e)
    }

    #[test]
    fn replaces_the_target_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write(&path, b"first").unwrap();
        write(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failing_fill_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write(&path, b"old").unwrap();
        let r: io::Result<()> =
            write_atomically(&path, |_| Err(io::Error::other("boom")), |_, e| e);
        assert!(r.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn staged_outputs_appear_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let (file, out) = (dir.path().join("t.csv"), dir.path().join("run"));
        std::fs::create_dir(&out).unwrap();
        for (name, text) in [("a", "old a"), ("stale", "old"), ("mine", "user's")] {
            std::fs::write(out.join(name), text).unwrap();
        }
        std::fs::write(&file, "old trace").unwrap();
        let stage = |commit: bool| {
            let mut s = Staged::new();
            write(&s.file(&file).unwrap(), b"new trace").unwrap();
            let d = s.dir(&out, &["a", "stale"]).unwrap();
            write(&d.join("a"), b"new a").unwrap();
            std::fs::create_dir(d.join("sub")).unwrap();
            write(&d.join("sub/b"), b"new b").unwrap();
            if commit {
                s.commit().unwrap();
            }
        };
        stage(false);
        assert_eq!(std::fs::read(&file).unwrap(), b"old trace");
        assert_eq!(std::fs::read(out.join("a")).unwrap(), b"old a");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        let mut s = Staged::new();
        let staged = s.file(&file).unwrap();
        let msg = format!("{}: disk full", staged.display());
        assert_eq!(s.unstage(&msg), format!("{}: disk full", file.display()));
        drop(s);
        stage(true);
        assert_eq!(std::fs::read(&file).unwrap(), b"new trace");
        assert_eq!(std::fs::read(out.join("a")).unwrap(), b"new a");
        assert_eq!(std::fs::read(out.join("sub/b")).unwrap(), b"new b");
        assert!(!out.join("stale").exists());
        assert_eq!(std::fs::read(out.join("mine")).unwrap(), b"user's");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_staged_directory_is_created_only_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new/report");
        let mut s = Staged::new();
        let d = s.dir(&out, &[]).unwrap();
        write(&d.join("x"), b"x").unwrap();
        drop(s);
        assert!(!out.exists());
        assert!(Staged::new().file(dir.path()).is_err());
    }

    #[test]
    fn a_directory_or_missing_parent_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write(dir.path(), b"x").is_err());
        assert!(write(&dir.path().join("no/such/dir/f"), b"x").is_err());
        assert!(write(Path::new("/"), b"x").is_err());
    }
}
