//! `train --accel`: the trace the run just recorded, costed on accelerators through
//! `cptsim_accel::cost` (as `cptsim run --trace` costs a trace file) against the same static
//! baseline as the run's own BitOPs; the figures join the summary and its `summary.json`.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use cptsim_accel::cost::run::Ranges;
use cptsim_accel::{Accelerator, CostOptions, RunSpec, RunSummary};
use cptsim_models::ModelSummary;
use cptsim_traces::schedule::BitRange;
use cptsim_train::run::Summary;
use cptsim_train::{RunResult, TrainPlan};

use crate::cmd::accel_costs;
use crate::cmd::accumulator_check::AccumulatorMismatch;

/// Latency and energy of the run's trace on each of `accels`, with the static baseline's.
pub(crate) fn on_accelerators(
    plan: &TrainPlan,
    model: &ModelSummary,
    result: &RunResult,
    accels: &[Accelerator],
) -> anyhow::Result<Vec<RunSummary>> {
    let base = result.baseline;
    let (fw, bw) = (plan.bits.bit_range(), plan.grad_bits.bit_range());
    let spec = RunSpec {
        schedule: plan.schedule.clone(),
        iterations: result.iterations,
        batch: u64::try_from(plan.batch).context("--batch: too large")?,
        ranges: Ranges::Given {
            fw: BitRange {
                min: fw.min.min(base.w),
                max: base.w,
            },
            bw: BitRange {
                min: bw.min.min(base.g),
                max: base.g,
            },
        },
        trace_rows: None,
    };
    let report = cptsim_accel::cost(
        model,
        &spec,
        result.trace.iter().copied(),
        accels,
        &CostOptions::default(),
    )
    .context("--accel: costing the recorded trace")?;
    Ok(report.accelerators)
}

/// The summary with the accelerators' costs, as JSON (`summary.json`'s form).
/// With the accelerators whose accumulator differs from an integer run's
/// (`accumulator_mismatches`, present only when there are some).
pub(crate) fn summary_json(
    summary: &Summary,
    costs: &[RunSummary],
    mismatches: &[AccumulatorMismatch],
) -> anyhow::Result<serde_json::Value> {
    let mut json = serde_json::to_value(summary)?;
    if let (false, Some(map)) = (costs.is_empty(), json.as_object_mut()) {
        map.insert("accelerators".into(), serde_json::to_value(costs)?);
    }
    if let (false, Some(map)) = (mismatches.is_empty(), json.as_object_mut()) {
        map.insert(
            "accumulator_mismatches".into(),
            serde_json::to_value(mismatches)?,
        );
    }
    Ok(json)
}

/// Rewrites `DIR/summary.json` with the costs (atomically: a failure leaves it as it was).
pub(crate) fn write_summary(dir: &Path, json: &serde_json::Value) -> anyhow::Result<()> {
    let path = dir.join("summary.json");
    let text = serde_json::to_string_pretty(json)?;
    cptsim_models::atomic::write_atomically(&path, |f| f.write_all(text.as_bytes()), |_, e| e)
        .with_context(|| format!("writing {}", path.display()))
}

/// The costs as the table `cptsim run --accel` prints.
pub(crate) fn print(costs: &[RunSummary], out: &mut dyn Write) -> std::io::Result<()> {
    if costs.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    accel_costs::print_table(costs, out)
}
