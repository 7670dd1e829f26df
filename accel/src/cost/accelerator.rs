//! An accelerator: a validated configuration and its array law, costing one GEMM problem at given
//! operand bits (the engine's mapping: tiling search, channel lanes or row stationary; roofline;
//! energy) and the training GEMMs of a layer.

use cptsim_models::summary::{LayerInfo, LayerRole};
use cptsim_traces::row::Bits;

use crate::architecture::bitfusion::BitFusionLaw;
use crate::architecture::config::{self, AccelConfig, ConfigError, DepthwiseMapping, EngineConfig};
use crate::architecture::dram::{transfer_cycles, Timing};
use crate::architecture::energy::{energy_of, EnergySplit};
use crate::architecture::eyeriss::RowStationary;
use crate::architecture::law::ArrayLaw;
use crate::architecture::stripes::StripesLaw;
use crate::architecture::zc706::{pass_bits, SystolicLaw};
pub use crate::cost::gemm_cost::{CostError, GemmCost, GemmSummary};
use crate::mapping::depthwise::channel_lanes;
use crate::mapping::tiling::{search, Mapping, SearchSpace};
use crate::workload::gemm::{training_gemm, ConvProblem, GemmKind, OperandBits};

/// Widest operand any model accepts, even with the multi-pass extension.
pub const MAX_BITS: u32 = 32;

/// The array law of a configuration's engine.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Law {
    BitFusion(BitFusionLaw),
    Stripes(StripesLaw),
    Eyeriss(RowStationary),
    Systolic(SystolicLaw),
}

impl Law {
    /// The law of `config`'s engine on its array.
    fn of(config: &AccelConfig) -> Self {
        let a = &config.array;
        let kind = config.engine.kind();
        match &config.engine {
            EngineConfig::BitFusion(_) => Law::BitFusion(BitFusionLaw {
                n: a.rows,
                m: a.cols,
            }),
            EngineConfig::Stripes(_) | EngineConfig::DaDianNao(_) => Law::Stripes(StripesLaw {
                input_lanes: a.rows,
                filter_lanes: a.cols,
                serial: matches!(config.engine, EngineConfig::Stripes(_)),
            }),
            EngineConfig::Eyeriss(e) => Law::Eyeriss(RowStationary::new(a, &e.row_stationary)),
            EngineConfig::Zc706BitLinear(z) | EngineConfig::Zc706DspPacking(z) => {
                Law::Systolic(SystolicLaw::new(a, kind, &z.zc706))
            }
        }
    }
}

/// A ready-to-use accelerator model.
#[derive(Clone, Debug, PartialEq)]
pub struct Accelerator {
    pub config: AccelConfig,
    law: Law,
}

impl Accelerator {
    /// Builds the model of a validated configuration.
    pub fn new(config: AccelConfig) -> Self {
        let law = Law::of(&config);
        Self { config, law }
    }

    /// Loads a built-in name or a TOML path.
    pub fn load(name_or_path: &str) -> Result<Self, ConfigError> {
        config::load(name_or_path).map(Self::new)
    }

    /// The configuration's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Seconds for `cycles` cycles.
    pub fn seconds(&self, cycles: u64) -> f64 {
        cycles as f64 * self.config.cycle_s()
    }

    /// The operand bits the mapping search and every cost term see: Eyeriss stores and moves
    /// whole 16-bit words ([`crate::architecture::eyeriss::stored_bits`]); the other models use
    /// the bits as given. A problem's cost depends on its bits only through this.
    pub fn mapped_bits(&self, bits: OperandBits) -> OperandBits {
        match self.law {
            Law::Eyeriss(_) => crate::architecture::eyeriss::stored_bits(bits),
            _ => bits,
        }
    }

    /// DRAM bits no mapping of `problem` at `bits` avoids on this accelerator: every operand
    /// once at the width the design stores it, every output once at the width it writes
    /// (Eyeriss: 16-bit words throughout; the others: the operand bits and 32-bit outputs).
    pub fn compulsory_bits(&self, problem: &ConvProblem, bits: OperandBits) -> u64 {
        match self.law {
            Law::Eyeriss(_) => problem.compulsory_bits_at(
                self.mapped_bits(bits),
                u64::from(crate::architecture::eyeriss::output_bits(bits)),
            ),
            _ => problem.compulsory_bits(bits),
        }
    }

