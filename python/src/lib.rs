//! `cptsim._cptsim`, the compiled half of the `cptsim` Python package: the library entry points
//! of the models, traces and accel crates, each returning plain Python values (JSON text for
//! reports) that the pure-Python half wraps. Errors are the exception classes of
//! [`errors`], one per exit code of the command-line program.

use pyo3::prelude::*;

mod accel;
mod errors;
mod figure;
mod inspect;
mod plan;
mod run;
mod trace;
mod train;

/// The extension module.
#[pymodule]
fn _cptsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(inspect::inspect_json, m)?)?;
    m.add_function(wrap_pyfunction!(run::cost_json, m)?)?;
    m.add_function(wrap_pyfunction!(trace::read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace::write_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace::check_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace::layer_names, m)?)?;
    m.add_function(wrap_pyfunction!(train::train_json, m)?)?;
    m.add_function(wrap_pyfunction!(figure::trace_svg, m)?)?;
    m.add_function(wrap_pyfunction!(figure::curves_svg, m)?)?;
    m.add_function(wrap_pyfunction!(figure::breakdown_svg, m)?)?;
    m.add_function(wrap_pyfunction!(accel::accel_text, m)?)?;
    m.add_function(wrap_pyfunction!(accel::accel_check, m)?)?;
    m.add_function(wrap_pyfunction!(accel::accel_builtins, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
