//! The precision→throughput law every tiled array model implements: how many cycles a tile of a
//! problem takes at given operand bits, and how the array pads reductions and filters.

use crate::workload::gemm::{ConvProblem, OperandBits};
use crate::workload::tile::Tile;

/// How an array computes a tile: the precision→throughput law of one accelerator.
pub trait ArrayLaw {
    /// Cycles to compute one tile of `problem` at `bits`.
    fn tile_cycles(&self, problem: &ConvProblem, tile: &Tile, bits: OperandBits) -> u64;
    /// Filters computed side by side: output-channel tiles are multiples of it and partial-sum
    /// tiles are padded to it.
    fn oc_granule(&self) -> u64;
    /// A reduction length padded to a multiple of the lanes that reduce in parallel.
    fn padded_reduction(&self, len: u64, bits: OperandBits) -> u64;
    /// Input channels a tile's reduction steps through at once: input-channel tiles are multiples
    /// of it (clipped to the channels), so no tile leaves lanes idle. 1 by default (Bit Fusion's
    /// published optimiser tries every power of two).
    fn ic_granule(&self) -> u64 {
        1
    }
    /// Cycles to compute all of `problem` as `tiles` tiles of `tile`: `tiles × tile_cycles` by
    /// default (a partial last tile is computed as a full one).
    fn tiled_cycles(
        &self,
        problem: &ConvProblem,
        tile: &Tile,
        tiles: u64,
        bits: OperandBits,
    ) -> u64 {
        tiles * self.tile_cycles(problem, tile, bits)
    }
    /// Cycles added once per problem on top of its tiles (a pipeline fill); 0 by default.
    fn fixed_cycles(&self, _problem: &ConvProblem, _bits: OperandBits) -> u64 {
        0
    }
    /// Whether DRAM follows Bit Fusion's published simulator: weights and partial sums move padded
    /// to the lanes and filter granule as the buffers hold them, and partial sums are read back as
    /// often as written. Otherwise (every other model) DRAM moves only real elements, and partial
    /// sums are read back only when the reduction is split across tiles (each output's first
    /// store has nothing to add to).
    fn reference_dram_rules(&self) -> bool {
        false
    }
}
