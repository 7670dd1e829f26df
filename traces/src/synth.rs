//! Trace synthesis: a schedule, a model and a quantization scope become a stream of
//! [`TraceRow`]s, one per schedule span and layer, in span-major order. Nothing proportional to
//! the iteration count is held in memory.

use std::rc::Rc;

use cptsim_models::ModelSummary;

use crate::schedule::{Schedule, Span, Spans};
use crate::scope::QuantScope;
use crate::{Bits, TraceRow};

/// Streams the trace of `schedule` on `model` with `batch` samples per iteration: the layers in
/// `scope` at the scheduled bits (weights and activations forward, errors backward), the others
/// in fp32.
pub fn synthesize<'a>(
    schedule: &'a Schedule,
    model: &ModelSummary,
    scope: &QuantScope,
    batch: u64,
) -> Synth<'a> {
    Synth {
        spans: schedule.spans(),
        in_scope: scope.resolve(model).into(),
        batch,
        span: None,
        layer: 0,
    }
}

/// The row stream of [`synthesize`].
pub struct Synth<'a> {
    spans: Spans<'a>,
    in_scope: Rc<[bool]>,
    batch: u64,
    span: Option<Span>,
    layer: usize,
}

impl Iterator for Synth<'_> {
    type Item = TraceRow;

    fn next(&mut self) -> Option<TraceRow> {
        if self.in_scope.is_empty() {
            return None;
        }
        if self.layer >= self.in_scope.len() || self.span.is_none() {
            self.span = Some(self.spans.next()?);
            self.layer = 0;
        }
        let span = self.span?;
        let p = span.precision;
        let bits = match *self.in_scope.get(self.layer)? {
            true => Bits::forward_backward(p.fw, p.bw),
            false => Bits::FP32,
        };
        let row = TraceRow {
            iter_start: span.start,
            iter_end: span.end,
            layer: u32::try_from(self.layer).ok()?,
            bits,
            samples: self.batch,
        };
        self.layer += 1;
        Some(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{BitRange, ScheduleArgs};
    use crate::test_model::model;
    use cptsim_models::LayerRole;

    #[test]
    fn one_row_per_span_and_layer() {
        let m = model(&[LayerRole::First, LayerRole::Body, LayerRole::Last]);
        let s = ScheduleArgs::new("cosine", 64_000).build().unwrap();
        let rows: Vec<TraceRow> = synthesize(&s, &m, &QuantScope::CPT_CIFAR, 128).collect();
        assert_eq!(rows.len(), 32 * 6 * 3);
        assert_eq!(
            rows[0],
            TraceRow {
                iter_start: 0,
                iter_end: 410,
                layer: 0,
                bits: Bits::forward_backward(3, 8),
                samples: 128
            }
        );
        assert!(rows[2].bits.is_fp32());
        assert_eq!(rows[3].iter_start, 410);
        assert_eq!(rows[3].bits, Bits::forward_backward(4, 8));
        let covered: u64 = rows
            .iter()
            .filter(|r| r.layer == 1)
            .map(|r| r.iterations())
            .sum();
        assert_eq!(covered, 64_000);
    }

    #[test]
    fn static_run_is_one_row_per_layer() {
        let m = model(&[LayerRole::Body; 4]);
        let s = ScheduleArgs::new("static", 10)
            .bits(BitRange::fixed(6))
            .build()
            .unwrap();
        let rows: Vec<TraceRow> = synthesize(&s, &m, &QuantScope::ALL, 7).collect();
        assert_eq!(rows.len(), 4);
        assert!(rows
            .iter()
            .all(|r| r.iter_end == 10 && r.bits == Bits::forward_backward(6, 8) && r.samples == 7));
    }
}
