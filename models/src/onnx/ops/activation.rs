//! Activations: `Relu`, `Clip` (min/max as attributes before opset 11, as inputs after),
//! `Sigmoid`.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::Op;

/// `Relu(X)`.
pub fn relu(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    imp.push(node, Op::Relu, vec![x])
}

/// `Sigmoid(X)`.
pub fn sigmoid(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    imp.push(node, Op::Sigmoid, vec![x])
}

/// `Clip(X[, min][, max])`; absent bounds are ±∞.
pub fn clip(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let bound = |i: usize, attr: &str, default: f32| -> Result<f32, ModelError> {
        if let Some(v) = node.float(attr)? {
            return Ok(v);
        }
        match imp.opt_const(node, i)? {
            Some(c) => c
                .scalar_f32()
                .map_err(|m| node.err(format!("input {i} ({attr}): {m}"))),
            None => Ok(default),
        }
    };
    let min = bound(1, "min", f32::NEG_INFINITY)?;
    let max = bound(2, "max", f32::INFINITY)?;
    if min.is_nan() || max.is_nan() {
        return Err(node.err(format!("bound min {min}, max {max} is NaN")));
    }
    if min > max {
        return Err(node.err(format!("min {min} exceeds max {max}")));
    }
    imp.push(node, Op::Clip { min, max }, vec![x])
}
