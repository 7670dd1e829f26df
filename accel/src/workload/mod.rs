//! What is computed: the three training GEMMs of every conv / linear layer as convolution
//! problems ([`gemm`]), the tiles a mapping cuts them into ([`tile`]), and the papers' BitOPs of a
//! precision trace ([`bitops`]); the Bit Fusion benchmarks' per-layer bits ([`bench_bits`]).

pub mod bench_bits;
pub mod bitops;
pub mod gemm;
pub mod tile;
