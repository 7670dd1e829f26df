//! An LSTM layer over a whole sequence, sequence-first (`[T, B, I] → [T, B, H]`), ONNX gate order
//! `i, o, f, c` and equations (no peepholes), zero initial state. Backward is backpropagation
//! through the `T` steps it was given: truncated BPTT is the caller cutting the stream into
//! `bptt`-long windows (`data::text::Streams`), each starting from a zero state.
//!
//! Quantized as the `cell` module says: `Ŵ`, `R̂`, `x̂` once per forward, `ĥ_{t−1}` per step, and
//! the step's gate error `dg` `[B, 4H]` (one error quantization per step) before `dW`, `dR`,
//! `dx` and `dh` are computed from it.

use ndarray::{s, Array1, Array2, Array3, Axis};

use super::cell::recurrent_weights;
use super::cell::{
    recurrent_product, sigmoid, start_backward, state_operand, step_error, tanh, Recurrent,
};
use super::from_ir::{Ctx, Layout, Val};
use super::{Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use crate::quant::LayerQuant;
use cptsim_kernels::gemm::{matmul_into, matmul_tn_reduce_par, PackedB};
use cptsim_models::ir::{self, Node};
use rand::Rng;

/// What backward needs of one step.
struct StepCache {
    /// `ĥ_{t−1}` as it entered `R` (quantized at the forward bits).
    h_prev: Array2<f32>,
    /// Gradient mask of the state quantizer (DoReFa).
    h_mask: Option<Array2<f32>>,
    c_prev: Array2<f32>,
    /// Activated gates `[B, 4H]`: i, o, f, c̃.
    gates: Array2<f32>,
    tanh_c: Array2<f32>,
}

/// The LSTM layer.
pub struct Lstm {
    /// Name, weights, quantizer and the training pass's cache.
    rec: Recurrent<StepCache>,
}

/// Contiguous values of `a`, or an error naming the layer.
fn values<'a, S, D>(layer: &str, a: &'a ndarray::ArrayBase<S, D>) -> Result<&'a [f32]>
where
    S: ndarray::Data<Elem = f32>,
    D: ndarray::Dimension,
{
    a.as_slice()
        .ok_or_else(|| SimError::shape(layer, "recurrent state not contiguous"))
}

/// One step forward through the cell: the pre-activations `g` `[B, 4H]` activated in place
/// (`i, o, f, c̃`), then `c = f·c_prev + i·c̃`, `tanh c` and `h = o·tanh c`, each `[B, H]`.
fn cell_step(
    layer: &str,
    g: &mut Array2<f32>,
    c_prev: &Array2<f32>,
) -> Result<(Array2<f32>, Array2<f32>, Array2<f32>)> {
    let (batch, hd) = c_prev.dim();
    let mut out = [0, 1, 2].map(|_| vec![0.0f32; batch * hd]);
    let [c, tanh_c, h] = &mut out;
    let gates = g
        .as_slice_mut()
        .ok_or_else(|| SimError::shape(layer, "gates not contiguous"))?;
    let rows = gates
        .chunks_exact_mut(4 * hd)
        .zip(values(layer, c_prev)?.chunks_exact(hd))
        .zip(c.chunks_exact_mut(hd).zip(tanh_c.chunks_exact_mut(hd)))
        .zip(h.chunks_exact_mut(hd));
    for (((gates, c_prev), (c, tanh_c)), h) in rows {
        cell_row(gates, c_prev, c, tanh_c, h);
    }
    let [c, tanh_c, h] = out.map(|v| Array2::from_shape_vec((batch, hd), v));
    let bad = |e: ndarray::ShapeError| SimError::shape(layer, e.to_string());
    Ok((c.map_err(bad)?, tanh_c.map_err(bad)?, h.map_err(bad)?))
}

