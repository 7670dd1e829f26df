//! Costing a run's trace on accelerators (`--accel`), for `cptsim run` and `cptsim compare`.

use std::io::Write;

use std::path::Path;

use anyhow::Context;
use cptsim_accel::config::{self, ConfigError};
use cptsim_accel::cost::report::write_report;
use cptsim_accel::{
    AccelTable, Accelerator, RunError, RunReport, RunSpec, RunSummary, TraceCostError,
};

/// The accelerators `cptsim run` costs when `--accel` is not given.
pub const DEFAULT_ACCELS: [&str; 3] = ["zc706", "bitfusion", "stripes"];

/// `cptsim run`'s `--accel` values: [`DEFAULT_ACCELS`] when none were given, none for
/// `--accel none` (BitOPs alone).
pub fn run_accels(given: &[String]) -> anyhow::Result<Vec<String>> {
    match given {
        [] => Ok(DEFAULT_ACCELS.map(String::from).to_vec()),
        [one] if one == "none" => Ok(Vec::new()),
        many if many.iter().any(|n| n == "none") => {
            anyhow::bail!("--accel none: means no accelerator; give it alone")
        }
        many => Ok(many.to_vec()),
    }
}

/// Loads every `--accel` value (built-in name or TOML path). A built-in named by an alias
/// (`bitfusion`) is reported under that name. A configuration whose name repeats an earlier one
/// (an edited copy that kept its `name`) is labelled with the value that named it, so table
/// rows, JSON entries and `--report` files stay apart.
pub fn load_all(names: &[String]) -> anyhow::Result<Vec<Accelerator>> {
    let mut seen = std::collections::HashSet::new();
    names
        .iter()
        .map(|n| {
            if n.trim().is_empty() {
                anyhow::bail!(
                    "--accel: empty accelerator name (list built-in names or TOML paths, comma-separated)"
                );
            }
            // A config that was read names its file itself; a name that was neither a built-in
            // nor a file is said with the flag.
            let mut acc = Accelerator::load(n).map_err(|e| {
                let flag = match e {
                    ConfigError::NotFound { .. } => format!("--accel {n}"),
                    _ => "--accel".to_string(),
                };
                anyhow::Error::from(e).context(flag)
            })?;
            if config::builtin_text(n).is_some() {
                acc.config.name = n.clone();
            }
            let base = acc.config.name.clone();
            let mut k = 1;
            while !seen.insert(acc.config.name.clone()) {
                k += 1;
                acc.config.name = match k {
                    2 => format!("{base} ({n})"),
                    _ => format!("{base} ({n} #{k})"),
                };
            }
            Ok(acc)
        })
        .collect()
}

/// A run that could not be costed, with the flag at fault named: `--epoch-iters` for a
/// breakdown of too many epochs, `--trace FILE` for a trace without quantized rows.
pub fn run_error(e: RunError, spec: &RunSpec, epoch_iters: u64) -> anyhow::Error {
    let context = match &e {
        RunError::Trace(TraceCostError::TooManyEpochs { .. }) => {
            Some(format!("--epoch-iters {epoch_iters}"))
        }
        RunError::NoQuantizedRows => spec
            .schedule
            .strip_prefix("trace:")
            .map(|path| format!("--trace {path}")),
        _ => None,
    };
    let e = anyhow::Error::from(e);
    match context {
        Some(c) => e.context(c),
        None => e,
    }
}

/// Writes each accelerator's per-layer × GEMM and per-epoch CSVs of `report` into `dir`.
pub fn write_reports(dir: &Path, report: &RunReport) -> anyhow::Result<()> {
    for a in &report.accelerators {
        write_report(dir, &a.name, &a.per_layer_gemm, &a.per_epoch)
            .with_context(|| format!("--report {}: writing {}", dir.display(), a.name))?;
    }
    Ok(())
}

/// Prints the accelerator table of `summaries` ([`AccelTable`]): nothing when there are none.
pub fn print_table(summaries: &[RunSummary], out: &mut dyn Write) -> std::io::Result<()> {
    if summaries.is_empty() {
        return Ok(());
    }
    write!(out, "{}", AccelTable::of(summaries).to_text())
}
