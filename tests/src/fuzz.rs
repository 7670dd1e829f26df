//! Entry points of the fuzz targets (`fuzz/fuzz_targets/*.rs`), one per input format. The nightly
//! `cargo fuzz` targets call them, and `tests/tests/fuzz_replay.rs` feeds them the committed
//! corpora (`fuzz/replay/<target>/`) on stable. Each returns whether the input was accepted; a
//! panic, abort or hang is the defect the fuzzer looks for.

use std::path::Path;
use std::sync::OnceLock;

use cptsim_models::ModelSummary;
use cptsim_traces::schedule::{parse_bit_range, ScheduleArgs};

/// A fuzz target's entry point: whether the input was accepted.
pub type Entry = fn(&[u8]) -> bool;

/// The fuzz targets by name, each with its entry point.
pub const TARGETS: [(&str, Entry); 12] = [
    ("onnx_import", onnx_import),
    ("trace_csv", trace_csv),
    ("trace_pb", trace_pb),
    ("accel_config", accel_config),
    ("idx", idx),
    ("cifar", cifar),
    ("schedule", schedule),
    ("sweep_plan", sweep_plan),
    ("npy", npy),
    ("checkpoint", checkpoint),
    ("sweep_cells", sweep_cells),
    ("plot_csv", plot_csv),
];

/// The model trace inputs are read against (LeNet-5, whose layer names the seed traces use).
pub fn trace_model() -> &'static Option<ModelSummary> {
    static MODEL: OnceLock<Option<ModelSummary>> = OnceLock::new();
    MODEL.get_or_init(|| cptsim_models::load_summary("zoo:lenet5", 1).ok())
}

/// ONNX bytes: decode, then import at batch 2.
pub fn onnx_import(data: &[u8]) -> bool {
    cptsim_models::onnx::decode(data, "fuzz.onnx")
        .and_then(|proto| cptsim_models::onnx::import_proto(&proto, "fuzz.onnx", 2))
        .is_ok()
}

/// A CSV trace of LeNet-5.
pub fn trace_csv(data: &[u8]) -> bool {
    let Some(model) = trace_model() else {
        return false;
    };
    cptsim_traces::csv_format::read_from(data, Path::new("fuzz.csv"), model, &mut |_| Ok(()))
        .is_ok()
}

/// A binary (`.pb`) trace of LeNet-5.
pub fn trace_pb(data: &[u8]) -> bool {
    let Some(model) = trace_model() else {
        return false;
    };
    cptsim_traces::binary::read_from(data, Path::new("fuzz.pb"), model, &mut |_| Ok(())).is_ok()
}

/// An accelerator TOML config (through `cptsim_accel::config::parse` only).
pub fn accel_config(data: &[u8]) -> bool {
    std::str::from_utf8(data)
        .map(|text| cptsim_accel::config::parse(text, "fuzz.toml").is_ok())
        .unwrap_or(false)
}

/// An IDX file (MNIST layout).
pub fn idx(data: &[u8]) -> bool {
    cptsim_nn::data::idx::parse_idx(Path::new("fuzz.idx"), data).is_ok()
}

/// A CIFAR-10 and a CIFAR-100 batch file.
pub fn cifar(data: &[u8]) -> bool {
    use cptsim_nn::data::CifarKind;
    let path = Path::new("fuzz.bin");
    let ten = cptsim_nn::data::cifar::parse_cifar(path, data, CifarKind::Cifar10).is_ok();
    let hundred = cptsim_nn::data::cifar::parse_cifar(path, data, CifarKind::Cifar100).is_ok();
    ten || hundred
}

/// Longest run a schedule input may ask for: synthesis of huge runs is slow by
/// nature, not what this target looks for.
const MAX_SCHEDULE_ITERS: u64 = 100_000;

/// A schedule request, one field per line: name, `--bits`, `--grad-bits`, iterations, cycles
/// (missing lines keep the defaults). `file:` schedules are refused: they would read arbitrary
/// paths. A built schedule is evaluated at its ends and summarised by spans.
pub fn schedule(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut lines = text.split('\n');
    let name = lines.next().unwrap_or_default();
    if name.trim_start().starts_with("file:") {
        return false;
    }
    let mut field = || lines.next().map(str::trim).filter(|l| !l.is_empty());
    let bits = field().map(|t| parse_bit_range("--bits", t));
    let grad_bits = field().map(|t| parse_bit_range("--grad-bits", t));
    let iters = field().map_or(Some(1_000), |t| t.parse::<u64>().ok());
    let cycles = field().map_or(Some(32), |t| t.parse::<u64>().ok());
    let (Some(iters), Some(cycles)) = (iters, cycles) else {
        return false;
    };
    let mut args = ScheduleArgs::new(name, iters.min(MAX_SCHEDULE_ITERS)).cycles(cycles);
    match bits {
        Some(Ok(b)) => args = args.bits(b),
        Some(Err(_)) => return false,
        None => {}
    }
    match grad_bits {
        Some(Ok(b)) => args = args.grad_bits(b),
        Some(Err(_)) => return false,
        None => {}
    }
    let Ok(schedule) = args.build() else {
        return false;
    };
    let last = schedule.iterations().saturating_sub(1);
    let _ = (schedule.at(0), schedule.at(last));
    let _ = schedule.spans().count();
    let _ = schedule.fw_histogram(0..schedule.iterations());
    true
}

