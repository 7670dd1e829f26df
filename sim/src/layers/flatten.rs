//! Flatten `[N, H, W, C]` to `[N, C·H·W]` in **channel-major (NCHW) order**, so that a following
//! linear layer uses ONNX/PyTorch weights unchanged. 2-D inputs pass through.

use ndarray::Ix4;

use super::{as4, cached, check_grad, expect_inputs, Layer, Mode, Tensor};
use crate::error::{Result, SimError};

/// The flatten layer.
pub struct Flatten {
    name: String,
    in_shape: Option<Vec<usize>>,
}

impl Flatten {
    /// A new flatten layer.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            in_shape: None,
        }
    }
}

impl Layer for Flatten {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        self.in_shape = (mode == Mode::Train).then(|| x.shape().to_vec());
        if x.ndim() == 2 {
            return Ok(x.clone());
        }
        let x4 = as4(&self.name, x)?;
        let (n, h, w, c) = x4.dim();
        let nchw = x4.permuted_axes([0, 3, 1, 2]);
        Tensor::from_shape_vec(vec![n, c * h * w], nchw.iter().copied().collect())
            .map_err(|e| SimError::shape(&self.name, e.to_string()))
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.in_shape)?;
        if shape.len() == 2 {
            check_grad(&self.name, &grad_out, shape)?;
            return Ok(vec![grad_out.clone()]);
        }
        let (n, h, w, c) = (shape[0], shape[1], shape[2], shape[3]);
        check_grad(&self.name, &grad_out, &[n, c * h * w])?;
        let g = grad_out
            .view()
            .into_shape_with_order((n, c, h, w))
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let nhwc = g
            .permuted_axes([0, 2, 3, 1])
            .as_standard_layout()
            .into_owned();
        Ok(vec![nhwc
            .into_dimensionality::<Ix4>()
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?
            .into_dyn()])
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn channel_major_order_and_gradient() {
        // x[0, h, w, c] = 100c + 10h + w; NCHW flatten lists c slowest.
        let x = Tensor::from_shape_fn(vec![1, 2, 2, 3], |d| (100 * d[3] + 10 * d[1] + d[2]) as f32);
        let y = Flatten::new("f").forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(&y.as_slice().unwrap()[..5], &[0.0, 1.0, 10.0, 11.0, 100.0]);
        check_layer(
            &mut Flatten::new("f"),
            &[rand_tensor(&[2, 3, 2, 4], 1.0, 1)],
            1e-2,
            1e-3,
            20,
        )
        .unwrap();
    }
}
