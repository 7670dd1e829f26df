//! `cptsim run`: cost a training run in BitOPs, either synthesised from a precision schedule or
//! read from a trace file, against its static baseline (forward at B_max).

use std::io::Write;

use std::path::PathBuf;

use anyhow::{bail, Context};
use cptsim_accel::cost::run::Ranges;
use cptsim_accel::{Accounting, CostOptions, RunCoster, RunReport, RunSpec};
use cptsim_kernels::int::Accumulator;
use cptsim_models::atomic::Staged;
use cptsim_models::ModelSummary;
use cptsim_traces::schedule::{BitRange, Kind, Schedule, ScheduleArgs};
use cptsim_traces::{read_trace, synthesize, write_trace, QuantScope, TraceMeta};
use cptsim_train::plan::{AccountingKind, Convention, Range, ScopePreset};
use cptsim_train::CostPlan;

use super::accel_costs;
use super::accumulator_check;
use super::quant_scope::ScopeArgs;
use super::shared::{bit_range, ConventionArg, OutputFormat};
use crate::exit::Exit;

/// Arguments of `cptsim run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The model: `zoo:NAME` or an ONNX file.
    #[arg(long)]
    model: String,
    /// Precision schedule: static, cosine (alias cpt), cosine-triangular, linear,
    /// linear-triangular, exp, exp-triangular-v, exp-triangular-h, demon, demon-triangular-v,
    /// demon-triangular-h, cosine-anneal, progressive, pfq:ITER,ITER,…, file:PATH.
    #[arg(long, default_value = "cosine", conflicts_with = "trace")]
    schedule: String,
    /// Forward bits MIN:MAX (one number = static) [default: 3:8].
    #[arg(long)]
    bits: Option<String>,
    /// Backward (error) bits, a number or MIN:MAX to cycle them too [default: 8].
    #[arg(long)]
    grad_bits: Option<String>,
    /// Cycles of a cyclic schedule (segments for the triangular forms).
    #[arg(long, default_value_t = 32, conflicts_with = "trace")]
    cycles: u64,
    /// Training iterations [default: 64000, the papers' CIFAR run; a zoo sequence model's own].
    #[arg(long, conflicts_with = "trace")]
    iters: Option<u64>,
    /// Samples per iteration (a `--trace` file carries its own) [default: 128; a zoo sequence
    /// model's own].
    #[arg(long, conflicts_with = "trace")]
    batch: Option<u64>,
    /// Tokens per sample of a sequence model [default: a zoo model's own; required for an ONNX
    /// file with a symbolic sequence axis].
    #[arg(long)]
    seq_len: Option<usize>,
    /// Vocabulary of a zoo language model: the token count of the corpus a `train --data
    /// text:|ptb:|wikitext:` run fitted it to (its summary.json `vocab`) [default: the model's].
    #[arg(long)]
    vocab: Option<usize>,
    /// Cost rule: `paper` (every operation at the scheduled bits, as the papers count) or
    /// `hardware` (fp32 layers at 32 bits, BN apart); see docs/src/methods/cost.md.
    #[arg(long, value_enum, default_value_t = AccountingArg::Paper)]
    accounting: AccountingArg,
    /// Which layers follow the schedule: all (the papers' accounting), cifar (FC fp32), imagenet
    /// (stem, shortcuts, FC fp32), family (the default for the model's input size, as `train`
    /// does; see docs/src/guide/shared-flags.md); the --quantize-* flags override single roles.
    #[arg(long, value_enum, default_value_t = PolicyArg::All, conflicts_with = "trace")]
    policy: PolicyArg,
    /// Single roles in or out of scope, over --policy.
    #[command(flatten)]
    scope: ScopeArgs,
    /// Whose reference code cyclic schedules follow to the bit: cpt (N whole cycles over T, = CPT's P = T/N
    /// when N divides T) or wk (P = floor(T/N) + 1, the last cycle cut short).
    #[arg(long, value_enum, default_value_t = ConventionArg::Cpt, conflicts_with = "trace")]
    convention: ConventionArg,
    /// Also write the synthesised trace to FILE.csv or FILE.pb.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    save_trace: Option<PathBuf>,
    /// Cost the trace in FILE (.csv or .pb) instead of synthesising one. Its static baseline
    /// runs the trace's quantized layers at the maximum bits and keeps the layers it ran at fp32
    /// (a DFQ trace's stem and projection shortcuts) at fp32: same scope, static precision.
    /// To compare methods of different scope, cost each trace and a common static trace.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Cost the run and its static baseline on these accelerators: comma-separated built-in
    /// names (`cptsim accel list`) or TOML config paths; `none` for BitOPs alone
    /// [`run` default: zc706,bitfusion,stripes].
    #[arg(long, value_delimiter = ',', num_args = 1.., value_name = "NAME|PATH")]
    pub(crate) accel: Vec<String>,
    /// The accumulator of the integer forward GEMMs of the run being costed (`BITS`,
    /// `BITS:wrap`, `BITS:saturate` or `exact`, as `train --accumulator`); an accelerator with a
    /// narrower or wider one is flagged.
    #[arg(long, value_name = "ACC")]
    accumulator: Option<String>,
    /// Write per-layer × GEMM and per-epoch CSVs for each accelerator, and index.html, into DIR
    /// (columns in docs/src/formats/reports.md).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Iterations per epoch for the per-epoch accelerator report (CIFAR, batch 128: 391).
    #[arg(long, default_value_t = 391)]
    epoch_iters: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
}

