//! Binary arithmetic `Add`, `Sub`, `Mul`, `Div` with numpy broadcasting. Two constants fold
//! (integer arithmetic stays integer, as in `F.pad`'s pad-building chains); a constant and a
//! tensor become a [`Binary`] with a constant operand (an additive causal mask becomes a
//! `CausalMask`, see [`super::mask`]); two tensors a plain [`Binary`].

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{broadcast_map, Const, Val};
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
        (Val::Const(a), Val::Const(b)) => {
            return fold(kind, &a, &b).map(Val::Const).map_err(|m| node.err(m))
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

/// Evaluates `a ∘ b` on constants.
pub fn fold(kind: BinaryKind, a: &Const, b: &Const) -> Result<Const, String> {
    match (a, b) {
        (Const::I64(a), Const::I64(b)) => {
            if kind == BinaryKind::Div && b.iter().any(|&v| v == 0) {
                return Err("integer division by zero".into());
            }
            let r = broadcast_map(a, b, |x, y| match kind {
                BinaryKind::Add => x.wrapping_add(y),
                BinaryKind::Sub => x.wrapping_sub(y),
                BinaryKind::Mul => x.wrapping_mul(y),
                BinaryKind::Div => x.wrapping_div(y),
            })?;
            Ok(Const::I64(r))
        }
        _ => {
            let r = broadcast_map(&a.to_f32(), &b.to_f32(), |x, y| match kind {
                BinaryKind::Add => x + y,
                BinaryKind::Sub => x - y,
                BinaryKind::Mul => x * y,
                BinaryKind::Div => x / y,
            })?;
            Ok(Const::F32(r))
        }
    }
}
