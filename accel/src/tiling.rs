//! Loop tiling of one convolution problem against the on-chip buffers, shared by every array model.
//!
//! Tile sizes over batch, output rows/cols (one size for both) and input channels are powers of
//! two, output channels are multiples of the array's filter granule times a power of two. Every
//! order of the five tile loops is tried (loops with one trip are left out, they cannot change the
//! traffic). Each tensor's tile must fit in half of its buffer (double buffering). DRAM traffic
//! follows loop promotion: walking from the innermost loop outward, a tensor's resident extent grows
//! along the loops it depends on while it still fits in half its buffer and is reused across the
//! loops it does not depend on; from the first loop where it no longer fits, every enclosing loop
//! re-fetches it. Partial sums travel at 32 bits: written at every visit, read back at every visit
//! but the first. The best tiling has the fewest total cycles (compute + stalls, see [`crate::dram`]);
//! ties go to the lower energy and then to the first found, so the result is deterministic.

use serde::Serialize;

use crate::dram::{overlap, Timing};
use crate::gemm::{ConvProblem, OperandBits};

/// Bits of one partial sum / output element in flight.
pub const PSUM_BITS: u64 = 32;

/// Tile loops, indexed 0..5 in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Loop {
    /// Batch.
    B,
    /// Output channels.
    Oc,
    /// Output rows.
    Oh,
    /// Output columns.
    Ow,
    /// Input (reduction) channels.
    Ic,
}

const LOOPS: [Loop; 5] = [Loop::B, Loop::Oc, Loop::Oh, Loop::Ow, Loop::Ic];

/// Tile sizes (padded) along the five loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Tile {
    pub b: u64,
    pub oc: u64,
    pub oh: u64,
    pub ow: u64,
    pub ic: u64,
}

impl Tile {
    fn as_array(&self) -> [u64; 5] {
        [self.b, self.oc, self.oh, self.ow, self.ic]
    }
}

/// How an array computes a tile: the precision→throughput law of one accelerator.
pub trait ArrayLaw {
    /// Cycles to compute one (padded) tile of `problem` at `bits`.
    fn tile_cycles(&self, problem: &ConvProblem, tile: &Tile, bits: OperandBits) -> u64;
    /// Output-channel granule: tiles over output channels are this times a power of two.
    fn oc_granule(&self) -> u64;
    /// Reduction slots `ic` input channels occupy in the weight layout (padding to the lanes).
    fn padded_reduction(&self, ic: u64, bits: OperandBits) -> u64;
    /// Output pixels that share one read of a weight from its buffer.
    fn pixel_reuse(&self) -> u64;
}

/// On-chip buffer capacities in bits (whole buffer; tiles may use half).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BufferBits {
    pub input: u64,
    pub weight: u64,
    pub output: u64,
}

/// DRAM traffic of a mapping in bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Traffic {
    /// Streamed-operand (activation) reads.
    pub input: u64,
    /// Stationary-operand (weight) reads.
    pub weight: u64,
    /// Partial sums read back.
    pub output_read: u64,
    /// Outputs / partial sums written.
    pub output_write: u64,
}

impl Traffic {
    /// All DRAM bits moved.
    pub fn total(&self) -> u64 {
        self.input + self.weight + self.output_read + self.output_write
    }
}

/// On-chip buffer accesses of a mapping in bits (array side plus DRAM fills and drains).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SramAccess {
    pub input_read: u64,
    pub input_write: u64,
    pub weight_read: u64,
    pub weight_write: u64,
    pub output_read: u64,
    pub output_write: u64,
}

impl SramAccess {
    /// All SRAM bits accessed.
    pub fn total(&self) -> u64 {
        self.input_read
            + self.input_write
            + self.weight_read
            + self.weight_write
            + self.output_read
            + self.output_write
    }
}

/// A chosen tiling with its cost (one group of the problem).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mapping {
    pub tile: Tile,
    /// Loop order, outermost first (loops with one trip omitted).
    pub order: Vec<Loop>,
    pub timing: Timing,
    pub dram: Traffic,
    pub sram: SramAccess,
}

