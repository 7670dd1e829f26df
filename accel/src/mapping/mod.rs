//! How a problem runs on an array: the tiled engines' loop-order and tile-size search
//! ([`tiling`]), the ZC706 engines' depthwise mode ([`depthwise`]) and Eyeriss's row-stationary
//! mapping search ([`row_stationary`]). Each yields a [`tiling::Mapping`]: the chosen blocking with
//! its timing, DRAM traffic and buffer accesses.

pub mod depthwise;
pub mod row_stationary;
pub mod tiling;
