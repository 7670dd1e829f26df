//! Index and mask arithmetic on run-time tensors (on constants these fold in
//! [`crate::onnx::fold`]): RoBERTa's position ids, `cumsum(ids != pad) · (ids != pad) + pad`,
//! and BERT's token-type buffer gathered at them. `Equal` with a constant and `Not` become
//! [`Unary`] masks, `CumSum` and `GatherElements` their IR ops; the values are exact integers
//! held as floats, and no gradient flows through them.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use super::mask::collapsed;
use crate::error::ModelError;
use crate::ir::{Op, Unary};

/// Registers `Equal`, `Not`, `CumSum` and `GatherElements`.
pub fn register(reg: &mut Registry) {
    reg.insert("Equal", equal);
    reg.insert("Not", |imp, node| {
        let x = imp.tensor(node, 0)?;
        imp.push(node, Op::Unary(Unary::Not), vec![x])
    });
    reg.insert("CumSum", cumsum);
    reg.insert("GatherElements", gather_elements);
}

/// `Equal(A, B)` of a run-time tensor and a one-element constant (either side).
fn equal(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let (x, c) =
        match (imp.input(node, 0)?, imp.input(node, 1)?) {
            (Val::Tensor(x), Val::Const(c)) | (Val::Const(c), Val::Tensor(x)) => (x, c),
            (Val::Tensor(_), Val::Tensor(_)) => return Err(node.err(
                "comparing two run-time tensors is not supported (only a run-time tensor with a \
                 one-element constant)",
            )),
            (Val::Const(_), Val::Const(_)) => {
                return Err(node.err("internal: constant inputs reached the run-time handler"))
            }
        };
    let value = c
        .scalar_f32()
        .map_err(|m| node.err(format!("the constant operand: {m}")))?;
    if !value.is_finite() {
        return Err(node.err(format!("the constant operand {value} is not finite")));
    }
    imp.push(node, Op::Unary(Unary::Equal { value }), vec![x])
}

/// `CumSum(X, axis)` of a run-time tensor with a constant axis, `exclusive` and `reverse`.
fn cumsum(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let rank = imp.shape(x).len();
    let axis = match imp.constant(node, 1)?.ints().as_slice() {
        [a] => node.axis(*a, rank)?,
        v => return Err(node.err(format!("axis (input 1): expected one value, got {v:?}"))),
    };
    let exclusive = node.attr_or("exclusive", false)?;
    let reverse = node.attr_or("reverse", false)?;
    let op = Op::CumSum {
        axis,
        exclusive,
        reverse,
    };
    imp.push(node, op, vec![x])
}

/// `GatherElements(data, indices)` of a constant `data` at run-time indices. Every axis other
/// than the gathered one along which `data` repeats one slice (a buffer expanded over the
/// batch) is stored at size 1, so the op holds for any batch.
fn gather_elements(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let idx = imp.tensor(node, 1)?;
    let mut data = imp.constant(node, 0)?.into_f32();
    let axis = node.axis_attr("axis", Some(0), data.ndim())?;
    for a in (0..data.ndim()).filter(|&a| a != axis) {
        if data.shape()[a] < 2 {
            continue;
        }
        if let Some(slice) = collapsed(&data, a) {
            data = slice;
        }
    }
    let data = data.as_standard_layout().into_owned();
    imp.push(node, Op::GatherElements { data, axis }, vec![idx])
}
