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

/// Walks the rows of a strip's `A` by groups of [`GROUP`]: where each group's first row lies,
/// and whether its rows are equally spaced, with no division per group.
enum Groups<'p> {
    /// Every group of a strided matrix: the next one at `next`, `step` floats apart.
    Strided { next: *const f32, step: isize },
    /// The group from pixel `x` of output row `y` of sample `n`: spaced when it ends in that row.
    Pixels {
        p: &'p Patches<'p>,
        n: usize,
        y: usize,
        x: usize,
    },
    /// The group from term `off` of kernel row `row`: spaced when it ends in that kernel row.
    Terms {
        p: &'p Patches<'p>,
        row: usize,
        off: usize,
    },
}

impl<'p> Groups<'p> {
    /// The groups from the strip's first row on.
    fn new(a: RowsA<'p>) -> Self {
        match a {
            RowsA::Strided { ptr, rs } => Groups::Strided {
                next: ptr,
                step: GROUP as isize * rs,
            },
            RowsA::Patches { p, row0 } => {
                let q = row0 % p.pixels;
                Groups::Pixels {
                    p,
                    n: row0 / p.pixels,
                    y: q / p.ow,
                    x: q % p.ow,
                }
            }
            RowsA::Terms { p, row0 } => Groups::Terms {
                p,
                row: row0 / p.seg,
                off: row0 % p.seg,
            },
        }
    }

    /// Distance in bytes between adjacent rows of a spaced group.
    fn spacing(a: RowsA) -> isize {
        size_of::<f32>() as isize
            * match a {
                RowsA::Strided { rs, .. } => rs,
                RowsA::Patches { p, .. } => p.col_step,
                RowsA::Terms { .. } => 1,
            }
    }

    /// The first row of the group at hand.
    fn first(&self) -> *const f32 {
        match *self {
            Groups::Strided { next, .. } => next,
            Groups::Pixels { p, n, y, x } => p.base.wrapping_offset(
                n as isize * p.sample + y as isize * p.row_step + x as isize * p.col_step,
            ),
            Groups::Terms { p, row, off } => p
                .base
                .wrapping_offset(row as isize * p.seg_step + off as isize),
        }
    }

    /// The group at hand's first row when its rows are equally spaced; moves on to the next.
    fn next(&mut self) -> Option<*const f32> {
        let first = self.first();
        let spaced = match self {
            Groups::Strided { next, step } => {
                *next = next.wrapping_offset(*step);
                true
            }
            Groups::Pixels { p, n, y, x } => {
                let spaced = *x + GROUP <= p.ow;
                *x += GROUP;
                while *x >= p.ow {
                    *x -= p.ow;
                    *y += 1;
                    if *y * p.ow == p.pixels {
                        *y = 0;
                        *n += 1;
                    }
                }
                spaced
            }
            Groups::Terms { p, row, off } => {
                let spaced = *off + GROUP <= p.seg;
                *off += GROUP;
                while *off >= p.seg {
                    *off -= p.seg;
                    *row += 1;
                }
                spaced
            }
        };
        spaced.then_some(first)
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
    let mut groups = Groups::new(strip.a);
    let rs = Groups::spacing(strip.a);
    let new_input = NewInput::of(strip.a);
    for i0 in (0..strip.rows - strip.rows % TALL).step_by(TALL) {
        let first = [groups.next(), groups.next(), groups.next()];
        let [Some(g0), Some(g1), Some(g2)] = first else {
            continue;
        };
        if rest < i0 {
            // SAFETY: rows rest..i0 of the valid strip.
            unsafe { avx512(&strip.sub(rest, i0 - rest)) };
        }
        let t = strip.sub(i0, TALL);
        if let (Some(input), RowsA::Patches { p, row0 }) = (&new_input, t.a) {
            if row0 + TALL < p.rows {
                input.prefetch(groups.first());
            }
        }
        // SAFETY: a whole tile of the strip, its rows grouped as `groups` found.
        unsafe { tall_tile(&t, [g0, g1, g2], rs) };
        rest = i0 + TALL;
    }
    if rest < strip.rows {
        // SAFETY: the strip's last rows.
        unsafe { avx512(&strip.sub(rest, strip.rows - rest)) };
    }
}

/// The input a tile of patches reads first: its last kernel row, which no output row before it
/// read (the rows above were read by the output rows before and are still in L1). Inside a
/// ResNet-20 training step at batch 128 (its first stage's input, 9.5 MB, in L3) the 16-channel
/// products ran at 67–70 % of the FMA peak without asking for it ahead, 69–75 % with, and the
/// step at 674–733 against 693–761 img/CPU-s (6 interleaved rounds each); at batch 32 they run
/// at 80 % without it.
struct NewInput {
    /// Offset of the last kernel row from a patch's first term, and the floats a tile's rows
    /// span in it.
    last: isize,
    span: isize,
}

impl NewInput {
    /// For a strip of patches (computed once per strip).
    fn of(a: RowsA) -> Option<Self> {
        let RowsA::Patches { p, .. } = a else {
            return None;
        };
        Some(NewInput {
            last: (p.terms / p.seg - 1) as isize * p.seg_step,
            span: (TALL - 1) as isize * p.col_step + p.seg as isize,
        })
    }

