//! Activations: `Relu`, `Clip` (min/max as attributes before opset 11, as inputs after),
//! `Sigmoid`, `Tanh`, `Gelu` (opset 20), `Softmax`, `LogSoftmax`.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::Op;

/// Registers `Relu`, `Clip`, `Sigmoid`, `Tanh`, `Gelu`, `Softmax` and `LogSoftmax`.
pub fn register(reg: &mut Registry) {
    reg.insert("Relu", relu);
    reg.insert("Clip", clip);
    reg.insert("Sigmoid", sigmoid);
    reg.insert("Tanh", tanh);
    reg.insert("Gelu", gelu);
    reg.insert("Softmax", |imp, node| softmax_family(imp, node, false));
    reg.insert("LogSoftmax", |imp, node| softmax_family(imp, node, true));
}

/// `Relu(X)`.
fn relu(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    imp.push(node, Op::Relu, vec![x])
}

/// `Sigmoid(X)`.
fn sigmoid(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    imp.push(node, Op::Sigmoid, vec![x])
}

/// `Clip(X[, min][, max])`; absent bounds are ±∞.
fn clip(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let bound = |i: usize, attr: &str, default: f32| -> Result<f32, ModelError> {
        if let Some(v) = node.attr_opt(attr)? {
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

/// `Tanh(X)`.
fn tanh(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    imp.push(node, Op::Tanh, vec![x])
}

/// `Gelu(X)` with `approximate = "none" | "tanh"`.
fn gelu(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let tanh_approx = match node.string("approximate")?.as_deref() {
        None | Some("none") => false,
        Some("tanh") => true,
        Some(other) => {
            return Err(node.attr_error("approximate", format!("unknown value '{other}'")))
        }
    };
    imp.push(node, Op::Gelu { tanh_approx }, vec![x])
}

/// `Softmax(X)` along `axis` (default −1; before opset 13 the default is 1 and the op
/// normalises over all axes from `axis` on, which equals the IR's one-axis softmax only for the
/// last axis); with `log`, `LogSoftmax(X)`, its logarithm, same axis rules (PyTorch's
/// `log_softmax`, the output of its word-language-model LMs).
fn softmax_family(imp: &mut Importer, node: &NodeView, log: bool) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let rank = imp.shape(x).len();
    let default = if node.opset >= 13 { -1 } else { 1 };
    let axis = node.axis_attr("axis", Some(default), rank)?;
    if node.opset < 13 && axis + 1 != rank {
        return Err(node.attr_error(
            "axis",
            format!("before opset 13 softmax over axes {axis}.. of rank {rank} flattens them; only the last axis is supported"),
        ));
    }
    imp.push(node, Op::Softmax { axis, log }, vec![x])
}
