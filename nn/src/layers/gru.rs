//! A GRU layer over a whole sequence, sequence-first (`[T, B, I] → [T, B, H]`), ONNX gate order
//! `z, r, h` and equations, zero initial state, both ONNX forms of the candidate:
//! `linear_before_reset` (PyTorch's) `h̃ = tanh(W_h x + Wb_h + r ⊙ (R_h h + Rb_h))`, otherwise
//! `h̃ = tanh(W_h x + Wb_h + R_h (r ⊙ h) + Rb_h)`; then `h' = (1 − z) ⊙ h̃ + z ⊙ h`. Backward is
//! backpropagation through the steps it was given, as for [`super::lstm::Lstm`].
//!
//! Quantized as the `cell` module says: `Ŵ`, `R̂`, `x̂` once per forward, and per step the
//! state `ĥ_{t−1}` where it enters `R` (both `R` products; in the default form `R_h` reads
//! `r ⊙ ĥ`, the gate times the quantized state, not quantized again; the skip term `z ⊙ h` keeps
//! the fp32 state). The step's error is quantized in two pieces, because the reset gate's error
//! is computed from the candidate's: first the candidate's pre-activation error `[B, H]`, then
//! that of the `z`, `r` gates `[B, 2H]` (two error quantizations per step), each before the
//! GEMMs that read it.

use ndarray::{concatenate, s, Array1, Array2, Array3, Axis};

use super::cell::recurrent_weights;
use super::cell::{
    recurrent_product, sigmoid, start_backward, state_operand, step_error, tanh, Recurrent,
};
use super::from_ir::{Ctx, Layout, Val};
use super::{Layer, Mode, Param, Tensor};
use crate::error::Result;
use crate::quant::LayerQuant;
use cptsim_kernels::gemm::{matmul, matmul_tn_reduce_par, PackedB};
use cptsim_models::ir::{self, Node};
use rand::Rng;

/// What backward needs of one step.
struct StepCache {
    /// `h_{t−1}` (fp32, the skip term's).
    h_prev: Array2<f32>,
    /// `ĥ_{t−1}` as it entered `R` (quantized at the forward bits).
    h_q: Array2<f32>,
    /// Gradient mask of the state quantizer (DoReFa).
    h_mask: Option<Array2<f32>>,
    z: Array2<f32>,
    r: Array2<f32>,
    n: Array2<f32>,
    /// `R_h ĥ + Rb_h` (linear before reset) or `r ⊙ ĥ` (otherwise).
    inner: Array2<f32>,
}

/// The GRU layer.
pub struct Gru {
    /// Name, weights, quantizer and the training pass's cache.
    rec: Recurrent<StepCache>,
    linear_before_reset: bool,
}

impl Gru {
    /// A GRU with `w` `[3H, I]`, `r` `[3H, H]` and biases `[3H]`.
    pub fn new(
        name: &str,
        w: Tensor,
        r: Tensor,
        bw: Tensor,
        br: Tensor,
        linear_before_reset: bool,
        quant: LayerQuant,
    ) -> Result<Self> {
        Ok(Self {
            rec: Recurrent::new(name, 3, [w, r, bw, br], quant)?,
            linear_before_reset,
        })
    }
}

