//! Accuracy against training cost from a sweep's tidy `results.csv`: one point per configuration
//! (mean over seeds, ± one standard deviation as error bars), coloured by a `--by` column, the
//! static baseline's cost marked, and the Pareto front (least cost for the accuracy) drawn. On
//! latency or energy, a file of several accelerators (its `accel` column) draws each accelerator
//! in its own colour and marker with its own front and baseline, the points labelled by their
//! `--by` value: one accelerator's seconds or joules are not comparable with another's. GBitOPs
//! do not depend on the accelerator, so a GBitOPs figure draws each run once.
//!
//! Columns read (by name; others ignored): `schedule`, `seed`, the x column and its static twin
//! (`gbitops`/`static_gbitops`, `latency_s`/`static_latency_s`, `energy_j`/`static_energy_j`),
//! the y column (`final_test_acc` or `best_test_acc`) and the `--by` column. A configuration is
//! the row's values of `model, schedule, bits, grad_bits, accel` (those present) and `--by`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{PlotError, Result};
use crate::table::{Column, Range, Table};

/// The cost on the x axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XAxis {
    Gbitops,
    Latency,
    Energy,
}

impl XAxis {
    /// Parses `gbitops`, `latency` or `energy`.
    pub fn parse(s: &str) -> Result<XAxis> {
        match s {
            "gbitops" => Ok(XAxis::Gbitops),
            "latency" => Ok(XAxis::Latency),
            "energy" => Ok(XAxis::Energy),
            _ => Err(PlotError::Invalid(format!(
                "--x {s}: expected gbitops, latency or energy"
            ))),
        }
    }

    /// The column holding the run's cost.
    pub fn column(self) -> &'static str {
        match self {
            XAxis::Gbitops => "gbitops",
            XAxis::Latency => "latency_s",
            XAxis::Energy => "energy_j",
        }
    }

    /// The column holding the static baseline's cost.
    pub fn static_column(self) -> &'static str {
        match self {
            XAxis::Gbitops => "static_gbitops",
            XAxis::Latency => "static_latency_s",
            XAxis::Energy => "static_energy_j",
        }
    }

    pub(crate) fn desc(self) -> &'static str {
        match self {
            XAxis::Gbitops => "training cost (GBitOPs)",
            XAxis::Latency => "training latency (s)",
            XAxis::Energy => "training energy (J)",
        }
    }
}

/// The accuracy on the y axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YAxis {
    /// `final_test_acc`.
    Final,
    /// `best_test_acc`.
    Best,
}

impl YAxis {
    /// Parses `accuracy` (final test accuracy) or `best`.
    pub fn parse(s: &str) -> Result<YAxis> {
        match s {
            "accuracy" => Ok(YAxis::Final),
            "best" => Ok(YAxis::Best),
            _ => Err(PlotError::Invalid(format!(
                "--y {s}: expected accuracy (final_test_acc) or best (best_test_acc)"
            ))),
        }
    }

    /// The column read.
    pub fn column(self) -> &'static str {
        match self {
            YAxis::Final => "final_test_acc",
            YAxis::Best => "best_test_acc",
        }
    }

    pub(crate) fn desc(self) -> &'static str {
        match self {
            YAxis::Final => "final test accuracy",
            YAxis::Best => "best test accuracy",
        }
    }
}

/// One configuration: the mean over its seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The `--by` value (colour and legend entry).
    pub group: String,
    /// The configuration's key columns, `name=value` joined by spaces.
    pub config: String,
    /// Mean cost.
    pub x: f64,
    /// Mean accuracy.
    pub y: f64,
    /// Sample standard deviation of the accuracy over seeds (0 for one seed).
    pub y_std: f64,
    /// Seeds averaged.
    pub seeds: usize,
    /// True for the static schedule's configurations.
    pub is_static: bool,
    /// Index of the point's accelerator in [`Pareto::accels`].
    pub accel: usize,
}

/// The Pareto figure's data.
#[derive(Clone, Debug)]
pub struct Pareto {
    /// Points, grouped by `--by` value in first-seen order.
    pub points: Vec<Point>,
    /// The accelerators (`accel` values, first-seen order; one empty name without the column).
    pub accels: Vec<String>,
    /// Per accelerator, indices into `points` of its Pareto front, by increasing cost.
    pub fronts: Vec<Vec<usize>>,
    /// Distinct static-baseline costs, each with its accelerator's index.
    pub static_x: Vec<(f64, usize)>,
    pub(crate) groups: Vec<String>,
    pub(crate) x: XAxis,
    pub(crate) y: YAxis,
    pub(crate) by: String,
}

