//! Depthwise convolution (one input channel per group, multiplier 1): a direct loop over the
//! kernel taps, with no im2col and no GEMM.

use std::mem::MaybeUninit;
use std::ops::Range;

use super::im2col::Im2col;

/// Channels the forward loop keeps in registers at once (eight AVX2 vectors).
const WIDE: usize = 64;

/// Channels of one AVX2 vector: the forward loop's smallest vector step after the [`WIDE`] runs.
const LANES: usize = 8;

impl Im2col<'_> {
    /// Depthwise forward (one input channel per group, multiplier 1) for the samples in `x`:
    /// `y[pos, c] = Σ_taps x[src, c]·w[tap, c]` (then `+ bias[c]`) with weights `w` laid out
    /// `[taps, C]`; every value of `y` is written. Returns `y`, now initialised.
    pub fn depthwise_forward<'y>(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        y: &'y mut [MaybeUninit<f32>],
    ) -> &'y mut [f32] {
        let rows = y.len() / self.spec.in_channels.max(1);
        self.depthwise_forward_rows(x, w, bias, 0..rows, y)
    }

    /// [`Im2col::depthwise_forward`] of output rows `rows` alone (rows of the samples in `x`, in
    /// order: row `r` is pixel `r % OH·OW` of sample `r / OH·OW`) into `y`, `rows.len() × C`
    /// values. Each value is `0 + x·w` over the taps in order, then the bias: the same
    /// operations, in the same order, whatever the rows.
    pub fn depthwise_forward_rows<'y>(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        rows: Range<usize>,
        y: &'y mut [MaybeUninit<f32>],
    ) -> &'y mut [f32] {
        self.depthwise_forward_window(x, 0, w, bias, rows, y)
    }

    /// [`Im2col::depthwise_forward_rows`] of one sample whose input `x` holds its rows from
    /// `first_row` on: output pixels `rows` of that sample, whose taps read none of the rows
    /// before (a window of an input computed a few rows at a time). With `first_row` 0, `x` may
    /// hold several samples, as for [`Im2col::depthwise_forward_rows`]. The same operations on
    /// each value whatever the window.
    pub fn depthwise_forward_window<'y>(
        &self,
        x: &[f32],
        first_row: usize,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: Range<usize>,
        y: &'y mut [MaybeUninit<f32>],
    ) -> &'y mut [f32] {
        let c = self.spec.in_channels;
        let y = &mut y[..rows.len() * c];
        let skip = first_row * self.in_hw.1 * c;
        forward_kernel(self, x, skip, w, bias, rows, y);
        // SAFETY: `forward_kernel` wrote every value of `y` (`MaybeUninit<f32>` has the layout
        // of `f32`).
        unsafe { &mut *(std::ptr::from_mut(y) as *mut [f32]) }
    }

    /// Depthwise backward for the samples in `x` / `g`: adds into `dx` and into the weight
    /// gradient `dw` laid out `[taps, C]`.
    pub fn depthwise_backward(
        &self,
        x: &[f32],
        g: &[f32],
        w: &[f32],
        dx: &mut [f32],
        dw: &mut [f32],
    ) {
        backward_kernel(self, x, g, w, dx, dw);
    }
}

