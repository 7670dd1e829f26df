//! The forward GEMM of a quantized conv or linear layer on integer codes (see
//! [`crate::quant::arith`]): `Y = X̂·Ŵᵀ` with `x̂ = lo_x + s_x·q_x` (one grid for the input)
//! and `ŵ[o,·] = lo_o + s_o·q_w[o,·]` (one grid per output channel), computed as
//!
//! ```text
//! Y[i,o] = s_x·s_o·Σ q_x·q_w  +  s_x·lo_o·Σ q_x  +  lo_x·(s_o·Σ_valid q_w + lo_o·n_valid)
//! ```
//!
//! The first sum is the integer GEMM, in the run's forward accumulator; the others are exact
//! integer sums; the scales are applied once per output, in f64, rounded to f32 once. A conv's
//! zero padding is the value 0, not a code: padded taps hold code 0 and drop out of the first
//! two sums, and the last term counts only the taps inside the input (`Σ_valid`, `n_valid`),
//! which depend on the output pixel alone.
//!
//! Inputs of at most 8 bits are quantized straight to byte codes, gathered as bytes and
//! multiplied by [`int::matmul_dequant`] against the weights packed once per pass, the
//! dequantization done as each tile leaves the kernel; wider ones take [`int::matmul`] on
//! codes held in `f32`. Both give the same integers, so the same values.

use std::mem::MaybeUninit;

use cptsim_kernels::conv::{with_scratch, zeroed, Im2col};
use cptsim_kernels::int::{self, Accumulator, PackedB};
use ndarray::{Array2, ArrayView2};

use crate::error::{Result, SimError};
use crate::quant::affine::{byte_codes, codes, Grid};
use crate::quant::LayerQuant;

/// The codes of a layer's input activation, in its layout.
pub(crate) enum InputCodes {
    /// Byte codes (inputs of at most 8 bits), for [`int::matmul_dequant`].
    Bytes(Vec<u8>),
    /// Codes held in `f32`, for [`int::matmul`].
    Floats(Vec<f32>),
}

/// The integer operands of one forward pass.
pub(crate) struct IntOperands {
    /// Codes of the input activation.
    pub x_codes: InputCodes,
    /// The input's grid.
    pub x_grid: Grid,
    /// Codes of the weights `[O, K]`, as `f32`.
    pub w_codes: Array2<f32>,
    /// Each output channel's grid.
    pub w_grids: Vec<Grid>,
    /// The forward GEMM's accumulator.
    pub acc: Accumulator,
    /// The weight codes packed for [`int::matmul_dequant`], with byte input codes.
    pub packed: Option<PackedB>,
}

/// Quantizes `x` (in place, to the values `lo + s·q` the fp32 arithmetic would use) and `w`
/// for an integer forward GEMM, when `quant` asks for one; `None` (nothing done) otherwise.
/// Returns the operands and the quantized weights.
pub(crate) fn quantize(
    quant: &mut LayerQuant,
    x: &mut [f32],
    w: ArrayView2<f32>,
    training: bool,
) -> Option<(IntOperands, Array2<f32>)> {
    let (ops, wq) = quantize_codes(quant, x, w, training)?;
    let g = ops.x_grid;
    match &ops.x_codes {
        InputCodes::Bytes(b) => x
            .iter_mut()
            .zip(b)
            .for_each(|(v, &q)| *v = f32::from(q) * g.step + g.lo),
        InputCodes::Floats(c) => x
            .iter_mut()
            .zip(c)
            .for_each(|(v, &q)| *v = q * g.step + g.lo),
    }
    Some((ops, wq))
}

/// [`quantize`] leaving `x` as it is: for a pass that reads only the codes.
pub(crate) fn quantize_codes(
    quant: &mut LayerQuant,
    x: &[f32],
    w: ArrayView2<f32>,
    training: bool,
) -> Option<(IntOperands, Array2<f32>)> {
    let acc = quant.integer_gemms()?;
    let (w_codes, w_grids) = quant.weight_codes(w)?;
    let x_grid = quant.activation_grid(x, training)?;
    let bytes = (quant.bits_fw <= 8)
        .then(|| byte_codes(x, x_grid))
        .flatten();
    let packed = bytes
        .as_ref()
        .and_then(|_| PackedB::from_rows(int::int_path(), w_codes.view()).ok());
    let x_codes = match (bytes, &packed) {
        (Some(b), Some(_)) => InputCodes::Bytes(b),
        _ => InputCodes::Floats(codes(x, x_grid)),
    };
    let mut wq = w_codes.clone();
    for (mut row, g) in wq.rows_mut().into_iter().zip(&w_grids) {
        row.mapv_inplace(|q| q * g.step + g.lo);
    }
    let ops = IntOperands {
        x_codes,
        x_grid,
        w_codes,
        w_grids,
        acc,
        packed,
    };
    Some((ops, wq))
}

