//! A run's whole report as one library call: the BitOPs of its trace against its static baseline
//! and, on each accelerator, its time, energy and DRAM traffic against the same baseline
//! ([`cost()`] → [`RunReport`], the document `cptsim run --format json` prints). Free of printing
//! and of any command-line type, so other front ends can call it.

use cptsim_models::summary::ModelSummary;
use cptsim_traces::schedule::BitRange;
use cptsim_traces::{Bits, TraceRow};
use serde::{Deserialize, Serialize};

use crate::cost::accelerator::Accelerator;
use crate::cost::trace::{RunSummary, RunTrace, TraceCostError};
use crate::workload::bitops::{Accounting, BitOpsCounter, BitOpsError};

/// Backward bits as a report shows them: one number when fixed, `[min, max]` when they vary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GradBits {
    Fixed(u8),
    Range([u8; 2]),
}

impl GradBits {
    /// The report form of `range`.
    pub fn of(range: BitRange) -> Self {
        if range.is_fixed() {
            GradBits::Fixed(range.max)
        } else {
            GradBits::Range([range.min, range.max])
        }
    }

    /// The widest bits.
    pub fn max(self) -> u8 {
        match self {
            GradBits::Fixed(b) => b,
            GradBits::Range([_, hi]) => hi,
        }
    }
}

impl std::fmt::Display for GradBits {
    /// `8` or `6:8`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GradBits::Fixed(b) => write!(f, "{b}"),
            GradBits::Range([lo, hi]) => write!(f, "{lo}:{hi}"),
        }
    }
}

/// What `cptsim run` reports, and its JSON document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub model: String,
    /// The schedule's name, or `trace:PATH` for a trace file.
    pub schedule: String,
    /// Forward bits `[min, max]`.
    pub bits: [u8; 2],
    /// Backward bits.
    pub grad_bits: GradBits,
    pub iterations: u64,
    pub batch: u64,
    pub accounting: Accounting,
    pub gbitops: f64,
    pub static_gbitops: f64,
    /// `1 − gbitops / static_gbitops`.
    pub reduction: f64,
    /// BatchNorm work in fp32 GOPs (hardware accounting only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bn_gops: Option<f64>,
    /// Rows of the trace that was written or read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_rows: Option<u64>,
    /// Time, energy and DRAM traffic on each accelerator, with the static baseline's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accelerators: Vec<RunSummary>,
}

impl RunReport {
    /// The static baseline's bits: every quantized layer-sample at the forward and backward
    /// maxima.
    pub fn baseline(&self) -> Bits {
        Bits::forward_backward(self.bits[1], self.grad_bits.max())
    }

    /// The report without the accelerators' per-layer × GEMM and per-epoch rows (what
    /// `cptsim run` prints once it has written them to CSV files).
    pub fn without_breakdowns(mut self) -> Self {
        for a in &mut self.accelerators {
            a.per_layer_gemm.clear();
            a.per_epoch.clear();
        }
        self
    }
}

/// Where a run's bit ranges (shown in the report; the static baseline takes their maxima) come
/// from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ranges {
    /// The schedule's ranges.
    Given { fw: BitRange, bw: BitRange },
    /// A recorded trace's own (forward over weights and activations, backward over errors),
    /// each replaced by the one given; a trace without quantized rows is an error.
    FromTrace {
        fw: Option<BitRange>,
        bw: Option<BitRange>,
    },
}

/// How a run was made: what the report says of it besides its costs.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    /// The schedule's name, or `trace:PATH`.
    pub schedule: String,
    pub iterations: u64,
    /// Samples per iteration.
    pub batch: u64,
    pub ranges: Ranges,
    /// Rows of the trace that was written or read, if one was.
    pub trace_rows: Option<u64>,
}

/// What to compute besides the totals.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CostOptions {
    pub accounting: Accounting,
    /// Keep each accelerator's per-layer × GEMM rows and per-epoch rows of this many
    /// iterations; without it a run of any length costs as one epoch and the rows are dropped.
    pub breakdown_epoch_iters: Option<u64>,
}

/// Why a run cannot be costed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A trace row the BitOPs counter cannot cost.
    #[error(transparent)]
    BitOps(#[from] BitOpsError),
    /// A trace whose ranges were to come from itself has no quantized row.
    #[error("no quantized rows, nothing to compare with a static baseline")]
    NoQuantizedRows,
    /// An accelerator could not cost the trace.
    #[error(transparent)]
    Trace(#[from] TraceCostError),
}

/// A run's trace being read: each row is counted in BitOPs as it arrives and kept only when
/// accelerators will cost it, so a trace of any length streams when none does.
pub struct RunCoster<'m> {
    model: &'m ModelSummary,
    counter: BitOpsCounter,
    rows: Option<Vec<TraceRow>>,
}

impl<'m> RunCoster<'m> {
    /// A coster of a trace of `model`; `keep_rows` when accelerators will cost it.
    pub fn new(model: &'m ModelSummary, keep_rows: bool) -> Self {
        Self {
            model,
            counter: BitOpsCounter::new(model),
            rows: keep_rows.then(Vec::new),
        }
    }

    /// Adds one trace row.
    pub fn add(&mut self, row: &TraceRow) -> Result<(), BitOpsError> {
        self.counter.add(row)?;
        if let Some(rows) = &mut self.rows {
            rows.push(*row);
        }
        Ok(())
    }

