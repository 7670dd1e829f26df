//! Selection and assembly of run-time tensors: `Concat`, `Slice` (attribute and 5-input forms,
//! INT64_MAX ends, negative steps), `Gather` (an embedding lookup of run-time ids in a constant
//! table; constant indices into a run-time tensor), `GatherND` (constant index tuples into a
//! run-time tensor), `Split` (one `Slice` per output), `Pad` (constant mode). On constants they fold in [`crate::onnx::fold`].

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::{Embedding, Gather, Op, SliceAxis, ValueId};

/// Registers `Split`, `Concat`, `Slice`, `Gather`, `GatherND` and `Pad`.
pub fn register(reg: &mut Registry) {
    reg.insert("Split", split);
    reg.insert("Concat", concat);
    reg.insert("Slice", slice);
    reg.insert("Gather", gather);
    reg.insert("GatherND", gather_nd);
    reg.insert("Pad", pad);
}

/// `Concat(X…)` along `axis`: all constants fold, all tensors become an IR `Concat`.
fn concat(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let vals = (0..node.proto.input.len())
        .filter_map(|i| imp.opt_input(node, i).transpose())
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = vals.first() else {
        return Err(node.err("has no inputs"));
    };
    let rank = match first {
        Val::Tensor(t) => imp.shape(*t).len(),
        Val::Const(c) => c.shape().len(),
    };
    let axis = node.axis_attr("axis", None, rank)?;
    let tensors: Vec<ValueId> = vals
        .iter()
        .filter_map(|v| {
            if let Val::Tensor(t) = v {
                Some(*t)
            } else {
                None
            }
        })
        .collect();
    if tensors.len() == vals.len() {
        return imp.push(node, Op::Concat { axis }, tensors);
    }
    class_token(imp, node, &vals, axis)
}

/// `Concat([token, x], axis=1)` of a constant `[B|1, 1, D]` (the same row for every sample) and
/// a run-time `[B, N, D]`: the ViT class token, an IR `ClassToken`. Other mixes of constants
/// and run-time tensors are errors.
fn class_token(
    imp: &mut Importer,
    node: &NodeView,
    vals: &[Val],
    axis: usize,
) -> Result<Val, ModelError> {
    let (Some(Val::Const(c)), Some(Val::Tensor(x)), 2, 1) =
        (vals.first(), vals.get(1), vals.len(), axis)
    else {
        return Err(node.err(
            "mixes constant and run-time inputs (only a class token [1, 1, D] before [B, N, D] on axis 1 is supported)",
        ));
    };
    let c = c.to_f32();
    let token = match c.shape() {
        [_, 1, d] => {
            super::mask::collapsed(&c, 0).and_then(|r| r.into_shape_with_order(vec![*d]).ok())
        }
        _ => None,
    }
    .ok_or_else(|| {
        node.err(format!(
            "constant input {:?} is not a class token [1, 1, D] shared by the batch",
            c.shape()
        ))
    })?;
    imp.push(node, Op::ClassToken { token }, vec![*x])
}

