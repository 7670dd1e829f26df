//! Microkernels: strips of `MR × NR` tiles of `C` from rows of `A` (read in place: a strided
//! matrix, or a convolution's patches in their padded input) and one `kc × NR` panel of `B`
//! (packed, or rows of `B` read in place), or on AVX-512 `8 × 2·NR` tiles from two panels at
//! once: a one-panel tile needs a broadcast of `A` per 512-bit FMA and ran 1536³ at 67 % of the
//! FMA peak on a Zen 5 core, two panels at 91 %. Where only one panel remains, AVX-512 takes
//! tiles of 24 rows when their rows fall into equally spaced groups ([`tall`]).
//!
//! Every path computes each element of `C` as one chain of fused multiply-adds in reduction
//! order, `c ← fma(a[i,p], b[p,j], c)` for `p = 0, 1, …`, starting from `0` or from `C`'s value.
//! The vector width only decides how many elements advance together, so AVX-512, AVX2 and the
//! portable path (`f32::mul_add`, a correctly rounded fused multiply-add on every target) give
//! bit-identical results.

use super::patches::Patches;
use crate::VectorPath;

#[cfg(target_arch = "x86_64")]
mod tall;

/// Columns of one `B` panel, on every path.
pub(super) const NR: usize = 16;

/// Whether `path`'s kernel takes two adjacent panels of `B` per tile (`2·NR` columns): the
/// AVX-512 one, with two vectors of 16 per row of `C`. The others take one.
pub(super) fn pairs_panels(path: VectorPath) -> bool {
    path == VectorPath::Avx512
}

/// Where the rows of `A` start.
#[derive(Clone, Copy)]
pub(super) enum RowsA<'p> {
    /// Row `i` of the strip at `ptr + i·rs`.
    Strided { ptr: *const f32, rs: isize },
    /// Row `i` of the strip is patch `row0 + i`.
    Patches { p: &'p Patches<'p>, row0: usize },
    /// Row `i` of the strip is term `row0 + i` of every patch (the patches transposed).
    Terms { p: &'p Patches<'p>, row0: usize },
}

/// Where the `kc` terms of a row of `A` lie, in runs of adjacent terms `csa` apart.
#[derive(Clone, Copy)]
pub(super) enum Runs<'p> {
    /// The first run has `run0` terms from offset `off0`, each further one `seg` terms, `jump`
    /// floats after the end of the one before (strided `A`: one run of `kc`).
    Regular {
        off0: isize,
        run0: usize,
        seg: usize,
        jump: isize,
    },
    /// The terms are pixels `p0..` of `p`'s output (transposed patches): one run per output
    /// row, from that row's pixel.
    Pixels { p: &'p Patches<'p>, p0: usize },
}

/// The operands of a strip of tiles: `rows` rows of `A` and `C` (any number; the kernels walk
/// them in tiles of their `MR` rows) against one panel of `B`, or two ([`pairs_panels`]). `a` locates
/// `A[i0, p0]`, `b` the panel (`kc` rows of [`NR`] values, `rsb` apart), `c` `C[i0, j0]`; `runs`
/// the terms of a row.
#[derive(Clone, Copy)]
pub(super) struct Tile<'p> {
    pub a: RowsA<'p>,
    pub csa: isize,
    pub runs: Runs<'p>,
    pub b: *const f32,
    /// Distance between rows of the panel (`NR` when packed).
    pub rsb: isize,
    /// Where the next panel starts, in floats from `b` (read when `cols > NR`).
    pub next: isize,
    pub kc: usize,
    pub c: *mut f32,
    pub rsc: isize,
    pub csc: isize,
    /// Rows of the strip (`≥ 1`) and valid columns (`1..=NR`, or up to `2·NR` when `next`
    /// locates a second panel).
    pub rows: usize,
    pub cols: usize,
    /// Continue the chains from `C`'s values (else from zero).
    pub load: bool,
}

