//! Masks, choices and broadcasting: an additive causal mask (`Add` of a constant with 0 on and
//! below the diagonal and a large negative value or `-inf` above it), `Where(cond, x, −inf)` of a
//! constant causal condition, both become the IR [`Op::CausalMask`]; any other `Where` at a
//! condition known at import becomes the IR [`Op::Where`]; `Expand` of a run-time tensor
//! is an identity on a run-time tensor it does not enlarge, and otherwise a broadcasting `Mul` by
//! ones (`x.expand_as(y)` of a squeeze-and-excitation gate).

use ndarray::{ArrayD, Axis, IxDyn};

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::shape::broadcast;
use crate::ir::{Binary, BinaryKind, ConstOperand, Op, ValueId, Where};

/// Registers `Where` and `Expand`.
pub fn register(reg: &mut Registry) {
    reg.insert("Where", where_);
    reg.insert("Expand", expand);
}

/// At or below this a mask entry means "masked" (PyTorch uses `-inf`, some code `-1e9`/`-1e4`).
const MASKED: f32 = -1e4;

/// Whether `keep(i, j)` over the last two axes of `shape` (`[…, Tq, Tk]`, broadcast over the
/// rest) is exactly the causal pattern `j ≤ i + (Tk − Tq)`.
fn is_causal(shape: &[usize], keep: impl Fn(usize) -> bool) -> bool {
    let [.., tq, tk] = shape else {
        return false;
    };
    let (tq, tk) = (*tq, *tk);
    if tq < 2 || tq > tk {
        return false;
    }
    let plane = tq * tk;
    let planes = shape.iter().product::<usize>() / plane.max(1);
    (0..planes).all(|p| {
        (0..tq).all(|i| (0..tk).all(|j| keep(p * plane + i * tk + j) == (j <= i + (tk - tq))))
    })
}

/// Whether a float constant is an additive causal mask.
pub fn is_additive_causal(c: &ArrayD<f32>) -> bool {
    let flat: Vec<f32> = c.iter().copied().collect();
    flat.iter().all(|&v| v == 0.0 || v <= MASKED)
        && is_causal(c.shape(), |k| flat.get(k).is_some_and(|&v| v == 0.0))
}

/// Adds a `CausalMask` for `x` after checking the mask broadcasts onto it without enlarging it.
fn push_mask(
    imp: &mut Importer,
    node: &NodeView,
    x: ValueId,
    mask: &[usize],
) -> Result<Val, ModelError> {
    let xs = imp.shape(x);
    if broadcast(&xs, mask).ok().as_deref() != Some(&xs[..]) || xs.len() < 2 {
        return Err(node.err(format!(
            "causal mask {mask:?} does not broadcast onto the scores {xs:?}"
        )));
    }
    imp.push(node, Op::CausalMask, vec![x])
}

/// `Add(scores, mask)` with a constant causal mask (either side).
pub fn additive(
    imp: &mut Importer,
    node: &NodeView,
    x: ValueId,
    mask: &Const,
) -> Result<Val, ModelError> {
    push_mask(imp, node, x, mask.shape())
}

/// `Where(cond, X, Y)` (on constants it folds in [`crate::onnx::fold`]) with a condition known
/// at import: a causal `cond` choosing a run-time tensor where it holds and a constant ≤ −1e4
/// elsewhere (or the reverse with the negated condition) is a `CausalMask`, which follows the
/// bound sequence length; any other choice is an IR [`Where`] (the first input chosen where the
/// condition holds, the other a constant or a second run-time tensor), or the run-time tensor
/// itself when the condition chooses it everywhere without broadcasting it.
fn where_(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let Val::Const(cond) = imp.input(node, 0)? else {
        return Err(node.err(
            "a run-time condition is not supported (only one known at import: a constant or \
             computed from shapes and constants)",
        ));
    };
    let cond = cond.to_i64().mapv(|v| v != 0);
    match (imp.input(node, 1)?, imp.input(node, 2)?) {
        (Val::Const(_), Val::Const(_)) => {
            Err(node.err("internal: constant inputs reached the run-time handler"))
        }
        (Val::Tensor(x), Val::Const(fill)) => select_or_mask(imp, node, x, cond, fill),
        (Val::Const(fill), Val::Tensor(x)) => select_or_mask(imp, node, x, cond.mapv(|c| !c), fill),
        (Val::Tensor(a), Val::Tensor(b)) => {
            let op = Op::Where(Where {
                keep: cond,
                fill: None,
            });
            imp.push(node, op, vec![a, b])
        }
    }
}

