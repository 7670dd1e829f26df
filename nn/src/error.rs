//! The error type of the trainer engine: every failure names the layer, file or value at fault.

use std::path::PathBuf;

/// Errors raised by the trainer engine.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A tensor reached a layer with a shape the layer cannot take.
    #[error("layer `{layer}`: {msg}")]
    Shape {
        /// Name of the layer (or operation) that rejected the tensor.
        layer: String,
        /// What was expected and what arrived.
        msg: String,
    },
    /// A layer's backward pass was called without a preceding training forward pass.
    #[error("layer `{layer}`: backward called without a forward pass in training mode")]
    NoForward {
        /// Name of the layer.
        layer: String,
    },
    /// A configuration value is out of range.
    #[error("invalid {what}: {msg}")]
    Invalid {
        /// The parameter or flag at fault.
        what: String,
        /// Why it is rejected.
        msg: String,
    },
    /// A data file is malformed (truncated, bad header, label out of range, …).
    #[error("{}: at byte {offset}: {msg}", path.display())]
    Data {
        /// The file that failed to parse.
        path: PathBuf,
        /// Byte offset (in the decompressed stream) where the problem was found.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// The training loss became NaN/infinite or exceeded the divergence limit.
    #[error("training diverged at iteration {iteration}: loss {loss} (forward {fw} bits, backward {bw} bits)")]
    Diverged {
        /// The 0-based iteration whose loss was bad.
        iteration: u64,
        /// The loss seen.
        loss: f32,
        /// Forward bits of that iteration.
        fw: u8,
        /// Backward bits of that iteration.
        bw: u8,
    },
    /// A stop was requested (Ctrl-C, SIGTERM) while an evaluation ran; it stopped between
    /// batches.
    #[error("interrupted during the evaluation after iteration {iteration}")]
    Interrupted {
        /// Iterations done.
        iteration: u64,
    },
    /// An I/O error while reading a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file being read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl SimError {
    /// Shorthand for a [`SimError::Io`] error on `path` (the shape the project's atomic writer,
    /// `cptsim_models::atomic::write_atomically`, takes).
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        SimError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// An output that could not be written: a runtime failure whatever the I/O cause (a missing
    /// directory is not the "file does not exist" of an input), with the path said once.
    pub fn output(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::io(path, std::io::Error::other(source))
    }

    /// Shorthand for a [`SimError::Shape`] error.
    pub fn shape(layer: &str, msg: impl Into<String>) -> Self {
        SimError::Shape {
            layer: layer.to_string(),
            msg: msg.into(),
        }
    }

    /// Shorthand for a [`SimError::Invalid`] error.
    pub fn invalid(what: &str, msg: impl Into<String>) -> Self {
        SimError::Invalid {
            what: what.to_string(),
            msg: msg.into(),
        }
    }
}

/// Result alias of the trainer engine.
pub type Result<T, E = SimError> = std::result::Result<T, E>;

impl From<cptsim_kernels::KernelError> for SimError {
    /// A kernel's shape or setting error as the variant of the same name (same message).
    fn from(e: cptsim_kernels::KernelError) -> Self {
        match e {
            cptsim_kernels::KernelError::Shape { layer, msg } => SimError::Shape { layer, msg },
            cptsim_kernels::KernelError::Invalid { what, msg } => SimError::Invalid { what, msg },
        }
    }
}
