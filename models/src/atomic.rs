//! Atomic file output shared by every writer of the project: the data goes to a temporary sibling
//! of the target, is flushed and synced, and is renamed over the target, so readers see either the
//! old file or the complete new one. On failure the temporary file is removed.

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

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
    result
}

/// `dir/.name.tmp-PID` beside `path`, or `None` when `path` has no file name.
fn temp_sibling(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    Some(path.with_file_name(format!(".{name}.tmp-{}", std::process::id())))
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
    fn a_directory_or_missing_parent_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write(dir.path(), b"x").is_err());
        assert!(write(&dir.path().join("no/such/dir/f"), b"x").is_err());
        assert!(write(Path::new("/"), b"x").is_err());
    }
}
