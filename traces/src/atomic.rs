//! Atomic file output: write to a temporary file in the target's directory, then rename it over
//! the target, so readers never see a half-written file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::TraceError;

/// Writes `path` through `fill`; the file appears only if `fill` and the flush succeed.
pub fn write_atomically<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<T, TraceError>,
) -> Result<T, TraceError> {
    let tmp = temp_path(path);
    let result = (|| {
        // Name the file the user asked for, not the hidden temporary one.
        let file = File::create(&tmp).map_err(|e| TraceError::io(path, e))?;
        let mut out = BufWriter::new(file);
        let value = fill(&mut out)?;
        let file = out
            .into_inner()
            .map_err(|e| TraceError::io(&tmp, e.into_error()))?;
        file.sync_all().map_err(|e| TraceError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| TraceError::io(path, e))?;
        Ok(value)
    })();
    if result.is_err() {
        // Best effort: the temp file may not exist if creating it failed.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `dir/.name.tmp-PID` beside `path`.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Shorthand for mapping a write error on `path`.
pub fn write_all(out: &mut impl Write, path: &Path, bytes: &[u8]) -> Result<(), TraceError> {
    out.write_all(bytes).map_err(|e| TraceError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let r: Result<(), _> =
            write_atomically(&path, |_| Err(TraceError::malformed(&path, "x", "boom")));
        assert!(r.is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn successful_write_replaces_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, "old").unwrap();
        write_atomically(&path, |w| write_all(w, &path, b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn missing_directory_is_named() {
        let path = Path::new("/no/such/dir/t.pb");
        let e = write_atomically(path, |_| Ok(())).unwrap_err().to_string();
        assert!(e.starts_with("/no/such/dir/t.pb: "), "{e}");
        assert!(!e.contains(".tmp"), "{e}");
    }
}
