//! Data movement of a row-stationary mapping by level: DRAM, global buffer, the array's network
//! (the RF accesses, four per MAC, are charged with the MAC through `mac_pj`).

use serde::Serialize;

use crate::architecture::energy::{SramAccess, Traffic};

use super::mapping::RsMapping;
use super::shape::Shape;

/// Bits moved at each level by one group of a problem.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Movement {
    /// DRAM: ifmap reads, filter reads, ofmap writes (partial sums never spill).
    pub dram: Traffic,
    /// Global buffer: ifmap fills (`input_write`) and reads into the array (`input_read`),
    /// partial-sum writes and reads (`output_*`); filters bypass it.
    pub glb: SramAccess,
    /// Array network: ifmap words delivered to PEs.
    pub array_ifmap: u64,
    /// Array network: filter words delivered to PEs.
    pub array_filter: u64,
    /// Array network: partial sums passed up a column between PEs.
    pub array_psum: u64,
    /// DRAM bits before the first pass can start (first ifmap chunk and filter group).
    pub first_load: u64,
    /// DRAM bits written after the last pass (the last partial-sum block).
    pub last_store: u64,
}

impl Movement {
    /// All array-network bits.
    pub fn array_bits(&self) -> u64 {
        self.array_ifmap + self.array_filter + self.array_psum
    }
}

/// The product of `xs`, saturating at `u64::MAX`.
fn prod(xs: &[u64]) -> u64 {
    let p = xs
        .iter()
        .fold(1u128, |acc, &x| acc.saturating_mul(u128::from(x)));
    u64::try_from(p).unwrap_or(u64::MAX)
}

