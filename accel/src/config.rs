//! Accelerator configurations: TOML files parsed with serde, validated, and the built-in set
//! embedded in the binary (`accel/configs/*.toml`).

use std::path::Path;

use serde::Deserialize;

/// Which array model (precision→throughput law) a configuration uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Engine {
    /// Bit Fusion Fusion-Unit array (accelerators.md §1).
    #[serde(rename = "bitfusion")]
    BitFusion,
    /// Stripes: bit-serial in the streamed operand (§2).
    #[serde(rename = "stripes")]
    Stripes,
    /// DaDianNao: 16-bit bit-parallel baseline of Stripes (§2).
    #[serde(rename = "dadiannao")]
    DaDianNao,
    /// Eyeriss: row-stationary 16-bit PE array, the Bit Fusion paper's baseline.
    #[serde(rename = "eyeriss")]
    Eyeriss,
    /// ZC706 systolic array of bit-serial lanes: a p₁×p₂ MAC takes (p₁+p₂)/2 cycles (§3).
    #[serde(rename = "zc706-bit-linear")]
    BitLinear,
    /// ZC706 systolic array of DSP48E1 slices packing several low-bit products per slice (§3).
    #[serde(rename = "zc706-dsp-packing")]
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

/// Systolic dataflow of the ZC706 engines (accelerators.md §4).
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
    /// ZC706 engines' depthwise mode, see `zc706.rs`).
    #[serde(rename = "channel-lanes")]
    ChannelLanes,
}

/// Storage and network of a row-stationary (Eyeriss) array: the global buffer that holds ifmap
/// rows and partial sums, the three scratchpads of every PE, and the energy of a word crossing the
/// PE array's network (`src/eyeriss.rs`).
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

/// One accelerator configuration.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccelConfig {
    /// Name shown in reports.
    pub name: String,
    /// One line on what this configuration is.
    pub description: String,
    pub engine: Engine,
    /// Accelerator clock, MHz.
    pub clock_mhz: f64,
    /// Run operands wider than the engine's native width as several passes (cptsim extension).
    #[serde(default)]
    pub multipass: bool,
    /// How depthwise convs map onto the array; without it a depthwise layer is an error.
    #[serde(default)]
    pub depthwise: Option<DepthwiseMapping>,
    /// Area overhead over the baseline design, as a fraction (reported, not used for cost).
    #[serde(default)]
    pub area_overhead: Option<f64>,
    pub array: ArrayShape,
    /// Required for the tiled engines, rejected for `eyeriss` (its storage is
    /// `[row_stationary]`); read it through [`AccelConfig::buffers`].
    #[serde(default)]
    pub buffers: Option<Buffers>,
    pub dram: Dram,
    pub energy: EnergyConstants,
    /// Required for the ZC706 engines, rejected for the others.
    #[serde(default)]
    pub zc706: Option<Zc706Params>,
    /// Required for the `eyeriss` engine, rejected for the others.
    #[serde(default)]
    pub row_stationary: Option<RowStationaryParams>,
}

/// The buffers of a configuration without a `[buffers]` section: nothing fits them.
const NO_BUFFERS: Buffers = Buffers {
    input_kib: 0,
    weight_kib: 0,
    output_kib: 0,
};

/// A configuration that cannot be read or used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not a built-in name, and no readable file.
    #[error("accelerator `{name}` is not a built-in ({builtins}) and cannot be read as a config file: {error}")]
    NotFound {
        name: String,
        builtins: String,
        /// In the message, not a separate `source()`, so `{:#}` prints it once.
        error: std::io::Error,
    },
    /// The TOML does not parse into a configuration (syntax, unknown key, wrong type).
    #[error("accelerator config {origin}: {message}")]
    Parse { origin: String, message: String },
    /// A key has a value the model cannot use.
    #[error("accelerator config {origin}: key `{key}`: {reason}")]
    Invalid {
        origin: String,
        key: String,
        reason: String,
    },
}