crate::simd::multiversion! {
    /// The body of [`Im2col::depthwise_forward_rows`] (compiled for AVX2 too: the same
    /// multiplies and adds, in the same order, in wider vectors). Per output pixel, its valid
    /// taps, then each run of channels summed over them in registers and stored once.
    fn forward_kernel(
        geo: &Im2col<'_>,
        x: &[f32],
        skip: usize,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: Range<usize>,
        y: &mut [MaybeUninit<f32>],
    ) {
        // `x` starts `skip` values into its (first) sample.
        let c = geo.spec.in_channels;
        let [kh, kw] = geo.spec.kernel;
        let (ow, in_w) = (geo.out_hw.1, geo.in_hw.1);
        let (per_sample, per_in) = (geo.rows_per_sample().max(1), geo.in_per_sample());
        let (sp, in_h) = (geo.spec, geo.in_hw.0);
        // The taps of a pixel whose window lies inside the input, every one valid, as
        // (weight offset, input offset from the window's first pixel): the same taps in the
        // same order as the border pixels' own lists, without working them out per pixel.
        let mut inner = Vec::with_capacity(kh * kw);
        for ky in 0..kh {
            for kx in 0..kw {
                let at = ky * sp.dilation[0] * in_w + kx * sp.dilation[1];
                inner.push(((ky * kw + kx) * c, at * c));
            }
        }
        let span_y = kh.saturating_sub(1) * sp.dilation[0];
        let span_x = kw.saturating_sub(1) * sp.dilation[1];
        // (weight offset, input offset) of each valid tap of a border pixel.
        let mut border = Vec::with_capacity(kh * kw);
        for (row, out) in rows.zip(y.chunks_exact_mut(c.max(1))) {
            let (s, pixel) = (row / per_sample, row % per_sample);
            let xs = &x[(s * per_in).min(x.len())..];
            let (oy, ox) = (pixel / ow, pixel % ow);
            let first = (oy * sp.stride[0]).checked_sub(sp.pads[0]).zip(
                (ox * sp.stride[1]).checked_sub(sp.pads[1]),
            );
            let (taps, base) = match first {
                Some((iy, ix)) if iy + span_y < in_h && ix + span_x < in_w => {
                    (inner.as_slice(), (iy * in_w + ix) * c - skip)
                }
                _ => {
                    border.clear();
                    for ky in 0..kh {
                        for kx in 0..kw {
                            if let Some((iy, ix)) = geo.source(oy, ox, ky, kx) {
                                border.push(((ky * kw + kx) * c, (iy * in_w + ix) * c - skip));
                            }
                        }
                    }
                    (border.as_slice(), 0)
                }
            };
            let xs = &xs[base..];
            let mut ch = 0;
            while ch + WIDE <= c {
                channels::<WIDE>(taps, xs, w, bias, ch, out);
                ch += WIDE;
            }
            // The rest in one run of 32, 16 and 8 channels at most each (independent sums, not
            // one vector's chain after another: 96, 144 or 240 channels leave 32, 16 or 48).
            if ch + 4 * LANES <= c {
                channels::<{ 4 * LANES }>(taps, xs, w, bias, ch, out);
                ch += 4 * LANES;
            }
            if ch + 2 * LANES <= c {
                channels::<{ 2 * LANES }>(taps, xs, w, bias, ch, out);
                ch += 2 * LANES;
            }
            if ch + LANES <= c {
                channels::<LANES>(taps, xs, w, bias, ch, out);
                ch += LANES;
            }
            while ch < c {
                channels::<1>(taps, xs, w, bias, ch, out);
                ch += 1;
            }
        }
    }
}

/// Channels `ch..ch + W` of one output pixel: `0 + x·w` over `taps` in order, then the bias,
/// kept in registers and written to `out` (the pixel's `C` values) once.
#[inline(always)]
fn channels<const W: usize>(
    taps: &[(usize, usize)],
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    ch: usize,
    out: &mut [MaybeUninit<f32>],
) {
    let mut acc = [0.0f32; W];
    for &(wo, xo) in taps {
        let xr = &x[xo + ch..xo + ch + W];
        let wr = &w[wo + ch..wo + ch + W];
        for k in 0..W {
            acc[k] += xr[k] * wr[k];
        }
    }
    if let Some(b) = bias {
        let br = &b[ch..ch + W];
        for k in 0..W {
            acc[k] += br[k];
        }
    }
    for (o, v) in out[ch..ch + W].iter_mut().zip(acc) {
        o.write(v);
    }
}

