//! Evaluators that build or index tensors: `ConstantOfShape`, `Range`, `Expand`, `Tile`,
//! `Concat`, `Slice`, `Gather`, `GatherElements`, `GatherND`, `ScatterND`, `ScatterElements`,
//! `CumSum`, `Trilu`. Indices may be negative (counted from the end); an index out of range is
//! an error naming the node.

use ndarray::{concatenate, ArrayD, Axis, IxDyn, Slice};

use super::{arg, check_size, scalar_i64, sizes_arg, Eval};
use crate::error::ModelError;
use crate::ir::index_ops::{cumsum as cumsum_along, gather_offsets};
use crate::ir::shape::broadcast;
use crate::onnx::node::NodeView;
use crate::onnx::ops::select::slice_axis;
use crate::onnx::value::{each_const, Const};

/// The evaluator of an indexing op type.
pub fn evaluator(op_type: &str) -> Option<Eval> {
    Some(match op_type {
        "ConstantOfShape" => constant_of_shape,
        "Range" => range,
        "Expand" => expand,
        "Tile" => tile,
        "Concat" => concat,
        "Slice" => slice,
        "Gather" => gather,
        "GatherElements" => gather_elements,
        "GatherND" => gather_nd,
        "ScatterND" => scatter_nd,
        "ScatterElements" => scatter_elements,
        "CumSum" => cumsum,
        "Trilu" => trilu,
        _ => return None,
    })
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// `i` (negative: from the end) resolved on an axis of length `n`.
fn index(node: &NodeView, i: i64, n: usize, axis: usize) -> Result<usize, ModelError> {
    let j = if i < 0 { i + n as i64 } else { i };
    usize::try_from(j).ok().filter(|&j| j < n).ok_or_else(|| {
        node.err(format!(
            "index {i} out of range for axis {axis} of length {n}"
        ))
    })
}

/// An array of `shape` from flat values (the count is the caller's to get right).
fn shaped<T>(node: &NodeView, shape: &[usize], v: Vec<T>) -> Result<ArrayD<T>, ModelError> {
    ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| node.err(e.to_string()))
}

/// `ConstantOfShape(shape)` filled with the `value` attribute (default float 0).
fn constant_of_shape(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let shape = sizes_arg(node, x, 0)?;
    check_size(node, &shape)?;
    let fill = node
        .tensor("value")?
        .unwrap_or(Const::F32(ArrayD::zeros(IxDyn(&[1]))));
    let empty = || node.attr_error("value", "is empty");
    Ok(match fill {
        Const::F32(v) => Const::F32(ArrayD::from_elem(
            IxDyn(&shape),
            *v.iter().next().ok_or_else(empty)?,
        )),
        Const::I64(v) => Const::I64(ArrayD::from_elem(
            IxDyn(&shape),
            *v.iter().next().ok_or_else(empty)?,
        )),
    })
}

/// `Range(start, limit, delta)`: `max(⌈(limit − start) / delta⌉, 0)` values, integer when all
/// three inputs are.
fn range(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (s, l, d) = (arg(node, x, 0)?, arg(node, x, 1)?, arg(node, x, 2)?);
    let one = |c: &Const, what: &str| {
        c.scalar_f32()
            .map(f64::from)
            .map_err(|m| node.err(format!("{what}: {m}")))
    };
    let (start, limit, delta) = (one(s, "start")?, one(l, "limit")?, one(d, "delta")?);
    if delta == 0.0 || !(start.is_finite() && limit.is_finite() && delta.is_finite()) {
        return Err(node.err(format!("range {start}..{limit} by {delta} is not finite")));
    }
    let n = ((limit - start) / delta).ceil().max(0.0);
    if n > super::FOLD_LIMIT as f64 {
        return Err(node.err(format!(
            "range {start}..{limit} by {delta} has {n} values, more than {}",
            super::FOLD_LIMIT
        )));
    }
    let n = n as usize;
    if let (Const::I64(_), Const::I64(_), Const::I64(_)) = (s, l, d) {
        let (s, d) = (scalar_i64(node, s, "start")?, scalar_i64(node, d, "delta")?);
        let v = (0..n as i64)
            .map(|k| s.wrapping_add(k.wrapping_mul(d)))
            .collect();
        return shaped(node, &[n], v).map(Const::I64);
    }
    let v = (0..n).map(|k| (start + k as f64 * delta) as f32).collect();
    shaped(node, &[n], v).map(Const::F32)
}

