//! Shape changes: `Reshape` (with `allowzero`), `Flatten`, `Squeeze`, `Unsqueeze`, `Transpose`.
//! On constants they fold; on run-time tensors Reshape/Squeeze/Unsqueeze become an IR
//! `Reshape` with the fully resolved target shape.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{each_const, Const, Val};
use crate::error::ModelError;
use crate::ir::Op;

/// Registers `Flatten`, `Reshape`, `Squeeze`, `Unsqueeze` and `Transpose`.
pub fn register(reg: &mut Registry) {
    reg.insert("Flatten", flatten);
    reg.insert("Reshape", reshape);
    reg.insert("Squeeze", squeeze);
    reg.insert("Unsqueeze", unsqueeze);
    reg.insert("Transpose", transpose);
}

/// Shape of a constant or run-time value.
fn shape_of(imp: &Importer, v: &Val) -> Vec<usize> {
    match v {
        Val::Tensor(t) => imp.shape(*t),
        Val::Const(c) => c.shape().to_vec(),
    }
}

/// Gives `v` the shape `shape` (same element count, checked).
fn reshape_to(
    imp: &mut Importer,
    node: &NodeView,
    v: Val,
    shape: Vec<usize>,
) -> Result<Val, ModelError> {
    match v {
        Val::Const(c) => c.reshaped(&shape).map(Val::Const).map_err(|m| node.err(m)),
        Val::Tensor(t) => imp.push(node, Op::Reshape { shape }, vec![t]),
    }
}

/// Axes from the `axes` attribute (before opset 13) or input 1.
fn axes_arg(imp: &Importer, node: &NodeView) -> Result<Option<Vec<i64>>, ModelError> {
    match node.ints("axes")? {
        Some(a) => Ok(Some(a)),
        None => Ok(imp.opt_const(node, 1)?.map(|c| c.ints())),
    }
}

/// `Reshape(X, shape)`: `0` copies the input dimension (unless `allowzero`), `-1` is inferred.
fn reshape(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.input(node, 0)?;
    let dims = shape_of(imp, &x);
    let mut target = match node.ints("shape")? {
        Some(s) => s,
        None => imp.constant(node, 1)?.ints(),
    };
    // A run-time tensor's axis 0 is the batch: a target that carries the file's fixed batch there
    // follows the rebound batch.
    if let (Val::Tensor(_), Some(fb), Some(t0)) = (&x, imp.file_batch, target.first_mut()) {
        if *t0 == fb as i64 && dims.first() == Some(&imp.graph.batch) {
            *t0 = imp.graph.batch as i64;
        }
    }
    let allowzero = node.attr_or("allowzero", false)?;
    let shape = resolve_reshape(&dims, &target, allowzero).map_err(|m| node.err(m))?;
    reshape_to(imp, node, x, shape)
}

/// ONNX Reshape target resolution.
pub fn resolve_reshape(
    dims: &[usize],
    target: &[i64],
    allowzero: bool,
) -> Result<Vec<usize>, String> {
    let total: usize = dims.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(*dims.get(i).ok_or_else(|| {
                format!("target {target:?}: 0 at axis {i} but the input {dims:?} has no such axis")
            })?),
            t if t > 0 => out.push(t as usize),
            _ => {
                return Err(format!(
                    "target shape {target:?} is invalid for input {dims:?}"
                ))
            }
        }
    }
    let known = crate::ir::shape::element_count(&out)
        .ok_or_else(|| format!("target shape {target:?} is too large"))?;
    if let Some(i) = infer {
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!(
                "cannot reshape {dims:?} ({total} elements) to {target:?}"
            ));
        }
        out[i] = total / known;
    }
    if out.iter().product::<usize>() != total {
        return Err(format!(
            "cannot reshape {dims:?} ({total} elements) to {target:?}"
        ));
    }
    Ok(out)
}