crate::simd::multiversion! {
    /// The body of [`Im2col::depthwise_backward`].
    fn backward_kernel(
        geo: &Im2col<'_>,
        x: &[f32],
        g: &[f32],
        w: &[f32],
        dx: &mut [f32],
        dw: &mut [f32],
    ) {
        let c = geo.spec.in_channels;
        let taps = geo.spec.kernel[0] * geo.spec.kernel[1];
        let (rows, per_in) = (geo.rows_per_sample(), geo.in_per_sample());
        for ((gs, xs), dxs) in g
            .chunks(rows * c)
            .zip(x.chunks(per_in))
            .zip(dx.chunks_mut(per_in))
        {
            geo.for_each_tap(|t, at| {
                if let Some(a) = at {
                    let (row, tap) = (t / taps, t % taps);
                    let gr = &gs[row * c..(row + 1) * c];
                    let (xr, wr) = (&xs[a..a + c], &w[tap * c..(tap + 1) * c]);
                    let dwr = &mut dw[tap * c..(tap + 1) * c];
                    for ((d, &gv), &xv) in dwr.iter_mut().zip(gr).zip(xr) {
                        *d += gv * xv;
                    }
                    let dxr = &mut dxs[a..a + c];
                    for ((d, &gv), &wv) in dxr.iter_mut().zip(gr).zip(wr) {
                        *d += gv * wv;
                    }
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;

    use super::super::{Conv2dSpec, Im2col};

    /// Values in `[-1, 1)` from a fixed linear congruential sequence.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// The forward pass tap by tap into a zeroed output, then the bias: the order the kernel
    /// must keep.
    fn reference(geo: &Im2col<'_>, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
        let c = geo.spec.in_channels;
        let taps = geo.spec.kernel[0] * geo.spec.kernel[1];
        let rows = geo.rows_per_sample();
        let mut y = vec![0.0f32; x.len() / geo.in_per_sample() * rows * c];
        for (ys, xs) in y.chunks_mut(rows * c).zip(x.chunks(geo.in_per_sample())) {
            geo.for_each_tap(|t, at| {
                if let Some(a) = at {
                    let (row, tap) = (t / taps, t % taps);
                    for ch in 0..c {
                        ys[row * c + ch] += xs[a + ch] * w[tap * c + ch];
                    }
                }
            });
        }
        for row in y.chunks_mut(c) {
            row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
        }
        y
    }

    #[test]
    fn forward_matches_tap_order_on_any_rows() {
        // 75 channels: a run of 64, one of 8 and three single ones; stride 2 and padding.
        for (k, stride, pad) in [(3, 1, 1), (3, 2, 1), (5, 2, 2)] {
            let c = 75;
            let mut spec = Conv2dSpec::square(c, c, k, stride, pad);
            spec.groups = c;
            let (n, h, w) = (3, 9, 7);
            let out_hw = (
                (h + 2 * pad - k) / stride + 1,
                (w + 2 * pad - k) / stride + 1,
            );
            let geo = Im2col {
                spec: &spec,
                in_hw: (h, w),
                out_hw,
            };
            let x = values(n * h * w * c, 1);
            let wt = values(k * k * c, 2);
            let bias = values(c, 3);
            let want = reference(&geo, &x, &wt, &bias);
            let mut y = vec![MaybeUninit::uninit(); want.len()];
            let got = geo.depthwise_forward(&x, &wt, Some(&bias), &mut y).to_vec();
            assert_eq!(got, want, "k {k} stride {stride}");
            // Rows across a sample boundary, in parts of 5.
            let rows = want.len() / c;
            for start in (0..rows).step_by(5) {
                let r = start..(start + 5).min(rows);
                let mut part = vec![MaybeUninit::uninit(); r.len() * c];
                let got = geo.depthwise_forward_rows(&x, &wt, Some(&bias), r.clone(), &mut part);
                assert_eq!(got, &want[r.start * c..r.end * c]);
            }
        }
    }
}
