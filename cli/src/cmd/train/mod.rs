//! `cptsim train`: quantized training of an imported model on real or synthetic data under a
//! precision schedule, PFQ or PRT; writes the trace, metrics, checkpoint and summary into `--out`
//! and resumes exactly from a checkpoint with `--resume`.

use std::io::Write;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use cptsim_models::atomic::Staged;
use cptsim_nn::build::{build_network, BuildOptions, Init};
use cptsim_nn::collapse::CollapseDetector;
use cptsim_nn::quant::QuantMethod;
use cptsim_nn::SimError;
use cptsim_traces::Bits;
use cptsim_train::{checkpoint, TrainNet, Trainer};
use serde::{Deserialize, Serialize};

use crate::exit::{relabel, Exit, Stopped};
use args::InitArg;
pub use args::TrainArgs;
pub use conflicts::given_flags;
pub(crate) use output::parse_progress;
use output::{Progress, Summary};
use plan::{TrainPlan, PLAN_VERSION};

mod args;
mod conflicts;
mod dfq;
mod ldp;
mod output;
mod plan;
mod policies;
mod setup;

/// The checkpoint a run writes into its `--out` (and `sweep status` reads).
pub(crate) const CHECKPOINT: &str = "checkpoint.bin";

/// What the checkpoint keeps besides the trainer state.
#[derive(Serialize, Deserialize)]
struct Saved {
    plan: TrainPlan,
    seconds: f64,
}

/// The plan and earlier training time stored in the checkpoint `path`'s `settings`.
fn saved_plan(path: &Path, settings: &serde_json::Value) -> anyhow::Result<Saved> {
    let Some(plan) = settings.get("plan") else {
        if settings.get("args").is_some() {
            bail!(
                "--resume: {}: written by an older cptsim (its settings are the command-line flags \
                 of before the train plan, which this version no longer reads); rerun the training",
                path.display()
            );
        }
        bail!(
            "--resume: {}: no train plan in the checkpoint",
            path.display()
        );
    };
    match plan.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(PLAN_VERSION) => {}
        Some(v) if v < u64::from(PLAN_VERSION) => bail!(
            "--resume: {}: written by an older cptsim (train plan version {v}, this one reads {PLAN_VERSION})",
            path.display()
        ),
        v => bail!(
            "--resume: {}: train plan version {v:?} (this cptsim reads {PLAN_VERSION}; written by a newer cptsim?)",
            path.display()
        ),
    }
    let saved: Saved = serde_json::from_value(settings.clone())
        .with_context(|| format!("--resume: {}: settings unreadable", path.display()))?;
    saved
        .plan
        .validate()
        .with_context(|| format!("--resume: {}", path.display()))?;
    Ok(saved)
}

/// Where the outputs go, when to stop and how to print: the options of one invocation, not part
/// of the plan.
struct Invocation {
    out: Option<PathBuf>,
    stop_at: Option<u64>,
    /// Time between checkpoints besides those at evaluations (`None`: only those).
    checkpoint_every: Option<std::time::Duration>,
    json: bool,
}

