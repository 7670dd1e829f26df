//! Training curves of one or several `train --out` directories from their `metrics.csv` (one
//! line per evaluation): train/test loss, train/test accuracy and the bits in force at each
//! evaluation (`fw_bits`, `bw_bits`), runs overlaid in the series palette, train solid and test
//! dashed (FW solid, BW dashed).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::figure::{chart, legend, span, Axes, Chart, Drawn, Figure, Look};
use crate::palette;
use crate::table::{Range, Table};

/// The metrics of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunMetrics {
    /// Legend name (the directory's name).
    pub name: String,
    pub iteration: Vec<f64>,
    pub train_loss: Vec<f64>,
    pub test_loss: Vec<f64>,
    pub train_acc: Vec<f64>,
    pub test_acc: Vec<f64>,
    pub fw_bits: Vec<f64>,
    pub bw_bits: Vec<f64>,
}

/// Reads `dir/metrics.csv`.
pub fn read_run(dir: &Path) -> Result<RunMetrics> {
    let t = Table::read(&dir.join("metrics.csv"))?;
    let name = dir
        .file_name()
        .or_else(|| dir.parent().and_then(Path::file_name))
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| dir.display().to_string());
    RunMetrics::of(&t, name)
}

impl RunMetrics {
    /// The metrics of table `t` (a `metrics.csv`), named `name` in legends: each iteration
    /// once, losses not negative, accuracies in [0, 1], iterations and bits whole numbers.
    pub fn of(t: &Table, name: String) -> Result<RunMetrics> {
        let cols = [
            "iteration",
            "train_loss",
            "test_loss",
            "train_acc",
            "test_acc",
            "fw_bits",
            "bw_bits",
        ];
        let ranges = [
            Range::Count,
            Range::NonNegative,
            Range::NonNegative,
            Range::Fraction,
            Range::Fraction,
            Range::Count,
            Range::Count,
        ];
        let mut v: Vec<Vec<f64>> = cols
            .iter()
            .zip(ranges)
            .map(|(c, range)| t.numbers(c, range))
            .collect::<Result<_>>()?;
        if t.is_empty() {
            return Err(t.empty_error());
        }
        t.unique(&[&t.column("iteration")?])?;
        let mut take = || v.remove(0);
        Ok(RunMetrics {
            name,
            iteration: take(),
            train_loss: take(),
            test_loss: take(),
            train_acc: take(),
            test_acc: take(),
            fw_bits: take(),
            bw_bits: take(),
        })
    }
}

/// The curves figure.
#[derive(Clone, Debug)]
pub struct Curves {
    pub runs: Vec<RunMetrics>,
}

impl Curves {
    /// The figure of `dirs`' runs (at least one).
    pub fn read(dirs: &[impl AsRef<Path>]) -> Result<Curves> {
        if dirs.is_empty() {
            return Err(PlotError::empty("RUN_DIR", "no run directory given"));
        }
        let runs = dirs
            .iter()
            .map(|d| read_run(d.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Curves { runs })
    }

    /// Draws one panel: for each run, the solid and dashed series `panel.series` picks.
    fn panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        look: Look,
        panel: Panel,
    ) -> Result<()> {
        let Panel {
            title,
            y_desc,
            series,
            names,
            steps,
            corner,
        } = panel;
        let x = span(
            self.runs.iter().flat_map(|r| r.iteration.iter().copied()),
            0.0,
        )
        .unwrap_or(0.0..1.0);
        let y = span(
            self.runs.iter().flat_map(|r| {
                let (a, b) = series(r);
                a.iter().chain(b).copied().collect::<Vec<_>>()
            }),
            0.1,
        )
        .unwrap_or(0.0..1.0);
        let mut c: Chart<'_, DB> = chart(
            area,
            look,
            Axes {
                title,
                x: 0.0_f64.min(x.start)..x.end,
                y,
                x_desc: "iteration",
                y_desc,
                y_negated: false,
                x_names: &[],
            },
        )?;
        let several = self.runs.len() > 1;
        for (i, run) in self.runs.iter().enumerate() {
            let color = palette::series(i);
            let (a, b) = series(run);
            let pts = |v: &[f64]| points(&run.iteration, v, steps);
            let label = |what: &str| {
                if several {
                    format!("{} {what}", run.name)
                } else {
                    what.to_string()
                }
            };
            c.draw_series(LineSeries::new(pts(a), look.line(color, 2.0)))
                .drawn()?
                .label(label(names.0))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
            c.draw_series(DashedLineSeries::new(
                pts(b),
                look.px(6.0),
                look.px(4.0),
                look.line(color, 2.0),
            ))
            .drawn()?
            .label(label(names.1))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 6, y)], color.stroke_width(2)));
        }
        legend(&mut c, look, corner)
    }
}

