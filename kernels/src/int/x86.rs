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
use super::tile::{Kernel, TileSums, TILE_COLS};

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

/// Defines a 512-bit kernel over 8 rows and two panels, `$op(acc, a, b)` per step.
macro_rules! kernel512 {
    ($name:ident, $features:literal, $op:expr) => {
        /// # Safety
        /// As [`super::tile::TileFn`] for an 8 × 32 tile.
        #[target_feature(enable = $features)]
        unsafe fn $name(
            a: *const u8,
            lda: usize,
            b: *const u8,
            next: usize,
            steps: usize,
            out: &mut TileSums,
        ) {
            let mut acc = [[_mm512_setzero_si512(); 2]; 8];
            for s in 0..steps {
                // SAFETY: the caller guarantees `steps` steps of the 8 rows and both panels.
                unsafe {
                    let p = b.add(s * PANEL * STEP_BYTES);
                    let b0 = _mm512_loadu_si512(p.cast());
                    let b1 = _mm512_loadu_si512(p.add(next).cast());
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let x = a
                            .add(r * lda + s * STEP_BYTES)
                            .cast::<i32>()
                            .read_unaligned();
                        let x = _mm512_set1_epi32(x);
                        acc[0] = $op(acc[0], x, b0);
                        acc[1] = $op(acc[1], x, b1);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                // SAFETY: row `r` of `out` holds 32 lanes.
                unsafe {
                    let o = out.as_mut_ptr().add(r * TILE_COLS);
                    _mm512_storeu_si512(o.cast(), acc[0]);
                    _mm512_storeu_si512(o.add(PANEL).cast(), acc[1]);
                }
            }
        }
    };
}

/// Defines a 512-bit kernel over 8 rows and one panel, `$op(acc, a, b)` per step (for the last
/// 16 columns, which a two-panel tile would half waste).
macro_rules! kernel512_narrow {
    ($name:ident, $features:literal, $op:expr) => {
        /// # Safety
        /// As [`super::tile::TileFn`] for an 8 × 16 tile.
        #[target_feature(enable = $features)]
        unsafe fn $name(
            a: *const u8,
            lda: usize,
            b: *const u8,
            _next: usize,
            steps: usize,
            out: &mut TileSums,
        ) {
            let mut acc = [_mm512_setzero_si512(); 8];
            for s in 0..steps {
                // SAFETY: the caller guarantees `steps` steps of the 8 rows and the panel.
                unsafe {
                    let b0 = _mm512_loadu_si512(b.add(s * PANEL * STEP_BYTES).cast());
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let x = a
                            .add(r * lda + s * STEP_BYTES)
                            .cast::<i32>()
                            .read_unaligned();
                        *acc = $op(*acc, _mm512_set1_epi32(x), b0);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                // SAFETY: row `r` of `out` holds 32 lanes.
                unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(r * TILE_COLS).cast(), *acc) };
            }
        }
    };
}

/// Defines a 256-bit kernel over 4 rows and one panel (two registers), `$op(acc, a, b)`.
macro_rules! kernel256 {
    ($name:ident, $features:literal, $op:expr) => {
        /// # Safety
        /// As [`super::tile::TileFn`] for a 4 × 16 tile.
        #[target_feature(enable = $features)]
        unsafe fn $name(
            a: *const u8,
            lda: usize,
            b: *const u8,
            _next: usize,
            steps: usize,
            out: &mut TileSums,
        ) {
            let mut acc = [[_mm256_setzero_si256(); 2]; 4];
            for s in 0..steps {
                // SAFETY: the caller guarantees `steps` steps of the 4 rows and the panel.
                unsafe {
                    let p = b.add(s * PANEL * STEP_BYTES);
                    let b0 = _mm256_loadu_si256(p.cast());
                    let b1 = _mm256_loadu_si256(p.add(32).cast());
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let x = a
                            .add(r * lda + s * STEP_BYTES)
                            .cast::<i32>()
                            .read_unaligned();
                        let x = _mm256_set1_epi32(x);
                        acc[0] = $op(acc[0], x, b0);
                        acc[1] = $op(acc[1], x, b1);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                // SAFETY: row `r` of `out` holds 32 lanes.
                unsafe {
                    let o = out.as_mut_ptr().add(r * TILE_COLS);
                    _mm256_storeu_si256(o.cast(), acc[0]);
                    _mm256_storeu_si256(o.add(8).cast(), acc[1]);
                }
            }
        }
    };
}

kernel512!(vnni512_byte, "avx512f,avx512bw,avx512vnni", |c, x, y| {
    _mm512_dpbusd_epi32(c, x, y)
});
kernel512!(vnni512_word, "avx512f,avx512bw,avx512vnni", |c, x, y| {
    _mm512_dpwssd_epi32(c, x, y)
});
kernel512_narrow!(
    vnni512_byte_narrow,
    "avx512f,avx512bw,avx512vnni",
    |c, x, y| { _mm512_dpbusd_epi32(c, x, y) }
);
kernel512_narrow!(
    vnni512_word_narrow,
    "avx512f,avx512bw,avx512vnni",
    |c, x, y| { _mm512_dpwssd_epi32(c, x, y) }
);
kernel256!(vnni256_byte, "avx2,avxvnni", |c, x, y| {
    _mm256_dpbusd_avx_epi32(c, x, y)
});
kernel256!(vnni256_word, "avx2,avxvnni", |c, x, y| {
    _mm256_dpwssd_avx_epi32(c, x, y)
});
kernel256!(avx2_word, "avx2", |c, x, y| {
    _mm256_add_epi32(c, _mm256_madd_epi16(x, y))
});
