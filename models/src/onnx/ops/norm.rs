//! `BatchNormalization` in its inference and `training_mode` forms; `LayerNormalization`
//! (opset 17) over the last axis.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::{BatchNorm, LayerNorm, Op};

/// Registers `BatchNormalization` and `LayerNormalization`.
pub fn register(reg: &mut Registry) {
    reg.insert("BatchNormalization", batch_norm);
    reg.insert("LayerNormalization", layer_norm);
}

/// `BatchNormalization(X, scale, B, mean, var)` with constant parameters. Only the first output
/// is available; the running-statistics outputs of the training form are not.
fn batch_norm(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let epsilon = non_negative_epsilon(node)?;
    let var = imp.constant(node, 4)?.to_f32();
    if let Some((i, v)) = var
        .iter()
        .enumerate()
        .find(|(_, &v)| !(v >= 0.0 && v + epsilon > 0.0))
    {
        return Err(node.err(format!(
            "input 4 ('{}', the running variance) holds {v} at element {i}: a variance must be \
             positive (or zero with a positive epsilon)",
            node.input_name(4).unwrap_or_default()
        )));
    }
    let op = Op::BatchNorm(BatchNorm {
        scale: imp.constant(node, 1)?.to_f32(),
        bias: imp.constant(node, 2)?.to_f32(),
        mean: imp.constant(node, 3)?.to_f32(),
        var,
        epsilon,
        momentum: node.attr_or("momentum", 0.9)?,
        training_mode: node.attr_or("training_mode", false)?,
    });
    imp.push(node, op, vec![x])
}

/// `LayerNormalization(X[, scale][, B])` normalising the last axis (`axis` = −1 or rank − 1);
/// only the first output (`Mean` and `InvStdDev` are training-only extras).
fn layer_norm(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let rank = imp.shape(x).len();
    let axis = node.axis_attr("axis", Some(-1), rank)?;
    if axis + 1 != rank {
        return Err(node.attr_error(
            "axis",
            format!(
                "normalising axes {axis}.. of rank {rank} is not supported (only the last axis)"
            ),
        ));
    }
    // A layer norm fused from its decomposed form without an affine step has no scale: ones.
    let d = imp.shape(x).last().copied().unwrap_or(0);
    let scale = match imp.opt_const(node, 1)? {
        Some(s) => s.to_f32(),
        None => ndarray::ArrayD::from_elem(vec![d], 1.0),
    };
    let bias = match imp.opt_const(node, 2)? {
        Some(b) => b.to_f32(),
        None => ndarray::ArrayD::zeros(scale.raw_dim()),
    };
    let epsilon = non_negative_epsilon(node)?;
    let op = Op::LayerNorm(LayerNorm {
        scale,
        bias,
        epsilon,
    });
    imp.push(node, op, vec![x])
}

/// The `epsilon` attribute (default 1e-5), which must be a finite number ≥ 0.
fn non_negative_epsilon(node: &NodeView) -> Result<f32, ModelError> {
    let epsilon = node.attr_or("epsilon", 1e-5)?;
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(node.attr_error("epsilon", format!("{epsilon} is not a non-negative number")));
    }
    Ok(epsilon)
}
