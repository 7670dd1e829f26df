//! What the recurrent layers share: the logistic function and checked weight shapes.

use ndarray::{Array1, Array2, Ix1, Ix2};

use super::Tensor;
use crate::error::{Result, SimError};

/// The logistic sigmoid.
pub(crate) fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// `t` as a `[rows, cols]` matrix, or an error naming the layer and `what`.
pub(crate) fn matrix(
    name: &str,
    t: &Tensor,
    rows: usize,
    cols: usize,
    what: &str,
) -> Result<Array2<f32>> {
    t.clone()
        .into_dimensionality::<Ix2>()
        .ok()
        .filter(|a| a.dim() == (rows, cols))
        .ok_or_else(|| {
            SimError::shape(
                name,
                format!("{what} {:?} must be [{rows}, {cols}]", t.shape()),
            )
        })
}

/// `t` as a `[len]` vector, or an error naming the layer and `what`.
pub(crate) fn vector(name: &str, t: &Tensor, len: usize, what: &str) -> Result<Array1<f32>> {
    t.clone()
        .into_dimensionality::<Ix1>()
        .ok()
        .filter(|a| a.len() == len)
        .ok_or_else(|| SimError::shape(name, format!("{what} {:?} must be [{len}]", t.shape())))
}
