//! Precision traces between Python and the traces crate: rows as tuples
//! `(iter_start, iter_end, layer, b_w, b_a, b_g, samples)`, read from and written to `.csv` and
//! `.pb` files, and rows built in Python checked as the CSV reader checks a file.

use std::path::Path;

use cptsim_models::ModelSummary;
use cptsim_traces::csv_format::{self, COLUMNS};
use cptsim_traces::{Bits, TraceError, TraceMeta, TraceRow};
use pyo3::prelude::*;

use crate::errors::Failure;
use crate::inspect::load;

/// One row as Python holds it.
pub type Row = (u64, u64, u32, u8, u8, u8, u64);

/// What a read trace is: its rows, iterations, batch, model name and layer names.
type Read = (Vec<Row>, u64, u64, String, Vec<String>);

pub fn to_row(r: Row) -> TraceRow {
    TraceRow {
        iter_start: r.0,
        iter_end: r.1,
        layer: r.2,
        bits: Bits {
            w: r.3,
            a: r.4,
            g: r.5,
        },
        samples: r.6,
    }
}

pub fn from_row(r: &TraceRow) -> Row {
    (
        r.iter_start,
        r.iter_end,
        r.layer,
        r.bits.w,
        r.bits.a,
        r.bits.g,
        r.samples,
    )
}

/// The layer names of `model`, in the order trace rows index them.
#[pyfunction]
#[pyo3(signature = (model, seq_len=None))]
pub fn layer_names(model: &str, seq_len: Option<usize>) -> PyResult<(String, Vec<String>)> {
    let s = load(model, 1, seq_len)?;
    let names = s.layers.iter().map(|l| l.name.clone()).collect();
    Ok((s.name, names))
}

/// Reads the trace file `path` of `model`, checked against it.
#[pyfunction]
#[pyo3(signature = (path, model, seq_len=None))]
pub fn read_trace(path: &str, model: &str, seq_len: Option<usize>) -> PyResult<Read> {
    let s = load(model, 1, seq_len)?;
    let mut rows = Vec::new();
    let meta = cptsim_traces::read_trace(Path::new(path), &s, |r| {
        rows.push(from_row(r));
        Ok(())
    })
    .map_err(|e| Failure::of("trace", &e))?;
    Ok((
        rows,
        meta.iterations,
        meta.batch,
        meta.model,
        meta.layer_names,
    ))
}

/// Writes `rows` to `path` (`.csv` or `.pb`, atomically); returns the number of rows.
#[pyfunction]
pub fn write_trace(
    path: &str,
    model: String,
    layer_names: Vec<String>,
    batch: u64,
    iterations: u64,
    rows: Vec<Row>,
) -> PyResult<u64> {
    let meta = TraceMeta {
        model,
        layer_names,
        batch,
        iterations,
    };
    let rows = rows.into_iter().map(to_row);
    Ok(cptsim_traces::write_trace(Path::new(path), &meta, rows)
        .map_err(|e| Failure::of("trace", &e))?)
}

/// Checks rows built in Python against `model` as the CSV reader checks a file (`origin` names
/// them in errors); returns the run's iterations and batch as that reader derives them.
#[pyfunction]
#[pyo3(signature = (model, rows, origin, seq_len=None))]
pub fn check_trace(
    model: &str,
    rows: Vec<Row>,
    origin: &str,
    seq_len: Option<usize>,
) -> PyResult<(u64, u64)> {
    let s = load(model, 1, seq_len)?;
    let meta = check_rows(&s, &rows, origin, |_| Ok(()))?;
    Ok((meta.iterations, meta.batch))
}

/// Reads `rows` through the CSV reader, handing each to `visit`.
pub fn check_rows(
    model: &ModelSummary,
    rows: &[Row],
    origin: &str,
    mut visit: impl FnMut(&TraceRow) -> Result<(), String>,
) -> Result<TraceMeta, Failure> {
    let text = csv_text(model, rows).map_err(|e| Failure::of(origin, &e))?;
    csv_format::read_from(text.as_slice(), Path::new(origin), model, &mut visit)
        .map_err(|e| Failure::of("trace", &e))
}

/// `rows` as the text of a CSV trace of `model` (a row's layer out of range gets an empty
/// name, which the reader then rejects with its line).
fn csv_text(model: &ModelSummary, rows: &[Row]) -> Result<Vec<u8>, TraceError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let err = |e: csv::Error| TraceError::io(Path::new("<memory>"), std::io::Error::other(e));
    w.write_record(COLUMNS).map_err(err)?;
    for r in rows {
        let name = model
            .layers
            .get(r.2 as usize)
            .map_or("", |l| l.name.as_str());
        let fields = [
            r.0.to_string(),
            r.1.to_string(),
            r.2.to_string(),
            name.to_string(),
            r.3.to_string(),
            r.4.to_string(),
            r.5.to_string(),
            r.6.to_string(),
        ];
        w.write_record(&fields).map_err(err)?;
    }
    w.into_inner()
        .map_err(|e| TraceError::io(Path::new("<memory>"), e.into_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_checked_as_a_file_is() {
        let s = load("zoo:lenet5", 1, None).unwrap();
        let rows: Vec<Row> = (0..s.layers.len() as u32)
            .map(|l| (0, 10, l, 4, 4, 8, 32))
            .collect();
        let meta = check_rows(&s, &rows, "mine", |_| Ok(())).unwrap();
        assert_eq!((meta.iterations, meta.batch), (10, 32));
        let mut gap = rows.clone();
        gap[0].0 = 2;
        let e = check_rows(&s, &gap, "mine", |_| Ok(())).unwrap_err();
        assert!(e.message.contains("mine"), "{}", e.message);
        assert_eq!(e.kind, crate::errors::Kind::BadInput);
    }
}
