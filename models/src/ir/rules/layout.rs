//! Ops that move or select elements without parameters to check (`ReduceMean`, `Flatten`,
//! `Reshape`, `Concat`, `Slice`, `Pad`, `Transpose`, `Softmax`, `CausalMask`) and the two that
//! add learned rows (`ClassToken`, `PositionEmbedding`). Each rule is a function of the op's
//! fields and the input shape(s).

use ndarray::ArrayD;

use super::check_axes;
use crate::ir::op::SliceAxis;
use crate::ir::shape::element_count;

/// `ReduceMean` over `axes`: each reduced axis becomes 1 (`keepdims`) or goes.
pub fn reduce_mean(axes: &[usize], keepdims: bool, x: &[usize]) -> Result<Vec<usize>, String> {
    check_axes(axes, x.len())?;
    let mut s = Vec::with_capacity(x.len());
    for (i, &d) in x.iter().enumerate() {
        if !axes.contains(&i) {
            s.push(d);
        } else if keepdims {
            s.push(1);
        }
    }
    Ok(s)
}

/// `Resize` to `shape`: same rank, batch and channels as the input.
pub fn resize(shape: &[usize], x: &[usize]) -> Result<Vec<usize>, String> {
    if shape.len() != x.len() || x.len() < 3 || shape[..2] != x[..2] {
        return Err(format!(
            "cannot resize {x:?} to {shape:?} (only the axes after batch and channels change)"
        ));
    }
    Ok(shape.to_vec())
}

/// `CumSum` along `axis`: the input's shape.
pub fn cumsum(axis: usize, x: &[usize]) -> Result<Vec<usize>, String> {
    if axis >= x.len() {
        return Err(format!("axis {axis} out of range for input {x:?}"));
    }
    Ok(x.to_vec())
}

/// `GatherElements` of `data` along `axis` at indices of shape `x`: the indices' shape, same
/// rank as `data`; on every other axis `data` has size 1 or at least the indices' size.
pub fn gather_elements(data: &[usize], axis: usize, x: &[usize]) -> Result<Vec<usize>, String> {
    let fits = data.len() == x.len()
        && axis < x.len()
        && (0..x.len()).all(|a| a == axis || data[a] == 1 || data[a] >= x[a]);
    if !fits {
        return Err(format!(
            "indices {x:?} do not fit data {data:?} gathered along axis {axis} (same rank; \
             other axes of data of size 1 or at least as long)"
        ));
    }
    Ok(x.to_vec())
}

/// `Flatten` at `axis`: `[d0·…·d(axis−1), d(axis)·…·dn]`.
pub fn flatten(axis: usize, x: &[usize]) -> Result<Vec<usize>, String> {
    if axis > x.len() {
        return Err(format!("axis {axis} out of range for input {x:?}"));
    }
    Ok(vec![x[..axis].iter().product(), x[axis..].iter().product()])
}

/// `Reshape` to `shape`, which must hold as many elements as the input.
pub fn reshape(shape: &[usize], x: &[usize]) -> Result<Vec<usize>, String> {
    let a = x.iter().product::<usize>();
    let b = element_count(shape).ok_or_else(|| format!("reshape target {shape:?} is too large"))?;
    if a != b {
        return Err(format!(
            "cannot reshape {x:?} ({a} elements) to {shape:?} ({b} elements)"
        ));
    }
    Ok(shape.to_vec())
}

/// `Concat` along `axis`: every input has the first one's shape off that axis.
pub fn concat(inputs: &[&[usize]], axis: usize) -> Result<Vec<usize>, String> {
    let first = inputs[0];
    if axis >= first.len() {
        return Err(format!("axis {axis} out of range for {first:?}"));
    }
    let mut out = first.to_vec();
    for s in &inputs[1..] {
        let same_rest = s.len() == first.len()
            && s.iter()
                .zip(first)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !same_rest {
            return Err(format!(
                "cannot concatenate {first:?} and {s:?} along axis {axis}"
            ));
        }
        out[axis] += s[axis];
    }
    Ok(out)
}

/// `Slice`: each selection must stay inside its axis.
pub fn slice(axes: &[SliceAxis], x: &[usize]) -> Result<Vec<usize>, String> {
    let mut s = x.to_vec();
    for a in axes {
        let d = *s
            .get(a.axis)
            .ok_or_else(|| format!("slice axis {} out of range for {x:?}", a.axis))?;
        let last = a.start as i64 + (a.len as i64 - 1) * a.step;
        if a.len > 0 && (a.start >= d || last < 0 || last >= d as i64) {
            return Err(format!("slice on axis {} leaves the input {x:?}", a.axis));
        }
        s[a.axis] = a.len;
    }
    Ok(s)
}

/// `Pad`: one `(before, after)` pair per input axis.
pub fn pad(pads: &[(usize, usize)], x: &[usize]) -> Result<Vec<usize>, String> {
    if pads.len() != x.len() {
        return Err(format!("{} pad pairs for input {x:?}", pads.len()));
    }
    Ok(x.iter().zip(pads).map(|(d, (b, a))| d + b + a).collect())
}

/// `Transpose` by `perm`, which must permute the input's axes.
pub fn transpose(perm: &[usize], x: &[usize]) -> Result<Vec<usize>, String> {
    let mut seen = vec![false; x.len()];
    if perm.len() != x.len()
        || perm
            .iter()
            .any(|&p| p >= x.len() || std::mem::replace(&mut seen[p], true))
    {
        return Err(format!(
            "perm {perm:?} is not a permutation of the axes of {x:?}"
        ));
    }
    Ok(perm.iter().map(|&p| x[p]).collect())
}

/// `Softmax` along `axis`: the input's shape.
pub fn softmax(axis: usize, x: &[usize]) -> Result<Vec<usize>, String> {
    check_axes(&[axis], x.len())?;
    Ok(x.to_vec())
}

/// `CausalMask` on scores `[.., Tq, Tk]` with `Tq ≤ Tk`.
pub fn causal_mask(x: &[usize]) -> Result<Vec<usize>, String> {
    match x {
        [.., tq, tk] if tq <= tk => Ok(x.to_vec()),
        _ => Err(format!(
            "causal mask needs scores [.., Tq, Tk] with Tq ≤ Tk, got {x:?}"
        )),
    }
}

/// `ClassToken`: `[B, N, D] → [B, N + 1, D]` for a token `[D]`.
pub fn class_token(token: &ArrayD<f32>, x: &[usize]) -> Result<Vec<usize>, String> {
    match x {
        [b, n, d] if token.shape() == [*d] => Ok(vec![*b, n + 1, *d]),
        _ => Err(format!(
            "class token {:?} does not fit input {x:?} (needs [B, N, D] and token [D])",
            token.shape()
        )),
    }
}

/// `PositionEmbedding` of a `[T_max, D]` table on `axis`: the input's shape, for at most
/// `T_max` positions and a last axis of `D`.
pub fn position_embedding(
    table: &ArrayD<f32>,
    axis: usize,
    x: &[usize],
) -> Result<Vec<usize>, String> {
    let (t, d) = match table.shape() {
        [t, d] => (*t, *d),
        s => return Err(format!("position table {s:?} must be [T_max, D]")),
    };
    let len = x.get(axis).copied();
    if x.last() != Some(&d) || axis + 1 >= x.len() {
        return Err(format!(
            "position table [{t}, {d}] on axis {axis} does not fit input {x:?}"
        ));
    }
    if let Some(len) = len.filter(|&l| l > t) {
        return Err(format!(
            "a sequence of {len} positions is longer than the model's {t} learned positions (a fixed-length export)"
        ));
    }
    Ok(x.to_vec())
}