/// Most cells a `sweep_plan` input has read into typed plans and validated (a plan may
/// legitimately have up to 10^5 cells, whose checking takes seconds): larger plans are parsed and
/// expanded only.
const MAX_CHECKED_CELLS: usize = 256;

/// A `cptsim sweep` plan (TOML): parsed, expanded into cells and checked as `sweep run --dry-run`
/// does (keys against the keys of `run` / `train`, every cell read into its typed plans and
/// validated), short of loading its models and accelerators (those would read any path).
pub fn sweep_plan(data: &[u8]) -> bool {
    use cptsim::sweep_plan::{expand, Plan, Study};
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(plan) = Plan::parse(text) else {
        return false;
    };
    match expand(&plan) {
        Ok(cells) if cells.len() <= MAX_CHECKED_CELLS => {}
        _ => return false,
    }
    Study::check(plan, "/fuzz-sweep".into()).is_ok()
}

/// A `.npy` file (`forward --input`).
pub fn npy(data: &[u8]) -> bool {
    cptsim_nn::npy::parse(Path::new("fuzz.npy"), data).is_ok()
}

/// A checkpoint, read as it is and again with its trailer recomputed (so that mutations reach
/// the header and the semantic checks behind the checksum).
pub fn checkpoint(data: &[u8]) -> bool {
    use cptsim_train::checkpoint::{parse, trailer};
    let path = Path::new("fuzz-checkpoint.bin");
    let as_is = parse(path, data).is_ok();
    let content = match data.len().checked_sub(12) {
        Some(n) if n >= 16 => &data[..n],
        _ => data,
    };
    let mut resealed = content.to_vec();
    resealed.extend_from_slice(&trailer(content));
    parse(path, &resealed).is_ok() || as_is
}

/// The files a cell directory holds, separated by NUL bytes in this order (a missing part leaves
/// its file out).
pub const CELL_FILES: [&str; 7] = [
    "inspect.json",
    "cost.json",
    "run/summary.json",
    "run/metrics.csv",
    "stderr.log",
    "error.txt",
    "run/checkpoint.bin",
];

/// The plan whose first cell the `sweep_cells` inputs fill: a training cell costed on two
/// accelerators.
const CELLS_PLAN: &str = r#"
name = "fuzz-cells"
[grid]
model = "zoo:lenet5"
bits = "3:8"
schedule = "cosine"
accel = "zc706,bitfusion"
[train]
data = "synthetic"
iters = 20
cycles = 2
"#;

/// A cell directory's files (see [`CELL_FILES`]), read as `sweep collect` reads a done cell's and
/// as `sweep status` reads any cell's.
pub fn sweep_cells(data: &[u8]) -> bool {
    use cptsim::sweep_plan::{cell_rows, print_status, Plan, Study};
    thread_local! {
        // The study and its directory, built once: checking a plan costs clap parses.
        static STUDY: Option<(tempfile::TempDir, Study)> = tempfile::tempdir().ok().and_then(|d| {
            let plan = Plan::parse(CELLS_PLAN).ok()?;
            let study = Study::check(plan, d.path().to_path_buf()).ok()?;
            Some((d, study))
        });
    }
    STUDY.with(|s| {
        let Some((_, study)) = s else {
            return false;
        };
        let Some(cell) = study.cells.first() else {
            return false;
        };
        let mut parts = data.split(|&b| b == 0);
        for name in CELL_FILES {
            let path = cell.dir.join(name);
            let _ = std::fs::remove_file(&path);
            let Some(part) = parts.next() else {
                continue;
            };
            let written = path
                .parent()
                .is_some_and(|p| std::fs::create_dir_all(p).is_ok())
                && std::fs::write(&path, part).is_ok();
            if !written {
                return false;
            }
        }
        let rows = cell_rows(cell).is_ok();
        let status = print_status(study, &mut std::io::sink()).is_ok();
        rows && status
    })
}

/// A CSV file `cptsim plot` reads: as a sweep's results table (Pareto and accumulator data,
/// and their SVGs when small), a training run's `metrics.csv` and a report's `*-layers.csv`.
/// Accepted when any of them takes it.
pub fn plot_csv(data: &[u8]) -> bool {
    use cptsim_plot::pareto::{pareto_of, XAxis, YAxis};
    let Ok(t) = cptsim_plot::table::Table::parse(data, Path::new("fuzz.csv")) else {
        return false;
    };
    let pareto = pareto_of(&t, XAxis::Gbitops, YAxis::Final, "schedule");
    if let Ok(p) = &pareto {
        // drawing is slow: only small tables, which reach the same code
        if p.points.len() <= 16 {
            let _ = cptsim_plot::render_svg(p, cptsim_plot::Size::default());
        }
    }
    let accumulators = cptsim_plot::accumulators::accumulators_of(&t, YAxis::Final);
    if let Ok(p) = &accumulators {
        if p.lines.iter().map(|l| l.points.len()).sum::<usize>() <= 16 {
            let _ = cptsim_plot::render_svg(p, cptsim_plot::Size::default());
        }
    }
    let metrics = cptsim_plot::curves::RunMetrics::of(&t, "fuzz".into());
    let layers = cptsim_plot::layers::LayerRows::of(&t);
    pareto.is_ok() || accumulators.is_ok() || metrics.is_ok() || layers.is_ok()
}
