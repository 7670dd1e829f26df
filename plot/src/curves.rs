//! Training curves of one or several `train --out` directories from their `metrics.csv` (one
//! line per evaluation): train/test loss, train/test accuracy, and the bits over the run from
//! the directory's `trace.csv` (every iteration, as it trained; the bits in force at each
//! evaluation when there is no trace). Runs are overlaid in the series palette, train solid and
//! test dashed (FW solid, BW dashed), under one legend above the panels.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::figure::{chart, span, Axes, Chart, Drawn, Figure, Look};
use crate::palette;
use crate::strip::{legend_strip, Entry, Swatch};
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
    /// The bits over every iteration from the run's trace, when it has one.
    pub trace: Option<TraceBits>,
}

/// Forward and backward bits over a run as step corners `(iteration, bits)`: each constant
/// stretch contributes its start and its end. A stretch's bits are the sample-weighted mean
/// over the quantized layers (one value for a uniform schedule; LDP's and DFQ's mixes as their
/// mean); stretches where every layer ran in fp32 are left out.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceBits {
    /// Activation bits (`b_a`), the forward bits.
    pub fw: Vec<(f64, f64)>,
    /// Error bits (`b_g`), the backward bits.
    pub bw: Vec<(f64, f64)>,
}

impl TraceBits {
    /// The bits of the trace table `t` (a `trace.csv`: `iter_start`, `iter_end`, `b_a`, `b_g`,
    /// `samples`), checking each span ends after it starts.
    pub fn of(t: &Table) -> Result<TraceBits> {
        let start = t.numbers("iter_start", Range::Count)?;
        let end = t.numbers("iter_end", Range::Count)?;
        let samples = t.numbers("samples", Range::Count)?;
        let b_a = t.numbers("b_a", Range::Count)?;
        let b_g = t.numbers("b_g", Range::Count)?;
        if let Some(r) = (0..t.len()).find(|&r| end[r] <= start[r]) {
            return Err(PlotError::Malformed {
                path: t.path().to_path_buf(),
                line: t.line(r),
                problem: format!(
                    "column 'iter_end': the span ends at {} but starts at {}",
                    end[r], start[r]
                ),
            });
        }
        let mut cuts: Vec<f64> = start.iter().chain(&end).copied().collect();
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let steps = |bits: &[f64]| {
            // Σ bits·samples and Σ samples of the quantized rows, as differences at the cuts
            let (mut sum, mut weight) = (vec![0.0; cuts.len()], vec![0.0; cuts.len()]);
            for r in (0..t.len()).filter(|&r| bits[r] > 0.0 && samples[r] > 0.0) {
                let (i, j) = (cut(&cuts, start[r]), cut(&cuts, end[r]));
                sum[i] += bits[r] * samples[r];
                sum[j] -= bits[r] * samples[r];
                weight[i] += samples[r];
                weight[j] -= samples[r];
            }
            let (mut s, mut w) = (0.0, 0.0);
            let mut out: Vec<(f64, f64)> = Vec::new();
            for k in 0..cuts.len().saturating_sub(1) {
                s += sum[k];
                w += weight[k];
                if w <= 0.5 {
                    continue;
                }
                let v = s / w;
                match out.last_mut() {
                    // the same bits carry on: extend the stretch
                    Some(last) if last.0 == cuts[k] && (last.1 - v).abs() < 1e-9 => {
                        last.0 = cuts[k + 1]
                    }
                    _ => out.extend([(cuts[k], v), (cuts[k + 1], v)]),
                }
            }
            out
        };
        Ok(TraceBits {
            fw: steps(&b_a),
            bw: steps(&b_g),
        })
    }
}

/// The index of `v` in the sorted, deduplicated `cuts` (which hold it).
fn cut(cuts: &[f64], v: f64) -> usize {
    cuts.partition_point(|c| *c < v)
}

/// Reads `dir/metrics.csv`, and `dir/trace.csv` when there is one.
pub fn read_run(dir: &Path) -> Result<RunMetrics> {
    let t = Table::read(&dir.join("metrics.csv"))?;
    let name = dir
        .file_name()
        .or_else(|| dir.parent().and_then(Path::file_name))
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| dir.display().to_string());
    let mut run = RunMetrics::of(&t, name)?;
    let trace = dir.join("trace.csv");
    if trace.is_file() {
        run.trace = Some(TraceBits::of(&Table::read(&trace)?)?);
    }
    Ok(run)
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
            trace: None,
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
        } = panel;
        let lines: Vec<_> = self.runs.iter().map(series).collect();
        let all = || lines.iter().flat_map(|(a, b)| a.iter().chain(b));
        let x = span(all().map(|p| p.0), 0.0).unwrap_or(0.0..1.0);
        let y = span(all().map(|p| p.1), 0.1).unwrap_or(0.0..1.0);
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
        for (i, (a, b)) in lines.into_iter().enumerate() {
            let color = palette::series(i);
            c.draw_series(LineSeries::new(a, look.line(color, 2.0)))
                .drawn()?;
            c.draw_series(DashedLineSeries::new(
                b,
                look.px(6.0),
                look.px(4.0),
                look.line(color, 2.0),
            ))
            .drawn()?;
        }
        Ok(())
    }

    /// The legend above the panels: each run's colour, then what solid and dashed mean.
    fn legend(&self) -> Vec<Entry> {
        let (solid, dashed) = (
            "train loss/accuracy, FW bits",
            "test loss/accuracy, BW bits",
        );
        match self.runs.as_slice() {
            [_] => {
                let c = palette::series(0);
                vec![
                    Entry::new(solid, Swatch::Line(c)),
                    Entry::new(dashed, Swatch::Dashed(c)),
                ]
            }
            runs => {
                let grey = RGBColor(90, 90, 90);
                let mut e: Vec<Entry> = runs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| Entry::new(r.name.clone(), Swatch::Patch(palette::series(i))))
                    .collect();
                e.push(Entry::new(solid, Swatch::Line(grey)));
                e.push(Entry::new(dashed, Swatch::Dashed(grey)));
                e
            }
        }
    }
}

