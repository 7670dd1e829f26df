//! Accelerator configurations: TOML files parsed with serde ([`parse()`]), their values checked
//! ([`validate`]), and the built-in set embedded in the binary (`accel/configs/*.toml`).
//!
//! A configuration is what every engine shares ([`AccelConfig`]: clock, array, DRAM, energy)
//! and its engine with the engine's own parameters ([`EngineConfig`], chosen by the `engine`
//! key). Which sections an engine requires and which it rejects is its parameter struct's type:
//! `[buffers]` for the tiled engines, `[row_stationary]` for Eyeriss, `[buffers]` and `[zc706]`
//! for the ZC706 engines, each struct denying the keys it does not hold.

use serde::Deserialize;

mod parse;
pub mod validate;

pub use parse::{builtin_names, builtin_text, load, parse, ConfigError, BUILTINS};
pub use validate::{ranges, zc706_limits};

/// Which array model (precision→throughput law) a configuration uses: the kind of its
/// [`EngineConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Bit Fusion Fusion-Unit array (docs/src/accelerators/bitfusion.md).
    BitFusion,
    /// Stripes: bit-serial in the streamed operand.
    Stripes,
    /// DaDianNao: 16-bit bit-parallel baseline of Stripes.
    DaDianNao,
    /// Eyeriss: row-stationary 16-bit PE array, the Bit Fusion paper's baseline.
    Eyeriss,
    /// ZC706 systolic array of bit-serial lanes: a p₁×p₂ MAC takes (p₁+p₂)/2 cycles.
    BitLinear,
    /// ZC706 systolic array of DSP48E1 slices packing several low-bit products per slice.
    DspPacking,
}

impl Engine {
    /// Widest operand the engine runs in one pass; wider ones need `multipass = true`.
    pub fn native_max_bits(self) -> u32 {
        match self {
            Engine::BitFusion => 8,
            Engine::Stripes
            | Engine::DaDianNao
            | Engine::Eyeriss
            | Engine::BitLinear
            | Engine::DspPacking => 16,
        }
    }
}

/// An engine and its own parameters; the TOML's `engine` key names the variant and the sections
/// its struct holds sit beside the shared ones.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum EngineConfig {
    #[serde(rename = "bitfusion")]
    BitFusion(TiledEngine),
    #[serde(rename = "stripes")]
    Stripes(TiledEngine),
    #[serde(rename = "dadiannao")]
    DaDianNao(TiledEngine),
    #[serde(rename = "eyeriss")]
    Eyeriss(RowStationaryEngine),
    #[serde(rename = "zc706-bit-linear")]
    Zc706BitLinear(Zc706Engine),
    #[serde(rename = "zc706-dsp-packing")]
    Zc706DspPacking(Zc706Engine),
}

/// The keys any engine's parameter struct holds: [`parse()`] hands these to the engine, the rest
/// to [`AccelConfig`].
pub(crate) const ENGINE_KEYS: [&str; 4] = ["buffers", "depthwise", "row_stationary", "zc706"];

impl EngineConfig {
    /// The engine's kind.
    pub fn kind(&self) -> Engine {
        match self {
            EngineConfig::BitFusion(_) => Engine::BitFusion,
            EngineConfig::Stripes(_) => Engine::Stripes,
            EngineConfig::DaDianNao(_) => Engine::DaDianNao,
            EngineConfig::Eyeriss(_) => Engine::Eyeriss,
            EngineConfig::Zc706BitLinear(_) => Engine::BitLinear,
            EngineConfig::Zc706DspPacking(_) => Engine::DspPacking,
        }
    }

    /// The tiled engines' on-chip buffers (`None` for Eyeriss, whose storage is its
    /// `[row_stationary]` section).
    pub fn buffers(&self) -> Option<&Buffers> {
        match self {
            EngineConfig::BitFusion(t) | EngineConfig::Stripes(t) | EngineConfig::DaDianNao(t) => {
                Some(&t.buffers)
            }
            EngineConfig::Zc706BitLinear(z) | EngineConfig::Zc706DspPacking(z) => Some(&z.buffers),
            EngineConfig::Eyeriss(_) => None,
        }
    }

