//! Element-wise loops over `f32` slices: sums, clamps with their gradient masks, and batch
//! norm's per-channel affine map, alone or as one pass (normalise, add, clamp). Channels are the
//! last axis: a slice holds whole rows of `c` values, one per channel. Each function is compiled
//! for AVX2 and for the baseline and picked at run time ([`crate::simd::multiversion!`]); the
//! arithmetic per element is the same on every path.

use std::mem::MaybeUninit;

/// `y = a + b` element-wise over slices of one length; returns `y`, now initialised.
pub fn add_into<'y>(a: &[f32], b: &[f32], y: &'y mut [MaybeUninit<f32>]) -> &'y mut [f32] {
    let n = y.len().min(a.len()).min(b.len());
    let y = &mut y[..n];
    add_slices(&a[..n], &b[..n], y);
    // SAFETY: `add_slices` wrote every element of `y`.
    unsafe { &mut *(y as *mut [MaybeUninit<f32>] as *mut [f32]) }
}

crate::simd::multiversion! {
    /// `y = a + b` element-wise (all three of one length).
    fn add_slices(a: &[f32], b: &[f32], y: &mut [MaybeUninit<f32>]) {
        for ((y, x), z) in y.iter_mut().zip(a).zip(b) {
            y.write(x + z);
        }
    }
}

crate::simd::multiversion! {
    /// `y ← y + other` element-wise (one length).
    pub fn add_in_place(y: &mut [f32], other: &[f32]) {
        y.iter_mut().zip(other).for_each(|(y, o)| *y += o);
    }
}

/// Whether a clamp to `[0, hi]` passes the gradient at `v` (the value before clamping):
/// `0 < v < hi`.
#[inline(always)]
pub fn clamp_passes(v: f32, hi: f32) -> bool {
    (v > 0.0) & (v < hi)
}

crate::simd::multiversion! {
    /// `x ← clamp(x, 0, hi)` element-wise.
    pub fn clamp_in_place(x: &mut [f32], hi: f32) {
        x.iter_mut().for_each(|v| *v = crate::simd::clamp(*v, 0.0, hi));
    }
}

crate::simd::multiversion! {
    /// `x ← clamp(x, 0, hi)` element-wise, writing into `pass` (as long as `x`, every flag
    /// written) where the gradient passes ([`clamp_passes`] before clamping).
    pub fn clamp_and_mark(x: &mut [f32], hi: f32, pass: &mut [MaybeUninit<bool>]) {
        for (v, p) in x.iter_mut().zip(pass) {
            p.write(clamp_passes(*v, hi));
            *v = crate::simd::clamp(*v, 0.0, hi);
        }
    }
}

crate::simd::multiversion! {
    /// Zeroes the gradient `g` where it does not pass (`pass` as long as `g`).
    pub fn mask(g: &mut [f32], pass: &[bool]) {
        g.iter_mut()
            .zip(pass)
            // `if p { g } else { +0.0 }` as a bit mask (no branch or blend).
            .for_each(|(g, &p)| *g = f32::from_bits(g.to_bits() & 0u32.wrapping_sub(u32::from(p))));
    }
}

/// `γ·((x − mean)·inv_std) + β` for channel `i` (`per_channel = [mean, inv_std, γ, β]`): batch
/// norm in evaluation, as [`normalize`] computes it.
#[inline(always)]
fn normalized(x: f32, i: usize, [mean, inv_std, gamma, beta]: [&[f32]; 4]) -> f32 {
    gamma[i] * ((x - mean[i]) * inv_std[i]) + beta[i]
}

