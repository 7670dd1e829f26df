//! Exit codes and how an error maps to one. A closed stdout (`cptsim … | head -1`) is not an
//! error: the command stops quietly with 0.

use std::process::ExitCode;

use cptsim_models::export::ExportError;
use cptsim_plot::PlotError;
use cptsim_train::ErrorKind;

/// Exit codes of `cptsim` (README "Exit codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Success, or stdout closed by the reader.
    Ok = 0,
    /// Usage: a bad flag value, a missing file, an unknown name or a contradiction between
    /// flags (clap's own errors use 2 too).
    Usage = 2,
    /// Bad input data: a file that exists but is malformed or does not fit (ONNX, trace,
    /// dataset, `.npy`, checkpoint).
    BadInput = 3,
    /// Runtime failure: an output could not be written, or an internal error.
    Runtime = 4,
    /// Training diverged (NaN or a loss above `--max-loss`); the last good checkpoint is kept.
    Diverged = 5,
    /// Training collapsed to chance and `--stop-on-collapse` stopped it; its outputs are kept.
    Collapsed = 6,
    /// Interrupted by Ctrl-C or SIGTERM (128 + SIGINT); unfinished outputs were removed.
    Interrupted = 130,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }

    /// An error saying `message` that exits with this code (a check of the CLI's own whose
    /// kind is not usage: a NaN in an input file is bad input).
    pub fn error(self, message: impl Into<String>) -> anyhow::Error {
        Stopped {
            exit: self,
            message: message.into(),
        }
        .into()
    }
}

/// An error whose exit code is decided: a command that stopped itself (a sweep interrupted), an
/// error relabelled ([`relabel`]) keeping its code, or one made by [`Exit::error`]; the message
/// says what happened and what was kept.
#[derive(Debug)]
pub struct Stopped {
    /// The exit code.
    pub exit: Exit,
    /// What happened and what was kept.
    pub message: String,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Stopped {}

/// The one-line message of `e`: its causes joined by ": ", each said once — a cause whose text
/// already ends its parent's (an error that both prints and chains its source) is skipped, and a
/// cause that starts by naming what its parent named (`--model x.onnx at --batch 4` over
/// `x.onnx: node conv1 …`) drops that name.
pub fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut parent = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.is_empty() && parent.ends_with(&text) {
            continue;
        }
        let shown = match text.split_once(": ") {
            Some((head, rest)) if !out.is_empty() && names_again(&parent, head) => rest,
            _ => text.as_str(),
        };
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(shown);
        parent = text;
    }
    out
}

/// Whether `head` (the text before a cause's first ": ") is a name — a path, `zoo:NAME`, a
/// file — that `parent` already says as a whole word.
fn names_again(parent: &str, head: &str) -> bool {
    head.len() >= 3
        && !head.contains(char::is_whitespace)
        && parent
            .split(|c: char| c.is_whitespace() || c == ',')
            .any(|w| w == head || w.trim_end_matches(':') == head)
}

/// `e` with its message rewritten by `relabel` (e.g. a staging path replaced by the user's
/// target), keeping the exit code it maps to; `e` itself when the message does not change.
pub fn relabel(e: anyhow::Error, relabel: impl Fn(&str) -> String) -> anyhow::Error {
    let text = message(&e);
    let message = relabel(&text);
    if message == text {
        return e;
    }
    Stopped {
        exit: classify(&e),
        message,
    }
    .into()
}

/// The exit for error `e`: the first cause in its chain that has a known kind decides; an
/// error of none (the CLI's own flag checks) is a usage error.
pub fn classify(e: &anyhow::Error) -> Exit {
    e.chain().find_map(kind).unwrap_or(Exit::Usage)
}

impl From<ErrorKind> for Exit {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::Usage => Exit::Usage,
            ErrorKind::BadInput => Exit::BadInput,
            ErrorKind::Runtime => Exit::Runtime,
            ErrorKind::Diverged => Exit::Diverged,
            ErrorKind::Collapsed => Exit::Collapsed,
            ErrorKind::Interrupted => Exit::Interrupted,
            ErrorKind::PipeClosed => Exit::Ok,
        }
    }
}