    /// How depthwise convs map onto the array (`None`: the configuration has no mapping, and a
    /// depthwise layer is an error).
    pub fn depthwise(&self) -> Option<DepthwiseMapping> {
        match self {
            EngineConfig::BitFusion(t) | EngineConfig::Stripes(t) | EngineConfig::DaDianNao(t) => {
                t.depthwise.map(DepthwiseMapping::from)
            }
            EngineConfig::Eyeriss(e) => e.depthwise.map(DepthwiseMapping::from),
            EngineConfig::Zc706BitLinear(z) | EngineConfig::Zc706DspPacking(z) => z.depthwise,
        }
    }

    /// The ZC706 engines' parameters.
    pub fn zc706(&self) -> Option<&Zc706Params> {
        match self {
            EngineConfig::Zc706BitLinear(z) | EngineConfig::Zc706DspPacking(z) => Some(&z.zc706),
            _ => None,
        }
    }
}

/// A tiled engine (Bit Fusion, Stripes, DaDianNao): its buffers and depthwise mapping.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TiledEngine {
    pub buffers: Buffers,
    /// Without it a depthwise layer is an error.
    #[serde(default)]
    pub depthwise: Option<DenseDepthwise>,
}

/// The Eyeriss engine: its row-stationary storage and depthwise mapping.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowStationaryEngine {
    pub row_stationary: RowStationaryParams,
    #[serde(default)]
    pub depthwise: Option<DenseDepthwise>,
}

/// A ZC706 engine: its buffers, board parameters and depthwise mapping.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zc706Engine {
    pub buffers: Buffers,
    pub zc706: Zc706Params,
    #[serde(default)]
    pub depthwise: Option<DepthwiseMapping>,
}

/// Systolic dataflow of the ZC706 engines (docs/src/accelerators/zc706.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dataflow {
    /// Output stationary.
    Os,
    /// Weight stationary.
    Ws,
}

/// The compute array.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayShape {
    /// Lanes along the reduction axis (Bit Fusion N; systolic R).
    pub rows: u64,
    /// Lanes along the filter axis (Bit Fusion M; systolic C; Stripes 16 tiles × 16 filters).
    pub cols: u64,
}

/// On-chip buffer capacities.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffers {
    /// Streamed-operand (activation) buffer, KiB.
    pub input_kib: u64,
    /// Stationary-operand (weight) buffer, KiB.
    pub weight_kib: u64,
    /// Output / partial-sum buffer, KiB.
    pub output_kib: u64,
}

impl Buffers {
    /// The capacities in bits.
    pub fn bits(&self) -> BufferBits {
        let kib = 8 * 1024;
        BufferBits {
            input: self.input_kib * kib,
            weight: self.weight_kib * kib,
            output: self.output_kib * kib,
        }
    }
}

/// On-chip buffer capacities in bits (whole buffer; tiles may use half).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct BufferBits {
    pub input: u64,
    pub weight: u64,
    pub output: u64,
}

/// Off-chip memory interface: either bits per cycle, or a peak rate in GB/s with an efficiency.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dram {
    /// Interface width in bits per accelerator cycle.
    pub bits_per_cycle: Option<f64>,
    /// Peak bandwidth in GB/s (10⁹ bytes per second).
    pub peak_gb_per_s: Option<f64>,
    /// Fraction of the peak bandwidth achieved (0, 1]; default 1.
    pub efficiency: Option<f64>,
}

/// Energy constants.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnergyConstants {
    /// Core energy per computing cycle for the whole array, pJ (precision independent).
    pub core_pj_per_cycle: f64,
    pub input_read_pj_per_bit: f64,
    pub input_write_pj_per_bit: f64,
    pub weight_read_pj_per_bit: f64,
    pub weight_write_pj_per_bit: f64,
    pub output_read_pj_per_bit: f64,
    pub output_write_pj_per_bit: f64,
    /// Off-chip access energy, pJ per bit.
    pub dram_pj_per_bit: f64,
    /// Energy per MAC performed, pJ, for designs charged per operation rather than per array
    /// cycle (default 0).
    #[serde(default)]
    pub mac_pj: f64,
}

