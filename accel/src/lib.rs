//! BitOPs accounting and cycle-level accelerator models (ZC706, Bit Fusion, Stripes).

pub mod bitops;

pub use bitops::{Accounting, BitOps, BitOpsCounter, BitOpsError};
