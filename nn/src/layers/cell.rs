//! What the recurrent layers share: the logistic function, their weights in ONNX form with the
//! shape checks, input check and gradient bookkeeping, and their quantized GEMM operands.
//!
//! Quantization of an LSTM or GRU (spec §1.2's rule for a GEMM layer, applied to each of the
//! cell's GEMMs): at `bits_fw > 0`, `W` and `R` are quantized with [`LayerQuant::weights`] (each
//! per tensor, once per forward), the input `x` `[T, B, I]` with [`LayerQuant::activations`] once
//! per forward, and each step's hidden state `h_{t−1}`, where it enters `R`, with
//! [`LayerQuant::activations_second`] (the layer's second running range). At `bits_bw > 0` each
//! step's gate pre-activation error is quantized with [`LayerQuant::errors`] (the batch rows are
//! the samples) before the GEMMs that read it. Backward uses the quantized operands cached by
//! forward; DoReFa's backward factors apply to `dW`, `dR`, `dx` and the state's gradient through
//! `R`. Per-sample precision policies are rejected (their bits address batch-first samples).

use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView2, ArrayView3, Ix1, Ix2, Ix3};

use super::from_ir::owned;
use super::from_ir::{Ctx, Init};
use super::qgemm::{mask_input_grad, reject_per_sample, scale_weight_grad};
use super::{cached, check_grad, expect_inputs, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use crate::init::uniform;
use crate::quant::LayerQuant;
use cptsim_kernels::gemm::{matmul_rows_par, matmul_tn_reduce_par, matmul_uninit, PackedB};
use cptsim_models::ir;
use rand::Rng;

/// The logistic sigmoid and `tanh` of the cells' gates, without library calls (the cell loops
/// then vectorise).
pub(crate) use cptsim_kernels::fastexp::{sigmoid, tanh};

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

/// What an LSTM or a GRU layer holds: its name, weights and quantizer, and from a training
/// pass the GEMM operands and each step's cache `S` (what its backward needs of one step).
pub(crate) struct Recurrent<S> {
    pub(crate) name: String,
    pub(crate) cell: CellWeights,
    /// Quantization state (fp32 unless bits are set).
    pub(crate) quant: LayerQuant,
    pub(crate) cache: Option<(CellOperands, Vec<S>)>,
}

impl<S> Recurrent<S> {
    /// A layer of `gates` gates per unit with `w` `[G·H, I]`, `r` `[G·H, H]` and biases `[G·H]`.
    pub(crate) fn new(
        name: &str,
        gates: usize,
        [w, r, bw, br]: [Tensor; 4],
        quant: LayerQuant,
    ) -> Result<Self> {
        Ok(Self {
            name: name.to_string(),
            cell: CellWeights::new(name, gates, w, r, bw, br)?,
            quant,
            cache: None,
        })
    }

    /// The forward pass's start: the one input as `[T, B, I]` and its quantized GEMM operands.
    pub(crate) fn start_forward<'x>(
        &mut self,
        inputs: &[&'x Tensor],
        mode: Mode,
    ) -> Result<(ArrayView3<'x, f32>, CellOperands)> {
        let x = self
            .cell
            .input(&self.name, expect_inputs(&self.name, inputs, 1)?[0])?;
        let ops = self.cell.operands(&self.name, &mut self.quant, x, mode)?;
        Ok((x, ops))
    }
}

/// The backward pass's start of recurrent layer `name`: its training pass's operands and steps
/// (from `cache`), and the output gradient checked against the output's `[T, B, H]`. Borrows
/// only the cache, so the layer's quantizer and weights stay free for the pass.
pub(crate) fn start_backward<'c, S>(
    name: &str,
    cache: &'c Option<(CellOperands, Vec<S>)>,
    hidden: usize,
    grad_out: Tensor,
) -> Result<(&'c CellOperands, &'c [S], Array3<f32>)> {
    let (ops, steps) = cached(name, cache)?;
    let (t_len, batch, _) = ops.x.dim();
    check_grad(name, &grad_out, &[t_len, batch, hidden])?;
    let gy = grad_out
        .into_dimensionality::<Ix3>()
        .map_err(|e| SimError::shape(name, e.to_string()))?;
    Ok((ops, steps, gy))
}

/// The GEMM operands of one forward pass: `W`, `R` and the input `x̂` `[T, B, I]`, quantized at
/// the forward bits (copies at fp32), with the backward factors of quantizers that have them.
pub(crate) struct CellOperands {
    /// `Ŵ` `[G·H, I]`.
    pub(crate) w: Array2<f32>,
    /// `R̂` `[G·H, H]`.
    pub(crate) r: Array2<f32>,
    /// `x̂` `[T, B, I]`.
    pub(crate) x: Array3<f32>,
    w_scale: Option<Array2<f32>>,
    r_scale: Option<Array2<f32>>,
    x_mask: Option<Vec<f32>>,
}

