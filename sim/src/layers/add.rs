//! Residual addition of two tensors of the same shape.

use super::{cached, check_grad, expect_inputs, Layer, Mode, Tensor};
use crate::error::{Result, SimError};

/// `y = a + b`; both inputs receive the output gradient.
pub struct Add {
    name: String,
    shape: Option<Vec<usize>>,
}

impl Add {
    /// A new residual-add layer.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            shape: None,
        }
    }
}

crate::simd::multiversion! {
    /// `a + b` element-wise.
    fn add_slices(a: &[f32], b: &[f32]) -> Vec<f32> {
        a.iter().zip(b).map(|(x, y)| x + y).collect()
    }
}

impl Layer for Add {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let v = expect_inputs(&self.name, inputs, 2)?;
        if v[0].shape() != v[1].shape() {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "operand shapes differ: {:?} vs {:?}",
                    v[0].shape(),
                    v[1].shape()
                ),
            ));
        }
        self.shape = (mode == Mode::Train).then(|| v[0].shape().to_vec());
        match (v[0].as_slice(), v[1].as_slice()) {
            // The usual case: both standard layout, added as flat slices.
            (Some(a), Some(b)) => Tensor::from_shape_vec(v[0].shape(), add_slices(a, b))
                .map_err(|e| SimError::shape(&self.name, e.to_string())),
            _ => Ok(v[0] + v[1]),
        }
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.shape)?;
        check_grad(&self.name, &grad_out, shape)?;
        Ok(vec![grad_out.clone(), grad_out])
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn gradient_and_shape_check() {
        let a = rand_tensor(&[2, 3, 3, 2], 1.0, 1);
        let b = rand_tensor(&[2, 3, 3, 2], 1.0, 2);
        check_layer(&mut Add::new("add"), &[a.clone(), b], 1e-2, 1e-3, 20).unwrap();
        let c = rand_tensor(&[2, 3, 3, 1], 1.0, 2);
        let e = Add::new("add").forward(&[&a, &c], Mode::Eval).unwrap_err();
        assert!(e.to_string().contains("shapes differ"), "{e}");
    }
}