/// Columns that identify a configuration when present.
const KEY_COLUMNS: [&str; 5] = ["model", "schedule", "bits", "grad_bits", "accel"];

/// Reads `path` and builds the figure's data.
pub fn pareto(path: &Path, x: XAxis, y: YAxis, by: &str) -> Result<Pareto> {
    pareto_of(&Table::read(path)?, x, y, by)
}

/// Builds the figure's data from the results table `t`, checking it: seeds are whole numbers,
/// costs not negative, accuracies in [0, 1], and no row repeats another's run (its `cell` and
/// `accel`, or without a `cell` column its configuration and seed).
pub fn pareto_of(t: &Table, x: XAxis, y: YAxis, by: &str) -> Result<Pareto> {
    let schedule = t.column("schedule")?;
    let seed = t.column("seed")?;
    let xs = t.numbers(x.column(), Range::NonNegative)?;
    let statics = t.numbers(x.static_column(), Range::NonNegative)?;
    let ys = t.numbers(y.column(), Range::Fraction)?;
    if !t.has(by) {
        return Err(PlotError::Invalid(format!(
            "--by {by}: {} has no column '{by}' (columns: {})",
            t.path().display(),
            t.headers().join(", ")
        )));
    }
    let by_col = t.column(by)?;
    let accel_col = t.has("accel").then(|| t.column("accel")).transpose()?;
    if t.is_empty() {
        return Err(t.empty_error());
    }
    // an empty seed is a cell that set none (the sweep's table leaves it blank)
    for r in (0..t.len()).filter(|&r| !t.text(r, &seed).trim().is_empty()) {
        t.checked(r, &seed, Range::Count)?;
    }
    let mut keys: Vec<_> = KEY_COLUMNS
        .iter()
        .filter(|k| t.has(k) && **k != by)
        .map(|k| t.column(k))
        .collect::<Result<_>>()?;
    keys.push(t.column(by)?);
    let run_key: Vec<Column> = match t.has("cell") {
        true => ["cell", "accel"]
            .iter()
            .filter(|k| t.has(k))
            .map(|k| t.column(k))
            .collect::<Result<_>>()?,
        false => KEY_COLUMNS
            .iter()
            .filter(|k| t.has(k) && **k != by)
            .chain([&by, &"seed"])
            .map(|k| t.column(k))
            .collect::<Result<_>>()?,
    };
    t.unique(&run_key.iter().collect::<Vec<_>>())?;
    // GBitOPs are the same on every accelerator: each run counts once, under no accelerator.
    let one_cost = x == XAxis::Gbitops;
    let names: Vec<&str> = KEY_COLUMNS
        .iter()
        .filter(|k| t.has(k) && **k != by)
        .chain([&by])
        .copied()
        .collect();
    let cell_col = t.has("cell").then(|| t.column("cell")).transpose()?;
    let mut seen_runs = std::collections::HashSet::new();
    let mut configs: BTreeMap<String, Runs> = BTreeMap::new();
    let mut groups: Vec<String> = Vec::new();
    let mut accels: Vec<String> = Vec::new();
    for r in 0..t.len() {
        let config = keys
            .iter()
            .zip(&names)
            .filter(|(_, name)| !(one_cost && **name == "accel"))
            .map(|(c, name)| format!("{name}={}", t.text(r, c)))
            .collect::<Vec<_>>()
            .join(" ");
        if one_cost {
            let run = match &cell_col {
                Some(c) => t.text(r, c).to_string(),
                None => format!("{config} seed={}", t.text(r, &seed)),
            };
            if !seen_runs.insert(run) {
                continue;
            }
        }
        let group = t.text(r, &by_col).to_string();
        if !groups.contains(&group) {
            groups.push(group.clone());
        }
        let accel_name = match (&accel_col, one_cost) {
            (Some(c), false) => t.text(r, c),
            _ => "",
        };
        let accel = match accels.iter().position(|a| a == accel_name) {
            Some(i) => i,
            None => {
                accels.push(accel_name.to_string());
                accels.len() - 1
            }
        };
        let order = configs.len();
        let e = configs.entry(config).or_insert_with(|| Runs {
            order,
            group,
            xs: Vec::new(),
            ys: Vec::new(),
            is_static: t.text(r, &schedule) == "static",
            accel,
        });
        e.xs.push(xs[r]);
        e.ys.push(ys[r]);
    }
    let mut points: Vec<(usize, Point)> = configs
        .into_iter()
        .map(|(config, runs)| {
            let (x, _) = mean_std(&runs.xs);
            let (y, y_std) = mean_std(&runs.ys);
            (
                runs.order,
                Point {
                    group: runs.group,
                    config,
                    x,
                    y,
                    y_std,
                    seeds: runs.ys.len(),
                    is_static: runs.is_static,
                    accel: runs.accel,
                },
            )
        })
        .collect();
    points.sort_by_key(|(order, _)| *order);
    let points: Vec<Point> = points.into_iter().map(|(_, p)| p).collect();
    let fronts = (0..accels.len())
        .map(|a| {
            let of_accel: Vec<usize> = (0..points.len())
                .filter(|&i| points[i].accel == a)
                .collect();
            let sub: Vec<Point> = of_accel.iter().map(|&i| points[i].clone()).collect();
            front(&sub).into_iter().map(|i| of_accel[i]).collect()
        })
        .collect();
    let mut static_x: Vec<(f64, usize)> = Vec::new();
    for (r, s) in statics.into_iter().enumerate() {
        let name = match (&accel_col, one_cost) {
            (Some(c), false) => t.text(r, c),
            _ => "",
        };
        let a = accels.iter().position(|n| n == name).unwrap_or(0);
        if !static_x
            .iter()
            .any(|&(v, b)| b == a && (v - s).abs() <= 1e-9 * s.abs().max(1e-300))
        {
            static_x.push((s, a));
        }
    }
    Ok(Pareto {
        points,
        accels,
        fronts,
        static_x,
        groups,
        x,
        y,
        by: by.to_string(),
    })
}

