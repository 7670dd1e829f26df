//! Figures as SVG documents, drawn by the plot crate as `cptsim plot` draws them: a trace's
//! precision heat map and a training run's curves (loss, accuracy, bits over the evaluations).

use cptsim_plot::curves::{Curves, RunMetrics};
use cptsim_plot::trace::{heatmap, HeatmapOptions, Operand};
use cptsim_plot::{render_svg, PlotError, Size};
use cptsim_traces::TraceMeta;
use pyo3::prelude::*;

use crate::errors::{Failure, Kind};
use crate::trace::{to_row, Row};

/// The SVG of the heat map of a trace's `operand` bits (`w`, `a` or `g`) per layer over the run.
#[pyfunction]
#[pyo3(signature = (
    model_name, layer_names, batch, iterations, rows, operand="a", max_columns=400,
    title=String::new(), width=800, height=500,
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
    if max_columns == 0 {
        return Err(Failure::usage("max_columns: at least 1 column").into());
    }
    let opts = HeatmapOptions {
        operand: Operand::parse(operand).map_err(plot_failure)?,
        max_columns,
        title,
        ..HeatmapOptions::default()
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
        .replace("--operand", "operand");
    Failure { kind, message }
}
