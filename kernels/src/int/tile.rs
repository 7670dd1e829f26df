//! Microkernels: the `i32` sums of one `MR × NC` tile of `C` over a run of steps, from packed
//! rows of `A` and one or two packed panels of `B` (see [`super::pack`]). Every add wraps
//! modulo 2³² (the VNNI and `madd` instructions do; the portable one uses wrapping adds), so a
//! tile's value is its exact sum modulo 2³², the same on every path; the driver keeps each run
//! short enough that the exact sum fits in 32 bits.

use super::pack::{Form, PANEL, STEP_BYTES};

/// Row stride of [`TileSums`].
pub(super) const TILE_COLS: usize = 2 * PANEL;
/// Most rows of a tile.
pub(super) const TILE_ROWS: usize = 8;

/// The sums of one tile, `TILE_COLS` per row.
pub(super) type TileSums = [i32; TILE_ROWS * TILE_COLS];

/// Where one tile's rows of `A` are: each row's first byte, and the reduction as `taps` runs of
/// `steps` steps each, run `t` starting `taps[t]` bytes after each row's first byte (a GEMM's
/// packed rows are one run from offset 0; a conv's patches read in place are one run per kernel
/// tap). The runs follow one another in `B`.
pub(super) struct TileRows<'t> {
    pub rows: [*const u8; TILE_ROWS],
    pub taps: &'t [usize],
    pub steps: usize,
}

impl TileRows<'_> {
    /// Rows `lda` bytes apart from `a`, one run of `steps` steps.
    pub fn strided(a: *const u8, lda: usize, steps: usize) -> Self {
        TileRows {
            rows: std::array::from_fn(|r| a.wrapping_add(r * lda)),
            taps: &[0],
            steps,
        }
    }
}

/// A microkernel: `out[r][j] = Σ_s` (step `s` of row `r` of `A`) · (step `s` of column `j`).
///
/// # Safety
/// Each of the first `MR` rows of `a` has its `taps.len()` runs of `steps` steps of 4 bytes;
/// `b` has `taps.len() · steps` panel rows of `PANEL × 4` bytes, and a second panel `next`
/// bytes after it when `NC = 2·PANEL`; the CPU has the kernel's features.
pub(super) type TileFn = unsafe fn(a: &TileRows<'_>, b: *const u8, next: usize, out: &mut TileSums);

/// A microkernel and its tile.
#[derive(Clone, Copy)]
pub(super) struct Kernel {
    pub rows: usize,
    pub cols: usize,
    pub tile: TileFn,
    /// A kernel of the same rows and one panel, for a last panel left alone.
    pub narrow: Option<TileFn>,
}

/// The portable kernel for `form` (4 × 16 tiles).
pub(super) fn portable(form: Form) -> Kernel {
    Kernel {
        rows: 4,
        cols: PANEL,
        tile: match form {
            Form::Byte => portable_byte,
            Form::Word => portable_word,
        },
        narrow: None,
    }
}

/// # Safety
/// As [`TileFn`].
unsafe fn portable_byte(a: &TileRows<'_>, b: *const u8, _next: usize, out: &mut TileSums) {
    portable_tile(a, b, out, |x, y| {
        (0..4).fold(0i32, |s, t| {
            s.wrapping_add(i32::from(x[t]) * i32::from(y[t] as i8))
        })
    })
}

/// # Safety
/// As [`TileFn`].
unsafe fn portable_word(a: &TileRows<'_>, b: *const u8, _next: usize, out: &mut TileSums) {
    let w = |v: &[u8], t: usize| i32::from(i16::from_le_bytes([v[2 * t], v[2 * t + 1]]));
    portable_tile(a, b, out, |x, y| {
        (w(x, 0) * w(y, 0)).wrapping_add(w(x, 1) * w(y, 1))
    })
}

/// The body of the portable kernels: `dot` is one step of one row and one column.
///
/// # Safety
/// As [`TileFn`] for a 4 × [`PANEL`] tile.
#[inline(always)]
unsafe fn portable_tile(
    a: &TileRows<'_>,
    b: *const u8,
    out: &mut TileSums,
    dot: impl Fn(&[u8], &[u8]) -> i32,
) {
    let mut acc = [[0i32; PANEL]; 4];
    let mut p = b;
    for &t in a.taps {
        for s in 0..a.steps {
            // SAFETY: the caller guarantees the runs of 4 rows and the panel's steps.
            let panel = unsafe { std::slice::from_raw_parts(p, PANEL * STEP_BYTES) };
            for (acc, &row) in acc.iter_mut().zip(&a.rows) {
                // SAFETY: as above.
                let x = unsafe { std::slice::from_raw_parts(row.add(t + s * STEP_BYTES), 4) };
                for (j, c) in acc.iter_mut().enumerate() {
                    *c = c.wrapping_add(dot(x, &panel[j * STEP_BYTES..(j + 1) * STEP_BYTES]));
                }
            }
            p = p.wrapping_add(PANEL * STEP_BYTES);
        }
    }
    for (r, row) in acc.iter().enumerate() {
        out[r * TILE_COLS..r * TILE_COLS + PANEL].copy_from_slice(row);
    }
}
