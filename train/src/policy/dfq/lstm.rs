//! The LSTM cell of the DFQ gate (spec §6.2), stepped once per block with a hand-written
//! backward pass: gates `i, f, g, o` from `x·W_ihᵀ + h·W_hhᵀ + b`, `c' = f·c + i·g`,
//! `h' = o·tanh(c')`.

use ndarray::{s, Array2, Axis, Ix1};
use rand_chacha::ChaCha8Rng;

use super::dense::{mat, uniform};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::Param;

/// One LSTM cell with input size `I` and hidden size `H`.
#[derive(Clone, Debug)]
pub struct LstmCell {
    /// Input weights `[4H, I]` (gate order i, f, g, o).
    pub w_ih: Param,
    /// Recurrent weights `[4H, H]`.
    pub w_hh: Param,
    /// Bias `[4H]`.
    pub b: Param,
    hidden: usize,
}

/// What the backward pass of one step needs.
#[derive(Clone, Debug)]
pub struct LstmCache {
    x: Array2<f32>,
    h: Array2<f32>,
    c: Array2<f32>,
    /// Activated gates `[B, 4H]`.
    gates: Array2<f32>,
    tanh_c: Array2<f32>,
}

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

impl LstmCell {
    /// A cell `inputs → hidden` with PyTorch-default uniform initialisation.
    pub fn new(rng: &mut ChaCha8Rng, inputs: usize, hidden: usize) -> Self {
        Self {
            w_ih: Param::new("weight", uniform(rng, &[4 * hidden, inputs], hidden), true),
            w_hh: Param::new("weight", uniform(rng, &[4 * hidden, hidden], hidden), true),
            b: Param::new("bias", uniform(rng, &[4 * hidden], hidden), false),
            hidden,
        }
    }

    /// Hidden size `H`.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// One step: `(h', c')` from input `x` `[B, I]` and state `h`, `c` `[B, H]`.
    pub fn forward(
        &self,
        x: &Array2<f32>,
        h: &Array2<f32>,
        c: &Array2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>, LstmCache)> {
        let hd = self.hidden;
        let b = self
            .b
            .value
            .view()
            .into_dimensionality::<Ix1>()
            .map_err(|_| SimError::shape("dfq gate", "LSTM bias must be a vector"))?;
        let mut gates = x.dot(&mat(&self.w_ih.value)?.t()) + h.dot(&mat(&self.w_hh.value)?.t()) + b;
        for mut row in gates.axis_iter_mut(Axis(0)) {
            for (j, v) in row.iter_mut().enumerate() {
                *v = if (2 * hd..3 * hd).contains(&j) {
                    v.tanh()
                } else {
                    sigmoid(*v)
                };
            }
        }
        let (i, f) = (gates.slice(s![.., 0..hd]), gates.slice(s![.., hd..2 * hd]));
        let (g, o) = (
            gates.slice(s![.., 2 * hd..3 * hd]),
            gates.slice(s![.., 3 * hd..]),
        );
        let c_new = &f * c + &i * &g;
        let tanh_c = c_new.mapv(f32::tanh);
        let h_new = &o * &tanh_c;
        let cache = LstmCache {
            x: x.clone(),
            h: h.clone(),
            c: c.clone(),
            gates,
            tanh_c,
        };
        Ok((h_new, c_new, cache))
    }

