//! Precision traces: analytic schedule synthesis, the run-length-encoded trace data model and its
//! CSV and binary formats.

pub mod row;
pub mod schedule;

pub use row::{Bits, TraceRow};
