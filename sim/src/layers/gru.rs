//! A GRU layer over a whole sequence, sequence-first (`[T, B, I] → [T, B, H]`), ONNX gate order
//! `z, r, h` and equations, zero initial state, both ONNX forms of the candidate:
//! `linear_before_reset` (PyTorch's) `h̃ = tanh(W_h x + Wb_h + r ⊙ (R_h h + Rb_h))`, otherwise
//! `h̃ = tanh(W_h x + Wb_h + R_h (r ⊙ h) + Rb_h)`; then `h' = (1 − z) ⊙ h̃ + z ⊙ h`. Backward is
//! backpropagation through the steps it was given, as for [`super::lstm::Lstm`].

use ndarray::{concatenate, s, Array2, Array3, Axis, Ix3};

use super::cell::{sigmoid, CellWeights};
use super::{cached, check_grad, expect_inputs, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};

/// What backward needs of one step.
struct StepCache {
    h_prev: Array2<f32>,
    z: Array2<f32>,
    r: Array2<f32>,
    n: Array2<f32>,
    /// `R_h h + Rb_h` (linear before reset) or `r ⊙ h` (otherwise).
    inner: Array2<f32>,
}

/// The GRU layer.
pub struct Gru {
    name: String,
    cell: CellWeights,
    linear_before_reset: bool,
    /// Training pass: the input `[T, B, I]` and each step's state.
    cache: Option<(Array3<f32>, Vec<StepCache>)>,
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
    ) -> Result<Self> {
        Ok(Self {
            name: name.to_string(),
            cell: CellWeights::new(name, 3, w, r, bw, br)?,
            linear_before_reset,
            cache: None,
        })
    }
}

impl Layer for Gru {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = self
            .cell
            .input(&self.name, expect_inputs(&self.name, inputs, 1)?[0])?;
        let (w, r, bw, br) = self.cell.views(&self.name)?;
        let (t_len, batch, _) = x.dim();
        let hd = self.cell.hidden;
        let (rzr, rh) = (r.slice(s![0..2 * hd, ..]), r.slice(s![2 * hd.., ..]));
        let mut h = Array2::<f32>::zeros((batch, hd));
        let mut y = Array3::<f32>::zeros((t_len, batch, hd));
        let mut steps = Vec::with_capacity(if mode == Mode::Train { t_len } else { 0 });
        for t in 0..t_len {
            let xw = x.index_axis(Axis(0), t).dot(&w.t()) + bw;
            let zr = (&xw.slice(s![.., 0..2 * hd]) + &h.dot(&rzr.t()) + br.slice(s![0..2 * hd]))
                .mapv(sigmoid);
            let (z, rg) = (
                zr.slice(s![.., 0..hd]).to_owned(),
                zr.slice(s![.., hd..]).to_owned(),
            );
            let (inner, rec) = if self.linear_before_reset {
                let a = h.dot(&rh.t()) + br.slice(s![2 * hd..]);
                let rec = &rg * &a;
                (a, rec)
            } else {
                let rh_h = &rg * &h;
                let rec = rh_h.dot(&rh.t()) + br.slice(s![2 * hd..]);
                (rh_h, rec)
            };
            let n = (&xw.slice(s![.., 2 * hd..]) + &rec).mapv(f32::tanh);
            let h_new = &z.mapv(|v| 1.0 - v) * &n + &z * &h;
            y.index_axis_mut(Axis(0), t).assign(&h_new);
            if mode == Mode::Train {
                steps.push(StepCache {
                    h_prev: h.clone(),
                    z,
                    r: rg,
                    n,
                    inner,
                });
            }
            h = h_new;
        }
        self.cache = (mode == Mode::Train).then(|| (x.to_owned(), steps));
        Ok(y.into_dyn())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (w, r, _, _) = self.cell.views(&self.name)?;
        let (x, steps) = cached(&self.name, &self.cache)?;
        let hd = self.cell.hidden;
        let (t_len, batch, _) = x.dim();
        check_grad(&self.name, &grad_out, &[t_len, batch, hd])?;
        let gy = grad_out
            .into_dimensionality::<Ix3>()
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let (rzr, rh) = (r.slice(s![0..2 * hd, ..]), r.slice(s![2 * hd.., ..]));
        let (mut dw, mut dr, mut dbw, mut dbr, mut dx) = self.cell.zero_grads(t_len, batch);
        let mut dh_next = Array2::<f32>::zeros((batch, hd));
        for (t, st) in steps.iter().enumerate().rev() {
            let dh = &gy.index_axis(Axis(0), t) + &dh_next;
            let dn = &dh * &st.z.mapv(|v| 1.0 - v);
            let dpre_n = &dn * &st.n.mapv(|v| 1.0 - v * v);
            let dpre_z = &dh * &(&st.h_prev - &st.n) * &st.z * &st.z.mapv(|v| 1.0 - v);
            let mut dh_prev = &dh * &st.z;
            // the candidate's recurrent path: gradient of r and of R_h's product
            let (d_r, d_rec_h) = if self.linear_before_reset {
                // rec = r ⊙ a, a = R_h h + Rb_h
                let da = &dpre_n * &st.r;
                dr.slice_mut(s![2 * hd.., ..])
                    .scaled_add(1.0, &da.t().dot(&st.h_prev));
                dbr.slice_mut(s![2 * hd..])
                    .scaled_add(1.0, &da.sum_axis(Axis(0)));
                (&dpre_n * &st.inner, da.dot(&rh))
            } else {
                // rec = R_h (r ⊙ h) + Rb_h
                dr.slice_mut(s![2 * hd.., ..])
                    .scaled_add(1.0, &dpre_n.t().dot(&st.inner));
                dbr.slice_mut(s![2 * hd..])
                    .scaled_add(1.0, &dpre_n.sum_axis(Axis(0)));
                let d_rh = dpre_n.dot(&rh);
                (&d_rh * &st.h_prev, &d_rh * &st.r)
            };
            dh_prev += &d_rec_h;
            let dpre_r = &d_r * &st.r * &st.r.mapv(|v| 1.0 - v);
            let dzr = concatenate![Axis(1), dpre_z, dpre_r];
            dr.slice_mut(s![0..2 * hd, ..])
                .scaled_add(1.0, &dzr.t().dot(&st.h_prev));
            dbr.slice_mut(s![0..2 * hd])
                .scaled_add(1.0, &dzr.sum_axis(Axis(0)));
            dh_prev += &dzr.dot(&rzr);
            let dxw = concatenate![Axis(1), dzr, dpre_n];
            dw += &dxw.t().dot(&x.index_axis(Axis(0), t));
            dbw += &dxw.sum_axis(Axis(0));
            dx.index_axis_mut(Axis(0), t).assign(&dxw.dot(&w));
            dh_next = dh_prev;
        }
        self.cell.set_grads(dw, dr, dbw, dbr);
        Ok(vec![dx.into_dyn()])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        self.cell.params_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    fn gru(i: usize, h: usize, lbr: bool) -> Gru {
        Gru::new(
            "gru",
            rand_tensor(&[3 * h, i], 0.8, 1),
            rand_tensor(&[3 * h, h], 0.8, 2),
            rand_tensor(&[3 * h], 0.5, 3),
            rand_tensor(&[3 * h], 0.5, 4),
            lbr,
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
            true
        )
        .is_err());
    }
}
