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
/// gather them): one group, whole 4-byte steps per pixel (`C` a multiple of 4), `b` in the
/// byte form with its reduction `K = KH·KW·C` and short enough for one kernel call per tile.
pub fn reads_codes_in_place(geo: &Im2col<'_>, b: &PackedB) -> bool {
    let sp = geo.spec;
    sp.groups == 1 && b.dim().0 == sp.k_per_group() && b.reads_pixels_of(sp.in_channels)
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
    let rows = samples * oh * ow;
    let mut starts = Vec::with_capacity(rows);
    for s in 0..samples {
        for oy in 0..oh {
            for ox in 0..ow {
                starts.push((s * pixels + oy * sp.stride[0] * wp + ox * sp.stride[1]) * c);
            }
        }
    }
    super::with_byte_scratch(padded_len, |padded| {
        let mut pixel_sums = vec![0u32; samples * pixels];
        pad_codes(geo, x, padded, &mut pixel_sums);
        let tap_pixels: Vec<usize> = taps.iter().map(|t| t / c).collect();
        let sums: Vec<i64> = starts
            .iter()
            .map(|&st| {
                let p0 = st / c;
                tap_pixels
                    .iter()
                    .map(|&t| i64::from(pixel_sums[p0 + t]))
                    .sum()
            })
            .collect();
        let left = Left::Patches {
            data: padded,
            starts: &starts,
            taps: &taps,
            tap_steps: c / STEP_BYTES,
        };
        dequantized_product(left, &sums, b, acc, dq, out)
    })
}

/// Writes the samples of `x` with `geo`'s zero padding into `padded` (every byte, `pixels`
/// padded pixels per sample) and each padded pixel's sum of codes into `pixel_sums` (0 in the
/// padding).
fn pad_codes(geo: &Im2col<'_>, x: &[u8], padded: &mut [u8], pixel_sums: &mut [u32]) {
    let sp = geo.spec;
    let c = sp.in_channels;
    let (w, wp) = (geo.in_hw.1, geo.padded_hw().1);
    let pixels = geo.padded_hw().0 * wp;
    let first = sp.pads[0] * wp + sp.pads[1];
    padded.fill(0);
    pixel_sums.fill(0);
    for ((ps, ss), xs) in padded
        .chunks_exact_mut(pixels * c)
        .zip(pixel_sums.chunks_exact_mut(pixels))
        .zip(x.chunks_exact(geo.in_per_sample()))
    {
        for (iy, src) in xs.chunks_exact(w * c).enumerate() {
            let at = first + iy * wp;
            ps[at * c..(at + w) * c].copy_from_slice(src);
            channel_sums(src, c, &mut ss[at..at + w]);
        }
    }
}

crate::simd::multiversion! {
    /// `sums[p] = Σ` of pixel `p`'s `c` byte codes in `x`.
    fn channel_sums(x: &[u8], c: usize, sums: &mut [u32]) {
        for (s, px) in sums.iter_mut().zip(x.chunks_exact(c)) {
            *s = px.iter().map(|&v| u32::from(v)).sum();
        }
    }
}
