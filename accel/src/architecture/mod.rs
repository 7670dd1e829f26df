//! The hardware: configurations ([`config`]), each engine's precision→throughput law
//! ([`law::ArrayLaw`]: [`bitfusion`], [`stripes`], [`zc706`] on [`systolic`]; Eyeriss's
//! row-stationary array, [`eyeriss`]), the DRAM interface's double-buffered roofline ([`dram`])
//! and the energy of what a mapping moves ([`energy`]).

pub mod bitfusion;
pub mod config;
pub mod dram;
pub mod energy;
pub mod eyeriss;
pub mod law;
pub mod stripes;
pub mod systolic;
pub mod zc706;