/// `--accounting` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum AccountingArg {
    Paper,
    Hardware,
}

/// `--policy` values: presets of the quantization scope.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum PolicyArg {
    All,
    Cifar,
    Imagenet,
    Family,
}

impl RunArgs {
    /// The quantization scope of a synthesised run: `--policy`'s preset with the roles the
    /// `--quantize-*` flags set.
    fn quant_scope(&self) -> QuantScope {
        let base = match self.policy {
            PolicyArg::All => QuantScope::ALL,
            PolicyArg::Cifar => QuantScope::CPT_CIFAR,
            PolicyArg::Imagenet => QuantScope::CPT_IMAGENET,
            PolicyArg::Family => QuantScope::default(),
        };
        self.scope.scope().or(base)
    }
}

impl RunArgs {
    /// The cost plan these flags say (what `cptsim sweep` builds for a cell); it validates
    /// itself.
    pub(crate) fn plan(&self) -> anyhow::Result<CostPlan> {
        let synthesised = self.trace.is_none();
        let range = |flag, text: &Option<String>| {
            text.as_deref()
                .map(|t| Range::parse_checked(flag, t).map_err(anyhow::Error::msg))
                .transpose()
        };
        Ok(CostPlan {
            model: self.model.clone(),
            schedule: synthesised.then(|| self.schedule.clone()),
            bits: range("--bits", &self.bits)?,
            grad_bits: range("--grad-bits", &self.grad_bits)?,
            cycles: synthesised.then_some(self.cycles),
            iters: self.iters,
            batch: self.batch,
            seq_len: self.seq_len,
            vocab: self.vocab,
            accounting: match self.accounting {
                AccountingArg::Paper => AccountingKind::Paper,
                AccountingArg::Hardware => AccountingKind::Hardware,
            },
            policy: synthesised.then_some(match self.policy {
                PolicyArg::All => ScopePreset::All,
                PolicyArg::Cifar => ScopePreset::Cifar,
                PolicyArg::Imagenet => ScopePreset::Imagenet,
                PolicyArg::Family => ScopePreset::Family,
            }),
            quantize_first: self.scope.quantize_first,
            quantize_last: self.scope.quantize_last,
            quantize_shortcut: self.scope.quantize_shortcut,
            quantize_depthwise: self.scope.quantize_depthwise,
            convention: synthesised.then_some(match self.convention {
                ConventionArg::Cpt => Convention::Cpt,
                ConventionArg::Wk => Convention::Wk,
            }),
            save_trace: self.save_trace.clone(),
            trace: self.trace.clone(),
            accel: self.accel.clone(),
            report: self.report.clone(),
            epoch_iters: self.epoch_iters,
        })
    }
}