/// `Flatten(X)` to 2-D at `axis` (default 1).
fn flatten(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.input(node, 0)?;
    let dims = shape_of(imp, &x);
    let axis = node.attr_or("axis", 1i64)?;
    // Flatten accepts axis == rank (everything in the first dimension).
    let axis = if axis == dims.len() as i64 {
        dims.len()
    } else {
        node.axis(axis, dims.len())?
    };
    match x {
        Val::Tensor(t) => imp.push(node, Op::Flatten { axis }, vec![t]),
        c => {
            let shape = vec![dims[..axis].iter().product(), dims[axis..].iter().product()];
            reshape_to(imp, node, c, shape)
        }
    }
}

/// `Squeeze(X[, axes])`: drops the listed size-1 axes, or all of them.
fn squeeze(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.input(node, 0)?;
    let dims = shape_of(imp, &x);
    let axes = match axes_arg(imp, node)? {
        Some(a) => a
            .iter()
            .map(|&a| node.axis(a, dims.len()))
            .collect::<Result<Vec<_>, _>>()?,
        None => (0..dims.len()).filter(|&i| dims[i] == 1).collect(),
    };
    if let Some(&a) = axes.iter().find(|&&a| dims[a] != 1) {
        return Err(node.err(format!(
            "cannot squeeze axis {a} of size {} in {dims:?}",
            dims[a]
        )));
    }
    let shape = (0..dims.len())
        .filter(|i| !axes.contains(i))
        .map(|i| dims[i])
        .collect();
    reshape_to(imp, node, x, shape)
}

/// `Unsqueeze(X, axes)`: inserts size-1 axes at the listed output positions.
fn unsqueeze(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.input(node, 0)?;
    let dims = shape_of(imp, &x);
    let raw = axes_arg(imp, node)?.ok_or_else(|| node.err("axes are missing"))?;
    let rank = dims.len() + raw.len();
    let axes = raw
        .iter()
        .map(|&a| node.axis(a, rank))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rest = dims.iter();
    let mut shape = Vec::with_capacity(rank);
    for i in 0..rank {
        if axes.contains(&i) {
            shape.push(1);
        } else {
            shape.push(
                *rest
                    .next()
                    .ok_or_else(|| node.err(format!("repeated axes {raw:?}")))?,
            );
        }
    }
    reshape_to(imp, node, x, shape)
}

/// `Transpose(X)` by `perm` (default: reverse the axes).
fn transpose(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.input(node, 0)?;
    let rank = shape_of(imp, &x).len();
    let perm = match node.ints("perm")? {
        Some(p) => p
            .iter()
            .map(|&a| node.axis(a, rank))
            .collect::<Result<Vec<_>, _>>()?,
        None => (0..rank).rev().collect(),
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..rank).collect::<Vec<_>>() {
        return Err(node.err(format!("perm {perm:?} is not a permutation of {rank} axes")));
    }
    match x {
        Val::Tensor(t) => imp.push(node, Op::Transpose { perm }, vec![t]),
        Val::Const(c) => Ok(Val::Const(
            each_const!(&c, a => a.view().permuted_axes(perm.clone()).as_standard_layout().into_owned()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_resolves_zero_and_minus_one() {
        assert_eq!(
            resolve_reshape(&[8, 64, 1, 1], &[0, -1], false),
            Ok(vec![8, 64])
        );
        assert_eq!(
            resolve_reshape(&[8, 64, 1, 1], &[8, -1], false),
            Ok(vec![8, 64])
        );
        assert!(resolve_reshape(&[8, 64], &[0, 3], true).is_err());
        assert!(resolve_reshape(&[8, 64], &[-1, -1], false).is_err());
        assert!(resolve_reshape(&[8, 64], &[5, -1], false).is_err());
    }

    #[test]
    fn oversized_targets_are_errors_not_overflows() {
        let e = resolve_reshape(&[2, 8], &[1 << 33, 1 << 33, -1], false).unwrap_err();
        assert!(e.contains("too large"), "{e}");
        let e = resolve_reshape(&[2, 8], &[1 << 62, 4], false).unwrap_err();
        assert!(e.contains("too large"), "{e}");
    }
}