    /// Checks that the configuration runs these operand bits.
    pub fn check_bits(&self, bits: OperandBits) -> Result<(), CostError> {
        let native = self.config.engine.kind().native_max_bits();
        for p in [bits.stream, bits.stationary] {
            if p > MAX_BITS {
                return Err(CostError::Bits {
                    bits: p,
                    reason: format!("no model runs more than {MAX_BITS} bits"),
                });
            }
            if p > native && !self.config.multipass {
                return Err(CostError::Bits {
                    bits: p,
                    reason: format!(
                        "accelerator `{}` runs at most {native} bits natively; set `multipass = true` \
                         to run wider operands as several passes (cptsim extension)",
                        self.config.name
                    ),
                });
            }
        }
        Ok(())
    }

    /// Costs one problem at `bits`; a depthwise problem takes the configuration's `depthwise`
    /// mapping (an error without one). `first_layer` marks the network's first conv, which Bit
    /// Fusion receives im2col'ed from the host; Stripes/DaDianNao run 3-channel strided convs
    /// space-to-depth (DNNsim's rule, [`crate::architecture::stripes::space_to_depth`]). Grouped
    /// convs take the faster of two mappings: groups back to back, or one dense conv with
    /// block-diagonal (zero-padded) weights.
    pub fn cost_problem(
        &self,
        problem: &ConvProblem,
        bits: OperandBits,
        first_layer: bool,
    ) -> Result<GemmCost, CostError> {
        let mut cost = self.cost_mapped(problem, bits, first_layer)?;
        cost.energy.compute_j += problem.macs() as f64 * self.config.energy.mac_pj * 1e-12;
        Ok(cost)
    }

    /// [`Self::cost_problem`] without the per-MAC energy.
    fn cost_mapped(
        &self,
        problem: &ConvProblem,
        bits: OperandBits,
        first_layer: bool,
    ) -> Result<GemmCost, CostError> {
        self.check_bits(bits)?;
        let bits = self.mapped_bits(bits);
        if let Some(why) = problem.size_problem() {
            return Err(CostError::TooLarge(why));
        }
        if problem.depthwise {
            match (self.config.engine.depthwise(), &self.law) {
                (None, _) => {
                    return Err(CostError::NoDepthwise {
                        channels: problem.groups,
                        accel: self.config.name.clone(),
                    })
                }
                (Some(DepthwiseMapping::ChannelLanes), Law::Systolic(law)) => {
                    return self.channel_lanes_cost(law, problem, bits)
                }
                _ => {}
            }
        }
        let problem = match self.law {
            Law::BitFusion(_) if first_layer => problem.im2col(),
            Law::Stripes(_) => crate::architecture::stripes::space_to_depth(problem),
            _ => *problem,
        };
        let serial = self.grouped_cost(&problem, bits)?;
        if problem.groups <= 1 {
            return Ok(serial);
        }
        // A grouped conv can also run as one dense conv whose weights are zero off the block
        // diagonal; keep whichever mapping takes fewer cycles.
        // Only the diagonal blocks are real weights: the zeros are made on chip.
        let dense = ConvProblem {
            in_ch: problem.in_ch * problem.groups,
            out_ch: problem.out_ch * problem.groups,
            groups: 1,
            weight_scale: crate::workload::gemm::Ratio {
                num: 1,
                den: problem.groups,
            },
            ..problem
        };
        match self.grouped_cost(&dense, bits) {
            Ok(d) if d.timing.total_cycles < serial.timing.total_cycles => Ok(d),
            _ => Ok(serial),
        }
    }

    /// A depthwise problem (all channels) on the ZC706 engines' channel lanes.
    fn channel_lanes_cost(
        &self,
        law: &SystolicLaw,
        problem: &ConvProblem,
        bits: OperandBits,
    ) -> Result<GemmCost, CostError> {
        let buffers = self.buffer_bits();
        let m = channel_lanes(
            law,
            buffers,
            self.config.dram_bits_per_cycle(),
            problem,
            bits,
        )?;
        let energy = energy_of(&self.config.energy, &m.timing, &m.dram, &m.sram);
        Ok(GemmCost {
            timing: m.timing,
            dram_bits: m.dram.total(),
            sram_bits: m.sram.total(),
            energy,
            mapping: m,
            groups: 1,
        })
    }