impl Layer for Gru {
    fn name(&self) -> &str {
        &self.rec.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let (x, ops) = self.rec.start_forward(inputs, mode)?;
        let (_, _, bw, br) = self.rec.cell.views(&self.rec.name)?;
        let (t_len, batch, _) = x.dim();
        let hd = self.rec.cell.hidden;
        // Every step's x̂·Ŵᵀ + Wb in one product; R̂_zrᵀ and R̂_hᵀ packed once for the steps.
        let xws = ops.input_projection(bw)?;
        let rzr_t = PackedB::new(ops.r.slice(s![0..2 * hd, ..]).t());
        let rh_t = PackedB::new(ops.r.slice(s![2 * hd.., ..]).t());
        let mut h = Array2::<f32>::zeros((batch, hd));
        let mut y = Array3::<f32>::zeros((t_len, batch, hd));
        let mut steps = Vec::with_capacity(if mode == Mode::Train { t_len } else { 0 });
        for t in 0..t_len {
            let xw = xws.slice(s![t * batch..(t + 1) * batch, ..]);
            let (h_q, h_mask) = state_operand(&mut self.rec.quant, &h, mode);
            let hr = recurrent_product(h_q.view(), &rzr_t)?;
            let zr = (&xw.slice(s![.., 0..2 * hd]) + &hr + br.slice(s![0..2 * hd])).mapv(sigmoid);
            let (z, rg) = (
                zr.slice(s![.., 0..hd]).to_owned(),
                zr.slice(s![.., hd..]).to_owned(),
            );
            let (inner, rec) = if self.linear_before_reset {
                let a = recurrent_product(h_q.view(), &rh_t)? + br.slice(s![2 * hd..]);
                let rec = &rg * &a;
                (a, rec)
            } else {
                let rh_h = &rg * &h_q;
                let rec = recurrent_product(rh_h.view(), &rh_t)? + br.slice(s![2 * hd..]);
                (rh_h, rec)
            };
            let n = (&xw.slice(s![.., 2 * hd..]) + &rec).mapv(tanh);
            let h_new = &z.mapv(|v| 1.0 - v) * &n + &z * &h;
            y.index_axis_mut(Axis(0), t).assign(&h_new);
            if mode == Mode::Train {
                steps.push(StepCache {
                    h_prev: h.clone(),
                    h_q,
                    h_mask,
                    z,
                    r: rg,
                    n,
                    inner,
                });
            }
            h = h_new;
        }
        self.rec.cache = (mode == Mode::Train).then_some((ops, steps));
        Ok(y.into_dyn())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let hd = self.rec.cell.hidden;
        let (ops, steps, gy) = start_backward(&self.rec.name, &self.rec.cache, hd, grad_out)?;
        let (t_len, batch, _) = ops.x.dim();
        let (rzr, rh) = (
            ops.r.slice(s![0..2 * hd, ..]),
            ops.r.slice(s![2 * hd.., ..]),
        );
        let (mut dbw, mut dbr) = (Array1::<f32>::zeros(3 * hd), Array1::<f32>::zeros(3 * hd));
        // Every step's (quantized) errors and the recurrent operands they multiply, for the
        // weight and input gradients computed over all steps at once after the loop: the
        // `[z, r, h̃]` pre-activation errors (read by W), the error of R_h's product, ĥ and
        // (unless linear before reset) r ⊙ ĥ.
        let mut dxws = Array2::<f32>::zeros((t_len * batch, 3 * hd));
        let (mut d_rhs, mut rh_ins, mut h_qs) = (
            Array2::<f32>::zeros((t_len * batch, hd)),
            Array2::<f32>::zeros((t_len * batch, hd)),
            Array2::<f32>::zeros((t_len * batch, hd)),
        );
        let mut dh_next = Array2::<f32>::zeros((batch, hd));
        for (t, st) in steps.iter().enumerate().rev() {
            let rows = s![t * batch..(t + 1) * batch, ..];
            let dh = &gy.index_axis(Axis(0), t) + &dh_next;
            let dn = &dh * &st.z.mapv(|v| 1.0 - v);
            let mut dpre_n = &dn * &st.n.mapv(|v| 1.0 - v * v);
            // the candidate's error, read by the W_h and R_h GEMMs and by the reset gate's error
            step_error(&mut self.rec.quant, &mut dpre_n);
            let dpre_z = &dh * &(&st.h_prev - &st.n) * &st.z * &st.z.mapv(|v| 1.0 - v);
            let mut dh_prev = &dh * &st.z;
            // the candidate's recurrent path: gradient of r and of R_h's product
            let (d_r, mut d_rec_h) = if self.linear_before_reset {
                // rec = r ⊙ a, a = R_h ĥ + Rb_h
                let da = &dpre_n * &st.r;
                dbr.slice_mut(s![2 * hd..])
                    .scaled_add(1.0, &da.sum_axis(Axis(0)));
                let d_h = matmul(da.view(), rh)?;
                d_rhs.slice_mut(rows).assign(&da);
                (&dpre_n * &st.inner, d_h)
            } else {
                // rec = R_h (r ⊙ ĥ) + Rb_h
                dbr.slice_mut(s![2 * hd..])
                    .scaled_add(1.0, &dpre_n.sum_axis(Axis(0)));
                let d_rh = matmul(dpre_n.view(), rh)?;
                d_rhs.slice_mut(rows).assign(&dpre_n);
                rh_ins.slice_mut(rows).assign(&st.inner);
                (&d_rh * &st.h_q, &d_rh * &st.r)
            };
            h_qs.slice_mut(rows).assign(&st.h_q);
            // the state's gradient through R passes the state quantizer's mask
            let masked = |mut g: Array2<f32>| {
                if let Some(m) = &st.h_mask {
                    g *= m;
                }
                g
            };
            d_rec_h = masked(d_rec_h);
            dh_prev += &d_rec_h;
            let dpre_r = &d_r * &st.r * &st.r.mapv(|v| 1.0 - v);
            let mut dzr = concatenate![Axis(1), dpre_z, dpre_r];
            // the z and r gates' error, read by the W_zr and R_zr GEMMs
            step_error(&mut self.rec.quant, &mut dzr);
            dbr.slice_mut(s![0..2 * hd])
                .scaled_add(1.0, &dzr.sum_axis(Axis(0)));
            dh_prev += &masked(matmul(dzr.view(), rzr)?);
            let dxw = concatenate![Axis(1), dzr, dpre_n];
            dbw += &dxw.sum_axis(Axis(0));
            dxws.slice_mut(rows).assign(&dxw);
            dh_next = dh_prev;
        }
        let (mut dw, dx) = ops.input_grads(dxws.view())?;
        let mut dr = Array2::<f32>::zeros(ops.r.raw_dim());
        matmul_tn_reduce_par(
            dr.slice_mut(s![0..2 * hd, ..]),
            dxws.slice(s![.., 0..2 * hd]),
            h_qs.view(),
            false,
        )?;
        // R_h multiplied ĥ (linear before reset) or r ⊙ ĥ.
        let rh_in = if self.linear_before_reset {
            &h_qs
        } else {
            &rh_ins
        };
        matmul_tn_reduce_par(
            dr.slice_mut(s![2 * hd.., ..]),
            d_rhs.view(),
            rh_in.view(),
            false,
        )?;
        let dx = ops.finish(&mut dw, &mut dr, dx);
        self.rec.cell.set_grads(dw, dr, dbw, dbr);
        Ok(vec![dx])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        self.rec.cell.params_mut()
    }

    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        Some(&mut self.rec.quant)
    }
}

