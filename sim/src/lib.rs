//! The cptsim trainer: tensors, layers with backward passes, quantizers, policies, datasets.
//!
//! Tensor conventions: image tensors are 4-D **channels-last** `[N, H, W, C]` (`Array4<f32>`);
//! flat tensors are `[N, F]`. Weights of conv layers are stored `[O, KH, KW, I/groups]`.

pub mod bandwidth;
pub mod bench;
pub mod build;
pub mod collapse;
pub mod cputime;
pub mod data;
pub mod dfq;
pub mod error;
pub mod gemm;
pub mod init;
pub mod layers;
pub mod ldp;
pub mod memory;
pub mod net;
pub mod npy;
pub mod optim;
pub mod peak;
pub mod quant;
mod simd;
pub mod train;

pub use error::{Result, SimError};

#[cfg(test)]
mod tests {
    /// Runs `f` on a rayon pool of `threads` threads (tests of thread-count independence).
    pub(crate) fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(f)
    }
}
