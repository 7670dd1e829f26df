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
pub const TARGETS: [(&str, Entry); 8] = [
    ("onnx_import", onnx_import),
    ("trace_csv", trace_csv),
    ("trace_pb", trace_pb),
    ("accel_config", accel_config),
    ("idx", idx),
    ("cifar", cifar),
    ("schedule", schedule),
    ("sweep_plan", sweep_plan),
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

/// Longest run a schedule input may ask for: synthesis of huge runs is a known slowness (issue
/// #13, the lead's part), not what this target looks for.
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

/// Most cells whose command lines a `sweep_plan` input has built and parsed (each costs a few clap
/// parses; a plan may legitimately have up to 10^5 cells, whose checking takes seconds): larger
/// plans are parsed and expanded only.
const MAX_CHECKED_CELLS: usize = 256;

/// A `cptsim sweep` plan (TOML): parsed, expanded into cells and checked as `sweep run --dry-run`
/// does (keys against the flags of `run` / `train`, every cell's command lines through the
/// binary's parser), short of loading its models and accelerators (those would read any path).
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
