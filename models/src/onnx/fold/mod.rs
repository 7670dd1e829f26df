//! The import-time evaluator: every node whose inputs are all constants (initializers, `Shape`s
//! of run-time tensors, and whatever was folded from them) is computed here and leaves no trace
//! in the IR, whatever op computes it. GPT-2's position ids (`Range`), BERT's `token_type_ids`
//! buffer (`Expand` → `GatherElements`), Swin's shifted-window attention mask (`ScatterND`,
//! comparisons, `Where`) and the shape arithmetic of every exporter fold this way.
//!
//! Each op is a small function of its node and its constant inputs ([`Eval`]); the table
//! [`evaluator`] maps op types to them. Sizes are bounded: a folded tensor of more than
//! [`FOLD_LIMIT`] elements is an error naming the node, checked before anything is allocated
//! for the ops whose output size the file controls (`ConstantOfShape`, `Expand`, `Range`,
//! broadcasting, gathers).

mod index;
mod layout;
mod linalg;
mod math;

use super::context::Importer;
use super::node::NodeView;
use super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::shape::element_count;

/// Most elements a tensor computed at import may have (2²⁴, 64 MiB of f32).
pub const FOLD_LIMIT: usize = 1 << 24;

/// Evaluates one node on its constant inputs (`None` for an absent optional input).
pub type Eval = fn(&NodeView, &[Option<Const>]) -> Result<Const, ModelError>;

/// The evaluator of `op_type`, if it has one.
pub fn evaluator(op_type: &str) -> Option<Eval> {
    math::evaluator(op_type)
        .or_else(|| index::evaluator(op_type))
        .or_else(|| layout::evaluator(op_type))
        .or_else(|| linalg::evaluator(op_type))
}

/// Folds `node` when its op has an evaluator and every input it names is a constant: `None`
/// when it does not fold (a run-time input, or no evaluator), else the folded constant or the
/// evaluation's error.
pub fn try_fold(imp: &Importer, node: &NodeView) -> Option<Result<Val, ModelError>> {
    let domain = node.proto.domain.as_str();
    if !(domain.is_empty() || domain == "ai.onnx") {
        return None;
    }
    let eval = evaluator(node.op_type())?;
    let mut inputs = Vec::with_capacity(node.proto.input.len());
    for i in 0..node.proto.input.len() {
        match imp.opt_input(node, i) {
            Ok(Some(Val::Const(c))) => inputs.push(Some(c)),
            Ok(None) => inputs.push(None),
            Ok(Some(Val::Tensor(_))) => return None,
            Err(e) => return Some(Err(e)),
        }
    }
    let out = eval(node, &inputs).and_then(|c| {
        check_size(node, c.shape())?;
        Ok(Val::Const(c))
    });
    Some(out)
}

/// An error unless a tensor of `shape` fits under [`FOLD_LIMIT`].
pub fn check_size(node: &NodeView, shape: &[usize]) -> Result<usize, ModelError> {
    match element_count(shape) {
        Some(n) if n <= FOLD_LIMIT => Ok(n),
        _ => Err(node.err(format!(
            "computing it at import would make a constant of shape {shape:?}, more than the \
             {FOLD_LIMIT} elements a folded tensor may have"
        ))),
    }
}

/// Required constant input `i`.
fn arg<'a>(
    node: &NodeView,
    inputs: &'a [Option<Const>],
    i: usize,
) -> Result<&'a Const, ModelError> {
    inputs
        .get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| node.err(format!("required input {i} is missing")))
}

/// Constant input `i` as a list of sizes (a shape operand), every entry non-negative.
fn sizes_arg(
    node: &NodeView,
    inputs: &[Option<Const>],
    i: usize,
) -> Result<Vec<usize>, ModelError> {
    arg(node, inputs, i)?
        .ints()
        .into_iter()
        .map(|d| {
            usize::try_from(d)
                .map_err(|_| node.err(format!("input {i}: negative dimension {d} in a shape")))
        })
        .collect()
}

/// The single value of a one-element constant input as i64.
fn scalar_i64(node: &NodeView, c: &Const, what: &str) -> Result<i64, ModelError> {
    match c.ints().as_slice() {
        [v] => Ok(*v),
        v => Err(node.err(format!("{what}: expected one value, got {}", v.len()))),
    }
}
