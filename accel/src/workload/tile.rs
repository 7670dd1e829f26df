//! Tiles of a convolution problem: the five loops a mapping blocks (batch, output channels, output
//! rows and columns, input channels) and a block's extent along each.

use serde::Serialize;

use super::gemm::ConvProblem;

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

pub const LOOPS: [Loop; 5] = [Loop::B, Loop::Oc, Loop::Oh, Loop::Ow, Loop::Ic];

/// Tile sizes along the five loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Tile {
    pub b: u64,
    pub oc: u64,
    pub oh: u64,
    pub ow: u64,
    pub ic: u64,
}

impl Tile {
    /// The whole problem (one group) as one tile.
    pub fn whole(p: &ConvProblem) -> Tile {
        Tile {
            b: p.batch,
            oc: p.out_ch,
            oh: p.out_h,
            ow: p.out_w,
            ic: p.in_ch,
        }
    }

    /// The extents in loop order.
    pub fn as_array(&self) -> [u64; 5] {
        [self.b, self.oc, self.oh, self.ow, self.ic]
    }
}