/// The data movement of mapping `mp` of shape `s`.
///
/// - DRAM ifmap: every strip block's input rows (with their halo) of every channel and image,
///   once per filter block (`⌈M/m⌉`). Filters: every filter once per image block and strip block.
///   Ofmaps: written once.
/// - GLB: every DRAM ifmap word is written once and read into the array by every pass that
///   uses it (once per filter group, each filter fold reading its own rows); each output is
///   written by and read for every reduction pass (channel groups × filter folds; the last
///   read drains it to DRAM).
/// - Array: a pass delivers to each PE its ifmap rows (`q` channels × the row's columns, per
///   image) and its filter rows (`p·q·S` words, once per image block), and passes each partial-
///   sum row up its column of `rr·r` PEs (`rr·r − 1` hops, per filter, output column and image).
pub fn movement(s: &Shape, mp: &RsMapping) -> Movement {
    let strips = mp.strips(s);
    let blocks = mp.strip_blocks(s);
    let block_rows = (mp.sr * mp.e).min(s.e);
    let last_rows = s.e - (blocks - 1) * block_rows;
    let input_rows =
        prod(&[blocks - 1, s.rowspan(block_rows, s.r)]).saturating_add(s.rowspan(last_rows, s.r));
    let filter_blocks = s.m.div_ceil(mp.m.max(1));
    let image_blocks = s.n.div_ceil(mp.n);
    let dram_input = s.input_scale.of(prod(&[
        filter_blocks,
        s.n,
        s.c,
        s.colspan(s.s),
        input_rows,
        s.b_in,
    ]));
    let dram_weight = s
        .weight_scale
        .of(prod(&[image_blocks, blocks, s.weights(), s.b_w]));
    let outputs = s.output_scale.of(prod(&[s.outputs(), s.b_out]));
    // GLB reads of ifmap rows: per image, filter group and channel, each strip's rows for each
    // filter fold (rr rows) and column fold (ss columns)
    let strip_rows = prod(&[strips - 1, s.rowspan(mp.e, s.rr)])
        .saturating_add(s.rowspan(s.e - (strips - 1) * mp.e, s.rr));
    let glb_input_read = s.input_scale.of(prod(&[
        s.n,
        mp.filter_groups(s),
        s.c,
        s.fr,
        s.fs,
        strip_rows,
        s.colspan(s.ss),
        s.b_in,
    ]));
    let glb_psum = prod(&[outputs, mp.channel_groups(s), s.fr, s.fs]);
    let (passes, pes) = (mp.passes(s), mp.pes(s));
    let array_ifmap = prod(&[s.n, passes, pes, mp.q, s.colspan(s.ss), s.b_in, s.passes]);
    let array_filter = prod(&[
        image_blocks,
        passes,
        pes,
        mp.p * mp.q * s.ss,
        s.b_w,
        s.passes,
    ]);
    let hops = (s.rr * mp.r).saturating_sub(1);
    let array_psum = prod(&[
        s.n,
        passes,
        mp.p * mp.t * mp.e * s.f,
        hops,
        s.b_out,
        s.passes,
    ]);
    let first_filters = s.weight_scale.of(prod(&[
        (mp.p * mp.t).min(s.m),
        (mp.q * mp.r).min(s.c),
        s.r * s.s,
        s.b_w,
    ]));
    Movement {
        dram: Traffic {
            input: dram_input,
            weight: dram_weight,
            output_read: 0,
            output_write: outputs,
        },
        glb: SramAccess {
            input_read: glb_input_read,
            input_write: dram_input,
            weight_read: 0,
            weight_write: 0,
            output_read: glb_psum,
            output_write: glb_psum,
        },
        array_ifmap,
        array_filter,
        array_psum,
        first_load: mp.ifmap_chunk_bits(s).saturating_add(first_filters),
        last_store: mp.psum_block_bits(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::architecture::eyeriss::RowStationary;
    use crate::workload::gemm::{ConvProblem, OperandBits};

    const B8: OperandBits = OperandBits {
        stream: 8,
        stationary: 8,
    };

    fn shape(p: &ConvProblem) -> Shape {
        let hw = RowStationary::of(&crate::architecture::config::load("eyeriss").unwrap()).unwrap();
        Shape::new(p, B8, &hw).unwrap()
    }

    /// 2 images, 8 → 16 channels, 3×3 pad 1 on 8×8 → 8×8; 8-bit operands move as 16-bit
    /// words. Mapping: one 3×4 set (e = 4, 2 strips), r = 2 channel sets stacked, t = 2
    /// copies, q = 4 channels and p = 4 filters per PE; n = 1, m = 8 filters per block, both
    /// strips in one block.
    fn small_conv() -> (Shape, RsMapping) {
        let s = shape(&ConvProblem::conv(2, 8, 16, 8, 3, 1, 1));
        let mp = RsMapping {
            e: 4,
            r: 2,
            t: 2,
            q: 4,
            p: 4,
            n: 1,
            m: 8,
            sr: 2,
        };
        (s, mp)
    }

    #[test]
    fn a_small_conv_by_hand() {
        let (s, mp) = small_conv();
        let mv = movement(&s, &mp);
        // DRAM ifmap: the padded 10×10 input of 2 images × 8 channels, read once per filter
        // block (16/8 = 2): 2·1600 words = 3 200 words = 6 400 bytes
        assert_eq!(mv.dram.input, 2 * 2 * 8 * 100 * 16);
        // filters: 16·8·9 = 1 152 words, once per image block (2) and strip block (1): 4 608 B
        assert_eq!(mv.dram.weight, 2 * 1152 * 16);
        // ofmaps: 2·16·64 = 2 048 words = 4 096 bytes, written once, never read back
        assert_eq!((mv.dram.output_write, mv.dram.output_read), (2048 * 16, 0));
        // GLB ifmap reads: per image (2), filter group (16/8 = 2) and channel (8): two strips of
        // 4 output rows → 6 input rows each, 10 columns: 2·2·8·12·10 = 3 840 words
        assert_eq!(mv.glb.input_read, 3840 * 16);
        assert_eq!(mv.glb.input_write, mv.dram.input);
        // partial sums: one channel group (q·r = 8 = C): each output written and read once
        assert_eq!(
            (mv.glb.output_write, mv.glb.output_read),
            (2048 * 16, 2048 * 16)
        );
        // array: 2 filter groups × 1 channel group × 2 strips = 4 passes per image block of
        // 3·4·2·2 = 48 PEs. Ifmap: 2 images × 4 passes × 48 PEs × 4 channels × 10 columns;
        // filters: 2 image blocks × 4 passes × 48 PEs × 4·4·3 words; psums: 2 images × 4 passes
        // × 4·2 filters × 4 columns of sets × 8 output columns × (3·2 − 1) hops
        assert_eq!(mv.array_ifmap, 2 * 4 * 48 * 4 * 10 * 16);
        assert_eq!(mv.array_filter, 2 * 4 * 48 * 48 * 16);
        assert_eq!(mv.array_psum, 2 * 4 * 8 * 4 * 8 * 5 * 16);
        // first load: 1 image × 8 channels × 10 rows × 10 columns + 8 filters × 8 channels × 9;
        // last store: 1 image × 8 filters × 8 rows × 8 columns
        assert_eq!(mv.first_load, (800 + 576) * 16);
        assert_eq!(mv.last_store, 512 * 16);
    }

    #[test]
    fn strips_in_separate_blocks_refetch_halo_and_filters() {
        // the same layer with one strip per block, 2 images and all 16 filters per block: each
        // strip reads its 6 input rows (the two halo rows twice), once; the filters come once
        // per strip block
        let (s, small) = small_conv();
        let mp = RsMapping {
            n: 2,
            m: 16,
            sr: 1,
            ..small
        };
        let mv = movement(&s, &mp);
        assert_eq!(mv.dram.input, 2 * 8 * 12 * 10 * 16);
        assert_eq!(mv.dram.weight, 2 * 1152 * 16);
    }

    #[test]
    fn a_1x1_stride_2_conv_reads_only_the_rows_it_uses() {
        // 1×1 stride 2 on 8×8 → 4×4: each output row reads one of every two input rows
        let p = ConvProblem::conv(1, 4, 4, 8, 1, 2, 0);
        let s = shape(&p);
        let mp = RsMapping {
            e: 4,
            r: 4,
            t: 3,
            q: 1,
            p: 2,
            n: 1,
            m: 4,
            sr: 1,
        };
        let mv = movement(&s, &mp);
        assert_eq!(mv.dram.input, 4 * 4 * 4 * 16);
        // one hop count: 4 channel sets of 1 row chain 3 hops
        assert_eq!(mv.array_psum, mp.passes(&s) * 2 * 3 * 4 * 4 * 3 * 16);
    }
}
