//! BitOPs accounting of precision traces (docs/src/methods/cost.md).
//!
//! Per conv / linear layer and sample, the three training GEMMs cost
//! `MAC · (b_a·b_w + b_g·b_w + b_a·b_g)` bit-operations; a bit-width of 0 (fp32) counts as
//! 32. [`BitOpsCounter`] streams over trace rows keeping one tally per layer, so a trace of any
//! length costs O(layers) memory, and reports two accountings:
//!
//! * [`Accounting::Paper`]: every op of a forward pass — conv/FC MACs plus 2 per BatchNorm
//!   output element — is charged at the scheduled precision. With one precision per iteration
//!   this is `OPS_img · Σ_t batch · (b_fw² + 2·b_fw·b_bw)`, the rule that reproduces the
//!   published GBitOPs. When quantized layers differ (per-layer or per-sample precision), the
//!   layers and ops the scope leaves in fp32 are charged at the MAC-weighted mean cost of the
//!   quantized layer-samples.
//! * [`Accounting::Hardware`]: quantized layers at their bits, layers (or layer-samples) not
//!   quantized at 32 bits; BatchNorm / elementwise work is reported separately as fp32 ops.

use cptsim_models::ModelSummary;
use cptsim_traces::{static_bits, Bits, TraceRow};

/// Bit-operations of one fp32 layer-sample per MAC: three GEMMs at 32 × 32 bits.
pub const FP32_COST: u64 = 3 * 32 * 32;

/// Which accounting rule to report (`paper` or `hardware` in a report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accounting {
    /// The papers' rule.
    #[default]
    Paper,
    /// Quantized layers at their bits, fp32 layers at 32 bits, BN separate.
    Hardware,
}

impl Accounting {
    /// Names accepted by [`Accounting::by_name`].
    pub const NAMES: [&'static str; 2] = ["paper", "hardware"];

    /// Looks an accounting up by name.
    pub fn by_name(name: &str) -> Option<Accounting> {
        match name {
            "paper" => Some(Accounting::Paper),
            "hardware" => Some(Accounting::Hardware),
            _ => None,
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Accounting::Paper => "paper",
            Accounting::Hardware => "hardware",
        }
    }
}

/// A trace row the counter cannot cost.
#[derive(Debug, thiserror::Error)]
pub enum BitOpsError {
    /// The row names a layer the model does not have.
    #[error("layer index {layer} out of range: model '{model}' has {layers} conv/linear layers")]
    LayerOutOfRange {
        /// The row's layer index.
        layer: u32,
        /// The model name.
        model: String,
        /// The model's layer count.
        layers: usize,
    },
}

/// Per-sample bit-operation factor of one GEMM triple: `b_a·b_w + b_g·b_w + b_a·b_g`, with 0
/// (fp32) counted as 32.
pub fn gemm_factor(bits: Bits) -> u64 {
    let b = |x: u8| if x == 0 { 32 } else { u64::from(x) };
    let (w, a, g) = (b(bits.w), b(bits.a), b(bits.g));
    a * w + g * w + a * g
}

/// What one layer accumulated.
#[derive(Clone, Debug, Default)]
struct Tally {
    /// Samples per bit-widths the layer ran quantized at, in first-seen order (few entries: one
    /// per scheduled precision or DFQ candidate).
    quantized: Vec<(Bits, u128)>,
    /// Samples the layer ran in fp32 (rows with [`Bits::FP32`]).
    fp32_samples: u128,
}

impl Tally {
    /// Samples the layer ran quantized.
    fn quantized_samples(&self) -> u128 {
        self.quantized.iter().map(|&(_, n)| n).sum()
    }
}

/// Bit-operation totals of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BitOps {
    /// Samples of the run (iterations × batch).
    pub samples: u64,
    /// Paper accounting, bit-operations.
    pub paper: f64,
    /// Hardware accounting: the quantized layer-samples at their bits.
    pub hardware_quantized: f64,
    /// Hardware accounting: conv / linear layer-samples not quantized, at 32 bits.
    pub hardware_fp32: f64,
    /// BatchNorm work, fp32 operations (2 per output element and sample), reported separately.
    pub bn_ops: f64,
}