/// Built-in configurations: (name, TOML text). `bitfusion` is an alias, see [`builtin_text`].
pub const BUILTINS: &[(&str, &str)] = &[
    ("zc706", include_str!("../configs/zc706.toml")),
    (
        "bitfusion-eyeriss-iso",
        include_str!("../configs/bitfusion-eyeriss-iso.toml"),
    ),
    (
        "bitfusion-stripes-iso",
        include_str!("../configs/bitfusion-stripes-iso.toml"),
    ),
    ("stripes", include_str!("../configs/stripes.toml")),
    ("dadiannao", include_str!("../configs/dadiannao.toml")),
    ("eyeriss", include_str!("../configs/eyeriss.toml")),
    (
        "eyeriss-256pe",
        include_str!("../configs/eyeriss-256pe.toml"),
    ),
];

/// The TOML text of a built-in name (`bitfusion` = `bitfusion-eyeriss-iso`).
pub fn builtin_text(name: &str) -> Option<&'static str> {
    let name = if name == "bitfusion" {
        "bitfusion-eyeriss-iso"
    } else {
        name
    };
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Names accepted by [`load`] besides file paths.
pub fn builtin_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
    v.insert(1, "bitfusion");
    v
}

/// Loads a built-in by name, or else reads `name_or_path` as a TOML file.
pub fn load(name_or_path: &str) -> Result<AccelConfig, ConfigError> {
    if let Some(text) = builtin_text(name_or_path) {
        return parse(text, &format!("built-in `{name_or_path}`"));
    }
    let text = std::fs::read_to_string(Path::new(name_or_path)).map_err(|error| {
        ConfigError::NotFound {
            name: name_or_path.to_string(),
            builtins: builtin_names().join(", "),
            error,
        }
    })?;
    parse(&text, name_or_path)
}

/// The parser's message on one line, prefixed with the line and column it points at (the
/// `toml` crate's own rendering adds a multi-line source excerpt).
fn one_line_toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// Parses and validates a configuration; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<AccelConfig, ConfigError> {
    let cfg: AccelConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
        origin: origin.to_string(),
        message: one_line_toml_error(text, &e),
    })?;
    cfg.validate()
        .map_err(|(key, reason)| ConfigError::Invalid {
            origin: origin.to_string(),
            key: key.to_string(),
            reason,
        })?;
    Ok(cfg)
}

/// ZC706 (XC7Z045) physical limits (accelerators.md §3).
pub mod zc706_limits {
    /// DSP48E1 slices.
    pub const DSP_SLICES: u64 = 900;
    /// On-chip block RAM, bits (545 RAMB36 × 36 Kib).
    pub const BRAM_BITS: u64 = 545 * 36 * 1024;
    /// PL DDR3 peak: 64 bit × 1600 MT/s.
    pub const DDR_PEAK_GB_PER_S: f64 = 12.8;
}

type Check = Result<(), (&'static str, String)>;

/// Ranges of the configuration values: wide enough for any real design, narrow enough that
/// every count and energy stays finite and inside its integer type.
pub mod ranges {
    /// Clock, MHz.
    pub const CLOCK_MHZ: (f64, f64) = (1e-3, 1e5);
    /// Array rows or columns.
    pub const ARRAY_DIM: u64 = 1 << 16;
    /// One buffer, KiB (1 TiB).
    pub const BUFFER_KIB: u64 = 1 << 30;
    /// Effective DRAM bits per accelerator cycle.
    pub const DRAM_BITS_PER_CYCLE: (f64, f64) = (1e-2, 1e9);
    /// DRAM peak, GB/s.
    pub const DRAM_GB_PER_S: (f64, f64) = (1e-6, 1e6);
    /// Any energy constant, pJ.
    pub const ENERGY_PJ: f64 = 1e9;
    /// Smallest utilisation.
    pub const UTILISATION_MIN: f64 = 1e-3;
    /// Bits per element or parameter of a memory pass; DSP port and guard bits.
    pub const PASS_BITS: u64 = 4096;
    /// Area overhead (fraction).
    pub const AREA_OVERHEAD: f64 = 100.0;
}

fn in_range(key: &'static str, v: f64, (lo, hi): (f64, f64)) -> Check {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err((key, format!("must be in [{lo:e}, {hi:e}], got {v}")))
    }
}

fn fraction(key: &'static str, v: f64, min: f64) -> Check {
    if v.is_finite() && v >= min && v <= 1.0 {
        Ok(())
    } else {
        Err((key, format!("must be in [{min}, 1], got {v}")))
    }
}

fn count(key: &'static str, v: u64, max: u64) -> Check {
    if v == 0 {
        Err((key, "must be greater than zero".to_string()))
    } else if v > max {
        Err((key, format!("must be at most {max}, got {v}")))
    } else {
        Ok(())
    }
}

