//! A reshape target resolved for one batch, rebound for the batch a layer sees at run time.
//!
//! An exported `Reshape` carries its target as numbers: `[2, 2, 24, 8, 8]` for a channel
//! shuffle traced at batch 2, `[T, 2·12, 64]` for attention heads, `[2, 768, 16]` for a ViT's
//! patches. The network is built at one batch, but it runs at others: the evaluation batch, a
//! short last batch, evaluation in pieces, a `forward` input. [`rebatch`] finds which target axis
//! holds the batch by element-count arithmetic: the input axis whose size changed is the batch,
//! and the target axis whose row-major span covers the batch's span in it (strides `Q` to `Q·N`)
//! is the one that scales with it. That axis gets the new batch; the others stay.

/// The product of `dims` (the checked caller ensures no overflow on resolved shapes).
fn count(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// The target for input shape `now` of a reshape built as `built_in` → `built_out` at batch
/// `batch`: `built_out` with the axis that carries the batch scaled to the batch `now` has.
/// `now` must differ from `built_in` in exactly one axis, which holds the batch, alone or merged
/// with a fixed factor (`[N·heads]`, `[T·N]`). `stride`, when known ([`super::batch_axes`]), is
/// the row-major stride of one step of the batch in the input, which tells where the batch sits
/// in a merged axis (`[N·windows]` or `[windows·N]`); without it both are tried. An error says
/// why the target cannot be rebound unambiguously (a batch split across target axes, or an axis
/// that could be the batch or a factor of the same size).
pub fn rebatch(
    built_in: &[usize],
    built_out: &[usize],
    batch: usize,
    stride: Option<usize>,
    now: &[usize],
) -> Result<Vec<usize>, String> {
    let built = format!("built as {built_in:?} → {built_out:?} at batch {batch}");
    if now.len() != built_in.len() {
        return Err(format!(
            "input {now:?} has rank {}, the layer was {built}",
            now.len()
        ));
    }
    let changed: Vec<usize> = (0..now.len()).filter(|&i| now[i] != built_in[i]).collect();
    let &[p] = changed.as_slice() else {
        return Err(format!(
            "input {now:?} differs from the built input in axes {changed:?}, not in one batch \
             axis (the layer was {built})"
        ));
    };
    // Axis p holds the batch times k (k = 1: the batch alone; k = heads: `[N·heads]`).
    let (n, m) = (built_in[p], now[p]);
    let k = match n.checked_div(batch) {
        Some(k) if k > 0 && n % batch == 0 && m % k == 0 => k,
        _ => {
            return Err(format!(
                "input axis {p} changed from {n} to {now_p}, which is not the batch times a \
                 fixed factor (the layer was {built})",
                now_p = m
            ))
        }
    };
    let b = m / k;
    let too_large = || format!("input {now:?} is too large");
    let inner = count(&built_in[p + 1..]).ok_or_else(too_large)?;
    // Where the batch may sit in axis p: alone (k = 1), or as the outer factor (`[N·heads]`,
    // strides from inner·k) or the inner one (`[T·N]`, strides from inner) of a merged axis.
    let mut placements = vec![inner.checked_mul(k).ok_or_else(too_large)?];
    if k > 1 {
        placements.push(inner);
    }
    // A known stride that fits axis p (a multiple of its inner span, by a factor dividing k)
    // is the one placement.
    if let Some(q) = stride.filter(|&q| inner != 0 && q % inner == 0 && k % (q / inner) == 0) {
        placements = vec![q];
    }
    let mut found: Vec<(usize, bool)> = Vec::new();
    for q in placements {
        for a in covering_axes(built_out, q, batch, p).ok_or_else(too_large)? {
            found.push((a, built_out[a] == batch));
        }
    }
    found.sort_unstable();
    found.dedup();
    // A merged axis read both ways: the reading whose target axis is exactly the batch.
    if found.len() > 1 && found.iter().filter(|f| f.1).count() == 1 {
        found.retain(|f| f.1);
    }
    match found.as_slice() {
        [(a, _)] => {
            let mut out = built_out.to_vec();
            out[*a] = (built_out[*a] / batch)
                .checked_mul(b)
                .ok_or_else(too_large)?;
            Ok(out)
        }
        [] => Err(format!(
            "the batch (in axis {p} of the input, {n} when built, {m} now) is split across the \
             target's axes (the layer was {built})"
        )),
        many => Err(format!(
            "the batch (in axis {p} of the input, {n} when built, {m} now) could be target axis \
             {:?} (the layer was {built})",
            many.iter().map(|f| f.0).collect::<Vec<_>>()
        )),
    }
}

/// The axes of `out` whose row-major span covers a batch of `batch` at stride `q` (strides
/// `[q, q·batch)`); at a batch of 1, which spans nothing, the one axis that is exactly the batch
/// (or, of several, the one at the input's batch position `p`) when there is one. `None` on
/// overflow.
pub(crate) fn covering_axes(out: &[usize], q: usize, batch: usize, p: usize) -> Option<Vec<usize>> {
    let qn = q.checked_mul(batch)?;
    let mut axes = Vec::new();
    for a in 0..out.len() {
        let s = count(&out[a + 1..])?;
        let span = s.checked_mul(out[a])?;
        if s != 0 && q % s == 0 && qn != 0 && span % qn == 0 {
            axes.push(a);
        }
    }
    if batch == 1 && axes.len() > 1 {
        let exact: Vec<usize> = axes
            .iter()
            .copied()
            .filter(|&a| out[a] == 1 && count(&out[a + 1..]) == Some(q))
            .collect();
        return Some(match exact.as_slice() {
            [_] => exact,
            _ if exact.contains(&p) => vec![p],
            _ => axes,
        });
    }
    Some(axes)
}

#[cfg(test)]
mod tests {
    use super::rebatch;

    #[test]
    fn a_channel_shuffle_follows_the_batch() {
        // ShuffleNetV2's `x.view(n, 2, c / 2, h, w)` of a flattened [n, c·h·w] image
        let (from, to) = ([2, 3072], [2, 2, 24, 8, 8]);
        assert_eq!(
            rebatch(&from, &to, 2, None, &[1, 3072]),
            Ok(vec![1, 2, 24, 8, 8])
        );
        assert_eq!(
            rebatch(&from, &to, 2, None, &[500, 3072]),
            Ok(vec![500, 2, 24, 8, 8])
        );
        // built at batch 1: the leading 1 is the batch, not the group axis of 2
        let to1 = [1, 2, 24, 8, 8];
        assert_eq!(
            rebatch(&[1, 3072], &to1, 1, None, &[7, 3072]),
            Ok(vec![7, 2, 24, 8, 8])
        );
    }

    #[test]
    fn attention_heads_merged_with_the_batch_scale_with_it() {
        // legacy nn.MultiheadAttention: [T, B, E] → [T, B·h, d] and back [T·B, E]
        let (from, to) = ([17, 2, 768], [17, 24, 64]);
        assert_eq!(
            rebatch(&from, &to, 2, None, &[17, 500, 768]),
            Ok(vec![17, 6000, 64])
        );
        assert_eq!(
            rebatch(&[34, 768], &[17, 2, 768], 2, None, &[8500, 768]),
            Ok(vec![17, 500, 768])
        );
        // batch-first heads [B, T, E] → [B, T, h, d], and a ViT's patches [B, 768·16] → [B, 768, 16]
        assert_eq!(
            rebatch(&[2, 5, 128], &[2, 5, 4, 32], 2, None, &[3, 5, 128]),
            Ok(vec![3, 5, 4, 32])
        );
        assert_eq!(
            rebatch(&[2, 12288], &[2, 768, 16], 2, None, &[500, 12288]),
            Ok(vec![500, 768, 16])
        );
        // heads split off a merged [N·heads, T, d] (batch outer): [2·4, 16, 2] → [2, 4, 16, 2]
        assert_eq!(
            rebatch(&[8, 16, 2], &[2, 4, 16, 2], 2, None, &[12, 16, 2]),
            Ok(vec![3, 4, 16, 2])
        );
        // legacy attention's [T·N, E] back to [T, N, E] (batch inner)
        assert_eq!(
            rebatch(&[32, 8], &[16, 2, 8], 2, None, &[48, 8]),
            Ok(vec![16, 3, 8])
        );
        // ... and merged back: [2, 2, 16, 4] → [4, 16, 4]
        assert_eq!(
            rebatch(&[2, 2, 16, 4], &[4, 16, 4], 2, None, &[7, 2, 16, 4]),
            Ok(vec![14, 16, 4])
        );
    }

    #[test]
    fn a_known_batch_stride_tells_the_batch_from_a_factor_of_its_size() {
        // Swin's window merge at batch 2 with 2×2 windows: [2·4, 64, 96] → [2, 2, 2, 8, 8, 96]
        // (B, H/8, W/8, 8, 8, C); axes 0 and 2 both hold 2, only the stride (batch outer, one
        // step = 4 windows of 64·96) tells axis 0
        let (from, to) = ([8, 64, 96], [2, 2, 2, 8, 8, 96]);
        let e = rebatch(&from, &to, 2, None, &[4, 64, 96]).unwrap_err();
        assert!(e.contains("could be target axis [0, 2]"), "{e}");
        let q = 4 * 64 * 96;
        assert_eq!(
            rebatch(&from, &to, 2, Some(q), &[4, 64, 96]),
            Ok(vec![1, 2, 2, 8, 8, 96])
        );
        assert_eq!(
            rebatch(&from, &to, 2, Some(q), &[40, 64, 96]),
            Ok(vec![10, 2, 2, 8, 8, 96])
        );
        // as many heads as the batch: the stride picks [N, heads] or [heads, N]
        let (from, to) = ([4, 16, 4], [2, 2, 16, 4]);
        assert_eq!(
            rebatch(&from, &to, 2, Some(128), &[6, 16, 4]),
            Ok(vec![3, 2, 16, 4])
        );
        assert_eq!(
            rebatch(&from, &to, 2, Some(64), &[6, 16, 4]),
            Ok(vec![2, 3, 16, 4])
        );
        // a stride that does not fit the changed axis is not used
        assert!(rebatch(&from, &to, 2, Some(3), &[6, 16, 4]).is_err());
    }

    #[test]
    fn a_target_that_splits_the_batch_is_refused_with_both_shapes() {
        // [4, 6] → [2, 12] puts half the batch in each row: no batch axis to rebind
        let e = rebatch(&[4, 6], &[2, 12], 4, None, &[6, 6]).unwrap_err();
        assert!(e.contains("split") && e.contains("[4, 6] → [2, 12]"), "{e}");
        let e = rebatch(&[4, 6], &[4, 6], 4, None, &[5, 7]).unwrap_err();
        assert!(e.contains("axes [0, 1]"), "{e}");
        let e = rebatch(&[4, 6], &[24], 4, None, &[4, 6, 1]).unwrap_err();
        assert!(e.contains("rank 3"), "{e}");
        // as many heads as the batch: [2·2] could be [N, heads] or [heads, N]
        let e = rebatch(&[4, 16, 4], &[2, 2, 16, 4], 2, None, &[6, 16, 4]).unwrap_err();
        assert!(e.contains("could be target axis [0, 1]"), "{e}");
        // an axis of 4·k at batch 4 that now holds 6 is not the batch times k
        let e = rebatch(&[8, 3], &[24], 4, None, &[5, 3]).unwrap_err();
        assert!(e.contains("not the batch times a fixed factor"), "{e}");
        // built at batch 1, the batch merged away: [3, b, 4] could be [3·b, 4] or [3, 4·b]
        let e = rebatch(&[3, 1, 4], &[3, 4], 1, None, &[3, 2, 4]).unwrap_err();
        assert!(e.contains("could be target axis [0, 1]"), "{e}");
        // ... but an unsqueeze at batch 1 keeps the batch where the input had it
        assert_eq!(
            rebatch(&[1, 4], &[1, 1, 4], 1, None, &[2, 4]),
            Ok(vec![2, 1, 4])
        );
    }
}