impl BitOps {
    /// Bit-operations under `accounting` (hardware: conv/linear only, BN excluded).
    pub fn get(&self, accounting: Accounting) -> f64 {
        match accounting {
            Accounting::Paper => self.paper,
            Accounting::Hardware => self.hardware_quantized + self.hardware_fp32,
        }
    }

    /// `get(accounting) / 1e9`.
    pub fn gbitops(&self, accounting: Accounting) -> f64 {
        self.get(accounting) / 1e9
    }
}

/// Streams trace rows of one model into per-layer tallies.
#[derive(Clone, Debug)]
pub struct BitOpsCounter {
    model: String,
    macs: Vec<u64>,
    ops_per_image: u64,
    bn_elements: u64,
    tallies: Vec<Tally>,
    bounds: Option<(Bits, Bits)>,
}

impl BitOpsCounter {
    /// A counter for traces of `model`.
    pub fn new(model: &ModelSummary) -> BitOpsCounter {
        BitOpsCounter {
            model: model.name.clone(),
            macs: model.layers.iter().map(|l| l.macs).collect(),
            ops_per_image: model.ops_per_image(),
            bn_elements: model.bn_elements,
            tallies: vec![Tally::default(); model.layers.len()],
            bounds: None,
        }
    }

    /// Adds one row.
    pub fn add(&mut self, row: &TraceRow) -> Result<(), BitOpsError> {
        let layers = self.tallies.len();
        let tally = self.tallies.get_mut(row.layer as usize).ok_or_else(|| {
            BitOpsError::LayerOutOfRange {
                layer: row.layer,
                model: self.model.clone(),
                layers,
            }
        })?;
        // In u128: `iterations · samples` of a long span overflows u64.
        let samples = u128::from(row.iterations()) * u128::from(row.samples);
        if row.bits.is_fp32() {
            tally.fp32_samples += samples;
        } else {
            let b = row.bits;
            match tally.quantized.iter_mut().find(|(bits, _)| *bits == b) {
                Some((_, n)) => *n += samples,
                None => tally.quantized.push((b, samples)),
            }
            let (lo, hi) = self.bounds.unwrap_or((b, b));
            self.bounds = Some((
                Bits {
                    w: lo.w.min(b.w),
                    a: lo.a.min(b.a),
                    g: lo.g.min(b.g),
                },
                Bits {
                    w: hi.w.max(b.w),
                    a: hi.a.max(b.a),
                    g: hi.g.max(b.g),
                },
            ));
        }
        Ok(())
    }