    /// The report of the rows added, costed on `accels` (whose rows must have been kept).
    pub fn finish(
        self,
        spec: &RunSpec,
        accels: &[Accelerator],
        options: &CostOptions,
    ) -> Result<RunReport, RunError> {
        let (fw, bw) = self.ranges(spec.ranges)?;
        let acc = options.accounting;
        let baseline = Bits::forward_backward(fw.max, bw.max);
        let totals = self.counter.totals();
        let (g, s) = (
            totals.gbitops(acc),
            self.counter.static_totals(baseline).gbitops(acc),
        );
        let mut report = RunReport {
            model: self.model.name.clone(),
            schedule: spec.schedule.clone(),
            bits: [fw.min, fw.max],
            grad_bits: GradBits::of(bw),
            iterations: spec.iterations,
            batch: spec.batch,
            accounting: acc,
            gbitops: g,
            static_gbitops: s,
            reduction: if s > 0.0 { 1.0 - g / s } else { 0.0 },
            bn_gops: (acc == Accounting::Hardware).then_some(totals.bn_ops / 1e9),
            trace_rows: spec.trace_rows,
            accelerators: Vec::new(),
        };
        if !accels.is_empty() {
            let rows = self.rows.unwrap_or_default();
            let run = RunTrace::new(self.model, rows, spec.iterations, spec.batch, baseline);
            let epoch = options.breakdown_epoch_iters.unwrap_or(u64::MAX);
            for a in accels {
                let (cost, mut summary) = run.cost(self.model, epoch, a)?;
                if options.breakdown_epoch_iters.is_some() {
                    summary.per_layer_gemm = cost.per_layer_gemm;
                    summary.per_epoch = cost.per_epoch;
                }
                report.accelerators.push(summary);
            }
        }
        Ok(report)
    }

    /// The forward and backward ranges of the report.
    fn ranges(&self, ranges: Ranges) -> Result<(BitRange, BitRange), RunError> {
        match ranges {
            Ranges::Given { fw, bw } => Ok((fw, bw)),
            Ranges::FromTrace { fw, bw } => {
                let (lo, hi) = self.counter.bit_bounds().ok_or(RunError::NoQuantizedRows)?;
                Ok((
                    fw.unwrap_or(BitRange {
                        min: lo.w.min(lo.a),
                        max: hi.w.max(hi.a),
                    }),
                    bw.unwrap_or(BitRange {
                        min: lo.g,
                        max: hi.g,
                    }),
                ))
            }
        }
    }
}

/// Costs a run of `model` whose trace is `rows`, as `spec` describes it, in BitOPs and on each of
/// `accels`: the report `cptsim run` prints.
pub fn cost(
    model: &ModelSummary,
    spec: &RunSpec,
    rows: impl IntoIterator<Item = TraceRow>,
    accels: &[Accelerator],
    options: &CostOptions,
) -> Result<RunReport, RunError> {
    let mut coster = RunCoster::new(model, !accels.is_empty());
    for row in rows {
        coster.add(&row)?;
    }
    coster.finish(spec, accels, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_traces::schedule::ScheduleArgs;
    use cptsim_traces::{synthesize, QuantScope};

    fn resnet20() -> ModelSummary {
        cptsim_models::load_summary("zoo:resnet20", 16).unwrap()
    }

    fn spec(fw: BitRange, bw: BitRange) -> RunSpec {
        RunSpec {
            schedule: "cosine".into(),
            iterations: 200,
            batch: 16,
            ranges: Ranges::Given { fw, bw },
            trace_rows: None,
        }
    }

    #[test]
    fn a_report_round_trips_through_json_and_drops_its_breakdowns_on_request() {
        let model = resnet20();
        let (fw, bw) = (BitRange { min: 3, max: 8 }, BitRange { min: 6, max: 8 });
        let schedule = ScheduleArgs::new("cosine", 200)
            .bits(fw)
            .grad_bits(bw)
            .build()
            .unwrap();
        let rows: Vec<TraceRow> = synthesize(&schedule, &model, &QuantScope::ALL, 16).collect();
        let accels = [Accelerator::load("zc706").unwrap()];
        let options = CostOptions {
            breakdown_epoch_iters: Some(50),
            ..CostOptions::default()
        };
        let r = cost(&model, &spec(fw, bw), rows.clone(), &accels, &options).unwrap();
        assert_eq!(r.grad_bits, GradBits::Range([6, 8]));
        assert_eq!(r.baseline(), Bits::forward_backward(8, 8));
        let a = &r.accelerators[0];
        assert_eq!(a.per_epoch.len(), 4);
        let layers: f64 = a.per_layer_gemm.iter().map(|l| l.totals.latency_s).sum();
        assert!(
            (layers / a.latency_s - 1.0).abs() < 1e-9,
            "{layers} vs {}",
            a.latency_s
        );
        let back: RunReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        // without a breakdown: the same totals, no rows
        let plain = cost(
            &model,
            &spec(fw, bw),
            rows,
            &accels,
            &CostOptions::default(),
        )
        .unwrap();
        assert_eq!(plain, r.clone().without_breakdowns());
        assert!(!serde_json::to_string(&plain).unwrap().contains("per_epoch"));
    }

    #[test]
    fn ranges_from_a_trace_need_quantized_rows() {
        let model = resnet20();
        let spec = RunSpec {
            ranges: Ranges::FromTrace { fw: None, bw: None },
            ..spec(BitRange::fixed(8), BitRange::fixed(8))
        };
        let e = cost(&model, &spec, Vec::new(), &[], &CostOptions::default()).unwrap_err();
        assert!(matches!(e, RunError::NoQuantizedRows), "{e}");
    }
}