impl CellWeights {
    /// Quantizes `W`, `R` and the input `x` for a forward pass (module doc).
    pub(crate) fn operands(
        &self,
        name: &str,
        quant: &mut LayerQuant,
        x: ArrayView3<f32>,
        mode: Mode,
    ) -> Result<CellOperands> {
        reject_per_sample(name, quant, "recurrent layers")?;
        let (w, r, _, _) = self.views(name)?;
        let (w, w_scale) = quant.weights(w).unwrap_or_else(|| (w.to_owned(), None));
        let (r, r_scale) = quant.weights(r).unwrap_or_else(|| (r.to_owned(), None));
        let mut x = x.as_standard_layout().into_owned();
        let x_mask = x
            .as_slice_mut()
            .and_then(|s| quant.activations(s, mode == Mode::Train));
        Ok(CellOperands {
            w,
            r,
            x,
            w_scale,
            r_scale,
            x_mask,
        })
    }
}

impl CellOperands {
    /// `x̂` as the `[T·B, I]` rows of every step.
    fn x_rows(&self) -> Result<ArrayView2<'_, f32>> {
        let (t, b, i) = self.x.dim();
        self.x
            .view()
            .into_shape_with_order((t * b, i))
            .map_err(|e| SimError::shape("recurrent input", e.to_string()))
    }

    /// Every step's input projection at once, `x̂·Ŵᵀ + bias`, as `[T·B, G·H]` rows (step `t`'s
    /// batch at rows `t·B..(t+1)·B`): one GEMM of `T·B` rows instead of one of `B` per step.
    pub(crate) fn input_projection(&self, bias: ArrayView1<f32>) -> Result<Array2<f32>> {
        let x = self.x_rows()?;
        let mut xw = Array2::<f32>::zeros((x.nrows(), self.w.nrows()));
        matmul_rows_par(xw.view_mut(), x, self.w.t(), false)?;
        xw += &bias;
        Ok(xw)
    }

    /// The gradients of `W` and of the input from every step's gate error `dg` `[T·B, G·H]`
    /// (rows laid out as in [`CellOperands::input_projection`]): `dW = dgᵀ·x̂` (one reduction
    /// over all `T·B` rows, in step order) and `dx = dg·Ŵ` `[T, B, I]`.
    pub(crate) fn input_grads(&self, dg: ArrayView2<f32>) -> Result<(Array2<f32>, Array3<f32>)> {
        let x = self.x_rows()?;
        let mut dw = Array2::<f32>::zeros(self.w.raw_dim());
        matmul_tn_reduce_par(dw.view_mut(), dg, x, false)?;
        let mut dx = Array3::<f32>::zeros(self.x.raw_dim());
        let (t, b, i) = self.x.dim();
        let rows = dx
            .view_mut()
            .into_shape_with_order((t * b, i))
            .map_err(|e| SimError::shape("recurrent input", e.to_string()))?;
        matmul_rows_par(rows, dg, self.w.view(), false)?;
        Ok((dw, dx))
    }

    /// Applies the quantizers' backward factors to the gradients of `W`, `R` and `x`; returns
    /// the input gradient as a tensor.
    pub(crate) fn finish(
        &self,
        dw: &mut Array2<f32>,
        dr: &mut Array2<f32>,
        dx: Array3<f32>,
    ) -> Tensor {
        scale_weight_grad(dw, self.w_scale.as_ref());
        scale_weight_grad(dr, self.r_scale.as_ref());
        let mut dx = dx.into_dyn();
        mask_input_grad(&mut dx, self.x_mask.as_ref());
        dx
    }
}

/// One step's recurrent product `ĥ·R̂ᵀ` `[B, G·H]`, from `R̂ᵀ` packed once per pass (packing it
/// per step cost as much as the product at `B = 20`).
pub(crate) fn recurrent_product(h: ArrayView2<f32>, r_t: &PackedB) -> Result<Array2<f32>> {
    let len = h.nrows() * r_t.dim().1;
    let mut out = Vec::with_capacity(len);
    matmul_uninit(&mut out.spare_capacity_mut()[..len], h, r_t)?;
    // SAFETY: `matmul_uninit` wrote all `len` values.
    unsafe { out.set_len(len) };
    Array2::from_shape_vec((h.nrows(), r_t.dim().1), out)
        .map_err(|e| SimError::shape("recurrent product", e.to_string()))
}

