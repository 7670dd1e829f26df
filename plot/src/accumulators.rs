//! Accuracy against accumulator width from a sweep's tidy `results.csv` (a study over
//! `--accumulator`): one line per training setting and overflow rule, mean ± one standard
//! deviation over seeds, the widths in increasing order and `exact` last, where every line of a
//! setting ends at that setting's exact-accumulator runs.
//!
//! Columns read (by name; others ignored): `accumulator` (`exact`, `BITS`, `BITS:wrap` or
//! `BITS:saturate`; 64 bits is exact), `seed`, the y column (`final_test_acc` or
//! `best_test_acc`), and those of `model`, `schedule`, `bits`, `grad_bits`, `quantizer`,
//! `policy` that are present, which make a row's setting. A file with a `cell` column counts
//! each cell once (its rows for other accelerators repeat the run).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::figure::{chart, span, Axes, Drawn, Figure, Look};
use crate::marker::Marker;
use crate::palette;
use crate::pareto::{mean_std, YAxis};
use crate::strip::{legend_strip, Entry, Swatch};
use crate::table::{Column, Range, Table};

/// Columns that make a run's training setting when present.
const SETTING_COLUMNS: [&str; 6] = [
    "model",
    "schedule",
    "bits",
    "grad_bits",
    "quantizer",
    "policy",
];

/// A register's overflow rule as the plot separates them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    Wrap,
    Saturate,
}

impl Rule {
    fn name(self) -> &'static str {
        match self {
            Rule::Wrap => "wrap",
            Rule::Saturate => "saturate",
        }
    }
}

/// An `accumulator` value: `None` for exact, else its width and rule.
fn parse_accumulator(s: &str) -> std::result::Result<Option<(u32, Rule)>, String> {
    if s == "exact" {
        return Ok(None);
    }
    let (bits, rule) = s.split_once(':').unwrap_or((s, "wrap"));
    let rule = match rule {
        "wrap" => Rule::Wrap,
        "saturate" => Rule::Saturate,
        r => return Err(format!("`{s}`: `{r}` is not wrap or saturate")),
    };
    match bits.parse::<u32>() {
        Ok(64) => Ok(None),
        Ok(b) if (2..64).contains(&b) => Ok(Some((b, rule))),
        _ => Err(format!(
            "`{s}` is not exact or BITS[:wrap|saturate] with BITS in 2..=64"
        )),
    }
}

/// One point of a line: the mean over a setting's seeds at one width.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Index into [`AccumulatorPlot::widths`].
    pub x: usize,
    pub y: f64,
    /// Sample standard deviation over the seeds (0 for one).
    pub y_std: f64,
    pub seeds: usize,
}

/// One line: a setting under one overflow rule, by increasing width, its exact point last.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// The setting's values that differ between settings, and the rule.
    pub name: String,
    /// Which setting (colour).
    pub setting: usize,
    pub rule: Option<Rule>,
    pub points: Vec<Point>,
}

/// The figure's data.
#[derive(Clone, Debug)]
pub struct AccumulatorPlot {
    /// The x positions' names: the narrow widths in increasing order, then `exact` if any run
    /// has an exact accumulator.
    pub widths: Vec<String>,
    pub lines: Vec<Line>,
    y: YAxis,
}

/// Reads `path` and builds the figure's data.
pub fn accumulators(path: &Path, y: YAxis) -> Result<AccumulatorPlot> {
    accumulators_of(&Table::read(path)?, y)
}

/// The runs of one setting at one accumulator.
type Runs = BTreeMap<Option<(u32, Rule)>, Vec<f64>>;

