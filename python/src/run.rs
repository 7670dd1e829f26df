//! `cost`: a run's report, synthesised from a schedule or read from a trace, in BitOPs and on
//! accelerators — `cptsim_accel::cost`, as `cptsim run` computes it, with every accelerator's
//! per-layer × GEMM and per-epoch rows.

use std::path::Path;

use cptsim_accel::cost::run::Ranges;
use cptsim_accel::{Accounting, CostOptions, RunCoster, RunError, RunSpec, TraceCostError};
use cptsim_models::ModelSummary;
use cptsim_traces::schedule::{
    parse_bit_range, BitRange, Convention, Kind, Schedule, ScheduleArgs,
};
use cptsim_traces::{synthesize, QuantScope};
use pyo3::prelude::*;

use crate::errors::Failure;
use crate::inspect::load;
use crate::trace::{check_rows, Row};

/// A trace built in Python: its rows, iterations, batch, layer names and what names it.
type MemoryTrace = (Vec<Row>, u64, u64, Vec<String>, String);

/// The run's report as JSON (the document of `cptsim run --format json`), with each
/// accelerator's per-layer × GEMM and per-epoch rows unless `epoch_iters` is `None`.
#[pyfunction]
#[pyo3(signature = (
    model, schedule="cosine", bits=None, grad_bits=None, cycles=32, iters=None, batch=None,
    accel=Vec::new(), trace_path=None, trace=None, policy="all", accounting="paper",
    convention="cpt", epoch_iters=Some(391), seq_len=None,
))]
#[allow(clippy::too_many_arguments)]
pub fn cost_json(
    model: &str,
    schedule: &str,
    bits: Option<&str>,
    grad_bits: Option<&str>,
    cycles: u64,
    iters: Option<u64>,
    batch: Option<u64>,
    accel: Vec<(String, String)>,
    trace_path: Option<&str>,
    trace: Option<MemoryTrace>,
    policy: &str,
    accounting: &str,
    convention: &str,
    epoch_iters: Option<u64>,
    seq_len: Option<usize>,
) -> PyResult<String> {
    let seq = model
        .strip_prefix("zoo:")
        .and_then(cptsim_models::zoo::seq::entry);
    let (iters_given, batch_given) = (iters.is_some(), batch.is_some());
    let batch = batch.or(seq.map(|e| e.batch)).unwrap_or(128);
    let iters = iters.or(seq.map(|e| e.iters)).unwrap_or(64_000);
    if epoch_iters == Some(0) {
        return Err(Failure::usage("epoch_iters: an epoch needs at least 1 iteration").into());
    }
    let accounting = match accounting {
        "paper" => Accounting::Paper,
        "hardware" => Accounting::Hardware,
        a => return Err(Failure::usage(format!("accounting {a}: paper or hardware")).into()),
    };
    let from_trace = trace_path.is_some() || trace.is_some();
    if from_trace {
        let given = [
            ("iters", iters_given),
            ("batch", batch_given),
            ("cycles", cycles != 32),
            ("policy", policy != "all"),
            ("convention", convention != "cpt"),
        ];
        if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
            return Err(Failure::usage(format!(
                "{name}: a trace carries its own iterations, batch and scope"
            ))
            .into());
        }
    }
    let accels = crate::accel::load_all(&accel)?;
    let schedule = match from_trace {
        true => None,
        false => Some(build_schedule(
            schedule, bits, grad_bits, cycles, iters, convention,
        )?),
    };
    let model = load(model, batch, seq_len)?;
    let mut coster = RunCoster::new(&model, !accels.is_empty());
    let bits_of = |b: Option<&str>, name| b.map(|t| parse(name, t)).transpose();
    let ranges = Ranges::FromTrace {
        fw: bits_of(bits, "bits")?,
        bw: bits_of(grad_bits, "grad_bits")?,
    };
    let spec = match (trace_path, trace, &schedule) {
        (Some(path), _, _) => read_file(&model, path, ranges, &mut coster)?,
        (None, Some(t), _) => read_memory(&model, t, ranges, &mut coster)?,
        (None, None, Some(s)) => {
            synthesise(&model, s, bits, grad_bits, policy, batch, &mut coster)?
        }
        (None, None, None) => return Err(Failure::usage("schedule: no schedule").into()),
    };
    let options = CostOptions {
        accounting,
        breakdown_epoch_iters: epoch_iters,
    };
    let report = coster
        .finish(&spec, &accels, &options)
        .map_err(|e| run_failure(e, &spec, epoch_iters))?;
    serde_json::to_string(&report).map_err(|e| Failure::of("report", &e).into())
}

