//! Atomic file output: write a temporary sibling, then rename it over the target.

use std::io::Write;
use std::path::Path;

use onnx_protobuf::{Message, ModelProto};

use super::ExportError;

/// Serialises `model` and writes it to `path` atomically (see [`write_atomic`]).
pub fn write_model(model: &ModelProto, path: &Path) -> Result<(), ExportError> {
    write_atomic(path, &model_bytes(model)?)
}

/// The serialised protobuf bytes of `model`.
pub fn model_bytes(model: &ModelProto) -> Result<Vec<u8>, ExportError> {
    Ok(model.write_to_bytes()?)
}

/// Writes `bytes` to `path` atomically (see [`crate::atomic::write_atomically`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    let io_err = |p: &Path, cause| ExportError::Io {
        path: p.to_path_buf(),
        cause,
    };
    crate::atomic::write_atomically(
        path,
        |out| out.write_all(bytes).map_err(|e| io_err(path, e)),
        io_err,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    fn scratch_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cptsim-write-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn writes_and_replaces_without_leaving_temp_files() {
        let dir = scratch_dir("replace");
        let path = dir.join("out.bin");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("out.bin")]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_path() {
        let dir = scratch_dir("missing");
        let path = dir.join("no-such-dir").join("out.bin");
        let err = write_atomic(&path, b"x").unwrap_err().to_string();
        assert!(err.contains("no-such-dir"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn path_without_file_name_is_rejected() {
        assert!(write_atomic(Path::new("/"), b"x").is_err());
    }

    #[test]
    fn directory_target_is_rejected_without_touching_its_parent() {
        let dir = scratch_dir("isdir");
        let target = dir.join("sub");
        fs::create_dir(&target).unwrap();
        let err = write_atomic(&target, b"x").unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }
}