/// Runs the subcommand.
pub fn run(mut args: RunArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    // --save-trace and --report are one unit: written into staging directories beside them and
    // renamed into place only when everything succeeded.
    let mut staged = Staged::new();
    let (trace_target, report_target) = (args.save_trace.clone(), args.report.clone());
    if let Some(path) = &trace_target {
        let staging = staged.file(path).context("--save-trace")?;
        args.save_trace = Some(staging);
    }
    if let Some(dir) = &report_target {
        let staging = staged.dir(dir, &[]).context("--report")?;
        args.report = Some(staging);
    }
    let accumulator = args
        .accumulator
        .as_deref()
        .map(|a| {
            a.parse::<Accumulator>()
                .map_err(|e| Exit::Usage.error(format!("--accumulator {a}: {e}")))
        })
        .transpose()?;
    let unstage = |e| crate::exit::relabel(e, |t| staged.unstage(t));
    let (report, model) = evaluate(&args).map_err(unstage)?;
    if let Some(dir) = &args.report {
        super::plot::write_run_index(dir, &report).map_err(unstage)?;
    }
    staged.commit().context("--save-trace/--report")?;
    for path in report_target.iter().map(|d| d.join("index.html")) {
        eprintln!("wrote {}", path.display());
    }
    let mismatches = match accumulator {
        Some(acc) => {
            let accels = accel_costs::load_all(&accel_costs::run_accels(&args.accel)?)?;
            accumulator_check::mismatches(acc, &accels)
        }
        None => Vec::new(),
    };
    accumulator_check::warn(&mismatches);
    match wants_json(&args)? {
        true => {
            let mut json = serde_json::to_value(&report)?;
            if let (false, Some(map)) = (mismatches.is_empty(), json.as_object_mut()) {
                map.insert(
                    "accumulator_mismatches".into(),
                    serde_json::to_value(&mismatches)?,
                );
            }
            writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?
        }
        false => print_table(&report, &model, out)?,
    }
    Ok(())
}

impl RunArgs {
    /// `--iters`, else the model's paper default, else 64 000 ([`CostPlan::lengths`]).
    fn iters(&self) -> u64 {
        self.iters
            .unwrap_or_else(|| CostPlan::lengths(&self.model).0)
    }

    /// `--batch`, else the model's paper default, else 128.
    fn batch(&self) -> u64 {
        self.batch
            .unwrap_or_else(|| CostPlan::lengths(&self.model).1)
    }
}

/// Whether `--format json` was asked for (CSV is an error).
pub(crate) fn wants_json(args: &RunArgs) -> anyhow::Result<bool> {
    args.format.json_or_table("run")
}

/// Costs the run the flags describe: BitOPs, and each `--accel` accelerator; with `--report`,
/// writes each accelerator's per-layer × GEMM and per-epoch CSVs and returns the report without
/// those rows.
pub(crate) fn evaluate(args: &RunArgs) -> anyhow::Result<(RunReport, ModelSummary)> {
    args.plan()?.validate()?;
    let batch = usize::try_from(args.batch()).context("--batch: too large")?;
    // the default three without --accel, none with `--accel none`
    let accels = accel_costs::load_all(&accel_costs::run_accels(&args.accel)?)?;
    // Check the schedule flags before the (slower) model load.
    let schedule = match &args.trace {
        Some(_) => None,
        None => Some(build_schedule(args)?),
    };
    let model = match args.vocab {
        Some(v) => cptsim_models::load_lm_graph(&args.model, batch, args.seq_len, v),
        None => cptsim_models::load_shapes(&args.model, batch, args.seq_len),
    }
    .with_context(|| format!("--model {}", args.model))?
    .summary();
    let mut coster = RunCoster::new(&model, !accels.is_empty());
    let spec = match (&args.trace, &schedule) {
        (Some(path), _) => read_trace_file(args, &model, path, &mut coster)?,
        (None, Some(schedule)) => synthesise(args, &model, schedule, &mut coster)?,
        (None, None) => bail!("--schedule: no schedule"),
    };
    let options = CostOptions {
        accounting: accounting(args),
        breakdown_epoch_iters: args.report.is_some().then_some(args.epoch_iters),
    };
    let report = coster
        .finish(&spec, &accels, &options)
        .map_err(|e| accel_costs::run_error(e, &spec, args.epoch_iters))?;
    if let Some(dir) = &args.report {
        accel_costs::write_reports(dir, &report)?;
    }
    Ok((report.without_breakdowns(), model))
}

fn accounting(args: &RunArgs) -> Accounting {
    match args.accounting {
        AccountingArg::Paper => Accounting::Paper,
        AccountingArg::Hardware => Accounting::Hardware,
    }
}

/// Parses and validates the schedule flags.
fn build_schedule(args: &RunArgs) -> anyhow::Result<Schedule> {
    let fw = bit_range("--bits", args.bits.as_deref(), "3:8")?;
    let bw = bit_range("--grad-bits", args.grad_bits.as_deref(), "8")?;
    Ok(ScheduleArgs::new(args.schedule.as_str(), args.iters())
        .cycles(args.cycles)
        .bits(fw)
        .grad_bits(bw)
        .convention(args.convention.rule())
        .build()?)
}

