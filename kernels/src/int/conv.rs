//! A one-group conv's forward product on byte codes with its patches read in place: the block's
//! input codes (channels-last) are copied once into a zero-padded image, and each tile's kernel
//! reads every kernel tap of its output pixels from there (one run of `C / 4` steps per tap), so
//! no patch matrix is built. Row `i`'s sum of codes is the sum of its taps' pixel sums. The
//! integer sums are those of [`super::gather_codes`] then [`super::matmul_dequant`] (padded
//! taps hold code 0), so the values are bit-identical.

use std::mem::MaybeUninit;

use super::fused::{dequantized_product, Dequant, Left, PackedB};
use super::pack::STEP_BYTES;
use super::Accumulator;
use crate::conv::Im2col;
use crate::error::{KernelError, Result};

/// Whether [`conv_dequant_uninit`] reads `geo`'s patches in place for weights `b` (else
/// gather them): one group, a kernel of at least one tap, whole 4-byte steps per pixel (`C` a
/// multiple of 4), `b` in the byte form with its reduction `K = KH·KW·C` and short enough for
/// one kernel call per tile.
pub fn reads_codes_in_place(geo: &Im2col<'_>, b: &PackedB) -> bool {
    let sp = geo.spec;
    sp.groups == 1
        && sp.kernel[0] > 0
        && sp.kernel[1] > 0
        && b.dim().0 == sp.k_per_group()
        && b.reads_pixels_of(sp.in_channels)
}

/// `out = dequant(patches(x)·B)` (row-major `[samples·OH·OW, n]`, written whole) for the
/// samples of byte codes in `x`, as [`super::matmul_dequant`] of the gathered patches gives it;
/// an error unless [`reads_codes_in_place`] holds, the sizes agree and [`PackedB::fuses`] `acc`.
pub fn conv_dequant_uninit<'o>(
    geo: &Im2col<'_>,
    x: &[u8],
    b: &PackedB,
    acc: Accumulator,
    dq: Dequant<'_>,
    out: &'o mut [MaybeUninit<f32>],
) -> Result<&'o mut [f32]> {
    let sp = geo.spec;
    let c = sp.in_channels;
    let (h, w) = geo.in_hw;
    let (hp, wp) = geo.padded_hw();
    let (oh, ow) = geo.out_hw;
    let (kh, kw) = (sp.kernel[0], sp.kernel[1]);
    let per = geo.in_per_sample();
    let samples = x.len() / per.max(1);
    // The last tap of the last output pixel lies inside the padded image.
    let reach = |o: usize, s: usize, k: usize, d: usize, len: usize| {
        o == 0 || k == 0 || (o - 1) * s + (k - 1) * d < len
    };
    if !reads_codes_in_place(geo, b)
        || per == 0
        || samples * per != x.len()
        || !reach(oh, sp.stride[0], kh, sp.dilation[0], hp)
        || !reach(ow, sp.stride[1], kw, sp.dilation[1], wp)
    {
        return Err(KernelError::shape(
            "integer conv",
            format!(
                "{} codes of {h}×{w}×{c} samples for a {kh}×{kw} conv read in place",
                x.len()
            ),
        ));
    }
    let pixels = hp * wp;
    let padded_len = samples
        .checked_mul(pixels * c)
        .ok_or_else(|| KernelError::shape("integer conv", "padded input size overflows"))?;
    let taps: Vec<usize> = (0..kh * kw)
        .map(|t| ((t / kw) * sp.dilation[0] * wp + (t % kw) * sp.dilation[1]) * c)
        .collect();
    let first_pixels = first_pixels(geo, samples, pixels);
    let starts: Vec<usize> = first_pixels.iter().map(|&p| p * c).collect();
    super::with_byte_scratch(padded_len, |padded| {
        let mut pixel_sums = vec![0u32; samples * pixels];
        pad_codes(geo, x, padded, &mut pixel_sums);
        let mut sums = vec![0i64; first_pixels.len()];
        let (down, right) = (sp.dilation[0] * wp, sp.dilation[1]);
        tap_sums(&pixel_sums, &first_pixels, (kh, kw), down, right, &mut sums);
        let left = Left::Patches {
            data: padded,
            starts: &starts,
            taps: &taps,
            tap_steps: c / STEP_BYTES,
        };
        dequantized_product(left, &sums, b, acc, dq, out)
    })
}

