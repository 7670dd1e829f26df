//! `cptsim compare`: one run (schedule or trace) on several accelerator configurations, one table
//! row per configuration.

use std::io::Write;

use anyhow::bail;
use serde_json::json;

use super::accel_costs;
use super::run::{evaluate, wants_json, RunArgs};

/// Arguments of `cptsim compare`: those of `cptsim run`, with `--accel` taking several values.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    run: RunArgs,
}

/// Runs the subcommand.
pub fn run(args: CompareArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.run.accel.is_empty() || args.run.accel.iter().any(|a| a == "none") {
        bail!("--accel: name at least one accelerator (built-in name or TOML path) to compare");
    }
    let (report, _) = evaluate(&args.run)?;
    if wants_json(&args.run)? {
        let v = json!({
            "model": report.model,
            "schedule": report.schedule,
            "accelerators": report.accelerators,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        writeln!(out, "model {}, schedule {}", report.model, report.schedule)?;
        accel_costs::print_table(&report.accelerators, out)?;
    }
    Ok(())
}
