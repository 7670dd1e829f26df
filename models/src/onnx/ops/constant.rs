//! Ops that exist only at import time: Constant, ConstantOfShape, Shape, Cast, and the
//! pass-throughs Identity and Dropout. None of them leaves a node in the IR.

use ndarray::{ArrayD, IxDyn};
use onnx_protobuf::NodeProto;

use super::super::context::Importer;
use super::super::node::{read_attr, NodeView};
use super::super::registry::Registry;
use super::super::value::{Const, Val};
use crate::error::ModelError;

/// Registers `Identity`, `Dropout`, `Cast`, `Constant`, `ConstantOfShape` and `Shape`.
pub fn register(reg: &mut Registry) {
    reg.insert("Identity", pass_through);
    reg.insert("Dropout", pass_through);
    reg.insert("Cast", cast);
    reg.insert("Constant", constant);
    reg.insert("ConstantOfShape", constant_of_shape);
    reg.insert("Shape", shape);
}

/// `Constant`: the value from whichever `value*` attribute is set.
fn constant(_: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    value_of(node.proto)
        .map(Val::Const)
        .map_err(|m| node.err(m))
}

/// The value a `Constant` node holds: its `value` tensor, `value_float`, `value_int` or
/// `value_ints`; an error names an attribute of another kind. Fusion reads constants with it
/// too, before import.
pub fn value_of(node: &NodeProto) -> Result<Const, String> {
    let attr_err = |name: &str, m: String| format!("attribute '{name}': {m}");
    if let Some(t) = read_attr::<Const>(node, "value").map_err(|m| attr_err("value", m))? {
        return Ok(t);
    }
    if let Some(f) =
        read_attr::<f32>(node, "value_float").map_err(|m| attr_err("value_float", m))?
    {
        return Ok(Const::F32(ArrayD::from_elem(IxDyn(&[]), f)));
    }
    if let Some(i) = read_attr::<i64>(node, "value_int").map_err(|m| attr_err("value_int", m))? {
        return Ok(Const::I64(ArrayD::from_elem(IxDyn(&[]), i)));
    }
    if let Some(v) =
        read_attr::<Vec<i64>>(node, "value_ints").map_err(|m| attr_err("value_ints", m))?
    {
        let shape = IxDyn(&[v.len()]);
        return Ok(Const::I64(
            ArrayD::from_shape_vec(shape, v).map_err(|e| e.to_string())?,
        ));
    }
    let a = node.attribute.first().map_or("none", |a| a.name.as_str());
    Err(format!("unsupported value attribute '{a}'"))
}

/// `ConstantOfShape`: a tensor of the given shape filled with the `value` attribute (default 0.0).
fn constant_of_shape(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let shape: Vec<usize> = imp
        .constant(node, 0)?
        .ints()
        .into_iter()
        .map(usize::try_from)
        .collect::<Result<_, _>>()
        .map_err(|_| node.err("negative dimension in the shape input"))?;
    let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if count.is_none_or(|c| c > 1 << 24) {
        return Err(node.err(format!("shape {shape:?} is too large for a constant")));
    }
    let fill = node
        .tensor("value")?
        .unwrap_or(Const::F32(ArrayD::zeros(IxDyn(&[1]))));
    let c = match fill {
        Const::F32(v) => Const::F32(ArrayD::from_elem(IxDyn(&shape), first(node, v.iter())?)),
        Const::I64(v) => Const::I64(ArrayD::from_elem(IxDyn(&shape), first(node, v.iter())?)),
    };
    Ok(Val::Const(c))
}

fn first<'a, T: Copy + 'a>(
    node: &NodeView,
    mut it: impl Iterator<Item = &'a T>,
) -> Result<T, ModelError> {
    it.next()
        .copied()
        .ok_or_else(|| node.attr_error("value", "is empty"))
}

/// `Shape`: the static shape of a tensor as an int64 constant (opset 15 `start`/`end` honoured).
fn shape(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let s: Vec<i64> = match imp.input(node, 0)? {
        Val::Tensor(t) => imp.shape(t).iter().map(|&d| d as i64).collect(),
        Val::Const(c) => c.shape().iter().map(|&d| d as i64).collect(),
    };
    let r = s.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(node.attr_or("start", 0)?);
    let end = clamp(node.attr_or("end", r)?).max(start);
    let v = s[start..end].to_vec();
    Ok(Val::Const(Const::I64(
        ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).map_err(|e| node.err(e.to_string()))?,
    )))
}

/// `Cast`: converts constants between float and integer; a run-time tensor passes unchanged
/// (the IR computes in f32).
fn cast(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let to: i64 = node.attr("to")?;
    Ok(match imp.input(node, 0)? {
        Val::Const(c) => Val::Const(match to {
            1 | 10 | 11 | 16 => Const::F32(c.to_f32()),
            9 => Const::I64(c.to_f32().mapv(|v| i64::from(v != 0.0))),
            2..=7 | 12 | 13 => Const::I64(c.to_i64()),
            other => return Err(node.err(format!("cast to data type {other} is not supported"))),
        }),
        t => t,
    })
}

/// `Identity`, `Dropout` (inference): the first input unchanged. Constants are cloned, so every
/// consumer of a de-duplicated initializer gets its own copy.
fn pass_through(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    imp.input(node, 0)
}
