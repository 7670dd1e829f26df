//! The results table: one row per done cell × accelerator, built from the cells' files on disk
//! (`cell.json` keys, `inspect.json`, `cost.json`, `run/summary.json`, `run/metrics.csv`) into
//! `DIR/results.csv` (tidy, pandas reads it as is) and `DIR/results.json`, both written atomically.

use std::path::Path;

use anyhow::{bail, Context};
use serde_json::Value;

use super::cell::{write_file, Cell, COST_JSON, INSPECT_JSON};
use super::grid::ACCEL;
use super::study::Study;

/// The leading columns, always present (empty when a cell does not set them).
const KEY_COLUMNS: [&str; 6] = ["model", "schedule", "bits", "grad_bits", "seed", "policy"];

/// The measured columns, after the plan keys.
const METRIC_COLUMNS: [&str; 13] = [
    "macs",
    "gbitops",
    "static_gbitops",
    "reduction",
    "accel",
    "latency_s",
    "energy_j",
    "static_latency_s",
    "static_energy_j",
    "final_test_acc",
    "best_test_acc",
    "iterations",
    "cpu_s",
];

/// One row: a value per column (`Null` = empty).
pub type Row = Vec<Value>;

/// The column names: `cell`, the key columns, the other plan keys in plan order, the metrics.
pub fn columns(study: &Study) -> Vec<String> {
    let mut cols: Vec<String> = std::iter::once("cell")
        .chain(KEY_COLUMNS)
        .map(String::from)
        .collect();
    for key in &study.keys {
        let col = key.replace('-', "_");
        if col != ACCEL && !cols.contains(&col) {
            cols.push(col);
        }
    }
    cols.extend(METRIC_COLUMNS.iter().map(|c| c.to_string()));
    cols
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
}

/// A finite number at `key` of `v` (`file` for the message).
fn number(v: &Value, key: &str, file: &Path) -> anyhow::Result<f64> {
    match v.get(key).and_then(Value::as_f64) {
        Some(x) if x.is_finite() => Ok(x),
        _ => bail!(
            "{}: `{key}` is missing or not a finite number",
            file.display()
        ),
    }
}

fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// The highest `test_acc` in a `metrics.csv`.
fn best_from_metrics(path: &Path) -> anyhow::Result<f64> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    let col = reader
        .headers()?
        .iter()
        .position(|h| h == "test_acc")
        .with_context(|| format!("{}: no test_acc column", path.display()))?;
    let mut best: Option<f64> = None;
    for record in reader.records() {
        let record = record.with_context(|| format!("reading {}", path.display()))?;
        let x: f64 = record
            .get(col)
            .unwrap_or("")
            .parse()
            .with_context(|| format!("{}: test_acc is not a number", path.display()))?;
        if !x.is_finite() {
            bail!("{}: test_acc is not finite", path.display());
        }
        best = Some(best.map_or(x, |b| b.max(x)));
    }
    best.with_context(|| format!("{}: no evaluations", path.display()))
}

/// Training columns from `run/summary.json`: final/best test accuracy, iterations, CPU seconds.
fn training(cell: &Cell) -> anyhow::Result<[Value; 4]> {
    if cell.commands.train.is_none() {
        return Ok([Value::Null, Value::Null, Value::Null, Value::Null]);
    }
    let path = cell.dir.join("run").join("summary.json");
    let s = read_json(&path)?;
    let best = match s.get("best_test_acc") {
        Some(_) => number(&s, "best_test_acc", &path)?,
        None => best_from_metrics(&cell.dir.join("run").join("metrics.csv"))?,
    };
    let iterations = s
        .get("iterations")
        .and_then(Value::as_u64)
        .with_context(|| format!("{}: `iterations` missing", path.display()))?;
    Ok([
        num(number(&s, "final_test_acc", &path)?),
        num(best),
        Value::from(iterations),
        num(number(&s, "cpu_seconds", &path)?),
    ])
}

