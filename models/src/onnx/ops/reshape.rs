//! Shape changes: `Reshape` (with `allowzero`), `Flatten`, `Squeeze`, `Unsqueeze`, `Transpose`.
//! On run-time tensors Reshape/Squeeze/Unsqueeze become an IR `Reshape` with the fully
//! resolved target shape (on constants the import-time evaluator computes them with the shape
//! rules here).

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::batch_axes::BatchAt;
use crate::ir::rebatch::rebatch;
use crate::ir::{Op, ValueId};

/// Registers `Flatten`, `Reshape`, `Squeeze`, `Unsqueeze` and `Transpose`.
pub fn register(reg: &mut Registry) {
    reg.insert("Flatten", flatten);
    reg.insert("Reshape", reshape);
    reg.insert("Squeeze", squeeze);
    reg.insert("Unsqueeze", unsqueeze);
    reg.insert("Transpose", transpose);
}

/// Gives run-time tensor `x` the shape `shape` (same element count, checked).
fn reshape_to(
    imp: &mut Importer,
    node: &NodeView,
    x: ValueId,
    shape: Vec<usize>,
) -> Result<Val, ModelError> {
    imp.push(node, Op::Reshape { shape }, vec![x])
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
    let x = imp.tensor(node, 0)?;
    let dims = imp.shape(x);
    let mut target = match node.ints("shape")? {
        Some(s) => s,
        None => imp.constant(node, 1)?.ints(),
    };
    // A run-time tensor's axis 0 is the batch: a target that carries the file's fixed batch there
    // follows the rebound batch.
    if let (Some(fb), Some(t0)) = (imp.file_batch, target.first_mut()) {
        if *t0 == fb as i64 && dims.first() == Some(&imp.graph.batch) {
            *t0 = imp.graph.batch as i64;
        }
    }
    let allowzero = node.attr_or("allowzero", false)?;
    let shape = match resolve_reshape(&dims, &target, allowzero) {
        Ok(shape) => shape,
        Err(m) => {
            let fb = imp.file_batch;
            let at = fb.and_then(|_| imp.batch_at(x));
            fb.and_then(|fb| rebound_target(&dims, &target, allowzero, at, fb, imp.graph.batch))
                .ok_or_else(|| node.err(m))?
        }
    };
    reshape_to(imp, node, x, shape)
}

/// A target written for the file's batch `fb` that does not fit input `dims` at the bound batch:
/// resolved as it is for the file's input (`dims` with the axis that holds the bound batch
/// holding `fb` instead), then rebound to the bound batch by element-count arithmetic
/// ([`crate::ir::rebatch`]), which finds the target axis that carries the batch even where it is
/// merged with another (the `[T, N·heads, d]` of attention, Swin's `[N·windows, …]`). Where the
/// batch is, `at`, comes from following it through the graph ([`crate::ir::batch_axes`]); when
/// that is not known, an axis of the bound batch, else one of the batch times a factor. `None`
/// unless exactly one result comes out.
fn rebound_target(
    dims: &[usize],
    target: &[i64],
    allowzero: bool,
    at: Option<BatchAt>,
    fb: usize,
    batch: usize,
) -> Option<Vec<usize>> {
    let stride = at.and_then(|b| b.stride(dims));
    let alone: Vec<usize> = match at {
        Some(b) => vec![b.axis],
        None => (0..dims.len()).filter(|&i| dims[i] == batch).collect(),
    };
    let merged: Vec<usize> = (0..dims.len())
        .filter(|&i| alone.is_empty() && batch > 1 && dims[i] % batch == 0)
        .collect();
    for axes in [alone, merged] {
        let mut found: Option<Vec<usize>> = None;
        for i in axes {
            let mut file_dims = dims.to_vec();
            file_dims[i] = (dims[i] / batch).checked_mul(fb)?;
            let Ok(file_shape) = resolve_reshape(&file_dims, target, allowzero) else {
                continue;
            };
            let Ok(shape) = rebatch(&file_dims, &file_shape, fb, stride, dims) else {
                continue;
            };
            match &found {
                Some(f) if *f != shape => return None,
                _ => found = Some(shape),
            }
        }
        if found.is_some() {
            return found;
        }
    }
    None
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
    let x = imp.tensor(node, 0)?;
    let dims = imp.shape(x);
    let axis = flatten_axis(node, &dims)?;
    imp.push(node, Op::Flatten { axis }, vec![x])
}

