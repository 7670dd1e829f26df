//! Atomic trace output: the project's atomic writer with trace errors.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::TraceError;

/// Writes `path` through `fill`; the file appears only if `fill` and the flush succeed
/// (the project's one atomic writer, [`cptsim_models::atomic::write_atomically`]).
pub fn write_atomically<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<T, TraceError>,
) -> Result<T, TraceError> {
    cptsim_models::atomic::write_atomically(path, fill, TraceError::io)
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