impl Tile<'_> {
    /// The tile of rows `i0..i0 + mr` of a strip of `rows` rows (`rows` then counts that tile's
    /// valid rows).
    fn sub(&self, i0: usize, mr: usize) -> Self {
        Tile {
            a: match self.a {
                RowsA::Strided { ptr, rs } => RowsA::Strided {
                    ptr: ptr.wrapping_offset(i0 as isize * rs),
                    rs,
                },
                RowsA::Patches { p, row0 } => RowsA::Patches { p, row0: row0 + i0 },
                RowsA::Terms { p, row0 } => RowsA::Terms { p, row0: row0 + i0 },
            },
            c: self.c.wrapping_offset(i0 as isize * self.rsc),
            rows: mr.min(self.rows - i0),
            ..*self
        }
    }

    /// Copies the valid part of `C` into `buf` (zeros elsewhere).
    ///
    /// # Safety
    /// `c`, `rsc`, `csc`, `rows`, `cols` describe valid elements.
    unsafe fn read<const MR: usize, const W: usize>(&self, buf: &mut [[f32; W]; MR]) {
        for (r, row) in buf.iter_mut().enumerate().take(self.rows) {
            for (j, x) in row.iter_mut().enumerate().take(self.cols) {
                // SAFETY: (r, j) is a valid element of the tile (caller's contract).
                *x = unsafe { *self.c.offset(r as isize * self.rsc + j as isize * self.csc) };
            }
        }
    }

    /// Writes the valid part of `buf` to `C`.
    ///
    /// # Safety
    /// As [`Tile::read`].
    unsafe fn write<const MR: usize, const W: usize>(&self, buf: &[[f32; W]; MR]) {
        for (r, row) in buf.iter().enumerate().take(self.rows) {
            for (j, x) in row.iter().enumerate().take(self.cols) {
                // SAFETY: as in `read`.
                unsafe { *self.c.offset(r as isize * self.rsc + j as isize * self.csc) = *x };
            }
        }
    }

    /// A whole tile of `W` columns of a `C` with unit column stride: read and written as
    /// vectors in place.
    fn contiguous<const MR: usize, const W: usize>(&self) -> bool {
        self.rows == MR && self.cols == W && self.csc == 1
    }

    /// Row pointers of `A`; rows past the valid ones repeat row 0 (computed, never stored).
    ///
    /// # Safety
    /// `a` describes `rows` valid rows.
    // A plain loop, inlined: written with `array::from_fn`, LLVM once called its closure per
    // row out of line (+21 M instructions in a ResNet-20 eval pass at batch 32).
    #[inline(always)]
    unsafe fn rows_of_a<const MR: usize>(&self) -> [*const f32; MR] {
        let mut rows = [std::ptr::null(); MR];
        for (r, row) in rows.iter_mut().enumerate() {
            let r = if r < self.rows { r } else { 0 };
            *row = match self.a {
                RowsA::Strided { ptr, rs } => ptr.wrapping_offset(r as isize * rs),
                RowsA::Patches { p, row0 } => p.row(row0 + r),
                RowsA::Terms { p, row0 } => p.row(0).wrapping_offset(p.term(row0 + r)),
            };
        }
        rows
    }

    /// Calls `f(off, n)` for each run of adjacent terms of the `kc`, in order: `n` terms, the
    /// first at offset `off` from the start of a row of `A`.
    #[inline(always)]
    fn for_each_run(&self, mut f: impl FnMut(isize, usize)) {
        match self.runs {
            Runs::Regular {
                off0,
                run0,
                seg,
                jump,
            } => {
                let (mut off, mut n, mut left) = (off0, run0, self.kc);
                loop {
                    f(off, n);
                    left -= n;
                    if left == 0 {
                        return;
                    }
                    off += n as isize * self.csa + jump;
                    n = seg.min(left);
                }
            }
            Runs::Pixels { p, p0 } => {
                // Divisions once per strip: the runs then step through rows and samples.
                let mut off = p.pixel(p0);
                let (mut oy, mut ox) = (p0 % p.pixels / p.ow, p0 % p.ow);
                let oh = p.pixels / p.ow;
                let mut left = self.kc;
                while left > 0 {
                    let n = (p.ow - ox).min(left);
                    f(off, n);
                    left -= n;
                    ox += n;
                    if ox == p.ow {
                        ox = 0;
                        oy += 1;
                        off += p.row_step - (p.ow - n) as isize * p.col_step;
                        if oy == oh {
                            oy = 0;
                            off += p.sample - oh as isize * p.row_step;
                        }
                    } else {
                        off += n as isize * p.col_step;
                    }
                }
            }
        }
    }
}

