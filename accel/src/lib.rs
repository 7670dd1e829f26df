//! BitOPs accounting and cycle-level accelerator models (ZC706, Bit Fusion, Stripes).