cptsim_kernels::simd::multiversion! {
    /// One batch row of [`cell_step`]: `gates` (`i, o, f, c̃`, `H` each) activated in place, then
    /// `c`, `tanh c` and `h` (`H` each) from `c_prev`.
    fn cell_row(gates: &mut [f32], c_prev: &[f32], c: &mut [f32], tanh_c: &mut [f32], h: &mut [f32]) {
        let hd = c.len();
        let (gi, rest) = gates.split_at_mut(hd);
        let (go, rest) = rest.split_at_mut(hd);
        let (gf, gc) = rest.split_at_mut(hd);
        let gates = gi.iter_mut().zip(go.iter_mut()).zip(gf.iter_mut().zip(gc.iter_mut()));
        let state = c_prev.iter().zip(c.iter_mut()).zip(tanh_c.iter_mut().zip(h.iter_mut()));
        for (((gi, go), (gf, gc)), ((&cp, c), (tc, h))) in gates.zip(state) {
            let (i, o, f, g) = (sigmoid(*gi), sigmoid(*go), sigmoid(*gf), tanh(*gc));
            (*gi, *go, *gf, *gc) = (i, o, f, g);
            *c = f * cp + i * g;
            *tc = tanh(*c);
            *h = o * *tc;
        }
    }
}

/// One step back through the cell: the pre-activation gradients `dg` `[B, 4H]` (σ' = s(1 − s),
/// tanh' = 1 − c̃²) from the output's gradient `dy` and the next step's `dh`, `dc`; `dc` becomes
/// this step's, for the step before.
fn cell_step_back(
    layer: &str,
    st: &StepCache,
    dy: ndarray::ArrayView2<f32>,
    dh_next: &Array2<f32>,
    dc_next: &mut Array2<f32>,
    dg: &mut Array2<f32>,
) -> Result<()> {
    let hd = st.tanh_c.ncols();
    let dy = dy.as_standard_layout();
    let dg = dg
        .as_slice_mut()
        .ok_or_else(|| SimError::shape(layer, "gate error not contiguous"))?;
    let dc = dc_next
        .as_slice_mut()
        .ok_or_else(|| SimError::shape(layer, "cell error not contiguous"))?;
    let state = values(layer, &st.tanh_c)?
        .chunks_exact(hd)
        .zip(values(layer, &st.c_prev)?.chunks_exact(hd))
        .zip(values(layer, &dy)?.chunks_exact(hd))
        .zip(values(layer, dh_next)?.chunks_exact(hd));
    let rows = values(layer, &st.gates)?
        .chunks_exact(4 * hd)
        .zip(dg.chunks_exact_mut(4 * hd))
        .zip(dc.chunks_exact_mut(hd))
        .zip(state);
    for (((gates, dg), dc), (((tanh_c, c_prev), dy), dh_next)) in rows {
        cell_row_back(gates, dg, dc, tanh_c, c_prev, dy, dh_next);
    }
    Ok(())
}

cptsim_kernels::simd::multiversion! {
    /// One batch row of [`cell_step_back`]: `dg` (`4H`) from the activated `gates`, and `dc`
    /// (`H`) replaced by this step's.
    fn cell_row_back(
        gates: &[f32],
        dg: &mut [f32],
        dc: &mut [f32],
        tanh_c: &[f32],
        c_prev: &[f32],
        dy: &[f32],
        dh_next: &[f32],
    ) {
        let hd = dc.len();
        let (gi, rest) = gates.split_at(hd);
        let (go, rest) = rest.split_at(hd);
        let (gf, gc) = rest.split_at(hd);
        let (di, rest) = dg.split_at_mut(hd);
        let (d_o, rest) = rest.split_at_mut(hd);
        let (df, dcc) = rest.split_at_mut(hd);
        let gates = gi.iter().zip(go).zip(gf.iter().zip(gc));
        let errors = di.iter_mut().zip(d_o.iter_mut()).zip(df.iter_mut().zip(dcc.iter_mut()));
        let state = dc.iter_mut().zip(tanh_c).zip(c_prev.iter().zip(dy.iter().zip(dh_next)));
        for ((((&gi, &go), (&gf, &gc)), ((di, d_o), (df, dcc))), ((dc, &tc), (&cp, (&dy, &dhn)))) in
            gates.zip(errors).zip(state)
        {
            let dh = dy + dhn;
            let dcj = dh * go * (1.0 - tc * tc) + *dc;
            *di = dcj * gc * gi * (1.0 - gi);
            *d_o = dh * tc * go * (1.0 - go);
            *df = dcj * cp * gf * (1.0 - gf);
            *dcc = dcj * gi * (1.0 - gc * gc);
            *dc = dcj * gf;
        }
    }
}

