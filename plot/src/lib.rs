//! Figures (SVG and PNG, through plotters) and the HTML reports that show them: precision
//! schedules, trace heat maps, sweep Pareto plots, accuracy against accumulator width,
//! accelerator breakdowns and training curves.
//!
//! Every figure is a [`figure::Figure`]; [`figure::write`] renders one into a `.svg` or `.png`
//! file atomically. Each module builds its figure's data from the same values the rest of
//! cptsim computes (the schedule API, trace rows, `run --report` and `train --out` files), so the
//! data can be tested apart from the drawing.

pub mod accumulators;
mod bitmap_text;
pub mod breakdown;
pub mod curves;
pub mod error;
pub mod figure;
pub mod layers;
mod marker;
pub mod palette;
pub mod pareto;
mod pareto_draw;
pub mod report;
pub mod schedule;
mod strip;
mod summary;
mod svg_text;
pub mod table;
pub mod trace;

pub use error::{PlotError, Result};
pub use figure::{render_png, render_svg, write, Figure, Size};
pub use schedule::SchedulePlot;
