//! Element-indexed ops shared by the import-time evaluator and the engine's layers: running
//! sums along one axis (ONNX `CumSum`), the source offsets of a `GatherElements` and the block
//! reads of a [`Gather`](crate::ir::Gather) with their adjoint, a scatter-add.

use ndarray::{ArrayD, Axis};

/// `a` summed in place along `axis`: element `i` becomes the sum of elements `0..=i` (`..i`
/// when `exclusive`; counted from the end when `reverse`). `axis` must be below `a`'s rank.
pub fn cumsum<T: Copy + Default + std::ops::Add<Output = T>>(
    a: &mut ArrayD<T>,
    axis: usize,
    exclusive: bool,
    reverse: bool,
) {
    for mut lane in a.lanes_mut(Axis(axis)) {
        let n = lane.len();
        let mut acc = T::default();
        for step in 0..n {
            let i = if reverse { n - 1 - step } else { step };
            let v = lane[i];
            lane[i] = if exclusive { acc } else { acc + v };
            acc = acc + v;
        }
    }
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1]);
    }
    s
}

/// The flat offsets into `data` (shape `dims`, row-major) that `GatherElements` along `axis`
/// reads for `indices` of shape `ishape` (row-major, negative counting from the end): for each
/// index, its own coordinates with the one on `axis` replaced by the index; an axis where `dims`
/// has size 1 reads coordinate 0. An error names an index out of range or shapes that do not
/// fit (ranks differ, or an index axis longer than a data axis of size > 1).
pub fn gather_offsets(
    dims: &[usize],
    axis: usize,
    ishape: &[usize],
    indices: impl Iterator<Item = i64>,
) -> Result<Vec<usize>, String> {
    crate::ir::rules::layout::gather_elements(dims, axis, ishape)?;
    let (ds, is) = (strides(dims), strides(ishape));
    let n = dims[axis];
    let mut out = Vec::with_capacity(ishape.iter().product());
    for (flat, i) in indices.enumerate() {
        let j = if i < 0 {
            i.checked_add(n as i64)
        } else {
            Some(i)
        };
        let j = j
            .and_then(|j| usize::try_from(j).ok())
            .filter(|&j| j < n)
            .ok_or_else(|| format!("index {i} out of range for axis {axis} of length {n}"))?;
        let mut off = 0;
        for k in 0..dims.len() {
            let c = if k == axis {
                j
            } else if dims[k] == 1 {
                0
            } else {
                (flat / is[k]) % ishape[k]
            };
            off += c * ds[k];
        }
        out.push(off);
    }
    Ok(out)
}

/// The elements of `x` (row-major, `outer · block · inner` of them) at `positions` of its
/// middle axis of length `block`: for each of the `outer` leading rows, the `inner` elements
/// of each position in turn. `None` when the sizes do not fit or a position is outside.
pub fn gather_block<T: Copy>(
    x: &[T],
    outer: usize,
    block: usize,
    inner: usize,
    positions: &[usize],
) -> Option<Vec<T>> {
    if outer.checked_mul(block)?.checked_mul(inner)? != x.len()
        || positions.iter().any(|&p| p >= block)
    {
        return None;
    }
    let mut out = Vec::with_capacity(outer * positions.len() * inner);
    for o in 0..outer {
        for &p in positions {
            let at = (o * block + p) * inner;
            out.extend_from_slice(&x[at..at + inner]);
        }
    }
    Some(out)
}

/// The adjoint of [`gather_block`]: `g` (shaped as its output) summed into a zero tensor of
/// `outer · block · inner` elements at the positions read, in a fixed order (a position read
/// twice gets both gradients). `None` when the sizes do not fit.
pub fn scatter_block_add(
    g: &[f32],
    outer: usize,
    block: usize,
    inner: usize,
    positions: &[usize],
) -> Option<Vec<f32>> {
    if outer.checked_mul(positions.len())?.checked_mul(inner)? != g.len()
        || positions.iter().any(|&p| p >= block)
    {
        return None;
    }
    let mut dx = vec![0.0; outer * block * inner];
    let mut src = g.chunks_exact(inner.max(1));
    for o in 0..outer {
        for &p in positions {
            let at = (o * block + p) * inner;
            for (d, &v) in dx[at..at + inner].iter_mut().zip(src.next()?) {
                *d += v;
            }
        }
    }
    Some(dx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    #[test]
    fn sums_run_along_the_axis_either_way() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1, 2, 3, 4, 5, 6]).unwrap();
        let run = |ex, rev| {
            let mut b = a.clone();
            cumsum(&mut b, 1, ex, rev);
            b.iter().copied().collect::<Vec<i64>>()
        };
        assert_eq!(run(false, false), [1, 3, 6, 4, 9, 15]);
        assert_eq!(run(true, false), [0, 1, 3, 0, 4, 9]);
        assert_eq!(run(false, true), [6, 5, 3, 15, 11, 6]);
        assert_eq!(run(true, true), [5, 3, 0, 11, 6, 0]);
    }

    #[test]
    fn gather_offsets_read_along_the_axis_and_broadcast_size_one_axes() {
        // data [2, 3] gathered along axis 1 at [[2, 0], [-1, 1]]
        let o = gather_offsets(&[2, 3], 1, &[2, 2], [2, 0, -1, 1].into_iter()).unwrap();
        assert_eq!(o, [2, 0, 5, 4]);
        // a [1, 3] buffer read for a batch of 3: every row reads row 0
        let o = gather_offsets(&[1, 3], 1, &[3, 1], [1, 2, 0].into_iter()).unwrap();
        assert_eq!(o, [1, 2, 0]);
        let e = gather_offsets(&[2, 3], 1, &[2, 1], [3, 0].into_iter()).unwrap_err();
        assert!(
            e.contains("index 3 out of range for axis 1 of length 3"),
            "{e}"
        );
        let e = gather_offsets(&[2, 3], 1, &[4, 1], [0; 4].into_iter()).unwrap_err();
        assert!(e.contains("do not fit"), "{e}");
    }

    #[test]
    fn block_reads_and_their_adjoint_sum_repeated_positions() {
        // x [2, 3, 2]: two rows, a block of 3, 2 inner elements; read positions 2, 0, 2
        let x: Vec<i32> = (0..12).collect();
        let y = gather_block(&x, 2, 3, 2, &[2, 0, 2]).unwrap();
        assert_eq!(y, [4, 5, 0, 1, 4, 5, 10, 11, 6, 7, 10, 11]);
        let g: Vec<f32> = (1..=12).map(|v| v as f32).collect();
        let dx = scatter_block_add(&g, 2, 3, 2, &[2, 0, 2]).unwrap();
        assert_eq!(
            dx,
            [3.0, 4.0, 0.0, 0.0, 6.0, 8.0, 9.0, 10.0, 0.0, 0.0, 18.0, 20.0]
        );
        assert!(gather_block(&x, 2, 3, 2, &[3]).is_none());
        assert!(gather_block(&x, 2, 2, 2, &[0]).is_none());
        assert!(scatter_block_add(&g, 2, 3, 2, &[0]).is_none());
    }
}
