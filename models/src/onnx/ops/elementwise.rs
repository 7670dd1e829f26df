//! Binary arithmetic `Add`, `Sub`, `Mul`, `Div` with numpy broadcasting (two constants fold in
//! [`crate::onnx::fold`], integers staying integers); a constant and a tensor become a [`Binary`]
//! with a constant operand (an additive causal mask becomes a `CausalMask`, see [`super::mask`];
//! a constant that repeats along the tensor's batch axis keeps that axis at size 1); two tensors
//! a plain [`Binary`].

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{Const, Val};
use super::mask::collapsed;
use crate::error::ModelError;
use crate::ir::{Binary, BinaryKind, ConstOperand, Op, ValueId};
use ndarray::ArrayD;

/// Registers `Add`, `Sub`, `Mul` and `Div`.
pub fn register(reg: &mut Registry) {
    reg.insert("Add", |imp, node| binary(imp, node, BinaryKind::Add));
    reg.insert("Sub", |imp, node| binary(imp, node, BinaryKind::Sub));
    reg.insert("Mul", |imp, node| binary(imp, node, BinaryKind::Mul));
    reg.insert("Div", |imp, node| binary(imp, node, BinaryKind::Div));
}

/// `Add`, `Sub`, `Mul` or `Div` (chosen by `kind`) of inputs 0 and 1.
fn binary(imp: &mut Importer, node: &NodeView, kind: BinaryKind) -> Result<Val, ModelError> {
    let (a, b) = (imp.input(node, 0)?, imp.input(node, 1)?);
    let on_left = matches!(a, Val::Const(_));
    let (op, inputs) = match (a, b) {
        (Val::Const(_), Val::Const(_)) => {
            return Err(node.err("internal: two constant operands reached the run-time handler"))
        }
        (Val::Tensor(a), Val::Tensor(b)) => (
            Binary {
                kind,
                constant: None,
            },
            vec![a, b],
        ),
        (Val::Tensor(x), Val::Const(c)) | (Val::Const(c), Val::Tensor(x))
            if kind == BinaryKind::Add
                && matches!(&c, Const::F32(m) if super::mask::is_additive_causal(m)) =>
        {
            return super::mask::additive(imp, node, x, &c)
        }
        (Val::Tensor(x), Val::Const(c)) | (Val::Const(c), Val::Tensor(x)) => {
            let constant = Some(ConstOperand {
                value: unbatched(imp, x, c.to_f32()),
                on_left,
            });
            (Binary { kind, constant }, vec![x])
        }
    };
    imp.push(node, Op::Binary(op), inputs)
}

/// Constant operand `c` of run-time `x` (NumPy-aligned on the right) with the axis that meets
/// `x`'s batch axis ([`crate::ir::batch_axes`]) cut to size 1 where `c` repeats along it: a mask
/// the exporter expanded to the batch from the input's shape (`[N, 1, T, T]` of zeros) then
/// broadcasts at any batch instead of holding the one the file was imported at.
fn unbatched(imp: &mut Importer, x: ValueId, c: ArrayD<f32>) -> ArrayD<f32> {
    let xs = imp.shape(x);
    let batch = imp.graph.batch;
    let Some(lead) = xs.len().checked_sub(c.ndim()) else {
        return c;
    };
    // an axis of the batch's length (times a factor) in both: the only place the batch can be
    let meets = |j: usize| c.shape()[j] > 1 && c.shape()[j] == xs[j + lead];
    if batch < 2 || !(0..c.ndim()).any(|j| meets(j) && xs[j + lead].is_multiple_of(batch)) {
        return c;
    }
    match imp.batch_at(x).and_then(|b| b.axis.checked_sub(lead)) {
        Some(j) if meets(j) => collapsed(&c, j).unwrap_or(c),
        _ => c,
    }
}