    /// Asks for the new input of the tile whose first group starts at `first`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn prefetch(&self, first: *const f32) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64 / size_of::<f32>();
        let start = first.wrapping_offset(self.last);
        for off in (0..self.span).step_by(LINE) {
            // A hint: it reads nothing and cannot fault.
            _mm_prefetch::<_MM_HINT_T0>(start.wrapping_offset(off) as *const i8);
        }
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
                c0 = inout(zmm_reg) acc[0][0],
                c1 = inout(zmm_reg) acc[1][0],
                c2 = inout(zmm_reg) acc[2][0],
                c3 = inout(zmm_reg) acc[3][0],
                c4 = inout(zmm_reg) acc[4][0],
                c5 = inout(zmm_reg) acc[5][0],
                c6 = inout(zmm_reg) acc[6][0],
                c7 = inout(zmm_reg) acc[7][0],
                c8 = inout(zmm_reg) acc[8][0],
                c9 = inout(zmm_reg) acc[9][0],
                c10 = inout(zmm_reg) acc[10][0],
                c11 = inout(zmm_reg) acc[11][0],
                c12 = inout(zmm_reg) acc[12][0],
                c13 = inout(zmm_reg) acc[13][0],
                c14 = inout(zmm_reg) acc[14][0],
                c15 = inout(zmm_reg) acc[15][0],
                c16 = inout(zmm_reg) acc[16][0],
                c17 = inout(zmm_reg) acc[17][0],
                c18 = inout(zmm_reg) acc[18][0],
                c19 = inout(zmm_reg) acc[19][0],
                c20 = inout(zmm_reg) acc[20][0],
                c21 = inout(zmm_reg) acc[21][0],
                c22 = inout(zmm_reg) acc[22][0],
                c23 = inout(zmm_reg) acc[23][0],
                options(nostack, readonly),
            );
        }
    });
    // SAFETY: the tile is valid.
    unsafe { avx512_write::<TALL>(t, &acc) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::PatchGeometry;

    #[test]
    fn groups_follow_the_rows_and_flag_each_one_that_stays_in_its_output_or_kernel_row() {
        // 3 samples of 5 × 11 outputs (rows of 11 pixels), 3 × 2 kernel over 4 channels (kernel
        // rows of 8 terms), stride (2, 1), dilation 2.
        let g = PatchGeometry {
            padded: [13, 12, 4],
            out: (5, 11),
            kernel: (3, 2),
            stride: (2, 1),
            dilation_y: 2,
        };
        let x = vec![0.0f32; 3 * 13 * 12 * 4];
        let p = Patches::new(&x, 3, g).unwrap();
        let (rows, terms) = p.dim();
        for row0 in [0, 3, 8, 11, 54, 60] {
            let mut groups = Groups::new(RowsA::Patches { p: &p, row0 });
            for i in (row0..rows - GROUP).step_by(GROUP) {
                let spaced = i % p.ow + GROUP <= p.ow;
                assert_eq!(
                    groups.next(),
                    spaced.then(|| p.row(i)),
                    "pixel {i} from {row0}"
                );
            }
        }
        for row0 in [0, 5, 8, 16] {
            let mut groups = Groups::new(RowsA::Terms { p: &p, row0 });
            for t in (row0..terms - GROUP).step_by(GROUP) {
                let at = p.row(0).wrapping_offset(p.term(t));
                assert_eq!(groups.next(), (t % p.seg == 0).then_some(at), "term {t}");
            }
        }
        assert_eq!(Groups::spacing(RowsA::Patches { p: &p, row0: 0 }), 16);
        assert_eq!(Groups::spacing(RowsA::Terms { p: &p, row0: 0 }), 4);
    }
}