impl Lstm {
    /// An LSTM with `w` `[4H, I]`, `r` `[4H, H]` and biases `[4H]`.
    pub fn new(
        name: &str,
        w: Tensor,
        r: Tensor,
        bw: Tensor,
        br: Tensor,
        quant: LayerQuant,
    ) -> Result<Self> {
        Ok(Self {
            rec: Recurrent::new(name, 4, [w, r, bw, br], quant)?,
        })
    }
}

impl Layer for Lstm {
    fn name(&self) -> &str {
        &self.rec.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let (x, ops) = self.rec.start_forward(inputs, mode)?;
        let (_, _, bw, br) = self.rec.cell.views(&self.rec.name)?;
        let xw = ops.input_projection((&bw + &br).view())?;
        let (t_len, batch, _) = x.dim();
        let hd = self.rec.cell.hidden;
        let mut h = Array2::<f32>::zeros((batch, hd));
        let mut c = Array2::<f32>::zeros((batch, hd));
        let mut y = Array3::<f32>::zeros((t_len, batch, hd));
        let mut steps = Vec::with_capacity(if mode == Mode::Train { t_len } else { 0 });
        let r_t = PackedB::new(ops.r.t());
        for t in 0..t_len {
            let (h_prev, h_mask) = state_operand(&mut self.rec.quant, &h, mode);
            // g = ĥ_{t−1}·R̂ᵀ + (x̂_t·Ŵᵀ + b)
            let mut g = recurrent_product(h_prev.view(), &r_t)?;
            g += &xw.slice(s![t * batch..(t + 1) * batch, ..]);
            let (c_new, tanh_c, h_new) = cell_step(&self.rec.name, &mut g, &c)?;
            y.index_axis_mut(Axis(0), t).assign(&h_new);
            if mode == Mode::Train {
                steps.push(StepCache {
                    h_prev,
                    h_mask,
                    c_prev: c,
                    gates: g,
                    tanh_c,
                });
            }
            (h, c) = (h_new, c_new);
        }
        self.rec.cache = (mode == Mode::Train).then_some((ops, steps));
        Ok(y.into_dyn())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let hd = self.rec.cell.hidden;
        let (ops, steps, gy) = start_backward(&self.rec.name, &self.rec.cache, hd, grad_out)?;
        let (t_len, batch, _) = ops.x.dim();
        let mut db = Array1::<f32>::zeros(4 * hd);
        let mut dh_next = Array2::<f32>::zeros((batch, hd));
        let mut dc_next = Array2::<f32>::zeros((batch, hd));
        let mut dg = Array2::<f32>::zeros((batch, 4 * hd));
        // Every step's (quantized) gate error and recurrent operand, for the weight and input
        // gradients computed over all steps at once after the loop.
        let mut dgs = Array2::<f32>::zeros((t_len * batch, 4 * hd));
        let mut h_prevs = Array2::<f32>::zeros((t_len * batch, hd));
        for (t, st) in steps.iter().enumerate().rev() {
            let dy = gy.index_axis(Axis(0), t);
            cell_step_back(&self.rec.name, st, dy, &dh_next, &mut dc_next, &mut dg)?;
            step_error(&mut self.rec.quant, &mut dg);
            let rows = s![t * batch..(t + 1) * batch, ..];
            dgs.slice_mut(rows).assign(&dg);
            h_prevs.slice_mut(rows).assign(&st.h_prev);
            db += &dg.sum_axis(Axis(0));
            matmul_into(dh_next.view_mut(), dg.view(), ops.r.view(), false)?;
            if let Some(m) = &st.h_mask {
                dh_next *= m;
            }
        }
        let (mut dw, dx) = ops.input_grads(dgs.view())?;
        let mut dr = Array2::<f32>::zeros(ops.r.raw_dim());
        matmul_tn_reduce_par(dr.view_mut(), dgs.view(), h_prevs.view(), false)?;
        let dx = ops.finish(&mut dw, &mut dr, dx);
        // Wb and Rb enter as their sum: the same gradient
        self.rec.cell.set_grads(dw, dr, db.clone(), db);
        Ok(vec![dx])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        self.rec.cell.params_mut()
    }

    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        Some(&mut self.rec.quant)
    }
}

