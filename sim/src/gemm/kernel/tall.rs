//! AVX-512 tiles of 24 rows on one panel, for the products with at most 16 columns (a conv with
//! 16 output channels, its error product against 16 input channels, their weight gradients).
//!
//! A one-panel tile needs a broadcast of `A` per fused multiply-add, and on a Zen 5 core those
//! loads, not the FMAs, set the pace: a loop held in L1 ran 12 rows at 85 % of the FMA peak,
//! 16 at 88 % and 24 at 91 %. Twenty-four row pointers do not fit in the general registers, so
//! these tiles take rows in three groups of eight equally spaced ones (a strided matrix; eight
//! pixels of one output row; eight terms of one kernel row) and address each group from one
//! pointer and the spacing's multiples, in assembly so that nothing spills. Tiles whose rows do
//! not fall into such groups run the 12-row kernel. Both compute each element as one chain of
//! fused multiply-adds in reduction order.

use std::arch::asm;

use super::x86::{avx512, avx512_read, avx512_write};
use super::{Patches, RowsA, Tile};

/// Rows of a group, addressed from its first row.
const GROUP: usize = 8;
/// Rows of a tall tile.
const TALL: usize = 3 * GROUP;

impl Tile<'_> {
    /// The first row of each group of [`GROUP`] rows and the distance in bytes between adjacent
    /// rows of a group, when the rows of every group are equally far apart (the same distance in
    /// each group).
    fn groups(&self) -> Option<([*const f32; TALL / GROUP], isize)> {
        let first = |g: usize| -> Option<*const f32> {
            let r = g * GROUP;
            match self.a {
                RowsA::Strided { ptr, rs } => Some(ptr.wrapping_offset(r as isize * rs)),
                // Pixels of one output row.
                RowsA::Patches { p, row0 } => {
                    let i = row0 + r;
                    (i % p.ow + GROUP <= p.ow).then(|| p.row(i))
                }
                // Terms of one kernel row.
                RowsA::Terms { p, row0 } => {
                    let i = row0 + r;
                    (i % p.seg + GROUP <= p.seg).then(|| p.row(0).wrapping_offset(p.term(i)))
                }
            }
        };
        let spacing = match self.a {
            RowsA::Strided { rs, .. } => rs,
            RowsA::Patches { p, .. } => p.col_step,
            RowsA::Terms { .. } => 1,
        };
        Some((
            [first(0)?, first(1)?, first(2)?],
            spacing * size_of::<f32>() as isize,
        ))
    }
}

/// A strip on one panel: tall tiles where the rows group, the 12-row kernel on the rest.
///
/// # Safety
/// The CPU runs AVX-512F; the strip is valid (see `kernel::run`), with at most `NR` columns.
#[target_feature(enable = "avx512f")]
#[inline(never)]
pub(super) unsafe fn avx512_narrow(strip: &Tile) {
    // Rows from `rest` on are not yet computed.
    let mut rest = 0;
    for i0 in (0..strip.rows - strip.rows % TALL).step_by(TALL) {
        let t = strip.sub(i0, TALL);
        let Some((first, rs)) = t.groups() else {
            continue;
        };
        if rest < i0 {
            // SAFETY: rows rest..i0 of the valid strip.
            unsafe { avx512(&strip.sub(rest, i0 - rest)) };
        }
        if let RowsA::Patches { p, row0 } = t.a {
            prefetch_new_input(p, row0 + TALL);
        }
        // SAFETY: a whole tile of the strip, its rows grouped as `groups` found.
        unsafe { tall_tile(&t, first, rs) };
        rest = i0 + TALL;
    }
    if rest < strip.rows {
        // SAFETY: the strip's last rows.
        unsafe { avx512(&strip.sub(rest, strip.rows - rest)) };
    }
}

/// Asks for the input that the tile of patches from row `row0` on reads first: its last kernel
/// row, which no output row before it read (the rows above were read by the output rows before
/// and are still in L1). Inside a ResNet-20 training step at batch 128 (its first stage's input,
/// 9.5 MB, in L3) the 16-channel products ran at 67–70 % of the FMA peak without this, 69–75 %
/// with it, and the step at 674–733 against 693–761 img/CPU-s (6 interleaved rounds each); at
/// batch 32 they run at 80 % without it.
#[target_feature(enable = "avx512f")]
#[inline]
fn prefetch_new_input(p: &Patches, row0: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    const LINE: isize = 64 / size_of::<f32>() as isize;
    if row0 >= p.rows {
        return;
    }
    let last = (p.terms / p.seg - 1) as isize * p.seg_step;
    let start = p.row(row0).wrapping_offset(last);
    let span = (TALL - 1) as isize * p.col_step + p.seg as isize;
    for off in (0..span).step_by(LINE as usize) {
        // A hint: it reads nothing and cannot fault.
        _mm_prefetch::<_MM_HINT_T0>(start.wrapping_offset(off) as *const i8);
    }
}

