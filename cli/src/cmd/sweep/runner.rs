//! Running a plan (`sweep run`), one of its cells (`sweep cell`) and collecting its table
//! (`sweep collect`).

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};

use super::cell::{self, Cell, Outcome};
use super::collect::{self, Written};
use super::executor::{local::Local, slurm::Slurm, Executor, Finished};
use super::study::{Study, PLAN_COPY};
use super::unplanned::{self, Unplanned};
use super::{dry_run, select, status, ExecutorKind, RunOptions};
use crate::exit::{Exit, Stopped};

/// `sweep run`: every chosen cell not done, then the table.
pub fn run_plan(args: &RunOptions, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.jobs == Some(0) {
        bail!("--jobs: at least 1");
    }
    let study = Study::load(&args.plan, args.out.as_deref())?;
    let only = select::Only::parse(&args.only, &study.cells)?;
    let selected: Vec<&Cell> = study.cells.iter().filter(|c| only.keeps(&c.spec)).collect();
    let chosen = if only.is_empty() {
        String::new()
    } else {
        format!(" ({} chosen by --only)", selected.len())
    };
    if args.dry_run {
        return Ok(dry_run::print(&study, &selected, &chosen, out)?);
    }
    let executor: Box<dyn Executor> = match args.executor {
        ExecutorKind::Local => Box::new(Local::new(args.jobs, args.threads)),
        ExecutorKind::Slurm => Box::new(Slurm::new(
            args.jobs,
            args.slurm_args.clone(),
            args.threads,
            args.wait,
        )?),
    };
    std::fs::create_dir_all(&study.dir)
        .with_context(|| format!("--out {}", study.dir.display()))?;
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("plan {}", args.plan.display()))?;
    cell::write_file(&study.dir.join(PLAN_COPY), &text)?;
    let pending: Vec<&Cell> = selected.iter().copied().filter(|c| !c.is_done()).collect();
    eprintln!(
        "sweep {}: {} cells{chosen}, {} to run, in {}",
        study.plan.name,
        study.cells.len(),
        pending.len(),
        study.dir.display()
    );
    let dropped = unplanned::done_cells(&study)?;
    if !dropped.is_empty() {
        eprintln!(
            "warning: {} done cell(s) in {} are not in this plan (it changed since they ran), \
             and results.csv leaves them out: {}",
            dropped.len(),
            study.dir.join("cells").display(),
            unplanned::list(&dropped)
        );
    }
    if !pending.is_empty() {
        if let Finished::Submitted(job) = executor.execute(&study, &pending)? {
            writeln!(out, "{job}")?;
            return Ok(());
        }
    }
    let written = write_table(&study, &dropped)?;
    if crate::interrupt::requested() {
        return Err(Stopped {
            exit: Exit::Interrupted,
            message: format!(
                "interrupted: the running cells stopped (training cells checkpointed the \
                 iteration they reached); rerun the same command to finish {}",
                study.dir.display()
            ),
        }
        .into());
    }
    writeln!(
        out,
        "{} rows: {}",
        written.rows,
        study.dir.join("results.csv").display()
    )?;
    finish(&study, &only, &selected)
}

/// The end of `sweep run` once the table is written: the report page when every cell is done,
/// else an error saying how many are not (or a note when the rest are outside `--only`).
fn finish(study: &Study, only: &select::Only, selected: &[&Cell]) -> anyhow::Result<()> {
    let [done, running, failed, waiting] = status::counts(study);
    let total = study.cells.len();
    if done == total {
        let prov = cptsim_plot::report::Provenance::of_this_process(env!("CARGO_PKG_VERSION"));
        cptsim_plot::report::write_sweep_index(&study.dir, "schedule", &prov)
            .with_context(|| format!("{}/index.html", study.dir.display()))?;
        return Ok(());
    }
    if !only.is_empty() && selected.iter().all(|c| c.is_done()) {
        eprintln!(
            "{} of {total} cells not done yet, all outside --only: rerun without it for the rest",
            total - done,
        );
        return Ok(());
    }
    bail!(
        "{} of {total} cells are not done ({failed} failed, {running} running elsewhere, \
         {waiting} not run); see `cptsim sweep status {}`",
        total - done,
        study.dir.display()
    )
}

/// Writes the table, warning when it has fewer rows than the one it replaces.
fn write_table(study: &Study, dropped: &[Unplanned]) -> anyhow::Result<Written> {
    let written = collect::write_results(study)?;
    if let Some(warning) = unplanned::fewer_rows(study, &written, dropped) {
        eprintln!("warning: {warning}");
    }
    Ok(written)
}

/// `sweep collect`: the table of the study's done cells. Done cells the plan no longer has
/// make it refuse (exit 3), leaving the table as it was, unless `drop_unplanned`.
pub fn collect(
    study: &Study,
    drop_unplanned: bool,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let dropped = unplanned::done_cells(study)?;
    if !dropped.is_empty() && !drop_unplanned {
        return Err(Stopped {
            exit: Exit::BadInput,
            message: format!(
                "{}: the plan no longer has {} done cell(s) in {} (it was edited after they \
                 ran): {}; results.csv is left as it was. Restore the plan, or pass \
                 --drop-unplanned to write the table without their rows",
                study.dir.join(PLAN_COPY).display(),
                dropped.len(),
                study.dir.join("cells").display(),
                unplanned::list(&dropped)
            ),
        }
        .into());
    }
    let written = write_table(study, &dropped)?;
    let csv = study.dir.join("results.csv");
    if json {
        let report = serde_json::json!({
            "rows": written.rows,
            "previous_rows": written.previous,
            "results_csv": csv,
            "results_json": study.dir.join("results.json"),
            "dropped": dropped,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        writeln!(out, "{} rows: {}", written.rows, csv.display())?;
    }
    Ok(())
}

/// `sweep cell`: cell `index` of the plan in `plan`, in the study directory `out`.
pub fn run_cell(plan: &Path, out: &Path, index: usize) -> anyhow::Result<()> {
    let study = Study::read(plan, Some(out))?;
    let Some(cell) = study.cells.get(index) else {
        bail!(
            "--index {index}: the plan has {} cells (0-{})",
            study.cells.len(),
            study.cells.len().saturating_sub(1)
        );
    };
    let id = &cell.id;
    // One line per step, not the children's progress lines (those are in the cell's log).
    let step = std::cell::RefCell::new(String::new());
    let report = |phase: &str| {
        let name = phase.split(':').next().unwrap_or(phase);
        if *step.borrow() != name {
            eprintln!("cell {id}: {name}");
            *step.borrow_mut() = name.to_string();
        }
    };
    match cell.execute(None, &report)? {
        Outcome::Ran => eprintln!("cell {id}: done"),
        Outcome::AlreadyDone => eprintln!("cell {id}: already done"),
        Outcome::Busy(owner) => eprintln!("cell {id}: running elsewhere ({owner})"),
    }
    Ok(())
}