/// The state `h_{t−1}` as it enters `R`: quantized at the forward bits with the second running
/// range (a copy at fp32), and the gradient mask of quantizers that have one.
pub(crate) fn state_operand(
    quant: &mut LayerQuant,
    h: &Array2<f32>,
    mode: Mode,
) -> (Array2<f32>, Option<Array2<f32>>) {
    let mut hq = h.as_standard_layout().into_owned();
    let mask = hq
        .as_slice_mut()
        .and_then(|s| quant.activations_second(s, mode == Mode::Train))
        .and_then(|m| Array2::from_shape_vec(h.raw_dim(), m).ok());
    (hq, mask)
}

/// Quantizes one step's error `[B, ·]` in place at the backward bits (rows = samples).
pub(crate) fn step_error(quant: &mut LayerQuant, g: &mut Array2<f32>) {
    let samples = g.nrows();
    if !g.is_standard_layout() {
        *g = g.as_standard_layout().into_owned();
    }
    if let Some(s) = g.as_slice_mut() {
        quant.errors(s, samples);
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

/// A recurrent layer's `W`, `R`, `Wb`, `Rb`: the model's, or PyTorch's `nn.LSTM` / `nn.GRU`
/// initialisation U(±1/√H) for every one of them.
pub(super) fn recurrent_weights<R: Rng>(ctx: &mut Ctx<'_, R>, r: &ir::Recurrent) -> [Tensor; 4] {
    let parts = [&r.w, &r.r, &r.bias_w, &r.bias_r];
    match ctx.init {
        Init::FromModel => parts.map(owned),
        Init::Seeded(_) => {
            let a = (r.hidden.max(1) as f32).sqrt().recip();
            parts.map(|t| uniform(ctx.rng, t.shape(), a))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::gradcheck::{rand_tensor, PerSample};
    use super::super::Layer;
    use super::*;

    fn max_abs(t: &Tensor) -> f32 {
        t.iter().fold(0.0f32, |m, v| m.max(v.abs()))
    }

    /// One training pass at `bits` (0 = fp32): output, input gradient, parameter gradients and
    /// the number of error quantizations.
    fn pass(layer: &mut dyn Layer, bits: u32, x: &Tensor) -> (Tensor, Tensor, Vec<Tensor>, u64) {
        layer.quant_mut().unwrap().set_bits(bits, bits).unwrap();
        let y = layer.forward(&[x], Mode::Train).unwrap();
        let g = rand_tensor(y.shape(), 1.0, 21);
        let dx = layer.backward(g).unwrap().remove(0);
        let grads = layer.params_mut().iter().map(|p| p.grad.clone()).collect();
        let calls = layer.quant_mut().unwrap().error_calls;
        (y, dx, grads, calls)
    }

    /// At 8/8 bits a recurrent layer's output and gradients differ from fp32 but by little, and
    /// two runs from the same state agree exactly; per-sample policies are rejected.
    pub(crate) fn quantized_run_is_close_and_deterministic(make: &dyn Fn() -> Box<dyn Layer>) {
        let x = rand_tensor(&[5, 2, 3], 1.0, 20);
        let (y32, dx32, g32, calls32) = pass(make().as_mut(), 0, &x);
        assert_eq!(calls32, 0);
        let mut q = make();
        let (y8, dx8, g8, calls8) = pass(q.as_mut(), 8, &x);
        let close = |a: &Tensor, b: &Tensor, tol: f32| {
            let d = max_abs(&(a - b));
            assert!(d > 0.0 && d <= tol * max_abs(a).max(1.0), "{d}");
        };
        close(&y32, &y8, 0.05);
        close(&dx32, &dx8, 0.1);
        for (a, b) in g32.iter().zip(&g8) {
            close(a, b, 0.1);
        }
        assert!(
            calls8 >= 5,
            "at least one error quantization per step: {calls8}"
        );
        let quant = q.quant_mut().unwrap();
        assert!(quant.act_range.range > 0.0 && quant.act_range_b.range > 0.0);
        let again = pass(make().as_mut(), 8, &x);
        assert_eq!(
            (y8, dx8, g8, calls8),
            again,
            "a quantized run is deterministic"
        );
        let mut p = make();
        let quant = p.quant_mut().unwrap();
        quant.set_bits(8, 8).unwrap();
        quant.hook = Some(Box::new(PerSample(vec![(8, 8); 2])));
        let e = p.forward(&[&x], Mode::Train).unwrap_err().to_string();
        assert!(e.contains("per-sample") && e.contains("recurrent"), "{e}");
    }
}
