//! The operands as the kernels read them: codes shifted by a zero point into `u8`/`i8` (the
//! byte form) or `i16` (the word form), `A` in rows and `B` in panels of [`PANEL`] columns, the
//! reduction grouped into steps of 4 bytes per row (4 byte codes or 2 word codes), zero-padded.

use ndarray::ArrayView2;
use rayon::prelude::*;

use crate::error::{KernelError, Result};

/// Columns of one `B` panel.
pub(super) const PANEL: usize = 16;
/// Rows of `A` (and columns of `B`) are padded to multiples of these, the largest tile.
pub(super) const ROW_PAD: usize = 8;
pub(super) const COL_PAD: usize = 2 * PANEL;
/// Bytes of one step of a row of `A` (and of each column in a panel).
pub(super) const STEP_BYTES: usize = 4;

/// How the codes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Form {
    /// `A` as `u8`, `B` as `i8`, 4 terms per step.
    Byte,
    /// `A` and `B` as `i16`, 2 terms per step.
    Word,
}

impl Form {
    /// Terms of the reduction per step.
    pub fn terms(self) -> usize {
        match self {
            Form::Byte => 4,
            Form::Word => 2,
        }
    }
}

/// An integer code as a GEMM operand holds it: an `i32`, or an `f32` holding an integer
/// exactly (how the layers keep codes beside their fp32 tensors).
pub trait Code: Copy + Send + Sync {
    /// The code (truncated if [`Code::is_integer`] is false).
    fn int(self) -> i64;
    /// Whether the value is a code: an integer (of magnitude below 2²² for `f32`).
    fn is_integer(self) -> bool;
    /// The smallest and largest code of `x` and whether all are integers (`lo > hi` when empty).
    fn scan(x: &[Self]) -> (i64, i64, bool);
    /// Writes `x − zero` as bytes (`u8`/`i8`) into `dst`; returns `Σ (x − zero)`.
    fn put_bytes(x: &[Self], zero: i32, dst: &mut [u8]) -> i64;
    /// Writes `x − zero` as little-endian `i16` into `dst`; returns `Σ (x − zero)`.
    fn put_words(x: &[Self], zero: i32, dst: &mut [u8]) -> i64;
}

/// Values per inner run of the packing loops (their sums stay within `i32`).
const SUM_RUN: usize = 1024;

/// Defines the packing loops of [`Code`] for one type, compiled for AVX2 too (see
/// [`crate::multiversion`]); `$int` converts one value to `i32` (exact for valid codes).
macro_rules! put_loops {
    ($t:ty, $bytes:ident, $words:ident, $int:expr) => {
        crate::simd::multiversion! {
            fn $bytes(x: &[$t], zero: i32, dst: &mut [u8]) -> i64 {
                let mut total = 0i64;
                for (dc, xc) in dst.chunks_mut(SUM_RUN).zip(x.chunks(SUM_RUN)) {
                    let mut s = 0i32;
                    for (d, &v) in dc.iter_mut().zip(xc) {
                        let c = $int(v).wrapping_sub(zero);
                        *d = c as u8;
                        s = s.wrapping_add(c);
                    }
                    total += i64::from(s);
                }
                total
            }
        }
        crate::simd::multiversion! {
            fn $words(x: &[$t], zero: i32, dst: &mut [u8]) -> i64 {
                let mut total = 0i64;
                for (dc, xc) in dst.chunks_mut(2 * SUM_RUN).zip(x.chunks(SUM_RUN)) {
                    let mut s = 0i32;
                    for (d, &v) in dc.chunks_exact_mut(2).zip(xc) {
                        let c = $int(v).wrapping_sub(zero);
                        d.copy_from_slice(&(c as i16).to_le_bytes());
                        s = s.wrapping_add(c);
                    }
                    total += i64::from(s);
                }
                total
            }
        }
    };
}

/// `1.5 · 2²³`: adding it to an `f32` of magnitude below 2²² leaves the nearest integer in the
/// low mantissa bits.
const MAGIC: f32 = 12_582_912.0;

/// The integer nearest `v` for `|v| < 2²²` (other values give some integer).
#[inline(always)]
fn magic_int(v: f32) -> i32 {
    ((v + MAGIC).to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32)
}