/// Energy of a candidate, given its timing, DRAM traffic and SRAM accesses (for tie-breaking).
pub type EnergyFn<'a> = dyn Fn(&Timing, &Traffic, &SramAccess) -> f64 + 'a;

/// Everything the search needs besides the problem.
pub struct SearchSpace<'a> {
    pub law: &'a dyn ArrayLaw,
    pub buffers: BufferBits,
    /// DRAM bits per cycle (effective).
    pub dram_bits_per_cycle: f64,
    pub energy: &'a EnergyFn<'a>,
}

/// Why no tiling exists.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TilingError {
    /// Even the smallest tile of some tensor exceeds half its buffer.
    #[error("no tile fits half of the on-chip buffers (smallest tile needs input {input} b, weight {weight} b, output {output} b; buffers hold {buffers:?} b)")]
    NoFit {
        input: u64,
        weight: u64,
        output: u64,
        buffers: BufferBits,
    },
}

fn pow2_ceil(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}

fn pow2_sizes(dim: u64) -> Vec<u64> {
    let top = pow2_ceil(dim);
    std::iter::successors(Some(1u64), |&s| (s < top).then_some(s * 2)).collect()
}

fn granule_sizes(dim: u64, granule: u64) -> Vec<u64> {
    let g = granule.max(1);
    std::iter::successors(Some(g), |&s| (s < dim).then_some(s * 2)).collect()
}

/// Footprints (bits) of the three tensors for given extents along the five loops.
struct Footprint<'a> {
    problem: &'a ConvProblem,
    law: &'a dyn ArrayLaw,
    bits: OperandBits,
    dims: [u64; 5],
}

impl Footprint<'_> {
    fn clip(&self, ext: &[u64; 5]) -> [u64; 5] {
        std::array::from_fn(|i| ext[i].min(self.dims[i]))
    }
    fn input(&self, ext: &[u64; 5]) -> u64 {
        let e = self.clip(ext);
        e[0] * e[4]
            * self.problem.in_rows(e[2])
            * self.problem.in_cols(e[3])
            * u64::from(self.bits.stream)
    }
    fn weight(&self, ext: &[u64; 5]) -> u64 {
        let e = self.clip(ext);
        e[1] * self.problem.taps()
            * self.law.padded_reduction(e[4], self.bits)
            * u64::from(self.bits.stationary)
    }
    fn output(&self, ext: &[u64; 5]) -> u64 {
        let e = self.clip(ext);
        e[0] * e[1] * e[2] * e[3] * PSUM_BITS
    }
}

/// Which loops each tensor depends on (index = loop).
const DEPENDS: [[bool; 5]; 3] = [
    [true, false, true, true, true],   // input: B, OH, OW, IC
    [false, true, false, false, true], // weight: OC, IC
    [true, true, true, true, false],   // output: B, OC, OH, OW
];

/// DRAM bits moved for one tensor under `order` (innermost first) by loop promotion.
fn promoted_traffic(
    tile: &[u64; 5],
    trips: &[u64; 5],
    order_inner_first: &[usize],
    depends: &[bool; 5],
    half_buffer: u64,
    footprint: &dyn Fn(&[u64; 5]) -> u64,
) -> (u64, u64) {
    let mut ext = *tile;
    let mut fetches = 1u64;
    let mut broken = false;
    for &l in order_inner_first {
        if broken {
            fetches *= trips[l];
        } else if depends[l] {
            let mut grown = ext;
            grown[l] = tile[l] * trips[l];
            if footprint(&grown) <= half_buffer {
                ext = grown;
            } else {
                broken = true;
                fetches *= trips[l];
            }
        }
    }
    (fetches, footprint(&ext))
}

/// All permutations of `0..k` (k ≤ 5), generated once per call.
fn permutations(k: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for n in 0..k {
        let mut next = Vec::with_capacity(out.len() * (n + 1));
        for p in &out {
            for pos in 0..=p.len() {
                let mut q = p.clone();
                q.insert(pos, n);
                next.push(q);
            }
        }
        out = next;
    }
    out
}