/// The rows of one configuration.
struct Runs {
    /// First-seen order.
    order: usize,
    group: String,
    xs: Vec<f64>,
    ys: Vec<f64>,
    is_static: bool,
    accel: usize,
}

/// Mean and sample standard deviation.
pub(crate) fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The points no other point beats (at most the cost and at least the accuracy, one strictly),
/// by increasing cost.
fn front(points: &[Point]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| {
        points[a]
            .x
            .total_cmp(&points[b].x)
            .then(points[b].y.total_cmp(&points[a].y))
    });
    let mut best = f64::NEG_INFINITY;
    let mut out = Vec::new();
    for i in order {
        if points[i].y > best {
            best = points[i].y;
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{render_svg, svg_texts, Size};

    /// A hand-written sweep: two schedules × two seeds plus the static run, two bit ranges.
    const RESULTS: &str = "\
model,schedule,bits,grad_bits,seed,accel,gbitops,static_gbitops,reduction,latency_s,energy_j,static_latency_s,static_energy_j,final_test_acc,best_test_acc,note
lenet5,static,8,8,0,,100,100,0,2.0,10,2.0,10,0.90,0.91,x
lenet5,static,8,8,1,,100,100,0,2.0,10,2.0,10,0.92,0.93,x
lenet5,cosine,3:8,8,0,,60,100,0.4,1.5,7,2.0,10,0.88,0.90,x
lenet5,cosine,3:8,8,1,,60,100,0.4,1.5,7,2.0,10,0.90,0.91,x
lenet5,cosine,4:8,8,0,,70,100,0.3,1.6,8,2.0,10,0.87,0.89,x
lenet5,exp,3:8,8,0,,50,100,0.5,1.4,6,2.0,10,0.85,0.86,x
lenet5,exp,3:8,8,1,,50,100,0.5,1.4,6,2.0,10,0.86,0.87,x
";

    fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        std::fs::write(&path, RESULTS).unwrap();
        (dir, path)
    }

    #[test]
    fn a_blank_seed_is_a_run_without_one() {
        let csv = "schedule,seed,gbitops,static_gbitops,final_test_acc\ncosine,,1,2,0.5\nstatic,,2,2,0.6\n";
        let t = Table::parse(csv.as_bytes(), Path::new("r.csv")).map_err(|e| e.to_string());
        let p = t.and_then(|t| {
            pareto_of(&t, XAxis::Gbitops, YAxis::Final, "schedule").map_err(|e| e.to_string())
        });
        assert_eq!(p.map(|p| p.points.len()), Ok(2));
    }

    #[test]
    fn points_are_seed_means_and_the_front_is_undominated() {
        let (_d, path) = fixture();
        let p = pareto(&path, XAxis::Gbitops, YAxis::Final, "schedule").unwrap();
        assert_eq!(p.groups, ["static", "cosine", "exp"]);
        assert_eq!(p.points.len(), 4);
        let cos = &p.points[1];
        assert_eq!((cos.x, cos.seeds), (60.0, 2));
        assert!((cos.y - 0.89).abs() < 1e-12);
        assert!((cos.y_std - 0.02f64.hypot(0.0) / 2f64.sqrt()).abs() < 1e-12);
        assert!(p.points[0].is_static && !cos.is_static);
        // exp (50, 0.855) → cosine 3:8 (60, 0.89) → static (100, 0.91); cosine 4:8 is beaten.
        assert_eq!(p.accels, [""]);
        let front: Vec<(f64, f64)> = p.fronts[0]
            .iter()
            .map(|&i| (p.points[i].x, p.points[i].y))
            .collect();
        assert_eq!(front.len(), 3);
        assert_eq!(front[0].0, 50.0);
        assert_eq!(front[2].0, 100.0);
        assert_eq!(p.static_x, [(100.0, 0)]);
        let p = pareto(&path, XAxis::Energy, YAxis::Best, "bits").unwrap();
        assert_eq!(p.points[0].x, 10.0);
        assert_eq!(p.groups, ["8", "3:8", "4:8"]);
    }

    #[test]
    fn repeated_runs_and_out_of_range_cells_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        let err = |rows: &str| {
            let head = "cell,schedule,seed,accel,gbitops,static_gbitops,final_test_acc\n";
            std::fs::write(&path, format!("{head}{rows}")).unwrap();
            pareto(&path, XAxis::Gbitops, YAxis::Final, "schedule")
                .unwrap_err()
                .to_string()
        };
        let e =
            err("a,cosine,0,zc706,1,2,0.5\nb,cosine,1,zc706,1,2,0.5\na,cosine,0,zc706,1,2,0.6\n");
        assert!(
            e.ends_with("r.csv: line 4, column 'cell, accel': the row repeats line 2"),
            "{e}"
        );
        let e = err("a,cosine,0,zc706,1,2,1.5\n");
        assert!(
            e.ends_with("line 2, column 'final_test_acc': 1.5 is outside [0, 1]"),
            "{e}"
        );
        let e = err("a,cosine,0,zc706,-1,2,0.5\n");
        assert!(
            e.ends_with("line 2, column 'gbitops': -1 is negative"),
            "{e}"
        );
        let e = err("a,cosine,zero,zc706,1,2,0.5\n");
        assert!(
            e.ends_with("line 2, column 'seed': 'zero' is not a number"),
            "{e}"
        );
        // the same cell on another accelerator is another run, which GBitOPs draw once
        std::fs::write(
            &path,
            "cell,schedule,seed,accel,gbitops,static_gbitops,final_test_acc\n\
             a,cosine,0,zc706,1,2,0.5\na,cosine,0,stripes,1,2,0.5\n",
        )
        .unwrap();
        let p = pareto(&path, XAxis::Gbitops, YAxis::Final, "schedule").unwrap();
        assert_eq!(
            (p.accels.len(), p.points.len(), p.points[0].seeds),
            (1, 1, 1)
        );
    }

    #[test]
    fn missing_columns_and_bad_flags_are_named() {
        let (dir, path) = fixture();
        let e = pareto(&path, XAxis::Gbitops, YAxis::Final, "policy").unwrap_err();
        assert!(
            e.to_string().starts_with("--by policy: ")
                && e.to_string().contains("results.csv has no column 'policy'"),
            "{e}"
        );
        let cut = dir.path().join("cut.csv");
        std::fs::write(
            &cut,
            "schedule,seed,gbitops,final_test_acc\ncosine,0,1,0.5\n",
        )
        .unwrap();
        let e = pareto(&cut, XAxis::Gbitops, YAxis::Final, "schedule").unwrap_err();
        assert!(
            e.to_string()
                .contains("cut.csv: no column 'static_gbitops'"),
            "{e}"
        );
        std::fs::write(&cut, RESULTS.lines().next().unwrap()).unwrap();
        let e = pareto(&cut, XAxis::Gbitops, YAxis::Final, "schedule").unwrap_err();
        assert!(e.to_string().contains("nothing to plot"), "{e}");
        assert!(XAxis::parse("time")
            .unwrap_err()
            .to_string()
            .contains("--x time"));
        assert!(YAxis::parse("loss")
            .unwrap_err()
            .to_string()
            .contains("--y loss"));
    }

    /// One cell on two accelerators, costs differing by accelerator.
    const TWO_ACCELS: &str = "\
cell,schedule,bits,seed,accel,gbitops,static_gbitops,latency_s,static_latency_s,final_test_acc
s0,static,8,0,zc706,100,100,2.0,2.0,0.90
s0,static,8,0,stripes,100,100,0.5,0.5,0.90
c0,cosine,3:8,0,zc706,60,100,1.5,2.0,0.89
c0,cosine,3:8,0,stripes,60,100,0.3,0.5,0.89
e0,exp,3:8,0,zc706,50,100,1.6,2.0,0.80
e0,exp,3:8,0,stripes,50,100,0.45,0.5,0.80
";

    #[test]
    fn several_accelerators_get_a_colour_marker_and_front_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        std::fs::write(&path, TWO_ACCELS).unwrap();
        let p = pareto(&path, XAxis::Latency, YAxis::Final, "schedule").unwrap();
        assert_eq!(p.accels, ["zc706", "stripes"]);
        assert_eq!(p.points.len(), 6);
        // zc706: cosine (1.5) beats static (2.0), exp (1.6) is beaten; stripes: cosine only
        let front = |a: usize| -> Vec<f64> { p.fronts[a].iter().map(|&i| p.points[i].x).collect() };
        assert_eq!(front(0), [1.5, 2.0]);
        assert_eq!(front(1), [0.3, 0.5]);
        assert_eq!(p.static_x, [(2.0, 0), (0.5, 1)]);
        let twice = |l: &str| [l.to_string(), l.to_string()];
        let labels: Vec<String> = ["static 8", "cosine 3:8", "exp 3:8"]
            .into_iter()
            .flat_map(twice)
            .collect();
        assert_eq!(p.labels(), labels);
        let svg = render_svg(&p, Size::default()).unwrap();
        let texts = svg_texts(&svg);
        for want in [
            "zc706 and its front",
            "stripes and its front",
            "schedule = static (hollow)",
        ] {
            assert_eq!(
                texts.iter().filter(|t| *t == want).count(),
                1,
                "{want}: {texts:?}"
            );
        }
        // each front a line in its accelerator's colour
        for colour in ["#0072B2", "#E69F00"] {
            assert!(
                svg.split("<polyline")
                    .skip(1)
                    .any(|l| l.contains(&format!("stroke=\"{colour}\""))),
                "{colour}"
            );
        }
        // on GBitOPs the accelerators agree: each run once, one front, no accelerator legend
        let g = pareto(&path, XAxis::Gbitops, YAxis::Final, "schedule").unwrap();
        assert_eq!((g.accels.len(), g.points.len()), (1, 3));
        assert!(g
            .points
            .iter()
            .all(|p| p.seeds == 1 && !p.config.contains("accel")));
        let texts = svg_texts(&render_svg(&g, Size::default()).unwrap());
        assert!(texts.iter().any(|t| t == "Pareto front"));
        assert!(!texts.iter().any(|t| t.contains("zc706")));
    }

    #[test]
    fn svg_has_axes_legend_and_error_bars() {
        let (_d, path) = fixture();
        let p = pareto(&path, XAxis::Gbitops, YAxis::Final, "schedule").unwrap();
        let svg = render_svg(&p, Size::default()).unwrap();
        let texts = svg_texts(&svg);
        for want in [
            "training cost (GBitOPs)",
            "final test accuracy",
            "schedule = static (×)",
            "cosine",
            "exp",
            "Pareto front",
            "static baseline cost",
        ] {
            assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
        }
        // A filled circle per non-static point and the centre of each of the three error bars
        // (static, cosine 3:8, exp: two seeds each); legend swatches are polygons.
        assert_eq!(svg.matches("<circle").count(), 3 + 3);
    }
}
