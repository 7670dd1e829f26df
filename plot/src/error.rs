//! Why a figure or report could not be made.

use std::path::{Path, PathBuf};

use cptsim_traces::TraceError;

/// Errors of this crate; each names the file, column or flag at fault.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Reading or writing a file failed.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A CSV file lacks a column a figure needs.
    #[error("{path}: no column '{column}' (columns: {found})")]
    MissingColumn {
        path: PathBuf,
        column: String,
        found: String,
    },
    /// A cell is not a finite number, out of its column's range or too long, or a row repeats.
    #[error("{path}: line {line}, column '{column}': {problem}")]
    BadValue {
        path: PathBuf,
        line: u64,
        column: String,
        problem: String,
    },
    /// A line of a file is malformed (a CSV row of the wrong length, a JSON syntax error).
    #[error("{path}: line {line}: {problem}")]
    Malformed {
        path: PathBuf,
        line: u64,
        problem: String,
    },
    /// The input holds nothing to draw.
    #[error("{what}: nothing to plot ({why})")]
    Empty { what: String, why: String },
    /// An argument makes no sense.
    #[error("{0}")]
    Invalid(String),
    /// The trace or atomic writer failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The plotting back-end failed.
    #[error("drawing failed: {0}")]
    Draw(String),
}

impl PlotError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, error: std::io::Error) -> PlotError {
        PlotError::Io {
            path: path.to_path_buf(),
            error,
        }
    }

    /// Nothing to plot in `what`, because `why`.
    pub fn empty(what: impl std::fmt::Display, why: impl Into<String>) -> PlotError {
        PlotError::Empty {
            what: what.to_string(),
            why: why.into(),
        }
    }
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, PlotError>;