/// One tall tile: row `g·GROUP + r` of `A` at `first[g] + r·rs` bytes.
///
/// # Safety
/// As [`avx512_narrow`], with exactly [`TALL`] valid rows at those addresses.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn tall_tile(t: &Tile, first: [*const f32; TALL / GROUP], rs: isize) {
    // SAFETY: the tile is valid.
    let mut acc = unsafe { avx512_read::<TALL>(t) };
    let bytes = size_of::<f32>() as isize;
    let (csa, rsb) = (t.csa * bytes, t.rsb * bytes);
    let mut b = t.b;
    t.for_each_run(|off, n| {
        debug_assert!(n >= 1);
        let [g0, g1, g2] = first.map(|a| a.wrapping_offset(off));
        let [[c0], [c1], [c2], [c3], [c4], [c5], [c6], [c7], [c8], [c9], [c10], [c11], [c12], [c13], [c14], [c15], [c16], [c17], [c18], [c19], [c20], [c21], [c22], [c23]] =
            &mut acc;
        // SAFETY: the loop reads `n ≥ 1` terms of each row (from `g + r·rs`, stepping `csa`
        // bytes) and `n` rows of the panel (from `b`, stepping `rsb` bytes): valid elements by
        // the caller's contract. It writes only its register operands.
        unsafe {
            asm!(
                "2:",
                "vmovups {bv}, zmmword ptr [{b}]",
                "vfmadd231ps {c0}, {bv}, dword ptr [{g0}]{{1to16}}",
                "vfmadd231ps {c1}, {bv}, dword ptr [{g0} + {rs}]{{1to16}}",
                "vfmadd231ps {c2}, {bv}, dword ptr [{g0} + {rs}*2]{{1to16}}",
                "vfmadd231ps {c3}, {bv}, dword ptr [{g0} + {rs3}]{{1to16}}",
                "vfmadd231ps {c4}, {bv}, dword ptr [{g0} + {rs}*4]{{1to16}}",
                "vfmadd231ps {c5}, {bv}, dword ptr [{g0} + {rs5}]{{1to16}}",
                "vfmadd231ps {c6}, {bv}, dword ptr [{g0} + {rs3}*2]{{1to16}}",
                "vfmadd231ps {c7}, {bv}, dword ptr [{g0} + {rs7}]{{1to16}}",
                "vfmadd231ps {c8}, {bv}, dword ptr [{g1}]{{1to16}}",
                "vfmadd231ps {c9}, {bv}, dword ptr [{g1} + {rs}]{{1to16}}",
                "vfmadd231ps {c10}, {bv}, dword ptr [{g1} + {rs}*2]{{1to16}}",
                "vfmadd231ps {c11}, {bv}, dword ptr [{g1} + {rs3}]{{1to16}}",
                "vfmadd231ps {c12}, {bv}, dword ptr [{g1} + {rs}*4]{{1to16}}",
                "vfmadd231ps {c13}, {bv}, dword ptr [{g1} + {rs5}]{{1to16}}",
                "vfmadd231ps {c14}, {bv}, dword ptr [{g1} + {rs3}*2]{{1to16}}",
                "vfmadd231ps {c15}, {bv}, dword ptr [{g1} + {rs7}]{{1to16}}",
                "vfmadd231ps {c16}, {bv}, dword ptr [{g2}]{{1to16}}",
                "vfmadd231ps {c17}, {bv}, dword ptr [{g2} + {rs}]{{1to16}}",
                "vfmadd231ps {c18}, {bv}, dword ptr [{g2} + {rs}*2]{{1to16}}",
                "vfmadd231ps {c19}, {bv}, dword ptr [{g2} + {rs3}]{{1to16}}",
                "vfmadd231ps {c20}, {bv}, dword ptr [{g2} + {rs}*4]{{1to16}}",
                "vfmadd231ps {c21}, {bv}, dword ptr [{g2} + {rs5}]{{1to16}}",
                "vfmadd231ps {c22}, {bv}, dword ptr [{g2} + {rs3}*2]{{1to16}}",
                "vfmadd231ps {c23}, {bv}, dword ptr [{g2} + {rs7}]{{1to16}}",
                "add {g0}, {csa}",
                "add {g1}, {csa}",
                "add {g2}, {csa}",
                "add {b}, {rsb}",
                "dec {n}",
                "jnz 2b",
                g0 = inout(reg) g0 => _,
                g1 = inout(reg) g1 => _,
                g2 = inout(reg) g2 => _,
                b = inout(reg) b,
                n = inout(reg) n => _,
                rs = in(reg) rs,
                rs3 = in(reg) 3 * rs,
                rs5 = in(reg) 5 * rs,
                rs7 = in(reg) 7 * rs,
                csa = in(reg) csa,
                rsb = in(reg) rsb,
                bv = out(zmm_reg) _,
                c0 = inout(zmm_reg) *c0,
                c1 = inout(zmm_reg) *c1,
                c2 = inout(zmm_reg) *c2,
                c3 = inout(zmm_reg) *c3,
                c4 = inout(zmm_reg) *c4,
                c5 = inout(zmm_reg) *c5,
                c6 = inout(zmm_reg) *c6,
                c7 = inout(zmm_reg) *c7,
                c8 = inout(zmm_reg) *c8,
                c9 = inout(zmm_reg) *c9,
                c10 = inout(zmm_reg) *c10,
                c11 = inout(zmm_reg) *c11,
                c12 = inout(zmm_reg) *c12,
                c13 = inout(zmm_reg) *c13,
                c14 = inout(zmm_reg) *c14,
                c15 = inout(zmm_reg) *c15,
                c16 = inout(zmm_reg) *c16,
                c17 = inout(zmm_reg) *c17,
                c18 = inout(zmm_reg) *c18,
                c19 = inout(zmm_reg) *c19,
                c20 = inout(zmm_reg) *c20,
                c21 = inout(zmm_reg) *c21,
                c22 = inout(zmm_reg) *c22,
                c23 = inout(zmm_reg) *c23,
                options(nostack, readonly),
            );
        }
    });
    // SAFETY: the tile is valid.
    unsafe { avx512_write::<TALL>(t, &acc) };
}