/// Runs one strip on `path`.
///
/// # Safety
/// `path` runs on this CPU; the tile's pointers and strides describe valid elements: `rows` rows
/// by `kc` columns of `A`, `kc` rows of `NR` values at `b` (`rsb` apart), `rows × cols` elements
/// of `C`.
pub(super) unsafe fn run(path: VectorPath, t: &Tile) {
    let panels = if pairs_panels(path) { 2 } else { 1 };
    debug_assert!(t.rows >= 1 && (1..=panels * NR).contains(&t.cols));
    match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked that the CPU runs `path`; the tile is valid.
        VectorPath::Avx512 if t.cols > NR => unsafe { x86::avx512_wide(t) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        VectorPath::Avx512 => unsafe { tall::avx512_narrow(t) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        VectorPath::Avx2 => unsafe { x86::avx2(t) },
        // SAFETY: the tile is valid.
        _ => unsafe { portable(t) },
    }
}

const PORTABLE_MR: usize = 4;

/// Scalar fused multiply-adds (vectorised by the compiler where the target has FMA).
///
/// # Safety
/// As [`run`].
unsafe fn portable(strip: &Tile) {
    for i0 in (0..strip.rows).step_by(PORTABLE_MR) {
        // SAFETY: a tile of the valid strip.
        unsafe { portable_tile(&strip.sub(i0, PORTABLE_MR)) };
    }
}

/// One tile of [`portable`].
///
/// # Safety
/// As [`run`], with at most `PORTABLE_MR` rows.
unsafe fn portable_tile(t: &Tile) {
    let mut acc = [[0.0f32; NR]; PORTABLE_MR];
    debug_assert!(t.cols <= NR);
    if t.load {
        // SAFETY: the tile is valid (caller's contract).
        unsafe { t.read(&mut acc) };
    }
    // SAFETY: as above.
    let rows = unsafe { t.rows_of_a::<PORTABLE_MR>() };
    let mut b = t.b;
    t.for_each_run(|mut off, n| {
        for _ in 0..n {
            // SAFETY: `b` walks the `kc` rows of the panel; `off` the `kc` terms of the valid
            // rows of `A`.
            let bv: &[f32; NR] = unsafe { &*(b as *const [f32; NR]) };
            for (row, acc) in rows.iter().zip(acc.iter_mut()) {
                // SAFETY: as above.
                let a = unsafe { *row.offset(off) };
                for (c, &bj) in acc.iter_mut().zip(bv) {
                    *c = a.mul_add(bj, *c);
                }
            }
            b = b.wrapping_offset(t.rsb);
            off += t.csa;
        }
    });
    // SAFETY: as above.
    unsafe { t.write(&acc) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Tile, NR};

    /// `unsafe fn NAME(&Tile)`: a strip in tiles of `MR × W` (the last one `R × W`, `R < MR`,
    /// so no row is computed in vain), each held as `R × NV` vector accumulators of `LANES` lanes
    /// (`W = NV · LANES`: one panel of [`NR`] columns, or two), compiled for `FEATURES`; and
    /// `READ::<R>` / `WRITE::<R>`, which move an `R`-row tile of `C` into and out of such
    /// accumulators (shared with [`super::tall`]).
    macro_rules! microkernel {
        ($name:ident, $tile:ident, $read:ident, $write:ident, $features:literal, $mr:literal,
         [$($tail:literal),*], $nv:literal, $lanes:literal, $vec:ty, $zero:ident, $set1:ident,
         $load:ident, $fmadd:ident, $store:ident) => {
            /// # Safety
            /// The CPU runs `FEATURES`; the strip is valid (see `kernel::run`).
            // Never inlined: the tiles' code then does not depend on the caller (an edit to the
            // blocking loop once cost 8-15 % of the step through a different inlining).
            #[target_feature(enable = $features)]
            #[inline(never)]
            pub(super) unsafe fn $name(strip: &Tile) {
                const MR: usize = $mr;
                // A last tile of fewer than MR/2 rows holds too few accumulators to cover the
                // FMA latency (2 rows of 16: 4 chains for 8 in flight), so it and the whole tile
                // before it run as two tiles of about equal height instead.
                let (mut whole, mut last) = (strip.rows - strip.rows % MR, strip.rows % MR);
                if last > 0 && last < MR / 2 && whole > 0 {
                    whole -= MR;
                    last += MR;
                }
                for i0 in (0..whole).step_by(MR) {
                    // SAFETY: a tile of the valid strip.
                    unsafe { $tile::<MR>(&strip.sub(i0, MR)) };
                }
                let first = if last > MR { last - last / 2 } else { last };
                for (i0, rows) in [(whole, first), (whole + first, last - first)] {
                    let t = &strip.sub(i0, rows);
                    match rows {
                        // SAFETY: as above.
                        $($tail => unsafe { $tile::<$tail>(t) },)*
                        _ => {}
                    }
                }
            }

            /// One `R`-row tile of the strip kernel.
            ///
            /// # Safety
            /// As the strip kernel, with exactly `R` valid rows.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn $tile<const R: usize>(t: &Tile) {
                // SAFETY: the tile is valid.
                let mut acc = unsafe { $read::<R>(t) };
                // SAFETY: the tile is valid.
                let rows = unsafe { t.rows_of_a::<R>() };
                // Rows as byte distances from the first (the rows of one matrix or input), so
                // that one pointer advances through the terms.
                let deltas = rows.map(|r| (r as isize).wrapping_sub(rows[0] as isize));
                // Vector v of a row of the panels: panel v·LANES / NR, from column v·LANES % NR.
                let at: [isize; $nv] = std::array::from_fn(|v| {
                    (v * $lanes / NR) as isize * t.next + (v * $lanes % NR) as isize
                });
                let mut b = t.b;
                t.for_each_run(|off, n| {
                    let mut a0 = rows[0].wrapping_offset(off);
                    for _ in 0..n {
                        // SAFETY: `b` walks the `kc` rows of the panels.
                        let bv: [_; $nv] =
                            std::array::from_fn(|v| unsafe { $load(b.offset(at[v])) });
                        for (&d, acc) in deltas.iter().zip(acc.iter_mut()) {
                            // SAFETY: `a0 + d` walks the `kc` terms of a valid row.
                            let a = $set1(unsafe { *a0.wrapping_byte_offset(d) });
                            for (x, &bv) in acc.iter_mut().zip(&bv) {
                                *x = $fmadd(a, bv, *x);
                            }
                        }
                        b = b.wrapping_offset(t.rsb);
                        a0 = a0.wrapping_offset(t.csa);
                    }
                });
                // SAFETY: the tile is valid.
                unsafe { $write::<R>(t, &acc) };
            }

            /// The accumulators of an `R`-row tile: `C`'s values when the tile continues its
            /// chains, else zero.
            ///
            /// # Safety
            /// As the strip kernel, with exactly `R` valid rows.
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) unsafe fn $read<const R: usize>(t: &Tile) -> [[$vec; $nv]; R] {
                const W: usize = $nv * $lanes;
                const _: () = assert!(W % NR == 0);
                let mut acc = [[$zero(); $nv]; R];
                if !t.load {
                    return acc;
                }
                if t.contiguous::<R, W>() {
                    for (r, acc) in acc.iter_mut().enumerate() {
                        for (v, x) in acc.iter_mut().enumerate() {
                            // SAFETY: a whole tile with unit column stride: row r holds W
                            // consecutive valid elements.
                            *x = unsafe { $load(t.c.offset(r as isize * t.rsc).add(v * $lanes)) };
                        }
                    }
                } else {
                    let mut buf = [[0.0f32; W]; R];
                    // SAFETY: the tile is valid.
                    unsafe { t.read(&mut buf) };
                    for (acc, row) in acc.iter_mut().zip(&buf) {
                        for (v, x) in acc.iter_mut().enumerate() {
                            // SAFETY: `row` holds W values.
                            *x = unsafe { $load(row.as_ptr().add(v * $lanes)) };
                        }
                    }
                }
                acc
            }

            /// Writes an `R`-row tile's accumulators to `C`.
            ///
            /// # Safety
            /// As the strip kernel, with exactly `R` valid rows.
            #[target_feature(enable = $features)]
            #[inline]
            pub(super) unsafe fn $write<const R: usize>(t: &Tile, acc: &[[$vec; $nv]; R]) {
                const W: usize = $nv * $lanes;
                if t.contiguous::<R, W>() {
                    for (r, acc) in acc.iter().enumerate() {
                        for (v, x) in acc.iter().enumerate() {
                            // SAFETY: a whole tile with unit column stride.
                            unsafe { $store(t.c.offset(r as isize * t.rsc).add(v * $lanes), *x) };
                        }
                    }
                } else {
                    let mut buf = [[0.0f32; W]; R];
                    for (acc, row) in acc.iter().zip(buf.iter_mut()) {
                        for (v, x) in acc.iter().enumerate() {
                            // SAFETY: `row` holds W values.
                            unsafe { $store(row.as_mut_ptr().add(v * $lanes), *x) };
                        }
                    }
                    // SAFETY: the tile is valid.
                    unsafe { t.write(&buf) };
                }
            }
        };
    }

    /// An AVX-512 instance of [`microkernel`]: `MR`-row tiles of `NV` 16-lane vectors.
    macro_rules! avx512_microkernel {
        ($name:ident, $tile:ident, $read:ident, $write:ident, $mr:literal, [$($tail:literal),*],
         $nv:literal) => {
            microkernel!(
                $name,
                $tile,
                $read,
                $write,
                "avx512f",
                $mr,
                [$($tail),*],
                $nv,
                16,
                __m512,
                _mm512_setzero_ps,
                _mm512_set1_ps,
                _mm512_loadu_ps,
                _mm512_fmadd_ps,
                _mm512_storeu_ps
            );
        };
    }

    // One panel: 12 rows (the row pointers fill the general registers; 14 spilled them and ran
    // the 16-column shapes at 41 % of the peak instead of 73 %).
    avx512_microkernel!(
        avx512,
        avx512_tile,
        avx512_read,
        avx512_write,
        12,
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        1
    );
    // Two panels: 8 rows of 32 columns (12 rows spilled as well).
    avx512_microkernel!(
        avx512_wide,
        avx512_wide_tile,
        avx512_wide_read,
        avx512_wide_write,
        8,
        [1, 2, 3, 4, 5, 6, 7],
        2
    );
    microkernel!(
        avx2,
        avx2_tile,
        avx2_read,
        avx2_write,
        "avx2,fma",
        6,
        [1, 2, 3, 4, 5],
        2,
        8,
        __m256,
        _mm256_setzero_ps,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_fmadd_ps,
        _mm256_storeu_ps
    );
}
