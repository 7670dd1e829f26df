//! The precision trace of a training run, run-length encoded: consecutive iterations in which every
//! layer ran at the same bits on the same number of samples share one [`TraceRow`] per layer.

use cptsim_traces::{Bits, TraceRow};
use serde::{Deserialize, Serialize};

/// One open span: the bits of every layer and the samples per iteration, from `start`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Open {
    start: u64,
    end: u64,
    bits: Vec<(u32, Bits)>,
    samples: u64,
}

/// Collects trace rows iteration by iteration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorder {
    rows: Vec<TraceRow>,
    open: Option<Open>,
}

impl Recorder {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records iteration `t`: layer `bits[i].0` (its model-summary index) ran `samples` samples
    /// at `bits[i].1`. Iterations must be recorded in order without gaps.
    pub fn record(&mut self, t: u64, bits: &[(u32, Bits)], samples: u64) {
        if let Some(open) = &mut self.open {
            if open.end == t && open.samples == samples && open.bits == bits {
                open.end = t + 1;
                return;
            }
        }
        self.close();
        self.open = Some(Open {
            start: t,
            end: t + 1,
            bits: bits.to_vec(),
            samples,
        });
    }

    /// Records iteration `t` as a per-sample mix (DFQ): one `(layer, bits, samples)` per
    /// precision a layer ran at, so several rows of one layer form that iteration's histogram.
    pub fn record_mix(&mut self, t: u64, rows: &[(u32, Bits, u64)]) {
        self.close();
        self.rows
            .extend(rows.iter().map(|&(layer, bits, samples)| TraceRow {
                iter_start: t,
                iter_end: t + 1,
                layer,
                bits,
                samples,
            }));
    }

    fn close(&mut self) {
        if let Some(open) = self.open.take() {
            self.rows
                .extend(open.bits.iter().map(|&(layer, bits)| TraceRow {
                    iter_start: open.start,
                    iter_end: open.end,
                    layer,
                    bits,
                    samples: open.samples,
                }));
        }
    }

    /// All rows so far (the open span included), span-major, layers in recording order.
    pub fn rows(&self) -> Vec<TraceRow> {
        let mut copy = self.clone();
        copy.close();
        copy.rows
    }

    /// Checks that the spans cover iterations `0..iterations` in order, without gaps or
    /// overlaps, each span's rows sharing its bounds (what [`Recorder::record`] and
    /// [`Recorder::record_mix`] build; a checkpoint's recorder is checked against its iteration).
    pub fn check(&self, iterations: u64) -> Result<(), String> {
        let (mut span, mut end) = ((0, 0), 0);
        for r in &self.rows() {
            if r.iter_start >= r.iter_end {
                return Err(format!(
                    "trace row of layer {} spans iterations {}..{}",
                    r.layer, r.iter_start, r.iter_end
                ));
            }
            if (r.iter_start, r.iter_end) == span {
                continue;
            }
            if r.iter_start != end {
                return Err(format!(
                    "trace rows jump from iteration {end} to {}..{}",
                    r.iter_start, r.iter_end
                ));
            }
            span = (r.iter_start, r.iter_end);
            end = r.iter_end;
        }
        if end != iterations {
            return Err(format!(
                "the trace covers {end} iterations, the run did {iterations}"
            ));
        }
        Ok(())
    }

    /// Iterations recorded.
    pub fn iterations(&self) -> u64 {
        self.open
            .as_ref()
            .map(|o| o.end)
            .or_else(|| self.rows.last().map(|r| r.iter_end))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_iterations_share_rows() {
        let b8 = Bits::forward_backward(8, 8);
        let b4 = Bits::forward_backward(4, 8);
        let mut r = Recorder::new();
        for t in 0..3 {
            r.record(t, &[(0, b8), (2, Bits::FP32)], 128);
        }
        r.record(3, &[(0, b4), (2, Bits::FP32)], 128);
        r.record(4, &[(0, b4), (2, Bits::FP32)], 16);
        let rows = r.rows();
        assert_eq!(rows.len(), 6);
        assert_eq!(
            (rows[0].iter_start, rows[0].iter_end, rows[0].bits),
            (0, 3, b8)
        );
        assert_eq!((rows[1].layer, rows[1].bits), (2, Bits::FP32));
        assert_eq!(
            (rows[2].iter_start, rows[2].iter_end, rows[2].bits),
            (3, 4, b4)
        );
        assert_eq!((rows[4].samples, rows[4].iter_end), (16, 5));
        assert_eq!(r.iterations(), 5);
        assert_eq!(Recorder::new().iterations(), 0);
        assert_eq!(r.check(5), Ok(()));
        assert!(r.check(4).unwrap_err().contains("covers 5 iterations"));
        assert_eq!(Recorder::new().check(0), Ok(()));
    }

    #[test]
    fn a_mix_gives_one_row_per_layer_and_precision() {
        let b8 = Bits::forward_backward(8, 8);
        let mut r = Recorder::new();
        r.record(0, &[(0, b8)], 8);
        let mix = [
            (0, Bits::FP32, 8),
            (1, Bits { w: 4, a: 3, g: 6 }, 5),
            (1, Bits { w: 4, a: 6, g: 12 }, 3),
        ];
        r.record_mix(1, &mix);
        let rows = r.rows();
        assert_eq!(rows.len(), 4);
        assert_eq!((rows[0].iter_end, rows[0].bits), (1, b8));
        let at1: Vec<_> = rows.iter().filter(|x| x.layer == 1).collect();
        assert_eq!(at1.iter().map(|x| x.samples).sum::<u64>(), 8);
        assert!(at1.iter().all(|x| (x.iter_start, x.iter_end) == (1, 2)));
        assert_eq!(r.iterations(), 2);
        assert_eq!(r.check(2), Ok(()));
    }

    #[test]
    fn gaps_and_overlaps_fail_the_check() {
        let b8 = Bits::forward_backward(8, 8);
        let mut gap = Recorder::new();
        gap.record(0, &[(0, b8)], 8);
        gap.record(2, &[(0, b8)], 4);
        assert!(gap.check(3).unwrap_err().contains("jump from iteration 1"));
        let mut empty = Recorder::new();
        empty.rows.push(TraceRow {
            iter_start: 3,
            iter_end: 3,
            layer: 0,
            bits: b8,
            samples: 1,
        });
        assert!(empty
            .check(3)
            .unwrap_err()
            .contains("spans iterations 3..3"));
    }
}
