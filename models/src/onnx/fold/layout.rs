//! Evaluators of shape and layout ops — `Shape`, `Size`, `Reshape`, `Flatten`, `Squeeze`,
//! `Unsqueeze`, `Transpose` — with the shape rules of their run-time handlers, and the
//! reductions `ReduceSum`, `ReduceMean`, `ReduceMax`, `ReduceMin`, `ReduceProd`, `ReduceL2`.

use ndarray::{ArrayD, Axis};

use super::{arg, Eval};
use crate::error::ModelError;
use crate::onnx::node::NodeView;
use crate::onnx::ops::constant::shape_of;
use crate::onnx::ops::reshape::{
    flatten_axis, permutation, resolve_reshape, squeeze_shape, unsqueeze_shape,
};
use crate::onnx::value::{each_const, Const};

/// The evaluator of a layout op type.
pub fn evaluator(op_type: &str) -> Option<Eval> {
    Some(match op_type {
        "Shape" => |n, x| shape_of(n, arg(n, x, 0)?.shape()),
        "Size" => |n, x| {
            let count = arg(n, x, 0)?.shape().iter().product::<usize>() as i64;
            Ok(Const::I64(ArrayD::from_elem(vec![], count)))
        },
        "Reshape" => reshape,
        "Flatten" => |n, x| {
            let c = arg(n, x, 0)?;
            let dims = c.shape();
            let axis = flatten_axis(n, dims)?;
            let rows = dims[..axis].iter().product();
            reshaped(n, c, vec![rows, dims[axis..].iter().product()])
        },
        "Squeeze" => |n, x| {
            let c = arg(n, x, 0)?;
            reshaped(n, c, squeeze_shape(n, c.shape(), axes(n, x)?)?)
        },
        "Unsqueeze" => |n, x| {
            let c = arg(n, x, 0)?;
            let raw = axes(n, x)?.ok_or_else(|| n.err("axes are missing"))?;
            reshaped(n, c, unsqueeze_shape(n, c.shape(), &raw)?)
        },
        "Transpose" => |n, x| {
            let c = arg(n, x, 0)?;
            let perm = permutation(n, c.shape().len())?;
            Ok(
                each_const!(c, a => a.view().permuted_axes(perm.clone()).as_standard_layout().into_owned()),
            )
        },
        "ReduceSum" => |n, x| reduce(n, x, Reduce::Sum),
        "ReduceMean" => |n, x| reduce(n, x, Reduce::Mean),
        "ReduceMax" => |n, x| reduce(n, x, Reduce::Max),
        "ReduceMin" => |n, x| reduce(n, x, Reduce::Min),
        "ReduceProd" => |n, x| reduce(n, x, Reduce::Prod),
        "ReduceL2" => |n, x| reduce(n, x, Reduce::L2),
        _ => return None,
    })
}

fn reshaped(node: &NodeView, c: &Const, shape: Vec<usize>) -> Result<Const, ModelError> {
    c.reshaped(&shape).map_err(|m| node.err(m))
}

/// `Reshape(X, shape)` of a constant.
fn reshape(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let c = arg(node, x, 0)?;
    let target = match node.ints("shape")? {
        Some(s) => s,
        None => arg(node, x, 1)?.ints(),
    };
    let allowzero = node.attr_or("allowzero", false)?;
    let shape = resolve_reshape(c.shape(), &target, allowzero).map_err(|m| node.err(m))?;
    reshaped(node, c, shape)
}

/// Axes from the `axes` attribute (older opsets) or input 1.
fn axes(node: &NodeView, x: &[Option<Const>]) -> Result<Option<Vec<i64>>, ModelError> {
    match node.ints("axes")? {
        Some(a) => Ok(Some(a)),
        None => Ok(x.get(1).and_then(Option::as_ref).map(Const::ints)),
    }
}

/// Which reduction.
#[derive(Clone, Copy)]
enum Reduce {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L2,
}

/// A reduction over `axes` (attribute, or input 1 from opset 18; none given: every axis, or
/// none with `noop_with_empty_axes`), `keepdims` default 1. The result is float.
fn reduce(node: &NodeView, x: &[Option<Const>], how: Reduce) -> Result<Const, ModelError> {
    let c = arg(node, x, 0)?;
    let rank = c.shape().len();
    let keepdims = node.attr_or("keepdims", true)?;
    let mut list = match axes(node, x)? {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&a| node.axis(a, rank))
            .collect::<Result<Vec<_>, _>>()?,
        _ if node.attr_or("noop_with_empty_axes", false)? => return Ok(c.clone()),
        _ => (0..rank).collect(),
    };
    list.sort_unstable();
    list.dedup();
    let mut a = c.to_f32();
    for &axis in list.iter().rev() {
        let n = a.shape()[axis] as f32;
        let r = match how {
            Reduce::Sum => a.sum_axis(Axis(axis)),
            Reduce::Mean => a.sum_axis(Axis(axis)) / n,
            Reduce::Max => a.fold_axis(Axis(axis), f32::NEG_INFINITY, |m, &v| m.max(v)),
            Reduce::Min => a.fold_axis(Axis(axis), f32::INFINITY, |m, &v| m.min(v)),
            Reduce::Prod => a.fold_axis(Axis(axis), 1.0, |m, &v| m * v),
            Reduce::L2 => a.fold_axis(Axis(axis), 0.0, |m, &v| m + v * v),
        };
        a = if keepdims {
            r.insert_axis(Axis(axis))
        } else {
            r
        };
    }
    if matches!(how, Reduce::L2) {
        a.mapv_inplace(f32::sqrt);
    }
    Ok(match c {
        Const::I64(_) if !matches!(how, Reduce::Mean | Reduce::L2) => {
            Const::I64(a.mapv(|v| v as i64))
        }
        _ => Const::F32(a),
    })
}