/// The per-output constants of the dequantization: per channel `o`, `s_x·s_o` and `s_x·lo_o`;
/// per output pixel `p` and channel, `lo_x·(s_o·Σ_valid q_w[o,·] + lo_o·n_valid)`.
pub(crate) struct ValidTaps {
    scale: Vec<f64>,
    row: Vec<f64>,
    /// `[P, O]`, row-major.
    offset: Vec<f64>,
}

impl ValidTaps {
    /// A layer without padding: every tap is valid for the one "pixel" of a row.
    pub fn all(ops: &IntOperands) -> Self {
        let k = ops.w_codes.ncols();
        let sums: Vec<i64> = ops
            .w_codes
            .rows()
            .into_iter()
            .map(|w| w.iter().map(|&q| q as i64).sum())
            .collect();
        Self::from_sums(ops, &sums, &[k as i64])
    }

    /// From `Σ_valid q_w` (`[P, O]` row-major) and `n_valid` (`[P]`).
    fn from_sums(ops: &IntOperands, sums: &[i64], counts: &[i64]) -> Self {
        let (sx, lx) = (f64::from(ops.x_grid.step), f64::from(ops.x_grid.lo));
        let grids: Vec<(f64, f64)> = ops
            .w_grids
            .iter()
            .map(|g| (f64::from(g.step), f64::from(g.lo)))
            .collect();
        let mut offset = Vec::with_capacity(sums.len());
        for (row, &n) in sums.chunks_exact(grids.len().max(1)).zip(counts) {
            let n = n as f64;
            offset.extend(
                row.iter()
                    .zip(&grids)
                    .map(|(&sv, &(so, lo))| lx * (so * sv as f64 + lo * n)),
            );
        }
        ValidTaps {
            scale: grids.iter().map(|&(so, _)| sx * so).collect(),
            row: grids.iter().map(|&(_, lo)| sx * lo).collect(),
            offset,
        }
    }

    fn dequant(&self) -> int::Dequant<'_> {
        int::Dequant {
            scale: &self.scale,
            row: &self.row,
            offset: &self.offset,
        }
    }
}

/// `out = X̂·Ŵᵀ` (row-major `[rows, O]`) for the code rows `xc` (`[rows, K]`, row `i` at output
/// pixel `i mod P` of `taps`).
pub(crate) fn forward(
    layer: &str,
    xc: ArrayView2<f32>,
    ops: &IntOperands,
    taps: &ValidTaps,
    out: &mut [f32],
) -> Result<()> {
    let prod = int::matmul(xc, ops.w_codes.t(), ops.acc)?;
    let o = taps.scale.len();
    let pixels = taps.offset.len() / o.max(1);
    let sums = prod.sums.as_slice();
    match sums {
        Some(sums) if out.len() == sums.len() && pixels > 0 && o > 0 => {
            for (i, (y, c)) in out
                .chunks_exact_mut(o)
                .zip(sums.chunks_exact(o))
                .enumerate()
            {
                let off = &taps.offset[(i % pixels) * o..][..o];
                dequantize_row(y, c, prod.row_sums[i] as f64, &taps.scale, &taps.row, off);
            }
            Ok(())
        }
        _ if out.is_empty() => Ok(()),
        _ => Err(SimError::shape(layer, "integer GEMM output does not fit")),
    }
}

/// [`forward`] for byte-code rows laid out as [`int::matmul_dequant`] reads them, into `out`
/// not yet written; the sequential product when the accumulator needs it.
pub(crate) fn forward_bytes<'o>(
    layer: &str,
    a: int::Rows<'_>,
    ops: &IntOperands,
    taps: &ValidTaps,
    out: &'o mut [MaybeUninit<f32>],
) -> Result<&'o mut [f32]> {
    let k = ops.w_codes.ncols();
    match &ops.packed {
        Some(b) if b.fuses(ops.acc) => Ok(int::matmul_dequant_uninit(
            a,
            b,
            ops.acc,
            taps.dequant(),
            out,
        )?),
        _ => {
            let rows = a.sums.len();
            let stride = int::row_stride(k);
            let xc: Vec<f32> = a
                .data
                .chunks(stride.max(1))
                .take(rows)
                .flat_map(|r| r[..k].iter().map(|&q| f32::from(q)))
                .collect();
            let xc = ArrayView2::from_shape((rows, k), &xc)
                .map_err(|e| SimError::shape(layer, e.to_string()))?;
            let out = zeroed(out);
            forward(layer, xc, ops, taps, out)?;
            Ok(out)
        }
    }
}