impl Lstm {
    /// The layer of an IR `LSTM` node on a sequence.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        r: &ir::Recurrent,
        ins: &[Val],
        quant: LayerQuant,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let [w, rr, bw, br] = recurrent_weights(ctx, r);
        let layer = Lstm::new(&node.name, w, rr, bw, br, quant)?;
        ctx.push(layer, &[x.id], Layout::AsIs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;
    use crate::layers::cell::tests::quantized_run_is_close_and_deterministic;
    use crate::quant::QuantMethod;

    fn fp32() -> LayerQuant {
        LayerQuant::new(QuantMethod::Sbm, 11)
    }

    fn lstm(i: usize, h: usize) -> Lstm {
        Lstm::new(
            "lstm",
            rand_tensor(&[4 * h, i], 0.8, 1),
            rand_tensor(&[4 * h, h], 0.8, 2),
            rand_tensor(&[4 * h], 0.5, 3),
            rand_tensor(&[4 * h], 0.5, 4),
            fp32(),
        )
        .unwrap()
    }

    #[test]
    fn quantized_lstm_is_close_to_fp32_and_deterministic() {
        quantized_run_is_close_and_deterministic(&|| Box::new(lstm(3, 4)));
    }

    #[test]
    fn gradients_check_through_time() {
        let mut l = lstm(3, 2);
        let x = rand_tensor(&[4, 2, 3], 1.0, 5);
        check_layer(&mut l, &[x], 1e-2, 2e-3, 40).unwrap();
    }

    #[test]
    fn one_step_matches_the_equations() {
        // H = 1, I = 1, W = 1 for every gate, no R, no bias: one step from a zero state
        let mut l = Lstm::new(
            "lstm",
            Tensor::ones(vec![4, 1]),
            Tensor::zeros(vec![4, 1]),
            Tensor::zeros(vec![4]),
            Tensor::zeros(vec![4]),
            fp32(),
        )
        .unwrap();
        let x = Tensor::from_elem(vec![1, 1, 1], 0.5);
        let y = l.forward(&[&x], Mode::Eval).unwrap();
        let s = sigmoid(0.5);
        let c = s * 0.5f32.tanh();
        assert!((y[[0, 0, 0]] - s * c.tanh()).abs() < 1e-6);
    }

    #[test]
    fn bad_shapes_name_the_layer() {
        let e = Lstm::new(
            "enc",
            Tensor::zeros(vec![8, 3]),
            Tensor::zeros(vec![8, 3]),
            Tensor::zeros(vec![8]),
            Tensor::zeros(vec![8]),
            fp32(),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("enc") && e.contains("W"), "{e}");
        let mut l = lstm(3, 2);
        let err = l
            .forward(&[&Tensor::zeros(vec![2, 4])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(err.contains("[T, B, I]"), "{err}");
        let err = l
            .forward(&[&Tensor::zeros(vec![2, 1, 5])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(err.contains("input features 5"), "{err}");
    }
}
