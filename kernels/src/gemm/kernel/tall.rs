//! AVX-512 tiles of 24 or 27 rows on one panel, for the products with at most 16 columns (a conv
//! with 16 output channels, its error product against 16 input channels, their weight gradients).
//!
//! A one-panel tile needs a broadcast of `A` per fused multiply-add, and on a Zen 5 core those
//! loads, not the FMAs, set the pace: a loop held in L1 ran 12 rows at 85 % of the FMA peak,
//! 16 at 88 % and 24 at 91 %. Twenty-four row pointers do not fit in the general registers, so
//! these tiles take rows in three groups of eight equally spaced ones (a strided matrix; eight
//! pixels of one output row; eight terms of one kernel row) and address each group from one
//! pointer and the spacing's multiples, in assembly so that nothing spills. Where rows group by
//! nine but not by eight (a 3-channel conv's kernel rows of 9 terms: conv1's weight gradient,
//! whose 27 rows then make one tile), a strip takes three groups of nine instead. Tiles whose
//! rows do not fall into such groups run the 12-row kernel. All compute each element as one
//! chain of fused multiply-adds in reduction order.

use std::arch::asm;

use super::x86::{avx512, avx512_read, avx512_write};
use super::{Patches, RowsA, Tile};

/// Groups of a tall tile.
const GROUPS: usize = 3;

/// Walks the rows of a strip's `A` by groups of `G` rows: where each group's first row lies, and
/// whether its rows are equally spaced, with no division per group.
enum Groups<'p, const G: usize> {
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