/// Per output pixel of `samples` samples (of `pixels` padded pixels each), the padded pixel its
/// first tap reads.
fn first_pixels(geo: &Im2col<'_>, samples: usize, pixels: usize) -> Vec<usize> {
    let (sp, (oh, ow), wp) = (geo.spec, geo.out_hw, geo.padded_hw().1);
    let mut out = Vec::with_capacity(samples * oh * ow);
    for s in 0..samples {
        for oy in 0..oh {
            let row = s * pixels + oy * sp.stride[0] * wp;
            out.extend((0..ow).map(|ox| row + ox * sp.stride[1]));
        }
    }
    out
}

crate::simd::multiversion! {
    /// `sums[i] = Σ_{ky,kx} pixel_sums[first[i] + ky·down + kx·right]` (`taps = (kh, kw)`):
    /// each row's sum of codes, as a sum along the kernel's rows then along its columns, each
    /// over every padded pixel at once (windows that cross a sample are never read). The sums
    /// fit in `u32`: a reduction read in place is at most 65 792 codes of at most 255.
    fn tap_sums(pixel_sums: &[u32], first: &[usize], taps: (usize, usize), down: usize, right: usize, sums: &mut [i64]) {
        let (kh, kw) = taps;
        let across = pixel_sums.len().saturating_sub((kw.max(1) - 1) * right);
        let mut rows = pixel_sums[..across].to_vec();
        for kx in 1..kw {
            let shifted = &pixel_sums[kx * right..kx * right + across];
            rows.iter_mut().zip(shifted).for_each(|(r, &v)| *r += v);
        }
        let whole = across.saturating_sub((kh.max(1) - 1) * down);
        let mut both = rows[..whole].to_vec();
        for ky in 1..kh {
            let shifted = &rows[ky * down..ky * down + whole];
            both.iter_mut().zip(shifted).for_each(|(b, &v)| *b += v);
        }
        for (s, &p) in sums.iter_mut().zip(first) {
            *s = i64::from(both[p]);
        }
    }
}

/// Writes the samples of `x` with `geo`'s zero padding into `padded` (every byte, `pixels`
/// padded pixels per sample) and each padded pixel's sum of codes into `pixel_sums` (0 in the
/// padding).
fn pad_codes(geo: &Im2col<'_>, x: &[u8], padded: &mut [u8], pixel_sums: &mut [u32]) {
    let sp = geo.spec;
    let c = sp.in_channels;
    let (h, w) = geo.in_hw;
    let wp = geo.padded_hw().1;
    let (top, left) = (sp.pads[0], sp.pads[1]);
    for ((ps, ss), xs) in padded
        .chunks_exact_mut(geo.padded_hw().0 * wp * c)
        .zip(pixel_sums.chunks_exact_mut(geo.padded_hw().0 * wp))
        .zip(x.chunks_exact(geo.in_per_sample()))
    {
        for (py, (row, srow)) in ps
            .chunks_exact_mut(wp * c)
            .zip(ss.chunks_exact_mut(wp))
            .enumerate()
        {
            match py.checked_sub(top).filter(|&iy| iy < h) {
                Some(iy) => {
                    let src = &xs[iy * w * c..(iy + 1) * w * c];
                    row[..left * c].fill(0);
                    row[left * c..(left + w) * c].copy_from_slice(src);
                    row[(left + w) * c..].fill(0);
                    srow[..left].fill(0);
                    channel_sums(src, c, &mut srow[left..left + w]);
                    srow[left + w..].fill(0);
                }
                None => {
                    row.fill(0);
                    srow.fill(0);
                }
            }
        }
    }
}

crate::simd::multiversion! {
    /// `sums[p] = Σ` of pixel `p`'s `c` byte codes in `x` (the usual channel counts unrolled).
    fn channel_sums(x: &[u8], c: usize, sums: &mut [u32]) {
        match c {
            16 => pixel_sums::<16>(x, sums),
            32 => pixel_sums::<32>(x, sums),
            64 => pixel_sums::<64>(x, sums),
            _ => {
                for (s, px) in sums.iter_mut().zip(x.chunks_exact(c.max(1))) {
                    *s = px.iter().map(|&v| u32::from(v)).sum();
                }
            }
        }
    }
}

/// [`channel_sums`] of `C` channels.
#[inline(always)]
fn pixel_sums<const C: usize>(x: &[u8], sums: &mut [u32]) {
    for (s, px) in sums.iter_mut().zip(x.chunks_exact(C)) {
        let mut t = 0u32;
        for &v in px {
            t += u32::from(v);
        }
        *s = t;
    }
}
