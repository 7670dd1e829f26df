//! What `cptsim bench` and the cargo benches measure: the core's FMA peak ([`peak`]), the
//! memory streaming rate ([`bandwidth`]), and the training-step, evaluation-forward and
//! per-GEMM-shape throughput of a built network ([`harness`]).

pub mod bandwidth;
pub mod harness;
pub mod peak;