/// Runs the subcommand.
pub fn run(args: TrainArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    crate::malloc::keep_large_blocks();
    let mut seconds_before = 0.0;
    let minutes = args.checkpoint_minutes;
    if !(minutes.is_finite() && (0.0..=1e6).contains(&minutes)) {
        bail!("--checkpoint-minutes {minutes}: expected minutes ≥ 0 (0: only at evaluations)");
    }
    let mut inv = Invocation {
        out: args.out.clone(),
        stop_at: args.stop_at,
        checkpoint_every: (minutes > 0.0)
            .then(|| std::time::Duration::from_secs_f64(minutes * 60.0)),
        json: args.format.json_or_table("train")?,
    };
    let resume_dir = args.resume.clone();
    let (plan, resume) = match args.resume.clone() {
        Some(dir) => {
            let path = dir.join(CHECKPOINT);
            if !path.is_file() {
                bail!(
                    "--resume {}: no {CHECKPOINT} in it (a directory that `train --out` wrote?)",
                    dir.display()
                );
            }
            let ck = checkpoint::load(&path).context("--resume")?;
            let saved = saved_plan(&path, &ck.header.settings)?;
            conflicts::check(&args, &saved.plan, &path)?;
            inv.out = Some(inv.out.unwrap_or(dir));
            seconds_before = saved.seconds;
            (saved.plan, Some(ck))
        }
        None => (args.resolve()?, None),
    };
    let model_spec = plan.model.clone();
    // Where this invocation writes: --out itself, or — when --out holds an earlier run's outputs
    // that this run does not continue — a staging directory renamed into it at the end, so a
    // failing or interrupted run leaves those outputs as they were.
    let mut staged = Staged::new();
    let work = match &inv.out {
        Some(dir) if resume_dir.as_ref() != Some(dir) && output::has_outputs(dir) => {
            Some(staged.dir(dir, &output::FILES).context("--out")?)
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("--out {}", dir.display()))?;
            Some(dir.clone())
        }
        None => None,
    };
    let is_staged = work != inv.out;
    let corpus = setup::load_corpus(&plan)?;
    let graph = match &corpus {
        Some(c) => setup::load_lm(&plan, c)?,
        None => setup::load_model(&plan)?,
    };
    if graph.bn_folded {
        eprintln!("{}", cptsim_models::onnx::BN_FOLDED_NOTE);
    }
    let opts = BuildOptions {
        init: match plan.init {
            InitArg::Seed => Init::Seeded(plan.seed),
            InitArg::Model => Init::FromModel,
        },
        method: plan.quantizer.method().unwrap_or(QuantMethod::Sbm),
        noise_seed: plan.seed,
        scope: plan.scope,
    };
    let mut network =
        build_network(&graph, &opts).with_context(|| format!("--model {model_spec}"))?;
    network.use_arithmetic(plan.arith()?);
    let summary = network.summary().clone();
    let mut net =
        TrainNet::from_network(network).with_context(|| format!("--model {model_spec}"))?;
    setup::fix_depthwise(&plan, &summary, &mut net);
    let gate = dfq::build(&plan, &graph, &opts, &summary, &mut net)?;
    let text = match corpus {
        Some(c) => Some(setup::text_data(&plan, c, &net)?),
        None => None,
    };
    let data = match &text {
        Some(_) => None,
        None => {
            let mut d = setup::load_data(&plan, net.input, net.classes)?;
            setup::check_labels(&plan, &mut d, net.classes)?;
            Some(d)
        }
    };
    // An epoch of text is its whole windows.
    let train_len = match (&text, &data) {
        (Some(t), _) => t.windows(&t.train) * plan.batch,
        (None, d) => d.as_ref().map_or(0, |d| d.train.len()),
    };
    let iterations = setup::iterations(&plan, train_len)?;
    let (policy, fw, bw) = policies::build(&plan, iterations, &net, &summary, gate)?;
    let config = setup::config(&plan, iterations, fw, bw);
    let mut collapse = CollapseDetector::new(net.classes, CollapseDetector::DEFAULT_WINDOW)
        .with_context(|| format!("--model {model_spec}"))?;
    // Whether the run collapsed at some evaluation (warned once; summary.json `collapsed`).
    let mut collapsed = false;
    let mut tr = match (&text, &data) {
        (Some(t), _) => Trainer::new_text(net, t, config, policy)?,
        (None, Some(d)) => Trainer::new(net, d, config, policy)?,
        (None, None) => bail!("--data {}: nothing loaded", plan.data),
    };
    if let Some(a) = tr.adaptation().filter(|a| a.is_needed()) {
        eprintln!("{}", a.describe());
    }
    if let Some(ck) = resume {
        ck.restore(&mut tr).context("--resume")?;
        eprintln!("resumed at iteration {}/{iterations}", tr.state.iteration);
        for e in &tr.state.evals {
            if collapse.observe(e.test_loss, e.test_acc).is_some() {
                collapsed = true;
            }
        }
    }
    let stop = inv.stop_at.unwrap_or(iterations).min(iterations);
    let mut progress = Progress::new(tr.state.iteration, iterations);
    let out = inv.out.clone();
    let save = |tr: &mut Trainer<'_>, progress: &Progress| -> anyhow::Result<()> {
        let Some(dir) = &work else { return Ok(()) };
        let saved = Saved {
            plan: plan.clone(),
            seconds: seconds_before + progress.seconds(),
        };
        checkpoint::save(&dir.join(CHECKPOINT), tr, serde_json::to_value(saved)?)?;
        let rows = tr.rows();
        output::write_traces(dir, &summary, plan.batch as u64, tr.state.iteration, &rows)?;
        ldp::write_plot(dir, tr, &summary, plan.batch as u64, &rows)?;
        tr.policy
            .write_artefacts(dir, tr.state.iteration)
            .with_context(|| format!("--out {}", dir.display()))?;
        output::write_metrics(dir, &tr.state.evals)
    };
    // Writing straight into --out (a new or resumed run), Ctrl-C / SIGTERM checkpoint the
    // iteration reached instead of losing the work since the last evaluation (a Slurm job at
    // its time limit, a sweep stopped by hand); a staged run is simply discarded.
    let _deferred = (work.is_some() && !is_staged).then(crate::interrupt::defer);
    if _deferred.is_some() {
        // An evaluation stops between batches too (a large model's takes minutes).
        tr.stop_when(crate::interrupt::requested);
    }
    let interrupted = |tr: &mut Trainer<'_>, progress: &Progress| -> anyhow::Error {
        if let Err(e) = save(tr, progress) {
            return e;
        }
        Stopped {
            exit: Exit::Interrupted,
            message: format!(
                "interrupted at iteration {}/{iterations}{}: checkpoint written; continue with \
                 --resume {}",
                tr.state.iteration,
                match tr.state.pending {
                    Some(_) => " during its evaluation",
                    None => "",
                },
                out.as_deref()
                    .map_or("DIR".into(), |d| d.display().to_string())
            ),
        }
        .into()
    };
    match tr.finish_evaluation() {
        Ok(Some(e)) => {
            collapsed |= collapse.observe(e.test_loss, e.test_acc).is_some();
            save(&mut tr, &progress)?;
        }
        Ok(None) => {}
        Err(SimError::Interrupted { .. }) => return Err(interrupted(&mut tr, &progress)),
        Err(e) => return Err(e.into()),
    }
    // Between evaluations, a checkpoint every --checkpoint-minutes (not for a staged run, whose
    // outputs only count once it completes).
    let every = inv.checkpoint_every.filter(|_| !is_staged);
    let mut last_save = std::time::Instant::now();
    while tr.state.iteration < stop {
        if crate::interrupt::requested() {
            return Err(interrupted(&mut tr, &progress));
        }
        let report = match tr.step() {
            Ok(r) => r,
            Err(SimError::Interrupted { .. }) => return Err(interrupted(&mut tr, &progress)),
            Err(e @ SimError::Diverged { .. }) => {
                let kept = match (&out, tr.state.evals.last()) {
                    (Some(dir), _) if is_staged => format!(
                        "; {} keeps its earlier outputs (this run's were discarded)",
                        dir.display()
                    ),
                    (Some(dir), Some(last)) => format!(
                        "; the last good checkpoint (iteration {}) is {}",
                        last.iteration,
                        dir.join(CHECKPOINT).display()
                    ),
                    (Some(_), None) => "; no checkpoint was written yet".into(),
                    (None, _) => "; no --out, so no checkpoint".into(),
                };
                return Err(Stopped {
                    exit: Exit::Diverged,
                    message: format!("{e}: stopped{kept} (try a lower --lr or higher --bits)"),
                }
                .into());
            }
            Err(e) => return Err(e.into()),
        };
        for note in &report.notes {
            eprintln!("warning: {note}");
        }
        progress.step(&report);
        if report.eval.is_none() && every.is_some_and(|d| last_save.elapsed() >= d) {
            save(&mut tr, &progress)?;
            last_save = std::time::Instant::now();
        }
        if let Some(e) = &report.eval {
            save(&mut tr, &progress).map_err(|e| relabel(e, |t| staged.unstage(t)))?;
            last_save = std::time::Instant::now();
            if let (Some(c), false) = (collapse.observe(e.test_loss, e.test_acc), collapsed) {
                collapsed = true;
                if plan.stop_on_collapse {
                    return Err(Stopped {
                        exit: Exit::Collapsed,
                        message: format!(
                            "training collapsed at iteration {}: {c}; stopped (--stop-on-collapse), \
                             {}",
                            e.iteration,
                            match is_staged {
                                true => "--out keeps its earlier outputs (this run's were discarded)",
                                false => "outputs kept",
                            }
                        ),
                    }
                    .into());
                }
                eprintln!(
                    "warning: training collapsed at iteration {}: {c}",
                    e.iteration
                );
            }
        }
    }
    if !tr.done() {
        save(&mut tr, &progress)?;
        staged.commit().context("--out")?;
        eprintln!(
            "stopped at iteration {stop}/{iterations} (--stop-at); continue with --resume {}",
            out.as_deref()
                .map_or("DIR".into(), |d| d.display().to_string())
        );
        return Ok(());
    }
    let rows = tr.rows();
    let (gbitops, static_gbitops) =
        output::cost(&summary, &rows, Bits::forward_backward(fw.max, bw.max))?;
    let cpu = progress.train_cpu_seconds();
    let secs = progress.seconds();
    let iterations_done = tr.state.iteration;
    let report = tr.policy.report(&mut tr.net, &rows, iterations_done);
    let last = tr.state.evals.last();
    let result = Summary {
        policy: plan.policy.name(),
        target: report.target,
        achieved: report.achieved,
        ldp: report.layers,
        final_test_acc: last.map_or(0.0, |e| e.test_acc),
        best_test_acc: tr.state.best_test_acc(),
        final_test_ppl: last.and_then(|e| e.test_ppl),
        best_test_ppl: tr.state.best_eval().and_then(|e| e.test_ppl),
        vocab: text.as_ref().map(|t| t.corpus.vocab.len()),
        seq_len: text.as_ref().map(|t| t.bptt),
        unigram_test_ppl: text.as_ref().map(|t| {
            let c = &t.corpus;
            cptsim_nn::data::text::unigram_perplexity(&c.train, &c.test, c.vocab.len())
        }),
        arithmetic: Some(plan.arith()?)
            .filter(|a| a.arithmetic != cptsim_nn::quant::arith::Arithmetic::Fp32)
            .map(|a| a.to_string()),
        eval_bits: plan.eval_bits.name(),
        final_eval_bits: last.map(|e| [e.fw, e.bw]),
        best_eval_bits: tr.state.best_eval().map(|e| [e.fw, e.bw]),
        best_iteration: tr.state.best_eval().map(|e| e.iteration),
        collapsed,
        gbitops,
        static_gbitops,
        iterations: iterations_done,
        seconds: seconds_before + secs,
        images_per_s: progress.images() as f64 / progress.train_seconds().max(1e-9),
        cpu_seconds: cpu,
        images_per_cpu_s: progress.images() as f64 / cpu.max(1e-9),
        load_average: cptsim_kernels::cputime::load_average_1min(),
        prt_bits: report.prt_bits,
        prt_diverged_bits: report.prt_diverged,
        pfq_turns: report.turns,
    };
    if let Some(dir) = &work {
        output::write_summary(dir, &result).map_err(|e| relabel(e, |t| staged.unstage(t)))?;
        let prov = cptsim_plot::report::Provenance::of_this_process(env!("CARGO_PKG_VERSION"));
        cptsim_plot::report::write_train_index(dir, &summary, &prov)
            .with_context(|| format!("--out {}", dir.display()))
            .map_err(|e| relabel(e, |t| staged.unstage(t)))?;
    }
    staged.commit().context("--out")?;
    print(
        stdout,
        &plan,
        inv.json,
        &result,
        fw.max,
        bw.max,
        out.as_deref(),
    )?;
    Ok(())
}

