//! Activations: `Relu`, `Clip` (min/max as attributes before opset 11, as inputs after),
//! `Sigmoid`, `Tanh`, `Gelu` (opset 20), `Softmax`, `LogSoftmax`; the parameter-free
//! functions of [`Unary`] (`HardSwish`, `HardSigmoid`, `LeakyRelu`, `Elu`, `Softplus`, `Mish`,
//! `Pow` by a constant exponent, `Exp`, `Sqrt`, `Abs`, `Neg`, `Erf`) and `PRelu`.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::{Op, Unary};

/// Registers `Relu`, `Clip`, `Sigmoid`, `Tanh`, `Gelu`, `Softmax` and `LogSoftmax`.
pub fn register(reg: &mut Registry) {
    reg.insert("Relu", relu);
    reg.insert("Clip", clip);
    reg.insert("Sigmoid", sigmoid);
    reg.insert("Tanh", tanh);
    reg.insert("Gelu", gelu);
    reg.insert("Softmax", |imp, node| softmax_family(imp, node, false));
    reg.insert("LogSoftmax", |imp, node| softmax_family(imp, node, true));
    reg.insert("HardSwish", |imp, node| unary(imp, node, Unary::HardSwish));
    reg.insert("HardSigmoid", |imp, node| {
        let alpha = node.attr_or("alpha", 0.2)?;
        let beta = node.attr_or("beta", 0.5)?;
        unary(imp, node, Unary::HardSigmoid { alpha, beta })
    });
    reg.insert("LeakyRelu", |imp, node| {
        let alpha = node.attr_or("alpha", 0.01)?;
        unary(imp, node, Unary::LeakyRelu { alpha })
    });
    reg.insert("Elu", |imp, node| {
        let alpha = node.attr_or("alpha", 1.0)?;
        unary(imp, node, Unary::Elu { alpha })
    });
    reg.insert("Softplus", |imp, node| unary(imp, node, Unary::Softplus));
    reg.insert("Mish", |imp, node| unary(imp, node, Unary::Mish));
    reg.insert("Exp", |imp, node| unary(imp, node, Unary::Exp));
    reg.insert("Sqrt", |imp, node| unary(imp, node, Unary::Sqrt));
    reg.insert("Abs", |imp, node| unary(imp, node, Unary::Abs));
    reg.insert("Neg", |imp, node| unary(imp, node, Unary::Neg));
    reg.insert("Erf", |imp, node| unary(imp, node, Unary::Erf));
    reg.insert("Pow", pow);
    reg.insert("PRelu", prelu);
}

/// A [`Unary`] function of input 0; its scalar parameters must be finite.
fn unary(imp: &mut Importer, node: &NodeView, u: Unary) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let params: &[f32] = match &u {
        Unary::HardSigmoid { alpha, beta } => &[*alpha, *beta],
        Unary::LeakyRelu { alpha } | Unary::Elu { alpha } => &[*alpha],
        Unary::Pow { exponent } => &[*exponent],
        _ => &[],
    };
    if params.iter().any(|v| !v.is_finite()) {
        return Err(node.err(format!("parameters {params:?} must be finite")));
    }
    imp.push(node, Op::Unary(u), vec![x])
}

/// `Pow(X, Y)` of a run-time base and a one-element constant exponent.
fn pow(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let exponent = match imp.input(node, 1)? {
        Val::Const(c) => c
            .scalar_f32()
            .map_err(|m| node.err(format!("exponent (input 1): {m}")))?,
        Val::Tensor(_) => {
            return Err(node.err("a run-time exponent is not supported (only a constant one)"))
        }
    };
    unary(imp, node, Unary::Pow { exponent })
}

/// `PRelu(X, slope)` with a constant slope that broadcasts onto `X`.
fn prelu(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let slope = imp.constant(node, 1)?.into_f32();
    imp.push(node, Op::PRelu { slope }, vec![x])
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