/// What one panel of [`Curves`] shows.
struct Panel {
    title: &'static str,
    y_desc: &'static str,
    /// The solid and the dashed series of a run.
    series: fn(&RunMetrics) -> (&[f64], &[f64]),
    /// Their legend names.
    names: (&'static str, &'static str),
    /// Draw as step functions (bits held between evaluations).
    steps: bool,
    corner: SeriesLabelPosition,
}

/// `(x, y)` points, as a step function (each value held until the next x) when `steps`.
fn points(x: &[f64], y: &[f64], steps: bool) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (i, (&xi, &yi)) in x.iter().zip(y).enumerate() {
        if steps && i > 0 {
            out.push((xi, y[i - 1]));
        }
        out.push((xi, yi));
    }
    out
}

impl Figure for Curves {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()> {
        let (w, h) = area.dim_in_pixel();
        // A row of three on wide canvases, a column of three on tall ones, else a 2 × 2 grid
        // with the bits in the lower left.
        let cells = if w >= h * 2 {
            area.split_evenly((1, 3))
        } else if h * 2 >= w * 3 {
            area.split_evenly((3, 1))
        } else {
            area.split_evenly((2, 2))
        };
        self.panel(
            &cells[0],
            look,
            Panel {
                title: "loss",
                y_desc: "cross-entropy loss",
                series: |r| (&r.train_loss[..], &r.test_loss[..]),
                names: ("train", "test"),
                steps: false,
                corner: SeriesLabelPosition::UpperRight,
            },
        )?;
        self.panel(
            &cells[1],
            look,
            Panel {
                title: "accuracy",
                y_desc: "accuracy",
                series: |r| (&r.train_acc[..], &r.test_acc[..]),
                names: ("train", "test"),
                steps: false,
                corner: SeriesLabelPosition::LowerRight,
            },
        )?;
        self.panel(
            &cells[2],
            look,
            Panel {
                title: "bits in force at each evaluation",
                y_desc: "bits",
                series: |r| (&r.fw_bits[..], &r.bw_bits[..]),
                names: ("FW", "BW"),
                steps: true,
                corner: SeriesLabelPosition::LowerRight,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{render_svg, svg_texts, Size};

    const METRICS: &str = "\
iteration,train_loss,train_acc,test_loss,test_acc,val_acc,fw_bits,bw_bits,lr
10,2.3,0.1,2.2,0.12,,4,8,0.1
20,1.5,0.5,1.6,0.45,,6,8,0.05
";

    #[test]
    fn series_are_the_metrics_columns() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("cosine");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("metrics.csv"), METRICS).unwrap();
        let c = Curves::read(&[&run]).unwrap();
        let r = &c.runs[0];
        assert_eq!(r.name, "cosine");
        assert_eq!(r.iteration, [10.0, 20.0]);
        assert_eq!(r.test_acc, [0.12, 0.45]);
        assert_eq!(r.fw_bits, [4.0, 6.0]);
        assert_eq!(
            points(&r.iteration, &r.fw_bits, true),
            [(10.0, 4.0), (20.0, 4.0), (20.0, 6.0)]
        );
        let svg = render_svg(&c, Size::default()).unwrap();
        let texts = svg_texts(&svg);
        for want in ["loss", "accuracy", "train", "test", "FW", "BW", "iteration"] {
            assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
        }
        let two = Curves::read(&[&run, &run]).unwrap();
        let texts = svg_texts(&render_svg(&two, Size::default()).unwrap());
        // Each run has a test series in the loss and the accuracy panel.
        assert_eq!(texts.iter().filter(|t| *t == "cosine test").count(), 2 * 2);
    }

    #[test]
    fn empty_and_malformed_metrics_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("metrics.csv"),
            METRICS.lines().next().unwrap(),
        )
        .unwrap();
        let e = Curves::read(&[dir.path()]).unwrap_err().to_string();
        assert!(e.contains("metrics.csv: nothing to plot"), "{e}");
        std::fs::write(
            dir.path().join("metrics.csv"),
            "iteration,train_loss\n1,2\n",
        )
        .unwrap();
        let e = Curves::read(&[dir.path()]).unwrap_err().to_string();
        assert!(e.contains("metrics.csv: no column 'test_loss'"), "{e}");
        let none: [&Path; 0] = [];
        assert!(Curves::read(&none).is_err());
    }
}