fn parse(name: &'static str, text: &str) -> Result<BitRange, Failure> {
    parse_bit_range(name, text).map_err(|e| Failure::of("", &e))
}

fn build_schedule(
    name: &str,
    bits: Option<&str>,
    grad_bits: Option<&str>,
    cycles: u64,
    iters: u64,
    convention: &str,
) -> Result<Schedule, Failure> {
    let rule = match convention {
        "cpt" => Convention::Cpt,
        "wk" => Convention::WolfeKyrillidis,
        c => return Err(Failure::usage(format!("convention {c}: cpt or wk"))),
    };
    ScheduleArgs::new(name, iters)
        .cycles(cycles)
        .bits(parse("bits", bits.unwrap_or("3:8"))?)
        .grad_bits(parse("grad_bits", grad_bits.unwrap_or("8"))?)
        .convention(rule)
        .build()
        .map_err(|e| Failure::of("", &e))
}

fn scope(policy: &str) -> Result<QuantScope, Failure> {
    Ok(match policy {
        "all" => QuantScope::ALL,
        "cifar" => QuantScope::CPT_CIFAR,
        "imagenet" => QuantScope::CPT_IMAGENET,
        "family" => QuantScope::default(),
        p => {
            return Err(Failure::usage(format!(
                "policy {p}: all, cifar, imagenet or family"
            )))
        }
    })
}

fn synthesise(
    model: &ModelSummary,
    schedule: &Schedule,
    bits: Option<&str>,
    grad_bits: Option<&str>,
    policy: &str,
    batch: u64,
    coster: &mut RunCoster<'_>,
) -> Result<RunSpec, Failure> {
    let (mut fw, mut bw) = (schedule.fw_range(), schedule.bw_range());
    // a schedule file's own ranges, unless bits were given
    if let Kind::Steps(steps) = schedule.kind() {
        if schedule.name().starts_with("file:") {
            let (file_fw, file_bw) = steps.bit_ranges();
            fw = if bits.is_some() { fw } else { file_fw };
            bw = if grad_bits.is_some() { bw } else { file_bw };
        }
    }
    for row in synthesize(schedule, model, &scope(policy)?, batch) {
        coster.add(&row).map_err(|e| Failure::of("schedule", &e))?;
    }
    Ok(RunSpec {
        schedule: schedule.name().to_string(),
        iterations: schedule.iterations(),
        batch,
        ranges: Ranges::Given { fw, bw },
        trace_rows: None,
    })
}

fn read_file(
    model: &ModelSummary,
    path: &str,
    ranges: Ranges,
    coster: &mut RunCoster<'_>,
) -> Result<RunSpec, Failure> {
    let mut rows = 0u64;
    let meta = cptsim_traces::read_trace(Path::new(path), model, |r| {
        rows += 1;
        coster.add(r).map_err(|e| e.to_string())
    })
    .map_err(|e| Failure::of("trace", &e))?;
    Ok(RunSpec {
        schedule: format!("trace:{path}"),
        iterations: meta.iterations,
        batch: meta.batch,
        ranges,
        trace_rows: Some(rows),
    })
}

fn read_memory(
    model: &ModelSummary,
    (rows, iterations, batch, names, label): MemoryTrace,
    ranges: Ranges,
    coster: &mut RunCoster<'_>,
) -> Result<RunSpec, Failure> {
    let model_names: Vec<&str> = model.layers.iter().map(|l| l.name.as_str()).collect();
    if names
        .iter()
        .map(String::as_str)
        .ne(model_names.iter().copied())
    {
        return Err(Failure {
            kind: crate::errors::Kind::BadInput,
            message: format!(
                "trace {label}: its layers are not model '{}''s ({} layers vs {})",
                model.name,
                names.len(),
                model_names.len()
            ),
        });
    }
    check_rows(model, &rows, &label, |r| {
        coster.add(r).map_err(|e| e.to_string())
    })?;
    Ok(RunSpec {
        schedule: format!("trace:{label}"),
        iterations,
        batch,
        ranges,
        trace_rows: Some(rows.len() as u64),
    })
}

/// The program's message for a run that cannot be costed: the argument at fault named.
fn run_failure(e: RunError, spec: &RunSpec, epoch_iters: Option<u64>) -> Failure {
    let context = match (&e, epoch_iters) {
        (RunError::Trace(TraceCostError::TooManyEpochs { .. }), Some(n)) => {
            format!("epoch_iters {n}")
        }
        (RunError::NoQuantizedRows, _) => spec.schedule.replacen("trace:", "trace ", 1),
        _ => String::new(),
    };
    Failure::of(&context, &e)
}
