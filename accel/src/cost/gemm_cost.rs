//! What costing a GEMM yields — its cost, the part traces accumulate, and why it can fail — shared by
//! the accelerator model and the cost cache.

use serde::Serialize;

use crate::architecture::dram::Timing;
use crate::architecture::energy::EnergySplit;
use crate::mapping::row_stationary::NoRowStationaryMapping;
use crate::mapping::tiling::{Mapping, TilingError};

/// Why a GEMM cannot be costed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CostError {
    /// Operand bits outside what the configuration runs.
    #[error("{bits}-bit operands: {reason}")]
    Bits { bits: u32, reason: String },
    /// The problem's counts would not fit the models' 64-bit counters.
    #[error("layer too large to cost: {0}")]
    TooLarge(String),
    /// No tiling fits the buffers.
    #[error(transparent)]
    Tiling(#[from] TilingError),
    /// No row-stationary mapping fits the array, its scratchpads and its global buffer.
    #[error(transparent)]
    RowStationary(#[from] NoRowStationaryMapping),
    /// A depthwise conv on a configuration without a depthwise mapping.
    #[error("depthwise conv ({channels} channels): accelerator `{accel}` has no depthwise mapping; set key `depthwise` in its config (\"dense\", or \"channel-lanes\" on the zc706-* engines)")]
    NoDepthwise { channels: u64, accel: String },
}

/// Cost of one GEMM problem (all groups).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GemmCost {
    pub timing: Timing,
    /// DRAM bits moved.
    pub dram_bits: u64,
    /// On-chip buffer bits accessed.
    pub sram_bits: u64,
    pub energy: EnergySplit,
    /// The chosen tiling of one group.
    pub mapping: Mapping,
    /// Groups run back to back.
    pub groups: u64,
}

/// The numbers of a GEMM cost that traces accumulate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GemmSummary {
    pub timing: Timing,
    pub dram_bits: u64,
    pub sram_bits: u64,
    pub energy: EnergySplit,
}

impl From<&GemmCost> for GemmSummary {
    fn from(c: &GemmCost) -> Self {
        Self {
            timing: c.timing,
            dram_bits: c.dram_bits,
            sram_bits: c.sram_bits,
            energy: c.energy,
        }
    }
}
