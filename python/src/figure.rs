//! Figures as SVG documents, drawn by the plot crate as `cptsim plot` draws them: a trace's
//! precision heat map, a training run's curves (loss, accuracy, bits over the evaluations) and an
//! accelerator's per-layer latency and energy breakdown.

use std::path::Path;

use cptsim_accel::cost::trace::LayerGemmCost;
use cptsim_plot::breakdown::{Breakdown, Split};
use cptsim_plot::curves::{Curves, RunMetrics};
use cptsim_plot::layers::{LayerRows, COST_COLUMNS};
use cptsim_plot::table::Table;
use cptsim_plot::trace::{heatmap, HeatmapOptions, Operand};
use cptsim_plot::{render_svg, PlotError, Size};
use cptsim_traces::schedule::parse_bit_range;
use cptsim_traces::TraceMeta;
use pyo3::prelude::*;

use crate::errors::{Failure, Kind};
use crate::trace::{to_row, Row};

/// Most iteration bins of a heat map (as `cptsim plot trace --columns` allows).
const MAX_COLUMNS: usize = 20_000;

/// The SVG of the heat map of a trace's `operand` bits (`w`, `a` or `g`) per layer over the run.
#[pyfunction]
#[pyo3(signature = (
    model_name, layer_names, batch, iterations, rows, operand="a", max_columns=400,
    bits=None, title=String::new(), width=800, height=500,
))]
#[allow(clippy::too_many_arguments)]
pub fn trace_svg(
    model_name: String,
    layer_names: Vec<String>,
    batch: u64,
    iterations: u64,
    rows: Vec<Row>,
    operand: &str,
    max_columns: usize,
    bits: Option<&str>,
    title: String,
    width: u32,
    height: u32,
) -> PyResult<String> {
    if let Some(r) = rows.iter().find(|r| r.2 as usize >= layer_names.len()) {
        return Err(Failure {
            kind: Kind::BadInput,
            message: format!("trace: layer {} of {} layers", r.2, layer_names.len()),
        }
        .into());
    }
    let rows: Vec<_> = rows.into_iter().map(to_row).collect();
    let meta = TraceMeta {
        model: model_name,
        layer_names,
        batch,
        iterations,
    };
    if max_columns == 0 || max_columns > MAX_COLUMNS {
        return Err(Failure::usage(format!(
            "max_columns {max_columns}: between 1 and {MAX_COLUMNS}"
        ))
        .into());
    }
    let bits = match bits {
        Some(text) => {
            let r = parse_bit_range("bits", text).map_err(|e| Failure::of("", &e))?;
            Some((r.min, r.max))
        }
        None => None,
    };
    let opts = HeatmapOptions {
        operand: Operand::parse(operand).map_err(plot_failure)?,
        max_columns,
        bits,
        title,
        layers: None,
    };
    let figure = heatmap(&rows, &meta, &opts).map_err(plot_failure)?;
    svg(&figure, width, height)
}

/// The SVG of a run's curves: `columns` are its evaluations' iteration, train loss, test
/// loss, train accuracy, test accuracy, forward and backward bits.
#[pyfunction]
#[pyo3(signature = (name, columns, width=800, height=500))]
pub fn curves_svg(
    name: String,
    columns: [Vec<f64>; 7],
    width: u32,
    height: u32,
) -> PyResult<String> {
    let [iteration, train_loss, test_loss, train_acc, test_acc, fw_bits, bw_bits] = columns;
    if iteration.is_empty() {
        return Err(Failure {
            kind: Kind::BadInput,
            message: format!("metrics of {name}: nothing to plot (no evaluation)"),
        }
        .into());
    }
    if let Some(v) = [&train_loss, &test_loss, &train_acc, &test_acc]
        .iter()
        .flat_map(|c| c.iter())
        .find(|v| !v.is_finite())
    {
        return Err(Failure {
            kind: Kind::BadInput,
            message: format!("metrics of {name}: {v} is not a finite number"),
        }
        .into());
    }
    let run = RunMetrics {
        name,
        iteration,
        train_loss,
        test_loss,
        train_acc,
        test_acc,
        fw_bits,
        bw_bits,
        trace: None,
    };
    svg(&Curves { runs: vec![run] }, width, height)
}

/// The SVG of the per-layer latency and energy breakdown of one accelerator of a report
/// (`accelerator`: its JSON with `name` and `per_layer_gemm`), stacked by cost component
/// (`split` `components`) or by training GEMM (`gemm`), as `cptsim plot breakdown` draws it.
#[pyfunction]
#[pyo3(signature = (accelerator, split="components", width=800, height=500))]
pub fn breakdown_svg(accelerator: &str, split: &str, width: u32, height: u32) -> PyResult<String> {
    #[derive(serde::Deserialize)]
    struct Costs {
        name: String,
        per_layer_gemm: Vec<LayerGemmCost>,
    }
    let costs: Costs = serde_json::from_str(accelerator).map_err(|e| Failure {
        kind: Kind::BadInput,
        message: format!("report: {e}"),
    })?;
    let split = Split::parse(split).map_err(plot_failure)?;
    let text = layers_csv(&costs.per_layer_gemm).map_err(|e| Failure::of("report", &e))?;
    // The file name the program gives these rows, which names the accelerator.
    let name = format!("{}-layers.csv", costs.name);
    let table = Table::parse(&text, Path::new(&name)).map_err(plot_failure)?;
    let rows = LayerRows::of(&table).map_err(plot_failure)?;
    let figure = Breakdown::of(&rows, split).map_err(plot_failure)?;
    svg(&figure, width, height)
}

/// The rows as the CSV text of a `<accelerator>-layers.csv`, every number in full.
fn layers_csv(rows: &[LayerGemmCost]) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut head = vec!["layer_index", "layer", "gemm"];
    head.extend(COST_COLUMNS);
    w.write_record(&head)?;
    for r in rows {
        let t = &r.totals;
        let costs = [
            t.latency_s,
            t.cycles,
            t.compute_cycles,
            t.energy_j(),
            t.energy.compute_j,
            t.energy.sram_j,
            t.energy.dram_j,
        ];
        let mut record = vec![
            r.layer.to_string(),
            r.name.clone(),
            r.gemm.label().to_string(),
        ];
        record.extend(costs.iter().map(f64::to_string));
        w.write_record(&record)?;
    }
    w.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}

fn svg(figure: &impl cptsim_plot::Figure, width: u32, height: u32) -> PyResult<String> {
    let size = Size {
        width,
        height,
        ..Size::default()
    };
    render_svg(figure, size).map_err(|e| plot_failure(e).into())
}

/// A plot error in the class of the program's (`cptsim plot`).
fn plot_failure(e: PlotError) -> Failure {
    let kind = match &e {
        PlotError::Invalid(_) => Kind::Usage,
        PlotError::Draw(_) | PlotError::Io { .. } => Kind::Runtime,
        _ => Kind::BadInput,
    };
    let message = e
        .to_string()
        .replace("--width/--height", "width/height")
        .replace("--operand", "operand")
        .replace("--split", "split");
    Failure { kind, message }
}