cptsim_kernels::simd::multiversion! {
    /// `y[o] = scale[o]·c[o] + row[o]·r + off[o]` in f64, rounded to f32 once.
    fn dequantize_row(y: &mut [f32], c: &[i64], r: f64, scale: &[f64], row: &[f64], off: &[f64]) {
        for o in 0..y.len().min(c.len()).min(scale.len()).min(row.len()).min(off.len()) {
            y[o] = (scale[o] * c[o] as f64 + row[o] * r + off[o]) as f32;
        }
    }
}

/// The valid taps of a one-group conv of geometry `geo`: per output pixel, the sum of each
/// channel's weight codes over the taps inside the input, and their count.
pub(crate) fn conv_taps(layer: &str, geo: &Im2col<'_>, ops: &IntOperands) -> Result<ValidTaps> {
    let spec = geo.spec;
    let (c, kh, kw) = (spec.in_channels, spec.kernel[0], spec.kernel[1]);
    let (o, k) = ops.w_codes.dim();
    if spec.groups != 1 || k != kh * kw * c {
        return Err(SimError::shape(
            layer,
            "integer conv weights do not match the kernel",
        ));
    }
    // Per tap and channel (`[taps, O]`), the sum of its input channels' codes.
    let taps = kh * kw;
    let mut tap_sums = vec![0i64; taps * o];
    for (j, w) in ops.w_codes.rows().into_iter().enumerate() {
        for (t, ch) in w.exact_chunks(c.max(1)).into_iter().take(taps).enumerate() {
            tap_sums[t * o + j] = ch.iter().map(|&q| q as i64).sum();
        }
    }
    let (oh, ow) = geo.out_hw;
    let mut sums = vec![0i64; oh * ow * o];
    let mut counts = vec![0i64; oh * ow];
    // A pixel whose taps inside the input are those of the one before it (most of the
    // interior) copies its sums.
    let mut previous: Option<Vec<bool>> = None;
    for p in 0..oh * ow {
        let (oy, ox) = (p / ow, p % ow);
        let valid: Vec<bool> = (0..taps)
            .map(|t| geo.source(oy, ox, t / kw, t % kw).is_some())
            .collect();
        if p > 0 && previous.as_ref() == Some(&valid) {
            sums.copy_within((p - 1) * o..p * o, p * o);
            counts[p] = counts[p - 1];
        } else {
            let row = &mut sums[p * o..(p + 1) * o];
            for (t, _) in valid.iter().enumerate().filter(|(_, &v)| v) {
                counts[p] += c as i64;
                row.iter_mut()
                    .zip(&tap_sums[t * o..(t + 1) * o])
                    .for_each(|(s, &v)| *s += v);
            }
        }
        previous = Some(valid);
    }
    Ok(ValidTaps::from_sums(ops, &sums, &counts))
}

/// One block of a one-group conv's output (`out`, `[rows, O]`, written whole) from the codes
/// of its samples `xc`: byte codes with their patches read in place by
/// [`int::conv_dequant_uninit`] when it can, else the patches gathered, then [`forward`] or
/// [`forward_bytes`].
pub(crate) fn conv_block<'o>(
    layer: &str,
    geo: &Im2col<'_>,
    xc: Block<'_>,
    ops: &IntOperands,
    taps: &ValidTaps,
    out: &'o mut [MaybeUninit<f32>],
) -> Result<&'o mut [f32]> {
    let k = geo.spec.k_per_group();
    let rows = out.len() / ops.w_grids.len().max(1);
    match xc {
        Block::Bytes(xc) => match &ops.packed {
            Some(b) if b.fuses(ops.acc) && int::reads_codes_in_place(geo, b) => Ok(
                int::conv_dequant_uninit(geo, xc, b, ops.acc, taps.dequant(), out)?,
            ),
            _ => gathered(layer, geo, xc, ops, taps, out),
        },
        Block::Floats(xc) => with_scratch(rows * k, 0, |col, _| {
            geo.gather(xc, 0, col);
            let col = ArrayView2::from_shape((rows, k), &*col)
                .map_err(|e| SimError::shape(layer, e.to_string()))?;
            let out = zeroed(out);
            forward(layer, col, ops, taps, out)?;
            Ok(out)
        }),
    }
}

