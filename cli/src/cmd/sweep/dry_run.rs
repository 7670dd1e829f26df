//! `sweep run --dry-run`: the plan checked whole (every cell as `train` / `run` would check it)
//! and its cells listed — how each table's product became cells (so a reader sees why a 2×2
//! grid with two `[[cell]]`s runs 6), then each cell with its table, settings, the defaults it
//! takes for plan keys it leaves unset, its id and command lines.

use std::io::Write;

use cptsim_train::TrainPlan;

use super::cell::Cell;
use super::grid::{TableCount, ACCEL};
use super::spans::Table;
use super::study::Study;

/// Prints the listing of `cells` (the ones `--only` chose, `chosen` saying how many).
pub fn print(
    study: &Study,
    cells: &[&Cell],
    chosen: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "sweep {}: {} cells{chosen} in {}",
        study.plan.name,
        study.cells.len(),
        study.dir.join("cells").display()
    )?;
    for count in &study.tables {
        let merged = study
            .merged
            .iter()
            .filter(|(spec, _)| spec.table == count.table)
            .count();
        writeln!(out, "  {}", table_line(study, count, merged))?;
    }
    for (spec, index) in &study.merged {
        let from = place(study, spec.table);
        writeln!(
            out,
            "  {from} {} is the same run as #{index}",
            spec.describe()
        )?;
    }
    for cell in cells {
        let done = if cell.is_done() { " (done)" } else { "" };
        let from = place(study, cell.spec.table);
        writeln!(out, "#{} {}{done} from {from}", cell.index, cell.id)?;
        let defaults = defaults_used(study, cell);
        let settings = match defaults.is_empty() {
            true => cell.spec.describe(),
            false => format!("{}; defaults: {}", cell.spec.describe(), defaults.join(" ")),
        };
        writeln!(out, "  {settings}")?;
        let c = &cell.commands;
        for argv in c.train.iter().chain([&c.inspect, &c.cost]) {
            writeln!(out, "  cptsim {}", argv.join(" "))?;
        }
    }
    Ok(())
}

/// A table and where it starts: `[grid] (line 2)`.
fn place(study: &Study, table: Table) -> String {
    match study.plan.spans.table(table) {
        Some(p) => format!("{table} (line {})", p.line),
        None => table.to_string(),
    }
}

/// `[grid] (line 2): schedule 2 × bits 2 = 4 combinations, 1 excluded by [[exclude]] → 3
/// cells`; a `[[cell]]`'s line also says which keys are its own.
fn table_line(study: &Study, count: &TableCount, merged: usize) -> String {
    let crossed: Vec<String> = count
        .axes
        .iter()
        .filter(|(_, n, _)| *n > 1)
        .map(|(k, n, _)| format!("{k} {n}"))
        .collect();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let combinations = plural(count.combinations, "combination");
    let mut parts = vec![match crossed.is_empty() {
        true => combinations,
        false => format!("{} = {combinations}", crossed.join(" × ")),
    }];
    if count.table != Table::Grid {
        let keys = |grid: bool| {
            let names = count
                .axes
                .iter()
                .filter(|(_, _, t)| (*t == Table::Grid) == grid);
            names
                .map(|(k, _, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (own, grid) = (keys(false), keys(true));
        parts[0] += &match grid.is_empty() {
            true => format!(" of its {own}"),
            false => format!(" of its {own} and [grid]'s {grid}"),
        };
    }
    if count.excluded > 0 {
        parts.push(format!("{} excluded by [[exclude]]", count.excluded));
    }
    let same = count.repeated + merged;
    if same > 0 {
        parts.push(format!("{same} the same run as an earlier cell"));
    }
    let cells = count.combinations - count.excluded - same;
    format!(
        "{}: {} → {}",
        place(study, count.table),
        parts.join("; "),
        plural(cells, "cell")
    )
}

/// `key=value` of each plan key the cell does not set, with the value its run takes.
fn defaults_used(study: &Study, cell: &Cell) -> Vec<String> {
    let train = cell.plans.train.as_ref().map(|t| t.canonical().to_json());
    let cost = cell.plans.cost.canonical().to_json();
    let train_keys = TrainPlan::keys();
    let fixed = study.plan.train.iter().flatten();
    let mut used = Vec::new();
    for key in &study.keys {
        let set_by_train = fixed.clone().any(|(k, _)| k == key);
        if key == ACCEL || set_by_train || cell.spec.get(key).is_some() {
            continue;
        }
        let name = key.replace('-', "_");
        let json = match &train {
            Some(t) if train_keys.contains(&name) => t,
            _ => &cost,
        };
        let value = match json.get(&name) {
            None | Some(serde_json::Value::Null) => "unset".to_string(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        used.push(format!("{key}={value}"));
    }
    used
}
