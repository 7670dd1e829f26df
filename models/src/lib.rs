//! cptsim's model layer: the layer IR, ONNX import and export, shape inference, MAC counts and
//! the built-in model zoo.

pub mod atomic;
pub mod error;
pub mod export;
pub mod head;
pub mod ir;
pub mod onnx;
pub mod source;
pub mod summary;
pub mod zoo;

pub use error::ModelError;
pub use ir::Graph;
pub use source::{
    load_graph, load_graph_for_shape, load_graph_with, load_lm_graph, load_shapes, load_summary,
};
pub use summary::{GemmOperands, LayerInfo, LayerKind, LayerRole, ModelSummary};