    /// The tiled engines' buffers in bits (zero for Eyeriss, whose storage is not tiled).
    fn buffer_bits(&self) -> config::BufferBits {
        self.config.engine.buffers().map_or(
            config::BufferBits {
                input: 0,
                weight: 0,
                output: 0,
            },
            config::Buffers::bits,
        )
    }

    /// Cost of `problem` with its groups run back to back, each with the same mapping.
    fn grouped_cost(
        &self,
        problem: &ConvProblem,
        bits: OperandBits,
    ) -> Result<GemmCost, CostError> {
        let (mapping, one) = self.map_group(problem, bits)?;
        let g = problem.groups.max(1);
        let mut total = EnergySplit::default();
        total.add_scaled(&one, g as f64);
        Ok(GemmCost {
            timing: mapping.timing.times(g),
            dram_bits: mapping.dram.total() * g,
            sram_bits: mapping.sram.total() * g,
            energy: total,
            mapping,
            groups: g,
        })
    }

    /// The mapping of one group of `problem` and its energy (without the per-MAC energy):
    /// Eyeriss's row-stationary model, or the shared tiling search with this law.
    fn map_group(
        &self,
        problem: &ConvProblem,
        bits: OperandBits,
    ) -> Result<(Mapping, EnergySplit), CostError> {
        let constants = &self.config.energy;
        let per_cycle = self.config.dram_bits_per_cycle();
        let law: &dyn ArrayLaw = match &self.law {
            Law::Eyeriss(rs) => {
                let c = rs.map(problem, bits, per_cycle, constants)?;
                return Ok((c.as_tiling(problem), c.energy));
            }
            Law::BitFusion(l) => l,
            Law::Stripes(l) => l,
            Law::Systolic(l) => l,
        };
        let energy = |t: &Timing, d: &_, s: &_| energy_of(constants, t, d, s).total_j();
        let space = SearchSpace {
            law,
            buffers: self.buffer_bits(),
            dram_bits_per_cycle: per_cycle,
            energy: &energy,
        };
        let mapping = search(problem, bits, &space)?;
        let e = energy_of(constants, &mapping.timing, &mapping.dram, &mapping.sram);
        Ok((mapping, e))
    }

    /// The problem, operand bits and first-layer flag of `gemm` of `layer` for one iteration of
    /// `samples` samples at `bits` (`None` when the layer has no such GEMM).
    pub fn training_problem(
        layer: &LayerInfo,
        gemm: GemmKind,
        samples: u64,
        bits: Bits,
    ) -> Option<(ConvProblem, OperandBits, bool)> {
        let problem = training_gemm(layer, gemm, samples)?;
        let first = layer.role == LayerRole::First && gemm == GemmKind::Forward;
        Some((problem, OperandBits::of(gemm, bits), first))
    }

    /// Adds the engine's memory-only passes of `gemm` of `layer` (ZC706 only) to a problem cost, as
    /// DRAM traffic that overlaps the GEMM's compute (layer time = max(compute, memory) + prologue
    /// + epilogue).
    pub fn with_passes(
        &self,
        mut cost: GemmCost,
        layer: &LayerInfo,
        gemm: GemmKind,
        samples: u64,
        bits: OperandBits,
    ) -> GemmCost {
        if let Some(z) = self.config.engine.zc706() {
            let extra = pass_bits(z, layer, gemm, samples, bits);
            let cycles = transfer_cycles(extra, self.config.dram_bits_per_cycle());
            cost.timing = cost.timing.with_overlapped_memory(cycles);
            cost.dram_bits += extra;
            cost.energy.dram_j += extra as f64 * self.config.energy.dram_pj_per_bit * 1e-12;
        }
        cost
    }