/// How an engine runs depthwise convs (one channel per group).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum DepthwiseMapping {
    /// No depthwise mode: the faster of the dense array's two grouped mappings (groups back to
    /// back, or one block-diagonal dense conv). A cptsim choice for designs without one.
    #[serde(rename = "dense")]
    Dense,
    /// Channels across the array's lanes, each lane fed its own window from line buffers (the
    /// ZC706 engines' depthwise mode, `mapping/depthwise.rs`).
    #[serde(rename = "channel-lanes")]
    ChannelLanes,
}

/// The depthwise mapping of the engines without a depthwise mode: `dense` only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum DenseDepthwise {
    #[serde(rename = "dense")]
    Dense,
}

impl From<DenseDepthwise> for DepthwiseMapping {
    fn from(_: DenseDepthwise) -> Self {
        DepthwiseMapping::Dense
    }
}

/// Storage and network of a row-stationary (Eyeriss) array: the global buffer that holds ifmap
/// rows and partial sums, the three scratchpads of every PE, and the energy of a word crossing the
/// PE array's network (`architecture/eyeriss.rs`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowStationaryParams {
    /// Global buffer, KiB (ifmaps and partial sums; filters bypass it).
    pub glb_kib: u64,
    /// Banks the global buffer is allocated in, each to ifmaps or to partial sums.
    pub glb_banks: u64,
    /// Ifmap scratchpad of a PE, 16-bit words (bounds q·S).
    pub ifmap_spad_words: u64,
    /// Filter scratchpad of a PE, 16-bit words (bounds p·q·S).
    pub filter_spad_words: u64,
    /// Partial-sum scratchpad of a PE, 16-bit words (bounds p).
    pub psum_spad_words: u64,
    /// Energy of one bit delivered to a PE or passed between PEs over the array's network, pJ.
    pub array_pj_per_bit: f64,
}

/// Parameters of the ZC706 engines.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zc706Params {
    /// Systolic dataflow.
    pub dataflow: Dataflow,
    /// Fraction of cycles the array issues work (0, 1] (control, synchronisation).
    pub utilisation: f64,
    /// DSP-packing: width of the DSP48E1 port the packed operand shares (25).
    pub dsp_port_bits: u32,
    /// DSP-packing: guard bits between packed products.
    pub guard_bits: u32,
    /// Bits moved per output element by the BN / ReLU / quantisation passes, besides the operand
    /// bits: forward over the layer's outputs, backward over its errors.
    pub elementwise_bits_per_element: u64,
    /// Bits moved per parameter and step for the FP32 master weights (read + write weight,
    /// momentum, gradient).
    pub master_bits_per_param: u64,
    /// Bits moved per element of a residual add, in each direction: forward reads both operands
    /// and writes the sum; backward reads the error and adds it into the shortcut's error.
    pub residual_bits_per_element: u64,
}

/// One accelerator configuration: what every engine shares, and the engine.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccelConfig {
    /// Name shown in reports.
    pub name: String,
    /// One line on what this configuration is.
    pub description: String,
    /// The engine and its own parameters (the `engine` key and the sections it takes).
    pub engine: EngineConfig,
    /// Accelerator clock, MHz.
    pub clock_mhz: f64,
    /// Run operands wider than the engine's native width as several passes (cptsim extension).
    #[serde(default)]
    pub multipass: bool,
    /// Area overhead over the baseline design, as a fraction (reported, not used for cost).
    #[serde(default)]
    pub area_overhead: Option<f64>,
    /// Width of the array's accumulators (its partial-sum registers), bits: what a run with
    /// integer GEMMs is checked against (not used for cost).
    #[serde(default)]
    pub accumulator_bits: Option<u32>,
    pub array: ArrayShape,
    pub dram: Dram,
    pub energy: EnergyConstants,
}

impl AccelConfig {
    /// Effective DRAM bits per accelerator cycle.
    pub fn dram_bits_per_cycle(&self) -> f64 {
        let eff = self.dram.efficiency.unwrap_or(1.0);
        match (self.dram.bits_per_cycle, self.dram.peak_gb_per_s) {
            (Some(b), _) => b * eff,
            (None, Some(g)) => g * 8e9 * eff / (self.clock_mhz * 1e6),
            (None, None) => 0.0,
        }
    }

    /// Seconds per cycle.
    pub fn cycle_s(&self) -> f64 {
        1.0 / (self.clock_mhz * 1e6)
    }
}

#[cfg(test)]
mod tests;
