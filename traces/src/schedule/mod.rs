//! Precision schedules: which forward and backward bit-widths a training run uses at every
//! iteration (methods.md §3–§5).
//!
//! A [`Schedule`] is a pure function of the iteration; [`Schedule::spans`] run-length encodes it
//! into spans of constant precision without materialising one entry per iteration.

mod cyclic;
mod deficit;
mod error;
mod file;
mod parse;
mod pfq;
mod profile;
mod progressive;
mod steps;

use std::collections::BTreeMap;
use std::ops::Range;

pub use cyclic::{Cyclic, Form, Segment, Segments};
pub use deficit::deficit_of;
pub use error::ScheduleError;
pub use parse::{parse_bit_range, Convention, ScheduleArgs, SCHEDULE_NAMES};
pub use profile::{Flip, Profile};
pub use steps::Steps;

/// Largest bit-width a schedule may use.
pub const MAX_BITS: u8 = 32;

/// An inclusive range of bit-widths, `min ≤ max`, both in `1..=32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitRange {
    /// Lowest bits.
    pub min: u8,
    /// Highest bits.
    pub max: u8,
}

impl BitRange {
    /// A one-value range.
    pub fn fixed(bits: u8) -> BitRange {
        BitRange {
            min: bits,
            max: bits,
        }
    }

    /// Rounds a real-valued precision half-to-even and keeps it inside the range.
    pub fn round(self, value: f64) -> u8 {
        let r = value
            .round_ties_even()
            .clamp(f64::from(self.min), f64::from(self.max));
        // Clamped to `min..=max ⊂ 1..=32`, so the cast is exact.
        r as u8
    }

    /// True when `min == max`.
    pub fn is_fixed(self) -> bool {
        self.min == self.max
    }
}

impl std::fmt::Display for BitRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_fixed() {
            write!(f, "{}", self.max)
        } else {
            write!(f, "{}:{}", self.min, self.max)
        }
    }
}

/// Forward (weights and activations) and backward (errors) bits of one iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Precision {
    /// Forward bits, `b_w = b_a`.
    pub fw: u8,
    /// Backward (error) bits, `b_g`.
    pub bw: u8,
}

/// The shape of a schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// Forward at max, backward at max, throughout.
    Static,
    /// A cyclic profile (CPT cosine, the W&K family, cosine annealing).
    Cyclic(Cyclic),
    /// Linear ramp over the first half, then max.
    Progressive,
    /// A step function (PFQ stages, a schedule file).
    Steps(Steps),
}

/// A complete schedule for one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    name: String,
    kind: Kind,
    iterations: u64,
    fw: BitRange,
    bw: BitRange,
}

/// A run of consecutive iterations `start..end` at one precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First iteration (inclusive).
    pub start: u64,
    /// One past the last iteration.
    pub end: u64,
    /// The precision of every iteration in the span.
    pub precision: Precision,
}

impl Schedule {
    /// Assembles a schedule; `name` is what reports print. Ranges and iterations are assumed
    /// validated (use [`ScheduleArgs::build`] to parse and validate user input).
    pub fn new(
        name: impl Into<String>,
        kind: Kind,
        iterations: u64,
        fw: BitRange,
        bw: BitRange,
    ) -> Schedule {
        Schedule {
            name: name.into(),
            kind,
            iterations,
            fw,
            bw,
        }
    }

    /// The static baseline of this schedule: forward at `fw.max`, backward at `bw.max`.
    pub fn static_baseline(&self) -> Schedule {
        let (fw, bw) = (BitRange::fixed(self.fw.max), BitRange::fixed(self.bw.max));
        Schedule::new("static", Kind::Static, self.iterations, fw, bw)
    }

    /// Name as given on the command line (aliases resolved).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The shape.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }
    /// Iterations of the run.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }
    /// Forward bit range.
    pub fn fw_range(&self) -> BitRange {
        self.fw
    }
    /// Backward bit range.
    pub fn bw_range(&self) -> BitRange {
        self.bw
    }

    /// Precision at iteration `t`.
    pub fn at(&self, t: u64) -> Precision {
        match &self.kind {
            Kind::Static => Precision {
                fw: self.fw.max,
                bw: self.bw.max,
            },
            Kind::Cyclic(c) => Precision {
                fw: c.bits(t, self.fw),
                bw: c.bits(t, self.bw),
            },
            Kind::Progressive => Precision {
                fw: progressive::bits(t, self.iterations, self.fw),
                bw: progressive::bits(t, self.iterations, self.bw),
            },
            Kind::Steps(s) => s.at(t),
        }
    }