/// Searches tile sizes and loop orders for `problem` (one group) at `bits`.
pub fn search(
    problem: &ConvProblem,
    bits: OperandBits,
    space: &SearchSpace,
) -> Result<Mapping, TilingError> {
    let law = space.law;
    let fp = Footprint {
        problem,
        law,
        bits,
        dims: [
            problem.batch,
            problem.out_ch,
            problem.out_h,
            problem.out_w,
            problem.in_ch,
        ],
    };
    let half = [
        space.buffers.input / 2,
        space.buffers.weight / 2,
        space.buffers.output / 2,
    ];
    let perms: Vec<Vec<Vec<usize>>> = (0..=5).map(permutations).collect();
    let mut best: Option<(u64, f64, Mapping)> = None;

    let spatial: Vec<(u64, u64)> = {
        let mut v: Vec<(u64, u64)> = pow2_sizes(problem.out_h.max(problem.out_w))
            .into_iter()
            .map(|s| {
                (
                    s.min(pow2_ceil(problem.out_h)),
                    s.min(pow2_ceil(problem.out_w)),
                )
            })
            .collect();
        v.dedup();
        v
    };
    for &oc in granule_sizes(problem.out_ch, law.oc_granule()).iter().rev() {
        for &ic in pow2_sizes(problem.in_ch).iter().rev() {
            for &(oh, ow) in spatial.iter().rev() {
                for &b in pow2_sizes(problem.batch).iter().rev() {
                    let tile = Tile { b, oc, oh, ow, ic };
                    let t = tile.as_array();
                    let first = [fp.input(&t), fp.weight(&t), fp.output(&t)];
                    if first.iter().zip(half).any(|(f, h)| *f > h) {
                        continue;
                    }
                    let trips: [u64; 5] = std::array::from_fn(|i| fp.dims[i].div_ceil(t[i]));
                    let tiles: u64 = trips.iter().product();
                    let compute = tiles * law.tile_cycles(problem, &tile, bits);
                    if let Some((best_total, _, _)) = &best {
                        if compute > *best_total {
                            continue;
                        }
                    }
                    let sram_array = array_side_sram(problem, &tile, tiles, bits, law);
                    let active: Vec<usize> = (0..5).filter(|&i| trips[i] > 1).collect();
                    for perm in &perms[active.len()] {
                        let order: Vec<usize> = perm.iter().map(|&i| active[i]).collect();
                        let traffic = tensor_traffic(&fp, &t, &trips, &order, &half);
                        let timing = overlap(
                            compute,
                            traffic.total(),
                            first[0] + first[1],
                            first[2],
                            space.dram_bits_per_cycle,
                        );
                        let sram = with_fills(sram_array, &traffic);
                        let better = match &best {
                            None => true,
                            Some((bt, be, _)) => {
                                timing.total_cycles < *bt
                                    || (timing.total_cycles == *bt
                                        && (space.energy)(&timing, &traffic, &sram) < *be)
                            }
                        };
                        if better {
                            let energy = (space.energy)(&timing, &traffic, &sram);
                            let order_named = order.iter().rev().map(|&i| LOOPS[i]).collect();
                            best = Some((
                                timing.total_cycles,
                                energy,
                                Mapping {
                                    tile,
                                    order: order_named,
                                    timing,
                                    dram: traffic,
                                    sram,
                                },
                            ));
                        }
                    }
                }
            }
        }
    }
    best.map(|(_, _, m)| m).ok_or_else(|| {
        let one = [1, law.oc_granule(), 1, 1, 1];
        TilingError::NoFit {
            input: fp.input(&one),
            weight: fp.weight(&one),
            output: fp.output(&one),
            buffers: space.buffers,
        }
    })
}

