//! Costing a run's trace on accelerators (`--accel`), for `cptsim run` and `cptsim compare`.

use std::io::Write;

use std::path::Path;

use anyhow::Context;
use cptsim_accel::config::ConfigError;
use cptsim_accel::cost::report::write_report;
use cptsim_accel::{Accelerator, RunError, RunReport, RunSpec, RunSummary, TraceCostError};

/// Loads every `--accel` value (built-in name or TOML path). A configuration whose name repeats
/// an earlier one (an edited copy that kept its `name`) is labelled with the value that named it,
/// so table rows, JSON entries and `--report` files stay apart.
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

/// Prints one line per accelerator under a header: the table of [`RunSummary::table_row`], its
/// numbers right-aligned (a reduction cell, `12.34 %`, is one wider than its header).
pub fn print_table(summaries: &[RunSummary], out: &mut dyn Write) -> std::io::Result<()> {
    const HEADER_WIDTHS: [usize; 8] = [12, 10, 12, 12, 10, 12, 10, 10];
    const ROW_WIDTHS: [usize; 8] = [12, 10, 12, 12, 10, 12, 11, 11];
    if summaries.is_empty() {
        return Ok(());
    }
    let w = summaries
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(24);
    let mut line = |cells: &[&str], widths: &[usize; 8]| {
        let mut text = format!("{:<w$}", cells[0]);
        for (cell, width) in cells[1..].iter().zip(widths) {
            text.push_str(&format!(" {cell:>width$}"));
        }
        writeln!(out, "{text}")
    };
    line(&RunSummary::TABLE_HEADER, &HEADER_WIDTHS)?;
    for s in summaries {
        let row = s.table_row();
        line(&row.each_ref().map(String::as_str), &ROW_WIDTHS)?;
    }
    Ok(())
}
