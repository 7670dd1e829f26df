//! Fully connected layer `y = x·Wᵀ + b` with weights `[O, F]` (the ONNX `Gemm` `transB = 1`
//! layout), with the three GEMMs on quantized operands when bits are set.
//!
//! The input may have any rank ≥ 2, `[..., F]`: every leading index is a row of the GEMM and the
//! output is `[..., O]`. The error `dL/dY` is quantized in its output shape, so the `samples`
//! DoReFa's error quantizer splits it into (one scale each) are the indices of the first axis:
//! the batch for `[N, O]` and batch-first `[B, T, O]`, the time step for sequence-first
//! `[T, B, O]`. (SBM and WAGEUBN quantize the whole tensor with one range either way.)

use ndarray::{Array2, CowArray, Ix2, IxDyn};

use super::from_ir::{owned, Ctx, Init, Layout, Val};
use super::intgemm;
use super::qgemm::bias_grad;
use super::qgemm::{
    input_grad_read, mask_input_grad, quantize_error, quantize_operands, record_step_grad,
    scale_weight_grad, QuantOperands,
};
use super::{as2, cached, check_grad, expect_inputs, weight_and_bias, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use crate::init::linear;
use crate::quant::LayerQuant;
use cptsim_kernels::gemm::{matmul_rows_par_uninit, matmul_tn_reduce_par};
use cptsim_models::ir::{self, Node};
use cptsim_models::zoo::init::LinearInit;
use rand::Rng;

/// A linear layer.
pub struct Linear {
    name: String,
    /// Weights `[O, F]`.
    pub weight: Param,
    /// Optional bias `[O]`.
    pub bias: Option<Param>,
    /// Quantization state (fp32 unless bits are set).
    pub quant: LayerQuant,
    /// Training pass: the quantized operands (input as `[rows, F]`) and the input shape.
    cache: Option<(QuantOperands<'static, 'static>, Vec<usize>)>,
}

fn shape_err(layer: &str) -> impl Fn(ndarray::ShapeError) -> SimError + '_ {
    move |e| SimError::shape(layer, e.to_string())
}

impl Linear {
    /// The backward pass; the input gradient (and its GEMM) only when `want_dx` or when the
    /// quantizer's hook reads it.
    fn backward_with(&mut self, grad_out: Tensor, want_dx: bool) -> Result<Option<Tensor>> {
        let (ops, in_shape) = cached(&self.name, &self.cache)?;
        let xq = as2(&self.name, &ops.x)?;
        let mut out_shape = in_shape.clone();
        if let Some(last) = out_shape.last_mut() {
            *last = ops.w.nrows();
        }
        check_grad(&self.name, &grad_out, &out_shape)?;
        // quantized in the output shape: DoReFa's samples are the first axis (module doc)
        let gq = quantize_error(&mut self.quant, grad_out);
        let g2 = gq
            .view()
            .into_shape_with_order((xq.nrows(), ops.w.nrows()))
            .map_err(shape_err(&self.name))?;
        let mut dw = Array2::<f32>::zeros(ops.w.raw_dim());
        matmul_tn_reduce_par(dw.view_mut(), g2, xq, false)?;
        let want_dx = want_dx || input_grad_read(&self.quant, ops);
        let dx_rows = if want_dx { xq.nrows() } else { 0 };
        let len = dx_rows * xq.ncols();
        let mut dx = Vec::with_capacity(len);
        matmul_rows_par_uninit(
            &mut dx.spare_capacity_mut()[..len],
            g2.slice(ndarray::s![..dx_rows, ..]),
            ops.w.view(),
        )?;
        // SAFETY: the product wrote all `len` values (or returned its error above).
        unsafe { dx.set_len(len) };
        let dx =
            Array2::from_shape_vec((dx_rows, xq.ncols()), dx).map_err(shape_err(&self.name))?;
        if let (Some(d), Ok(w)) = (
            dx.as_slice(),
            self.weight.value.view().into_dimensionality(),
        ) {
            record_step_grad(&mut self.quant, ops, w, dw.view(), d);
        }
        scale_weight_grad(&mut dw, ops.w_scale.as_ref());
        self.weight.grad = dw.into_dyn();
        if let Some(b) = &mut self.bias {
            let data = gq
                .as_slice()
                .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
            b.grad = bias_grad(data, g2.ncols());
        }
        if !want_dx {
            return Ok(None);
        }
        let mut dx = dx
            .into_dyn()
            .into_shape_with_order(in_shape.clone())
            .map_err(shape_err(&self.name))?;
        mask_input_grad(&mut dx, ops.x_mask.as_ref());
        Ok(Some(dx))
    }

