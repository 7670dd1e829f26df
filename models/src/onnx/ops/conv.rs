//! `Conv`: 2-D convolution with groups, strides, pads (incl. auto_pad), dilations, optional bias.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use super::{spatial, window};
use crate::error::ModelError;
use crate::ir::{Conv, Op};

/// Registers `Conv`.
pub fn register(reg: &mut Registry) {
    reg.insert("Conv", conv);
}

/// `Conv(X, W[, B])` with a constant weight and bias.
fn conv(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let weight = imp.take_f32(node, 1)?;
    let bias = imp.opt_const(node, 2)?.map(|b| b.to_f32());
    let w = weight.shape().to_vec();
    let [_, _, kh, kw] = w[..] else {
        return Err(node.err(format!(
            "weight '{}' has rank {} (shape {w:?}), expected rank 4 [C_out, C_in/groups, kh, kw]",
            node.input_name(1).unwrap_or_default(),
            w.len()
        )));
    };
    if let Some(k) = node.sizes("kernel_shape")? {
        if k != [kh, kw] {
            return Err(node.attr_error(
                "kernel_shape",
                format!("{k:?} differs from the weight's {:?}", [kh, kw]),
            ));
        }
    }
    let groups = node.attr_or("group", 1i64)?;
    let groups = usize::try_from(groups)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| node.attr_error("group", format!("must be positive, got {groups}")))?;
    let hw = spatial(node, &imp.shape(x))?;
    let (strides, pads, dilations) = window(node, hw, [kh, kw])?;
    let op = Op::Conv(Conv {
        weight,
        bias,
        strides,
        pads,
        dilations,
        groups,
    });
    imp.push(node, op, vec![x])
}
