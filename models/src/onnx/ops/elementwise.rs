//! Binary arithmetic `Add`, `Sub`, `Mul`, `Div` with numpy broadcasting (two constants fold in
//! [`crate::onnx::fold`], integers staying integers); a constant and a tensor become a [`Binary`] with a constant operand (an additive causal mask becomes a
//! `CausalMask`, see [`super::mask`]); two tensors a plain [`Binary`].

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::{Binary, BinaryKind, ConstOperand, Op};

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
        (Val::Tensor(a), Val::Const(c)) => {
            let constant = Some(ConstOperand {
                value: c.to_f32(),
                on_left: false,
            });
            (Binary { kind, constant }, vec![a])
        }
        (Val::Const(c), Val::Tensor(b)) => {
            let constant = Some(ConstOperand {
                value: c.to_f32(),
                on_left: true,
            });
            (Binary { kind, constant }, vec![b])
        }
    };
    imp.push(node, Op::Binary(op), inputs)
}
