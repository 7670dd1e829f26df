//! Errors of the ONNX export.

use std::path::PathBuf;

/// What can go wrong while building or writing an ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A node's inputs or parameters do not fit together (wrong rank, channel count, data length…).
    #[error("node `{node}`: {msg}")]
    Shape {
        /// Name of the node being added.
        node: String,
        /// What does not fit.
        msg: String,
    },
    /// A node, value or initializer name is used twice.
    #[error("name `{0}` is used twice in the graph")]
    DuplicateName(String),
    /// The graph has no input, or an input was declared twice.
    #[error("graph `{graph}`: {msg}")]
    Graph {
        /// Name of the graph.
        graph: String,
        /// What is wrong.
        msg: String,
    },
    /// Protobuf serialisation failed.
    #[error("cannot serialise the ONNX model: {0}")]
    Serialize(#[from] protobuf::Error),
    /// Writing the output file failed.
    #[error("cannot write {}: {cause}", path.display())]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The underlying error (kept out of the error chain: the message already says it).
        cause: std::io::Error,
    },
}
