//! Costing a whole precision trace on one accelerator: totals, per layer × GEMM and per epoch.

use cptsim_models::summary::ModelSummary;
use cptsim_traces::row::{Bits, TraceRow};
use cptsim_traces::{absent_layers_as_fp32, static_rows};
use serde::{Deserialize, Serialize};

use crate::architecture::energy::EnergySplit;
use crate::cost::accelerator::{Accelerator, CostError};
use crate::cost::cache::{GemmCache, GemmSummary};
use crate::workload::gemm::GemmKind;

/// Accumulated cost of some part of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CostTotals {
    /// Accelerator cycles (compute + stalls).
    pub cycles: f64,
    /// Cycles the array computed.
    pub compute_cycles: f64,
    /// Cycles the array waited for memory.
    pub stall_cycles: f64,
    /// Cycles of DRAM traffic that can overlap compute (a GEMM is memory-bound when they exceed
    /// its compute cycles).
    pub mem_cycles: f64,
    /// Wall time, seconds.
    pub latency_s: f64,
    pub energy: EnergySplit,
    /// DRAM traffic, bytes.
    pub dram_bytes: f64,
}

impl CostTotals {
    /// Adds `k` repetitions of one GEMM's cost.
    pub(crate) fn add(&mut self, s: &GemmSummary, k: f64, cycle_s: f64) {
        self.cycles += s.timing.total_cycles as f64 * k;
        self.compute_cycles += s.timing.compute_cycles as f64 * k;
        self.stall_cycles += s.timing.stall_cycles as f64 * k;
        self.mem_cycles += s.timing.mem_cycles as f64 * k;
        self.latency_s += s.timing.total_cycles as f64 * k * cycle_s;
        self.energy.add_scaled(&s.energy, k);
        self.dram_bytes += s.dram_bits as f64 / 8.0 * k;
    }

    /// Total energy, joules.
    pub fn energy_j(&self) -> f64 {
        self.energy.total_j()
    }

    /// `"memory"` when the DRAM traffic takes longer than the compute, else `"compute"`.
    pub fn bound(&self) -> &'static str {
        if self.mem_cycles > self.compute_cycles {
            "memory"
        } else {
            "compute"
        }
    }
}

/// The cost of one GEMM of one layer over the whole trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerGemmCost {
    /// Index in `ModelSummary::layers`; the number of layers for the residual-add pass.
    pub layer: usize,
    /// Layer name ([`RESIDUAL_ADD`] for the residual-add pass).
    pub name: String,
    pub gemm: GemmKind,
    pub totals: CostTotals,
}

/// The cost of one epoch (`iters_per_epoch` iterations; the last may be shorter).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochCost {
    /// 0-based epoch.
    pub epoch: u64,
    /// First iteration (inclusive).
    pub iter_start: u64,
    /// Last iteration (exclusive).
    pub iter_end: u64,
    pub totals: CostTotals,
}

/// A whole trace costed on one accelerator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceCost {
    /// Accelerator configuration name.
    pub accelerator: String,
    pub totals: CostTotals,
    /// One entry per (layer, GEMM) that ran, in layer then GEMM order.
    pub per_layer_gemm: Vec<LayerGemmCost>,
    pub per_epoch: Vec<EpochCost>,
    /// Distinct tiling searches the trace needed.
    pub evaluations: usize,
}

/// One accelerator's line in `cptsim run --accel` JSON: a run against its static baseline, with
/// the run's per-layer × GEMM and per-epoch rows when they were asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub name: String,
    pub latency_s: f64,
    pub energy_j: f64,
    pub dram_bytes: f64,
    pub static_latency_s: f64,
    pub static_energy_j: f64,
    pub static_dram_bytes: f64,
    pub breakdown: EnergySplit,
    /// One entry per (layer, GEMM) that ran, in layer then GEMM order (empty unless asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_layer_gemm: Vec<LayerGemmCost>,
    /// One entry per epoch (empty unless asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_epoch: Vec<EpochCost>,
}

impl RunSummary {
    /// The run `cost` next to its static baseline `baseline`.
    pub fn new(cost: &TraceCost, baseline: &TraceCost) -> Self {
        Self {
            name: cost.accelerator.clone(),
            latency_s: cost.totals.latency_s,
            energy_j: cost.totals.energy_j(),
            dram_bytes: cost.totals.dram_bytes,
            static_latency_s: baseline.totals.latency_s,
            static_energy_j: baseline.totals.energy_j(),
            static_dram_bytes: baseline.totals.dram_bytes,
            breakdown: cost.totals.energy,
            per_layer_gemm: Vec::new(),
            per_epoch: Vec::new(),
        }
    }

    /// Relative latency reduction against the static baseline (0.2 = 20 % faster).
    pub fn latency_reduction(&self) -> f64 {
        1.0 - self.latency_s / self.static_latency_s
    }

    /// Relative energy reduction against the static baseline.
    pub fn energy_reduction(&self) -> f64 {
        1.0 - self.energy_j / self.static_energy_j
    }
}

