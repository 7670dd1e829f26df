//! `BatchNormalization` in its inference and `training_mode` forms; `LayerNormalization`
//! (opset 17) over the last axis; `GroupNormalization` (opset 18 per-group and opset 21
//! per-channel affine) and `InstanceNormalization` (one group per channel).

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::{BatchNorm, GroupNorm, LayerNorm, Op};

/// Registers `BatchNormalization`, `LayerNormalization`, `GroupNormalization` and
/// `InstanceNormalization`.
pub fn register(reg: &mut Registry) {
    reg.insert("BatchNormalization", batch_norm);
    reg.insert("LayerNormalization", layer_norm);
    reg.insert("GroupNormalization", |imp, node| {
        group_norm(imp, node, false)
    });
    reg.insert("InstanceNormalization", |imp, node| {
        group_norm(imp, node, true)
    });
}

/// `GroupNormalization(X, scale, bias)` with `num_groups`, or with `instance`
/// `InstanceNormalization(X, scale, B)`. A per-group scale (opset 18's form, `[groups]`) is
/// spread over the channels of its group.
fn group_norm(imp: &mut Importer, node: &NodeView, instance: bool) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let dims = imp.shape(x);
    let ch = dims.get(1).copied().unwrap_or(0);
    let groups = if instance {
        ch
    } else {
        node.attr::<usize>("num_groups")?
    };
    if groups == 0 || !ch.is_multiple_of(groups) {
        return Err(node.err(format!(
            "{ch} channels of {dims:?} do not divide into {groups} groups"
        )));
    }
    let per_channel = |i: usize| -> Result<ndarray::ArrayD<f32>, ModelError> {
        let c = imp.constant(node, i)?.to_f32();
        match c.len() {
            n if n == ch => Ok(c
                .into_shape_with_order(vec![ch])
                .map_err(|e| node.err(e.to_string()))?),
            n if n == groups => Ok(ndarray::ArrayD::from_shape_fn(vec![ch], |i| {
                c.as_slice().map_or(0.0, |s| s[i[0] / (ch / groups)])
            })),
            n => Err(node.err(format!(
                "input {i} has {n} values, expected {ch} (per channel) or {groups} (per group)"
            ))),
        }
    };
    let op = Op::GroupNorm(GroupNorm {
        groups,
        scale: per_channel(1)?,
        bias: per_channel(2)?,
        epsilon: non_negative_epsilon(node)?,
    });
    imp.push(node, op, vec![x])
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
