//! Which iterations each layer of a trace covers, gathered row by row while a file is read.
//!
//! Every conv / linear layer the trace lists must cover the run's iterations exactly once: its
//! spans tile `0..iterations` with no gap and no overlap. Several rows with the *same* span and
//! layer and different bits are one per-sample histogram (DFQ); the same span, layer and bits
//! twice is a duplicated row. Every listed layer must also run the same number of samples, which
//! catches a CSV file cut short at a line boundary. Layers with no rows at all are allowed: a
//! trace may list only its quantized layers, and consumers treat absent layers as fp32.
//!
//! Rows usually arrive in iteration order per layer; then only a frontier and the latest span
//! are kept. Out-of-order spans wait in a map until the end, so memory stays proportional to the
//! out-of-order part of the file.

use std::collections::BTreeMap;

use crate::{Bits, TraceRow};

/// One span of one layer and the bits its rows listed.
#[derive(Clone, Debug)]
struct Span {
    start: u64,
    end: u64,
    bits: Vec<Bits>,
}

impl Span {
    fn of(row: &TraceRow) -> Span {
        Span {
            start: row.iter_start,
            end: row.iter_end,
            bits: vec![row.bits],
        }
    }

    /// Adds a histogram sibling (same span, other bits); an error for repeated bits.
    fn add_sibling(&mut self, row: &TraceRow, layer: u32) -> Result<(), String> {
        if self.bits.contains(&row.bits) {
            return Err(format!(
                "duplicated row: layer {layer} already has span {}..{} at bits {}/{}/{}",
                row.iter_start, row.iter_end, row.bits.w, row.bits.a, row.bits.g
            ));
        }
        self.bits.push(row.bits);
        Ok(())
    }
}

/// The coverage of one layer.
#[derive(Clone, Debug, Default)]
struct Layer {
    /// Iterations `0..frontier` are covered by in-order spans.
    frontier: u64,
    /// The latest in-order span (the only one a histogram sibling may still join).
    last: Option<Span>,
    /// Spans that started beyond the frontier, by start.
    pending: BTreeMap<u64, Span>,
    /// Samples over all rows (`Σ iterations · samples`).
    samples: u64,
    /// Whether any row named this layer.
    listed: bool,
}

fn overlap(layer: u32, row: &TraceRow, start: u64, end: u64) -> String {
    format!(
        "layer {layer} span {}..{} overlaps its span {start}..{end}",
        row.iter_start, row.iter_end
    )
}

impl Layer {
    fn add(&mut self, row: &TraceRow) -> Result<(), String> {
        let layer = row.layer;
        self.listed = true;
        let span_samples = row
            .iterations()
            .checked_mul(row.samples)
            .ok_or_else(|| format!("layer {layer}: samples of the span overflow"))?;
        self.samples = self
            .samples
            .checked_add(span_samples)
            .ok_or_else(|| format!("layer {layer}: total samples overflow"))?;
        // A sibling of a pending span, or an overlap with a pending neighbour.
        if let Some((_, span)) = self.pending.range_mut(..=row.iter_start).next_back() {
            if span.start == row.iter_start && span.end == row.iter_end {
                return span.add_sibling(row, layer);
            }
            if span.end > row.iter_start {
                return Err(overlap(layer, row, span.start, span.end));
            }
        }
        if let Some((_, span)) = self.pending.range(row.iter_start + 1..).next() {
            if span.start < row.iter_end {
                return Err(overlap(layer, row, span.start, span.end));
            }
        }
        if let Some(last) = &mut self.last {
            if last.start == row.iter_start && last.end == row.iter_end {
                return last.add_sibling(row, layer);
            }
        }
        if row.iter_start < self.frontier {
            return Err(format!(
                "layer {layer} span {}..{} overlaps iterations 0..{} its earlier rows cover",
                row.iter_start, row.iter_end, self.frontier
            ));
        }
        if row.iter_start == self.frontier {
            self.frontier = row.iter_end;
            self.last = Some(Span::of(row));
        } else {
            self.pending.insert(row.iter_start, Span::of(row));
        }
        Ok(())
    }

    /// The first iterations `iterations` leaves uncovered, if any.
    fn gap(&self, iterations: u64) -> Option<(u64, u64)> {
        let mut end = self.frontier;
        for span in self.pending.values() {
            if span.start != end {
                return Some((end, span.start));
            }
            end = span.end;
        }
        (end < iterations).then_some((end, iterations))
    }

    fn end(&self) -> u64 {
        self.pending
            .values()
            .next_back()
            .map_or(self.frontier, |s| s.end)
    }
}

/// Coverage of every layer of a trace, checked row by row and at the end.
#[derive(Clone, Debug)]
pub struct Coverage {
    layers: Vec<Layer>,
}

impl Coverage {
    /// No rows yet, for a model of `layers` layers.
    pub fn new(layers: usize) -> Coverage {
        Coverage {
            layers: vec![Layer::default(); layers],
        }
    }

    /// Counts `row` (already checked by [`crate::meta::row_problem`]); an error when it
    /// overlaps or repeats an earlier row of its layer.
    pub fn add(&mut self, row: &TraceRow) -> Result<(), String> {
        match self.layers.get_mut(row.layer as usize) {
            Some(layer) => layer.add(row),
            None => Err(format!("layer index {} out of range", row.layer)),
        }
    }