fn non_negative(key: &'static str, v: f64, max: f64) -> Check {
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(())
    } else {
        Err((key, format!("must be in [0, {max:e}], got {v}")))
    }
}

/// Checks a `[row_stationary]` section.
fn validate_row_stationary(p: &RowStationaryParams) -> Check {
    count("row_stationary.glb_kib", p.glb_kib, ranges::BUFFER_KIB)?;
    // at least one 16-bit word per bank
    count(
        "row_stationary.glb_banks",
        p.glb_banks,
        p.glb_kib.saturating_mul(512),
    )?;
    for (k, v) in [
        ("row_stationary.ifmap_spad_words", p.ifmap_spad_words),
        ("row_stationary.filter_spad_words", p.filter_spad_words),
        ("row_stationary.psum_spad_words", p.psum_spad_words),
    ] {
        count(k, v, ranges::ARRAY_DIM)?;
    }
    non_negative(
        "row_stationary.array_pj_per_bit",
        p.array_pj_per_bit,
        ranges::ENERGY_PJ,
    )
}

impl AccelConfig {
    /// Checks every value; the error names the key and the reason.
    fn validate(&self) -> Check {
        in_range("clock_mhz", self.clock_mhz, ranges::CLOCK_MHZ)?;
        count("array.rows", self.array.rows, ranges::ARRAY_DIM)?;
        count("array.cols", self.array.cols, ranges::ARRAY_DIM)?;
        let rs = self.engine == Engine::Eyeriss;
        match (&self.buffers, rs) {
            (Some(b), false) => {
                count("buffers.input_kib", b.input_kib, ranges::BUFFER_KIB)?;
                count("buffers.weight_kib", b.weight_kib, ranges::BUFFER_KIB)?;
                count("buffers.output_kib", b.output_kib, ranges::BUFFER_KIB)?;
            }
            (None, false) => {
                return Err((
                    "buffers",
                    "this engine needs a [buffers] section (input_kib, weight_kib, output_kib)"
                        .to_string(),
                ))
            }
            (Some(_), true) => {
                return Err((
                    "buffers",
                    "the eyeriss engine sizes its storage in [row_stationary] (global buffer and \
                     scratchpads), not [buffers]"
                        .to_string(),
                ))
            }
            (None, true) => {}
        }
        match (&self.row_stationary, rs) {
            (Some(p), true) => validate_row_stationary(p)?,
            (None, true) => {
                return Err((
                    "row_stationary",
                    "the eyeriss engine needs a [row_stationary] section (glb_kib, glb_banks, \
                     ifmap_spad_words, filter_spad_words, psum_spad_words, array_pj_per_bit)"
                        .to_string(),
                ))
            }
            (Some(_), false) => {
                return Err((
                    "row_stationary",
                    "only the eyeriss engine takes a [row_stationary] section".to_string(),
                ))
            }
            (None, false) => {}
        }
        match (self.dram.bits_per_cycle, self.dram.peak_gb_per_s) {
            (Some(b), None) => in_range("dram.bits_per_cycle", b, ranges::DRAM_BITS_PER_CYCLE)?,
            (None, Some(g)) => in_range("dram.peak_gb_per_s", g, ranges::DRAM_GB_PER_S)?,
            _ => {
                return Err((
                    "dram",
                    "give exactly one of `bits_per_cycle` and `peak_gb_per_s`".to_string(),
                ))
            }
        }
        if let Some(e) = self.dram.efficiency {
            fraction("dram.efficiency", e, 1e-3)?;
        }
        let (lo, hi) = ranges::DRAM_BITS_PER_CYCLE;
        let per_cycle = self.dram_bits_per_cycle();
        if !(lo..=hi).contains(&per_cycle) {
            return Err((
                "dram",
                format!(
                    "bandwidth, efficiency and clock give {per_cycle:e} bits per cycle, outside [{lo:e}, {hi:e}]"
                ),
            ));
        }
        let e = &self.energy;
        for (k, v) in [
            ("energy.core_pj_per_cycle", e.core_pj_per_cycle),
            ("energy.input_read_pj_per_bit", e.input_read_pj_per_bit),
            ("energy.input_write_pj_per_bit", e.input_write_pj_per_bit),
            ("energy.weight_read_pj_per_bit", e.weight_read_pj_per_bit),
            ("energy.weight_write_pj_per_bit", e.weight_write_pj_per_bit),
            ("energy.output_read_pj_per_bit", e.output_read_pj_per_bit),
            ("energy.output_write_pj_per_bit", e.output_write_pj_per_bit),
            ("energy.dram_pj_per_bit", e.dram_pj_per_bit),
            ("energy.mac_pj", e.mac_pj),
        ] {
            non_negative(k, v, ranges::ENERGY_PJ)?;
        }
        if let Some(a) = self.area_overhead {
            non_negative("area_overhead", a, ranges::AREA_OVERHEAD)?;
        }
        let zc = matches!(self.engine, Engine::BitLinear | Engine::DspPacking);
        if self.depthwise == Some(DepthwiseMapping::ChannelLanes) && !zc {
            return Err((
                "depthwise",
                "\"channel-lanes\" is the zc706-* engines' depthwise mode; this engine takes \"dense\""
                    .to_string(),
            ));
        }
        match (&self.zc706, zc) {
            (Some(z), true) => self.validate_zc706(z),
            (None, true) => Err((
                "zc706",
                "the ZC706 engines need a [zc706] section".to_string(),
            )),
            (Some(_), false) => Err((
                "zc706",
                "only the zc706-* engines take a [zc706] section".to_string(),
            )),
            (None, false) => Ok(()),
        }
    }

