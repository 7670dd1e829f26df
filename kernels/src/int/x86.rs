//! The x86-64 microkernels (see [`super::tile`]): AVX-512 VNNI (`vpdpbusd` on bytes, `vpdpwssd`
//! on words; 8 × 32 tiles), AVX-VNNI (the same instructions on 256-bit registers; 4 × 16) and
//! AVX2 (`vpmaddwd` then `vpaddd` on words; 4 × 16).
//!
//! `vpdpbusd` multiplies *unsigned* bytes of `A` by *signed* bytes of `B` and adds each group of
//! four products to a 32-bit lane, wrapping; `vpdpwssd` and `vpmaddwd` do the same for pairs of
//! signed words. None of them saturates (unlike `vpmaddubsw`, whose 16-bit pair sums would clip
//! `255·127·2`), so the sums are exact modulo 2³².

use std::arch::x86_64::*;

use super::pack::{Form, PANEL, STEP_BYTES};
use super::tile::{Kernel, TileRows, TileSums, TILE_COLS};

/// AVX-512 VNNI on `form`.
pub(super) fn avx512_vnni(form: Form) -> Kernel {
    Kernel {
        rows: 8,
        cols: 2 * PANEL,
        tile: match form {
            Form::Byte => vnni512_byte,
            Form::Word => vnni512_word,
        },
        narrow: Some(match form {
            Form::Byte => vnni512_byte_narrow,
            Form::Word => vnni512_word_narrow,
        }),
    }
}

/// AVX-VNNI (256-bit) on `form`.
pub(super) fn avx_vnni(form: Form) -> Kernel {
    Kernel {
        rows: 4,
        cols: PANEL,
        tile: match form {
            Form::Byte => vnni256_byte,
            Form::Word => vnni256_word,
        },
        narrow: None,
    }
}

/// AVX2 on words (bytes have no exact AVX2 dot product; they are packed as words).
pub(super) fn avx2() -> Kernel {
    Kernel {
        rows: 4,
        cols: PANEL,
        tile: avx2_word,
        narrow: None,
    }
}

/// Defines a kernel over `$rows` rows of `A` and `$regs` registers of `$lanes` 32-bit lanes per
/// row, `$op(acc, a, b)` per step. Register `q` of a step's `B` starts `$offset(q, next)` bytes
/// into the step (`next`: the distance to the next panel); `[$zero, $load, $store, $set1]` are
/// the width's intrinsics.
macro_rules! kernel {
    ($name:ident, $features:literal, $rows:literal x $regs:literal x $lanes:literal, $offset:expr,
     [$zero:ident, $load:ident, $store:ident, $set1:ident], $op:expr) => {
        /// # Safety
        #[doc = concat!(
                    "As [`super::tile::TileFn`] for a tile of ", stringify!($rows), " rows and ",
                    stringify!($regs), " × ", stringify!($lanes), " columns."
                )]
        #[target_feature(enable = $features)]
        unsafe fn $name(a: &TileRows<'_>, b: *const u8, next: usize, out: &mut TileSums) {
            #[allow(clippy::redundant_closure_call)]
            let offset = |q: usize| -> usize { ($offset)(q, next) };
            let mut acc = [[$zero(); $regs]; $rows];
            let mut p = b;
            for &t in a.taps {
                let rows: [*const u8; $rows] = std::array::from_fn(|r| a.rows[r].wrapping_add(t));
                for s in 0..a.steps {
                    // SAFETY: the caller guarantees the runs of the rows and the steps of the
                    // panels the registers read.
                    unsafe {
                        let mut y = [$zero(); $regs];
                        for (q, y) in y.iter_mut().enumerate() {
                            *y = $load(p.add(offset(q)).cast());
                        }
                        for (acc, &row) in acc.iter_mut().zip(&rows) {
                            let x = row.add(s * STEP_BYTES).cast::<i32>().read_unaligned();
                            let x = $set1(x);
                            for (acc, &y) in acc.iter_mut().zip(&y) {
                                *acc = $op(*acc, x, y);
                            }
                        }
                    }
                    p = p.wrapping_add(PANEL * STEP_BYTES);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                for (q, &v) in acc.iter().enumerate() {
                    // SAFETY: row `r` of `out` holds `TILE_COLS` ≥ `$regs · $lanes` lanes.
                    unsafe { $store(out.as_mut_ptr().add(r * TILE_COLS + q * $lanes).cast(), v) };
                }
            }
        }
    };
}

/// A [`kernel!`] on 512-bit registers of 16 lanes, with AVX-512 VNNI.
macro_rules! kernel512 {
    ($name:ident, $rows:literal x $regs:literal, $offset:expr, $op:expr) => {
        kernel!($name, "avx512f,avx512bw,avx512vnni", $rows x $regs x 16, $offset,
            [_mm512_setzero_si512, _mm512_loadu_si512, _mm512_storeu_si512, _mm512_set1_epi32],
            $op);
    };
}

/// A [`kernel!`] on 256-bit registers of 8 lanes, the two halves of one panel.
macro_rules! kernel256 {
    ($name:ident, $features:literal, $op:expr) => {
        kernel!($name, $features, 4 x 2 x 8, |q, _| q * 32,
            [_mm256_setzero_si256, _mm256_loadu_si256, _mm256_storeu_si256, _mm256_set1_epi32],
            $op);
    };
}

// Two panels (the second `next` bytes on), or the first alone for the last 16 columns, which a
// two-panel tile would half waste.
kernel512!(vnni512_byte, 8 x 2, |q, next| q * next, |c, x, y| _mm512_dpbusd_epi32(c, x, y));
kernel512!(vnni512_word, 8 x 2, |q, next| q * next, |c, x, y| _mm512_dpwssd_epi32(c, x, y));
kernel512!(vnni512_byte_narrow, 8 x 1, |_, _| 0, |c, x, y| _mm512_dpbusd_epi32(c, x, y));
kernel512!(vnni512_word_narrow, 8 x 1, |_, _| 0, |c, x, y| _mm512_dpwssd_epi32(c, x, y));
kernel256!(vnni256_byte, "avx2,avxvnni", |c, x, y| {
    _mm256_dpbusd_avx_epi32(c, x, y)
});
kernel256!(vnni256_word, "avx2,avxvnni", |c, x, y| {
    _mm256_dpwssd_avx_epi32(c, x, y)
});
kernel256!(avx2_word, "avx2", |c, x, y| _mm256_add_epi32(
    c,
    _mm256_madd_epi16(x, y)
));
