//! The network side of the cptsim trainer: tensors, layers with backward passes, the network and
//! its builder, quantizers, the optimiser, initialisation, datasets and `.npy` files.
//!
//! Tensor conventions: image tensors are 4-D **channels-last** `[N, H, W, C]` (`Array4<f32>`);
//! flat tensors are `[N, F]`. Weights of conv layers are stored `[O, KH, KW, I/groups]`.

pub mod arena;
pub mod build;
pub mod collapse;
pub mod data;
pub mod error;
pub mod init;
pub mod layers;
pub mod memory;
pub mod net;
pub mod npy;
pub mod optim;
pub mod quant;

pub use error::{Result, SimError};
