//! `Gemm` and `MatMul`. A product with a constant right operand becomes an IR [`Linear`]
//! (`y = x · Wᵀ + b`, with Gemm's `alpha`, `beta` and `transB` folded into `W` and `b`);
//! a product of two run-time tensors stays a general IR `MatMul`.

use ndarray::{ArrayD, Ix2};

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::{Linear, Op};

/// Registers `Gemm` and `MatMul`.
pub fn register(reg: &mut Registry) {
    reg.insert("Gemm", gemm);
    reg.insert("MatMul", matmul);
}

/// `Gemm(A, B[, C])`: `alpha · A' · B' + beta · C` with `A' = transA ? Aᵀ : A`, likewise B.
fn gemm(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let mut a = imp.tensor(node, 0)?;
    let b = imp.take_f32(node, 1)?;
    let c = imp.opt_const(node, 2)?.map(|c| c.to_f32());
    let alpha = node.attr_or("alpha", 1.0f32)?;
    let beta = node.attr_or("beta", 1.0f32)?;
    let b = b
        .into_dimensionality::<Ix2>()
        .map_err(|_| node.err("input B must be a rank-2 constant"))?;
    // Linear stores W as [out, in]; Gemm's B is [in, out] unless transB.
    let w = if node.attr_or("transB", false)? {
        b
    } else {
        b.reversed_axes()
    };
    let mut weight = if w.is_standard_layout() {
        w
    } else {
        w.as_standard_layout().into_owned()
    };
    if alpha != 1.0 {
        weight *= alpha;
    }
    let weight = weight.into_dyn();
    let out = weight.shape()[0];
    let bias = match c {
        None => None,
        Some(c) => {
            let flat: Vec<f32> = c.iter().map(|&v| v * beta).collect();
            let full = match flat.len() {
                1 => vec![flat[0]; out],
                n if n == out && c.shape().iter().rev().skip(1).all(|&d| d == 1) => flat,
                _ => {
                    return Err(node.err(format!(
                        "bias C of shape {:?} does not broadcast to [{out}] per row",
                        c.shape()
                    )))
                }
            };
            Some(ArrayD::from_shape_vec(vec![out], full).map_err(|e| node.err(e.to_string()))?)
        }
    };
    if node.attr_or("transA", false)? {
        let name = format!("{}/transA", node.name);
        let t = imp.push_named(
            node,
            &name,
            Op::Transpose { perm: vec![1, 0] },
            vec![a],
            &name,
        )?;
        if let Val::Tensor(t) = t {
            a = t;
        }
    }
    if imp.shape(a).len() != 2 {
        return Err(node.err(format!("input A must be rank 2, got {:?}", imp.shape(a))));
    }
    imp.push(node, Op::Linear(Linear { weight, bias }), vec![a])
}

/// `MatMul(A, B)`: with a constant rank-2 `B` a bias-free [`Linear`], with two tensors a
/// general `MatMul`.
fn matmul(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let a = imp.tensor(node, 0)?;
    match imp.input(node, 1)? {
        Val::Tensor(b) => imp.push(node, Op::MatMul, vec![a, b]),
        Val::Const(b) => {
            let b = b
                .to_f32()
                .into_dimensionality::<Ix2>()
                .map_err(|_| node.err("a constant right operand must have rank 2"))?;
            let weight = b
                .reversed_axes()
                .as_standard_layout()
                .into_owned()
                .into_dyn();
            imp.push(node, Op::Linear(Linear { weight, bias: None }), vec![a])
        }
    }
}
