//! What the recurrent layers share: the logistic function, and their weights in ONNX form with
//! the shape checks, input check and gradient bookkeeping.

use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView2, ArrayView3, Ix1, Ix2, Ix3};

use super::{Param, Tensor};
use crate::error::{Result, SimError};

/// The logistic sigmoid.
pub(crate) fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// `W` `[G·H, I]`, `R` `[G·H, H]`, `Wb` and `Rb` `[G·H]` of a cell with `G` gates per unit.
pub(crate) struct CellWeights {
    /// Hidden size `H`.
    pub(crate) hidden: usize,
    gates: usize,
    w: Param,
    r: Param,
    bw: Param,
    br: Param,
}

/// The weights as views, in the order `W, R, Wb, Rb`.
pub(crate) type Views<'a> = (
    ArrayView2<'a, f32>,
    ArrayView2<'a, f32>,
    ArrayView1<'a, f32>,
    ArrayView1<'a, f32>,
);

/// Gradients of `W, R, Wb, Rb` and of the input `[T, B, I]`, in that order.
pub(crate) type CellGrads = (
    Array2<f32>,
    Array2<f32>,
    Array1<f32>,
    Array1<f32>,
    Array3<f32>,
);

impl CellWeights {
    /// Checks the shapes against `gates` per unit; errors name the layer and the tensor.
    pub(crate) fn new(
        name: &str,
        gates: usize,
        w: Tensor,
        r: Tensor,
        bw: Tensor,
        br: Tensor,
    ) -> Result<Self> {
        let hidden = r.shape().get(1).copied().unwrap_or(0);
        if hidden == 0 || w.shape().get(1).copied().unwrap_or(0) == 0 {
            return Err(SimError::shape(name, "empty weights"));
        }
        let cell = Self {
            hidden,
            gates,
            w: Param::new("W", w, true),
            r: Param::new("R", r, true),
            bw: Param::new("Wb", bw, false),
            br: Param::new("Rb", br, false),
        };
        cell.views(name)?;
        Ok(cell)
    }

    /// Input features `I`.
    pub(crate) fn inputs(&self) -> usize {
        self.w.value.shape().get(1).copied().unwrap_or(0)
    }

    /// The weights as views (no copy), each checked against its shape.
    pub(crate) fn views(&self, name: &str) -> Result<Views<'_>> {
        let rows = self.gates * self.hidden;
        Ok((
            matrix(name, &self.w, rows, self.inputs())?,
            matrix(name, &self.r, rows, self.hidden)?,
            vector(name, &self.bw, rows)?,
            vector(name, &self.br, rows)?,
        ))
    }

    /// `x` as `[T, B, I]` with this cell's `I`.
    pub(crate) fn input<'x>(&self, name: &str, x: &'x Tensor) -> Result<ArrayView3<'x, f32>> {
        let x3 = x.view().into_dimensionality::<Ix3>().map_err(|_| {
            SimError::shape(name, format!("input {:?} must be [T, B, I]", x.shape()))
        })?;
        let i = x3.dim().2;
        if i != self.inputs() {
            return Err(SimError::shape(
                name,
                format!("input features {i}, but W takes {}", self.inputs()),
            ));
        }
        Ok(x3)
    }

    /// Zero gradients of `W, R, Wb, Rb` and of an input of `steps × batch` rows.
    pub(crate) fn zero_grads(&self, steps: usize, batch: usize) -> CellGrads {
        let rows = self.gates * self.hidden;
        (
            Array2::zeros((rows, self.inputs())),
            Array2::zeros((rows, self.hidden)),
            Array1::zeros(rows),
            Array1::zeros(rows),
            Array3::zeros((steps, batch, self.inputs())),
        )
    }

    /// Stores the parameter gradients of a backward pass.
    pub(crate) fn set_grads(
        &mut self,
        dw: Array2<f32>,
        dr: Array2<f32>,
        dbw: Array1<f32>,
        dbr: Array1<f32>,
    ) {
        self.w.grad = dw.into_dyn();
        self.r.grad = dr.into_dyn();
        self.bw.grad = dbw.into_dyn();
        self.br.grad = dbr.into_dyn();
    }

    /// `W, R, Wb, Rb`.
    pub(crate) fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.w, &mut self.r, &mut self.bw, &mut self.br]
    }
}

/// `p` as a `[rows, cols]` view, or an error naming the layer and the parameter.
fn matrix<'a>(name: &str, p: &'a Param, rows: usize, cols: usize) -> Result<ArrayView2<'a, f32>> {
    p.value
        .view()
        .into_dimensionality::<Ix2>()
        .ok()
        .filter(|a| a.dim() == (rows, cols))
        .ok_or_else(|| {
            SimError::shape(
                name,
                format!("{} {:?} must be [{rows}, {cols}]", p.name, p.value.shape()),
            )
        })
}

/// `p` as a `[len]` view, or an error naming the layer and the parameter.
fn vector<'a>(name: &str, p: &'a Param, len: usize) -> Result<ArrayView1<'a, f32>> {
    p.value
        .view()
        .into_dimensionality::<Ix1>()
        .ok()
        .filter(|a| a.len() == len)
        .ok_or_else(|| {
            SimError::shape(
                name,
                format!("{} {:?} must be [{len}]", p.name, p.value.shape()),
            )
        })
}
