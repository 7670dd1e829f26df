//! The error type of model loading: every message names the file (or `zoo:NAME`), and where it
//! applies the node and its op type, so one line tells the user what is wrong and where.

use thiserror::Error;

/// Why a model could not be loaded, imported or shape-checked.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The file could not be read.
    #[error("cannot read {path}: {err}")]
    Io {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        err: std::io::Error,
    },
    /// The file is empty.
    #[error("{file}: empty file, not an ONNX model")]
    Empty {
        /// File name or `zoo:NAME`.
        file: String,
    },
    /// The bytes are not a decodable ONNX `ModelProto`.
    #[error("{file}: not a valid ONNX model (protobuf decode failed: {msg})")]
    Decode {
        /// File name or `zoo:NAME`.
        file: String,
        /// The decoder's reason.
        msg: String,
    },
    /// A node is malformed or inconsistent with its inputs.
    #[error("{file}: node {node} ({op}): {msg}")]
    Node {
        /// File name or `zoo:NAME`.
        file: String,
        /// Node name (or a generated `OpType_index` when the model leaves it empty).
        node: String,
        /// ONNX op type.
        op: String,
        /// What is wrong.
        msg: String,
    },
    /// A node attribute has the wrong type or value.
    #[error("{file}: node {node} ({op}), attribute '{attr}': {msg}")]
    Attribute {
        /// File name or `zoo:NAME`.
        file: String,
        /// Node name.
        node: String,
        /// ONNX op type.
        op: String,
        /// Attribute name.
        attr: String,
        /// What is wrong.
        msg: String,
    },
    /// The model uses an op cptsim does not import.
    #[error("{file}: node {node}: unsupported op type '{op}'; supported ops: {supported}")]
    Unsupported {
        /// File name or `zoo:NAME`.
        file: String,
        /// Node name.
        node: String,
        /// The unsupported op type (with its domain when not the default one).
        op: String,
        /// Comma-separated list of the supported op types.
        supported: String,
    },
    /// A problem with the graph as a whole (inputs, outputs, structure).
    #[error("{file}: {msg}")]
    Graph {
        /// File name or `zoo:NAME`.
        file: String,
        /// What is wrong.
        msg: String,
    },
    /// `zoo:NAME` could not be built (unknown name, bad class count).
    #[error(transparent)]
    Zoo(#[from] crate::zoo::ZooError),
    /// A size asked for fits no model (`--batch 0`, `--seq-len 0`): the request, not the file,
    /// is wrong.
    #[error("{file}: {msg}")]
    Request {
        /// File name or `zoo:NAME`.
        file: String,
        /// What is wrong.
        msg: String,
    },
}

impl ModelError {
    /// A graph-level error for `file`.
    pub fn graph(file: &str, msg: impl Into<String>) -> Self {
        ModelError::Graph {
            file: file.to_string(),
            msg: msg.into(),
        }
    }
}
