//! The blocked GEMM around the microkernels: `B` cut into panels of [`NR`] columns per block of
//! reduction terms (read in place when its columns are adjacent and its rows spread over the L1
//! sets, packed otherwise), `A` read in place, tiles of `C` walked so that a panel stays in L1
//! and a block of `A` in L2.
//!
//! The block sizes only decide the order in which tiles are visited, never the order of any
//! sum (each element of `C` is one fused chain in reduction order, continued from `C` between
//! blocks), so they may be tuned per machine without changing a result.

use std::cell::RefCell;

use super::kernel::{self, RowsA, Runs, Tile, NR};
use super::patches::Patches;
use super::transpose;
use crate::VectorPath;

/// Reduction terms per block when `A` has many rows: a panel of `B` (`KC × NR` floats, 16 KiB)
/// stays in L1 while the rows of `A` stream past it.
const KC: usize = 256;
/// Rows of `A` per block (a multiple of every path's tile height: 4, 6, 8, 12).
const MC: usize = 144;
/// Columns of `B` per block.
const NC: usize = 1024;

/// Reduction terms per block when `A` is a conv's transposed patches (the weight gradient):
/// its output, the whole `terms × C_out` gradient (147 KiB for a 3×3 conv of 64 channels), is
/// re-read and re-written at every block, so its blocks are twice as long as [`KC`]. In a
/// ResNet-20 training step (4 interleaved rounds, one thread) that 576 × 64 gradient ran at
/// 57–64 GFLOP/s with 256-term blocks and 66–72 with 512; the 144- and 288-row ones did not move.
const KC_T: usize = 512;

/// Reduction terms per block for an `A` of `m` rows. A short `A` (the weight gradient's `C_out`
/// rows) is reused by every panel, so its block and one panel should share L1 (16 KiB of it):
/// 128 terms for 16 rows, 64 for 32 or more (measured on the ResNet-20 shapes; any value gives
/// the same result).
fn kc_for(m: usize) -> usize {
    if m >= MC {
        KC
    } else {
        (4096 / (NR + m)).clamp(64, KC) / 32 * 32
    }
}

/// A strided matrix: element `(i, j)` at `ptr + i·rs + j·cs`.
#[derive(Clone, Copy)]
pub(super) struct Strided<P> {
    pub ptr: P,
    pub rs: isize,
    pub cs: isize,
}

impl<P> Strided<P> {
    /// The matrix at `ptr` with ndarray's `strides` (rows, columns).
    pub fn new(ptr: P, strides: &[isize]) -> Self {
        Strided {
            ptr,
            rs: strides[0],
            cs: strides[1],
        }
    }

