//! Resolving a model named on the command line: `zoo:NAME` is a built-in model, anything else
//! an ONNX file path.

use std::path::Path;

use crate::error::ModelError;
use crate::ir::Graph;

/// Loads the model `spec` names, with the batch dimension bound to `batch`.
pub fn load_graph(spec: &str, batch: usize) -> Result<Graph, ModelError> {
    match spec.strip_prefix("zoo:") {
        Some(name) => Err(ModelError::UnknownZoo {
            name: name.to_string(),
            msg: "this build has no model zoo yet; pass an .onnx file path".into(),
        }),
        None => crate::onnx::import_file(Path::new(spec), batch),
    }
}
