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

/// The smallest and largest code of `v` (`(0, 0)` when empty).
pub(super) fn range(v: ArrayView2<i32>) -> (i64, i64) {
    let (lo, hi) = v
        .iter()
        .fold((i32::MAX, i32::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    if lo > hi {
        (0, 0)
    } else {
        (i64::from(lo), i64::from(hi))
    }
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

    #[inline]
    fn code(self, x: i32) -> i64 {
        let v = (i64::from(x) - self.zero) >> self.shift;
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

/// `A` (`m × k`) packed: rows padded to [`ROW_PAD`], each `steps · 4` bytes.
pub(super) fn pack_a(a: ArrayView2<i32>, form: Form, shift: Shift) -> Result<Vec<u8>> {
    let (m, k) = a.dim();
    let row_bytes = steps(k, form) * STEP_BYTES;
    let mut out = vec![0u8; padded_len(m, ROW_PAD, row_bytes)?];
    let width = STEP_BYTES / form.terms();
    if row_bytes == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(row_bytes)
        .take(m)
        .enumerate()
        .for_each(|(i, dst)| {
            for (p, &x) in a.row(i).iter().enumerate() {
                put(&mut dst[p * width..], form, shift.code(x));
            }
        });
    Ok(out)
}

/// `B` (`k × n`) packed: columns padded to [`COL_PAD`], in panels of [`PANEL`] columns, each
/// `steps` rows of `PANEL × 4` bytes (a column's terms of one step together).
pub(super) fn pack_b(b: ArrayView2<i32>, form: Form, shift: Shift) -> Result<Vec<u8>> {
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