    /// The run as spans of constant precision, in iteration order.
    pub fn spans(&self) -> Spans<'_> {
        Spans {
            schedule: self,
            next: 0,
        }
    }

    /// Iterations spent at each forward bit-width within `iters` (clipped to the run).
    pub fn fw_histogram(&self, iters: Range<u64>) -> BTreeMap<u8, u64> {
        let mut h = BTreeMap::new();
        for span in self.spans() {
            let (lo, hi) = (span.start.max(iters.start), span.end.min(iters.end));
            if lo < hi {
                *h.entry(span.precision.fw).or_insert(0) += hi - lo;
            }
            if span.end >= iters.end {
                break;
            }
        }
        h
    }

    /// One past the last iteration of the piece of the run holding `t` inside which the
    /// precision is monotone in the iteration (a cyclic segment, the progressive ramp, a step),
    /// clipped to the run.
    fn piece_end(&self, t: u64) -> u64 {
        let end = match &self.kind {
            Kind::Static => self.iterations,
            Kind::Cyclic(c) => c.segment_end(t),
            Kind::Progressive => progressive::piece_end(t, self.iterations),
            Kind::Steps(s) => s.next_start(t).unwrap_or(self.iterations),
        };
        end.min(self.iterations)
    }
}

/// Iterator over the spans of a schedule; see [`Schedule::spans`].
///
/// Each span is found in O(log length) evaluations: inside a monotone piece the iterations at
/// one precision form a prefix, so its end is found by a galloping then a binary search, and a
/// span continues into the next piece when that begins at the same precision. A 10¹²-iteration
/// run costs as much as a short one with the same number of spans.
pub struct Spans<'a> {
    schedule: &'a Schedule,
    next: u64,
}

impl Spans<'_> {
    /// First iteration after `start` (at `precision`) inside `start..piece_end` at another
    /// precision, or `piece_end`.
    fn end_in_piece(&self, start: u64, piece_end: u64, precision: Precision) -> u64 {
        let s = self.schedule;
        // Invariant: s.at(lo) == precision; hi == piece_end or s.at(hi) != precision.
        let (mut lo, mut step) = (start, 1u64);
        let mut hi = loop {
            let probe = lo.saturating_add(step).min(piece_end);
            if probe >= piece_end || s.at(probe) != precision {
                break probe;
            }
            lo = probe;
            step = step.saturating_mul(2);
        };
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if s.at(mid) == precision {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }
}

impl Iterator for Spans<'_> {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        let total = self.schedule.iterations;
        if self.next >= total {
            return None;
        }
        let start = self.next;
        let precision = self.schedule.at(start);
        let mut end = start;
        loop {
            let piece_end = self.schedule.piece_end(end);
            end = self.end_in_piece(end, piece_end, precision);
            if end >= total || end < piece_end || self.schedule.at(end) != precision {
                break;
            }
        }
        self.next = end;
        Some(Span {
            start,
            end,
            precision,
        })
    }
}

/// Checks that a bit-width lies in `1..=32`.
pub(crate) fn check_bits(v: u64) -> Result<u8, String> {
    match u8::try_from(v) {
        Ok(b) if (1..=MAX_BITS).contains(&b) => Ok(b),
        _ => Err(format!("bits must lie in 1..{MAX_BITS}, got {v}")),
    }
}

