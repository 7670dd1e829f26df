//! Ops that leave no node in the IR: `Shape` of a run-time tensor (a constant), `Cast` to a
//! float type and the pass-throughs `Identity` and `Dropout` of one (unchanged: the IR computes
//! in f32; a cast to an integer type is the one node, a rounding toward zero), and the
//! value a `Constant` node holds. On constant inputs all of them fold in [`crate::onnx::fold`],
//! as do `Constant` and `ConstantOfShape`, which only ever fold.

use ndarray::{ArrayD, IxDyn};
use onnx_protobuf::NodeProto;

use super::super::context::Importer;
use super::super::node::{read_attr, NodeView};
use super::super::registry::Registry;
use super::super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::{Op, Unary};

/// Registers `Identity`, `Dropout`, `Cast` and `Shape`.
pub fn register(reg: &mut Registry) {
    reg.insert("Identity", pass_through);
    reg.insert("Dropout", pass_through);
    reg.insert("Cast", cast);
    reg.insert("Shape", shape);
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

/// `Shape` of a run-time tensor: its static shape as an int64 constant.
fn shape(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let t = imp.tensor(node, 0)?;
    shape_of(node, &imp.shape(t)).map(Val::Const)
}

/// `Cast` of a run-time tensor to a float type: the input unchanged (the IR computes in f32);
/// to an integer type, a rounding toward zero ([`Unary::Trunc`]: ids and masks are exact
/// integers already, other values truncate as onnxruntime's cast does); to a boolean or any
/// other type, an error.
fn cast(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    match node.attr::<i64>("to")? {
        1 | 10 | 11 | 16 => pass_through(imp, node),
        2..=7 | 12 | 13 => {
            let x = imp.tensor(node, 0)?;
            imp.push(node, Op::Unary(Unary::Trunc), vec![x])
        }
        to => Err(node.err(format!(
            "a cast of a run-time tensor to data type {to} is not supported (only to float and \
             integer types)"
        ))),
    }
}

/// `Identity` and `Dropout` (inference) of a run-time tensor: the input unchanged.
fn pass_through(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    imp.tensor(node, 0).map(Val::Tensor)
}

/// `Shape(X)`: the dims of `dims` from `start` to `end` (opset 15; negative values count from
/// the end, both clamp), as a 1-D int64 constant. The run-time handler calls it too.
pub fn shape_of(node: &NodeView, dims: &[usize]) -> Result<Const, ModelError> {
    let r = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(node.attr_or("start", 0)?);
    let end = clamp(node.attr_or("end", r)?).max(start);
    let v: Vec<i64> = dims[start..end].iter().map(|&d| d as i64).collect();
    let n = v.len();
    ArrayD::from_shape_vec(IxDyn(&[n]), v)
        .map(Const::I64)
        .map_err(|e| node.err(e.to_string()))
}
