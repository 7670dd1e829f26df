//! Precision over iterations for one or several schedules, forward and backward, one small panel
//! per schedule laid out in a grid (as Wolfe & Kyrillidis lay out their ten).

use plotters::coord::Shift;
use plotters::prelude::*;

use cptsim_traces::schedule::Schedule;

use crate::error::{PlotError, Result};
use crate::figure::{chart, Axes, Drawn, Figure, Look};
use crate::palette;
use crate::strip::{legend_strip, Entry, Swatch};

/// The plotted step series of one schedule: `(iteration, bits)` corners, from its spans.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleSeries {
    /// Schedule name.
    pub name: String,
    /// Forward bits: each span contributes `(start, b)` and `(end, b)`.
    pub fw: Vec<(f64, f64)>,
    /// Backward bits, likewise.
    pub bw: Vec<(f64, f64)>,
}

impl ScheduleSeries {
    /// The series of `schedule`: the same spans `run` costs.
    pub fn of(schedule: &Schedule) -> ScheduleSeries {
        let mut fw = Vec::new();
        let mut bw = Vec::new();
        for span in schedule.spans() {
            let (a, b) = (span.start as f64, span.end as f64);
            fw.push((a, f64::from(span.precision.fw)));
            fw.push((b, f64::from(span.precision.fw)));
            bw.push((a, f64::from(span.precision.bw)));
            bw.push((b, f64::from(span.precision.bw)));
        }
        ScheduleSeries {
            name: schedule.name().to_string(),
            fw,
            bw,
        }
    }
}

/// The schedule figure: one panel per schedule.
#[derive(Clone, Debug)]
pub struct SchedulePlot {
    /// One series per schedule, in the order given.
    pub panels: Vec<ScheduleSeries>,
    iterations: u64,
    bits: (u8, u8),
}

impl SchedulePlot {
    /// The figure of `schedules` (at least one, each with at least one iteration).
    pub fn new(schedules: &[Schedule]) -> Result<SchedulePlot> {
        if schedules.is_empty() {
            return Err(PlotError::empty("--schedule", "no schedule given"));
        }
        let iterations = schedules
            .iter()
            .map(Schedule::iterations)
            .max()
            .unwrap_or(0);
        if iterations == 0 {
            return Err(PlotError::empty(
                "--iters",
                "the schedules have no iterations",
            ));
        }
        let lo = schedules
            .iter()
            .map(|s| s.fw_range().min.min(s.bw_range().min))
            .min()
            .unwrap_or(1);
        let hi = schedules
            .iter()
            .map(|s| s.fw_range().max.max(s.bw_range().max))
            .max()
            .unwrap_or(32);
        Ok(SchedulePlot {
            panels: schedules.iter().map(ScheduleSeries::of).collect(),
            iterations,
            bits: (lo, hi),
        })
    }

    /// Columns of the panel grid for `n` panels.
    fn columns(n: usize) -> usize {
        match n {
            0..=1 => 1,
            2..=4 => 2,
            5..=6 => 3,
            7..=8 => 4,
            _ => 5,
        }
    }
}

impl Figure for SchedulePlot {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()> {
        let (fw, bw) = (palette::series(0), palette::series(1));
        // One legend for every panel, above them.
        let area = legend_strip(
            area,
            look,
            &[
                Entry::new("FW (weights, activations)", Swatch::Line(fw)),
                Entry::new("BW (errors)", Swatch::Line(bw)),
            ],
        )?;
        let cols = Self::columns(self.panels.len());
        let rows = self.panels.len().div_ceil(cols);
        let cells = area.split_evenly((rows, cols));
        let y = f64::from(self.bits.0) - 0.5..f64::from(self.bits.1) + 0.5;
        for (panel, cell) in self.panels.iter().zip(&cells) {
            let mut c = chart(
                cell,
                look,
                Axes {
                    title: &panel.name,
                    x: 0.0..self.iterations as f64,
                    y: y.clone(),
                    x_desc: "iteration",
                    y_desc: "bits",
                    y_negated: false,
                    x_names: &[],
                },
            )?;
            c.draw_series(LineSeries::new(
                panel.bw.iter().copied(),
                look.line(bw, 2.0),
            ))
            .drawn()?;
            c.draw_series(LineSeries::new(
                panel.fw.iter().copied(),
                look.line(fw, 2.0),
            ))
            .drawn()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{render_svg, svg_texts, Size};
    use cptsim_traces::schedule::{parse_bit_range, ScheduleArgs};

    fn schedule(name: &str) -> Schedule {
        ScheduleArgs::new(name, 1000)
            .cycles(4)
            .bits(parse_bit_range("--bits", "3:8").unwrap())
            .grad_bits(parse_bit_range("--grad-bits", "6:8").unwrap())
            .build()
            .unwrap()
    }

    #[test]
    fn series_equal_the_schedule_at_every_iteration() {
        for name in ["cosine", "exp-triangular-v", "progressive", "static"] {
            let s = schedule(name);
            let series = ScheduleSeries::of(&s);
            for t in 0..s.iterations() {
                let at = |pts: &[(f64, f64)]| {
                    pts.chunks(2)
                        .find(|c| c[0].0 <= t as f64 && (t as f64) < c[1].0)
                        .map(|c| c[0].1)
                };
                let p = s.at(t);
                assert_eq!(at(&series.fw), Some(f64::from(p.fw)), "{name} fw at {t}");
                assert_eq!(at(&series.bw), Some(f64::from(p.bw)), "{name} bw at {t}");
            }
            assert_eq!(series.fw.last().map(|p| p.0), Some(1000.0));
        }
    }

    #[test]
    fn svg_has_one_panel_and_legend_per_schedule() {
        let names = ["cosine", "linear", "exp-triangular-v"];
        let plot = SchedulePlot::new(&names.map(schedule)).unwrap();
        let svg = render_svg(&plot, Size::default()).unwrap();
        let texts = svg_texts(&svg);
        let count = |s: &str| texts.iter().filter(|t| *t == s).count();
        for n in names {
            assert_eq!(count(n), 1, "title {n}");
        }
        assert_eq!(count("iteration"), 3);
        assert_eq!(count("bits"), 3);
        // Legend entries once (the strip above the panels).
        assert_eq!(count("FW (weights, activations)"), 1);
        assert_eq!(count("BW (errors)"), 1);
        // Two step series per panel, each with one corner pair per span (colours: series 0, 1).
        for (i, n) in names.iter().enumerate() {
            let spans = schedule(n).spans().count();
            let fw = ScheduleSeries::of(&schedule(n)).fw;
            assert_eq!(fw.len(), 2 * spans, "{i}");
        }
        // One FW (blue) and one BW (orange) polyline per panel, plus the legend's sample line.
        let lines = |c: &str| {
            svg.split("<polyline")
                .skip(1)
                .filter(|p| p.contains(&format!("stroke=\"{c}\"")))
                .count()
        };
        assert_eq!(lines("#0072B2"), 3 + 1);
        assert_eq!(lines("#E69F00"), 3 + 1);
    }

    #[test]
    fn no_schedule_is_an_error() {
        assert!(SchedulePlot::new(&[])
            .unwrap_err()
            .to_string()
            .contains("--schedule"));
    }
}
