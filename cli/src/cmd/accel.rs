//! `cptsim accel list` / `cptsim accel show NAME`: the built-in accelerator configurations.

use std::io::Write;

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use cptsim_accel::config;
use serde_json::json;

use super::shared::OutputFormat;

/// Arguments of `cptsim accel`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: AccelCommand,
}

#[derive(Subcommand, Debug)]
enum AccelCommand {
    /// List the built-in accelerators.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// Print an accelerator's TOML config (a built-in name or a path), to copy and edit.
    Show {
        /// Built-in name or TOML path.
        name: String,
    },
}

/// Runs `cptsim accel`.
pub fn run(a: Args, out: &mut dyn Write) -> Result<()> {
    match a.command {
        AccelCommand::List { format } => {
            if format.json_or_table("accel list")? {
                return list_json(out);
            }
            for name in config::builtin_names() {
                let c = config::load(name)?;
                let alias = if name != c.name {
                    format!(" (= {})", c.name)
                } else {
                    String::new()
                };
                let area = c
                    .area_overhead
                    .map(|a| format!(" [area +{:.0} %]", 100.0 * a))
                    .unwrap_or_default();
                writeln!(out, "{name:<24}{}{alias}{area}", c.description)?;
            }
        }
        AccelCommand::Show { name } => {
            let text = match config::builtin_text(&name) {
                Some(t) => t.to_string(),
                None => {
                    config::load(&name)?;
                    std::fs::read_to_string(&name).with_context(|| format!("cannot read {name}"))?
                }
            };
            write!(out, "{text}")?;
        }
    }
    Ok(())
}

/// `accel list --format json`: one object per built-in name, `alias_of` naming the configuration
/// an alias loads (`null` for the configurations themselves), `area_overhead` as a fraction.
fn list_json(out: &mut dyn Write) -> Result<()> {
    let entries = config::builtin_names()
        .into_iter()
        .map(|name| {
            let c = config::load(name)?;
            Ok(json!({
                "name": name,
                "alias_of": (name != c.name).then_some(&c.name),
                "description": c.description,
                "area_overhead": c.area_overhead,
            }))
        })
        .collect::<Result<Vec<_>>>()?;
    writeln!(out, "{}", serde_json::to_string_pretty(&entries)?)?;
    Ok(())
}