impl Gru {
    /// The layer of an IR `GRU` node on a sequence.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        r: &ir::Recurrent,
        ins: &[Val],
        linear_before_reset: bool,
        quant: LayerQuant,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let [w, rr, bw, br] = recurrent_weights(ctx, r);
        let layer = Gru::new(&node.name, w, rr, bw, br, linear_before_reset, quant)?;
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
        LayerQuant::new(QuantMethod::Sbm, 12)
    }

    #[test]
    fn quantized_gru_is_close_to_fp32_and_deterministic_in_both_forms() {
        for lbr in [true, false] {
            quantized_run_is_close_and_deterministic(&|| Box::new(gru(3, 4, lbr)));
        }
    }

    fn gru(i: usize, h: usize, lbr: bool) -> Gru {
        Gru::new(
            "gru",
            rand_tensor(&[3 * h, i], 0.8, 1),
            rand_tensor(&[3 * h, h], 0.8, 2),
            rand_tensor(&[3 * h], 0.5, 3),
            rand_tensor(&[3 * h], 0.5, 4),
            lbr,
            fp32(),
        )
        .unwrap()
    }

    #[test]
    fn gradients_check_through_time_in_both_forms() {
        for lbr in [true, false] {
            let x = rand_tensor(&[4, 2, 3], 1.0, 5);
            check_layer(&mut gru(3, 2, lbr), &[x], 1e-2, 2e-3, 40)
                .unwrap_or_else(|e| panic!("linear_before_reset {lbr}: {e}"));
        }
    }

    #[test]
    fn one_step_matches_the_equations() {
        // H = I = 1, W = 1 for every gate, no R or bias: z = r = σ(x), h̃ = tanh(x), h = (1−z)h̃
        let mut g = Gru::new(
            "gru",
            Tensor::ones(vec![3, 1]),
            Tensor::zeros(vec![3, 1]),
            Tensor::zeros(vec![3]),
            Tensor::zeros(vec![3]),
            true,
            fp32(),
        )
        .unwrap();
        let y = g
            .forward(&[&Tensor::from_elem(vec![1, 1, 1], 0.5)], Mode::Eval)
            .unwrap();
        let z = sigmoid(0.5);
        assert!((y[[0, 0, 0]] - (1.0 - z) * 0.5f32.tanh()).abs() < 1e-6);
        let err = g
            .forward(&[&Tensor::zeros(vec![2, 1, 4])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("gru") && err.contains("input features 4"),
            "{err}"
        );
        assert!(Gru::new(
            "g",
            Tensor::zeros(vec![4, 1]),
            Tensor::zeros(vec![3, 1]),
            Tensor::zeros(vec![3]),
            Tensor::zeros(vec![3]),
            true,
            fp32(),
        )
        .is_err());
    }
}
