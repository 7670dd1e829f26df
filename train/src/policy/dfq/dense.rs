//! A fully connected layer on `[B, F]` matrices for the DFQ gate (the gate's 1×1 convs act on a
//! globally pooled `1×1` map, so they are dense layers with a bias). Gradients accumulate, since
//! the shared LSTM input and head layers are used once per block.

use ndarray::{Array2, ArrayView2, Axis, Ix1, Ix2};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Param, Tensor};

/// `y = x·Wᵀ + b` with `W` `[out, in]` and `b` `[out]`.
#[derive(Clone, Debug)]
pub struct Dense {
    /// Weights `[out, in]`.
    pub w: Param,
    /// Bias `[out]`.
    pub b: Param,
}

/// A 2-D view of a parameter tensor, or an error naming the gate.
pub(crate) fn mat(t: &Tensor) -> Result<ArrayView2<'_, f32>> {
    t.view()
        .into_dimensionality::<Ix2>()
        .map_err(|_| SimError::shape("dfq gate", format!("expects a matrix, got {:?}", t.shape())))
}

/// Uniform `±1/√fan_in` values (PyTorch's default for linear and LSTM layers).
pub(crate) fn uniform(rng: &mut ChaCha8Rng, shape: &[usize], fan_in: usize) -> Tensor {
    let a = 1.0 / (fan_in.max(1) as f32).sqrt();
    let n = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| rng.random_range(-a..a)).collect();
    Tensor::from_shape_vec(shape.to_vec(), v).unwrap_or_else(|_| Tensor::zeros(shape.to_vec()))
}

impl Dense {
    /// A layer `inputs → outputs` with PyTorch-default uniform initialisation.
    pub fn new(rng: &mut ChaCha8Rng, inputs: usize, outputs: usize) -> Self {
        Self {
            w: Param::new("weight", uniform(rng, &[outputs, inputs], inputs), true),
            b: Param::new("bias", uniform(rng, &[outputs], inputs), false),
        }
    }

    /// `x·Wᵀ + b` for `x` `[B, in]`.
    pub fn forward(&self, x: &Array2<f32>) -> Result<Array2<f32>> {
        let w = mat(&self.w.value)?;
        if x.ncols() != w.ncols() {
            return Err(SimError::shape(
                "dfq gate",
                format!(
                    "dense layer takes {} features, got {}",
                    w.ncols(),
                    x.ncols()
                ),
            ));
        }
        let b = self
            .b
            .value
            .view()
            .into_dimensionality::<Ix1>()
            .map_err(|_| SimError::shape("dfq gate", "bias must be a vector"))?;
        Ok(x.dot(&w.t()) + b)
    }

    /// Adds the parameter gradients of `dy` (at input `x`) and returns `dL/dx`.
    pub fn backward(&mut self, x: &Array2<f32>, dy: &Array2<f32>) -> Result<Array2<f32>> {
        let dw = dy.t().dot(x);
        let db = dy.sum_axis(Axis(0));
        self.w.grad += &dw.into_dyn();
        self.b.grad += &db.into_dyn();
        Ok(dy.dot(&mat(&self.w.value)?))
    }

    /// Zeroes the accumulated gradients.
    pub fn zero_grad(&mut self) {
        self.w.grad.fill(0.0);
        self.b.grad.fill(0.0);
    }

    /// Weight and bias.
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.w, &mut self.b]
    }
}
