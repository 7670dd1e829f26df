//! The CSV trace format: one header line, then one line per [`TraceRow`].
//!
//! Columns (pandas reads the file as is):
//!
//! | column | meaning |
//! |---|---|
//! | `iter_start` | first iteration of the span (0-based, inclusive) |
//! | `iter_end` | one past the last iteration of the span |
//! | `layer` | index of the conv / linear layer in the model summary |
//! | `layer_name` | its name (checked against the model when read) |
//! | `b_w`, `b_a`, `b_g` | bits of weights, activations and errors; 0 = fp32 |
//! | `samples` | samples per iteration of the span that ran at these bits |
//!
//! Several rows with the same span and layer form a per-sample histogram (DFQ). The file carries
//! no run metadata: iterations are the largest `iter_end`, the batch the mean samples per
//! iteration of the most-covered layer. Every layer with rows must cover the same number of
//! samples, which catches a file cut short at a line boundary.

use std::path::Path;

use cptsim_models::ModelSummary;

use crate::coverage::Coverage;
use crate::error::TraceError;
use crate::meta::{check_for_writing, row_problem, TraceMeta};
use crate::{Bits, TraceRow};
use cptsim_models::atomic::write_atomically;

/// The header line's columns.
pub const COLUMNS: [&str; 8] = [
    "iter_start",
    "iter_end",
    "layer",
    "layer_name",
    "b_w",
    "b_a",
    "b_g",
    "samples",
];

/// Writes `rows` of a trace for `meta` to `path` atomically; returns the number of rows.
pub fn write(
    path: &Path,
    meta: &TraceMeta,
    rows: impl IntoIterator<Item = TraceRow>,
) -> Result<u64, TraceError> {
    write_atomically(
        path,
        |out| {
            let csv_err = |e: csv::Error| TraceError::io(path, std::io::Error::other(e));
            let mut w = csv::Writer::from_writer(out);
            w.write_record(COLUMNS).map_err(csv_err)?;
            let mut n = 0u64;
            for r in rows {
                check_for_writing(path, n, &r, meta)?;
                let name = meta
                    .layer_names
                    .get(r.layer as usize)
                    .map(String::as_str)
                    .unwrap_or_default();
                let fields = [
                    r.iter_start.to_string(),
                    r.iter_end.to_string(),
                    r.layer.to_string(),
                    name.to_string(),
                    r.bits.w.to_string(),
                    r.bits.a.to_string(),
                    r.bits.g.to_string(),
                    r.samples.to_string(),
                ];
                w.write_record(&fields).map_err(csv_err)?;
                n += 1;
            }
            w.flush().map_err(|e| TraceError::io(path, e))?;
            Ok(n)
        },
        TraceError::io,
    )
}

/// The CSV reader's error without its own position (the caller names the line).
fn csv_message(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields, expected {expected_len}"),
        csv::ErrorKind::Utf8 { err, .. } => format!("not UTF-8 text ({err})"),
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    }
}

/// Reads a CSV trace of `model`, handing each checked row to `visit`; returns the metadata
/// derived from the rows.
pub fn read(
    path: &Path,
    model: &ModelSummary,
    visit: &mut dyn FnMut(&TraceRow) -> Result<(), String>,
) -> Result<TraceMeta, TraceError> {
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    read_from(std::io::BufReader::new(file), path, model, visit)
}

/// [`read`] from any byte source; `path` names it in errors.
pub fn read_from(
    source: impl std::io::Read,
    path: &Path,
    model: &ModelSummary,
    visit: &mut dyn FnMut(&TraceRow) -> Result<(), String>,
) -> Result<TraceMeta, TraceError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(source);
    let header = reader
        .headers()
        .map_err(|e| TraceError::malformed(path, "line 1", e.to_string()))?;
    if header.iter().ne(COLUMNS) {
        let found = header.iter().collect::<Vec<_>>().join(",");
        return Err(TraceError::malformed(
            path,
            "line 1",
            format!("expected header {}, found {found}", COLUMNS.join(",")),
        ));
    }
    let mut coverage = Coverage::new(model.layers.len());
    let mut last_line = 1;
    let mut record = csv::StringRecord::new();
    loop {
        let more = reader.read_record(&mut record);
        let line = record.position().map_or(0, |p| p.line());
        let at = || format!("line {line}");
        if !more.map_err(|e| TraceError::malformed(path, at(), csv_message(&e)))? {
            break;
        }
        let row = parse_record(&record, model).map_err(|m| TraceError::malformed(path, at(), m))?;
        if let Some(problem) = row_problem(&row, model.layers.len(), None) {
            return Err(TraceError::malformed(path, at(), problem));
        }
        coverage
            .add(&row)
            .map_err(|m| TraceError::malformed(path, at(), m))?;
        last_line = line;
        visit(&row).map_err(|message| TraceError::Rejected {
            path: path.to_path_buf(),
            position: at(),
            message,
        })?;
    }
    let names: Vec<String> = model.layers.iter().map(|l| l.name.clone()).collect();
    let iterations = coverage.iterations();
    if let Some(problem) = coverage.problem(&names, iterations) {
        let at = format!("after line {last_line}");
        return Err(TraceError::malformed(path, at, problem));
    }
    let samples = coverage.max_samples();
    // Mean samples per iteration, rounded to nearest.
    let batch = (samples + iterations / 2)
        .checked_div(iterations)
        .unwrap_or(0);
    Ok(TraceMeta::for_model(model, batch, iterations))
}

/// One record → row, checking the layer name against the model.
fn parse_record(record: &csv::StringRecord, model: &ModelSummary) -> Result<TraceRow, String> {
    if record.len() != COLUMNS.len() {
        return Err(format!(
            "expected {} fields, found {}",
            COLUMNS.len(),
            record.len()
        ));
    }
    let field = |i: usize| record.get(i).unwrap_or_default().trim();
    let num = |i: usize| -> Result<u64, String> {
        field(i)
            .parse::<u64>()
            .map_err(|_| format!("{} '{}' is not a whole number", COLUMNS[i], field(i)))
    };
    let small = |i: usize| -> Result<u8, String> {
        u8::try_from(num(i)?)
            .map_err(|_| format!("{} '{}' out of range 0..32", COLUMNS[i], field(i)))
    };
    let layer = u32::try_from(num(2)?).map_err(|_| format!("layer '{}' out of range", field(2)))?;
    let name = field(3);
    match model.layers.get(layer as usize) {
        Some(l) if l.name != name => {
            return Err(format!(
                "layer {layer} is '{name}' in the trace but '{}' in model '{}'",
                l.name, model.name
            ))
        }
        None => {
            return Err(format!(
                "layer index {layer} out of range (model '{}' has {} layers)",
                model.name,
                model.layers.len()
            ))
        }
        Some(_) => {}
    }
    Ok(TraceRow {
        iter_start: num(0)?,
        iter_end: num(1)?,
        layer,
        bits: Bits {
            w: small(4)?,
            a: small(5)?,
            g: small(6)?,
        },
        samples: num(7)?,
    })
}
