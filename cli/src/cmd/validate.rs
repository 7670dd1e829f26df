//! `cptsim validate`: recomputes every published figure cptsim claims to match and prints model,
//! reference, cptsim, error, tolerance and verdict per row; fails when a row is outside its
//! tolerance. Its markdown is the documentation's validation page.

use std::io::Write;

use anyhow::bail;
use cptsim_accel::validation::{self, fmt_sig, Row, Tolerance};

/// Arguments of `cptsim validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// `--format` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// Aligned text for people.
    Table,
    /// JSON for programs: one object per row.
    Json,
    /// The documentation's validation page.
    Markdown,
}

/// Runs the subcommand.
pub fn run(args: &ValidateArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let rows = validation::rows()?;
    match args.format {
        Format::Table => table(&rows, out)?,
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&json(&rows))?)?,
        Format::Markdown => write!(out, "{}", markdown(&rows))?,
    }
    let failed: Vec<&Row> = rows.iter().filter(|r| r.passes() == Some(false)).collect();
    if let Some(first) = failed.first() {
        bail!(
            "{} of {} rows outside their tolerance (first: {}, {}: {})",
            failed.len(),
            rows.iter().filter(|r| r.passes().is_some()).count(),
            first.group,
            first.model,
            first.quantity
        );
    }
    Ok(())
}

/// The rows as JSON values, with the error and verdict.
fn json(rows: &[Row]) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|r| {
            serde_json::json!({
                "group": r.group,
                "model": r.model,
                "quantity": r.quantity,
                "reference": r.reference,
                "cptsim": r.cptsim,
                "error": r.error(),
                "tolerance": r.tolerance,
                "result": r.verdict(),
            })
        })
        .collect()
}

/// The cells of a row: model, quantity, reference, cptsim, error, tolerance, result.
fn cells(r: &Row) -> [String; 7] {
    // exact rows are counts: every digit
    let num = |x: f64| match r.tolerance {
        Tolerance::Exact if x.fract() == 0.0 && x.abs() < 1e16 => format!("{x:.0}"),
        _ => fmt_sig(x),
    };
    [
        r.model.clone(),
        r.quantity.clone(),
        num(r.reference),
        num(r.cptsim),
        format!("{:+.2} %", 100.0 * r.error()),
        r.tolerance.to_string(),
        r.verdict().to_string(),
    ]
}

const HEADER: [&str; 7] = [
    "model",
    "quantity",
    "reference",
    "cptsim",
    "error",
    "tolerance",
    "result",
];

/// The rows in groups, in order of first appearance.
fn groups(rows: &[Row]) -> Vec<(&'static str, Vec<&Row>)> {
    let mut out: Vec<(&'static str, Vec<&Row>)> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, v)) => v.push(r),
            None => out.push((r.group, vec![r])),
        }
    }
    out
}

/// A count line: rows held to a tolerance and how many pass, plus information rows.
fn summary(rows: &[Row]) -> String {
    let held = rows.iter().filter(|r| r.passes().is_some()).count();
    let passed = rows.iter().filter(|r| r.passes() == Some(true)).count();
    let info = rows.len() - held;
    format!("{passed} of {held} rows within their tolerance; {info} shown for comparison only")
}

fn table(rows: &[Row], out: &mut dyn Write) -> std::io::Result<()> {
    for (group, rs) in groups(rows) {
        writeln!(out, "{group}")?;
        let body: Vec<[String; 7]> = rs.iter().map(|r| cells(r)).collect();
        let widths: Vec<usize> = (0..7)
            .map(|i| {
                body.iter()
                    .map(|c| c[i].chars().count())
                    .chain([HEADER[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |c: &[&str]| {
            let mut s = format!(
                "  {:<w0$}  {:<w1$}",
                c[0],
                c[1],
                w0 = widths[0],
                w1 = widths[1]
            );
            for (cell, w) in c[2..].iter().zip(&widths[2..]) {
                s.push_str(&format!("  {cell:>w$}"));
            }
            s
        };
        writeln!(out, "{}", line(&HEADER))?;
        for c in &body {
            writeln!(out, "{}", line(&c.each_ref().map(String::as_str)))?;
        }
        writeln!(out)?;
    }
    writeln!(out, "{}", summary(rows))
}

/// The validation page.
fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "# Validation against published figures\n\n\
         Every published figure cptsim claims to match, recomputed by the code as it is: the \
         papers' BitOPs and reductions, CPT's ZC706 runs the `zc706` configuration is \
         calibrated on, rows of the Bit Fusion authors' simulator, the Stripes group's \
         simulator (DNNsim), and the Bit Fusion authors' Eyeriss results with the paper's \
         headline. Each row gives the published reference, cptsim's figure, the relative \
         error, the tolerance the row is held to and the verdict; rows marked `info` are shown \
         beside the held ones for comparison. The headline is held with cptsim's own Bit \
         Fusion and Eyeriss models at the bits the authors' published sweep ran the benchmarks \
         (`cptsim infer --bits paper-sweep`: AlexNet and ResNet-18 at 8 bits, whose result \
         rows have 8-bit-product cycles, the others as stated), against the 16×16-PE array the \
         authors' Eyeriss results imply (`eyeriss-256pe`); at the stated bits, and against the \
         Eyeriss chip, it is shown for comparison.\n\n\
         This page is the output of `cptsim validate --format markdown`; a test fails when \
         the two differ.\n\n",
    );
    s.push_str(&summary(rows));
    s.push_str(".\n");
    for (group, rs) in groups(rows) {
        s.push_str(&format!("\n## {group}\n\n"));
        s.push_str(&format!("| {} |\n", HEADER.join(" | ")));
        s.push_str("|---|---|---:|---:|---:|---:|---|\n");
        for r in rs {
            let c = cells(r).map(|c| c.replace('|', "\\|"));
            s.push_str(&format!("| {} |\n", c.join(" | ")));
        }
    }
    s
}