/// The `axis` attribute of a `Flatten` of `dims` (default 1; `rank` is allowed).
pub fn flatten_axis(node: &NodeView, dims: &[usize]) -> Result<usize, ModelError> {
    let axis = node.attr_or("axis", 1i64)?;
    // Flatten accepts axis == rank (everything in the first dimension).
    if axis == dims.len() as i64 {
        Ok(dims.len())
    } else {
        node.axis(axis, dims.len())
    }
}

/// `Squeeze(X[, axes])`: drops the listed size-1 axes, or all of them.
fn squeeze(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let shape = squeeze_shape(node, &imp.shape(x), axes_arg(imp, node)?)?;
    reshape_to(imp, node, x, shape)
}

/// The shape `Squeeze` leaves of `dims`: without `axes`, every size-1 axis dropped.
pub fn squeeze_shape(
    node: &NodeView,
    dims: &[usize],
    axes: Option<Vec<i64>>,
) -> Result<Vec<usize>, ModelError> {
    let axes = match axes {
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
    Ok((0..dims.len())
        .filter(|i| !axes.contains(i))
        .map(|i| dims[i])
        .collect())
}

/// `Unsqueeze(X, axes)`: inserts size-1 axes at the listed output positions.
fn unsqueeze(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let raw = axes_arg(imp, node)?.ok_or_else(|| node.err("axes are missing"))?;
    let shape = unsqueeze_shape(node, &imp.shape(x), &raw)?;
    reshape_to(imp, node, x, shape)
}

/// The shape `Unsqueeze` makes of `dims` with size-1 axes at output positions `raw`.
pub fn unsqueeze_shape(
    node: &NodeView,
    dims: &[usize],
    raw: &[i64],
) -> Result<Vec<usize>, ModelError> {
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
    Ok(shape)
}

/// `Transpose(X)` by `perm` (default: reverse the axes).
fn transpose(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let perm = permutation(node, imp.shape(x).len())?;
    imp.push(node, Op::Transpose { perm }, vec![x])
}

/// The `perm` attribute of a `Transpose` on `rank` axes, checked (default: the axes reversed).
pub fn permutation(node: &NodeView, rank: usize) -> Result<Vec<usize>, ModelError> {
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
    Ok(perm)
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
    fn a_target_pinning_the_batch_inside_an_axis_is_rebound() {
        // attention heads [T, 2·8, d] of a file exported at batch 2, imported at batch 3
        assert_eq!(
            rebound_target(&[16, 3, 32], &[16, 16, 4], false, None, 2, 3),
            Some(vec![16, 24, 4])
        );
        // [T·N, E] back from the heads
        assert_eq!(
            rebound_target(&[16, 3, 8], &[32, 8], false, None, 2, 3),
            Some(vec![48, 8])
        );
        // two axes of the bound batch: taken when both read the target alike
        assert_eq!(
            rebound_target(&[3, 3], &[6], false, None, 2, 3),
            Some(vec![9])
        );
        // heads split off [N·heads, T, d]
        assert_eq!(
            rebound_target(&[12, 16, 2], &[2, 4, 16, 2], false, None, 2, 3),
            Some(vec![3, 4, 16, 2])
        );
        // at batch 1 only the axes of size 1 can be the batch
        assert_eq!(
            rebound_target(&[16, 1, 8], &[16, 8, 2], false, None, 2, 1),
            Some(vec![16, 4, 2])
        );
        // the batch merged into a target axis
        assert_eq!(
            rebound_target(&[3, 4], &[4, 2], false, None, 2, 3),
            Some(vec![6, 2])
        );
        // the batch split across the target's axes: refused, and no other axis is guessed
        assert_eq!(rebound_target(&[3, 6], &[2, 12], false, None, 4, 3), None);
    }

    #[test]
    fn oversized_targets_are_errors_not_overflows() {
        let e = resolve_reshape(&[2, 8], &[1 << 33, 1 << 33, -1], false).unwrap_err();
        assert!(e.contains("too large"), "{e}");
        let e = resolve_reshape(&[2, 8], &[1 << 62, 4], false).unwrap_err();
        assert!(e.contains("too large"), "{e}");
    }
}
