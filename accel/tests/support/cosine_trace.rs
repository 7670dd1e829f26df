//! Test-only synthesis of CPT cosine traces (docs/src/methods/cpt.md): cycles of `period` iterations,
//! forward bits `round(lo + (hi−lo)/2 · (1 − cos(π r)))` with `r` the position in the cycle
//! (round half to even), backward bits fixed; every layer follows the schedule.

use cptsim_models::summary::ModelSummary;
use cptsim_traces::row::{Bits, TraceRow};

/// Forward bits at iteration `t`.
pub fn cosine_bits(t: u64, period: u64, lo: f64, hi: f64) -> u8 {
    let r = (t % period) as f64 / period as f64;
    let b = lo + 0.5 * (hi - lo) * (1.0 - (std::f64::consts::PI * r).cos());
    b.round_ties_even() as u8
}

/// Run-length rows of a cosine FW(lo,hi)/BW(bw) trace, `iterations` long, batch `batch`.
pub fn cosine_trace(
    model: &ModelSummary,
    iterations: u64,
    period: u64,
    lo: u8,
    hi: u8,
    bw: u8,
    batch: u64,
) -> Vec<TraceRow> {
    let mut spans: Vec<(u64, u64, u8)> = Vec::new();
    for t in 0..iterations {
        let b = cosine_bits(t, period, f64::from(lo), f64::from(hi));
        match spans.last_mut() {
            Some((_, end, bits)) if *bits == b => *end = t + 1,
            _ => spans.push((t, t + 1, b)),
        }
    }
    let mut rows = Vec::new();
    for (start, end, b) in spans {
        for layer in 0..model.layers.len() as u32 {
            rows.push(TraceRow {
                iter_start: start,
                iter_end: end,
                layer,
                bits: Bits { w: b, a: b, g: bw },
                samples: batch,
            });
        }
    }
    rows
}

/// A static trace at `fw`/`bw` bits.
pub fn static_trace(
    model: &ModelSummary,
    iterations: u64,
    fw: u8,
    bw: u8,
    batch: u64,
) -> Vec<TraceRow> {
    cosine_trace(model, iterations, iterations.max(1), fw, fw, bw, batch)
}
