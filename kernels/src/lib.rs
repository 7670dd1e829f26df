//! The compute kernels under cptsim's layers: the blocked fp32 GEMM with its packing and
//! AVX-512 / AVX2 / portable microkernels ([`gemm`]), a convolution's inner loops (im2col,
//! depthwise, Winograd: [`conv`]), the vector path they run with ([`VectorPath`]) and run-time
//! AVX2 dispatch for element-wise loops ([`simd`]), the element-wise loops of sums, clamps and
//! batch norm ([`elementwise`]), per-channel sums in a fixed order ([`reduce`]), fast elementwise
//! functions ([`fastexp`]) and the CPU-time clocks the GEMM profile reads ([`cputime`]). They
//! take slices, matrix views and a conv's geometry; they know nothing of layers, networks or
//! quantizers.

pub mod conv;
pub mod cputime;
pub mod elementwise;
pub mod error;
pub mod fastexp;
pub mod gemm;
pub mod int;
pub mod lastaxis;
pub mod reduce;
pub mod simd;

pub use error::{KernelError, Result};
pub use simd::VectorPath;
