//! [`RunError`]: why a run failed or stopped, with its [`ErrorKind`] — the class a program maps to
//! its exit code (`cptsim` maps them to 2, 3, 4, 5, 6 and 130). The message chain is the one the
//! failing step gave (`--model x.onnx at --batch 4: node conv1 …`); [`ErrorKind::of_cause`]
//! classifies the error types of the crates below this one.

use std::error::Error as StdError;
use std::fmt;
use std::io::ErrorKind as IoKind;

use cptsim_models::ModelError;
use cptsim_nn::SimError;
use cptsim_traces::TraceError;

use crate::plan::PlanError;

/// What kind of failure stopped a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad setting, an unknown name, a missing file, or keys that contradict each other.
    Usage,
    /// A file that exists but is malformed or does not fit (model, dataset, checkpoint, trace).
    BadInput,
    /// An output could not be written, or an internal failure.
    Runtime,
    /// Training diverged (NaN or a loss above `max_loss`); the last good checkpoint is kept.
    Diverged,
    /// Training collapsed to chance and `stop_on_collapse` stopped it; its outputs are kept.
    Collapsed,
    /// The observer asked the run to stop; a checkpoint of the iteration reached is kept when
    /// the run writes into its output directory.
    Interrupted,
    /// The reader of a pipe the caller writes to went away (not a failure of the run).
    PipeClosed,
}

impl ErrorKind {
    /// The kind of `e`: the first cause in its chain of a known type decides; an error of none
    /// is a usage error (a program's own checks of its arguments).
    pub fn of(e: &anyhow::Error) -> Self {
        e.chain().find_map(Self::of_cause).unwrap_or(Self::Usage)
    }

    /// The kind of one cause, if its type is one this crate knows.
    pub fn of_cause(cause: &(dyn StdError + 'static)) -> Option<Self> {
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            return Some(Self::of_io(e));
        }
        if let Some(e) = cause.downcast_ref::<RunError>() {
            return Some(e.kind);
        }
        if cause.is::<PlanError>() {
            return Some(Self::Usage);
        }
        if let Some(e) = cause.downcast_ref::<SimError>() {
            return Some(match e {
                SimError::Diverged { .. } => Self::Diverged,
                // data that does not fit the network is bad input too
                SimError::Data { .. } | SimError::Shape { .. } => Self::BadInput,
                SimError::Io { source, .. } => Self::of_io(source),
                SimError::Invalid { .. } => Self::Usage,
                _ => Self::Runtime,
            });
        }
        if let Some(e) = cause.downcast_ref::<ModelError>() {
            return match e {
                ModelError::Io { .. } | ModelError::Zoo(_) => None,
                ModelError::Request { .. } => Some(Self::Usage),
                _ => Some(Self::BadInput),
            };
        }
        if let Some(e) = cause.downcast_ref::<TraceError>() {
            return Some(match e {
                TraceError::Io { error, .. } => Self::of_io(error),
                TraceError::Malformed { .. }
                | TraceError::ModelMismatch { .. }
                | TraceError::Rejected { .. } => Self::BadInput,
                TraceError::UnknownFormat { .. } => Self::Usage,
            });
        }
        None
    }

    fn of_io(e: &std::io::Error) -> Self {
        match e.kind() {
            IoKind::BrokenPipe => Self::PipeClosed,
            IoKind::NotFound => Self::Usage,
            // a file that is not UTF-8 text, or ends early: the file is at fault, not the program
            IoKind::InvalidData | IoKind::UnexpectedEof => Self::BadInput,
            _ => Self::Runtime,
        }
    }
}

/// A run's failure: its kind and the chain of messages that says what and where.
#[derive(Debug)]
pub struct RunError {
    kind: ErrorKind,
    error: anyhow::Error,
}

impl RunError {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            error: anyhow::Error::msg(message.into()),
        }
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message chain, outermost first.
    pub fn messages(&self) -> Vec<String> {
        self.error.chain().map(ToString::to_string).collect()
    }

    /// The error with every message rewritten by `f` (staging paths replaced by the targets
    /// they stand for), its kind kept.
    pub(crate) fn relabel(self, f: impl Fn(&str) -> String) -> Self {
        let old = self.messages();
        let new: Vec<String> = old.iter().map(|m| f(m)).collect();
        if new == old {
            return self;
        }
        let mut chain = new.into_iter().rev();
        let innermost = anyhow::Error::msg(chain.next().unwrap_or_default());
        Self {
            kind: self.kind,
            error: chain.fold(innermost, |e, outer| e.context(outer)),
        }
    }
}

impl From<anyhow::Error> for RunError {
    fn from(error: anyhow::Error) -> Self {
        Self {
            kind: ErrorKind::of(&error),
            error,
        }
    }
}

impl From<PlanError> for RunError {
    fn from(e: PlanError) -> Self {
        Self::from(anyhow::Error::from(e))
    }
}

impl From<SimError> for RunError {
    fn from(e: SimError) -> Self {
        Self::from(anyhow::Error::from(e))
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl StdError for RunError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.error.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_first_known_cause_and_the_chain_is_kept() {
        let diverged = anyhow::Error::from(SimError::Diverged {
            iteration: 3,
            loss: f32::NAN,
            fw: 8,
            bw: 8,
        })
        .context("training");
        let e = RunError::from(diverged);
        assert_eq!(e.kind(), ErrorKind::Diverged);
        assert_eq!(e.messages().len(), 2);
        assert_eq!(e.to_string(), "training");
        let outer = anyhow::Error::from(e);
        assert_eq!(outer.chain().count(), 2);
        assert_eq!(ErrorKind::of(&outer), ErrorKind::Diverged);
        let gone = std::io::Error::new(IoKind::NotFound, "gone");
        assert_eq!(ErrorKind::of(&anyhow::Error::from(gone)), ErrorKind::Usage);
        let plan = PlanError::new("batch", "--batch: 0");
        assert_eq!(RunError::from(plan).kind(), ErrorKind::Usage);
        assert_eq!(ErrorKind::of(&anyhow::anyhow!("--x")), ErrorKind::Usage);
        let e = RunError::new(ErrorKind::Interrupted, "at /tmp/.out.staging-1/x");
        let e = e.relabel(|t| t.replace("/tmp/.out.staging-1", "/tmp/out"));
        assert_eq!(
            (e.kind(), e.to_string()),
            (ErrorKind::Interrupted, "at /tmp/out/x".into())
        );
    }
}
