//! The integer product of a quantized layer's forward GEMM in one pass: `Y = dequant(A·B)` for
//! `A` of unsigned byte codes (activations, `m × k`, rows already laid out as the kernels read
//! them) and `B` of codes packed once per weight version ([`PackedB`]), each output's integer
//! sum turned into its value as the tile leaves the kernel (no 64-bit sums array):
//!
//! ```text
//! y[i,j] = scale[j]·c[i,j] + row[j]·r[i] + offset[i mod P, j]
//! ```
//!
//! in f64, rounded to f32 once, with `c` the accumulator's value of `Σ_k a·b` and `r[i] = Σ_k a`
//! (both exact integers). `A`'s codes are bytes, so no zero point is needed on its side and a
//! run of up to 16 448 byte steps (65 792 terms) sums exactly in a 32-bit lane: the sums equal
//! [`super::matmul`]'s integer for integer, so the values are bit-identical to dequantizing
//! its [`super::Product`].

use std::mem::MaybeUninit;

use ndarray::ArrayView2;
use rayon::prelude::*;

use super::pack::{self, Code, Form, Shift, PANEL, ROW_PAD, STEP_BYTES};
use super::tile::{Kernel, TileRows, TileSums, TILE_COLS, TILE_ROWS};
use super::{Accumulator, IntPath, Overflow};
use crate::error::{KernelError, Result};

/// The largest code of `A` (a byte).
const A_PEAK: i64 = 255;
/// Rows of `Y` per parallel task (a multiple of every tile's rows).
const TASK_ROWS: usize = 64;

/// The right operand `B = Wᵀ` (`k × n`) of integer weight codes `W` (`n × k`), packed once for
/// every product with it, with what the dequantization needs of it.
#[derive(Clone, Debug)]
pub struct PackedB {
    path: IntPath,
    form: Form,
    /// Zero point: the kernels read `b − zero`.
    zero: i64,
    data: Vec<u8>,
    k: usize,
    n: usize,
    /// Largest `|b − zero|` (at least 1).
    shifted_peak: i64,
    /// Largest `|b|`.
    peak: i64,
    /// Whether the codes of `B` have one sign (or are 0): every product with `A`'s unsigned
    /// codes then has one sign too.
    one_signed: bool,
    /// `Σ_k b[k, j]` per column.
    col_sums: Vec<i64>,
}

