//! Errors of schedule parsing and validation. Each names the flag or file it is about.

use std::path::PathBuf;

/// Why a schedule could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// A flag's value could not be understood or is out of range.
    #[error("{flag}: {message}")]
    Flag {
        /// The flag, e.g. `--bits`.
        flag: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// The schedule name is not one cptsim knows.
    #[error("--schedule: unknown schedule '{name}'; valid names: {valid}")]
    UnknownName {
        /// The name given.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A schedule file could not be read.
    #[error("schedule file {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error (part of the message, not a separate `source()`, so `{:#}` prints it once).
        error: std::io::Error,
    },
    /// A schedule file has a bad line.
    #[error("schedule file {}, line {line}: {message}", path.display())]
    FileLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl ScheduleError {
    /// Shorthand for a [`ScheduleError::Flag`].
    pub fn flag(flag: &'static str, message: impl Into<String>) -> ScheduleError {
        ScheduleError::Flag {
            flag,
            message: message.into(),
        }
    }
}