/// `Slice(X, starts, ends[, axes][, steps])` (opset ≥ 10) or with attributes (opset < 10).
fn slice(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let dims = imp.shape(x);
    let arg = |i: usize, attr: &str| -> Result<Option<Vec<i64>>, ModelError> {
        match node.ints(attr)? {
            Some(v) => Ok(Some(v)),
            None if node.opset >= 10 => Ok(imp.opt_const(node, i)?.map(|c| c.ints())),
            None => Ok(None),
        }
    };
    let starts = arg(1, "starts")?.ok_or_else(|| node.err("starts are missing"))?;
    let ends = arg(2, "ends")?.ok_or_else(|| node.err("ends are missing"))?;
    let axes = arg(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = arg(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(node.err(format!(
            "starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} differ in length"
        )));
    }
    let mut sel = Vec::with_capacity(starts.len());
    for i in 0..starts.len() {
        let axis = node.axis(axes[i], dims.len())?;
        let s =
            slice_axis(axis, dims[axis], starts[i], ends[i], steps[i]).map_err(|m| node.err(m))?;
        sel.push(s);
    }
    if let Some(s) = sel.iter().find(|s| s.len == 0) {
        return Err(node.err(format!(
            "selects nothing on axis {} (length {})",
            s.axis, dims[s.axis]
        )));
    }
    sel.retain(|s| !whole(s, &dims));
    if sel.is_empty() {
        return Ok(Val::Tensor(x));
    }
    imp.push(node, Op::Slice { axes: sel }, vec![x])
}

/// Whether `s` selects all of its axis in order: no selection at all, so no IR `Slice` (which
/// would pin the axis's length, a batch merged into it included).
fn whole(s: &SliceAxis, dims: &[usize]) -> bool {
    s.start == 0 && s.step == 1 && s.len == dims[s.axis]
}

/// Resolves ONNX slice bounds on an axis of length `dim` (negative indices count from the end,
/// out-of-range values clamp); the selection may be empty (`len` 0).
pub fn slice_axis(
    axis: usize,
    dim: usize,
    start: i64,
    end: i64,
    step: i64,
) -> Result<SliceAxis, String> {
    if step == 0 {
        return Err(format!("step 0 on axis {axis}"));
    }
    let d = dim as i128;
    let norm = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
    let (start, end) = if step > 0 {
        (norm(start).clamp(0, d), norm(end).clamp(0, d))
    } else {
        (norm(start).clamp(0, d - 1), norm(end).clamp(-1, d - 1))
    };
    let st = step as i128;
    let len = if step > 0 {
        (end - start + st - 1) / st
    } else {
        (start - end - st - 1) / -st
    };
    // An empty selection is legal shape arithmetic on constants (`shape[3:]` of a rank-3
    // shape); a run-time tensor may not become empty (see `slice`).
    Ok(SliceAxis {
        axis,
        start: start.clamp(0, (d - 1).max(0)) as usize,
        len: len.max(0) as usize,
        step,
    })
}

/// `Gather(data, indices)` (on two constants it folds in [`crate::onnx::fold`]): run-time ids
/// into a constant rank-2 table on axis 0 are an [`Embedding`]; constant indices into a
/// run-time tensor are a `Slice` when they step evenly (see [`gather_progression`]).
fn gather(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    match (imp.input(node, 0)?, imp.input(node, 1)?) {
        (Val::Const(table), Val::Tensor(ids)) => {
            let axis = node.attr_or("axis", 0i64)?;
            if axis != 0 || table.shape().len() != 2 {
                return Err(node.err(format!(
                    "run-time indices into a constant of shape {:?} on axis {axis}: only an \
                     embedding lookup (a [vocab, dim] table, axis 0) is supported",
                    table.shape()
                )));
            }
            let op = Op::Embedding(Embedding {
                table: table.to_f32(),
            });
            imp.push(node, op, vec![ids])
        }
        (Val::Tensor(x), Val::Const(indices)) => gather_progression(imp, node, x, &indices),
        (Val::Tensor(_), Val::Tensor(_)) => {
            Err(node.err("gathering a run-time tensor at run-time indices is not supported"))
        }
        (Val::Const(_), Val::Const(_)) => {
            Err(node.err("internal: constant inputs reached the run-time handler"))
        }
    }
}

/// `Gather` of a run-time `x` at constant indices along `axis`. Indices that step evenly (one
/// index, `0, 1, …, n−1`, `7, 5, 3`: the ViT class token `x[:, 0]`, the dynamo exporter's
/// `as_strided` of a whole axis) are a `Slice`, plus a `Reshape` when they are not one list (a
/// scalar index drops the axis); any others are an IR [`Gather`] of that one axis.
fn gather_progression(
    imp: &mut Importer,
    node: &NodeView,
    x: ValueId,
    indices: &crate::onnx::value::Const,
) -> Result<Val, ModelError> {
    let dims = imp.shape(x);
    let axis = node.axis_attr("axis", Some(0), dims.len())?;
    let n = dims[axis];
    let idx = indices
        .ints()
        .into_iter()
        .map(|i| resolve_index(node, i, n, axis))
        .collect::<Result<Vec<usize>, _>>()?;
    let (Some(&start), len) = (idx.first(), idx.len()) else {
        return Err(node.err("no indices"));
    };
    let step = match idx.get(1) {
        Some(&next) => next as i64 - start as i64,
        None => 1,
    };
    let even = step != 0
        && idx
            .iter()
            .enumerate()
            .all(|(k, &i)| i as i64 == start as i64 + k as i64 * step);
    if !even {
        let op = Gather {
            axis,
            block: vec![n],
            grid: indices.shape().to_vec(),
            positions: idx,
        };
        return imp.push(node, Op::Gather(op), vec![x]);
    }
    let sel = SliceAxis {
        axis,
        start,
        len,
        step,
    };
    let mut shape = dims[..axis].to_vec();
    shape.extend_from_slice(indices.shape());
    shape.extend_from_slice(&dims[axis + 1..]);
    let sliced = {
        let mut s = dims.clone();
        s[axis] = len;
        s
    };
    if whole(&sel, &dims) {
        // every index in order (the dynamo exporter's `as_strided` view of a flattened
        // tensor, batch included): at most a reshape
        return if shape == dims {
            Ok(Val::Tensor(x))
        } else {
            imp.push(node, Op::Reshape { shape }, vec![x])
        };
    }
    if shape == sliced {
        return imp.push(node, Op::Slice { axes: vec![sel] }, vec![x]);
    }
    let name = format!("{}/select", node.name);
    let Val::Tensor(picked) =
        imp.push_named(node, &name, Op::Slice { axes: vec![sel] }, vec![x], &name)?
    else {
        return Err(node.err("internal: a slice produced a constant"));
    };
    imp.push(node, Op::Reshape { shape }, vec![picked])
}

/// Index `i` (negative: from the end) on axis `axis` of length `n`, or an error naming the node.
fn resolve_index(node: &NodeView, i: i64, n: usize, axis: usize) -> Result<usize, ModelError> {
    let j = if i < 0 { i + n as i64 } else { i };
    usize::try_from(j).ok().filter(|&j| j < n).ok_or_else(|| {
        node.err(format!(
            "index {i} out of range for axis {axis} of length {n}"
        ))
    })
}

/// `GatherND(data, indices)` of a run-time `data` at constant `indices` `[…, k]` with
/// `batch_dims` 0 (on two constants it folds in [`crate::onnx::fold`]): each index tuple picks
/// a position in the first `k` axes, so it is an IR [`Gather`] of that block, the axes after
/// it taken whole.
fn gather_nd(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let indices = match imp.input(node, 1)? {
        Val::Const(c) => c,
        Val::Tensor(_) => {
            return Err(node.err(
                "gathering at run-time indices is not supported (only at indices that are \
                 constants at import)",
            ))
        }
    };
    let batch_dims: i64 = node.attr_or("batch_dims", 0i64)?;
    if batch_dims != 0 {
        return Err(node.attr_error(
            "batch_dims",
            format!("{batch_dims}: only 0 is supported on a run-time tensor"),
        ));
    }
    let dims = imp.shape(x);
    let ishape = indices.shape().to_vec();
    let k = ishape.last().copied().unwrap_or(0);
    if k == 0 || k > dims.len() {
        return Err(node.err(format!(
            "indices {ishape:?} do not fit data {dims:?} (the last axis holds index tuples of \
             1 to {} entries)",
            dims.len()
        )));
    }
    let block = dims[..k].to_vec();
    let ints = indices.ints();
    let mut positions = Vec::with_capacity(ints.len() / k);
    for tuple in ints.chunks(k) {
        let mut at = 0;
        for (j, (&i, &d)) in tuple.iter().zip(&block).enumerate() {
            at = at * d + resolve_index(node, i, d, j)?;
        }
        positions.push(at);
    }
    let op = Gather {
        axis: 0,
        block,
        grid: ishape[..ishape.len() - 1].to_vec(),
        positions,
    };
    imp.push(node, Op::Gather(op), vec![x])
}

/// `Split(X[, split])` along `axis` (default 0): sizes from the `split` input (opset ≥ 13) or
/// attribute, else `num_outputs` (opset 18) or the output count, equal parts (the last one
/// smaller when they do not divide). Each output is one `Slice` of the input.
fn split(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let dims = imp.shape(x);
    let axis = node.axis_attr("axis", Some(0), dims.len())?;
    let outputs: Vec<String> = node.proto.output.clone();
    let d = dims[axis];
    let sizes: Vec<usize> = match node.ints("split")? {
        Some(v) => v.iter().map(|&s| s.max(0) as usize).collect(),
        None => match imp.opt_const(node, 1)? {
            Some(c) => c.ints().iter().map(|&s| s.max(0) as usize).collect(),
            None => {
                let n = outputs.len().max(1);
                let part = d.div_ceil(n);
                (0..n)
                    .map(|i| part.min(d.saturating_sub(i * part)))
                    .collect()
            }
        },
    };
    if sizes.len() != outputs.len() || sizes.iter().sum::<usize>() != d || sizes.contains(&0) {
        return Err(node.err(format!(
            "split sizes {sizes:?} for {} outputs do not tile axis {axis} of {dims:?}",
            outputs.len()
        )));
    }
    let mut start = 0;
    let mut first = None;
    for (i, (out, &len)) in outputs.iter().zip(&sizes).enumerate() {
        let sel = SliceAxis {
            axis,
            start,
            len,
            step: 1,
        };
        start += len;
        if out.is_empty() {
            continue;
        }
        let name = if i == 0 {
            node.name.clone()
        } else {
            format!("{}/{i}", node.name)
        };
        let v = imp.push_named(node, &name, Op::Slice { axes: vec![sel] }, vec![x], out)?;
        if i == 0 {
            first = Some(v);
        } else {
            imp.vals.insert(out.clone(), v);
        }
    }
    first.ok_or_else(|| node.err("the first output is unnamed"))
}

/// `Pad(X, pads[, constant_value][, axes])` (opset ≥ 11; attributes before), constant mode only.
fn pad(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let rank = imp.shape(x).len();
    let mode = node.attr_or("mode", "constant".to_string())?;
    if mode != "constant" {
        return Err(node.err(format!("mode '{mode}' is not supported (only 'constant')")));
    }
    let (raw, value) = match node.ints("pads")? {
        Some(p) => (p, node.attr_or("value", 0.0f32)?),
        None => {
            let p = imp.constant(node, 1)?.ints();
            let v = match imp.opt_const(node, 2)? {
                Some(c) => c
                    .scalar_f32()
                    .map_err(|m| node.err(format!("constant_value: {m}")))?,
                None => 0.0,
            };
            (p, v)
        }
    };
    let axes = match imp.opt_const(node, 3)? {
        Some(a) => a
            .ints()
            .iter()
            .map(|&a| node.axis(a, rank))
            .collect::<Result<Vec<_>, _>>()?,
        None => (0..rank).collect(),
    };
    if raw.len() != 2 * axes.len() {
        return Err(node.err(format!("{} pad values for {} axes", raw.len(), axes.len())));
    }
    let mut pads = vec![(0usize, 0usize); rank];
    for (k, &a) in axes.iter().enumerate() {
        let (b, e) = (raw[k], raw[k + axes.len()]);
        if b < 0 || e < 0 {
            return Err(node.err(format!(
                "negative pads {raw:?} (cropping) are not supported"
            )));
        }
        pads[a] = (b as usize, e as usize);
    }
    imp.push(node, Op::Pad { pads, value }, vec![x])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_bounds_follow_onnx() {
        // x[1:] with INT64_MAX end.
        assert_eq!(
            slice_axis(0, 5, 1, i64::MAX, 1),
            Ok(SliceAxis {
                axis: 0,
                start: 1,
                len: 4,
                step: 1
            })
        );
        // Full reverse: start -1, end INT64_MIN, step -1.
        assert_eq!(
            slice_axis(0, 4, -1, i64::MIN, -1),
            Ok(SliceAxis {
                axis: 0,
                start: 3,
                len: 4,
                step: -1
            })
        );
        // x[::2] on 5 → 3 elements.
        assert_eq!(slice_axis(1, 5, 0, i64::MAX, 2).map(|s| s.len), Ok(3));
        // x[3:1:-1] → indices 3, 2.
        assert_eq!(
            slice_axis(0, 5, 3, 1, -1),
            Ok(SliceAxis {
                axis: 0,
                start: 3,
                len: 2,
                step: -1
            })
        );
        assert_eq!(slice_axis(0, 5, 3, 3, 1).map(|s| s.len), Ok(0));
        assert_eq!(slice_axis(0, 3, 3, i64::MAX, 1).map(|s| s.len), Ok(0));
        assert!(slice_axis(0, 5, 0, 5, 0).is_err());
    }
}
