//! Eyeriss's row-stationary (RS) dataflow (Chen, Emer & Sze, ISCA 2016; Chen et al., JSSC 2017)
//! on the array of [`crate::architecture::eyeriss`]: its mapping search and data-movement model
//! (not the shared tiler of the other arrays).
//!
//! **Compute.** RS maps the 2-D convolution of one channel, one filter and one image onto a
//! *logical PE set* of `R × E` PEs — filter rows down, output rows across — each PE running the
//! 1-D convolution of one filter row over one ifmap row (`S·F` MACs). Sets wider than the array
//! are strip-mined into `⌈E/e⌉` strips of `e ≤ cols` output rows; taller ones are folded over
//! `⌈R/rows⌉` passes. Inside a PE the scratchpads hold `q` channels (`q·S ≤` ifmap spad) of `p`
//! filters (`p·q·S ≤` filter spad, `p ≤` psum spad). In the array, `r` sets of different
//! channels are stacked in a column (their partial sums chain upward) and that stack is copied
//! `t` times for different filters. A *pass* computes `p·t` filters × `q·r` channels × one strip
//! for `n` images in turn, the filters staying in the spads: `n·p·q·S·F` cycles. Mapping
//! parameters and their names are JSSC 2017's ([`RsMapping`]); one MAC per PE per cycle at up to
//! 16 bits, wider operands as `⌈p/16⌉` passes each (multi-pass extension).
//!
//! **Storage and data movement** ([`Movement`]). Filters go from DRAM over the array's network
//! straight into the filter spads (they bypass the global buffer, GLB). The GLB holds, per block
//! of `n` images × `m` filters × `sr` strips, the partial sums of the block (accumulated there
//! over every channel group, so never spilled to DRAM) and the ifmap rows of the current channel
//! group (read once from DRAM per block of `m` filters and reused by the `⌈m/(p·t)⌉` filter groups),
//! each allocated in whole GLB banks. Loop nest, outermost first: image blocks, filter blocks,
//! strip blocks, channel groups, filter groups, strips of the block, the pass.
//!
//! **Energy by level**, with Eyeriss's normalised costs per 16-bit access (ISCA 2016: ALU 1×, RF
//! 1×, array 2×, GLB 6×, DRAM 200×): ALU and four RF accesses per MAC (`mac_pj`), array words
//! (ifmap and filter deliveries to PEs, psum hops between PEs; `array_pj_per_bit`), GLB accesses
//! (ifmap fills and reads, psum reads and writes; `[energy]` `input_*`/`output_*`), DRAM.
//!
//! **Choice.** The least energy × delay (energy with the ALU and RF, delay in total cycles), then
//! the fewest cycles. Eyeriss's own mapper optimises energy, the rest of cptsim cycles; either
//! alone buys little at a high price on the Bit Fusion benchmarks (least energy: the 12×14 array
//! 1.45× slower for 1 % less energy; fewest cycles: FC layers 0.5 % faster at 1.3× the energy,
//! their partial sums going through the GLB every 4 channels), and the product needs no
//! weighting constant.

mod mapping;
mod movement;
mod search;
mod shape;

pub use mapping::RsMapping;
pub use movement::Movement;
pub use search::{NoRowStationaryMapping, RsCost};
