//! A layer × iteration heat map of a precision trace: rows are layers (input side at the top),
//! columns are bins of iterations, colour is the sample-weighted mean bit-width of one operand in
//! the bin (viridis), fp32 cells grey. A DFQ per-sample mix shows as its mean bits; LDP's learned
//! bits and synthesised or recorded schedules as they ran.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use cptsim_traces::{TraceMeta, TraceRow};

use crate::error::{PlotError, Result};
use crate::figure::{chart, tick, Axes, Drawn, Figure, Look};
use crate::palette;

/// Which bit-width of the rows a heat map shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// Weights (`b_w`).
    Weights,
    /// Input activations (`b_a`): the forward bits of CPT/LDP and DFQ's per-sample choice.
    Activations,
    /// Errors (`b_g`).
    Errors,
}

impl Operand {
    /// Parses `w`, `a` or `g`.
    pub fn parse(s: &str) -> Result<Operand> {
        match s {
            "w" => Ok(Operand::Weights),
            "a" => Ok(Operand::Activations),
            "g" => Ok(Operand::Errors),
            _ => Err(PlotError::Invalid(format!(
                "--operand {s}: expected w (weights), a (activations) or g (errors)"
            ))),
        }
    }

    fn of(self, r: &TraceRow) -> u8 {
        match self {
            Operand::Weights => r.bits.w,
            Operand::Activations => r.bits.a,
            Operand::Errors => r.bits.g,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Operand::Weights => "weight bits (b_w)",
            Operand::Activations => "activation bits (b_a)",
            Operand::Errors => "error bits (b_g)",
        }
    }
}

/// One cell of the map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    /// The trace has no row for this layer in this bin.
    Empty,
    /// Every sample ran in fp32.
    Fp32,
    /// The mean bits over the quantized samples of the bin.
    Bits(f64),
}

/// Options of [`heatmap`].
#[derive(Clone, Debug)]
pub struct HeatmapOptions {
    /// The operand shown.
    pub operand: Operand,
    /// At most this many iteration bins (one per iteration when the run is shorter).
    pub max_columns: usize,
    /// Only these layers (trace indices), in this order; `None`: every layer with a row.
    pub layers: Option<Vec<u32>>,
    /// Colour range `(min, max)` bits; `None`: the range of the cells.
    pub bits: Option<(u8, u8)>,
    /// Title above the map.
    pub title: String,
}

impl Default for HeatmapOptions {
    fn default() -> Self {
        HeatmapOptions {
            operand: Operand::Activations,
            max_columns: 400,
            layers: None,
            bits: None,
            title: String::new(),
        }
    }
}

/// The heat map's data and figure.
#[derive(Clone, Debug)]
pub struct Heatmap {
    /// Layers shown, top to bottom: trace index and name.
    pub layers: Vec<(u32, String)>,
    /// Bin edges: column `c` covers iterations `edges[c]..edges[c + 1]`.
    pub edges: Vec<u64>,
    /// `cells[row][column]`.
    pub cells: Vec<Vec<Cell>>,
    /// Colour range in bits.
    pub bits: (f64, f64),
    title: String,
}

