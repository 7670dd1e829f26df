//! Fully connected layer `y = x·Wᵀ + b` with weights `[O, F]` (the ONNX `Gemm` `transB = 1`
//! layout), with the three GEMMs on quantized operands when bits are set.

use ndarray::{Array2, Ix2};

use super::qgemm::{
    mask_input_grad, quantize_error, quantize_operands, record_step_grad, scale_weight_grad,
    QuantOperands,
};
use super::reduce::bias_grad;
use super::{as2, cached, check_grad, expect_inputs, weight_and_bias, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use crate::gemm::{matmul_rows_par, matmul_tn_reduce_par};
use crate::quant::LayerQuant;

/// A linear layer.
pub struct Linear {
    name: String,
    /// Weights `[O, F]`.
    pub weight: Param,
    /// Optional bias `[O]`.
    pub bias: Option<Param>,
    /// Quantization state (fp32 unless bits are set).
    pub quant: LayerQuant,
    cache: Option<QuantOperands>,
}

fn shape_err(layer: &str) -> impl Fn(ndarray::ShapeError) -> SimError + '_ {
    move |e| SimError::shape(layer, e.to_string())
}

impl Linear {
    /// A linear layer from weights `[O, F]` and an optional bias `[O]`.
    pub fn new(
        name: &str,
        weight: Tensor,
        bias: Option<Tensor>,
        quant: LayerQuant,
    ) -> Result<Self> {
        if weight.ndim() != 2 {
            return Err(SimError::shape(
                name,
                format!("weight must be [O, F], got {:?}", weight.shape()),
            ));
        }
        let o = weight.shape()[0];
        if let Some(b) = &bias {
            if b.shape() != [o] {
                return Err(SimError::shape(
                    name,
                    format!("bias shape {:?}, expected [{o}]", b.shape()),
                ));
            }
        }
        Ok(Self {
            name: name.to_string(),
            weight: Param::new("weight", weight, true),
            bias: bias.map(|b| Param::new("bias", b, false)),
            quant,
            cache: None,
        })
    }
}

impl Layer for Linear {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let x2 = as2(&self.name, x)?;
        let w = self
            .weight
            .value
            .view()
            .into_dimensionality::<Ix2>()
            .map_err(shape_err(&self.name))?;
        if x2.ncols() != w.ncols() {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "input has {} features, layer expects {}",
                    x2.ncols(),
                    w.ncols()
                ),
            ));
        }
        let ops = quantize_operands(&mut self.quant, x, w, mode);
        let xq = as2(&self.name, &ops.x)?;
        let mut y = Array2::<f32>::zeros((xq.nrows(), ops.w.nrows()));
        matmul_rows_par(y.view_mut(), xq, ops.w.t(), false)?;
        if let Some(b) = &self.bias {
            let bv = b.value.view();
            y.rows_mut().into_iter().for_each(|mut r| r += &bv);
        }
        self.cache = (mode == Mode::Train).then_some(ops);
        Ok(y.into_dyn())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let ops = cached(&self.name, &self.cache)?;
        let xq = as2(&self.name, &ops.x)?;
        check_grad(&self.name, &grad_out, &[xq.nrows(), ops.w.nrows()])?;
        let gq = quantize_error(&mut self.quant, grad_out);
        let g2 = as2(&self.name, &gq)?;
        let mut dw = Array2::<f32>::zeros(ops.w.raw_dim());
        matmul_tn_reduce_par(dw.view_mut(), g2, xq, false)?;
        let mut dx = Array2::<f32>::zeros(xq.raw_dim());
        matmul_rows_par(dx.view_mut(), g2, ops.w.view(), false)?;
        if let (Some(d), Ok(w)) = (
            dx.as_slice(),
            self.weight.value.view().into_dimensionality(),
        ) {
            record_step_grad(&mut self.quant, ops, w, dw.view(), d);
        }
        scale_weight_grad(&mut dw, ops.w_scale.as_ref());
        let mut dx = dx.into_dyn();
        mask_input_grad(&mut dx, ops.x_mask.as_ref());
        self.weight.grad = dw.into_dyn();
        if let Some(b) = &mut self.bias {
            let data = gq
                .as_slice()
                .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
            b.grad = bias_grad(data, g2.ncols());
        }
        Ok(vec![dx])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        weight_and_bias(&mut self.weight, &mut self.bias)
    }

    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        Some(&mut self.quant)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;
    use crate::quant::QuantMethod;

    fn linear(seed: u64) -> Linear {
        let w = rand_tensor(&[4, 6], 0.5, seed);
        let b = rand_tensor(&[4], 0.5, seed + 1);
        Linear::new("fc", w, Some(b), LayerQuant::new(QuantMethod::Sbm, 0)).unwrap()
    }

    #[test]
    fn forward_is_x_wt_plus_b() {
        let mut l = linear(1);
        let x = rand_tensor(&[3, 6], 1.0, 2);
        let y = l.forward(&[&x], Mode::Eval).unwrap();
        for i in 0..3 {
            for o in 0..4 {
                let r: f32 = (0..6)
                    .map(|f| x[[i, f]] * l.weight.value[[o, f]])
                    .sum::<f32>()
                    + l.bias.as_ref().unwrap().value[[o]];
                assert!((y[[i, o]] - r).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        check_layer(
            &mut linear(3),
            &[rand_tensor(&[5, 6], 1.0, 4)],
            1e-2,
            1e-2,
            30,
        )
        .unwrap();
    }

    #[test]
    fn dorefa_backward_masks_clipped_inputs() {
        let mut l = linear(5);
        l.quant = LayerQuant::new(QuantMethod::Dorefa, 1);
        l.quant.set_bits(4, 0).unwrap();
        let x = Tensor::from_shape_vec(vec![1, 6], vec![-1.0, 0.5, 2.0, 0.2, 0.9, 1.5]).unwrap();
        l.forward(&[&x], Mode::Train).unwrap();
        let dx = l.backward(Tensor::ones(vec![1, 4])).unwrap().remove(0);
        assert_eq!(dx[[0, 0]], 0.0);
        assert_eq!(dx[[0, 2]], 0.0);
        assert_ne!(dx[[0, 1]], 0.0);
    }

    #[test]
    fn feature_mismatch_is_an_error() {
        let e = linear(1)
            .forward(&[&rand_tensor(&[2, 5], 1.0, 1)], Mode::Eval)
            .unwrap_err();
        assert!(
            e.to_string().contains("`fc`") && e.to_string().contains("5 features"),
            "{e}"
        );
    }
}