/// `Expand(X, shape)`: `X` broadcast with the target shape (either may have the larger axes).
fn expand(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let c = arg(node, x, 0)?;
    let target = sizes_arg(node, x, 1)?;
    let shape = broadcast(c.shape(), &target).map_err(|m| node.err(m))?;
    check_size(node, &shape)?;
    let bad = || node.err(format!("cannot expand {:?} to {shape:?}", c.shape()));
    Ok(each_const!(c, a => a.broadcast(IxDyn(&shape)).ok_or_else(bad)?.to_owned()))
}

/// `Tile(X, repeats)`.
fn tile(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let c = arg(node, x, 0)?;
    let reps = sizes_arg(node, x, 1)?;
    if reps.len() != c.shape().len() {
        return Err(node.err(format!(
            "{} repeats for rank {}",
            reps.len(),
            c.shape().len()
        )));
    }
    let shape: Vec<usize> = c
        .shape()
        .iter()
        .zip(&reps)
        .map(|(d, r)| d.saturating_mul(*r))
        .collect();
    check_size(node, &shape)?;
    let dims = c.shape().to_vec();
    Ok(
        each_const!(c, a => ArrayD::from_shape_fn(IxDyn(&shape), |i| {
            let src: Vec<usize> = (0..dims.len()).map(|k| i[k] % dims[k]).collect();
            a[IxDyn(&src)].clone()
        })),
    )
}

/// `Concat(X…)` along `axis`: integer when every input is.
fn concat(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let parts: Vec<&Const> = x.iter().flatten().collect();
    let first = parts.first().ok_or_else(|| node.err("has no inputs"))?;
    let axis = node.axis_attr("axis", None, first.shape().len())?;
    let total = parts
        .iter()
        .map(|c| c.shape().get(axis).copied().unwrap_or(0))
        .sum::<usize>();
    let mut shape = first.shape().to_vec();
    shape[axis] = total;
    check_size(node, &shape)?;
    let joined = if parts.iter().all(|c| matches!(c, Const::I64(_))) {
        let v: Vec<ArrayD<i64>> = parts.iter().map(|c| c.to_i64()).collect();
        concatenate(Axis(axis), &v.iter().map(|a| a.view()).collect::<Vec<_>>()).map(Const::I64)
    } else {
        let v: Vec<ArrayD<f32>> = parts.iter().map(|c| c.to_f32()).collect();
        concatenate(Axis(axis), &v.iter().map(|a| a.view()).collect::<Vec<_>>()).map(Const::F32)
    };
    joined.map_err(|e| {
        node.err(format!(
            "inputs {:?}: {e}",
            parts.iter().map(|c| c.shape()).collect::<Vec<_>>()
        ))
    })
}

