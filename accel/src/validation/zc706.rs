//! CPT's two static ResNet-74 runs on the ZC706 board (CIFAR-100, 64 000 iterations × batch
//! 128): FW8/BW8 44.6 h and FW6/BW6 33.2 h, the points the shipped `zc706` configuration was
//! calibrated on (its comments give the procedure), held within 2 %.

use cptsim_models::ModelSummary;
use cptsim_traces::{Bits, TraceRow};

use super::{zoo_model, Row, Tolerance, ValidationError};
use crate::cost::accelerator::Accelerator;
use crate::cost::trace::cost_trace;

/// Iterations of the runs.
pub const ITERATIONS: u64 = 64_000;
/// (FW = BW bits, published hours).
pub const STATIC_RUNS: [(u8, f64); 2] = [(8, 44.6), (6, 33.2)];

/// A static trace of `model`: every layer at `bits` for `iterations` of `batch`.
pub fn static_trace(model: &ModelSummary, iterations: u64, bits: u8, batch: u64) -> Vec<TraceRow> {
    (0..model.layers.len() as u32)
        .map(|layer| TraceRow {
            iter_start: 0,
            iter_end: iterations,
            layer,
            bits: Bits {
                w: bits,
                a: bits,
                g: bits,
            },
            samples: batch,
        })
        .collect()
}

/// Hours of a static run of `model` at `bits` on `acc`.
pub fn static_hours(
    model: &ModelSummary,
    acc: &Accelerator,
    bits: u8,
) -> Result<f64, ValidationError> {
    let rows = static_trace(model, ITERATIONS, bits, 128);
    let cost =
        cost_trace(model, rows, 391, acc).map_err(|e| ValidationError::of(&model.name, e))?;
    Ok(cost.totals.latency_s / 3600.0)
}

/// The ZC706 rows.
pub fn rows() -> Result<Vec<Row>, ValidationError> {
    let model = zoo_model("resnet74", Some(100))?;
    let acc = Accelerator::load("zc706").map_err(|e| ValidationError::of("zc706", e))?;
    STATIC_RUNS
        .iter()
        .map(|&(bits, hours)| {
            Ok(Row {
                group: "ZC706: CPT's static runs (calibration)",
                model: "resnet74 (CIFAR-100)".into(),
                quantity: format!("hours, static {bits}/{bits}"),
                reference: hours,
                cptsim: static_hours(&model, &acc, bits)?,
                tolerance: Tolerance::Relative(0.02),
            })
        })
        .collect()
}
