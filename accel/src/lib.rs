//! BitOPs accounting and cycle-level accelerator models (ZC706, Bit Fusion, Stripes, Eyeriss).
//!
//! Four parts, as accelerator cost models separate them:
//! - [`workload`]: what is computed — each training GEMM of a layer as a convolution problem,
//!   its tiles, and the papers' BitOPs of a precision trace;
//! - [`architecture`]: the hardware — TOML configurations with one typed variant per engine,
//!   each engine's precision→throughput law, the DRAM roofline and the energy constants;
//! - [`mapping`]: how a problem runs on an array — the tiled engines' loop-order search, the
//!   ZC706 depthwise lanes, Eyeriss's row-stationary search;
//! - [`cost`]: the numbers — an [`Accelerator`] costing problems and layers, whole traces and
//!   inferences through a memo, the CSV reports, and [`cost()`], a run's whole report
//!   ([`RunReport`]) as one library call.
//!
//! [`validation`] recomputes every published figure cptsim claims to match (`cptsim validate`).

pub mod architecture;
pub mod cost;
pub mod mapping;
pub mod validation;
pub mod workload;

pub use architecture::config;
pub use cost::accelerator::{Accelerator, CostError, GemmCost};
pub use cost::run::{cost, CostOptions, GradBits, RunCoster, RunError, RunReport, RunSpec};
pub use cost::table::{AccelTable, TimeUnit};
pub use cost::trace::{cost_trace, CostTotals, RunSummary, RunTrace, TraceCost, TraceCostError};
pub use workload::bitops::{Accounting, BitOps, BitOpsCounter, BitOpsError};