    /// The forward pass: the input as `[rows, F]` without a copy when it is in standard layout
    /// (an owned one is then kept for backward as it is), the GEMM writing its output whole.
    fn run(&mut self, x: CowArray<'_, f32, IxDyn>, mode: Mode) -> Result<Tensor> {
        let in_shape = x.shape().to_vec();
        let [lead @ .., f] = &in_shape[..] else {
            return Err(self.rank_error(&in_shape));
        };
        if lead.is_empty() {
            return Err(self.rank_error(&in_shape));
        }
        let flat = [lead.iter().product(), *f];
        let x = if x.is_standard_layout() {
            x
        } else {
            CowArray::from(x.as_standard_layout().into_owned())
        };
        let x = x
            .into_shape_with_order(IxDyn(&flat))
            .map_err(shape_err(&self.name))?;
        let w = self
            .weight
            .value
            .view()
            .into_dimensionality::<Ix2>()
            .map_err(shape_err(&self.name))?;
        if *f != w.ncols() {
            return Err(SimError::shape(
                &self.name,
                format!("input has {f} features, layer expects {}", w.ncols()),
            ));
        }
        let ops = quantize_operands(&mut self.quant, x, w, mode, mode == Mode::Train, true);
        let xq = as2(&self.name, &ops.x)?;
        let (rows, o) = (xq.nrows(), ops.w.nrows());
        let mut y = crate::arena::take(rows * o);
        match &ops.int {
            Some(int) => {
                y.resize(rows * o, 0.0);
                intgemm::linear(&self.name, rows, int, &mut y)?;
            }
            None => {
                matmul_rows_par_uninit(&mut y.spare_capacity_mut()[..rows * o], xq, ops.w.t())?;
                // SAFETY: the product wrote all `rows·o` values (or returned its error above).
                unsafe { y.set_len(rows * o) };
            }
        }
        if let Some(b) = &self.bias {
            let bv = b
                .value
                .as_slice()
                .ok_or_else(|| SimError::shape(&self.name, "bias not contiguous"))?;
            y.chunks_exact_mut(o.max(1))
                .for_each(|r| r.iter_mut().zip(bv).for_each(|(v, &b)| *v += b));
        }
        let mut out_shape = in_shape.clone();
        if let Some(last) = out_shape.last_mut() {
            *last = o;
        }
        self.cache = (mode == Mode::Train).then(|| (ops.into_owned(), in_shape));
        Tensor::from_shape_vec(out_shape, y).map_err(shape_err(&self.name))
    }

    /// The error for an input of rank below 2.
    fn rank_error(&self, shape: &[usize]) -> SimError {
        SimError::shape(
            &self.name,
            format!("expects [..., F] of rank ≥ 2, got {shape:?}"),
        )
    }

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
        self.run(CowArray::from(x.view()), mode)
    }

    fn forward_owned(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.run(CowArray::from(x), mode)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let dx = self.backward_with(grad_out, true)?;
        Ok(dx.into_iter().collect())
    }

    fn backward_params(&mut self, grad_out: Tensor) -> Result<()> {
        self.backward_with(grad_out, false).map(drop)
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        weight_and_bias(&mut self.weight, &mut self.bias)
    }

    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        Some(&mut self.quant)
    }
}

impl Linear {
    /// The layer of an IR `Gemm`/linear node on features: the model's weights or PyTorch's
    /// default initialisation.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        l: &ir::Linear,
        ins: &[Val],
        quant: LayerQuant,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let (weight, bias) = match ctx.init {
            Init::FromModel => (owned(&l.weight), l.bias.as_ref().map(owned)),
            Init::Seeded(_) => {
                // The classifier is the layer that produces the model's output.
                let input = ctx.shape(ctx.ir.input).get(1..).unwrap_or_default();
                let rule = LinearInit::of(input, node.output == ctx.ir.output);
                let (out, inp) = (l.out_features(), l.in_features());
                linear(ctx.rng, out, inp, rule, l.bias.is_some())
            }
        };
        let layer = Linear::new(&node.name, weight, bias, quant)?;
        ctx.push(layer, &[x.id], Layout::AsIs)
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
    fn leading_axes_are_rows() {
        let mut l = linear(6);
        let x = rand_tensor(&[2, 3, 6], 1.0, 7);
        let y = l.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y.shape(), [2, 3, 4]);
        let x2 = x.clone().into_shape_with_order(vec![6, 6]).unwrap();
        let y2 = l.forward(&[&x2], Mode::Eval).unwrap();
        assert_eq!(y.as_slice().unwrap(), y2.as_slice().unwrap());
        check_layer(
            &mut l,
            &[rand_tensor(&[2, 2, 3, 6], 1.0, 8)],
            1e-2,
            1e-2,
            30,
        )
        .unwrap();
        // a non-standard-layout input is read in its logical order
        let xt = rand_tensor(&[6, 3, 2], 1.0, 9).permuted_axes(vec![2, 1, 0]);
        let y = l.forward(&[&xt], Mode::Eval).unwrap();
        let xs = xt.as_standard_layout().into_owned();
        assert_eq!(y, l.forward(&[&xs], Mode::Eval).unwrap());
    }

    #[test]
    fn rank_three_error_quantization_uses_the_first_axis_as_samples() {
        // the same rows as [2, 3, F] and as [6, F]: DoReFa scales the error per index of the
        // first axis (2 vs 6 slices), SBM over the whole tensor (identical results)
        let x = rand_tensor(&[2, 3, 6], 1.0, 10);
        let g = rand_tensor(&[2, 3, 4], 1.0, 11);
        let run = |method: QuantMethod, x: &Tensor, g: &Tensor| {
            let mut l = linear(12);
            l.quant = LayerQuant::new(method, 4);
            l.quant.set_bits(8, 4).unwrap();
            l.forward(&[x], Mode::Train).unwrap();
            let dx = l.backward(g.clone()).unwrap().remove(0);
            dx.as_slice().unwrap().to_vec()
        };
        let (x6, g6) = (
            x.clone().into_shape_with_order(vec![6, 6]).unwrap(),
            g.clone().into_shape_with_order(vec![6, 4]).unwrap(),
        );
        assert_ne!(
            run(QuantMethod::Dorefa, &x, &g),
            run(QuantMethod::Dorefa, &x6, &g6)
        );
        assert_eq!(
            run(QuantMethod::Sbm, &x, &g),
            run(QuantMethod::Sbm, &x6, &g6)
        );
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
        let e = linear(1)
            .forward(&[&rand_tensor(&[6], 1.0, 1)], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`fc`") && e.contains("rank ≥ 2"), "{e}");
    }
}
