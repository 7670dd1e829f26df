//! The im2col geometry of a convolution: which input pixel each (output position, kernel tap)
//! reads, the padded copy the GEMM reads patches from in place, and the gather / scatter of
//! patch columns for the convs that cannot be read in place.

use std::mem::MaybeUninit;

use super::Conv2dSpec;
use crate::error::{KernelError, Result};
use crate::gemm::{block_samples, PatchGeometry, Patches};

/// Geometry of one im2col transform.
pub struct Im2col<'a> {
    pub spec: &'a Conv2dSpec,
    pub in_hw: (usize, usize),
    pub out_hw: (usize, usize),
}

impl Im2col<'_> {
    /// The geometry of the transposed conv `t` (`cptsim_nn`'s `transposed_spec`): from this conv's
    /// output back to its input.
    pub fn transposed<'t>(&self, t: &'t Conv2dSpec) -> Im2col<'t> {
        Im2col {
            spec: t,
            in_hw: self.out_hw,
            out_hw: self.in_hw,
        }
    }

    /// For each (output position, kernel tap) the input pixel it reads, or `None` in the padding.
    pub fn source(&self, oy: usize, ox: usize, ky: usize, kx: usize) -> Option<(usize, usize)> {
        let sp = self.spec;
        let iy = (oy * sp.stride[0] + ky * sp.dilation[0]).checked_sub(sp.pads[0])?;
        let ix = (ox * sp.stride[1] + kx * sp.dilation[1]).checked_sub(sp.pads[1])?;
        (iy < self.in_hw.0 && ix < self.in_hw.1).then_some((iy, ix))
    }

    pub fn in_per_sample(&self) -> usize {
        self.in_hw.0 * self.in_hw.1 * self.spec.in_channels
    }

    pub fn rows_per_sample(&self) -> usize {
        self.out_hw.0 * self.out_hw.1
    }

    /// Samples per work block ([`block_samples`]).
    pub fn samples_per_block(&self) -> usize {
        block_samples(self.rows_per_sample())
    }

    /// Visits every (row of a sample, kernel tap) with the input offset it reads (or `None`).
    #[inline(always)]
    pub fn for_each_tap(&self, mut f: impl FnMut(usize, Option<usize>)) {
        let (w, c) = (self.in_hw.1, self.spec.in_channels);
        let mut t = 0;
        for oy in 0..self.out_hw.0 {
            for ox in 0..self.out_hw.1 {
                for ky in 0..self.spec.kernel[0] {
                    for kx in 0..self.spec.kernel[1] {
                        f(
                            t,
                            self.source(oy, ox, ky, kx)
                                .map(|(iy, ix)| (iy * w + ix) * c),
                        );
                        t += 1;
                    }
                }
            }
        }
    }

    /// True when the column matrix of a block is its input as it lies (a 1×1 kernel at stride 1,
    /// no padding, one group: channels-last rows are the patches), so no im2col is needed.
    pub fn input_is_columns(&self) -> bool {
        let sp = self.spec;
        sp.kernel == [1, 1] && sp.stride == [1, 1] && sp.pads == [0; 4] && sp.groups == 1
    }

    /// True when the kernel columns of one kernel row read consecutive input pixels whose
    /// channels are all in the patch (one group, no horizontal dilation): each row of taps is then
    /// one contiguous run in both the input and the column matrix.
    pub fn rows_are_runs(&self) -> bool {
        self.spec.groups == 1 && self.spec.dilation[1] == 1
    }

    /// Per output column: its valid kernel columns `kx0..kx1` (the others are in the horizontal
    /// padding) and the input column that kernel column `kx0` reads (0 for an empty run).
    pub fn run_columns(&self) -> Vec<(usize, usize, usize)> {
        let sp = self.spec;
        let (w, kw) = (self.in_hw.1, sp.kernel[1]);
        (0..self.out_hw.1)
            .map(|ox| {
                let left = ox * sp.stride[1];
                let kx0 = sp.pads[1].saturating_sub(left).min(kw);
                let kx1 = (w + sp.pads[1]).saturating_sub(left).min(kw).max(kx0);
                // A non-empty run has `left + kx0 ≥ pad`.
                let ix = if kx0 < kx1 {
                    left + kx0 - sp.pads[1]
                } else {
                    0
                };
                (kx0, kx1, ix)
            })
            .collect()
    }

    /// The input row that kernel row `ky` of output row `oy` reads, or `None` in the padding.
    #[inline(always)]
    pub fn input_row(&self, oy: usize, ky: usize) -> Option<usize> {
        let sp = self.spec;
        (oy * sp.stride[0] + ky * sp.dilation[0])
            .checked_sub(sp.pads[0])
            .filter(|&iy| iy < self.in_hw.0)
    }

    /// Visits every (row of a sample, kernel row) with the index of its first tap and, unless
    /// the kernel row lies in the vertical padding, the valid kernel columns `kx0..kx1` and the
    /// input offset of tap `kx0`. Only for geometries where [`Self::rows_are_runs`] holds.
    #[inline(always)]
    pub fn for_each_run(&self, mut f: impl FnMut(usize, Option<(usize, usize, usize)>)) {
        let (w, c) = (self.in_hw.1, self.spec.in_channels);
        let (kh, kw) = (self.spec.kernel[0], self.spec.kernel[1]);
        let cols = self.run_columns();
        let mut t = 0;
        for oy in 0..self.out_hw.0 {
            for &(kx0, kx1, ix) in &cols {
                for ky in 0..kh {
                    f(
                        t,
                        self.input_row(oy, ky)
                            .map(|iy| (kx0, kx1, (iy * w + ix) * c)),
                    );
                    t += kw;
                }
            }
        }
    }

    /// Height and width of an input with the spec's padding added.
    pub fn padded_hw(&self) -> (usize, usize) {
        let p = self.spec.pads;
        (self.in_hw.0 + p[0] + p[2], self.in_hw.1 + p[1] + p[3])
    }

    /// Floats of one padded sample, or `None` when that overflows.
    pub fn padded_per_sample(&self) -> Option<usize> {
        let (hp, wp) = self.padded_hw();
        hp.checked_mul(wp)?.checked_mul(self.spec.in_channels)
    }

    /// The scratch [`Self::patches`] needs for `samples` samples: none without padding.
    pub fn patch_scratch(&self, layer: &str, samples: usize) -> Result<usize> {
        if self.spec.pads == [0; 4] {
            return Ok(0);
        }
        self.padded_per_sample()
            .and_then(|per| per.checked_mul(samples))
            .ok_or_else(|| KernelError::shape(layer, "padded input size overflows"))
    }

    /// True when the forward GEMM and the weight gradient read the patches in place: one group
    /// (not depthwise), runs of kernel rows, and a kernel that is not pointwise at stride 1 (whose
    /// columns are the input itself).
    pub fn reads_patches(&self) -> bool {
        !self.input_is_columns() && self.rows_are_runs()
    }

    /// The patches of the samples in `x` as the GEMM reads them in place (see
    /// [`Self::reads_patches`]): from `x` itself when there is no padding, else from a padded
    /// copy in `scratch` (`samples` × [`Self::padded_per_sample`] floats, all overwritten).
    pub fn patches<'a>(
        &self,
        layer: &str,
        x: &'a [f32],
        scratch: &'a mut [f32],
    ) -> Result<Patches<'a>> {
        if self.spec.pads == [0; 4] {
            return self.patches_of(layer, x);
        }
        let len = self.patch_scratch(layer, x.len() / self.in_per_sample().max(1))?;
        let scratch = scratch
            .get_mut(..len)
            .ok_or_else(|| KernelError::shape(layer, "padded input does not fit its buffer"))?;
        // SAFETY: `MaybeUninit<f32>` has the layout of `f32`, and `pad_into` writes only
        // initialised values.
        let out = unsafe { &mut *(std::ptr::from_mut(scratch) as *mut [MaybeUninit<f32>]) };
        let padded = self.pad_into(layer, x, out)?;
        self.patches_of(layer, padded)
    }

    /// The patches of `input`: the samples as they lie when the spec has no padding, else
    /// already padded (as [`Self::pad_into`] writes them).
    pub fn patches_of<'a>(&self, layer: &str, input: &'a [f32]) -> Result<Patches<'a>> {
        let sp = self.spec;
        let per = if sp.pads == [0; 4] {
            self.in_per_sample()
        } else {
            self.padded_per_sample().unwrap_or(0)
        };
        let geometry = PatchGeometry {
            padded: {
                let (hp, wp) = self.padded_hw();
                [hp, wp, sp.in_channels]
            },
            out: self.out_hw,
            kernel: (sp.kernel[0], sp.kernel[1]),
            stride: (sp.stride[0], sp.stride[1]),
            dilation_y: sp.dilation[0],
        };
        Patches::new(input, input.len() / per.max(1), geometry)
            .map_err(|e| KernelError::shape(layer, e.to_string()))
    }

    /// Writes the samples of `x` with the spec's zero padding around each into `out`, which must
    /// hold exactly as many padded samples ([`Self::padded_per_sample`] floats each), and
    /// returns it, every value written.
    pub fn pad_into<'o>(
        &self,
        layer: &str,
        x: &[f32],
        out: &'o mut [MaybeUninit<f32>],
    ) -> Result<&'o mut [f32]> {
        let sp = self.spec;
        let (w, c) = (self.in_hw.1, sp.in_channels);
        let wp = self.padded_hw().1;
        let (per_in, per_out) = (self.in_per_sample(), self.padded_per_sample().unwrap_or(0));
        let samples = x.len() / per_in.max(1);
        if per_in == 0
            || per_out == 0
            || !x.len().is_multiple_of(per_in)
            || Some(out.len()) != samples.checked_mul(per_out)
        {
            return Err(KernelError::shape(
                layer,
                "padded input does not fit its buffer",
            ));
        }
        let zero = MaybeUninit::new(0.0);
        let (top, left, right) = (sp.pads[0] * wp * c, sp.pads[1] * c, sp.pads[3] * c);
        for (ps, xs) in out.chunks_exact_mut(per_out).zip(x.chunks_exact(per_in)) {
            let (head, rest) = ps.split_at_mut(top);
            head.fill(zero);
            let mut rows = rest.chunks_exact_mut(wp * c);
            // The input rows first: `zip` stops on them without taking a padding row.
            for (src, row) in xs.chunks_exact(w * c).zip(&mut rows) {
                row[..left].fill(zero);
                for (d, &v) in row[left..left + w * c].iter_mut().zip(src) {
                    d.write(v);
                }
                row[wp * c - right..].fill(zero);
            }
            rows.for_each(|row| row.fill(zero));
        }
        // SAFETY: each padded sample is its top rows, one row per input row (left padding, the
        // row, right padding) and its bottom rows, which tile it; the samples tile `out`.
        Ok(unsafe { &mut *(std::ptr::from_mut(out) as *mut [f32]) })
    }

    /// Fills `col` `[samples·OH·OW, K]` with the group-`g` patches of the samples in `x`.
    pub fn gather(&self, x: &[f32], g: usize, col: &mut [f32]) {
        gather_kernel(self, x, g, col);
    }

    /// Adds the group-`g` columns `dcol` back into `dx` (the same samples as `gather`).
    pub fn scatter_add(&self, dcol: &[f32], g: usize, dx: &mut [f32]) {
        scatter_add_kernel(self, dcol, g, dx);
    }
}