/// Parses one bit-width for `flag`.
pub(crate) fn parse_bits(flag: &'static str, text: &str) -> Result<u8, ScheduleError> {
    let v = text.trim().parse::<u64>().map_err(|_| {
        ScheduleError::flag(
            flag,
            format!("'{text}' is not a bit-width (a whole number in 1..{MAX_BITS})"),
        )
    })?;
    check_bits(v).map_err(|m| ScheduleError::flag(flag, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpt(iters: u64, cycles: u64, min: u8, max: u8) -> Schedule {
        ScheduleArgs::new("cosine", iters)
            .cycles(cycles)
            .bits(BitRange { min, max })
            .build()
            .unwrap()
    }

    #[test]
    fn cpt_cycle_histograms() {
        // methods.md §2.4: iterations per precision in one 2000-iteration cycle.
        type Histogram<'a> = &'a [(u8, u64)];
        let cases: [(u8, u8, Histogram); 4] = [
            (
                3,
                8,
                &[(3, 410), (4, 329), (5, 261), (6, 262), (7, 329), (8, 409)],
            ),
            (4, 8, &[(4, 461), (5, 379), (6, 321), (7, 379), (8, 460)]),
            (3, 6, &[(3, 536), (4, 465), (5, 464), (6, 535)]),
            (4, 6, &[(4, 667), (5, 667), (6, 666)]),
        ];
        for (min, max, want) in cases {
            let s = cpt(64_000, 32, min, max);
            let want: BTreeMap<u8, u64> = want.iter().copied().collect();
            assert_eq!(s.fw_histogram(0..2000), want, "FW({min},{max})");
            assert_eq!(
                s.fw_histogram(2000..4000),
                want,
                "FW({min},{max}) second cycle"
            );
        }
    }

    #[test]
    fn spans_cover_the_run_and_match_pointwise() {
        let s = cpt(64_000, 32, 3, 8);
        let spans: Vec<Span> = s.spans().collect();
        assert_eq!(spans.len(), 32 * 6);
        assert_eq!(spans[0].start, 0);
        assert_eq!(spans.last().map(|s| s.end), Some(64_000));
        for w in spans.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_ne!(w[0].precision, w[1].precision);
        }
        for sp in &spans[..12] {
            for t in sp.start..sp.end {
                assert_eq!(s.at(t), sp.precision);
            }
        }
    }

    #[test]
    fn static_is_one_span_at_max() {
        let s = cpt(64_000, 32, 3, 8).static_baseline();
        let spans: Vec<Span> = s.spans().collect();
        assert_eq!(
            spans,
            [Span {
                start: 0,
                end: 64_000,
                precision: Precision { fw: 8, bw: 8 }
            }]
        );
    }

    /// The spans a per-iteration scan finds.
    fn scanned(s: &Schedule) -> Vec<Span> {
        let mut out: Vec<Span> = Vec::new();
        for t in 0..s.iterations() {
            let p = s.at(t);
            match out.last_mut() {
                Some(last) if last.precision == p => last.end = t + 1,
                _ => out.push(Span {
                    start: t,
                    end: t + 1,
                    precision: p,
                }),
            }
        }
        out
    }

    fn every_name() -> Vec<String> {
        SCHEDULE_NAMES
            .iter()
            .filter(|n| !n.contains(':'))
            .map(|n| n.to_string())
            .chain(["pfq:300,700".into(), "deficit:250".into()])
            .collect()
    }

    #[test]
    fn spans_equal_a_per_iteration_scan() {
        for name in every_name() {
            for (iters, cycles) in [
                (1_000, 1),
                (1_000, 3),
                (997, 8),
                (4_000, 32),
                (1_001, 1_001),
            ] {
                for conv in [Convention::Cpt, Convention::WolfeKyrillidis] {
                    for (lo, hi) in [(3, 8), (4, 6), (8, 8)] {
                        let s = ScheduleArgs::new(name.as_str(), iters)
                            .cycles(cycles)
                            .bits(BitRange { min: lo, max: hi })
                            .grad_bits(BitRange { min: 6, max: 8 })
                            .convention(conv)
                            .build()
                            .unwrap();
                        let fast: Vec<Span> = s.spans().collect();
                        assert_eq!(fast, scanned(&s), "{name} T={iters} N={cycles} {conv:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_trillion_iterations_cost_as_many_steps_as_their_spans() {
        let s = cpt(1_000_000_000_000, 32, 3, 8);
        let spans: Vec<Span> = s.spans().collect();
        assert_eq!(spans.len(), 32 * 6);
        assert_eq!(spans.last().map(|s| s.end), Some(1_000_000_000_000));
        let iters: u64 = s.fw_histogram(0..u64::MAX).values().sum();
        assert_eq!(iters, 1_000_000_000_000);
    }

    #[test]
    fn whole_cycles_end_on_the_last_iteration() {
        for iters in [64_000, 9_000, 500, 391 * 160] {
            for cycles in [1, 2, 8, 32] {
                for name in SCHEDULE_NAMES.iter().filter(|n| !n.contains(':')) {
                    let s = ScheduleArgs::new(*name, iters)
                        .cycles(cycles)
                        .build()
                        .unwrap();
                    let Kind::Cyclic(c) = s.kind() else { continue };
                    let last = c.segments.locate(iters - 1);
                    let what = format!("{name} T={iters} N={cycles}");
                    assert_eq!((last.index, last.end()), (cycles - 1, iters), "{what}");
                    if c.form == Form::Repeated {
                        // The last iteration is the top of its cycle's rise.
                        let top = (last.start..iters).map(|t| s.at(t).fw).max();
                        assert_eq!(Some(s.at(iters - 1).fw), top, "{what}");
                    }
                    if *name == "cosine" {
                        assert_eq!(s.at(iters - 1).fw, 8, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn whole_cycles_equal_cpt_when_cycles_divide_the_run() {
        let whole = cpt(64_000, 32, 3, 8);
        let Kind::Cyclic(c) = whole.kind() else {
            panic!("cosine is cyclic")
        };
        let fixed = Schedule::new(
            "cosine",
            Kind::Cyclic(Cyclic {
                segments: Segments::Fixed(2_000),
                ..*c
            }),
            64_000,
            whole.fw_range(),
            whole.bw_range(),
        );
        assert_eq!(
            whole.spans().collect::<Vec<_>>(),
            fixed.spans().collect::<Vec<_>>()
        );
        // 9 000 / 32: CPT's floor(T/N) = 281 would start a 33rd cycle at 8 992 (3 bits at the
        // end); whole cycles of 281 or 282 iterations end at the top instead.
        let s = cpt(9_000, 32, 3, 8);
        assert_eq!(s.at(8_999).fw, 8);
        assert_eq!(s.at(0).fw, 3);
    }

    #[test]
    fn round_clamps_and_ties_to_even() {
        let r = BitRange { min: 3, max: 8 };
        assert_eq!(r.round(4.5), 4);
        assert_eq!(r.round(5.5), 6);
        assert_eq!(r.round(1.0), 3);
        assert_eq!(r.round(9.4), 8);
    }
}