/// Synthesises the schedule's trace (writing it if asked) into `coster` in one pass.
fn synthesise(
    args: &RunArgs,
    model: &ModelSummary,
    schedule: &Schedule,
    coster: &mut RunCoster<'_>,
) -> anyhow::Result<RunSpec> {
    let (fw, bw) = reported_ranges(args, schedule);
    let rows = synthesize(schedule, model, &args.quant_scope(), args.batch());
    let mut written = None;
    match &args.save_trace {
        Some(path) => {
            let meta = TraceMeta::for_model(model, args.batch(), schedule.iterations());
            let mut failure = None;
            let counted = rows.inspect(|r| {
                if let Err(e) = coster.add(r) {
                    failure.get_or_insert(e);
                }
            });
            written = Some(write_trace(path, &meta, counted).context("--save-trace")?);
            if let Some(e) = failure {
                return Err(e.into());
            }
        }
        None => rows.into_iter().try_for_each(|r| coster.add(&r))?,
    }
    Ok(RunSpec {
        schedule: schedule.name().to_string(),
        iterations: schedule.iterations(),
        batch: args.batch(),
        ranges: Ranges::Given { fw, bw },
        trace_rows: written,
    })
}

/// The bit ranges a synthesised run reports and takes its baseline from: a schedule file's own
/// ranges unless `--bits` / `--grad-bits` were given (as for `--trace`), else the flags'.
fn reported_ranges(args: &RunArgs, schedule: &Schedule) -> (BitRange, BitRange) {
    let (fw, bw) = (schedule.fw_range(), schedule.bw_range());
    match schedule.kind() {
        Kind::Steps(steps) if schedule.name().starts_with("file:") => {
            let (file_fw, file_bw) = steps.bit_ranges();
            (
                if args.bits.is_some() { fw } else { file_fw },
                if args.grad_bits.is_some() {
                    bw
                } else {
                    file_bw
                },
            )
        }
        _ => (fw, bw),
    }
}

/// Reads a trace file into `coster`; the baseline is `--bits`/`--grad-bits` maxima if given,
/// else the trace's.
fn read_trace_file(
    args: &RunArgs,
    model: &ModelSummary,
    path: &std::path::Path,
    coster: &mut RunCoster<'_>,
) -> anyhow::Result<RunSpec> {
    let mut rows = 0u64;
    let meta = read_trace(path, model, |r| {
        rows += 1;
        coster.add(r).map_err(|e| e.to_string())
    })
    .context("--trace")?;
    let range = |flag: &'static str, text: &Option<String>| match text {
        Some(text) => bit_range(flag, Some(text), "").map(Some),
        None => Ok(None),
    };
    Ok(RunSpec {
        schedule: format!("trace:{}", path.display()),
        iterations: meta.iterations,
        batch: meta.batch,
        ranges: Ranges::FromTrace {
            fw: range("--bits", &args.bits)?,
            bw: range("--grad-bits", &args.grad_bits)?,
        },
        trace_rows: Some(rows),
    })
}

fn print_table(r: &RunReport, model: &ModelSummary, out: &mut dyn Write) -> std::io::Result<()> {
    let grad = r.grad_bits;
    writeln!(
        out,
        "model       {} ({} conv/linear layers)",
        r.model,
        model.layers.len()
    )?;
    writeln!(
        out,
        "schedule    {}  FW {}:{}  BW {}",
        r.schedule, r.bits[0], r.bits[1], grad
    )?;
    writeln!(
        out,
        "run         {} iterations x batch {}",
        r.iterations, r.batch
    )?;
    writeln!(out, "accounting  {}", r.accounting.name())?;
    writeln!(out, "GBitOPs     {:.4e}", r.gbitops)?;
    writeln!(
        out,
        "static      {:.4e}  (FW {}, BW {})",
        r.static_gbitops,
        r.baseline().w,
        r.baseline().g
    )?;
    writeln!(out, "reduction   {:.2} %", 100.0 * r.reduction)?;
    if let Some(bn) = r.bn_gops {
        writeln!(out, "BN (fp32)   {bn:.4e} GOPs, not included above")?;
    }
    if let Some(n) = r.trace_rows {
        writeln!(out, "trace rows  {n}")?;
    }
    if !r.accelerators.is_empty() {
        writeln!(out)?;
        accel_costs::print_table(&r.accelerators, out)?;
    }
    Ok(())
}