crate::simd::multiversion! {
    /// `x̂ = (x − mean)·inv_std` and `y = γ·x̂ + β` for the rows of `xy`, `y` written over `x`,
    /// with `per_channel = [mean, inv_std, γ, β]`; `x̂` is stored only when asked for (training
    /// keeps it for backward), with the same arithmetic either way.
    pub fn normalize(xy: &mut [f32], xhat: Option<&mut [f32]>, per_channel: [&[f32]; 4]) {
        let [mean, inv_std, gamma, beta] = per_channel;
        let c = mean.len();
        let (inv_std, gamma, beta) = (&inv_std[..c], &gamma[..c], &beta[..c]);
        match xhat {
            Some(xhat) => {
                for (hr, r) in xhat.chunks_exact_mut(c).zip(xy.chunks_exact_mut(c)) {
                    for i in 0..c {
                        hr[i] = (r[i] - mean[i]) * inv_std[i];
                        r[i] = gamma[i] * hr[i] + beta[i];
                    }
                }
            }
            None => {
                let per_channel = [mean, inv_std, gamma, beta];
                for r in xy.chunks_exact_mut(c) {
                    for (i, v) in r.iter_mut().enumerate() {
                        *v = normalized(*v, i, per_channel);
                    }
                }
            }
        }
    }
}

crate::simd::multiversion! {
    /// Batch norm in evaluation, then `+ other` (when given) and `clamp(·, 0, hi)`, over whole
    /// rows of `xy` in one pass: per element the arithmetic of [`normalize`], [`add_in_place`]
    /// and [`clamp_in_place`] run one after another.
    pub fn normalize_add_clamp(
        xy: &mut [f32],
        per_channel: [&[f32]; 4],
        other: Option<&[f32]>,
        hi: f32,
    ) {
        let c = per_channel[0].len();
        // Each of length `c`, so the loops below index them without bounds checks.
        let per_channel = per_channel.map(|v| &v[..c]);
        let clamp = |v| crate::simd::clamp(v, 0.0, hi);
        match other {
            None => {
                for r in xy.chunks_exact_mut(c) {
                    for (i, v) in r.iter_mut().enumerate() {
                        *v = clamp(normalized(*v, i, per_channel));
                    }
                }
            }
            Some(other) => {
                for (r, o) in xy.chunks_exact_mut(c).zip(other.chunks_exact(c)) {
                    for (i, (v, o)) in r.iter_mut().zip(o).enumerate() {
                        *v = clamp(normalized(*v, i, per_channel) + o);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_pass_equals_its_steps_bit_for_bit() {
        let c = 3;
        let xs: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        let other: Vec<f32> = (0..24).map(|i| (i as f32 * 0.11).cos()).collect();
        let pc = [
            vec![0.1, -0.2, 0.3],
            vec![1.5, 0.5, 2.0],
            vec![1.0, -1.0, 0.5],
            vec![0.0, 0.2, -0.1],
        ];
        let pc = pc.each_ref().map(|v| v.as_slice());
        for hi in [f32::INFINITY, 6.0] {
            let mut steps = xs.clone();
            normalize(&mut steps, None, pc);
            add_in_place(&mut steps, &other);
            clamp_in_place(&mut steps, hi);
            let mut one = xs.clone();
            normalize_add_clamp(&mut one, pc, Some(&other), hi);
            assert_eq!(steps, one);
        }
        assert_eq!(c, pc[0].len());
    }

    #[test]
    fn clamps_mark_where_the_gradient_passes_and_masks_zero_the_rest() {
        let mut x = vec![-1.0, 0.0, 3.0, 7.0];
        let mut pass = vec![MaybeUninit::uninit(); 4];
        clamp_and_mark(&mut x, 6.0, &mut pass);
        // SAFETY: `clamp_and_mark` wrote every flag.
        let pass: Vec<bool> = pass.iter().map(|p| unsafe { p.assume_init() }).collect();
        assert_eq!(x, [0.0, 0.0, 3.0, 6.0]);
        assert_eq!(pass, [false, false, true, false]);
        let mut g = vec![-2.0, 1.0, 5.0, 1.0];
        mask(&mut g, &pass);
        assert_eq!(g.map_bits(), [0, 0, 5.0f32.to_bits(), 0]);
        let mut y = vec![MaybeUninit::uninit(); 4];
        assert_eq!(
            add_into(&[1.0, 2.0, 3.0, 4.0], &x, &mut y),
            [1.0, 2.0, 6.0, 10.0]
        );
    }

    trait Bits {
        fn map_bits(&self) -> Vec<u32>;
    }

    impl Bits for Vec<f32> {
        fn map_bits(&self) -> Vec<u32> {
            self.iter().map(|v| v.to_bits()).collect()
        }
    }
}