fn print(
    stdout: &mut dyn Write,
    plan: &TrainPlan,
    json: bool,
    s: &Summary,
    fw: u8,
    bw: u8,
    dir: Option<&Path>,
) -> anyhow::Result<()> {
    if json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(s)?)?;
        return Ok(());
    }
    writeln!(stdout, "model           {}", plan.model)?;
    writeln!(stdout, "schedule        {}", plan.schedule)?;
    if let Some(b) = s.prt_bits {
        writeln!(stdout, "PRT bound       B_min = {b} bits")?;
        if !s.prt_diverged_bits.is_empty() {
            writeln!(
                stdout,
                "PRT diverged    at {:?} bits (counted as too low)",
                s.prt_diverged_bits
            )?;
        }
    }
    if let Some(t) = &s.pfq_turns {
        writeln!(stdout, "PFQ turns       {t:?}")?;
    }
    if let (Some(t), Some(a), true) = (s.target, s.achieved, s.ldp.is_none()) {
        writeln!(stdout, "policy          {}", s.policy)?;
        writeln!(
            stdout,
            "cp target       {t:.3} %, achieved {a:.3} % (mean of the last 10 % of iterations)"
        )?;
    }
    if let Some(l) = &s.ldp {
        writeln!(stdout, "policy          ldp")?;
        writeln!(
            stdout,
            "LDP cost        target {:.3}  achieved {}  (C/T_static, last 10 % of iterations)",
            s.target.unwrap_or_default(),
            s.achieved.map_or("-".into(), |a| format!("{a:.3}"))
        )?;
        let bits: Vec<String> = l.final_bits.iter().map(|b| b.bits.to_string()).collect();
        writeln!(stdout, "final bits      {}", bits.join(" "))?;
        writeln!(
            stdout,
            "inference       {:.4} GBitOPs/image  (static {:.4}, Σ MAC·b²)",
            l.inference_gbitops, l.static_inference_gbitops
        )?;
    }
    writeln!(stdout, "iterations      {}", s.iterations)?;
    if let (Some(f), Some(b)) = (s.final_test_ppl, s.best_test_ppl) {
        writeln!(stdout, "final test ppl  {f:.2}")?;
        writeln!(stdout, "best test ppl   {b:.2}")?;
        if let Some(u) = s.unigram_test_ppl {
            writeln!(stdout, "unigram ppl     {u:.2}  (the baseline to beat)")?;
        }
        writeln!(
            stdout,
            "final token acc {:.2} %  (next-token accuracy)",
            100.0 * s.final_test_acc
        )?;
    } else {
        writeln!(stdout, "final test acc  {:.2} %", 100.0 * s.final_test_acc)?;
        writeln!(stdout, "best test acc   {:.2} %", 100.0 * s.best_test_acc)?;
    }
    writeln!(stdout, "GBitOPs         {:.4e}", s.gbitops)?;
    writeln!(
        stdout,
        "static          {:.4e}  (FW {fw}, BW {bw})",
        s.static_gbitops
    )?;
    writeln!(
        stdout,
        "time            {:.1} s, {:.0} img/s, {:.0} img per CPU-s",
        s.seconds, s.images_per_s, s.images_per_cpu_s
    )?;
    if let Some(d) = dir {
        writeln!(stdout, "outputs         {}", d.display())?;
    }
    Ok(())
}