crate::simd::multiversion! {
    /// The body of [`Im2col::gather`].
    pub fn gather_kernel(geo: &Im2col<'_>, x: &[f32], g: usize, col: &mut [f32]) {
        let cpg = geo.spec.in_channels / geo.spec.groups;
        let taps = geo.rows_per_sample() * geo.spec.kernel[0] * geo.spec.kernel[1];
        for (cs, xs) in col
            .chunks_mut(taps * cpg)
            .zip(x.chunks(geo.in_per_sample()))
        {
            if geo.rows_are_runs() {
                gather_runs(geo, xs, cs);
                continue;
            }
            geo.for_each_tap(|t, at| {
                let dst = &mut cs[t * cpg..(t + 1) * cpg];
                match at {
                    Some(a) => copy_run(dst, &xs[a + g * cpg..a + (g + 1) * cpg]),
                    None => dst.fill(0.0),
                }
            });
        }
    }
}

/// One sample's [`Im2col::gather`] where [`Im2col::rows_are_runs`] holds: each kernel row of a
/// patch is one run of the input row it reads (zeros where it overhangs the padding).
#[inline(always)]
fn gather_runs(geo: &Im2col<'_>, xs: &[f32], cs: &mut [f32]) {
    let (w, c) = (geo.in_hw.1, geo.spec.in_channels);
    let (kh, kw) = (geo.spec.kernel[0], geo.spec.kernel[1]);
    let run = kw * c;
    let cols = geo.run_columns();
    for (oy, patches) in cs.chunks_exact_mut(cols.len() * kh * run).enumerate() {
        for (&(kx0, kx1, ix), patch) in cols.iter().zip(patches.chunks_exact_mut(kh * run)) {
            for (ky, dst) in patch.chunks_exact_mut(run).enumerate() {
                let Some(iy) = geo.input_row(oy, ky) else {
                    dst.fill(0.0);
                    continue;
                };
                let src = &xs[(iy * w + ix) * c..][..(kx1 - kx0) * c];
                if kx0 == 0 && kx1 == kw {
                    copy_run(dst, src);
                } else {
                    dst[..kx0 * c].fill(0.0);
                    copy_run(&mut dst[kx0 * c..kx1 * c], src);
                    dst[kx1 * c..].fill(0.0);
                }
            }
        }
    }
}

