//! Value checks of a parsed configuration: every number inside a range wide enough for any real
//! design and narrow enough that every count and energy stays finite and inside its integer
//! type, and the ZC706 engines inside the board's limits. Which sections exist is the types'
//! business ([`super::EngineConfig`]); this module only checks their values.

use super::{
    AccelConfig, Buffers, EnergyConstants, EngineConfig, RowStationaryParams, Zc706Engine,
    Zc706Params,
};

/// ZC706 (XC7Z045) physical limits (docs/src/accelerators/zc706.md).
pub mod zc706_limits {
    /// DSP48E1 slices.
    pub const DSP_SLICES: u64 = 900;
    /// On-chip block RAM, bits (545 RAMB36 × 36 Kib).
    pub const BRAM_BITS: u64 = 545 * 36 * 1024;
    /// PL DDR3 peak: 64 bit × 1600 MT/s.
    pub const DDR_PEAK_GB_PER_S: f64 = 12.8;
}

/// Ranges of the configuration values.
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
    /// Accumulator width, bits.
    pub const ACCUMULATOR_BITS: (u32, u32) = (2, 64);
}

/// A failed check: the key and why.
pub(crate) type Check = Result<(), (&'static str, String)>;

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

fn check_buffers(b: &Buffers) -> Check {
    count("buffers.input_kib", b.input_kib, ranges::BUFFER_KIB)?;
    count("buffers.weight_kib", b.weight_kib, ranges::BUFFER_KIB)?;
    count("buffers.output_kib", b.output_kib, ranges::BUFFER_KIB)
}

fn check_row_stationary(p: &RowStationaryParams) -> Check {
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

fn check_energy(e: &EnergyConstants) -> Check {
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
    Ok(())
}

fn check_zc706_params(z: &Zc706Params) -> Check {
    fraction("zc706.utilisation", z.utilisation, ranges::UTILISATION_MIN)?;
    count(
        "zc706.dsp_port_bits",
        u64::from(z.dsp_port_bits),
        ranges::PASS_BITS,
    )?;
    for (k, v) in [
        ("zc706.guard_bits", u64::from(z.guard_bits)),
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
    Ok(())
}

impl AccelConfig {
    /// Checks every value; the error names the key and the reason.
    pub(crate) fn validate(&self) -> Check {
        in_range("clock_mhz", self.clock_mhz, ranges::CLOCK_MHZ)?;
        count("array.rows", self.array.rows, ranges::ARRAY_DIM)?;
        count("array.cols", self.array.cols, ranges::ARRAY_DIM)?;
        match &self.engine {
            EngineConfig::BitFusion(t) | EngineConfig::Stripes(t) | EngineConfig::DaDianNao(t) => {
                check_buffers(&t.buffers)?
            }
            EngineConfig::Eyeriss(e) => check_row_stationary(&e.row_stationary)?,
            EngineConfig::Zc706BitLinear(z) | EngineConfig::Zc706DspPacking(z) => {
                check_buffers(&z.buffers)?
            }
        }
        self.check_dram()?;
        check_energy(&self.energy)?;
        if let Some(a) = self.area_overhead {
            non_negative("area_overhead", a, ranges::AREA_OVERHEAD)?;
        }
        if let Some(b) = self.accumulator_bits {
            if !(ranges::ACCUMULATOR_BITS.0..=ranges::ACCUMULATOR_BITS.1).contains(&b) {
                let (lo, hi) = ranges::ACCUMULATOR_BITS;
                return Err((
                    "accumulator_bits",
                    format!("must be in {lo}..={hi}, got {b}"),
                ));
            }
        }
        match &self.engine {
            EngineConfig::Zc706BitLinear(z) => self.check_board(z, false),
            EngineConfig::Zc706DspPacking(z) => self.check_board(z, true),
            _ => Ok(()),
        }
    }

    fn check_dram(&self) -> Check {
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
        Ok(())
    }

    /// A ZC706 engine's parameters and the XC7Z045's limits (`dsp`: the DSP-packing engine,
    /// one DSP48E1 slice per PE).
    fn check_board(&self, z: &Zc706Engine, dsp: bool) -> Check {
        check_zc706_params(&z.zc706)?;
        // In u128: a sum of buffer sizes must not wrap past the board's limit.
        let b = &z.buffers;
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
        if dsp && pes > u128::from(zc706_limits::DSP_SLICES) {
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
}