    fn t(self) -> Self {
        Strided {
            ptr: self.ptr,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// `A` of a product: a strided matrix, or the patches of a convolution read in place (as rows,
/// or transposed: a row per term, a column per output pixel).
#[derive(Clone, Copy)]
pub(super) enum OperandA<'p> {
    Strided(Strided<*const f32>),
    Patches(&'p Patches<'p>),
    PatchesT(&'p Patches<'p>),
}

/// `B` of a product: a strided matrix (cut into panels per block), or one packed beforehand.
#[derive(Clone, Copy)]
pub(super) enum OperandB {
    Strided(Strided<*const f32>),
    /// Panels of [`NR`] columns one after another, each `k` rows of `NR` values (see
    /// [`super::PackedB`]).
    Packed {
        ptr: *const f32,
        k: usize,
    },
}

/// A panel of `B` as the kernels read it: its first element, the distance between its rows, and
/// whether it was packed (into the scratch buffer, or beforehand) or lies in `B` itself.
#[derive(Clone, Copy)]
struct Panel {
    ptr: *const f32,
    rs: isize,
    packed: bool,
}

impl Panel {
    /// Where `next` starts, in floats from this panel, when a wide kernel may read the two
    /// together: rows equally far apart, in the same buffer.
    fn to(&self, next: &Panel) -> Option<isize> {
        (self.rs == next.rs && self.packed == next.packed)
            // SAFETY: both panels lie in one allocation (the packing buffer, the packed `B`, or
            // `B` itself).
            .then(|| unsafe { next.ptr.offset_from(self.ptr) })
    }
}

thread_local! {
    /// The calling thread's packing buffer and panel list, kept across calls.
    static SCRATCH: RefCell<(Vec<f32>, Vec<Panel>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `C[m,n] = A[m,k]·B[k,n]` (or continued from `C` when `accumulate`) on `path`, each element
/// one chain of fused multiply-adds over `k` in order.
///
/// # Safety
/// `path` runs on this CPU; `m, n, k ≥ 1`; `a`, `b`, `c` describe valid `m×k`, `k×n`, `m×n`
/// matrices; `c` aliases neither `a` nor `b`.
pub(super) unsafe fn gemm(
    path: VectorPath,
    (m, n, k): (usize, usize, usize),
    a: OperandA<'_>,
    b: OperandB,
    c: Strided<*mut f32>,
    accumulate: bool,
) {
    // The kernels read and write whole rows of a tile as vectors when C's columns are adjacent:
    // a C stored by columns is computed as Cᵀ = Bᵀ·Aᵀ (patches and packed `B` only come with
    // row-major C).
    if let (OperandA::Strided(a), OperandB::Strided(b)) = (a, b) {
        if c.cs != 1 && c.rs == 1 {
            let (at, bt) = (OperandA::Strided(b.t()), OperandB::Strided(a.t()));
            // SAFETY: the transposed views describe the same valid elements.
            return unsafe { gemm(path, (n, m, k), at, bt, c.t(), accumulate) };
        }
    }
    let kcb = match (a, b) {
        (OperandA::PatchesT(_), _) => KC_T,
        // A panel packed beforehand lies in one run, which streams from L2 or L3 as fast as a
        // short one: the L1 rule of `kc_for` is for panels cut per product. (A Winograd conv's
        // kernels, m = 64 or 128 tiles against 256 or 512 channels in ResNet-50 eval, ran at
        // 60-75 % of peak with 64-term blocks and 78-84 % with 256 or 512.)
        (_, OperandB::Packed { .. }) => KC,
        _ => kc_for(m),
    };
    SCRATCH.with(|scratch| {
        let (buf, panels) = &mut *scratch.borrow_mut();
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            for pc in (0..k).step_by(kcb) {
                let kc = kcb.min(k - pc);
                match b {
                    OperandB::Strided(b) => {
                        let in_place = b.cs == 1 && rows_spread_over_l1(b.rs, kc);
                        // SAFETY: rows pc..pc+kc and columns jc..jc+nc of `b` are valid.
                        unsafe { cut_panels(path, buf, panels, b, in_place, (pc, kc), (jc, nc)) };
                    }
                    OperandB::Packed { ptr, k } => {
                        panels.clear();
                        panels.extend((jc / NR..(jc + nc).div_ceil(NR)).map(|p| Panel {
                            ptr: ptr.wrapping_add((p * k + pc) * NR),
                            rs: NR as isize,
                            packed: true,
                        }));
                    }
                }
                // Terms pc..pc+kc of a row: one run, runs of a patch's kernel rows, or of
                // output rows.
                let (csa, runs) = match a {
                    OperandA::Strided(a) => (
                        a.cs,
                        Runs::Regular {
                            off0: 0,
                            run0: kc,
                            seg: kc,
                            jump: 0,
                        },
                    ),
                    OperandA::Patches(p) => (
                        1,
                        Runs::Regular {
                            off0: p.term(pc),
                            run0: (p.seg - pc % p.seg).min(kc),
                            seg: p.seg,
                            jump: p.seg_step - p.seg as isize,
                        },
                    ),
                    OperandA::PatchesT(p) => (p.col_step, Runs::Pixels { p, p0: pc }),
                };
                for ic in (0..m).step_by(MC) {
                    let mc = MC.min(m - ic);
                    let rows_a = match a {
                        OperandA::Strided(a) => RowsA::Strided {
                            ptr: a
                                .ptr
                                .wrapping_offset(ic as isize * a.rs + pc as isize * a.cs),
                            rs: a.rs,
                        },
                        OperandA::Patches(p) => RowsA::Patches { p, row0: ic },
                        OperandA::PatchesT(p) => RowsA::Terms { p, row0: ic },
                    };
                    let mut p = 0;
                    while p < panels.len() {
                        let j0 = jc + p * NR;
                        let panel = &panels[p];
                        // Two panels at once where the path's kernel takes two per tile.
                        let next = match panels.get(p + 1) {
                            Some(q) if kernel::pairs_panels(path) => panel.to(q),
                            _ => None,
                        };
                        let span = if next.is_some() { 2 } else { 1 };
                        let width = span * NR;
                        p += span;
                        let strip = Tile {
                            a: rows_a,
                            csa,
                            runs,
                            b: panel.ptr,
                            rsb: panel.rs,
                            next: next.unwrap_or(0),
                            kc,
                            c: c.ptr
                                .wrapping_offset(ic as isize * c.rs + j0 as isize * c.cs),
                            rsc: c.rs,
                            csc: c.cs,
                            rows: mc,
                            cols: width.min(n - j0),
                            load: accumulate || pc > 0,
                        };
                        // SAFETY: the strip lies inside the valid matrices; `path` runs here.
                        unsafe { kernel::run(path, &strip) };
                    }
                }
            }
        }
    });
}

/// `b` (`k × n`) packed whole: its panels of [`NR`] columns one after another, each `k` rows of
/// `NR` values, zero beyond the last column — the layout [`gemm`] reads as [`OperandB::Packed`].
///
/// # Safety
/// `b` describes a valid `k × n` matrix; `path` runs on this CPU.
pub(super) unsafe fn pack(
    path: VectorPath,
    b: Strided<*const f32>,
    (k, n): (usize, usize),
) -> Vec<f32> {
    let (mut data, mut panels) = (Vec::new(), Vec::new());
    // SAFETY: forwarded from the caller; every panel is packed (`in_place` is false).
    unsafe { cut_panels(path, &mut data, &mut panels, b, false, (0, k), (0, n)) };
    data
}

/// Whether `kc` rows of `B` `rs` floats apart may be read in place: unless a row stride that is
/// a multiple of a large power of two folds them into a few of the 64 L1 sets. Rows 6 KiB apart
/// use 2 sets: 26 % of loads missed L1 in cachegrind at 768³ against 6 % with the panels
/// packed, and 1536³ ran at 49–52 GFLOP/s against 62–66 packed. The bound (`kc / 16` sets, 16
/// for the usual 256 rows) keeps every ResNet-20 shape as measured before (the fewest sets there:
/// 16, for rows of 64 or 576 floats).
fn rows_spread_over_l1(rs: isize, kc: usize) -> bool {
    const LINE: usize = 64;
    const SETS: usize = 64;
    let bytes = rs.unsigned_abs() * std::mem::size_of::<f32>();
    let period = LINE * SETS;
    let sets = (period / gcd(bytes % period, period)).min(SETS);
    sets * 16 >= kc
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Sets `panels` to the [`NR`]-column panels of rows `p0..p0+kc`, columns `j0..j0+nc` of `b`.
/// With `in_place` (columns adjacent, rows spread over L1), whole panels are read where they are;
/// the others are packed into `buf` (`kc × NR` values, zero beyond the last column).
///
/// # Safety
/// Those rows and columns of `b` are valid elements; `path` runs on this CPU. The pointers are
/// valid while `buf` is not touched again.
unsafe fn cut_panels(
    path: VectorPath,
    buf: &mut Vec<f32>,
    panels: &mut Vec<Panel>,
    b: Strided<*const f32>,
    in_place: bool,
    (p0, kc): (usize, usize),
    (j0, nc): (usize, usize),
) {
    let count = nc.div_ceil(NR);
    let in_place = |p: usize| in_place && (p + 1) * NR <= nc;
    let packed = (0..count).filter(|&p| !in_place(p)).count();
    if buf.len() < packed * kc * NR {
        buf.resize(packed * kc * NR, 0.0);
    }
    let mut next = buf.as_mut_ptr();
    panels.clear();
    panels.extend((0..count).map(|p| {
        let jp = j0 + p * NR;
        let src = b
            .ptr
            .wrapping_offset(p0 as isize * b.rs + jp as isize * b.cs);
        if in_place(p) {
            return Panel {
                ptr: src,
                rs: b.rs,
                packed: false,
            };
        }
        let cols = NR.min(nc - p * NR);
        // SAFETY: `buf` holds `packed` panels; this is one of them.
        let panel = unsafe { std::slice::from_raw_parts_mut(next, kc * NR) };
        next = next.wrapping_add(kc * NR);
        if b.rs == 1 && b.cs != 1 {
            // A transposed matrix: each column is a run of adjacent values (the panel's columns
            // past `cols` come back zero).
            // SAFETY: elements (p0..p0+kc, jp..jp+cols) are valid; `path` runs here.
            unsafe { transpose::columns_into_panel(path, src, b.cs, cols, panel) };
        } else {
            for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
                let src = src.wrapping_offset(i as isize * b.rs);
                let (values, zeros) = row.split_at_mut(cols);
                if b.cs == 1 {
                    // SAFETY: elements (p0+i, jp..jp+cols) are valid and adjacent.
                    values.copy_from_slice(unsafe { std::slice::from_raw_parts(src, cols) });
                } else {
                    for (j, x) in values.iter_mut().enumerate() {
                        // SAFETY: element (p0+i, jp+j) is valid.
                        *x = unsafe { *src.offset(j as isize * b.cs) };
                    }
                }
                zeros.fill(0.0);
            }
        }
        Panel {
            ptr: panel.as_ptr(),
            rs: NR as isize,
            packed: true,
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_panels_in_one_buffer_with_one_row_stride_pair_up() {
        let (b, buf) = ([0.0f32; 64], [0.0f32; 64]);
        let at = |data: &[f32; 64], i: usize, rs: isize, packed: bool| Panel {
            ptr: data[i..].as_ptr(),
            rs,
            packed,
        };
        // Two panels read in place from B's rows, or packed one after the other.
        assert_eq!(at(&b, 0, 40, false).to(&at(&b, 16, 40, false)), Some(16));
        assert_eq!(at(&buf, 0, 16, true).to(&at(&buf, 32, 16, true)), Some(32));
        // A panel of B and a packed last one (different buffers), or different row strides.
        assert_eq!(at(&b, 0, 16, false).to(&at(&buf, 0, 16, true)), None);
        assert_eq!(at(&b, 0, 40, false).to(&at(&b, 16, 16, false)), None);
    }

    #[test]
    fn panels_are_read_in_place_only_when_their_rows_spread_over_l1() {
        // ResNet-20's error GEMM reads W [C_out, 144] in place (576-byte rows: all 64 sets) …
        assert!(rows_spread_over_l1(144, 256));
        assert!(rows_spread_over_l1(27, 128));
        assert!(rows_spread_over_l1(-144, 256));
        // (and the 16 sets of 256-byte or 2304-byte rows) …
        assert!(rows_spread_over_l1(64, 256));
        assert!(rows_spread_over_l1(576, 256));
        // … but rows 6 KiB / 3 KiB / 4 KiB apart fall into 2 / 4 / 1 sets.
        assert!(!rows_spread_over_l1(1536, 256));
        assert!(!rows_spread_over_l1(768, 256));
        assert!(rows_spread_over_l1(768, 64));
        assert!(!rows_spread_over_l1(1024, 64));
    }
}