impl PackedB {
    /// `B = Wᵀ` for the codes `w` (`[n, k]`, one row per output) on `path`; an error if a value
    /// is not an integer, the codes span more than 16 bits, or this CPU does not run `path`.
    pub fn from_rows<T: Code>(path: IntPath, w: ArrayView2<T>) -> Result<Self> {
        if !path.runs_here() {
            return Err(KernelError::Invalid {
                what: format!("integer GEMM path {}", path.name()),
                msg: "this CPU does not run it".into(),
            });
        }
        let (n, k) = w.dim();
        let b = w.t();
        let rb = pack::range(b, "B")?;
        let form = if rb.1 - rb.0 <= 255 && path != IntPath::Avx2 {
            Form::Byte
        } else {
            Form::Word
        };
        let target = match form {
            Form::Byte => (-128, 127),
            Form::Word => (-32768, 32767),
        };
        let zero = pack::zero_point(rb, target).ok_or_else(|| pack::too_wide("B", rb))?;
        let shifted_peak = (rb.0 - zero).abs().max((rb.1 - zero).abs()).max(1);
        let data = if k > 0 && n > 0 {
            pack::pack_b(b, form, Shift::plain(zero))?
        } else {
            Vec::new()
        };
        let col_sums = w
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|&x| x.int()).sum())
            .collect();
        Ok(PackedB {
            path,
            form,
            zero,
            data,
            k,
            n,
            shifted_peak,
            peak: rb.0.abs().max(rb.1.abs()),
            one_signed: rb.0 >= 0 || rb.1 <= 0,
            col_sums,
        })
    }

    /// Steps per kernel call of a product with byte codes `A`: each call's exact sum fits in
    /// 32 bits.
    fn run(&self) -> usize {
        ((i64::from(i32::MAX) / (self.form.terms() as i64 * A_PEAK * self.shifted_peak)) as usize)
            .max(1)
    }

    /// Whether a conv's patches of `c`-channel byte codes can be read in place: the byte form,
    /// whole steps per pixel, and one kernel call per tile.
    pub(super) fn reads_pixels_of(&self, c: usize) -> bool {
        self.form == Form::Byte
            && c > 0
            && c.is_multiple_of(STEP_BYTES)
            && pack::steps(self.k, self.form) <= self.run()
    }

    /// `k` (the reduction) and `n` (the outputs per row).
    pub fn dim(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// `Σ_k b[k, j]` per column.
    pub fn col_sums(&self) -> &[i64] {
        &self.col_sums
    }

    /// Whether [`matmul_dequant`] computes a product in `acc`: always for exact and wrapping
    /// registers; a saturating one when the products have one sign (the register is then the
    /// exact sum clamped once) or no partial sum can reach its bounds (else the sequential
    /// definition needs [`super::matmul`]).
    pub fn fuses(&self, acc: Accumulator) -> bool {
        match acc {
            Accumulator::Exact => true,
            Accumulator::Narrow { bits, overflow } => match overflow {
                Overflow::Wrap => true,
                Overflow::Saturate => {
                    let hi = (1i128 << (bits - 1)) - 1;
                    self.one_signed
                        || self.k as i128 * i128::from(A_PEAK) * i128::from(self.peak) <= hi
                }
            },
        }
    }
}

/// Bytes per row of a left operand of `k` byte codes: `k` rounded up to a step of 4.
pub fn row_stride(k: usize) -> usize {
    k.div_ceil(4) * STEP_BYTES
}

/// Bytes of a left operand of `m` rows of `k` byte codes: rows padded to the tallest tile.
pub fn rows_len(m: usize, k: usize) -> Result<usize> {
    m.div_ceil(ROW_PAD)
        .checked_mul(ROW_PAD)
        .and_then(|r| r.checked_mul(row_stride(k)))
        .ok_or_else(|| KernelError::shape("integer gemm", "operand too large to pack"))
}

/// The per-output constants of a dequantization (see the module docs): `scale` and `row` per
/// column of `Y`, `offset` `[P, n]` row-major for the `P` pixels its rows cycle through.
#[derive(Clone, Copy, Debug)]
pub struct Dequant<'a> {
    pub scale: &'a [f64],
    pub row: &'a [f64],
    pub offset: &'a [f64],
}

/// The left operand `A` as [`matmul_dequant`] reads it: `m` rows of `k` byte codes,
/// [`row_stride`]`(k)` bytes apart, zero past `k` and in the rows after `m` up to
/// [`rows_len`], and each row's sum of codes.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    pub data: &'a [u8],
    /// `Σ_k a[i, k]` per row (`m` of them).
    pub sums: &'a [i64],
}

/// An owned [`Rows`].
#[derive(Clone, Debug)]
pub struct PackedRows {
    data: Vec<u8>,
    sums: Vec<i64>,
}

impl PackedRows {
    /// `A` (`m × k` byte codes) laid out as [`matmul_dequant`] reads it.
    pub fn new(a: ArrayView2<u8>) -> Result<Self> {
        let (m, k) = a.dim();
        let stride = row_stride(k);
        let mut data = vec![0u8; rows_len(m, k)?];
        if stride > 0 {
            for (dst, row) in data.chunks_exact_mut(stride).zip(a.rows()) {
                match row.as_slice() {
                    Some(s) => dst[..k].copy_from_slice(s),
                    None => dst.iter_mut().zip(row).for_each(|(d, &v)| *d = v),
                }
            }
        }
        let sums = a
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|&v| i64::from(v)).sum())
            .collect();
        Ok(PackedRows { data, sums })
    }

    pub fn rows(&self) -> Rows<'_> {
        Rows {
            data: &self.data,
            sums: &self.sums,
        }
    }
}

