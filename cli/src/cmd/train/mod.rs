//! `cptsim train`: the flags become a [`TrainPlan`] (or, with `--resume DIR`, the checkpoint's
//! plan, checked against the flags given with it), the plan a [`Run`] of the train crate, the
//! command line its observer; the summary is printed at the end.

use std::io::Write;
use std::path::Path;

use cptsim_nn::quant::arith::Arithmetic;
use cptsim_train::run::{Summary, CHECKPOINT};
use cptsim_train::{Run, SavedRun, TrainPlan};

use crate::cmd::accumulator_check;

pub use args::{given_flags, TrainArgs};
pub(crate) use observer::parse_progress;

mod args;
mod cost;
mod observer;

/// Runs the subcommand.
pub fn run(args: TrainArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    crate::malloc::keep_large_blocks();
    let json = args.format.json_or_table("train")?;
    let request = args.to_plan()?;
    // A bad accelerator fails before the training, not after it.
    let accels = crate::cmd::accel_costs::load_all(&args.accel)?;
    let run = match &args.resume {
        Some(dir) => resume(dir, &request, &args.given)?,
        None => Run::new(&request)?,
    };
    let plan = run.plan().clone();
    let model = (!accels.is_empty()).then(|| run.model().clone());
    // Writing straight into --out (a new or resumed run), Ctrl-C / SIGTERM checkpoint the
    // iteration reached instead of losing the work since the last evaluation (a Slurm job at
    // its time limit, a sweep stopped by hand); a staged run is simply discarded.
    let _deferred = run.checkpoints_on_stop().then(crate::interrupt::defer);
    let result = run.execute(&mut observer::Cli::default())?;
    let Some(summary) = &result.summary else {
        return Ok(());
    };
    let costs = match &model {
        Some(model) => cost::on_accelerators(&plan, model, &result, &accels)?,
        None => Vec::new(),
    };
    let mismatches = match plan.arith() {
        Ok(a) if a.arithmetic == Arithmetic::Int => {
            accumulator_check::mismatches(a.forward, &accels)
        }
        _ => Vec::new(),
    };
    accumulator_check::warn(&mismatches);
    let document = cost::summary_json(summary, &costs, &mismatches)?;
    if let (false, Some(dir)) = (costs.is_empty(), &result.out) {
        cost::write_summary(dir, &document)?;
    }
    if json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&document)?)?;
        return Ok(());
    }
    let heading = [("model", plan.model), ("schedule", plan.schedule)];
    let bits = (result.baseline.w, result.baseline.g);
    print(stdout, &heading, summary, bits, result.out.as_deref())?;
    cost::print(&costs, stdout)?;
    Ok(())
}

/// The run checkpointed in `dir`, with the invocation flags of `request`; the other flags
/// `given` must agree with the checkpoint's plan.
fn resume(dir: &Path, request: &TrainPlan, given: &[String]) -> anyhow::Result<Run> {
    let mut saved = SavedRun::open(dir)?;
    let keys: Vec<&str> = given.iter().map(String::as_str).collect();
    saved
        .plan
        .check_resume(request, &keys, &dir.join(CHECKPOINT))?;
    saved.plan.out = request.out.clone();
    saved.plan.stop_at = request.stop_at;
    saved.plan.checkpoint_minutes = request.checkpoint_minutes;
    saved.plan.threads = request.threads;
    Ok(Run::resume(saved)?)
}

/// The summary as a table: `heading` rows, the policy's results, accuracy or perplexity, cost
/// against the static baseline at `(fw, bw)` bits, time, and where the outputs are.
fn print(
    stdout: &mut dyn Write,
    heading: &[(&str, String)],
    s: &Summary,
    (fw, bw): (u8, u8),
    dir: Option<&Path>,
) -> std::io::Result<()> {
    for (name, value) in heading {
        writeln!(stdout, "{name:<15} {value}")?;
    }
    print_policy(stdout, s)?;
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

/// The PRT bound, PFQ turns, and DFQ/FracTrain or LDP targets of the summary.
fn print_policy(stdout: &mut dyn Write, s: &Summary) -> std::io::Result<()> {
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
    Ok(())
}