    fn validate_zc706(&self, z: &Zc706Params) -> Check {
        fraction("zc706.utilisation", z.utilisation, ranges::UTILISATION_MIN)?;
        count(
            "zc706.dsp_port_bits",
            u64::from(z.dsp_port_bits),
            ranges::PASS_BITS,
        )?;
        if u64::from(z.guard_bits) > ranges::PASS_BITS {
            return Err((
                "zc706.guard_bits",
                format!("must be at most {}", ranges::PASS_BITS),
            ));
        }
        for (k, v) in [
            (
                "zc706.elementwise_bits_per_element",
                z.elementwise_bits_per_element,
            ),
            ("zc706.master_bits_per_param", z.master_bits_per_param),
            (
                "zc706.residual_bits_per_element",
                z.residual_bits_per_element,
            ),
        ] {
            if v > ranges::PASS_BITS {
                return Err((k, format!("must be at most {}, got {v}", ranges::PASS_BITS)));
            }
        }
        // In u128: a sum of buffer sizes must not wrap past the board's limit.
        let b = self.buffers();
        let on_chip = [b.input_kib, b.weight_kib, b.output_kib]
            .iter()
            .map(|&k| u128::from(k) * 8 * 1024)
            .sum::<u128>();
        if on_chip > u128::from(zc706_limits::BRAM_BITS) {
            return Err((
                "buffers",
                format!(
                    "{on_chip} bits exceed the XC7Z045's {} bits of block RAM",
                    zc706_limits::BRAM_BITS
                ),
            ));
        }
        let pes = u128::from(self.array.rows) * u128::from(self.array.cols);
        if self.engine == Engine::DspPacking && pes > u128::from(zc706_limits::DSP_SLICES) {
            return Err((
                "array",
                format!(
                    "{pes} DSP-packing PEs exceed the XC7Z045's {} DSP48E1 slices",
                    zc706_limits::DSP_SLICES
                ),
            ));
        }
        match self.dram.peak_gb_per_s {
            Some(g) if g <= zc706_limits::DDR_PEAK_GB_PER_S => Ok(()),
            Some(g) => Err((
                "dram.peak_gb_per_s",
                format!("{g} GB/s exceeds the board's PL DDR3 peak of 12.8 GB/s"),
            )),
            None => Err((
                "dram.peak_gb_per_s",
                "ZC706 configs give the DDR peak in GB/s".to_string(),
            )),
        }
    }

    /// The tiled engines' buffers (`[buffers]`; all zero, so that no tile fits, for a
    /// configuration without the section, which validation allows only for `eyeriss`).
    pub fn buffers(&self) -> &Buffers {
        self.buffers.as_ref().unwrap_or(&NO_BUFFERS)
    }

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
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses() {
        for name in builtin_names() {
            let c = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(c.dram_bits_per_cycle() > 0.0, "{name}");
        }
        assert_eq!(load("bitfusion").unwrap().name, "bitfusion-eyeriss-iso");
    }