/// Builds the figure's data from `t`, checking it: accumulators parse, accuracies lie in
/// [0, 1], seeds are whole numbers, and no run appears twice.
pub fn accumulators_of(t: &Table, y: YAxis) -> Result<AccumulatorPlot> {
    let acc_col = t.column("accumulator")?;
    let seed = t.column("seed")?;
    let ys = t.numbers(y.column(), Range::Fraction)?;
    if t.is_empty() {
        return Err(t.empty_error());
    }
    let columns: Vec<&str> = SETTING_COLUMNS.into_iter().filter(|k| t.has(k)).collect();
    let settings: Vec<_> = columns.iter().map(|k| t.column(k)).collect::<Result<_>>()?;
    // A cell costed on several accelerators has one row each: count it once. Without a `cell`
    // column, a run is its setting, accumulator and seed, and a repeat is an error.
    let rows: Vec<usize> = match t.has("cell") {
        true => {
            let cell = t.column("cell")?;
            let mut seen = std::collections::HashSet::new();
            (0..t.len())
                .filter(|&r| seen.insert(t.text(r, &cell)))
                .collect()
        }
        false => {
            let key: Vec<&Column> = settings.iter().chain([&acc_col, &seed]).collect();
            t.unique(&key)?;
            (0..t.len()).collect()
        }
    };
    let mut order: Vec<Vec<String>> = Vec::new();
    let mut runs: Vec<Runs> = Vec::new();
    for &r in &rows {
        if !t.text(r, &seed).is_empty() {
            t.checked(r, &seed, Range::Count)?;
        }
        let acc =
            parse_accumulator(t.text(r, &acc_col)).map_err(|problem| PlotError::BadValue {
                path: t.path().to_path_buf(),
                line: t.line(r),
                column: "accumulator".into(),
                problem,
            })?;
        let values: Vec<String> = settings.iter().map(|c| t.text(r, c).to_string()).collect();
        let i = match order.iter().position(|v| *v == values) {
            Some(i) => i,
            None => {
                order.push(values);
                runs.push(Runs::new());
                order.len() - 1
            }
        };
        runs[i].entry(acc).or_default().push(ys[r]);
    }
    let mut bits: Vec<u32> = runs
        .iter()
        .flat_map(|r| r.keys().filter_map(|a| a.map(|(b, _)| b)))
        .collect();
    bits.sort_unstable();
    bits.dedup();
    let any_exact = runs.iter().any(|r| r.contains_key(&None));
    let mut widths: Vec<String> = bits.iter().map(|b| format!("{b} bits")).collect();
    if any_exact {
        widths.push("exact".into());
    }
    let names = setting_names(&columns, &order);
    let mut lines = Vec::new();
    for (s, by_acc) in runs.iter().enumerate() {
        let exact = by_acc.get(&None).map(|v| point(bits.len(), v));
        let rules: Vec<Rule> = {
            let mut r: Vec<Rule> = by_acc.keys().filter_map(|a| a.map(|(_, r)| r)).collect();
            r.sort();
            r.dedup();
            r
        };
        if rules.is_empty() {
            lines.push(Line {
                name: names[s].clone(),
                setting: s,
                rule: None,
                points: exact.into_iter().collect(),
            });
            continue;
        }
        for rule in rules {
            let mut points: Vec<Point> = by_acc
                .iter()
                .filter_map(|(a, v)| match a {
                    Some((b, r)) if *r == rule => {
                        let x = bits.iter().position(|x| x == b).unwrap_or(0);
                        Some(point(x, v))
                    }
                    _ => None,
                })
                .collect();
            points.extend(exact.clone());
            lines.push(Line {
                name: format!("{}, {}", names[s], rule.name()),
                setting: s,
                rule: Some(rule),
                points,
            });
        }
    }
    Ok(AccumulatorPlot { widths, lines, y })
}

/// The mean and sample standard deviation of `v` at position `x`.
fn point(x: usize, v: &[f64]) -> Point {
    let (y, y_std) = mean_std(v);
    Point {
        x,
        y,
        y_std,
        seeds: v.len(),
    }
}

/// Each setting's name: its values of the columns that differ between settings (`name=value`
/// for all but the schedule and bits), or its schedule when none differ.
fn setting_names(columns: &[&str], settings: &[Vec<String>]) -> Vec<String> {
    let varies = |k: usize| {
        settings
            .iter()
            .any(|s| s.get(k) != settings.first().and_then(|f| f.get(k)))
    };
    let shown: Vec<usize> = (0..columns.len()).filter(|&k| varies(k)).collect();
    settings
        .iter()
        .map(|s| {
            let parts: Vec<String> = shown
                .iter()
                .map(|&k| match columns[k] {
                    "schedule" | "bits" => s[k].clone(),
                    name => format!("{name}={}", s[k]),
                })
                .collect();
            match parts.is_empty() {
                true => columns
                    .iter()
                    .position(|c| *c == "schedule")
                    .map_or_else(|| "all runs".to_string(), |k| s[k].clone()),
                false => parts.join(" "),
            }
        })
        .collect()
}

impl AccumulatorPlot {
    fn colour(line: &Line) -> RGBColor {
        palette::series(line.setting)
    }

    fn legend(&self) -> Vec<Entry> {
        let mut e: Vec<Entry> = self
            .lines
            .iter()
            .map(|l| {
                let c = Self::colour(l);
                let swatch = match l.rule {
                    Some(Rule::Saturate) => Swatch::Dashed(c),
                    _ => Swatch::LineMarker(c, Marker::of(l.setting)),
                };
                Entry::new(l.name.as_str(), swatch)
            })
            .collect();
        if self
            .lines
            .iter()
            .any(|l| l.points.iter().any(|p| p.y_std > 0.0))
        {
            e.push(Entry::new("bars: ± 1 std over seeds", Swatch::Line(BLACK)));
        }
        e
    }
}