/// Builds the heat map of `rows` (a trace of `meta.iterations` iterations whose layers are named
/// in `meta.layer_names`). An empty trace, or one without any row of the selected layers, is an
/// error, never an empty image.
pub fn heatmap(rows: &[TraceRow], meta: &TraceMeta, opts: &HeatmapOptions) -> Result<Heatmap> {
    let what = if meta.model.is_empty() {
        "trace".to_string()
    } else {
        format!("trace of {}", meta.model)
    };
    if meta.iterations == 0 || rows.is_empty() {
        return Err(PlotError::empty(&what, "the trace has no rows"));
    }
    let n_layers = meta.layer_names.len();
    let mut listed = vec![false; n_layers];
    for r in rows {
        if let Some(l) = listed.get_mut(r.layer as usize) {
            *l = true;
        }
    }
    let order: Vec<u32> = match &opts.layers {
        Some(ls) => ls.clone(),
        None => (0..n_layers)
            .filter(|&i| listed[i])
            .filter_map(|i| u32::try_from(i).ok())
            .collect(),
    };
    if let Some(bad) = order.iter().find(|&&l| l as usize >= n_layers) {
        return Err(PlotError::Invalid(format!(
            "{what}: layer {bad} out of range ({n_layers} layers)"
        )));
    }
    if order.is_empty() {
        return Err(PlotError::empty(&what, "no layer selected has a row"));
    }
    let columns = opts.max_columns.max(1) as u64;
    let columns = columns.min(meta.iterations);
    let edges: Vec<u64> = (0..=columns)
        .map(|c| (u128::from(c) * u128::from(meta.iterations) / u128::from(columns)) as u64)
        .collect();
    let mut row_of = vec![usize::MAX; n_layers];
    for (i, &l) in order.iter().enumerate() {
        row_of[l as usize] = i;
    }
    // Per cell: Σ bits·weight and Σ weight over quantized samples, Σ weight over fp32 samples.
    let mut acc = vec![vec![(0.0f64, 0.0f64, 0.0f64); columns as usize]; order.len()];
    for r in rows {
        let Some(&ri) = row_of.get(r.layer as usize) else {
            continue;
        };
        if ri == usize::MAX || r.samples == 0 {
            continue;
        }
        let first = edges
            .partition_point(|&e| e <= r.iter_start)
            .saturating_sub(1);
        let b = opts.operand.of(r);
        for c in first..columns as usize {
            let (lo, hi) = (edges[c].max(r.iter_start), edges[c + 1].min(r.iter_end));
            if lo >= edges[c + 1] || r.iter_end <= edges[c] {
                break;
            }
            let w = (hi - lo) as f64 * r.samples as f64;
            let cell = &mut acc[ri][c];
            if b == 0 {
                cell.2 += w;
            } else {
                cell.0 += f64::from(b) * w;
                cell.1 += w;
            }
        }
    }
    let cells: Vec<Vec<Cell>> = acc
        .iter()
        .map(|row| {
            row.iter()
                .map(|&(s, q, f)| {
                    if q > 0.0 {
                        Cell::Bits(s / q)
                    } else if f > 0.0 {
                        Cell::Fp32
                    } else {
                        Cell::Empty
                    }
                })
                .collect()
        })
        .collect();
    let quantized = cells.iter().flatten().filter_map(|c| match c {
        Cell::Bits(b) => Some(*b),
        _ => None,
    });
    let bits = match opts.bits {
        Some((lo, hi)) => (f64::from(lo), f64::from(hi)),
        None => {
            let (lo, hi) = quantized.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), b| {
                (lo.min(b), hi.max(b))
            });
            if lo.is_finite() {
                (lo.floor(), hi.ceil())
            } else {
                (0.0, 32.0)
            }
        }
    };
    let title = if opts.title.is_empty() {
        format!("{} per layer, {what}", opts.operand.label())
    } else {
        opts.title.clone()
    };
    Ok(Heatmap {
        layers: order
            .iter()
            .map(|&l| (l, meta.layer_names[l as usize].clone()))
            .collect(),
        edges,
        cells,
        bits,
        title,
    })
}

impl Heatmap {
    /// The colour of a cell.
    fn color(&self, cell: Cell) -> Option<RGBColor> {
        match cell {
            Cell::Empty => None,
            Cell::Fp32 => Some(palette::FP32),
            Cell::Bits(b) => {
                let (lo, hi) = self.bits;
                let f = if hi > lo { (b - lo) / (hi - lo) } else { 1.0 };
                Some(palette::viridis(f))
            }
        }
    }

    fn has_fp32(&self) -> bool {
        self.cells.iter().flatten().any(|c| *c == Cell::Fp32)
    }
}