/// `out = dequant(A·B)` (row-major `[m, n]`, `m` the rows of `a`). Row `i` of `Y` takes the
/// offsets of pixel `i mod P`. An error if the sizes do not agree or [`PackedB::fuses`] is
/// false for `acc`.
pub fn matmul_dequant(
    a: Rows<'_>,
    b: &PackedB,
    acc: Accumulator,
    dq: Dequant<'_>,
    out: &mut [f32],
) -> Result<()> {
    // SAFETY: `MaybeUninit<f32>` has the layout of `f32`, and only initialised values are
    // written through the view.
    let out = unsafe { &mut *(std::ptr::from_mut(out) as *mut [MaybeUninit<f32>]) };
    matmul_dequant_uninit(a, b, acc, dq, out).map(drop)
}

/// [`matmul_dequant`] into an output not yet written, which it writes whole.
pub fn matmul_dequant_uninit<'o>(
    a: Rows<'_>,
    b: &PackedB,
    acc: Accumulator,
    dq: Dequant<'_>,
    out: &'o mut [MaybeUninit<f32>],
) -> Result<&'o mut [f32]> {
    let (k, m) = (b.k, a.sums.len());
    if a.data.len() < rows_len(m, k)? {
        return Err(KernelError::shape(
            "integer gemm",
            format!(
                "{} bytes hold fewer than {m} padded rows of {k}",
                a.data.len()
            ),
        ));
    }
    let left = Left::Rows {
        data: a.data,
        lda: row_stride(k),
    };
    dequantized_product(left, a.sums, b, acc, dq, out)
}

/// Checks what a fused product writes and needs, then computes it into `out` (written whole).
pub(super) fn dequantized_product<'o>(
    left: Left<'_>,
    sums: &[i64],
    b: &PackedB,
    acc: Accumulator,
    dq: Dequant<'_>,
    out: &'o mut [MaybeUninit<f32>],
) -> Result<&'o mut [f32]> {
    let (n, m) = (b.n, sums.len());
    let bad = |msg: String| Err(KernelError::shape("integer gemm", msg));
    if out.len() != m.saturating_mul(n) {
        return bad(format!("an output of {} for {m} × {n}", out.len()));
    }
    if dq.scale.len() != n || dq.row.len() != n || (dq.offset.is_empty() && m > 0) {
        return bad("dequantization constants do not match the outputs".into());
    }
    if !dq.offset.len().is_multiple_of(n.max(1)) {
        return bad("dequantization offsets are not whole pixels".into());
    }
    if !b.fuses(acc) {
        return Err(KernelError::Invalid {
            what: format!("accumulator {acc}"),
            msg: "a saturating register that can clip needs the sequential product".into(),
        });
    }
    if m > 0 && n > 0 {
        product(left, sums, b, acc, dq, out);
    }
    // SAFETY: every element was written ([`task`] writes every column of its rows).
    Ok(unsafe { &mut *(std::ptr::from_mut(out) as *mut [f32]) })
}

/// The left operand of a fused product as its tiles read it.
#[derive(Clone, Copy)]
pub(super) enum Left<'a> {
    /// Rows of byte codes `lda` bytes apart, padded to [`ROW_PAD`] rows (see [`Rows`]).
    Rows { data: &'a [u8], lda: usize },
    /// A conv's patches read in place (byte form only, one kernel call per tile): row `i`
    /// starts at `data[starts[i]]`, and its taps are runs of `tap_steps` steps at the `taps`
    /// offsets from there, every byte of which `data` holds.
    Patches {
        data: &'a [u8],
        starts: &'a [usize],
        taps: &'a [usize],
        tap_steps: usize,
    },
}