    /// The largest `iter_end` of any row.
    pub fn iterations(&self) -> u64 {
        self.layers.iter().map(Layer::end).max().unwrap_or(0)
    }

    /// The most samples any layer ran.
    pub fn max_samples(&self) -> u64 {
        self.layers.iter().map(|l| l.samples).max().unwrap_or(0)
    }

    /// Why the layers with rows (named `names`, in index order) do not all cover
    /// `0..iterations` and run the same samples, if so.
    pub fn problem(&self, names: &[String], iterations: u64) -> Option<String> {
        let name = |i: usize| names.get(i).map_or("?", String::as_str);
        let listed = || self.layers.iter().enumerate().filter(|(_, l)| l.listed);
        if let Some((i, (a, b))) = listed().find_map(|(i, l)| Some((i, l.gap(iterations)?))) {
            return Some(format!(
                "layer {i} '{}' has no rows for iterations {a}..{b} of the run's {iterations} \
                 (missing span or truncated file)",
                name(i)
            ));
        }
        let most = self.max_samples();
        let (i, short) = listed().find(|(_, l)| l.samples != most)?;
        let full = self.layers.iter().position(|l| l.samples == most)?;
        Some(format!(
            "layer {i} '{}' covers {} samples but layer {full} '{}' covers {most} \
             (truncated file, or missing or overlapping spans)",
            name(i),
            short.samples,
            name(full)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(layer: u32, iter_start: u64, iter_end: u64, samples: u64) -> TraceRow {
        TraceRow {
            iter_start,
            iter_end,
            layer,
            bits: Bits::forward_backward(4, 8),
            samples,
        }
    }

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn unequal_layer_coverage_is_found() {
        let mut c = Coverage::new(2);
        c.add(&row(0, 0, 10, 128)).unwrap();
        assert_eq!(c.problem(&names(), 10), None, "absent layers are fp32");
        c.add(&row(1, 0, 10, 100)).unwrap();
        let histogram = TraceRow {
            bits: Bits::forward_backward(6, 8),
            ..row(1, 0, 10, 28)
        };
        c.add(&histogram).unwrap(); // a DFQ histogram adds up to the batch
        assert_eq!(c.problem(&names(), 10), None);
        assert_eq!(c.max_samples(), 1280);
        let mut c = Coverage::new(2);
        c.add(&row(0, 0, 10, 128)).unwrap();
        c.add(&row(1, 0, 10, 127)).unwrap();
        assert!(c
            .problem(&names(), 10)
            .unwrap()
            .contains("layer 1 'b' covers 1270"));
    }

    #[test]
    fn gaps_are_found_with_their_iterations() {
        let mut c = Coverage::new(2);
        c.add(&row(0, 0, 5, 1)).unwrap();
        c.add(&row(0, 7, 10, 1)).unwrap();
        let p = c.problem(&names(), 10).unwrap();
        assert!(
            p.contains("layer 0 'a' has no rows for iterations 5..7"),
            "{p}"
        );
        let mut c = Coverage::new(2);
        c.add(&row(0, 0, 10, 1)).unwrap();
        c.add(&row(1, 0, 8, 1)).unwrap();
        let p = c.problem(&names(), c.iterations()).unwrap();
        assert!(
            p.contains("layer 1 'b' has no rows for iterations 8..10"),
            "{p}"
        );
        let mut c = Coverage::new(1);
        c.add(&row(0, 3, 10, 1)).unwrap();
        assert!(c.problem(&names(), 10).unwrap().contains("0..3"));
    }

    #[test]
    fn overlaps_and_duplicates_are_errors() {
        let mut c = Coverage::new(1);
        c.add(&row(0, 0, 10, 1)).unwrap();
        let e = c.add(&row(0, 0, 10, 1)).unwrap_err();
        assert!(e.contains("duplicated row"), "{e}");
        let e = c.add(&row(0, 5, 12, 1)).unwrap_err();
        assert!(e.contains("overlaps iterations 0..10"), "{e}");
        c.add(&row(0, 20, 30, 1)).unwrap();
        let e = c.add(&row(0, 15, 25, 1)).unwrap_err();
        assert!(e.contains("overlaps its span 20..30"), "{e}");
        let e = c.add(&row(0, 25, 26, 1)).unwrap_err();
        assert!(e.contains("overlaps its span 20..30"), "{e}");
        let e = c.add(&row(0, 20, 30, 1)).unwrap_err();
        assert!(e.contains("duplicated row"), "{e}");
    }

    #[test]
    fn out_of_order_spans_tile_the_run() {
        let mut c = Coverage::new(1);
        c.add(&row(0, 20, 30, 1)).unwrap();
        c.add(&row(0, 10, 20, 1)).unwrap();
        let sibling = TraceRow {
            bits: Bits::forward_backward(2, 8),
            ..row(0, 20, 30, 1)
        };
        c.add(&sibling).unwrap();
        assert!(c.problem(&names(), 30).unwrap().contains("0..10"));
        c.add(&row(0, 0, 10, 1)).unwrap();
        assert_eq!(c.problem(&names(), 30), None);
        assert_eq!(c.iterations(), 30);
    }

    #[test]
    fn overflowing_samples_are_errors() {
        let mut c = Coverage::new(1);
        let e = c.add(&row(0, 0, u64::MAX, 2)).unwrap_err();
        assert!(e.contains("overflow"), "{e}");
    }
}