    fn edited(from: &str, to: &str) -> String {
        let t = builtin_text("bitfusion").unwrap();
        assert!(t.contains(from), "{from}");
        t.replacen(from, to, 1)
    }

    #[test]
    fn unknown_key_is_named() {
        let e = parse(
            &edited("clock_mhz = 500", "clock_mhz = 500\nturbo = true"),
            "x.toml",
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("x.toml") && s.contains("turbo"), "{s}");
    }

    #[test]
    fn parse_errors_are_one_line_with_position() {
        let e = parse(
            &edited("clock_mhz = 500", "clock_mhz = 500\nturbo = true"),
            "x.toml",
        )
        .unwrap_err()
        .to_string();
        let line = edited("clock_mhz = 500", "clock_mhz = 500\nturbo = true")
            .lines()
            .position(|l| l.starts_with("turbo"))
            .unwrap()
            + 1;
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains(&format!("line {line}, column 1")), "{e}");
        let e = parse("name = [", "bad.toml").unwrap_err().to_string();
        assert!(!e.contains('\n') && e.contains("line 1, column 9"), "{e}");
    }

    #[test]
    fn missing_file_error_has_no_repeated_cause() {
        let e = load("/no/such/accel.toml").unwrap_err();
        assert!(std::error::Error::source(&e).is_none());
        let s = anyhow_like(&e);
        assert_eq!(s.matches("os error 2").count(), 1, "{s}");
    }

    /// `{:#}` of an error chain the way `anyhow` prints it: each cause after a colon.
    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            s.push_str(&format!(": {c}"));
            cause = c.source();
        }
        s
    }

    #[test]
    fn zero_buffer_is_named() {
        let e = parse(&edited("input_kib = 32", "input_kib = 0"), "x.toml").unwrap_err();
        assert!(e.to_string().contains("buffers.input_kib"), "{e}");
    }

    #[test]
    fn negative_bandwidth_is_named() {
        let e = parse(
            &edited("bits_per_cycle = 192", "bits_per_cycle = -192"),
            "x.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("dram.bits_per_cycle"), "{e}");
    }

    #[test]
    fn zc706_limits_are_enforced() {
        let t = builtin_text("zc706").unwrap();
        let over = t.replacen("peak_gb_per_s = 12.8", "peak_gb_per_s = 25.6", 1);
        let e = parse(&over, "z").unwrap_err();
        assert!(e.to_string().contains("dram.peak_gb_per_s"), "{e}");
        let no_section = parse(
            &edited("engine = \"bitfusion\"", "engine = \"zc706-bit-linear\""),
            "z",
        );
        assert!(no_section.unwrap_err().to_string().contains("zc706"));
    }

    #[test]
    fn zc706_buffer_sum_cannot_wrap_past_the_board_check() {
        // u64::MAX KiB: (a + b + c) · 8192 wrapped to a small number before
        let t = builtin_text("zc706").unwrap();
        let huge = t.replacen("input_kib = 512", &format!("input_kib = {}", i64::MAX), 1);
        let e = parse(&huge, "z").unwrap_err().to_string();
        assert!(e.contains("buffers.input_kib"), "{e}");
        // within the per-buffer range but beyond the board's block RAM
        let over = t.replacen("input_kib = 512", "input_kib = 1073741824", 1);
        let e = parse(&over, "z").unwrap_err().to_string();
        assert!(e.contains("`buffers`") && e.contains("block RAM"), "{e}");
    }

    #[test]
    fn extreme_values_that_would_give_nan_or_inf_are_named() {
        for (from, to, key) in [
            ("clock_mhz = 500", "clock_mhz = 1e-300", "clock_mhz"),
            ("clock_mhz = 500", "clock_mhz = 1e300", "clock_mhz"),
            (
                "bits_per_cycle = 192",
                "bits_per_cycle = 1e-300",
                "dram.bits_per_cycle",
            ),
            (
                "dram_pj_per_bit = 15.0",
                "dram_pj_per_bit = 1e308",
                "energy.dram_pj_per_bit",
            ),
            ("rows = 16", "rows = 4294967296", "array.rows"),
        ] {
            let e = parse(&edited(from, to), "x.toml").unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")), "{to}: {e}");
        }
        let t = builtin_text("zc706").unwrap();
        let slow = t.replacen("utilisation = 0.7846", "utilisation = 1e-300", 1);
        let e = parse(&slow, "z").unwrap_err().to_string();
        assert!(e.contains("zc706.utilisation"), "{e}");
        // each value in range, but the derived bandwidth per cycle is not
        let fast = t
            .replacen("clock_mhz = 200", "clock_mhz = 1e5", 1)
            .replacen("peak_gb_per_s = 12.8", "peak_gb_per_s = 1e-6", 1);
        let e = parse(&fast, "z").unwrap_err().to_string();
        assert!(e.contains("`dram`") && e.contains("bits per cycle"), "{e}");
    }

    /// Asserts that every key line of `section` in every built-in carries its source or the
    /// word assumption (on the line or in the comment lines just above it).
    fn every_constant_in_names_its_source(section: &str) {
        for (name, text) in BUILTINS {
            let mut comments = String::new();
            let mut inside = false;
            for line in text.lines() {
                let t = line.trim();
                if t.starts_with('[') {
                    inside = t == section;
                    comments.clear();
                } else if t.starts_with('#') {
                    comments.push_str(t);
                } else if inside && t.contains('=') {
                    let said = format!("{comments} {t}").to_lowercase();
                    assert!(
                        said.contains("source") || said.contains("assumption"),
                        "{name}: `{t}` has neither a source nor the word assumption"
                    );
                } else if t.is_empty() {
                    comments.clear();
                }
            }
        }
    }

    #[test]
    fn every_energy_constant_names_its_source_or_says_assumption() {
        every_constant_in_names_its_source("[energy]");
    }

    #[test]
    fn a_row_stationary_config_names_the_key_it_lacks() {
        let t = builtin_text("eyeriss").unwrap();
        // the whole section
        let start = t.find("[row_stationary]").unwrap();
        let end = t.find("[dram]").unwrap();
        let without = format!("{}{}", &t[..start], &t[end..]);
        let e = parse(&without, "e.toml").unwrap_err().to_string();
        assert!(
            e.contains("`row_stationary`") && e.contains("e.toml"),
            "{e}"
        );
        // one key of it
        let e = parse(&t.replacen("psum_spad_words = 24", "", 1), "e.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("psum_spad_words") && !e.contains('\n'), "{e}");
        // values
        for (from, to, key) in [
            ("glb_kib = 108", "glb_kib = 0", "row_stationary.glb_kib"),
            (
                "glb_banks = 27",
                "glb_banks = 0",
                "row_stationary.glb_banks",
            ),
            (
                "glb_banks = 27",
                "glb_banks = 60000",
                "row_stationary.glb_banks",
            ),
            (
                "ifmap_spad_words = 12",
                "ifmap_spad_words = 0",
                "row_stationary.ifmap_spad_words",
            ),
            (
                "array_pj_per_bit = 0.4",
                "array_pj_per_bit = -1",
                "row_stationary.array_pj_per_bit",
            ),
        ] {
            let e = parse(&t.replacen(from, to, 1), "e.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`{key}`")), "{to}: {e}");
        }
        // tiled buffers on eyeriss, the RS section on another engine, no buffers elsewhere
        let e = parse(
            &format!("{t}\n[buffers]\ninput_kib = 1\nweight_kib = 1\noutput_kib = 1\n"),
            "e",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`buffers`") && e.contains("[row_stationary]"),
            "{e}"
        );
        let section = &t[start..end];
        let bf = builtin_text("bitfusion").unwrap();
        let e = parse(&format!("{bf}\n{section}"), "b")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`row_stationary`"), "{e}");
        let bs = bf.find("[buffers]").unwrap();
        let be = bf.find("[dram]").unwrap();
        let e = parse(&format!("{}{}", &bf[..bs], &bf[be..]), "b")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`buffers`"), "{e}");
    }

    #[test]
    fn every_row_stationary_constant_names_its_source_or_says_assumption() {
        every_constant_in_names_its_source("[row_stationary]");
    }

    #[test]
    fn missing_file_lists_builtins() {
        let e = load("/no/such/accel.toml").unwrap_err().to_string();
        assert!(
            e.contains("/no/such/accel.toml") && e.contains("bitfusion-stripes-iso"),
            "{e}"
        );
    }
}
