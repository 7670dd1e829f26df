//! An LSTM layer over a whole sequence, sequence-first (`[T, B, I] → [T, B, H]`), ONNX gate order
//! `i, o, f, c` and equations (no peepholes), zero initial state. Backward is backpropagation
//! through the `T` steps it was given: truncated BPTT is the caller cutting the stream into
//! `bptt`-long windows (`data::text::Streams`), each starting from a zero state.
//!
//! Quantized as the `cell` module says: `Ŵ`, `R̂`, `x̂` once per forward, `ĥ_{t−1}` per step, and
//! the step's gate error `dg` `[B, 4H]` (one error quantization per step) before `dW`, `dR`,
//! `dx` and `dh` are computed from it.

use ndarray::{s, Array2, Array3, ArrayView2, Axis, Ix3};

use super::cell::{sigmoid, state_operand, step_error, CellOperands, CellWeights};
use super::{cached, check_grad, expect_inputs, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use crate::quant::LayerQuant;

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
    name: String,
    cell: CellWeights,
    /// Quantization state (fp32 unless bits are set).
    pub quant: LayerQuant,
    /// Training pass: the GEMM operands and each step's state.
    cache: Option<(CellOperands, Vec<StepCache>)>,
}

/// The four gate blocks `i, o, f, c̃` of `[B, 4H]` activations.
fn split(g: &Array2<f32>, h: usize) -> [ArrayView2<'_, f32>; 4] {
    [0, 1, 2, 3].map(|k| g.slice(s![.., k * h..(k + 1) * h]))
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
            name: name.to_string(),
            cell: CellWeights::new(name, 4, w, r, bw, br)?,
            quant,
            cache: None,
        })
    }
}

impl Layer for Lstm {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = self
            .cell
            .input(&self.name, expect_inputs(&self.name, inputs, 1)?[0])?;
        let ops = self.cell.operands(&self.name, &mut self.quant, x, mode)?;
        let (_, _, bw, br) = self.cell.views(&self.name)?;
        let b = &bw + &br;
        let (t_len, batch, _) = x.dim();
        let hd = self.cell.hidden;
        let mut h = Array2::<f32>::zeros((batch, hd));
        let mut c = Array2::<f32>::zeros((batch, hd));
        let mut y = Array3::<f32>::zeros((t_len, batch, hd));
        let mut steps = Vec::with_capacity(if mode == Mode::Train { t_len } else { 0 });
        for t in 0..t_len {
            let (h_prev, h_mask) = state_operand(&mut self.quant, &h, mode);
            let mut g = ops.x.index_axis(Axis(0), t).dot(&ops.w.t()) + h_prev.dot(&ops.r.t()) + &b;
            for mut row in g.rows_mut() {
                for (k, v) in row.iter_mut().enumerate() {
                    *v = if k < 3 * hd { sigmoid(*v) } else { v.tanh() };
                }
            }
            let [gi, go, gf, gc] = split(&g, hd);
            let c_new = &gf * &c + &gi * &gc;
            let tanh_c = c_new.mapv(f32::tanh);
            let h_new = &go * &tanh_c;
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
        self.cache = (mode == Mode::Train).then_some((ops, steps));
        Ok(y.into_dyn())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (ops, steps) = cached(&self.name, &self.cache)?;
        let hd = self.cell.hidden;
        let (t_len, batch, _) = ops.x.dim();
        check_grad(&self.name, &grad_out, &[t_len, batch, hd])?;
        let gy = grad_out
            .into_dimensionality::<Ix3>()
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let (mut dw, mut dr, mut db, _, mut dx) = self.cell.zero_grads(t_len, batch);
        let mut dh_next = Array2::<f32>::zeros((batch, hd));
        let mut dc_next = Array2::<f32>::zeros((batch, hd));
        let mut dg = Array2::<f32>::zeros((batch, 4 * hd));
        for (t, st) in steps.iter().enumerate().rev() {
            let [gi, go, gf, gc] = split(&st.gates, hd);
            let dh = &gy.index_axis(Axis(0), t) + &dh_next;
            let dc = &dh * &go * &st.tanh_c.mapv(|v| 1.0 - v * v) + &dc_next;
            // pre-activation gradients: σ' = s(1 − s), tanh' = 1 − c̃²
            dg.slice_mut(s![.., 0..hd])
                .assign(&(&dc * &gc * gi * &gi.mapv(|v| 1.0 - v)));
            dg.slice_mut(s![.., hd..2 * hd])
                .assign(&(&dh * &st.tanh_c * go * &go.mapv(|v| 1.0 - v)));
            dg.slice_mut(s![.., 2 * hd..3 * hd])
                .assign(&(&dc * &st.c_prev * gf * &gf.mapv(|v| 1.0 - v)));
            dg.slice_mut(s![.., 3 * hd..])
                .assign(&(&dc * &gi * &gc.mapv(|v| 1.0 - v * v)));
            step_error(&mut self.quant, &mut dg);
            dw += &dg.t().dot(&ops.x.index_axis(Axis(0), t));
            dr += &dg.t().dot(&st.h_prev);
            db += &dg.sum_axis(Axis(0));
            dx.index_axis_mut(Axis(0), t).assign(&dg.dot(&ops.w));
            dh_next = dg.dot(&ops.r);
            if let Some(m) = &st.h_mask {
                dh_next *= m;
            }
            dc_next = &dc * &gf;
        }
        let dx = ops.finish(&mut dw, &mut dr, dx);
        // Wb and Rb enter as their sum: the same gradient
        self.cell.set_grads(dw, dr, db.clone(), db);
        Ok(vec![dx])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        self.cell.params_mut()
    }

    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        Some(&mut self.quant)
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