/// Why a trace cannot be costed.
#[derive(Debug, thiserror::Error)]
pub enum TraceCostError {
    #[error("iterations per epoch must be greater than zero")]
    ZeroEpoch,
    /// The per-epoch breakdown would need more rows than [`MAX_EPOCHS`].
    #[error("the per-epoch breakdown would have {epochs} epochs of {iters_per_epoch} iterations, more than {MAX_EPOCHS}: use longer epochs")]
    TooManyEpochs { epochs: u64, iters_per_epoch: u64 },
    /// A cost came out NaN or infinite (extreme configuration values).
    #[error("layer `{layer}`, {gemm} GEMM on accelerator `{accel}`: the cost is not a finite number ({what}); check the configuration's clock, bandwidth and energy constants")]
    NotFinite {
        layer: String,
        gemm: &'static str,
        accel: String,
        what: &'static str,
    },
    #[error("trace row for iterations {start}..{end} names layer {layer}, but model `{model}` has {count} layers")]
    NoSuchLayer {
        start: u64,
        end: u64,
        layer: u32,
        model: String,
        count: usize,
    },
    #[error("layer `{layer}`, {gemm} GEMM on accelerator `{accel}`: {error}")]
    Gemm {
        layer: String,
        gemm: &'static str,
        accel: String,
        /// Why (in the message, not a separate `source()`, so `{:#}` prints it once).
        error: CostError,
    },
}

/// The name of the per-layer entry of the residual-add pass (layer index = number of layers).
pub const RESIDUAL_ADD: &str = "residual-add";

fn layer_name(model: &ModelSummary, li: usize) -> String {
    model
        .layers
        .get(li)
        .map_or_else(|| RESIDUAL_ADD.to_string(), |l| l.name.clone())
}

/// Most epochs a per-epoch breakdown holds (one row each in memory and in the report).
pub const MAX_EPOCHS: u64 = 1 << 20;

impl CostTotals {
    /// The first of its numbers that is NaN or infinite, by name.
    pub fn non_finite(&self) -> Option<&'static str> {
        [
            ("cycles", self.cycles),
            ("compute cycles", self.compute_cycles),
            ("stall cycles", self.stall_cycles),
            ("latency", self.latency_s),
            ("compute energy", self.energy.compute_j),
            ("SRAM energy", self.energy.sram_j),
            ("DRAM energy", self.energy.dram_j),
            ("DRAM bytes", self.dram_bytes),
        ]
        .into_iter()
        .find(|(_, v)| !v.is_finite())
        .map(|(k, _)| k)
    }
}

/// Costs every row of a trace of `model` on `acc`; epochs are `iters_per_epoch` iterations long
/// (`u64::MAX`: one epoch, when no per-epoch breakdown is wanted). A breakdown of more than
/// [`MAX_EPOCHS`] epochs is an error, checked before anything is allocated for it.
pub fn cost_trace(
    model: &ModelSummary,
    rows: impl IntoIterator<Item = TraceRow>,
    iters_per_epoch: u64,
    acc: &Accelerator,
) -> Result<TraceCost, TraceCostError> {
    cost_rows(model, rows, iters_per_epoch, acc, &mut GemmCache::new(acc))
}

/// [`cost_trace`] with the searches memoised in `cache` (a cache for `acc`), which may hold
/// those of another trace of the same model: its `evaluations` counts the searches this trace
/// added.
fn cost_rows(
    model: &ModelSummary,
    rows: impl IntoIterator<Item = TraceRow>,
    iters_per_epoch: u64,
    acc: &Accelerator,
    cache: &mut GemmCache,
) -> Result<TraceCost, TraceCostError> {
    if iters_per_epoch == 0 {
        return Err(TraceCostError::ZeroEpoch);
    }
    let searched = cache.evaluations();
    let cycle_s = acc.config.cycle_s();
    let mut totals = CostTotals::default();
    // One slot per layer, plus the residual-add pass (after the layers, see RESIDUAL_ADD).
    let mut per_lg: Vec<[Option<CostTotals>; 3]> = vec![[None; 3]; model.layers.len() + 1];
    let mut epochs: Vec<CostTotals> = Vec::new();
    let mut last_iter = 0u64;
    for row in rows {
        let iters = row.iterations();
        if iters == 0 || row.samples == 0 {
            continue;
        }
        let li = row.layer as usize;
        let layer = model
            .layers
            .get(li)
            .ok_or_else(|| TraceCostError::NoSuchLayer {
                start: row.iter_start,
                end: row.iter_end,
                layer: row.layer,
                model: model.name.clone(),
                count: model.layers.len(),
            })?;
        last_iter = last_iter.max(row.iter_end);
        let last_epoch = (row.iter_end - 1) / iters_per_epoch;
        if last_epoch >= MAX_EPOCHS {
            return Err(TraceCostError::TooManyEpochs {
                epochs: last_epoch.saturating_add(1),
                iters_per_epoch,
            });
        }
        if epochs.len() <= last_epoch as usize {
            epochs.resize(last_epoch as usize + 1, CostTotals::default());
        }
        // The residual adds run once per iteration: charged with the first layer's rows.
        let residual = (li == 0)
            .then(|| acc.residual_pass(model.residual_elements, row.samples))
            .flatten();
        let mut add = |slot: usize, gi: usize, s: &GemmSummary| {
            totals.add(s, iters as f64, cycle_s);
            per_lg[slot][gi]
                .get_or_insert_with(CostTotals::default)
                .add(s, iters as f64, cycle_s);
            for e in row.iter_start / iters_per_epoch..=last_epoch {
                let lo = row.iter_start.max(e * iters_per_epoch);
                let hi = row.iter_end.min((e + 1).saturating_mul(iters_per_epoch));
                epochs[e as usize].add(s, (hi - lo) as f64, cycle_s);
            }
        };
        if let Some(r) = &residual {
            // forward and error backprop each move the same bits
            add(model.layers.len(), 0, r);
            add(model.layers.len(), 1, r);
        }
        for (gi, gemm) in GemmKind::ALL.into_iter().enumerate() {
            let s = cache
                .cost(li, layer, gemm, row.samples, row.bits)
                .map_err(|error| TraceCostError::Gemm {
                    layer: layer.name.clone(),
                    gemm: gemm.label(),
                    accel: acc.name().to_string(),
                    error,
                })?;
            let Some(s) = s else { continue };
            add(li, gi, &s);
        }
    }
    let per_layer_gemm = layer_rows(model, per_lg, acc)?;
    let per_epoch = epochs
        .into_iter()
        .enumerate()
        .map(|(e, totals)| {
            let e = e as u64;
            EpochCost {
                epoch: e,
                iter_start: e * iters_per_epoch,
                iter_end: (e + 1).saturating_mul(iters_per_epoch).min(last_iter),
                totals,
            }
        })
        .collect();
    Ok(TraceCost {
        accelerator: acc.name().to_string(),
        totals,
        per_layer_gemm,
        per_epoch,
        evaluations: cache.evaluations() - searched,
    })
}