/// [`conv_block`] of byte codes whose patches are gathered first.
fn gathered<'o>(
    layer: &str,
    geo: &Im2col<'_>,
    xc: &[u8],
    ops: &IntOperands,
    taps: &ValidTaps,
    out: &'o mut [MaybeUninit<f32>],
) -> Result<&'o mut [f32]> {
    let k = geo.spec.k_per_group();
    let rows = out.len() / ops.w_grids.len().max(1);
    int::with_byte_scratch(int::rows_len(rows, k)?, |col| {
        let mut sums = vec![0i64; rows];
        int::gather_codes(geo, xc, col, &mut sums)?;
        let a = int::Rows {
            data: col,
            sums: &sums,
        };
        forward_bytes(layer, a, ops, taps, out)
    })
}

/// The input codes of one block of samples.
#[derive(Clone, Copy)]
pub(crate) enum Block<'a> {
    Bytes(&'a [u8]),
    Floats(&'a [f32]),
}

impl InputCodes {
    /// Block `i` of `size` codes.
    pub fn block(&self, size: usize, i: usize) -> Block<'_> {
        match self {
            InputCodes::Bytes(b) => Block::Bytes(b.chunks(size.max(1)).nth(i).unwrap_or_default()),
            InputCodes::Floats(f) => Block::Floats(super::block_of(f, size, i)),
        }
    }
}

