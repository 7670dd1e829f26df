//! Depthwise convolution (one input channel per group, multiplier 1): a direct loop over the
//! kernel taps, with no im2col and no GEMM.

use super::im2col::Im2col;

impl Im2col<'_> {
    /// Depthwise forward (one input channel per group, multiplier 1) for the samples in `x`:
    /// `y[pos, c] = Σ_taps x[src, c]·w[tap, c]` with weights `w` laid out `[taps, C]`.
    pub fn depthwise_forward(&self, x: &[f32], w: &[f32], y: &mut [f32]) {
        forward_kernel(self, x, w, y);
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
    /// The body of [`Im2col::depthwise_forward`] (compiled for AVX2 too: the same multiplies
    /// and adds, in the same order, in wider vectors).
    fn forward_kernel(geo: &Im2col<'_>, x: &[f32], w: &[f32], y: &mut [f32]) {
        let c = geo.spec.in_channels;
        let taps = geo.spec.kernel[0] * geo.spec.kernel[1];
        let rows = geo.rows_per_sample();
        for (ys, xs) in y.chunks_mut(rows * c).zip(x.chunks(geo.in_per_sample())) {
            ys.fill(0.0);
            geo.for_each_tap(|t, at| {
                if let Some(a) = at {
                    let (row, tap) = (t / taps, t % taps);
                    let out = &mut ys[row * c..(row + 1) * c];
                    let (xr, wr) = (&xs[a..a + c], &w[tap * c..(tap + 1) * c]);
                    for ((o, &xv), &wv) in out.iter_mut().zip(xr).zip(wr) {
                        *o += xv * wv;
                    }
                }
            });
        }
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
