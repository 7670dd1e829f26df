//! BitOPs accounting and cycle-level accelerator models (ZC706, Bit Fusion, Stripes, Eyeriss).
//!
//! The tiled models share one analytic core: each training GEMM of a layer ([`gemm`]) is tiled
//! against the on-chip buffers with a loop-order search ([`tiling`]), overlapped with DRAM traffic
//! by a double-buffered roofline ([`dram`]) and priced by per-cycle and per-bit energy constants
//! ([`energy`]); they differ in their precision→throughput law ([`bitfusion`], [`stripes`],
//! [`zc706`] on top of [`systolic`]) and their TOML configuration ([`config`]). Eyeriss
//! ([`eyeriss`]) has its own row-stationary mapping and data-movement model on the same roofline
//! and energy constants.
//! [`trace_cost`] costs whole precision traces, [`inference`] one forward pass, through a memo ([`cache`]); [`report`] writes CSVs.
//! [`bitops`] counts the papers' BitOPs of a trace.

pub mod accelerator;
pub mod bitfusion;
pub mod bitops;
pub mod cache;
pub mod config;
pub mod cost;
pub mod depthwise;
pub mod dram;
pub mod energy;
pub mod eyeriss;
pub mod gemm;
pub mod inference;
pub mod report;
pub mod stripes;
pub mod systolic;
pub mod tiling;
pub mod trace_cost;
pub mod zc706;

pub use accelerator::{Accelerator, CostError, GemmCost};
pub use bitops::{Accounting, BitOps, BitOpsCounter, BitOpsError};
pub use trace_cost::{cost_trace, CostTotals, RunSummary, RunTrace, TraceCost, TraceCostError};