impl Figure for Heatmap {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()> {
        let (w, _) = area.dim_in_pixel();
        let bar_w = look.px(92.0).min(w / 3);
        let (main, side) = area.split_horizontally(w - bar_w);
        let n = self.layers.len();
        let last = self.edges.last().copied().unwrap_or(1) as f64;
        let mut c = chart(
            &main,
            look,
            Axes {
                title: &self.title,
                x: 0.0..last,
                y: 0.5 - n as f64..0.5,
                x_desc: "iteration",
                y_desc: "layer (input side at the top)",
                y_negated: true,
                x_names: &[],
            },
        )?;
        // Row i (top = first) spans y in [-i-0.5, -i+0.5], so the tick at -k labels row k at
        // its middle; equal neighbouring cells merge into one rectangle.
        let mut rects = Vec::new();
        for (i, row) in self.cells.iter().enumerate() {
            let (y0, y1) = (-(i as f64) - 0.5, -(i as f64) + 0.5);
            let mut start = 0;
            for col in 1..=row.len() {
                if col < row.len() && row[col] == row[start] {
                    continue;
                }
                if let Some(color) = self.color(row[start]) {
                    let (x0, x1) = (self.edges[start] as f64, self.edges[col] as f64);
                    rects.push(Rectangle::new([(x0, y0), (x1, y1)], color.filled()));
                }
                start = col;
            }
        }
        c.draw_series(rects).drawn()?;
        self.draw_colour_bar(&side, look)
    }
}