/// The rows of one finished cell (one per accelerator; one with empty accelerator columns when
/// it was costed on none), in [`columns`] order.
pub fn cell_rows_in(
    cell: &Cell,
    study_cols: &[String],
    fixed: &[(String, Value)],
) -> anyhow::Result<Vec<Row>> {
    let inspect_path = cell.dir.join(INSPECT_JSON);
    let inspect = read_json(&inspect_path)?;
    let macs = inspect
        .pointer("/totals/macs")
        .and_then(Value::as_u64)
        .with_context(|| format!("{}: `totals.macs` missing", inspect_path.display()))?;
    let cost_path = cell.dir.join(COST_JSON);
    let cost = read_json(&cost_path)?;
    let gbitops = number(&cost, "gbitops", &cost_path)?;
    let static_gbitops = number(&cost, "static_gbitops", &cost_path)?;
    let reduction = number(&cost, "reduction", &cost_path)?;
    let train = training(cell)?;
    let mut accels: Vec<[Value; 5]> = Vec::new();
    for a in cost
        .get("accelerators")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let name = a
            .get("name")
            .and_then(Value::as_str)
            .with_context(|| format!("{}: an accelerator has no name", cost_path.display()))?;
        accels.push([
            Value::from(name),
            num(number(a, "latency_s", &cost_path)?),
            num(number(a, "energy_j", &cost_path)?),
            num(number(a, "static_latency_s", &cost_path)?),
            num(number(a, "static_energy_j", &cost_path)?),
        ]);
    }
    if accels.len() != cell.spec.accel.len() {
        bail!(
            "{}: {} accelerators costed, {} asked for",
            cost_path.display(),
            accels.len(),
            cell.spec.accel.len()
        );
    }
    if accels.is_empty() {
        accels.push(std::array::from_fn(|_| Value::Null));
    }
    let mut rows = Vec::with_capacity(accels.len());
    for accel in accels {
        let mut measured: Vec<(&str, Value)> = vec![
            ("macs", Value::from(macs)),
            ("gbitops", num(gbitops)),
            ("static_gbitops", num(static_gbitops)),
            ("reduction", num(reduction)),
        ];
        let [name, lat, en, slat, sen] = accel;
        measured.extend([
            ("accel", name),
            ("latency_s", lat),
            ("energy_j", en),
            ("static_latency_s", slat),
            ("static_energy_j", sen),
        ]);
        let [fin, best, iters, cpu] = train.clone();
        measured.extend([
            ("final_test_acc", fin),
            ("best_test_acc", best),
            ("iterations", iters),
            ("cpu_s", cpu),
        ]);
        let row = study_cols
            .iter()
            .map(|col| {
                if col == "cell" {
                    return Value::from(cell.id.as_str());
                }
                if let Some((_, v)) = measured.iter().find(|(c, _)| c == col) {
                    return v.clone();
                }
                let own = cell.spec.get(col).map(|v| v.json());
                own.or_else(|| fixed.iter().find(|(c, _)| c == col).map(|(_, v)| v.clone()))
                    .unwrap_or(Value::Null)
            })
            .collect();
        rows.push(row);
    }
    Ok(rows)
}

/// The rows of one finished cell of the study it belongs to.
pub fn cell_rows(cell: &Cell) -> anyhow::Result<Vec<Row>> {
    // Column order does not matter for this check, only that every value reads.
    let cols: Vec<String> = std::iter::once("cell")
        .chain(METRIC_COLUMNS)
        .map(String::from)
        .collect();
    cell_rows_in(cell, &cols, &[])
}

fn csv_field(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What [`write_results`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Rows of the new table.
    pub rows: usize,
    /// Rows of the `results.csv` it replaced, if there was a readable one.
    pub previous: Option<usize>,
}

impl Written {
    /// How many rows fewer than the table it replaced, if fewer.
    pub fn lost(&self) -> Option<usize> {
        self.previous
            .filter(|&p| p > self.rows)
            .map(|p| p - self.rows)
    }
}

/// The data rows of an existing `results.csv` (`None`: no file, or not one this writes).
fn rows_in(path: &Path) -> Option<usize> {
    let mut reader = csv::Reader::from_path(path).ok()?;
    let mut n = 0usize;
    for record in reader.records() {
        record.ok()?;
        n += 1;
    }
    Some(n)
}

/// Rebuilds `results.csv` and `results.json` from the study's done cells.
pub fn write_results(study: &Study) -> anyhow::Result<Written> {
    let previous = rows_in(&study.dir.join("results.csv"));
    let cols = columns(study);
    let fixed: Vec<(String, Value)> = study
        .plan
        .train
        .iter()
        .flatten()
        .map(|(k, v)| (k.replace('-', "_"), v.json()))
        .collect();
    let mut rows: Vec<Row> = Vec::new();
    for cell in study.cells.iter().filter(|c| c.is_done()) {
        rows.extend(
            cell_rows_in(cell, &cols, &fixed)
                .with_context(|| format!("collecting cell {}", cell.id))?,
        );
    }
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(&cols)?;
    for row in &rows {
        out.write_record(row.iter().map(csv_field))?;
    }
    let bytes = out
        .into_inner()
        .map_err(|e| anyhow::anyhow!("{}", e.error()))?;
    let csv_text = String::from_utf8(bytes)?;
    let objects: Vec<Value> = rows
        .iter()
        .map(|row| {
            Value::Object(
                cols.iter()
                    .cloned()
                    .zip(row.iter().cloned())
                    .collect::<serde_json::Map<_, _>>(),
            )
        })
        .collect();
    write_file(&study.dir.join("results.csv"), &csv_text)?;
    write_file(
        &study.dir.join("results.json"),
        &serde_json::to_string_pretty(&objects)?,
    )?;
    Ok(Written {
        rows: rows.len(),
        previous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_accuracy_falls_back_to_the_metrics_and_rejects_nan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.csv");
        std::fs::write(
            &path,
            "iteration,train_loss,train_acc,test_loss,test_acc\n10,1,0.5,1,0.25\n20,1,0.6,1,0.75\n30,1,0.7,1,0.5\n",
        )
        .unwrap();
        assert_eq!(best_from_metrics(&path).unwrap(), 0.75);
        std::fs::write(&path, "iteration,test_acc\n10,NaN\n").unwrap();
        assert!(best_from_metrics(&path).is_err());
        std::fs::write(&path, "iteration,test_acc\n").unwrap();
        assert!(format!("{:#}", best_from_metrics(&path).unwrap_err()).contains("no evaluations"));
        let v = serde_json::json!({"gbitops": null, "x": 1.5});
        assert_eq!(number(&v, "x", &path).unwrap(), 1.5);
        assert!(number(&v, "gbitops", &path).is_err());
    }
}
