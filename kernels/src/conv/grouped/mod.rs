//! Grouped convolution with a few channels per group (ResNeXt's and RegNet's 3×3 convs: 4–64
//! channels a group): a direct loop over the kernel taps of the (padded) input that keeps a
//! block of output pixels of one group in registers, instead of one im2col gather and one GEMM
//! of a few columns per group.
//!
//! Each output is the same chain of fused multiply-adds, in the same (tap, input channel) order
//! from zero, as the GEMM of the im2col columns computes it (the padding's zeros included), so
//! the two give bit-identical results.

use std::mem::MaybeUninit;

use ndarray::ArrayView2;

use super::im2col::Im2col;
use super::with_scratch;
use crate::error::{KernelError, Result};

/// Output pixels of one block for a run of `N` output channels: 8 or 4 vector accumulators.
const fn pixels(n: usize) -> usize {
    if n >= 16 {
        4
    } else {
        8
    }
}

impl Im2col<'_> {
    /// True for the convs [`Self::grouped_forward`] runs: more than one group and not depthwise.
    pub fn grouped_direct(&self) -> bool {
        self.spec.groups > 1 && !self.spec.is_depthwise()
    }

    /// The weights `w` `[O, taps·I/groups]` (row by output channel, columns in (tap, input
    /// channel) order) as [`Self::grouped_forward`] reads them: `[groups, taps, I/groups,
    /// O/groups]`.
    pub fn grouped_weights(&self, w: ArrayView2<f32>) -> Vec<f32> {
        let sp = self.spec;
        let (groups, kg) = (sp.groups, sp.k_per_group());
        let opg = sp.out_channels / groups;
        let mut out = Vec::with_capacity(sp.out_channels * kg);
        for g in 0..groups {
            for k in 0..kg {
                out.extend((0..opg).map(|co| w[[g * opg + co, k]]));
            }
        }
        out
    }

    /// Grouped forward of the samples in `x` `[samples, H, W, C]`: `w` from
    /// [`Self::grouped_weights`], `y` `[samples·OH·OW, O]` all overwritten. The input is read
    /// from a padded copy in this thread's scratch when the spec pads.
    pub fn grouped_forward(&self, layer: &str, x: &[f32], w: &[f32], y: &mut [f32]) -> Result<()> {
        let samples = x.len() / self.in_per_sample().max(1);
        let want = samples
            .checked_mul(self.rows_per_sample())
            .and_then(|r| r.checked_mul(self.spec.out_channels));
        if want != Some(y.len()) || w.len() != self.spec.out_channels * self.spec.k_per_group() {
            return Err(KernelError::shape(
                layer,
                "grouped conv operands do not fit its geometry",
            ));
        }
        if self.spec.pads == [0; 4] {
            grouped_kernel(self, x, w, y);
            return Ok(());
        }
        let len = self.patch_scratch(layer, samples)?;
        with_scratch(len, 0, |buf, _| {
            // SAFETY: `MaybeUninit<f32>` has the layout of `f32`, and `pad_into` writes only
            // initialised values.
            let out = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [MaybeUninit<f32>]) };
            let padded = self.pad_into(layer, x, out)?;
            grouped_kernel(self, padded, w, y);
            Ok(())
        })
    }
}

crate::simd::multiversion! {
    /// The body of [`Im2col::grouped_forward`]: each group's output channels in runs of 16, 8, 4,
    /// 2 and 1, each run by [`run`].
    fn grouped_kernel(geo: &Im2col<'_>, p: &[f32], w: &[f32], y: &mut [f32]) {
        let opg = geo.spec.out_channels / geo.spec.groups;
        let mut co = 0;
        while co < opg {
            let left = opg - co;
            co += if left >= 16 {
                run::<16, { pixels(16) }>(geo, p, w, y, co)
            } else if left >= 8 {
                run::<8, { pixels(8) }>(geo, p, w, y, co)
            } else if left >= 4 {
                run::<4, { pixels(4) }>(geo, p, w, y, co)
            } else if left >= 2 {
                run::<2, { pixels(2) }>(geo, p, w, y, co)
            } else {
                run::<1, { pixels(1) }>(geo, p, w, y, co)
            };
        }
    }
}

/// The `N` output channels from `co0` of every group, for every output pixel: blocks of `P`
/// pixels along a row, then single pixels. Returns `N`.
#[inline(always)]
fn run<const N: usize, const P: usize>(
    geo: &Im2col<'_>,
    p: &[f32],
    w: &[f32],
    y: &mut [f32],
    co0: usize,
) -> usize {
    let sp = geo.spec;
    let (oh, ow) = geo.out_hw;
    let (hp, wp) = geo.padded_hw();
    let (c, o, groups) = (sp.in_channels, sp.out_channels, sp.groups);
    let per_in = hp * wp * c;
    let per_out = oh * ow * o;
    if per_in == 0 || per_out == 0 {
        return N;
    }
    let wlen = sp.k_per_group() * (o / groups);
    for (ps, ys) in p.chunks_exact(per_in).zip(y.chunks_exact_mut(per_out)) {
        for oy in 0..oh {
            let mut ox = 0;
            while ox + P <= ow {
                for g in 0..groups {
                    block::<N, P>(geo, ps, &w[g * wlen..(g + 1) * wlen], ys, (oy, ox), g, co0);
                }
                ox += P;
            }
            while ox < ow {
                for g in 0..groups {
                    block::<N, 1>(geo, ps, &w[g * wlen..(g + 1) * wlen], ys, (oy, ox), g, co0);
                }
                ox += 1;
            }
        }
    }
    N
}

/// Output channels `co0..co0 + N` of group `g` at the `P` output pixels from `(oy, ox)` along
/// the row: one accumulator per (pixel, channel), through every tap and input channel of the
/// group in the GEMM's reduction order.
#[inline(always)]
fn block<const N: usize, const P: usize>(
    geo: &Im2col<'_>,
    ps: &[f32],
    wg: &[f32],
    ys: &mut [f32],
    (oy, ox): (usize, usize),
    g: usize,
    co0: usize,
) {
    let sp = geo.spec;
    let (c, o) = (sp.in_channels, sp.out_channels);
    let (ipg, opg) = (c / sp.groups, o / sp.groups);
    let wp = geo.padded_hw().1;
    let [kh, kw] = sp.kernel;
    let mut acc = [[0.0f32; N]; P];
    let mut wv = [0.0f32; N];
    for ky in 0..kh {
        let iy = oy * sp.stride[0] + ky * sp.dilation[0];
        for kx in 0..kw {
            let tap = ky * kw + kx;
            let first = (iy * wp + ox * sp.stride[1] + kx * sp.dilation[1]) * c + g * ipg;
            let step = sp.stride[1] * c;
            let taps = &wg[tap * ipg * opg..(tap + 1) * ipg * opg];
            for ci in 0..ipg {
                wv.copy_from_slice(&taps[ci * opg + co0..ci * opg + co0 + N]);
                for (j, a) in acc.iter_mut().enumerate() {
                    let xv = ps[first + j * step + ci];
                    for (a, &wk) in a.iter_mut().zip(&wv) {
                        *a = xv.mul_add(wk, *a);
                    }
                }
            }
        }
    }
    for (j, a) in acc.iter().enumerate() {
        let at = ((oy * geo.out_hw.1 + ox + j) * o) + g * opg + co0;
        ys[at..at + N].copy_from_slice(a);
    }
}

#[cfg(test)]
mod tests;