impl Figure for AccumulatorPlot {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()> {
        let area = legend_strip(area, look, &self.legend())?;
        let yr = span(
            self.lines
                .iter()
                .flat_map(|l| &l.points)
                .flat_map(|p| [p.y - p.y_std, p.y + p.y_std]),
            0.1,
        )
        .unwrap_or(0.0..1.0);
        let last = self.widths.len().saturating_sub(1) as f64;
        let title = format!("{} against accumulator width", self.y.desc());
        let mut c = chart(
            &area,
            look,
            Axes {
                title: &title,
                x: -0.3..last + 0.3,
                y: yr,
                x_desc: "accumulator",
                y_desc: self.y.desc(),
                y_negated: false,
                x_names: &self.widths,
            },
        )?;
        let r = look.px(4.5);
        for l in &self.lines {
            let colour = Self::colour(l);
            let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (p.x as f64, p.y)).collect();
            match l.rule {
                Some(Rule::Saturate) => {
                    c.draw_series(DashedLineSeries::new(
                        pts.clone(),
                        look.px(6.0),
                        look.px(4.0),
                        look.line(colour, 2.0),
                    ))
                    .drawn()?;
                }
                _ => {
                    c.draw_series(LineSeries::new(pts.clone(), look.line(colour, 2.0)))
                        .drawn()?;
                }
            }
            c.draw_series(l.points.iter().filter(|p| p.y_std > 0.0).map(|p| {
                ErrorBar::new_vertical(
                    p.x as f64,
                    p.y - p.y_std,
                    p.y,
                    p.y + p.y_std,
                    look.line(colour, 1.5),
                    look.px(8.0),
                )
            }))
            .drawn()?;
            Marker::of(l.setting).draw(&mut c, &pts, r, colour.filled())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        Table::parse(text.as_bytes(), Path::new("results.csv")).unwrap()
    }

    const HEADER: &str = "cell,schedule,bits,seed,accumulator,accel,final_test_acc,best_test_acc\n";

    #[test]
    fn lines_run_by_width_and_end_at_the_exact_runs() {
        let t = table(&format!(
            "{HEADER}a,static,8,0,16:wrap,zc706,0.1,0.1\n\
             a,static,8,0,16:wrap,bitfusion,0.1,0.1\n\
             b,static,8,0,exact,zc706,0.9,0.9\n\
             c,static,8,0,24,zc706,0.8,0.8\n\
             d,static,8,0,16:saturate,zc706,0.5,0.5\n\
             e,cosine,3:8,0,64,zc706,0.7,0.7\n\
             f,cosine,3:8,1,64,zc706,0.8,0.8\n"
        ));
        let p = accumulators_of(&t, YAxis::Final).unwrap();
        assert_eq!(p.widths, ["16 bits", "24 bits", "exact"]);
        let names: Vec<&str> = p.lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["static 8, wrap", "static 8, saturate", "cosine 3:8"]
        );
        let wrap: Vec<(usize, f64)> = p.lines[0].points.iter().map(|q| (q.x, q.y)).collect();
        // the cell costed on two accelerators counts once
        assert_eq!(wrap, [(0, 0.1), (1, 0.8), (2, 0.9)]);
        assert_eq!(p.lines[1].points.len(), 2);
        let cosine = &p.lines[2].points[0];
        assert_eq!((cosine.x, cosine.seeds), (2, 2));
        assert!((cosine.y - 0.75).abs() < 1e-12 && cosine.y_std > 0.0);
        let svg = crate::render_svg(&p, crate::Size::default()).unwrap();
        assert!(svg.contains("against accumulator width"));
    }

    #[test]
    fn bad_values_name_the_line_and_column() {
        for (row, needle) in [
            ("a,static,8,0,24:clip,zc706,0.5,0.5", "accumulator"),
            ("a,static,8,0,1,zc706,0.5,0.5", "accumulator"),
            ("a,static,8,0,24,zc706,1.5,0.5", "final_test_acc"),
            ("a,static,8,x,24,zc706,0.5,0.5", "seed"),
        ] {
            let e = accumulators_of(&table(&format!("{HEADER}{row}\n")), YAxis::Final)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("results.csv") && e.contains("line 2"),
                "{row}: {e}"
            );
            assert!(e.contains(needle), "{row}: {e}");
        }
        let e = accumulators_of(&table("seed,final_test_acc\n0,0.5\n"), YAxis::Final)
            .unwrap_err()
            .to_string();
        assert!(e.contains("accumulator"), "{e}");
        let e = accumulators_of(&table(HEADER), YAxis::Final)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no rows"), "{e}");
    }

    #[test]
    fn a_run_repeated_without_a_cell_column_is_refused() {
        let t = table(
            "schedule,bits,seed,accumulator,final_test_acc\n\
             static,8,0,24,0.5\nstatic,8,0,24,0.6\n",
        );
        let e = accumulators_of(&t, YAxis::Final).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("repeats line 2"), "{e}");
    }
}
