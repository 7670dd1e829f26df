//! `cptsim plot`: figures as SVG or PNG (by the `-o` file name) from schedules, trace files, a
//! sweep's results CSV, a `run --report` directory and `train --out` directories.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Subcommand;
use cptsim_plot::accumulators::accumulators;
use cptsim_plot::breakdown::{breakdown, layer_files, Per, Split};
use cptsim_plot::curves::Curves;
use cptsim_plot::figure::{self, Size};
use cptsim_plot::pareto::{pareto, XAxis, YAxis};
use cptsim_plot::report::Provenance;
use cptsim_plot::trace::{heatmap, HeatmapOptions, Operand};
use cptsim_plot::SchedulePlot;
use cptsim_traces::schedule::{Schedule, ScheduleArgs, SCHEDULE_NAMES};
use cptsim_traces::{read_trace, TraceRow};

use super::shared::{bit_range, ConventionArg};

/// Most iteration bins a heat map may have (far more than any screen shows).
const MAX_COLUMNS: usize = 20_000;

/// Arguments of `cptsim plot`.
#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Precision over iterations (FW and BW) for one or several schedules, one panel each.
    Schedule(SchedulePlotArgs),
    /// Layer × iteration heat map of a trace file's bits (DFQ mixes as the mean bits).
    Trace(TracePlotArgs),
    /// Accuracy against cost from a sweep's results.csv: seed means ± std, static baseline,
    /// Pareto front.
    Pareto(ParetoArgs),
    /// Accuracy against accumulator width from a study over --accumulator: a line per setting and overflow rule, seed means ± std, exact last
    Accumulator(AccumulatorArgs),
    /// Per-layer stacked latency and energy bars from a `run --report` directory.
    Breakdown(BreakdownArgs),
    /// Loss, accuracy and bits over iterations of one or several `train --out` directories.
    Curves(CurvesArgs),
    /// Write index.html into an existing `train --out` directory (summary, curves, heat map).
    TrainIndex(TrainIndexArgs),
    /// Write index.html into a `run --report` directory from the run's saved `--format json`
    /// output (the numbers, the accelerator table, the directory's breakdowns).
    RunIndex(RunIndexArgs),
    /// Write index.html into a directory holding a sweep's results.csv (table, Pareto plots).
    SweepIndex(SweepIndexArgs),
}

#[derive(clap::Args, Debug)]
struct SweepIndexArgs {
    /// The directory with results.csv.
    dir: PathBuf,
    /// Column that colours the points.
    #[arg(long, default_value = "schedule")]
    by: String,
}

#[derive(clap::Args, Debug)]
struct RunIndexArgs {
    /// The `run --report` directory.
    dir: PathBuf,
    /// The run's `cptsim run --format json` output, saved to a file.
    #[arg(long, value_name = "FILE")]
    run: PathBuf,
}

#[derive(clap::Args, Debug)]
struct TrainIndexArgs {
    /// The `train --out` directory.
    dir: PathBuf,
    /// The model the run trained (`zoo:NAME` or an ONNX file), to read its trace.
    #[arg(long)]
    model: String,
}

#[derive(clap::Args, Debug)]
struct ParetoArgs {
    /// The sweep's tidy results CSV (columns in docs/src/formats/reports.md).
    results: PathBuf,
    /// Cost axis: gbitops, latency or energy.
    #[arg(long, default_value = "gbitops")]
    x: String,
    /// Accuracy axis: accuracy (final_test_acc) or best (best_test_acc).
    #[arg(long, default_value = "accuracy")]
    y: String,
    /// Column that colours the points (any column of the file).
    #[arg(long, default_value = "schedule")]
    by: String,
    #[command(flatten)]
    output: Output,
}

#[derive(clap::Args, Debug)]
struct AccumulatorArgs {
    /// The sweep's tidy results CSV, with an `accumulator` column.
    results: PathBuf,
    /// Accuracy axis: accuracy (final_test_acc) or best (best_test_acc).
    #[arg(long, default_value = "accuracy")]
    y: String,
    #[command(flatten)]
    output: Output,
}

#[derive(clap::Args, Debug)]
struct BreakdownArgs {
    /// A `cptsim run --accel … --report DIR` directory.
    dir: PathBuf,
    /// The accelerator whose `<NAME>-layers.csv` to draw (needed when the directory has several).
    #[arg(long)]
    accel: Option<String>,
    /// Split each bar by `components` (compute / SRAM / DRAM) or by `gemm` (fw / eb / wg).
    #[arg(long, default_value = "components")]
    split: String,
    /// One bar per `layer`, or per `stage` (layers sharing the name before the first `.`).
    #[arg(long, default_value = "layer")]
    per: String,
    #[command(flatten)]
    output: Output,
}