/// The per-layer × GEMM rows of `per_lg` (one slot per layer and the residual-add pass), in
/// layer then GEMM order; a non-finite total is an error naming its layer and GEMM.
fn layer_rows(
    model: &ModelSummary,
    per_lg: Vec<[Option<CostTotals>; 3]>,
    acc: &Accelerator,
) -> Result<Vec<LayerGemmCost>, TraceCostError> {
    let mut rows = Vec::new();
    for (li, gs) in per_lg.into_iter().enumerate() {
        for (gemm, t) in GemmKind::ALL.into_iter().zip(gs) {
            let Some(totals) = t else { continue };
            if let Some(what) = totals.non_finite() {
                return Err(TraceCostError::NotFinite {
                    layer: layer_name(model, li),
                    gemm: gemm.label(),
                    accel: acc.name().to_string(),
                    what,
                });
            }
            rows.push(LayerGemmCost {
                layer: li,
                name: layer_name(model, li),
                gemm,
                totals,
            });
        }
    }
    Ok(rows)
}

/// A run's trace ready to cost against its static baseline: the layers the trace does not list
/// completed as fp32 ([`absent_layers_as_fp32`]) and the baseline's rows ([`static_rows`]), the
/// rules BitOPs accounting follows too.
#[derive(Clone, Debug)]
pub struct RunTrace {
    rows: Vec<TraceRow>,
    baseline: Vec<TraceRow>,
}

impl RunTrace {
    /// The trace `rows` of a run of `iterations` × `batch` samples on `model`, against a static
    /// baseline at `baseline` bits.
    pub fn new(
        model: &ModelSummary,
        mut rows: Vec<TraceRow>,
        iterations: u64,
        batch: u64,
        baseline: Bits,
    ) -> Self {
        let absent = absent_layers_as_fp32(&rows, model.layers.len(), iterations, batch);
        rows.extend(absent);
        let baseline = static_rows(&rows, baseline);
        Self { rows, baseline }
    }

    /// Costs the run (per epoch of `iters_per_epoch` iterations, as [`cost_trace`]) and its
    /// baseline (one epoch) on `acc`: the run's cost and its summary line. The two share their
    /// searches: on an accelerator that stores every width alike (Eyeriss) the baseline's
    /// problems are the run's, and costing each separately searched every one twice.
    pub fn cost(
        &self,
        model: &ModelSummary,
        iters_per_epoch: u64,
        acc: &Accelerator,
    ) -> Result<(TraceCost, RunSummary), TraceCostError> {
        let mut cache = GemmCache::new(acc);
        let rows = self.rows.iter().copied();
        let run = cost_rows(model, rows, iters_per_epoch, acc, &mut cache)?;
        let rows = self.baseline.iter().copied();
        let baseline = cost_rows(model, rows, u64::MAX, acc, &mut cache)?;
        let summary = RunSummary::new(&run, &baseline);
        Ok((run, summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_totals_are_named() {
        let mut t = CostTotals::default();
        assert_eq!(t.non_finite(), None);
        t.energy.dram_j = f64::INFINITY;
        assert_eq!(t.non_finite(), Some("DRAM energy"));
        t.latency_s = f64::NAN;
        assert_eq!(t.non_finite(), Some("latency"));
    }
}
