//! The project's ONNX export: a small graph builder that writes `onnx_protobuf::ModelProto`
//! (opset 13, IR version 8) with float initializers and a symbolic batch dimension, and an
//! atomic file writer.
//!
//! The builder tracks the per-sample shape of every value it creates and records, per node, the
//! shapes, parameters and forward MACs, so callers can check a model's cost without importing it.

mod builder;
mod error;
mod proto;
mod write;

pub use builder::{BnParams, ConvGeom, GraphBuilder, NodeRecord, Value};
pub use error::ExportError;
pub use proto::{batched_value_info, float_tensor, node};
pub use write::{model_bytes, write_atomic, write_model};

/// ONNX IR version written into every exported model (loadable by current onnxruntime).
pub const IR_VERSION: i64 = 8;
/// Default-domain opset every exported model imports.
pub const OPSET_VERSION: i64 = 13;
/// Name of the symbolic batch dimension on the graph input and output.
pub const BATCH_DIM: &str = "N";