/// DRAM traffic of the three tensors under one loop order (innermost first).
fn tensor_traffic(
    fp: &Footprint,
    tile: &[u64; 5],
    trips: &[u64; 5],
    order: &[usize],
    half: &[u64; 3],
) -> Traffic {
    let (fi, si) = promoted_traffic(tile, trips, order, &DEPENDS[0], half[0], &|e| fp.input(e));
    let (fw, sw) = promoted_traffic(tile, trips, order, &DEPENDS[1], half[1], &|e| fp.weight(e));
    let (fo, so) = promoted_traffic(tile, trips, order, &DEPENDS[2], half[2], &|e| fp.output(e));
    let out_write = fo * so;
    let out_once = fp.output(&fp.dims);
    Traffic {
        input: fi * si,
        weight: fw * sw,
        output_read: out_write.saturating_sub(out_once),
        output_write: out_write,
    }
}

/// Array-side buffer reads and writes (independent of loop order).
fn array_side_sram(
    problem: &ConvProblem,
    tile: &Tile,
    tiles: u64,
    bits: OperandBits,
    law: &dyn ArrayLaw,
) -> SramAccess {
    let pixels = tile.b * tile.oh * tile.ow;
    let reduction = problem.taps() * law.padded_reduction(tile.ic, bits);
    let oc_folds = tile.oc.div_ceil(law.oc_granule().max(1));
    let input_read = tiles * pixels * reduction * oc_folds * u64::from(bits.stream);
    let weight_read = tiles
        * tile.oc
        * reduction
        * pixels.div_ceil(law.pixel_reuse().max(1))
        * u64::from(bits.stationary);
    let psums = tiles * pixels * tile.oc * PSUM_BITS;
    let ic_trips = problem.in_ch.div_ceil(tile.ic);
    SramAccess {
        input_read,
        weight_read,
        output_write: psums,
        output_read: psums - psums / ic_trips.max(1),
        ..SramAccess::default()
    }
}