put_loops!(i32, bytes_i32, words_i32, |v: i32| v);
put_loops!(f32, bytes_f32, words_f32, magic_int);

crate::simd::multiversion! {
    fn scan_i32(x: &[i32]) -> (i64, i64, bool) {
        let (mut lo, mut hi) = (i32::MAX, i32::MIN);
        for &v in x {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        (i64::from(lo), i64::from(hi), true)
    }
}

crate::simd::multiversion! {
    /// Codes held in `f32` must be integers of magnitude at most 2²² (else `false`): a value is
    /// one exactly when its [`magic_int`] is in that range and converts back to it.
    fn scan_f32(x: &[f32]) -> (i64, i64, bool) {
        const LIMIT: i32 = 1 << 22;
        let (mut lo, mut hi, mut bad) = (i32::MAX, i32::MIN, 0u32);
        for &v in x {
            let c = magic_int(v);
            lo = lo.min(c);
            hi = hi.max(c);
            bad |= u32::from(c as f32 != v);
        }
        let ok = bad == 0 && (x.is_empty() || (lo >= -LIMIT && hi <= LIMIT));
        (i64::from(lo), i64::from(hi), ok)
    }
}

impl Code for i32 {
    #[inline]
    fn int(self) -> i64 {
        i64::from(self)
    }
    #[inline]
    fn is_integer(self) -> bool {
        true
    }
    fn scan(x: &[Self]) -> (i64, i64, bool) {
        scan_i32(x)
    }
    fn put_bytes(x: &[Self], zero: i32, dst: &mut [u8]) -> i64 {
        bytes_i32(x, zero, dst)
    }
    fn put_words(x: &[Self], zero: i32, dst: &mut [u8]) -> i64 {
        words_i32(x, zero, dst)
    }
}

impl Code for f32 {
    #[inline]
    fn int(self) -> i64 {
        self as i64
    }
    #[inline]
    fn is_integer(self) -> bool {
        self.fract() == 0.0 && self.abs() < 4_194_304.0
    }
    fn scan(x: &[Self]) -> (i64, i64, bool) {
        scan_f32(x)
    }
    fn put_bytes(x: &[Self], zero: i32, dst: &mut [u8]) -> i64 {
        bytes_f32(x, zero, dst)
    }
    fn put_words(x: &[Self], zero: i32, dst: &mut [u8]) -> i64 {
        words_f32(x, zero, dst)
    }
}

/// The smallest and largest code of `v` (`(0, 0)` when empty); an error naming operand
/// `which` if a value is not an integer.
pub(super) fn range<T: Code>(v: ArrayView2<T>, which: &str) -> Result<(i64, i64)> {
    let (lo, hi, exact) = match v.as_slice_memory_order() {
        Some(s) => s.par_chunks(1 << 16).map(T::scan).reduce(
            || (i64::MAX, i64::MIN, true),
            |x, y| (x.0.min(y.0), x.1.max(y.1), x.2 && y.2),
        ),
        None => v
            .iter()
            .fold((i64::MAX, i64::MIN, true), |(lo, hi, ok), &x| {
                (lo.min(x.int()), hi.max(x.int()), ok && x.is_integer())
            }),
    };
    if !exact {
        return Err(KernelError::Invalid {
            what: format!("integer GEMM operand {which}"),
            msg: "a value is not an integer code".into(),
        });
    }
    Ok(if lo > hi { (0, 0) } else { (lo, hi) })
}

/// The zero point `z` that puts codes in `[lo, hi]` into `[min, max]` as `code − z`: 0 when
/// they already are, else `lo − min`; `None` when the range is wider than the target.
pub(super) fn zero_point((lo, hi): (i64, i64), (min, max): (i64, i64)) -> Option<i64> {
    if hi - lo > max - min {
        None
    } else if lo >= min && hi <= max {
        Some(0)
    } else {
        Some(lo - min)
    }
}

/// An error for an operand whose codes span more than 16 bits.
pub(super) fn too_wide(which: &str, (lo, hi): (i64, i64)) -> KernelError {
    KernelError::Invalid {
        what: format!("integer GEMM operand {which}"),
        msg: format!("codes {lo}..={hi} span more than 16 bits"),
    }
}

/// How a code becomes the stored integer: `(code − zero) >> shift & mask` (the mask keeps the
/// low byte of a split operand).
#[derive(Clone, Copy)]
pub(super) struct Shift {
    pub zero: i64,
    pub shift: u32,
    pub low_byte: bool,
}

impl Shift {
    pub fn plain(zero: i64) -> Self {
        Shift {
            zero,
            shift: 0,
            low_byte: false,
        }
    }

    /// The zero point as an `i32` when the shift is a plain one.
    fn plain_zero(self) -> Option<i32> {
        (self.shift == 0 && !self.low_byte)
            .then(|| i32::try_from(self.zero).ok())
            .flatten()
    }

    #[inline]
    fn code<T: Code>(self, x: T) -> i64 {
        let v = (x.int() - self.zero) >> self.shift;
        if self.low_byte {
            v & 0xff
        } else {
            v
        }
    }
}

/// Writes `v` at `dst` in `form` (a `u8`/`i8` byte or a little-endian `i16`).
#[inline]
fn put(dst: &mut [u8], form: Form, v: i64) {
    match form {
        Form::Byte => dst[0] = v as u8,
        Form::Word => dst[..2].copy_from_slice(&(v as i16).to_le_bytes()),
    }
}

/// Steps covering `k` terms.
pub(super) fn steps(k: usize, form: Form) -> usize {
    k.div_ceil(form.terms())
}

fn padded_len(rows: usize, pad: usize, row_bytes: usize) -> Result<usize> {
    rows.div_ceil(pad)
        .checked_mul(pad)
        .and_then(|r| r.checked_mul(row_bytes))
        .ok_or_else(|| KernelError::shape("integer gemm", "operand too large to pack"))
}

/// `A` (`m × k`) packed: rows padded to [`ROW_PAD`], each `steps · 4` bytes; and the sums of
/// each row's stored values.
pub(super) fn pack_a<T: Code>(
    a: ArrayView2<T>,
    form: Form,
    shift: Shift,
) -> Result<(Vec<u8>, Vec<i64>)> {
    let (m, k) = a.dim();
    let row_bytes = steps(k, form) * STEP_BYTES;
    let mut out = vec![0u8; padded_len(m, ROW_PAD, row_bytes)?];
    let width = STEP_BYTES / form.terms();
    if row_bytes == 0 {
        return Ok((out, vec![0; m]));
    }
    let sums = out
        .par_chunks_mut(row_bytes)
        .take(m)
        .enumerate()
        .map(|(i, dst)| {
            let row = a.row(i);
            match (row.as_slice(), shift.plain_zero()) {
                (Some(x), Some(z)) => match form {
                    Form::Byte => T::put_bytes(x, z, dst),
                    Form::Word => T::put_words(x, z, dst),
                },
                _ => row
                    .iter()
                    .enumerate()
                    .map(|(p, &x)| {
                        let v = shift.code(x);
                        put(&mut dst[p * width..], form, v);
                        v
                    })
                    .sum(),
            }
        })
        .collect();
    Ok((out, sums))
}

/// `B` (`k × n`) packed: columns padded to [`COL_PAD`], in panels of [`PANEL`] columns, each
/// `steps` rows of `PANEL × 4` bytes (a column's terms of one step together).
pub(super) fn pack_b<T: Code>(b: ArrayView2<T>, form: Form, shift: Shift) -> Result<Vec<u8>> {
    let (k, n) = b.dim();
    let panel_bytes = steps(k, form) * PANEL * STEP_BYTES;
    let mut out = vec![0u8; padded_len(n, COL_PAD, panel_bytes / PANEL)?];
    let (terms, width) = (form.terms(), STEP_BYTES / form.terms());
    if panel_bytes == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(panel_bytes)
        .enumerate()
        .take(n.div_ceil(PANEL))
        .for_each(|(p, dst)| {
            let cols = p * PANEL..((p + 1) * PANEL).min(n);
            for (kk, row) in b.rows().into_iter().enumerate() {
                let base = (kk / terms) * PANEL * STEP_BYTES + (kk % terms) * width;
                for (j, &x) in row.slice(ndarray::s![cols.clone()]).iter().enumerate() {
                    put(&mut dst[base + j * STEP_BYTES..], form, shift.code(x));
                }
            }
        });
    Ok(out)
}