/// The linear layer's `out = X̂·Ŵᵀ` (`[rows, O]`) for its input codes (`[rows, K]`).
pub(crate) fn linear(layer: &str, rows: usize, ops: &IntOperands, out: &mut [f32]) -> Result<()> {
    let k = ops.w_codes.ncols();
    let taps = ValidTaps::all(ops);
    let shape_err = |e: ndarray::ShapeError| SimError::shape(layer, e.to_string());
    match &ops.x_codes {
        InputCodes::Bytes(b) => {
            let a = int::PackedRows::new(ArrayView2::from_shape((rows, k), b).map_err(shape_err)?)?;
            // SAFETY: `MaybeUninit<f32>` has the layout of `f32`; only values are written.
            let out = unsafe { &mut *(std::ptr::from_mut(out) as *mut [MaybeUninit<f32>]) };
            forward_bytes(layer, a.rows(), ops, &taps, out).map(drop)
        }
        InputCodes::Floats(f) => {
            let xc = ArrayView2::from_shape((rows, k), f).map_err(shape_err)?;
            forward(layer, xc, ops, &taps, out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conv2d::Conv2d;
    use super::super::gradcheck::rand_tensor;
    use super::super::linear::Linear;
    use super::super::{Layer, Mode};
    use crate::quant::affine::min_max;
    use crate::quant::arith::Arithmetic;
    use crate::quant::QuantMethod;
    use cptsim_kernels::conv::Conv2dSpec;
    use ndarray::ArrayD;

    use super::*;

    fn quant(bits: u32, arithmetic: Arithmetic) -> LayerQuant {
        let mut q = LayerQuant::new(QuantMethod::Sbm, 0);
        q.set_bits(bits, bits).unwrap();
        q.arith.arithmetic = arithmetic;
        q
    }

    /// The values on `x`'s grid (one range) in f64: `lo + s·q`.
    fn on_grid(x: &[f32], grid: Grid) -> Vec<f64> {
        codes(x, grid)
            .iter()
            .map(|&q| f64::from(grid.lo) + f64::from(grid.step) * f64::from(q))
            .collect()
    }

    fn grid_of(x: &[f32], bits: u32) -> Grid {
        let (lo, hi) = min_max(x);
        Grid::new(lo, hi - lo, bits)
    }

    /// A direct conv in f64 of the quantized input `[N, H, W, C]` and weights `[O, KH, KW, C]`
    /// (symmetric padding `p`, stride `s`), quantized on their own grids.
    fn direct_conv(x: &ArrayD<f32>, w: &ArrayD<f32>, bits: u32, s: usize, p: usize) -> Vec<f64> {
        let (sh, ws) = (x.shape(), w.shape());
        let (n, h, wd, c) = (sh[0], sh[1], sh[2], sh[3]);
        let (o, k) = (ws[0], ws[1]);
        let xq = on_grid(x.as_slice().unwrap(), grid_of(x.as_slice().unwrap(), bits));
        let kk = k * k * c;
        let wq: Vec<f64> = w
            .as_slice()
            .unwrap()
            .chunks(kk)
            .flat_map(|row| on_grid(row, grid_of(row, bits)))
            .collect();
        let (oh, ow) = ((h + 2 * p - k) / s + 1, (wd + 2 * p - k) / s + 1);
        let mut y = vec![0.0; n * oh * ow * o];
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for oc in 0..o {
                        let mut acc = 0.0;
                        for ky in 0..k {
                            for kx in 0..k {
                                let (iy, ix) = (
                                    (oy * s + ky) as isize - p as isize,
                                    (ox * s + kx) as isize - p as isize,
                                );
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                for ch in 0..c {
                                    let xi = ((b * h + iy as usize) * wd + ix as usize) * c + ch;
                                    acc += xq[xi] * wq[oc * kk + (ky * k + kx) * c + ch];
                                }
                            }
                        }
                        y[((b * oh + oy) * ow + ox) * o + oc] = acc;
                    }
                }
            }
        }
        y
    }

    fn assert_near(got: &[f32], want: &[f64], rel: f64, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        let scale = want.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
        for (g, w) in got.iter().zip(want) {
            assert!(
                (f64::from(*g) - w).abs() <= rel * scale,
                "{what}: {g} vs {w}"
            );
        }
    }

    #[test]
    fn integer_convs_give_the_exact_product_of_the_quantized_operands() {
        // Inputs below zero (the padding's 0 is not a code), strides 1 and 2, widths 2..16.
        for (bits, s, p, cin, cout) in [
            (8, 1, 1, 3, 16),
            (4, 2, 1, 8, 20),
            (12, 1, 0, 5, 7),
            (2, 1, 2, 4, 33),
        ] {
            let spec = Conv2dSpec::square(cin, cout, 3, s, p);
            let x = rand_tensor(&[2, 9, 7, cin], 1.0, 5 + bits as u64);
            let w = rand_tensor(&[cout, 3, 3, cin], 0.5, 6);
            let mut int = Conv2d::new(
                "c",
                spec.clone(),
                w.clone(),
                None,
                quant(bits, Arithmetic::Int),
            )
            .unwrap();
            let mut fp =
                Conv2d::new("c", spec, w.clone(), None, quant(bits, Arithmetic::Fp32)).unwrap();
            let yi = int.forward(&[&x], Mode::Train).unwrap();
            let yf = fp.forward(&[&x], Mode::Train).unwrap();
            let want = direct_conv(&x, &w, bits, s, p);
            let what = format!("{bits} bits, stride {s}, pad {p}");
            // f64 sums rounded once: within f32's rounding of the exact value.
            assert_near(yi.as_slice().unwrap(), &want, 1e-6, &what);
            // fp32 multiply-adds on the dequantized values: close, not the same.
            assert_near(yf.as_slice().unwrap(), &want, 1e-4, &what);
        }
    }

    #[test]
    fn integer_linear_layers_match_the_quantized_product() {
        let x = rand_tensor(&[5, 3, 70], 2.0, 9);
        let w = rand_tensor(&[11, 70], 0.5, 10);
        for bits in [3, 8, 16] {
            let mut l = Linear::new("fc", w.clone(), None, quant(bits, Arithmetic::Int)).unwrap();
            let y = l.forward(&[&x], Mode::Train).unwrap();
            assert_eq!(y.shape(), &[5, 3, 11]);
            let xs = x.as_slice().unwrap();
            let xq = on_grid(xs, grid_of(xs, bits));
            let wq: Vec<f64> = w
                .as_slice()
                .unwrap()
                .chunks(70)
                .flat_map(|r| on_grid(r, grid_of(r, bits)))
                .collect();
            let want: Vec<f64> = (0..15)
                .flat_map(|i| {
                    let (xq, wq) = (&xq, &wq);
                    (0..11).map(move |o| (0..70).map(|k| xq[i * 70 + k] * wq[o * 70 + k]).sum())
                })
                .collect();
            assert_near(y.as_slice().unwrap(), &want, 1e-6, &format!("{bits} bits"));
        }
    }

    #[test]
    fn a_narrow_accumulator_changes_the_result_and_a_wide_one_does_not() {
        let spec = Conv2dSpec::square(16, 8, 3, 1, 1);
        let x = rand_tensor(&[1, 6, 6, 16], 1.0, 11);
        let w = rand_tensor(&[8, 3, 3, 16], 0.5, 12);
        let run = |acc: &str| {
            let mut q = quant(8, Arithmetic::Int);
            q.arith.set_accumulators(acc).unwrap();
            let mut c = Conv2d::new("c", spec.clone(), w.clone(), None, q).unwrap();
            c.forward(&[&x], Mode::Train).unwrap()
        };
        let exact = run("exact");
        // 144 products of 8-bit codes reach 2^23: 32 bits hold them, 16 do not.
        assert_eq!(run("32:saturate"), exact);
        assert_eq!(run("fw=32"), exact);
        assert_ne!(run("16:wrap"), exact);
        assert_ne!(run("16:saturate"), exact);
    }
}