impl<'p, const G: usize> Groups<'p, G> {
    /// The groups from the strip's first row on.
    fn new(a: RowsA<'p>) -> Self {
        match a {
            RowsA::Strided { ptr, rs } => Groups::Strided {
                next: ptr,
                step: G as isize * rs,
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
                let spaced = *x + G <= p.ow;
                *x += G;
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
                let spaced = *off + G <= p.seg;
                *off += G;
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
    // SAFETY: the caller's contract.
    unsafe {
        match by_nine(strip) {
            true => narrow::<9>(strip),
            false => narrow::<8>(strip),
        }
    }
}

/// Whether the strip's rows group by nine but not by eight: the unit they must not cross (an
/// output row of pixels, a kernel row of terms, or a strided strip's rows) is a multiple of 9
/// and not of 8.
fn by_nine(strip: &Tile) -> bool {
    let unit = match strip.a {
        RowsA::Strided { .. } => strip.rows,
        RowsA::Patches { p, .. } => p.ow,
        RowsA::Terms { p, .. } => p.seg,
    };
    unit % 9 == 0 && unit % 8 != 0
}

/// [`avx512_narrow`] with groups of `G` rows (8 or 9): tall tiles of `3·G`.
///
/// # Safety
/// As [`avx512_narrow`].
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn narrow<const G: usize>(strip: &Tile) {
    let tall = GROUPS * G;
    // Rows from `rest` on are not yet computed.
    let mut rest = 0;
    let mut groups = Groups::<G>::new(strip.a);
    let rs = Groups::<G>::spacing(strip.a);
    let new_input = NewInput::of(strip.a, tall);
    for i0 in (0..strip.rows - strip.rows % tall).step_by(tall) {
        let first = [groups.next(), groups.next(), groups.next()];
        let [Some(g0), Some(g1), Some(g2)] = first else {
            continue;
        };
        if rest < i0 {
            // SAFETY: rows rest..i0 of the valid strip.
            unsafe { avx512(&strip.sub(rest, i0 - rest)) };
        }
        let t = strip.sub(i0, tall);
        if let (Some(input), RowsA::Patches { p, row0 }) = (&new_input, t.a) {
            if row0 + tall < p.rows {
                input.prefetch(groups.first());
            }
        }
        // SAFETY: a whole tile of the strip, its rows grouped as `groups` found (direct calls,
        // so each inlines here).
        unsafe {
            match G {
                9 => tall_tile_27(&t, [g0, g1, g2], rs),
                _ => tall_tile_24(&t, [g0, g1, g2], rs),
            }
        };
        rest = i0 + tall;
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
    /// For a strip of patches in tiles of `tall` rows (computed once per strip).
    fn of(a: RowsA, tall: usize) -> Option<Self> {
        let RowsA::Patches { p, .. } = a else {
            return None;
        };
        Some(NewInput {
            last: (p.terms / p.seg - 1) as isize * p.seg_step,
            span: (tall - 1) as isize * p.col_step + p.seg as isize,
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

/// `unsafe fn NAME(&Tile, first, rs)`, a tall tile of `R` rows: `[acc-name, group, offset,
/// row]` per row, the offset from the group's first row in multiples of the spacing (`rs`, and
/// `rs3`, `rs5`, `rs7` for 3, 5 and 7 times it).
macro_rules! tall_tile {
    ($name:ident, $r:literal, $([$c:ident, $g:ident, $off:literal, $i:literal]),* $(,)?) => {
        /// # Safety
        /// As [`avx512_narrow`], with exactly `R` valid rows, row `g·R/3 + r` of `A` at
        /// `first[g] + r·rs` bytes.
        #[target_feature(enable = "avx512f")]
        #[inline]
        unsafe fn $name(t: &Tile, first: [*const f32; GROUPS], rs: isize) {
            // SAFETY: the tile is valid.
            let mut acc = unsafe { avx512_read::<$r>(t) };
            let bytes = size_of::<f32>() as isize;
            let (csa, rsb) = (t.csa * bytes, t.rsb * bytes);
            let mut b = t.b;
            t.for_each_run(|off, n| {
                debug_assert!(n >= 1);
                let [g0, g1, g2] = first.map(|a| a.wrapping_offset(off));
                // SAFETY: the loop reads `n ≥ 1` terms of each row (from `g + r·rs`, stepping
                // `csa` bytes) and `n` rows of the panel (from `b`, stepping `rsb` bytes): valid
                // elements by the caller's contract. It writes only its register operands.
                unsafe {
                    asm!(
                        "2:",
                        "vmovups {bv}, zmmword ptr [{b}]",
                        $(concat!("vfmadd231ps {", stringify!($c), "}, {bv}, dword ptr [{",
                            stringify!($g), "}", $off, "]{{1to16}}"),)*
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
                        $($c = inout(zmm_reg) acc[$i][0],)*
                        options(nostack, readonly),
                    );
                }
            });
            // SAFETY: the tile is valid.
            unsafe { avx512_write::<$r>(t, &acc) };
        }
    };
}

/// A tall tile from its three groups of accumulators (`NAME, R, g0: [c0 0 c1 1 …], g1: […],
/// g2: […]`, each accumulator with its row): pairs each group's rows with their offsets from the
/// group's first row (`rs` times 0, 1, …, 8) and hands the rows to [`tall_tile!`].
macro_rules! tall_tile_of_groups {
    (@zip $name:ident, $r:literal, [$($row:tt)*], $g:ident,
        [$c:ident $i:literal $($cn:ident $in:literal)*], [$off:literal $(, $offn:literal)*],
        $($rest:tt)*) => {
        tall_tile_of_groups!(@zip $name, $r, [$($row)* [$c, $g, $off, $i],], $g,
            [$($cn $in)*], [$($offn),*], $($rest)*);
    };
    (@zip $name:ident, $r:literal, [$($row:tt)*], $g:ident, [], [$($offn:literal),*],
        $($rest:tt)*) => {
        tall_tile_of_groups!(@groups $name, $r, [$($row)*], $($rest)*);
    };
    (@groups $name:ident, $r:literal, [$($row:tt)*], $g:ident: [$($c:ident $i:literal)*]
        $(, $($rest:tt)*)?) => {
        tall_tile_of_groups!(@zip $name, $r, [$($row)*], $g, [$($c $i)*],
            ["", " + {rs}", " + {rs}*2", " + {rs3}", " + {rs}*4", " + {rs5}", " + {rs3}*2",
                " + {rs7}", " + {rs}*8"], $($($rest)*)?);
    };
    (@groups $name:ident, $r:literal, [$($row:tt)*], ) => {
        tall_tile!($name, $r, $($row)*);
    };
    ($name:ident, $r:literal, $($groups:tt)*) => {
        tall_tile_of_groups!(@groups $name, $r, [], $($groups)*);
    };
}

tall_tile_of_groups!(
    tall_tile_24,
    24,
    g0: [c0 0 c1 1 c2 2 c3 3 c4 4 c5 5 c6 6 c7 7],
    g1: [c8 8 c9 9 c10 10 c11 11 c12 12 c13 13 c14 14 c15 15],
    g2: [c16 16 c17 17 c18 18 c19 19 c20 20 c21 21 c22 22 c23 23],
);

tall_tile_of_groups!(
    tall_tile_27,
    27,
    g0: [c0 0 c1 1 c2 2 c3 3 c4 4 c5 5 c6 6 c7 7 c8 8],
    g1: [c9 9 c10 10 c11 11 c12 12 c13 13 c14 14 c15 15 c16 16 c17 17],
    g2: [c18 18 c19 19 c20 20 c21 21 c22 22 c23 23 c24 24 c25 25 c26 26],
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::PatchGeometry;

    /// Walks groups of `G` from several first rows of `p`'s pixels and of its terms, checking
    /// each group's first row and whether it is flagged as equally spaced.
    fn check_groups<const G: usize>(p: &Patches) {
        let (rows, terms) = p.dim();
        for row0 in [0, 3, 8, 11, 54, 60] {
            let mut groups = Groups::<G>::new(RowsA::Patches { p, row0 });
            for i in (row0..rows - G).step_by(G) {
                let spaced = i % p.ow + G <= p.ow;
                let want = spaced.then(|| p.row(i));
                assert_eq!(groups.next(), want, "G {G}: pixel {i} from {row0}");
            }
        }
        for row0 in [0, 5, 8, 9, 16] {
            let mut groups = Groups::<G>::new(RowsA::Terms { p, row0 });
            for t in (row0..terms - G).step_by(G) {
                let at = p.row(0).wrapping_offset(p.term(t));
                let spaced = t % p.seg + G <= p.seg;
                assert_eq!(groups.next(), spaced.then_some(at), "G {G}: term {t}");
            }
        }
    }

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
        check_groups::<8>(&p);
        check_groups::<9>(&p);
        assert_eq!(Groups::<8>::spacing(RowsA::Patches { p: &p, row0: 0 }), 16);
        assert_eq!(Groups::<9>::spacing(RowsA::Terms { p: &p, row0: 0 }), 4);
        // conv1's geometry at a small size: 3 channels, 3 × 3 kernel (kernel rows of 9 terms),
        // 6 × 9 outputs (rows of 9 pixels).
        let g = PatchGeometry {
            padded: [8, 11, 3],
            out: (6, 9),
            kernel: (3, 3),
            stride: (1, 1),
            dilation_y: 1,
        };
        let x = vec![0.0f32; 2 * 8 * 11 * 3];
        let p = Patches::new(&x, 2, g).unwrap();
        check_groups::<8>(&p);
        check_groups::<9>(&p);
    }
}