#[derive(clap::Args, Debug)]
struct CurvesArgs {
    /// `train --out` directories (each with a metrics.csv), overlaid.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    #[command(flatten)]
    output: Output,
}

/// Output file and size, shared by every figure.
#[derive(clap::Args, Debug)]
struct Output {
    /// The figure file: FILE.svg or FILE.png.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: PathBuf,
    /// Width in CSS pixels (1/96 inch).
    #[arg(long, default_value_t = 800)]
    width: u32,
    /// Height in CSS pixels.
    #[arg(long, default_value_t = 500)]
    height: u32,
    /// Resolution of a PNG (96 = one pixel per CSS pixel; 192 doubles both sides).
    #[arg(long, default_value_t = 96)]
    dpi: u32,
}

impl Output {
    fn size(&self) -> Size {
        Size {
            width: self.width,
            height: self.height,
            dpi: self.dpi,
        }
    }

    /// Renders `fig` into the output file.
    fn write(&self, fig: &impl cptsim_plot::Figure) -> anyhow::Result<()> {
        figure::write(fig, &self.out, self.size())?;
        eprintln!("wrote {}", self.out.display());
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
struct SchedulePlotArgs {
    /// Schedules, comma-separated (any `cptsim run --schedule` value; pfq:… keeps its commas).
    #[arg(long, default_value = "cosine")]
    schedule: String,
    /// Forward bits MIN:MAX.
    #[arg(long, default_value = "3:8")]
    bits: String,
    /// Backward bits, a number or MIN:MAX.
    #[arg(long, default_value = "8")]
    grad_bits: String,
    /// Cycles of the cyclic schedules.
    #[arg(long, default_value_t = 32)]
    cycles: u64,
    /// Training iterations.
    #[arg(long, default_value_t = 64_000)]
    iters: u64,
    /// Whose reference code cyclic schedules follow: cpt or wk.
    #[arg(long, value_enum, default_value_t = ConventionArg::Cpt)]
    convention: ConventionArg,
    #[command(flatten)]
    output: Output,
}

#[derive(clap::Args, Debug)]
struct TracePlotArgs {
    /// The trace file (.csv or .pb), e.g. a `train --out` directory's trace.csv.
    file: PathBuf,
    /// The model the trace belongs to (`zoo:NAME` or an ONNX file); the trace is checked
    /// against it.
    #[arg(long)]
    model: String,
    /// Which bits to show: a (activations, the forward bits), w (weights) or g (errors).
    #[arg(long, default_value = "a")]
    operand: String,
    /// At most this many iteration bins.
    #[arg(long, default_value_t = 400)]
    columns: usize,
    /// Colour range MIN:MAX bits [default: the range in the trace].
    #[arg(long)]
    bits: Option<String>,
    #[command(flatten)]
    output: Output,
}

/// Runs the subcommand.
pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    match args.what {
        What::Schedule(a) => schedule(&a),
        What::Trace(a) => trace(&a),
        What::Pareto(a) => {
            a.output.size().check()?;
            let (x, y) = (XAxis::parse(&a.x)?, YAxis::parse(&a.y)?);
            a.output.write(&pareto(&a.results, x, y, &a.by)?)
        }
        What::Accumulator(a) => {
            a.output.size().check()?;
            a.output
                .write(&accumulators(&a.results, YAxis::parse(&a.y)?)?)
        }
        What::Breakdown(a) => breakdown_plot(&a),
        What::Curves(a) => {
            a.output.size().check()?;
            a.output.write(&Curves::read(&a.dirs)?)
        }
        What::TrainIndex(a) => {
            let model = cptsim_models::load_summary(&a.model, 1)
                .with_context(|| format!("--model {}", a.model))?;
            let prov = Provenance::of_this_process(env!("CARGO_PKG_VERSION"));
            let path = cptsim_plot::report::write_train_index(&a.dir, &model, &prov)?;
            eprintln!("wrote {}", path.display());
            Ok(())
        }
        What::RunIndex(a) => {
            let report = cptsim_plot::report::read_run_report(&a.run)
                .with_context(|| format!("--run {}", a.run.display()))?;
            write_run_index(&a.dir, &report)?;
            eprintln!("wrote {}", a.dir.join(cptsim_plot::report::INDEX).display());
            Ok(())
        }
        What::SweepIndex(a) => {
            let prov = Provenance::of_this_process(env!("CARGO_PKG_VERSION"));
            let path = cptsim_plot::report::write_sweep_index(&a.dir, &a.by, &prov)?;
            eprintln!("wrote {}", path.display());
            Ok(())
        }
    }
}

fn breakdown_plot(a: &BreakdownArgs) -> anyhow::Result<()> {
    a.output.size().check()?;
    let split = Split::parse(&a.split)?;
    let per = Per::parse(&a.per)?;
    let files = layer_files(&a.dir)?;
    let file = match &a.accel {
        Some(name) => {
            let want = format!("{name}-layers.csv");
            files
                .iter()
                .find(|f| f.file_name().is_some_and(|n| n.to_string_lossy() == want))
                .with_context(|| format!("--accel {name}: no {want} in {}", a.dir.display()))?
        }
        None => match files.as_slice() {
            [one] => one,
            [] => bail!(
                "{}: no *-layers.csv (write one with `cptsim run --accel … --report DIR`)",
                a.dir.display()
            ),
            _ => bail!(
                "{}: several accelerators ({}); pick one with --accel",
                a.dir.display(),
                files
                    .iter()
                    .filter_map(|f| f.file_name())
                    .map(|n| n
                        .to_string_lossy()
                        .trim_end_matches("-layers.csv")
                        .to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    };
    let bars = breakdown(file, split)?;
    match per {
        Per::Layer => a.output.write(&bars),
        Per::Stage => a.output.write(&bars.by_stage()),
    }
}

/// Writes `index.html` into a `run --report` directory from the run's report.
pub(crate) fn write_run_index(dir: &Path, report: &cptsim_accel::RunReport) -> anyhow::Result<()> {
    let prov = Provenance::of_this_process(env!("CARGO_PKG_VERSION"));
    cptsim_plot::report::write_run_index(dir, report, &prov)?;
    Ok(())
}

/// Splits a `--schedule` list on commas, keeping the commas inside `pfq:…` values (tokens that
/// start with a digit, `fw=` or `bw=`) and `file:…` paths (tokens that are no schedule name).
fn split_schedules(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in list.split(',') {
        let head = token.split(':').next().unwrap_or("");
        let known = SCHEDULE_NAMES.contains(&head) || head == "pfq" || head == "file";
        let pfq_part = token.starts_with(|c: char| c.is_ascii_digit())
            || token.starts_with("fw=")
            || token.starts_with("bw=");
        match out.last_mut() {
            Some(last)
                if (last.starts_with("pfq:") && pfq_part)
                    || (last.starts_with("file:") && !known) =>
            {
                last.push(',');
                last.push_str(token);
            }
            _ => out.push(token.to_string()),
        }
    }
    out
}

fn schedule(a: &SchedulePlotArgs) -> anyhow::Result<()> {
    a.output.size().check()?;
    let fw = bit_range("--bits", Some(&a.bits), "")?;
    let bw = bit_range("--grad-bits", Some(&a.grad_bits), "")?;
    let schedules = split_schedules(&a.schedule)
        .iter()
        .map(|name| {
            ScheduleArgs::new(name.trim(), a.iters)
                .cycles(a.cycles)
                .bits(fw)
                .grad_bits(bw)
                .convention(a.convention.rule())
                .build()
        })
        .collect::<Result<Vec<Schedule>, _>>()?;
    a.output.write(&SchedulePlot::new(&schedules)?)
}

fn trace(a: &TracePlotArgs) -> anyhow::Result<()> {
    a.output.size().check()?;
    let operand = Operand::parse(&a.operand)?;
    let bits = match &a.bits {
        Some(text) => {
            let r = bit_range("--bits", Some(text), "")?;
            Some((r.min, r.max))
        }
        None => None,
    };
    if a.columns == 0 || a.columns > MAX_COLUMNS {
        bail!("--columns {}: between 1 and {MAX_COLUMNS}", a.columns);
    }
    let model =
        cptsim_models::load_summary(&a.model, 1).with_context(|| format!("--model {}", a.model))?;
    let mut rows: Vec<TraceRow> = Vec::new();
    let meta = read_trace(&a.file, &model, |r| {
        rows.push(*r);
        Ok(())
    })?;
    let opts = HeatmapOptions {
        operand,
        max_columns: a.columns,
        bits,
        title: String::new(),
        layers: None,
    };
    let map = heatmap(&rows, &meta, &opts).with_context(|| a.file.display().to_string())?;
    a.output.write(&map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_lists_keep_pfq_commas() {
        assert_eq!(
            split_schedules("cosine,pfq:100,200:fw=3,4,exp-triangular-v,nope"),
            ["cosine", "pfq:100,200:fw=3,4", "exp-triangular-v", "nope"]
        );
        assert_eq!(
            split_schedules("file:a,b.csv,linear"),
            ["file:a,b.csv", "linear"]
        );
    }
}
