//! The exception classes and how a library error maps to one: the same classes of failure as
//! the command-line program's exit codes (usage 2, bad input data 3, runtime 4, diverged 5), each
//! carrying the message the program prints.

use std::error::Error as StdError;
use std::io::ErrorKind;

use cptsim_models::ModelError;
use cptsim_traces::TraceError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(cptsim, Error, PyException, "Every error cptsim raises.");
create_exception!(
    cptsim,
    UsageError,
    Error,
    "A bad argument, a missing file or an unknown name (the program's exit code 2)."
);
create_exception!(
    cptsim,
    BadInputError,
    Error,
    "A file that exists but is malformed or does not fit the model (exit code 3)."
);
create_exception!(
    cptsim,
    RuntimeFailure,
    Error,
    "An output that could not be written, or an internal error (exit code 4)."
);
create_exception!(
    cptsim,
    DivergedError,
    Error,
    "Training diverged (exit code 5)."
);
create_exception!(
    cptsim,
    CollapsedError,
    Error,
    "Training collapsed to chance and `stop_on_collapse` stopped it (exit code 6)."
);

/// Adds the classes to the module, each with its `exit_code`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (name, class, code) in [
        ("Error", py.get_type::<Error>(), 1),
        ("UsageError", py.get_type::<UsageError>(), 2),
        ("BadInputError", py.get_type::<BadInputError>(), 3),
        ("RuntimeFailure", py.get_type::<RuntimeFailure>(), 4),
        ("DivergedError", py.get_type::<DivergedError>(), 5),
        ("CollapsedError", py.get_type::<CollapsedError>(), 6),
    ] {
        class.setattr("exit_code", code)?;
        m.add(name, class)?;
    }
    Ok(())
}

/// The classes of failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Usage,
    BadInput,
    Runtime,
    Diverged,
    Collapsed,
}

/// A failure: its class and its one-line message.
#[derive(Debug)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl Failure {
    /// A usage failure (a bad argument value).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            kind: Kind::Usage,
            message: message.into(),
        }
    }

    /// `e` classified as the program classifies it, its message prefixed with `context` (the
    /// argument at fault and its value).
    pub fn of(context: &str, e: &(dyn StdError + 'static)) -> Self {
        let kind = classify(e);
        let message = chain(e);
        let message = match context {
            "" => message,
            c => format!("{c}: {message}"),
        };
        Self { kind, message }
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f.kind {
            Kind::Usage => UsageError::new_err(f.message),
            Kind::BadInput => BadInputError::new_err(f.message),
            Kind::Runtime => RuntimeFailure::new_err(f.message),
            Kind::Diverged => DivergedError::new_err(f.message),
            Kind::Collapsed => CollapsedError::new_err(f.message),
        }
    }
}

/// `e`'s message and its causes', joined by ": ", a cause its parent's text already ends with
/// said once.
pub fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// The first cause in `e`'s chain of a known kind decides; none is a usage error (the program's
/// own argument checks).
fn classify(e: &(dyn StdError + 'static)) -> Kind {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(k) = kind(c) {
            return k;
        }
        cause = c.source();
    }
    Kind::Usage
}

fn io_kind(e: &std::io::Error) -> Kind {
    match e.kind() {
        ErrorKind::NotFound => Kind::Usage,
        _ => Kind::Runtime,
    }
}

fn kind(cause: &(dyn StdError + 'static)) -> Option<Kind> {
    if let Some(e) = cause.downcast_ref::<std::io::Error>() {
        return Some(io_kind(e));
    }
    if let Some(e) = cause.downcast_ref::<ModelError>() {
        return match e {
            ModelError::Io { .. } | ModelError::Zoo(_) => None,
            ModelError::Request { .. } => Some(Kind::Usage),
            _ => Some(Kind::BadInput),
        };
    }
    if let Some(e) = cause.downcast_ref::<TraceError>() {
        return Some(match e {
            TraceError::Io { error, .. } => io_kind(error),
            TraceError::Malformed { .. }
            | TraceError::ModelMismatch { .. }
            | TraceError::Rejected { .. } => Kind::BadInput,
            TraceError::UnknownFormat { .. } => Kind::Usage,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_take_the_programs_classes() {
        let missing = cptsim_models::load_summary("/no/such/model.onnx", 1).unwrap_err();
        assert_eq!(Failure::of("model", &missing).kind, Kind::Usage);
        let dir = std::env::temp_dir().join(format!("cptsim-py-{}.onnx", std::process::id()));
        std::fs::write(&dir, b"not an onnx file").unwrap();
        let bad = cptsim_models::load_summary(dir.to_str().unwrap(), 1).unwrap_err();
        std::fs::remove_file(&dir).unwrap();
        let f = Failure::of("model x", &bad);
        assert_eq!(f.kind, Kind::BadInput);
        assert!(f.message.starts_with("model x: "), "{}", f.message);
        let unknown = cptsim_models::load_summary("zoo:nosuch", 1).unwrap_err();
        assert_eq!(Failure::of("model", &unknown).kind, Kind::Usage);
    }
}