    /// Adds every row of `rows`.
    pub fn add_all<'r>(
        &mut self,
        rows: impl IntoIterator<Item = &'r TraceRow>,
    ) -> Result<(), BitOpsError> {
        rows.into_iter().try_for_each(|r| self.add(r))
    }

    /// Smallest and largest weight, activation and error bits over the quantized rows (`None`
    /// if no row was quantized).
    pub fn bit_bounds(&self) -> Option<(Bits, Bits)> {
        self.bounds
    }

    /// Samples of the run: the most any layer was charged for.
    pub fn samples(&self) -> u128 {
        self.tallies
            .iter()
            .map(|t| t.quantized_samples() + t.fp32_samples)
            .max()
            .unwrap_or(0)
    }

    /// The totals of the rows added so far. Layer-samples the rows do not list ran in fp32 (the
    /// rule of [`cptsim_traces::absent_layers_as_fp32`]).
    pub fn totals(&self) -> BitOps {
        self.totals_with(|b| b)
    }

    /// The totals of the static baseline at `bits`: every layer-sample at
    /// [`cptsim_traces::static_bits`] (the quantized ones at `bits`, the fp32 ones in fp32), as
    /// the accelerator costing's [`cptsim_traces::static_rows`].
    pub fn static_totals(&self, bits: Bits) -> BitOps {
        self.totals_with(|b| static_bits(b, bits))
    }

    /// The totals with every quantized layer-sample's bits replaced by `bits_of(its bits)`.
    fn totals_with(&self, bits_of: impl Fn(Bits) -> Bits) -> BitOps {
        let samples = self.samples();
        let mut quantized = 0u128;
        let mut quantized_mac_samples = 0u128;
        let mut fp32 = 0u128;
        for (t, &mac) in self.tallies.iter().zip(&self.macs) {
            let mac = u128::from(mac);
            let mut layer_quantized = 0u128;
            for &(b, n) in &t.quantized {
                let b = bits_of(b);
                if !b.is_fp32() {
                    quantized += mac * u128::from(gemm_factor(b)) * n;
                    layer_quantized += n;
                }
            }
            quantized_mac_samples += mac * layer_quantized;
            fp32 += mac * u128::from(FP32_COST) * samples.saturating_sub(layer_quantized);
        }
        // Mean bit-operations per op of the quantized work; fp32 if nothing was quantized.
        let per_op = if quantized_mac_samples == 0 {
            FP32_COST as f64
        } else {
            quantized as f64 / quantized_mac_samples as f64
        };
        BitOps {
            samples: u64::try_from(samples).unwrap_or(u64::MAX),
            paper: self.ops_per_image as f64 * samples as f64 * per_op,
            hardware_quantized: quantized as f64,
            hardware_fp32: fp32 as f64,
            bn_ops: 2.0 * self.bn_elements as f64 * samples as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::bitops::layer;
    use cptsim_models::LayerRole;
    use cptsim_traces::schedule::{BitRange, ScheduleArgs};
    use cptsim_traces::{synthesize, QuantScope};

    #[test]
    fn the_papers_bitops_figures_hold() {
        // the static GBitOPs, CPT and ImageNet reductions, Wolfe & Kyrillidis ratios, CPT's
        // ResNet-74 run and FracTrain's fp32-equivalent MACs (`crate::validation::bitops`)
        let rows = crate::validation::bitops::rows().unwrap();
        assert!(rows.len() > 70, "{}", rows.len());
        for r in &rows {
            assert_eq!(r.passes(), Some(true), "{r:?}");
        }
    }

    #[test]
    fn a_span_whose_samples_overflow_u64_still_counts() {
        // iterations · samples wrapped to 0 in u64 (2^62 · 4 = 2^64): 0 GBitOPs before
        let m = crate::validation::bitops::totals_model("one", 1000, 0);
        let mut c = BitOpsCounter::new(&m);
        for layer in 0..m.layers.len() as u32 {
            c.add(&TraceRow {
                iter_start: 0,
                iter_end: 1 << 62,
                layer,
                bits: Bits { w: 8, a: 8, g: 8 },
                samples: 4,
            })
            .unwrap();
        }
        assert_eq!(c.samples(), 1u128 << 64);
        let q = c.totals().hardware_quantized;
        let expect = m.total_macs() as f64 * 192.0 * (1u128 << 64) as f64;
        assert!((q / expect - 1.0).abs() < 1e-12, "{q:e} vs {expect:e}");
    }

    fn three_layers() -> ModelSummary {
        ModelSummary {
            name: "three".into(),
            input: vec![1, 3, 8, 8],
            layers: vec![
                layer("stem", LayerRole::First, 100),
                layer("body", LayerRole::Body, 200),
                layer("fc", LayerRole::Last, 50),
            ],
            bn_elements: 10,
            residual_elements: 0,
            params: 0,
        }
    }

    #[test]
    fn hardware_charges_fp32_layers_at_32_bits() {
        let m = three_layers();
        let schedule = ScheduleArgs::new("static", 2)
            .bits(BitRange::fixed(4))
            .build()
            .unwrap();
        let mut c = BitOpsCounter::new(&m);
        for row in synthesize(&schedule, &m, &QuantScope::CPT_CIFAR, 3) {
            c.add(&row).unwrap();
        }
        let t = c.totals();
        // 6 samples; (4,4,8): 16 + 32 + 32 = 80 per MAC.
        assert_eq!(t.samples, 6);
        assert_eq!(t.hardware_quantized, (300 * 80 * 6) as f64);
        assert_eq!(t.hardware_fp32, (50 * 3072 * 6) as f64);
        assert_eq!(
            t.get(Accounting::Hardware),
            (300 * 80 * 6 + 50 * 3072 * 6) as f64
        );
        assert_eq!(t.bn_ops, 120.0);
        // Paper: every op (350 MACs + 20 BN) at the scheduled precision.
        assert_eq!(t.paper, (370 * 6 * 80) as f64);
        // The same trace under the all-scheduled scope differs only in hardware accounting.
        let all = {
            let mut c = BitOpsCounter::new(&m);
            synthesize(&schedule, &m, &QuantScope::ALL, 3)
                .try_for_each(|r| c.add(&r))
                .unwrap();
            c.totals()
        };
        assert_eq!(all.paper, t.paper);
        assert_eq!(all.get(Accounting::Hardware), (350 * 80 * 6) as f64);
    }

    #[test]
    fn per_sample_histograms_cost_each_part() {
        let m = three_layers();
        let rows = [
            TraceRow {
                iter_start: 0,
                iter_end: 10,
                layer: 1,
                bits: Bits { w: 4, a: 3, g: 6 },
                samples: 100,
            },
            TraceRow {
                iter_start: 0,
                iter_end: 10,
                layer: 1,
                bits: Bits { w: 4, a: 6, g: 12 },
                samples: 28,
            },
        ];
        let mut c = BitOpsCounter::new(&m);
        c.add_all(&rows).unwrap();
        assert_eq!(gemm_factor(rows[0].bits), 12 + 24 + 18);
        assert_eq!(gemm_factor(rows[1].bits), 24 + 48 + 72);
        let t = c.totals();
        assert_eq!(t.samples, 1280);
        assert_eq!(
            t.hardware_quantized,
            (200 * 10 * (54 * 100 + 144 * 28)) as f64
        );
        // Layers absent from the trace ran fp32 for every sample.
        assert_eq!(t.hardware_fp32, (150 * 3072 * 1280) as f64);
        assert_eq!(
            c.bit_bounds(),
            Some((Bits { w: 4, a: 3, g: 6 }, Bits { w: 4, a: 6, g: 12 }))
        );
    }

    /// The counter's static totals are the totals of `traces::static_rows`, and its totals of a
    /// trace listing some layers those of the trace completed by `absent_layers_as_fp32`: BitOPs
    /// and the accelerator costing see the same baseline and the same completed trace.
    #[test]
    fn static_totals_and_completion_follow_the_traces_rules() {
        let m = three_layers();
        let row = |layer, bits, samples| TraceRow {
            iter_start: 0,
            iter_end: 10,
            layer,
            bits,
            samples,
        };
        let rows = [
            row(1, Bits { w: 4, a: 3, g: 6 }, 100),
            row(1, Bits { w: 4, a: 6, g: 12 }, 28),
            row(2, Bits::FP32, 128),
        ];
        let counted = |rows: &[TraceRow]| {
            let mut c = BitOpsCounter::new(&m);
            c.add_all(rows).unwrap();
            c
        };
        let c = counted(&rows);
        let base = Bits::forward_backward(8, 12);
        assert_eq!(
            c.static_totals(base),
            counted(&cptsim_traces::static_rows(&rows, base)).totals()
        );
        let mut complete = rows.to_vec();
        complete.extend(cptsim_traces::absent_layers_as_fp32(&rows, 3, 10, 128));
        assert_eq!(complete.len(), 4);
        assert_eq!(c.totals(), counted(&complete).totals());
    }

    #[test]
    fn fp32_operands_count_as_32_bits() {
        assert_eq!(gemm_factor(Bits::FP32), FP32_COST);
        // b_bw = 0 with b_fw = 8: error GEMMs at 32 bits.
        assert_eq!(gemm_factor(Bits { w: 8, a: 8, g: 0 }), 64 + 256 + 256);
    }

    #[test]
    fn unknown_layer_is_an_error() {
        let mut c = BitOpsCounter::new(&three_layers());
        let row = TraceRow {
            iter_start: 0,
            iter_end: 1,
            layer: 3,
            bits: Bits::FP32,
            samples: 1,
        };
        let e = c.add(&row).unwrap_err().to_string();
        assert!(e.contains("layer index 3") && e.contains("'three'"), "{e}");
        assert_eq!(Accounting::by_name("hardware"), Some(Accounting::Hardware));
        assert_eq!(Accounting::by_name("x"), None);
    }
}
