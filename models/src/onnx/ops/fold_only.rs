//! The op types that only ever fold at import ([`crate::onnx::fold`] evaluates them on
//! constants) and their handler for the case where an input is a run-time tensor.

use crate::error::ModelError;
use crate::onnx::context::Importer;
use crate::onnx::node::NodeView;
use crate::onnx::value::Val;

/// Op types that only ever fold: they have an evaluator and no run-time form, so the importer
/// registers them with [`only_folds`] as their handler.
pub const FOLD_ONLY: &[&str] = &[
    "Constant",
    "ConstantOfShape",
    "Range",
    "Greater",
    "GreaterOrEqual",
    "Less",
    "LessOrEqual",
    "And",
    "Or",
    "Xor",
    "IsNaN",
    "IsInf",
    "Mod",
    "Min",
    "Max",
    "Ceil",
    "Floor",
    "Round",
    "Sign",
    "Reciprocal",
    "Log",
    "Trilu",
    "ScatterND",
    "ScatterElements",
    "Tile",
    "Size",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
];

/// The handler of a [`FOLD_ONLY`] op: reached only when an input is a run-time tensor.
pub fn only_folds(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let runtime = (0..node.proto.input.len())
        .find(|&i| matches!(imp.opt_input(node, i), Ok(Some(Val::Tensor(_)))));
    match runtime {
        Some(i) => Err(node.err(format!(
            "is only computed at import, on constants (shape, index and mask arithmetic); \
             input {i} ('{}') is a run-time tensor",
            node.input_name(i).unwrap_or_default()
        ))),
        None => Err(node.err("has no evaluator for its inputs")),
    }
}