/// The body of [`dequantized_product`] (sizes checked).
fn product(
    left: Left<'_>,
    sums: &[i64],
    b: &PackedB,
    acc: Accumulator,
    dq: Dequant<'_>,
    out: &mut [MaybeUninit<f32>],
) {
    let (k, n, m) = (b.k, b.n, sums.len());
    let words;
    let left = match (left, b.form) {
        (Left::Rows { data, lda }, Form::Word) => {
            words = widen(data, m.div_ceil(ROW_PAD) * ROW_PAD, k, lda);
            Left::Rows {
                data: &words[..],
                lda: k.div_ceil(2) * STEP_BYTES,
            }
        }
        (left, _) => left,
    };
    let g = Geometry {
        kernel: b.path.kernel(b.form),
        steps: pack::steps(k, b.form),
        run: b.run(),
        pixels: dq.offset.len() / n,
        acc,
    };
    out.par_chunks_mut(TASK_ROWS * n)
        .enumerate()
        .for_each(|(t, o)| task(&g, left, b, sums, dq, t * TASK_ROWS, o));
}

/// What every task of one [`matmul_dequant`] shares.
struct Geometry {
    kernel: Kernel,
    steps: usize,
    /// Steps per kernel call (each call's exact sum fits in 32 bits).
    run: usize,
    pixels: usize,
    acc: Accumulator,
}

crate::simd::multiversion! {
/// The rows of `Y` from `i0` (`out`, whole rows); compiled for the vector paths so that the
/// dequantization of each tile is vectorised in place.
fn task(
    g: &Geometry,
    left: Left<'_>,
    b: &PackedB,
    sums: &[i64],
    dq: Dequant<'_>,
    i0: usize,
    out: &mut [MaybeUninit<f32>],
) {
    let n = b.n;
    let rows = out.len() / n;
    let panel = g.steps * PANEL * STEP_BYTES;
    let kernel = g.kernel;
    let mut tile: TileSums = [0; TILE_ROWS * TILE_COLS];
    let mut wide = [0i64; TILE_ROWS * TILE_COLS];
    for jt in (0..n).step_by(kernel.cols) {
        let cols = kernel.cols.min(n - jt);
        let f = match kernel.narrow {
            Some(narrow) if cols <= PANEL => narrow,
            _ => kernel.tile,
        };
        for it in (0..rows).step_by(kernel.rows) {
            let i = i0 + it;
            let tr = kernel.rows.min(rows - it);
            let mut s0 = 0;
            while s0 < g.steps {
                let ns = g.run.min(g.steps - s0);
                let pa = match left {
                    Left::Rows { data, lda } => {
                        TileRows::strided(data[i * lda + s0 * STEP_BYTES..].as_ptr(), lda, ns)
                    }
                    Left::Patches {
                        data,
                        starts,
                        taps,
                        tap_steps,
                    } => TileRows {
                        // Rows past the last repeat it (their sums are not used).
                        rows: std::array::from_fn(|r| {
                            data.as_ptr()
                                .wrapping_add(starts[(i + r).min(sums.len() - 1)])
                        }),
                        taps,
                        steps: tap_steps,
                    },
                };
                let pb = b.data[jt / PANEL * panel + s0 * PANEL * STEP_BYTES..].as_ptr();
                // SAFETY: `Rows` holds rows padded to 8 (checked by the caller) and `Patches`
                // every run of every row (checked by its maker, which also keeps its steps
                // within one call), `b` columns padded to two panels, each `steps` steps long,
                // so the tile's rows and panels exist from step `s0` for `ns` steps; the
                // kernel's path runs here (checked when `b` was packed).
                unsafe { f(&pa, pb, panel, &mut tile) };
                if s0 == 0 && ns == g.steps {
                    break;
                }
                if s0 == 0 {
                    wide.fill(0);
                }
                for r in 0..tr {
                    for c in 0..cols {
                        wide[r * TILE_COLS + c] += i64::from(tile[r * TILE_COLS + c]);
                    }
                }
                s0 += ns;
            }
            let single = g.run >= g.steps;
            for r in 0..tr {
                let row = i + r;
                let y = &mut out[(it + r) * n + jt..][..cols];
                let off = &dq.offset[(row % g.pixels) * n + jt..][..cols];
                let (scale, rw) = (&dq.scale[jt..][..cols], &dq.row[jt..][..cols]);
                let ra = sums[row];
                let corr = b.zero * ra;
                let span = r * TILE_COLS..r * TILE_COLS + cols;
                match g.acc {
                    Accumulator::Narrow { .. } => {
                        let mut c = [0i64; TILE_COLS];
                        for (v, j) in c.iter_mut().zip(span) {
                            let s = if single { i64::from(tile[j]) } else { wide[j] };
                            *v = g.acc.settle(s + corr);
                        }
                        dequant_row(y, &c[..cols], |v| v as f64, 0.0, ra as f64, scale, rw, off);
                    }
                    _ if single => {
                        let t = &tile[span];
                        dequant_row(y, t, f64::from, corr as f64, ra as f64, scale, rw, off)
                    }
                    _ => {
                        let t = &wide[span];
                        dequant_row(y, t, |v| v as f64, corr as f64, ra as f64, scale, rw, off)
                    }
                }
            }
        }
    }
}
}

