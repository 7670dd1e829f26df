//! cptsim's model layer: the layer IR, ONNX import and export, shape inference, MAC counts and
//! the built-in model zoo.

pub mod export;
pub mod summary;
pub mod zoo;

pub use summary::{LayerInfo, LayerKind, LayerRole, ModelSummary};