/// `dst.copy_from_slice(src)` for the short runs of a gather (tens to hundreds of values) as
/// inline moves of 16 values: a `memcpy` call per run costs more than the copy itself.
#[inline(always)]
pub(crate) fn copy_run<T: Copy>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len());
    let (d, s, n) = (dst.as_mut_ptr(), src.as_ptr(), dst.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `i + 16 ≤ n`, the length of both slices, which cannot overlap (one is `&mut`).
        unsafe { std::ptr::copy_nonoverlapping(s.add(i), d.add(i), 16) };
        // An empty statement with side effects, so that LLVM does not turn the loop back into a
        // `memcpy` call.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("", options(nomem, nostack, preserves_flags))
        };
        i += 16;
    }
    if i < n {
        dst[i..].copy_from_slice(&src[i..]);
    }
}

crate::simd::multiversion! {
    /// The body of [`Im2col::scatter_add`].
    pub fn scatter_add_kernel(geo: &Im2col<'_>, dcol: &[f32], g: usize, dx: &mut [f32]) {
        let cpg = geo.spec.in_channels / geo.spec.groups;
        let taps = geo.rows_per_sample() * geo.spec.kernel[0] * geo.spec.kernel[1];
        for (cs, xs) in dcol
            .chunks(taps * cpg)
            .zip(dx.chunks_mut(geo.in_per_sample()))
        {
            if geo.rows_are_runs() {
                // Same additions in the same order as the per-tap loop below: within one run
                // every tap writes different input pixels.
                geo.for_each_run(|t, run| {
                    if let Some((a, b, at)) = run {
                        let src = &cs[(t + a) * cpg..(t + b) * cpg];
                        let dst = &mut xs[at..at + (b - a) * cpg];
                        dst.iter_mut().zip(src).for_each(|(d, v)| *d += v);
                    }
                });
                continue;
            }
            geo.for_each_tap(|t, at| {
                if let Some(a) = at {
                    let src = &cs[t * cpg..(t + 1) * cpg];
                    let dst = &mut xs[a + g * cpg..a + (g + 1) * cpg];
                    dst.iter_mut().zip(src).for_each(|(d, v)| *d += v);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;

    use ndarray::ArrayView2;

    use super::*;
    use crate::conv::testing::output_hw;
    use crate::gemm::{matmul_patches_t_uninit, matmul_patches_uninit, matmul_uninit};
    use cptsim_testdata::rand_tensor;

    /// The per-tap im2col of one group (the general path), as the reference for the run path.
    fn gather_per_tap(geo: &Im2col, x: &[f32]) -> Vec<f32> {
        let c = geo.spec.in_channels;
        let taps = geo.rows_per_sample() * geo.spec.kernel[0] * geo.spec.kernel[1];
        let mut col = Vec::new();
        for xs in x.chunks(geo.in_per_sample()) {
            let start = col.len();
            col.resize(start + taps * c, f32::NAN);
            geo.for_each_tap(|t, at| {
                let dst = &mut col[start + t * c..start + (t + 1) * c];
                match at {
                    Some(a) => dst.copy_from_slice(&xs[a..a + c]),
                    None => dst.fill(0.0),
                }
            });
        }
        col
    }

    #[test]
    fn row_runs_equal_the_per_tap_im2col_and_its_scatter() {
        let mut cases = vec![
            Conv2dSpec::square(3, 4, 3, 1, 1),
            Conv2dSpec::square(5, 4, 3, 2, 1),
            Conv2dSpec::square(2, 4, 1, 2, 0),
            Conv2dSpec::square(2, 2, 5, 1, 4),
            Conv2dSpec::square(2, 2, 2, 3, 0),
            Conv2dSpec::square(3, 4, 1, 1, 0),
            // 360 terms: the GEMM's 256-term blocks end inside a kernel row.
            Conv2dSpec::square(40, 4, 3, 1, 1),
        ];
        let mut odd = Conv2dSpec::square(3, 2, 3, 2, 1);
        odd.pads = [0, 7, 2, 1];
        odd.kernel = [2, 4];
        odd.dilation = [2, 1];
        cases.push(odd);
        for (i, sp) in cases.into_iter().enumerate() {
            let (h, w) = (7, 6);
            let Some(out_hw) = output_hw(&sp, h, w) else {
                continue;
            };
            let geo = Im2col {
                spec: &sp,
                in_hw: (h, w),
                out_hw,
            };
            assert!(geo.rows_are_runs());
            let x = rand_tensor(&[2, h, w, sp.in_channels], 1.0, 90 + i as u64);
            let x = x.as_slice().unwrap();
            let want = gather_per_tap(&geo, x);
            let mut col = vec![f32::NAN; want.len()];
            geo.gather(x, 0, &mut col);
            assert_eq!(col, want, "{sp:?}");
            // The layer skips im2col exactly when it would copy the input unchanged.
            assert_eq!(geo.input_is_columns(), col == x, "{sp:?}");

            // The product reading the patches in place (from a padded copy whose stale NaNs
            // must all be overwritten) is the gathered product, bit for bit, over 2 panels.
            let (k, o) = (sp.k_per_group(), 20);
            let wt = rand_tensor(&[k, o], 1.0, 180 + i as u64);
            let wv = ArrayView2::from_shape((k, o), wt.as_slice().unwrap()).unwrap();
            let rows = col.len() / k;
            let colv = ArrayView2::from_shape((rows, k), &col[..]).unwrap();
            let mut y = vec![MaybeUninit::uninit(); rows * o];
            let gathered = matmul_uninit(&mut y, colv, wv).unwrap().to_vec();
            let mut buf = vec![f32::NAN; 2 * geo.padded_per_sample().unwrap()];
            let patches = geo.patches("t", x, &mut buf).unwrap();
            let mut y = vec![MaybeUninit::uninit(); rows * o];
            let in_place = matmul_patches_uninit(&mut y, &patches, wv).unwrap();
            assert_eq!(in_place, &gathered[..], "{sp:?}");
            // So is the weight gradient's Pᵀ·g, against the gathered colᵀ·g.
            let g = rand_tensor(&[rows, o], 1.0, 210 + i as u64);
            let gv = ArrayView2::from_shape((rows, o), g.as_slice().unwrap()).unwrap();
            let mut dw = vec![MaybeUninit::uninit(); k * o];
            let gathered = matmul_uninit(&mut dw, colv.t(), gv).unwrap().to_vec();
            let mut dw = vec![MaybeUninit::uninit(); k * o];
            let in_place = matmul_patches_t_uninit(&mut dw, &patches, gv).unwrap();
            assert_eq!(in_place, &gathered[..], "{sp:?} transposed");

            // Scatter: the run path adds in the same order as the per-tap path, so bit-equal.
            let dcol = rand_tensor(&[want.len()], 1.0, 120 + i as u64);
            let dcol = dcol.as_slice().unwrap();
            let mut dx = rand_tensor(&[x.len()], 1.0, 150 + i as u64)
                .into_raw_vec_and_offset()
                .0;
            let mut dx_ref = dx.clone();
            geo.scatter_add(dcol, 0, &mut dx);
            let c = sp.in_channels;
            let taps = want.len() / 2 / c;
            for (cs, xs) in dcol
                .chunks(taps * c)
                .zip(dx_ref.chunks_mut(geo.in_per_sample()))
            {
                geo.for_each_tap(|t, at| {
                    if let Some(a) = at {
                        for k in 0..c {
                            xs[a + k] += cs[t * c + k];
                        }
                    }
                });
            }
            assert_eq!(dx, dx_ref, "{sp:?}");
        }
    }
}