impl Heatmap {
    /// The colour bar: the viridis ramp over the bit range, and the fp32 swatch when used.
    fn draw_colour_bar<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        look: Look,
    ) -> Result<()> {
        let (lo, hi) = self.bits;
        let (lo_y, hi_y) = if hi > lo {
            (lo, hi)
        } else {
            (lo - 0.5, hi + 0.5)
        };
        let mut c = ChartBuilder::on(area)
            .margin_top(look.px(40.0))
            .margin_bottom(look.px(if self.has_fp32() { 70.0 } else { 46.0 }))
            .margin_left(look.px(12.0))
            .margin_right(look.px(40.0))
            .build_cartesian_2d(0.0..1.0, lo_y..hi_y)
            .drawn()?;
        c.configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .disable_x_axis()
            .disable_y_axis()
            .draw()
            .drawn()?;
        const STEPS: usize = 64;
        let step = (hi_y - lo_y) / STEPS as f64;
        c.draw_series((0..STEPS).map(|i| {
            let y = lo_y + i as f64 * step;
            let color = self.color(Cell::Bits(y + step / 2.0)).unwrap_or(WHITE);
            Rectangle::new([(0.0, y), (1.0, y + step)], color.filled())
        }))
        .drawn()?;
        // Whole-bit labels right of the bar (at most about eight).
        let step = ((hi_y - lo_y) / 8.0).ceil().max(1.0);
        let mut v = lo_y.ceil();
        while v <= hi_y {
            let label = EmptyElement::at((1.0, v))
                + Text::new(
                    tick(v),
                    (look.at(5.0), 0),
                    look.font(12.0).pos(Pos::new(HPos::Left, VPos::Center)),
                );
            c.plotting_area().draw(&label).drawn()?;
            v += step;
        }
        let (_, h) = area.dim_in_pixel();
        area.draw(&Text::new(
            "bits",
            (look.at(12.0), look.at(16.0)),
            look.font(13.0),
        ))
        .drawn()?;
        if self.has_fp32() {
            let top = h as i32 - look.at(50.0);
            area.draw(&Rectangle::new(
                [(look.at(12.0), top), (look.at(32.0), top + look.at(14.0))],
                palette::FP32.filled(),
            ))
            .drawn()?;
            area.draw(&Text::new("fp32", (look.at(58.0), top), look.font(12.0)))
                .drawn()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{render_svg, svg_texts, Size};
    use cptsim_traces::Bits;

    fn meta(layers: usize, iterations: u64) -> TraceMeta {
        TraceMeta {
            model: "m".into(),
            layer_names: (0..layers).map(|i| format!("conv{i}")).collect(),
            batch: 4,
            iterations,
        }
    }

    fn row(layer: u32, span: (u64, u64), bits: Bits, samples: u64) -> TraceRow {
        TraceRow {
            iter_start: span.0,
            iter_end: span.1,
            layer,
            bits,
            samples,
        }
    }

    #[test]
    fn cells_are_the_trace_bits_and_mixes_their_sample_mean() {
        let rows = [
            row(0, (0, 5), Bits::forward_backward(3, 8), 4),
            row(0, (5, 10), Bits::forward_backward(6, 8), 4),
            // layer 1: a DFQ mix, 3 samples at 4 bits and 1 at 8 → mean 5
            row(1, (0, 10), Bits { w: 4, a: 4, g: 6 }, 3),
            row(1, (0, 10), Bits { w: 4, a: 8, g: 12 }, 1),
            row(2, (0, 10), Bits::FP32, 4),
        ];
        let opts = HeatmapOptions {
            max_columns: 10,
            ..HeatmapOptions::default()
        };
        let h = heatmap(&rows, &meta(4, 10), &opts).unwrap();
        assert_eq!(h.layers.len(), 3, "layer 3 has no rows");
        assert_eq!(h.edges, (0..=10).collect::<Vec<u64>>());
        for t in 0..10 {
            assert_eq!(h.cells[0][t], Cell::Bits(if t < 5 { 3.0 } else { 6.0 }));
            assert_eq!(h.cells[1][t], Cell::Bits(5.0));
            assert_eq!(h.cells[2][t], Cell::Fp32);
        }
        assert_eq!(h.bits, (3.0, 6.0));
        // Two iterations per bin: the bin straddling the change at 5 is the mean 4.5.
        let opts = HeatmapOptions {
            max_columns: 5,
            operand: Operand::Errors,
            ..HeatmapOptions::default()
        };
        let h = heatmap(&rows, &meta(4, 10), &opts).unwrap();
        assert_eq!(h.cells[1][0], Cell::Bits(7.5));
        let opts = HeatmapOptions {
            max_columns: 5,
            ..HeatmapOptions::default()
        };
        let h = heatmap(&rows, &meta(4, 10), &opts).unwrap();
        assert_eq!(h.cells[0][2], Cell::Bits(4.5));
    }

    #[test]
    fn empty_traces_and_bad_layers_are_errors() {
        let e = heatmap(&[], &meta(2, 10), &HeatmapOptions::default()).unwrap_err();
        assert!(e.to_string().contains("trace of m: nothing to plot"), "{e}");
        let rows = [row(0, (0, 10), Bits::forward_backward(4, 8), 1)];
        let opts = HeatmapOptions {
            layers: Some(vec![7]),
            ..HeatmapOptions::default()
        };
        let e = heatmap(&rows, &meta(2, 10), &opts).unwrap_err();
        assert!(e.to_string().contains("layer 7"), "{e}");
        assert!(Operand::parse("x")
            .unwrap_err()
            .to_string()
            .contains("--operand x"));
    }

    #[test]
    fn svg_has_axes_one_rectangle_per_run_and_a_colour_bar() {
        let rows = [
            row(0, (0, 5), Bits::forward_backward(3, 8), 4),
            row(0, (5, 10), Bits::forward_backward(8, 8), 4),
            row(1, (0, 10), Bits::FP32, 4),
        ];
        let h = heatmap(&rows, &meta(2, 10), &HeatmapOptions::default()).unwrap();
        let svg = render_svg(&h, Size::default()).unwrap();
        let texts = svg_texts(&svg);
        for want in ["iteration", "layer (input side at the top)", "bits", "fp32"] {
            assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
        }
        let fill = |c: RGBColor| format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        // The 3-bit run is the bottom of the ramp (the colour bar samples mid-steps), fp32 is one
        // map cell plus the swatch.
        assert_eq!(svg.matches(&fill(palette::viridis(0.0))).count(), 1);
        assert_eq!(svg.matches(&fill(palette::viridis(1.0))).count(), 1);
        assert_eq!(svg.matches(&fill(palette::FP32)).count(), 1 + 1);
    }
}
