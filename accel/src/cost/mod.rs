//! The numbers: an [`accelerator::Accelerator`] costing one problem or one layer's training GEMMs
//! ([`gemm_cost`] holds what that yields), a memo of those costs ([`cache`]), whole precision
//! traces ([`trace`]) and inferences ([`inference`]), their CSV reports ([`report`]), the
//! accelerator table runs print ([`table`]), and a run's whole report as one call ([`run`]).

pub mod accelerator;
pub mod cache;
pub mod gemm_cost;
pub mod inference;
pub mod report;
pub mod run;
pub mod table;
pub mod trace;