/// `keep ? x : fill` of a run-time `x`: a `CausalMask` when `keep` is causal and `fill` a mask
/// value, `x` when `keep` holds everywhere and broadcasts nothing, else an IR [`Where`].
fn select_or_mask(
    imp: &mut Importer,
    node: &NodeView,
    x: ValueId,
    keep: ArrayD<bool>,
    fill: Const,
) -> Result<Val, ModelError> {
    let fill = fill.into_f32();
    let flat: Vec<bool> = keep.iter().copied().collect();
    let masks = !fill.is_empty() && fill.iter().all(|&v| v <= MASKED);
    if masks && is_causal(keep.shape(), |k| flat.get(k).copied().unwrap_or(false)) {
        return push_mask(imp, node, x, keep.shape());
    }
    let xs = imp.shape(x);
    let grows = |s: &[usize]| broadcast(&xs, s).ok().as_deref() != Some(&xs[..]);
    if flat.iter().all(|&k| k) && !grows(keep.shape()) && !grows(fill.shape()) {
        return Ok(Val::Tensor(x));
    }
    let op = Op::Where(Where {
        keep,
        fill: Some(fill),
    });
    imp.push(node, op, vec![x])
}

/// `Expand(X, shape)` of a run-time tensor (a constant folds in [`crate::onnx::fold`]): the
/// tensor itself when the target does not enlarge it, else a broadcasting `Mul` by ones.
fn expand(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let target: Vec<usize> = imp
        .constant(node, 1)?
        .ints()
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| node.err(format!("negative dimension {d}"))))
        .collect::<Result<_, _>>()?;
    let x = imp.tensor(node, 0)?;
    let xs = imp.shape(x).to_vec();
    let shape = broadcast(&xs, &target).map_err(|m| node.err(m))?;
    if shape == xs {
        return Ok(Val::Tensor(x));
    }
    // x · ones: ones only where x has to grow (its other axes are 1 here), so the
    // constant stays as small as the expansion itself is per sample
    let lead = shape.len() - xs.len();
    let ones: Vec<usize> = (0..shape.len())
        .map(|i| match i.checked_sub(lead).map(|j| xs[j]) {
            Some(d) if d == shape[i] => 1,
            _ => shape[i],
        })
        .collect();
    if crate::ir::shape::element_count(&ones).is_none_or(|n| n > 1 << 24) {
        return Err(node.err(format!(
            "expanding the run-time tensor {xs:?} to {shape:?} needs a constant too large"
        )));
    }
    let op = Op::Binary(Binary {
        kind: BinaryKind::Mul,
        constant: Some(ConstOperand {
            value: ArrayD::from_elem(IxDyn(&ones), 1.0),
            on_left: false,
        }),
    });
    imp.push(node, op, vec![x])
}

/// `c` with axis `axis` cut to size 1 when every slice along it is the same (a class token or
/// a mask expanded over the batch), else `None`.
pub fn collapsed(c: &ArrayD<f32>, axis: usize) -> Option<ArrayD<f32>> {
    let axis = Axis(axis);
    let first = (axis.0 < c.ndim() && c.len_of(axis) > 0).then(|| c.index_axis(axis, 0))?;
    c.axis_iter(axis)
        .all(|r| r == first)
        .then(|| first.to_owned().insert_axis(axis))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(t: usize, v: f32) -> ArrayD<f32> {
        ArrayD::from_shape_fn(IxDyn(&[t, t]), |i| if i[1] > i[0] { v } else { 0.0 })
    }

    #[test]
    fn causal_masks_are_recognised() {
        assert!(is_additive_causal(&mask(4, f32::NEG_INFINITY)));
        assert!(is_additive_causal(&mask(4, -1e9)));
        assert!(!is_additive_causal(&mask(4, -1.0)));
        // The transposed (anti-causal) mask is not.
        assert!(!is_additive_causal(
            &mask(4, f32::NEG_INFINITY).reversed_axes()
        ));
        // Broadcast over heads.
        let m = mask(3, f32::NEG_INFINITY).insert_axis(Axis(0));
        assert!(is_additive_causal(&m));
        assert!(!is_additive_causal(&ArrayD::zeros(IxDyn(&[3, 3]))));
    }
}