/// `y[j] = scale[j]·(t[j] + corr) + row[j]·r + off[j]` in f64 (`t[j] + corr` is the exact
/// integer sum: both are integers below 2⁵³), rounded to f32 once; inlined into [`task`]'s
/// vector paths.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn dequant_row<T: Copy>(
    y: &mut [MaybeUninit<f32>],
    t: &[T],
    exact: impl Fn(T) -> f64,
    corr: f64,
    r: f64,
    scale: &[f64],
    row: &[f64],
    off: &[f64],
) {
    let n = y
        .len()
        .min(t.len())
        .min(scale.len())
        .min(row.len())
        .min(off.len());
    let (y, t, scale, row, off) = (&mut y[..n], &t[..n], &scale[..n], &row[..n], &off[..n]);
    // Groups of 8 (one 512-bit register of f64) of fixed length, which LLVM unrolls and
    // vectorises whole: a tile of 16 columns is too short for the loop it vectorises by 32.
    let one = |y: &mut MaybeUninit<f32>, t: T, scale: f64, row: f64, off: f64| {
        let c = exact(t) + corr;
        *y = MaybeUninit::new((scale * c + row * r + off) as f32);
    };
    let mut groups = y
        .chunks_exact_mut(8)
        .zip(t.chunks_exact(8))
        .zip(scale.chunks_exact(8).zip(row.chunks_exact(8)))
        .zip(off.chunks_exact(8));
    for (((y, t), (s, w)), o) in &mut groups {
        for j in 0..8 {
            one(&mut y[j], t[j], s[j], w[j], o[j]);
        }
    }
    let whole = n - n % 8;
    for j in whole..n {
        one(&mut y[j], t[j], scale[j], row[j], off[j]);
    }
}

/// The byte rows `a` (`rows` of `stride` bytes, `k` codes each) as the word form's rows:
/// little-endian `i16`, `k` rounded up to 2 terms per step.
fn widen(a: &[u8], rows: usize, k: usize, stride: usize) -> Vec<u8> {
    let lda = k.div_ceil(2) * STEP_BYTES;
    let mut out = vec![0u8; rows * lda];
    for (dst, src) in out.chunks_exact_mut(lda).zip(a.chunks(stride)) {
        for (d, &v) in dst.chunks_exact_mut(2).zip(&src[..k.min(src.len())]) {
            d[0] = v;
        }
    }
    out
}