/// Step corners, solid and dashed.
type Lines = (Vec<(f64, f64)>, Vec<(f64, f64)>);

/// What one panel of [`Curves`] shows.
struct Panel {
    title: &'static str,
    y_desc: &'static str,
    /// The solid and the dashed series of a run.
    series: fn(&RunMetrics) -> Lines,
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

/// A run's FW and BW bits: its trace's, else the bits of its evaluations held between them.
fn bits(r: &RunMetrics) -> Lines {
    match &r.trace {
        Some(t) => (t.fw.clone(), t.bw.clone()),
        None => (
            points(&r.iteration, &r.fw_bits, true),
            points(&r.iteration, &r.bw_bits, true),
        ),
    }
}

impl Figure for Curves {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()> {
        let area = legend_strip(area, look, &self.legend())?;
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
                series: |r| {
                    (
                        points(&r.iteration, &r.train_loss, false),
                        points(&r.iteration, &r.test_loss, false),
                    )
                },
            },
        )?;
        self.panel(
            &cells[1],
            look,
            Panel {
                title: "accuracy",
                y_desc: "accuracy",
                series: |r| {
                    (
                        points(&r.iteration, &r.train_acc, false),
                        points(&r.iteration, &r.test_acc, false),
                    )
                },
            },
        )?;
        let traced = self.runs.iter().all(|r| r.trace.is_some());
        self.panel(
            &cells[2],
            look,
            Panel {
                title: if traced {
                    "bits over the run (trace.csv)"
                } else {
                    "bits in force at each evaluation"
                },
                y_desc: "bits",
                series: bits,
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
        for want in [
            "loss",
            "accuracy",
            "train loss/accuracy, FW bits",
            "test loss/accuracy, BW bits",
            "bits in force at each evaluation",
            "iteration",
        ] {
            assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
        }
        let two = Curves::read(&[&run, &run]).unwrap();
        let texts = svg_texts(&render_svg(&two, Size::default()).unwrap());
        // One legend above the panels: a colour per run, then the line styles once.
        assert_eq!(texts.iter().filter(|t| *t == "cosine").count(), 2);
        assert_eq!(
            texts
                .iter()
                .filter(|t| *t == "test loss/accuracy, BW bits")
                .count(),
            1
        );
    }

    #[test]
    fn bits_come_from_the_trace_when_the_run_has_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("metrics.csv"), METRICS).unwrap();
        // Two quantized layers and an fp32 classifier; the second span mixes 4 and 6 bits
        // half-and-half in layer 1 (a DFQ-like split); bits return to 4 at 30.
        std::fs::write(
            dir.path().join("trace.csv"),
            "iter_start,iter_end,layer,layer_name,b_w,b_a,b_g,samples\n\
             0,10,0,c1,4,4,8,16\n0,10,1,c2,4,4,8,16\n0,10,2,fc,0,0,0,16\n\
             10,20,0,c1,6,6,8,16\n10,20,1,c2,4,4,8,8\n10,20,1,c2,8,8,8,8\n10,20,2,fc,0,0,0,16\n\
             20,30,0,c1,6,6,8,16\n20,30,1,c2,6,6,8,16\n\
             30,40,0,c1,4,4,8,16\n30,40,1,c2,4,4,8,16\n",
        )
        .unwrap();
        let c = Curves::read(&[dir.path()]).unwrap();
        let t = c.runs[0].trace.clone().unwrap();
        assert_eq!(
            t.fw,
            [
                (0.0, 4.0),
                (10.0, 4.0),
                (10.0, 6.0),
                (30.0, 6.0),
                (30.0, 4.0),
                (40.0, 4.0)
            ]
        );
        assert_eq!(t.bw, [(0.0, 8.0), (40.0, 8.0)]);
        let texts = svg_texts(&render_svg(&c, Size::default()).unwrap());
        assert!(texts.iter().any(|t| t == "bits over the run (trace.csv)"));
        std::fs::write(
            dir.path().join("trace.csv"),
            "iter_start,iter_end,layer,layer_name,b_w,b_a,b_g,samples\n5,5,0,c1,4,4,8,16\n",
        )
        .unwrap();
        let e = Curves::read(&[dir.path()]).unwrap_err().to_string();
        assert!(
            e.contains("trace.csv: line 2") && e.contains("ends at 5 but starts at 5"),
            "{e}"
        );
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