/// The exit of one cause: a [`Stopped`]'s own, else the kind the library crates give their
/// errors ([`ErrorKind::of_cause`]: a training run's, an I/O, model, trace or engine error), or
/// a figure's or an export's.
fn kind(cause: &(dyn std::error::Error + 'static)) -> Option<Exit> {
    if let Some(s) = cause.downcast_ref::<Stopped>() {
        return Some(s.exit);
    }
    if let Some(e) = cause.downcast_ref::<PlotError>() {
        return match e {
            PlotError::Io { error, .. } => kind(error),
            PlotError::MissingColumn { .. }
            | PlotError::BadValue { .. }
            | PlotError::Malformed { .. }
            | PlotError::Empty { .. } => Some(Exit::BadInput),
            PlotError::Invalid(_) => Some(Exit::Usage),
            PlotError::Trace(t) => kind(t),
            PlotError::Draw(_) => Some(Exit::Runtime),
        };
    }
    if let Some(e) = cause.downcast_ref::<ExportError>() {
        return match e {
            ExportError::Io { cause, .. } => kind(cause),
            _ => Some(Exit::Runtime),
        };
    }
    ErrorKind::of_cause(cause).map(Exit::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_nn::SimError;
    use std::io::ErrorKind;

    #[test]
    fn a_cause_is_said_once_and_relabelling_keeps_the_code() {
        let io = SimError::Io {
            path: "x.npy".into(),
            source: std::io::Error::new(ErrorKind::NotFound, "gone"),
        };
        let e = anyhow::Error::from(io).context("--input");
        assert_eq!(message(&e), "--input: x.npy: gone");
        let e = relabel(e, |t| t.replace("x.npy", "y.npy"));
        assert_eq!(
            (message(&e), classify(&e)),
            ("--input: y.npy: gone".into(), Exit::Usage)
        );
    }

    #[test]
    fn a_name_the_parent_said_is_not_repeated() {
        let model = anyhow::anyhow!("x.onnx: node conv1 (Conv): bad weight");
        let e = model.context("--model x.onnx at --batch 4");
        assert_eq!(
            message(&e),
            "--model x.onnx at --batch 4: node conv1 (Conv): bad weight"
        );
        let io = SimError::Io {
            path: "y.npy".into(),
            source: std::io::Error::new(ErrorKind::NotFound, "gone"),
        };
        let e = anyhow::Error::from(io).context("y.npy");
        assert_eq!(message(&e), "y.npy: gone");
        // a name inside a longer word, or a short head, stays
        let e = anyhow::anyhow!("x.onnx: bad").context("--model old_x.onnx");
        assert_eq!(message(&e), "--model old_x.onnx: x.onnx: bad");
        let e = anyhow::anyhow!("ab: bad").context("ab");
        assert_eq!(message(&e), "ab: ab: bad");
    }

    #[test]
    fn causes_map_to_their_codes() {
        let pipe = anyhow::Error::from(std::io::Error::from(ErrorKind::BrokenPipe));
        assert_eq!(classify(&pipe), Exit::Ok);
        let diverged = anyhow::Error::from(SimError::Diverged {
            iteration: 3,
            loss: f32::NAN,
            fw: 8,
            bw: 8,
        })
        .context("training");
        assert_eq!(classify(&diverged), Exit::Diverged);
        for exit in [Exit::Diverged, Exit::Collapsed] {
            let stopped = anyhow::Error::from(Stopped {
                exit,
                message: "training stopped".into(),
            });
            assert_eq!(classify(&stopped), exit);
        }
        let data = anyhow::Error::from(SimError::Data {
            path: "x.npy".into(),
            offset: 0,
            msg: "bad".into(),
        });
        assert_eq!(classify(&data), Exit::BadInput);
        let full = anyhow::Error::from(std::io::Error::other("disk full"));
        assert_eq!(classify(&full), Exit::Runtime);
        let no_room = || std::io::Error::from(ErrorKind::StorageFull);
        let plot = anyhow::Error::from(PlotError::io(std::path::Path::new("a.svg"), no_room()));
        assert_eq!(classify(&plot), Exit::Runtime);
        let export = anyhow::Error::from(ExportError::Io {
            path: "m.onnx".into(),
            cause: no_room(),
        });
        assert_eq!(classify(&export), Exit::Runtime);
        let cell = anyhow::Error::from(PlotError::BadValue {
            path: "r.csv".into(),
            line: 2,
            column: "seed".into(),
            problem: "'zero' is not a number".into(),
        });
        assert_eq!(classify(&cell), Exit::BadInput);
        assert_eq!(
            classify(&Exit::BadInput.error("x.npy: NaN")),
            Exit::BadInput
        );
        // what read_to_string says of a file that is not UTF-8
        let not_utf8 = anyhow::Error::from(std::io::Error::from(ErrorKind::InvalidData))
            .context("plan p.toml");
        assert_eq!(classify(&not_utf8), Exit::BadInput);
        assert_eq!(classify(&anyhow::anyhow!("--batch: 0")), Exit::Usage);
    }
}