    /// Backward of one step: adds the parameter gradients and returns `(dx, dh, dc)` from the
    /// gradients `dh'`, `dc'` of the step's outputs.
    pub fn backward(
        &mut self,
        cache: &LstmCache,
        dh_new: &Array2<f32>,
        dc_new: &Array2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>, Array2<f32>)> {
        let hd = self.hidden;
        let gt = &cache.gates;
        let (i, f) = (gt.slice(s![.., 0..hd]), gt.slice(s![.., hd..2 * hd]));
        let (g, o) = (gt.slice(s![.., 2 * hd..3 * hd]), gt.slice(s![.., 3 * hd..]));
        let tc = &cache.tanh_c;
        let d_o = dh_new * tc;
        let dc = dc_new + &(dh_new * &o * &tc.mapv(|t| 1.0 - t * t));
        let mut da = Array2::<f32>::zeros(gt.raw_dim());
        da.slice_mut(s![.., 0..hd])
            .assign(&(&dc * &g * &i.mapv(|v| v * (1.0 - v))));
        da.slice_mut(s![.., hd..2 * hd])
            .assign(&(&dc * &cache.c * &f.mapv(|v| v * (1.0 - v))));
        da.slice_mut(s![.., 2 * hd..3 * hd])
            .assign(&(&dc * &i * &g.mapv(|v| 1.0 - v * v)));
        da.slice_mut(s![.., 3 * hd..])
            .assign(&(&d_o * &o.mapv(|v| v * (1.0 - v))));
        let dc_prev = &dc * &f;
        self.w_ih.grad += &da.t().dot(&cache.x).into_dyn();
        self.w_hh.grad += &da.t().dot(&cache.h).into_dyn();
        self.b.grad += &da.sum_axis(Axis(0)).into_dyn();
        let dx = da.dot(&mat(&self.w_ih.value)?);
        let dh = da.dot(&mat(&self.w_hh.value)?);
        Ok((dx, dh, dc_prev))
    }

    /// Zeroes the accumulated gradients.
    pub fn zero_grad(&mut self) {
        for p in self.params_mut() {
            p.grad.fill(0.0);
        }
    }

    /// Input weights, recurrent weights, bias.
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.w_ih, &mut self.w_hh, &mut self.b]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rand2(r: usize, c: usize, seed: u64) -> Array2<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        uniform(&mut rng, &[r, c], 1).into_dimensionality().unwrap()
    }

    /// Loss `Σ rh·h' + Σ rc·c'` (f64).
    fn loss(cell: &LstmCell, x: &Array2<f32>, h: &Array2<f32>, c: &Array2<f32>) -> f64 {
        let (hn, cn, _) = cell.forward(x, h, c).unwrap();
        let (rh, rc) = (rand2(3, 4, 11), rand2(3, 4, 12));
        (&hn * &rh).sum() as f64 + (&cn * &rc).sum() as f64
    }

    fn close(what: &str, a: f64, n: f64) {
        assert!(
            (a - n).abs() <= 2e-3 + 2e-2 * n.abs().max(a.abs()),
            "{what}: analytic {a} vs numeric {n}"
        );
    }

    #[test]
    fn lstm_cell_gradients_match_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut cell = LstmCell::new(&mut rng, 5, 4);
        let (x, h, c) = (rand2(3, 5, 1), rand2(3, 4, 2), rand2(3, 4, 3));
        let (_, _, cache) = cell.forward(&x, &h, &c).unwrap();
        cell.zero_grad();
        let (dx, dh, dc) = cell
            .backward(&cache, &rand2(3, 4, 11), &rand2(3, 4, 12))
            .unwrap();
        let eps = 1e-2f32;
        let num = |cell: &LstmCell, x: &Array2<f32>, h: &Array2<f32>, c: &Array2<f32>| {
            loss(cell, x, h, c)
        };
        for (name, a, which) in [("dx", &dx, 0), ("dh", &dh, 1), ("dc", &dc, 2)] {
            for j in 0..a.len() {
                let (r, k) = (j / a.ncols(), j % a.ncols());
                let mut ins = [x.clone(), h.clone(), c.clone()];
                ins[which][[r, k]] += eps;
                let up = num(&cell, &ins[0], &ins[1], &ins[2]);
                ins[which][[r, k]] -= 2.0 * eps;
                let down = num(&cell, &ins[0], &ins[1], &ins[2]);
                close(name, a[[r, k]] as f64, (up - down) / (2.0 * eps as f64));
            }
        }
        let checked = crate::policy::dfq::tests::check_param_grads(
            &mut cell,
            LstmCell::params_mut,
            |cell| loss(cell, &x, &h, &c),
            3,
            2e-2,
        );
        assert!(checked > 30, "{checked}");
    }
}
