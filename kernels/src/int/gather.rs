//! Im2col of byte codes: a one-group conv's patches gathered from an input of `u8` codes
//! (channels-last) straight into the rows [`super::fused::matmul_dequant`] reads, a quarter of
//! the traffic of gathering `f32` codes. Taps in the padding hold code 0.

use std::cell::RefCell;

use super::fused::row_stride;
use crate::conv::im2col::copy_run;
use crate::conv::Im2col;
use crate::error::{KernelError, Result};

/// Fills `col` with the patches of the samples in `x` (`samples · in_per_sample` codes): one
/// row of [`row_stride`]`(K)` bytes per output pixel, zero past `K`, and zeros after the last
/// row (the padding rows of [`super::fused::rows_len`]); and `sums` with each row's sum of
/// codes. An error unless the conv has one group and the sizes agree.
pub fn gather_codes(geo: &Im2col<'_>, x: &[u8], col: &mut [u8], sums: &mut [i64]) -> Result<()> {
    let spec = geo.spec;
    let c = spec.in_channels;
    let k = spec.k_per_group();
    let (stride, p, per) = (row_stride(k), geo.rows_per_sample(), geo.in_per_sample());
    let samples = x.len() / per.max(1);
    let rows = samples * p;
    if spec.groups != 1
        || samples * per != x.len()
        || col.len() < rows * stride
        || sums.len() != rows
    {
        return Err(KernelError::shape(
            "integer im2col",
            format!(
                "{} codes, {} column bytes and {} row sums for {p} rows of {k} taps per sample",
                x.len(),
                col.len(),
                sums.len()
            ),
        ));
    }
    let (col, rest) = col.split_at_mut(rows * stride);
    rest.fill(0);
    let mut pixel_sums = vec![0i64; geo.in_hw.0 * geo.in_hw.1];
    for ((cs, xs), ss) in col
        .chunks_mut(p * stride)
        .zip(x.chunks(per))
        .zip(sums.chunks_mut(p))
    {
        for (s, px) in pixel_sums.iter_mut().zip(xs.chunks_exact(c.max(1))) {
            *s = channel_sum(px);
        }
        if geo.rows_are_runs() {
            gather_runs(geo, xs, &pixel_sums, cs, ss);
        } else {
            let taps = spec.kernel[0] * spec.kernel[1];
            ss.fill(0);
            geo.for_each_tap(|t, at| {
                let (row, tap) = (t / taps, t % taps);
                let dst = &mut cs[row * stride + tap * c..][..c];
                match at {
                    Some(a) => {
                        copy_run(dst, &xs[a..a + c]);
                        ss[row] += pixel_sums[a / c.max(1)];
                    }
                    None => dst.fill(0),
                }
            });
        }
        if stride > k {
            cs.chunks_exact_mut(stride).for_each(|r| r[k..].fill(0));
        }
    }
    Ok(())
}

crate::simd::multiversion! {
/// One sample's [`gather_codes`] where [`Im2col::rows_are_runs`] holds: each kernel row of a
/// patch is one run of the input row it reads.
fn gather_runs(geo: &Im2col<'_>, xs: &[u8], pixel_sums: &[i64], cs: &mut [u8], ss: &mut [i64]) {
    let (w, c) = (geo.in_hw.1, geo.spec.in_channels);
    let (kh, kw) = (geo.spec.kernel[0], geo.spec.kernel[1]);
    let stride = row_stride(geo.spec.k_per_group());
    let run = kw * c;
    let cols = geo.run_columns();
    let mut rows = cs.chunks_exact_mut(stride).zip(ss.iter_mut());
    for oy in 0..geo.out_hw.0 {
        let input_rows: Vec<Option<usize>> = (0..kh).map(|ky| geo.input_row(oy, ky)).collect();
        for &(kx0, kx1, ix) in &cols {
            let Some((dst, sum)) = rows.next() else {
                return;
            };
            let mut total = 0;
            for (ky, iy) in input_rows.iter().enumerate() {
                let dst = &mut dst[ky * run..(ky + 1) * run];
                let Some(iy) = *iy else {
                    dst.fill(0);
                    continue;
                };
                let at = iy * w + ix;
                let len = kx1 - kx0;
                // (Fills of no bytes would still cost a call.)
                if kx0 > 0 {
                    dst[..kx0 * c].fill(0);
                }
                copy_run(&mut dst[kx0 * c..kx1 * c], &xs[at * c..(at + len) * c]);
                if kx1 < kw {
                    dst[kx1 * c..].fill(0);
                }
                total += pixel_sums[at..at + len].iter().sum::<i64>();
            }
            *sum = total;
        }
    }
}
}

/// `Σ x` of one pixel's byte codes.
#[inline(always)]
fn channel_sum(x: &[u8]) -> i64 {
    i64::from(x.iter().map(|&v| u32::from(v)).sum::<u32>())
}

thread_local! {
    /// Per-thread byte buffer reused across blocks and calls.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with a byte buffer of `len` (contents unspecified).
pub fn with_byte_scratch<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0);
            }
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![0; len]),
    })
}
