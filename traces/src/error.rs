//! Errors of reading and writing trace files. Every variant names the file.

use std::path::PathBuf;

/// Why a trace could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file system refused.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error (part of the message, not a separate `source()`, so `{:#}` prints it once).
        error: std::io::Error,
    },
    /// The file is malformed or truncated at `position`.
    #[error("{}: {position}: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where, e.g. `line 12` or `byte 4711 (row 30)`.
        position: String,
        /// What is wrong.
        message: String,
    },
    /// The trace does not belong to the model it is read against.
    #[error("{}: trace does not match model '{model}': {message}", path.display())]
    ModelMismatch {
        /// The file.
        path: PathBuf,
        /// The model's name.
        model: String,
        /// What differs.
        message: String,
    },
    /// The file name does not say which format to use.
    #[error("{}: unknown trace format; use a .csv or .pb file name", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// A row consumer rejected a row.
    #[error("{}: {position}: {message}", path.display())]
    Rejected {
        /// The file.
        path: PathBuf,
        /// Where the row was.
        position: String,
        /// The consumer's reason.
        message: String,
    },
}

impl TraceError {
    /// An I/O error on `path`.
    pub fn io(path: &std::path::Path, error: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.to_path_buf(),
            error,
        }
    }

    /// A malformed-file error on `path` at `position`.
    pub fn malformed(
        path: &std::path::Path,
        position: impl Into<String>,
        message: impl Into<String>,
    ) -> TraceError {
        TraceError::Malformed {
            path: path.to_path_buf(),
            position: position.into(),
            message: message.into(),
        }
    }
}