/// `Slice(X, starts, ends[, axes][, steps])`, or with attributes before opset 10.
fn slice(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let c = arg(node, x, 0)?;
    let dims = c.shape().to_vec();
    let list = |i: usize, attr: &str| -> Result<Option<Vec<i64>>, ModelError> {
        match node.ints(attr)? {
            Some(v) => Ok(Some(v)),
            None if node.opset >= 10 => Ok(x.get(i).and_then(Option::as_ref).map(Const::ints)),
            None => Ok(None),
        }
    };
    let starts = list(1, "starts")?.ok_or_else(|| node.err("starts are missing"))?;
    let ends = list(2, "ends")?.ok_or_else(|| node.err("ends are missing"))?;
    let axes = list(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = list(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if [ends.len(), axes.len(), steps.len()]
        .iter()
        .any(|&n| n != starts.len())
    {
        return Err(node.err(format!(
            "starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} differ in length"
        )));
    }
    let mut out = c.clone();
    for i in 0..starts.len() {
        let axis = node.axis(axes[i], dims.len())?;
        let s =
            slice_axis(axis, dims[axis], starts[i], ends[i], steps[i]).map_err(|m| node.err(m))?;
        let range = strided(s.start, s.len, s.step);
        out = each_const!(&out, a => a.slice_axis(Axis(s.axis), range).to_owned());
    }
    Ok(out)
}

/// The `len` indices `start`, `start + step`, … as an ndarray slice (a view, so that slicing
/// a large constant copies each kept element once rather than gathering them one index at a
/// time). ndarray walks a negative step from the end of its range, so the range runs from the
/// last index taken to the first.
fn strided(start: usize, len: usize, step: i64) -> Slice {
    if len == 0 {
        return Slice::new(0, Some(0), 1);
    }
    let last = start as i64 + (len as i64 - 1) * step;
    let (lo, hi) = if step > 0 {
        (start as i64, last)
    } else {
        (last, start as i64)
    };
    Slice::new(lo as isize, Some(hi as isize + 1), step as isize)
}

/// `Gather(data, indices)` along `axis`.
fn gather(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (data, indices) = (arg(node, x, 0)?, arg(node, x, 1)?);
    let dims = data.shape().to_vec();
    let axis = node.axis_attr("axis", Some(0), dims.len())?;
    let mut shape = dims[..axis].to_vec();
    shape.extend_from_slice(indices.shape());
    shape.extend_from_slice(&dims[axis + 1..]);
    check_size(node, &shape)?;
    let flat = indices
        .ints()
        .into_iter()
        .map(|i| index(node, i, dims[axis], axis))
        .collect::<Result<Vec<_>, _>>()?;
    let picked = each_const!(data, a => a.select(Axis(axis), &flat));
    picked.reshaped(&shape).map_err(|m| node.err(m))
}

/// `GatherElements(data, indices)`: `out[i…] = data[i… with axis ← indices[i…]]`.
fn gather_elements(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (data, indices) = (arg(node, x, 0)?, arg(node, x, 1)?);
    let dims = data.shape().to_vec();
    let axis = node.axis_attr("axis", Some(0), dims.len())?;
    let ishape = indices.shape().to_vec();
    if ishape.len() != dims.len()
        || ishape
            .iter()
            .zip(&dims)
            .enumerate()
            .any(|(k, (i, d))| k != axis && i > d)
    {
        return Err(node.err(format!(
            "indices {ishape:?} do not fit data {dims:?} on axis {axis}"
        )));
    }
    let src = gather_offsets(&dims, axis, &ishape, indices.ints().into_iter())
        .map_err(|m| node.err(m))?;
    Ok(each_const!(data, a => {
        let v: Vec<_> = a.iter().cloned().collect();
        shaped(node, &ishape, src.iter().map(|&o| v[o].clone()).collect())?
    }))
}

/// The index tuples of a `…ND` op: `indices` `[…, k]` as rows of `k` resolved offsets into the
/// first `k` axes (after `batch` leading axes shared with `dims`) and the flat start of each.
fn nd_offsets(
    node: &NodeView,
    dims: &[usize],
    indices: &Const,
    batch: usize,
) -> Result<(Vec<usize>, usize), ModelError> {
    let ishape = indices.shape();
    let k = *ishape
        .last()
        .ok_or_else(|| node.err("indices must have rank ≥ 1"))?;
    if batch + k > dims.len() || ishape.len() <= batch || ishape[..batch] != dims[..batch] {
        return Err(node.err(format!(
            "indices {ishape:?} do not fit data {dims:?} (batch_dims {batch})"
        )));
    }
    if k == 0 {
        return Err(node.err(format!("indices {ishape:?} hold empty index tuples")));
    }
    let ds = strides(dims);
    let block: usize = dims[batch + k..].iter().product();
    let batch_block: usize = dims[batch..].iter().product();
    let per_batch: usize = ishape[batch..ishape.len() - 1].iter().product();
    let ints = indices.ints();
    let mut starts = Vec::with_capacity(ints.len() / k);
    for (row, tuple) in ints.chunks(k).enumerate() {
        let mut off = (row / per_batch.max(1)) * batch_block;
        for (j, &i) in tuple.iter().enumerate() {
            off += index(node, i, dims[batch + j], batch + j)? * ds[batch + j];
        }
        starts.push(off);
    }
    Ok((starts, block))
}

/// `GatherND(data, indices)` with `batch_dims`.
fn gather_nd(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (data, indices) = (arg(node, x, 0)?, arg(node, x, 1)?);
    let batch: usize = node.attr_or("batch_dims", 0usize)?;
    let dims = data.shape().to_vec();
    let (starts, block) = nd_offsets(node, &dims, indices, batch)?;
    let ishape = indices.shape();
    let k = ishape[ishape.len() - 1];
    let mut shape = ishape[..ishape.len() - 1].to_vec();
    shape.extend_from_slice(&dims[batch + k..]);
    check_size(node, &shape)?;
    Ok(each_const!(data, a => {
        let v: Vec<_> = a.iter().cloned().collect();
        let out = starts.iter().flat_map(|&s| v[s..s + block].iter().cloned()).collect();
        shaped(node, &shape, out)?
    }))
}

/// `ScatterND(data, indices, updates)` with `reduction` none (later writes win), add or mul.
fn scatter_nd(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (data, indices, updates) = (arg(node, x, 0)?, arg(node, x, 1)?, arg(node, x, 2)?);
    let dims = data.shape().to_vec();
    let (starts, block) = nd_offsets(node, &dims, indices, 0)?;
    if updates.shape().iter().product::<usize>() != starts.len() * block {
        return Err(node.err(format!(
            "updates {:?} do not match {} index tuples of {block} elements",
            updates.shape(),
            starts.len()
        )));
    }
    let reduction: String = node.attr_or("reduction", "none".to_string())?;
    let targets: Vec<usize> = starts.iter().flat_map(|&s| s..s + block).collect();
    write(node, data, updates, &targets, &reduction)
}

/// `ScatterElements(data, indices, updates)` along `axis`.
fn scatter_elements(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (data, indices, updates) = (arg(node, x, 0)?, arg(node, x, 1)?, arg(node, x, 2)?);
    let dims = data.shape().to_vec();
    let axis = node.axis_attr("axis", Some(0), dims.len())?;
    let ishape = indices.shape().to_vec();
    if ishape != updates.shape() || ishape.len() != dims.len() {
        return Err(node.err(format!(
            "indices {ishape:?} and updates {:?} differ or do not fit data {dims:?}",
            updates.shape()
        )));
    }
    let (ds, is) = (strides(&dims), strides(&ishape));
    let mut targets = Vec::with_capacity(ishape.iter().product());
    for (flat, &i) in indices.ints().iter().enumerate() {
        let mut off = 0;
        for k in 0..dims.len() {
            let coord = (flat / is[k]) % ishape[k];
            let c = if k == axis {
                index(node, i, dims[k], k)?
            } else if coord < dims[k] {
                coord
            } else {
                return Err(node.err(format!("indices {ishape:?} exceed data {dims:?}")));
            };
            off += c * ds[k];
        }
        targets.push(off);
    }
    let reduction: String = node.attr_or("reduction", "none".to_string())?;
    write(node, data, updates, &targets, &reduction)
}

/// A copy of `data` with update `j` written to flat position `targets[j]`.
fn write(
    node: &NodeView,
    data: &Const,
    updates: &Const,
    targets: &[usize],
    reduction: &str,
) -> Result<Const, ModelError> {
    fn go<T: Copy + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
        a: &ArrayD<T>,
        u: &ArrayD<T>,
        targets: &[usize],
        reduction: &str,
    ) -> Result<ArrayD<T>, String> {
        let mut v: Vec<T> = a.iter().copied().collect();
        for (&t, &x) in targets.iter().zip(u.iter()) {
            v[t] = match reduction {
                "none" => x,
                "add" => v[t] + x,
                "mul" => v[t] * x,
                other => {
                    return Err(format!(
                        "reduction '{other}' is not supported (none, add, mul)"
                    ))
                }
            };
        }
        ArrayD::from_shape_vec(a.raw_dim(), v).map_err(|e| e.to_string())
    }
    match data {
        Const::I64(a) => go(a, &updates.to_i64(), targets, reduction).map(Const::I64),
        Const::F32(a) => go(a, &updates.to_f32(), targets, reduction).map(Const::F32),
    }
    .map_err(|m| node.err(m))
}

/// `CumSum(X, axis)` with `exclusive` and `reverse`.
fn cumsum(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let c = arg(node, x, 0)?;
    let dims = c.shape().to_vec();
    let axis = scalar_i64(node, arg(node, x, 1)?, "axis")?;
    let axis = node.axis(axis, dims.len())?;
    let exclusive = node.attr_or("exclusive", false)?;
    let reverse = node.attr_or("reverse", false)?;
    let mut out = c.clone();
    match &mut out {
        Const::I64(a) => cumsum_along(a, axis, exclusive, reverse),
        Const::F32(a) => cumsum_along(a, axis, exclusive, reverse),
    }
    Ok(out)
}

/// `Trilu(X[, k])`: keeps the upper (`upper = 1`, default) or lower triangle of the last two
/// axes from diagonal `k`, zeroing the rest.
fn trilu(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let c = arg(node, x, 0)?;
    let k = match x.get(1).and_then(Option::as_ref) {
        Some(k) => scalar_i64(node, k, "k")?,
        None => 0,
    };
    let upper = node.attr_or("upper", true)?;
    let shape = c.shape().to_vec();
    let [.., rows, cols] = shape[..] else {
        return Err(node.err(format!("input {shape:?} needs rank ≥ 2")));
    };
    let keep = |flat: usize| {
        let (i, j) = (((flat / cols) % rows) as i64, (flat % cols) as i64);
        if upper {
            j - i >= k
        } else {
            j - i <= k
        }
    };
    Ok(each_const!(c, a => shaped(node, &shape, a
        .iter()
        .enumerate()
        .map(|(f, &x)| if keep(f) { x } else { Default::default() })
        .collect())?))
}