/// Adds the buffer writes of DRAM fills and the reads of DRAM drains.
fn with_fills(mut s: SramAccess, t: &Traffic) -> SramAccess {
    s.input_write += t.input;
    s.weight_write += t.weight;
    s.output_write += t.output_read;
    s.output_read += t.output_write;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain array: `rows` reduction lanes × `cols` filter lanes, one pixel per cycle.
    struct Plain {
        rows: u64,
        cols: u64,
    }

    impl ArrayLaw for Plain {
        fn tile_cycles(&self, p: &ConvProblem, t: &Tile, _bits: OperandBits) -> u64 {
            t.b * t.oc.div_ceil(self.cols) * t.oh * t.ow * p.taps() * t.ic.div_ceil(self.rows)
        }
        fn oc_granule(&self) -> u64 {
            self.cols
        }
        fn padded_reduction(&self, ic: u64, _bits: OperandBits) -> u64 {
            ic.next_multiple_of(self.rows)
        }
        fn pixel_reuse(&self) -> u64 {
            1
        }
    }

    fn space<'a>(
        law: &'a Plain,
        kib: u64,
        width: f64,
        energy: &'a EnergyFn<'a>,
    ) -> SearchSpace<'a> {
        SearchSpace {
            law,
            buffers: BufferBits {
                input: kib * 8192,
                weight: kib * 8192,
                output: kib * 8192,
            },
            dram_bits_per_cycle: width,
            energy,
        }
    }

    const BITS8: OperandBits = OperandBits {
        stream: 8,
        stationary: 8,
    };

    #[test]
    fn permutations_are_all_distinct() {
        let p = permutations(5);
        assert_eq!(p.len(), 120);
        let mut s = p.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), 120);
        assert_eq!(permutations(0), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn everything_fits_means_compulsory_traffic_only() {
        // 1×1 conv, 4 pixels, 4→4 channels, batch 1: one tile, tensors read / written once.
        let law = Plain { rows: 4, cols: 4 };
        let e = |_: &Timing, t: &Traffic, _: &SramAccess| t.total() as f64;
        let p = ConvProblem::conv(1, 4, 4, 2, 1, 1, 0);
        let m = search(&p, BITS8, &space(&law, 64, 1e6, &e)).unwrap();
        assert_eq!(m.dram.input, 4 * 4 * 8);
        assert_eq!(m.dram.weight, 4 * 4 * 8);
        assert_eq!(m.dram.output_write, 4 * 4 * 32);
        assert_eq!(m.dram.output_read, 0);
        // one tile: 4 pixels × 1 oc fold × 1 ic fold = 4 cycles; memory is one cycle each for the
        // (exposed) first load and last store and hides behind compute otherwise.
        assert_eq!(
            m.tile,
            Tile {
                b: 1,
                oc: 4,
                oh: 2,
                ow: 2,
                ic: 4
            }
        );
        assert_eq!(m.timing.compute_cycles, 4);
        assert_eq!(m.timing.total_cycles, 4 + 1 + 1);
        // a slow interface: the search trades compute for a smaller exposed prologue, and the
        // total is still compute + exposed memory + first load + last store.
        let slow = search(&p, BITS8, &space(&law, 64, 8.0, &e)).unwrap();
        let t = slow.timing;
        assert_eq!(t.mem_cycles, slow.dram.total().div_ceil(8));
        assert!(t.total_cycles >= t.mem_cycles.max(t.compute_cycles));
        // no worse than the single whole tile: 4 + (96 − 4) + 256/8 + 512/8
        assert!(t.total_cycles <= 4 + 92 + 32 + 64);
    }

    #[test]
    fn small_buffers_force_refetch() {
        let law = Plain { rows: 4, cols: 4 };
        let e = |_: &Timing, t: &Traffic, _: &SramAccess| t.total() as f64;
        let p = ConvProblem::conv(4, 64, 64, 16, 3, 1, 1);
        let big = search(&p, BITS8, &space(&law, 1024, 64.0, &e)).unwrap();
        let small = search(&p, BITS8, &space(&law, 1, 64.0, &e)).unwrap();
        let compulsory = (4 * 64 * 18 * 18 + 64 * 64 * 9) * 8 + 4 * 64 * 16 * 16 * 32;
        assert!(big.dram.total() >= compulsory as u64 - 4 * 64 * 8 * (18 * 18 - 16 * 16));
        assert!(small.dram.total() > big.dram.total());
        assert!(small.timing.total_cycles >= big.timing.total_cycles);
    }

    #[test]
    fn impossible_buffers_are_an_error() {
        let law = Plain { rows: 4, cols: 4 };
        let e = |_: &Timing, t: &Traffic, _: &SramAccess| t.total() as f64;
        let p = ConvProblem::conv(1, 4, 4, 2, 7, 1, 3);
        let mut s = space(&law, 1, 8.0, &e);
        s.buffers.weight = 16;
        assert!(matches!(
            search(&p, BITS8, &s),
            Err(TilingError::NoFit { .. })
        ));
    }

    #[test]
    fn promotion_reuses_across_independent_loops() {
        // Weight tile depends on OC, IC only: a batch loop inside (innermost) re-uses it.
        let tile = [1, 1, 1, 1, 1];
        let trips = [4, 2, 1, 1, 1];
        let fpw = |e: &[u64; 5]| e[1] * 10;
        // order innermost first: B then OC; weights fit fully → loaded once.
        let (f, s) = promoted_traffic(&tile, &trips, &[0, 1], &DEPENDS[1], 100, &fpw);
        assert_eq!(f * s, 20);
        // half buffer of 10 bits: OC can't be promoted; B inside still reuses → 2 fetches of 10.
        let (f, s) = promoted_traffic(&tile, &trips, &[0, 1], &DEPENDS[1], 10, &fpw);
        assert_eq!(f * s, 20);
        // B outside the break: weights re-fetched for every batch tile → 8 fetches of 10.
        let (f, s) = promoted_traffic(&tile, &trips, &[1, 0], &DEPENDS[1], 10, &fpw);
        assert_eq!(f * s, 80);
    }
}