    /// The memory-only residual-add pass (ZC706 engines; `None` elsewhere or without residual
    /// adds) over `elements` per sample for one iteration of `samples`, in one direction: DRAM
    /// time that no GEMM hides.
    pub fn residual_pass(&self, elements: u64, samples: u64) -> Option<GemmSummary> {
        let z = self.config.engine.zc706()?;
        let bits = elements
            .saturating_mul(samples)
            .saturating_mul(z.residual_bits_per_element);
        if bits == 0 {
            return None;
        }
        let cycles = transfer_cycles(bits, self.config.dram_bits_per_cycle());
        Some(GemmSummary {
            timing: Timing {
                compute_cycles: 0,
                stall_cycles: cycles,
                total_cycles: cycles,
                mem_cycles: cycles,
            },
            dram_bits: bits,
            sram_bits: 0,
            energy: EnergySplit {
                dram_j: bits as f64 * self.config.energy.dram_pj_per_bit * 1e-12,
                ..EnergySplit::default()
            },
        })
    }

    /// Costs `gemm` of `layer` for one iteration of `samples` samples at the layer's `bits`
    /// (`None` when the layer has no such GEMM), including the engine's memory-only passes.
    pub fn cost_training_gemm(
        &self,
        layer: &LayerInfo,
        gemm: GemmKind,
        samples: u64,
        bits: Bits,
    ) -> Result<Option<GemmCost>, CostError> {
        let Some((problem, ob, first)) = Self::training_problem(layer, gemm, samples, bits) else {
            return Ok(None);
        };
        let cost = self.cost_problem(&problem, ob, first)?;
        Ok(Some(self.with_passes(cost, layer, gemm, samples, ob)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(a: u32, w: u32) -> OperandBits {
        OperandBits {
            stream: a,
            stationary: w,
        }
    }

    fn conv3(cin: usize, cout: usize, hw: usize, stride: usize) -> LayerInfo {
        crate::workload::gemm::tests::conv_layer(LayerRole::Body, cin, cout, hw, stride)
    }

    fn gemm_traffic(
        acc: &Accelerator,
        l: &LayerInfo,
        gemm: GemmKind,
    ) -> crate::architecture::energy::Traffic {
        let b = Bits { w: 8, a: 8, g: 8 };
        let (p, ob, first) = Accelerator::training_problem(l, gemm, 2, b).unwrap();
        acc.cost_problem(&p, ob, first).unwrap().mapping.dram
    }

    #[test]
    fn weight_gradient_reads_each_activation_once() {
        // 16 → 16 channels, 3×3, stride 1, 8×8 map, batch 2, 8-bit: X is 2·16·8·8 = 2048 bytes
        // (the im2col rows the array sees are 9× that); dY, the stationary operand, is
        // 2·16·8·8 = 2048 bytes. Everything fits the 512 KiB buffers: compulsory traffic.
        let acc = Accelerator::load("zc706").unwrap();
        let t = gemm_traffic(&acc, &conv3(16, 16, 8, 1), GemmKind::WeightGrad);
        assert_eq!(t.input, 2048 * 8);
        assert_eq!(t.weight, 2048 * 8);
        // stride 2 on a 16×16 input, 8×8 output: X is 2·16·16·16 = 8192 bytes, read once
        let t = gemm_traffic(&acc, &conv3(16, 16, 16, 2), GemmKind::WeightGrad);
        assert_eq!(t.input, 8192 * 8);
    }

    #[test]
    fn strided_error_backprop_writes_the_whole_input_sized_error_map() {
        // 16 → 32 channels, 3×3 stride 2, 16×16 → 8×8, batch 2: dX is 2·16·16·16 = 8192
        // elements, written as 32-bit values (4× the 8×8 map the GEMM is computed over)
        let acc = Accelerator::load("zc706").unwrap();
        let t = gemm_traffic(&acc, &conv3(16, 32, 16, 2), GemmKind::ErrorBackprop);
        assert_eq!(t.output_write, 8192 * 32);
        // its input, dY, is 2·32·8·8 8-bit errors read with the kernel's halo of zero padding
        // (10×10 per map, the same convention as the forward input's padded window)
        assert_eq!(t.input, 2 * 32 * 100 * 8);
    }

    #[test]
    fn residual_pass_moves_96_bits_per_element_at_dram_speed() {
        let acc = Accelerator::load("zc706").unwrap();
        let r = acc.residual_pass(1000, 4).unwrap();
        assert_eq!(r.dram_bits, 1000 * 4 * 96);
        let per_cycle = acc.config.dram_bits_per_cycle();
        assert_eq!(r.timing.stall_cycles, (384_000.0 / per_cycle).ceil() as u64);
        assert_eq!(r.timing.compute_cycles, 0);
        assert!(Accelerator::load("bitfusion")
            .unwrap()
            .residual_pass(1000, 4)
            .is_none());
        assert!(acc.residual_pass(0, 4).is_none());
    }

    #[test]
    fn a_depthwise_layer_without_a_depthwise_mapping_is_an_error_naming_the_key() {
        let text = crate::architecture::config::builtin_text("stripes").unwrap();
        let none = text.replacen("depthwise = \"dense\"", "", 1);
        let acc = Accelerator::new(crate::architecture::config::parse(&none, "s").unwrap());
        let dw = ConvProblem {
            groups: 32,
            depthwise: true,
            ..ConvProblem::conv(2, 1, 1, 8, 3, 1, 1)
        };
        let e = acc
            .cost_problem(&dw, bits(8, 8), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`depthwise`") && e.contains("32 channels"),
            "{e}"
        );
        // a grouped, not depthwise, conv keeps the dense mappings
        let grouped = ConvProblem {
            groups: 4,
            ..ConvProblem::conv(2, 8, 8, 8, 3, 1, 1)
        };
        assert!(acc.cost_problem(&grouped, bits(8, 8), false).is_ok());
        // channel lanes are the ZC706 engines' mode only
        let lanes = text.replacen("depthwise = \"dense\"", "depthwise = \"channel-lanes\"", 1);
        let e = crate::architecture::config::parse(&lanes, "s")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown variant `channel-lanes`, expected `dense`"),
            "{e}"
        );
    }

    #[test]
    fn bitfusion_16_bit_needs_the_extension() {
        let mut acc = Accelerator::load("bitfusion").unwrap();
        assert!(acc.check_bits(bits(16, 16)).is_ok());
        acc.config.multipass = false;
        let e = acc.check_bits(bits(16, 8)).unwrap_err().to_string();
        assert!(e.contains("multipass") && e.contains("16-bit"), "{e}");
        assert!(acc.check_bits(bits(8, 8)).is_ok());
        assert!(Accelerator::load("zc706")
            .unwrap()
            .check_bits(bits(33, 8))
            .is_err());
    }

    #[test]
    fn problems_beyond_the_counters_are_rejected() {
        let acc = Accelerator::load("stripes").unwrap();
        let huge = ConvProblem::conv(
            4_000_000_000,
            4_000_000_000,
            4_000_000_000,
            4_000_000,
            3,
            1,
            1,
        );
        let e = acc.cost_problem(&huge, bits(8, 8), false).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        // Wide stride: few MACs but a huge input.
        let sparse = ConvProblem::conv(1, 1, 1, 1 << 30, 1, 1 << 25, 0);
        let e = acc.cost_problem(&sparse, bits(8, 8), false).unwrap_err();
        assert!(e.to_string().contains("input"), "{e}");
        // Just under the limit still costs, with non-zero counts.
        let big = ConvProblem::conv(1024, 512, 512, 56, 3, 1, 1);
        assert!(big.size_problem().is_none());
        let c = acc.cost_problem(&big, bits(8, 8), false).unwrap();
        assert!(c.timing.total_cycles > 0 && c.dram_bits > 0);
    }

    #[test]
    fn groups_scale_the_cost() {
        // 64 channels with 32 filters each: the dense block-diagonal form would be 64× the MACs,
        // so the groups run back to back.
        let acc = Accelerator::load("bitfusion").unwrap();
        let one = ConvProblem::conv(2, 16, 32, 16, 3, 1, 1);
        let dw = ConvProblem { groups: 64, ..one };
        let a = acc.cost_problem(&one, bits(4, 4), false).unwrap();
        let b = acc.cost_problem(&dw, bits(4, 4), false).unwrap();
        assert_eq!(b.groups, 64);
        assert_eq!(b.timing.total_cycles, 64 * a.timing.total_cycles);
        assert_eq!(b.dram_bits, 64 * a.dram_bits);
        assert!((b.energy.total_j() - 64.0 * a.energy.total_j()).abs() < 1e-12);
    }

    #[test]
    fn depthwise_takes_the_faster_mapping() {
        // 96 depthwise channels on 16×32 Fusion Units: dense block-diagonal needs
        // ceil(96/32)·ceil(96/16) = 18 passes per pixel and tap, back to back 96.
        let acc = Accelerator::load("bitfusion").unwrap();
        let dw = ConvProblem {
            groups: 96,
            ..ConvProblem::conv(8, 1, 1, 16, 3, 1, 1)
        };
        let c = acc.cost_problem(&dw, bits(8, 8), false).unwrap();
        assert_eq!(c.groups, 1);
        assert_eq!(c.timing.compute_cycles, 8 * 256 * 9 * 18);
    }

    #[test]
    fn dsp_packing_engine_respects_the_board_and_gains_from_packing() {
        let text = crate::architecture::config::builtin_text("zc706").unwrap();
        let packed = text.replacen(
            "engine = \"zc706-bit-linear\"",
            "engine = \"zc706-dsp-packing\"",
            1,
        );
        // 64×32 PEs do not fit 900 DSP48E1 slices
        let e = crate::architecture::config::parse(&packed, "z")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`array`") && e.contains("900"), "{e}");
        let fitted =
            packed
                .replacen("rows = 64", "rows = 30", 1)
                .replacen("cols = 32", "cols = 30", 1);
        let acc = Accelerator::new(crate::architecture::config::parse(&fitted, "z").unwrap());
        let p = ConvProblem::conv(16, 64, 64, 16, 3, 1, 1);
        let c8 = acc
            .cost_problem(&p, bits(8, 8), false)
            .unwrap()
            .timing
            .compute_cycles;
        let c4 = acc
            .cost_problem(&p, bits(4, 4), false)
            .unwrap()
            .timing
            .compute_cycles;
        // 3 products per DSP at 4×4 bits, 1 at 8×8
        assert!(c4 * 2 < c8, "{c4} vs {c8}");
    }

    #[test]
    fn eyeriss_charges_the_alu_and_four_scratchpad_accesses_per_mac() {
        // Eyeriss's RS energy per MAC: ALU 1x + four PE-scratchpad accesses at 1x each (read
        // ifmap, read filter, read partial sum, write partial sum), 1x = 16 bits × 0.2 pJ; the
        // Bit Fusion authors' Eyeriss data have RF = 4 × ALU. No per-cycle core energy, so the
        // compute energy of any problem is MACs × 5 × 3.2 pJ, whatever the bits.
        let acc = Accelerator::load("eyeriss").unwrap();
        let p = ConvProblem::conv(2, 16, 32, 8, 3, 1, 1);
        for b in [bits(16, 16), bits(4, 4)] {
            let c = acc.cost_problem(&p, b, false).unwrap();
            let want = p.macs() as f64 * 5.0 * 16.0 * 0.2e-12;
            assert!((c.energy.compute_j - want).abs() <= want * 1e-12, "{c:?}");
        }
    }

    #[test]
    fn eyeriss_moves_sub_16_bit_operands_as_16_bit_words() {
        // 64 → 64 FC, batch 2, everything fits: compulsory traffic. At 4/4 bits Eyeriss still
        // moves 16-bit words: inputs 2·64·16, weights 64·64·16 bits — the same as at 16/16.
        let acc = Accelerator::load("eyeriss").unwrap();
        let p = ConvProblem::fc(2, 64, 64);
        let d4 = acc
            .cost_problem(&p, bits(4, 4), false)
            .unwrap()
            .mapping
            .dram;
        let d16 = acc
            .cost_problem(&p, bits(16, 16), false)
            .unwrap()
            .mapping
            .dram;
        assert_eq!(d4.input, 2 * 64 * 16);
        assert_eq!(d4.weight, 64 * 64 * 16);
        assert_eq!(d4, d16);
    }
}
