//! The SBM quantizer as the reference code implements it (spec §1.2): weights per output channel,
//! activations per tensor (EMA of the range for eval), errors per tensor with stochastic rounding.
//! All use the affine primitive of [`super::affine`]; the backward rule is the identity (STE).

use ndarray::{Array2, ArrayView2, Axis};

use super::affine::{codes, fake_quant, fake_quant_stochastic, min_max, Grid};
use super::RangeEma;

/// Quantizes each row (output channel) of `w` `[O, K]` with its own min/max, deterministically.
pub fn weights(w: ArrayView2<f32>, bits: u32) -> Array2<f32> {
    let mut q = w.to_owned();
    for mut row in q.axis_iter_mut(Axis(0)) {
        let mut buf = row.to_vec();
        let (lo, hi) = min_max(&buf);
        fake_quant(&mut buf, lo, hi - lo, bits);
        row.iter_mut().zip(buf).for_each(|(d, s)| *d = s);
    }
    q
}

/// The integer codes of [`weights`] (`[O, K]`, as `f32`) and each row's grid.
pub fn weight_codes(w: ArrayView2<f32>, bits: u32) -> (Array2<f32>, Vec<Grid>) {
    let mut q = w.to_owned();
    let mut grids = Vec::with_capacity(w.nrows());
    for mut row in q.axis_iter_mut(Axis(0)) {
        let buf = row.to_vec();
        let (lo, hi) = min_max(&buf);
        let grid = Grid::new(lo, hi - lo, bits);
        row.iter_mut()
            .zip(codes(&buf, grid))
            .for_each(|(d, s)| *d = s);
        grids.push(grid);
    }
    (q, grids)
}

/// The range an activation tensor is quantized with: the batch min/max in training (which also
/// updates the EMA), the EMA in eval.
fn activation_range(x: &[f32], ema: &mut RangeEma, training: bool) -> (f32, f32) {
    if training {
        let (lo, hi) = min_max(x);
        ema.update(lo, hi - lo);
        (lo, hi - lo)
    } else {
        (ema.lo, ema.range)
    }
}

/// Quantizes an activation tensor in place with one range (see [`activation_range`]).
pub fn activations(x: &mut [f32], bits: u32, ema: &mut RangeEma, training: bool) {
    let (lo, range) = activation_range(x, ema, training);
    fake_quant(x, lo, range, bits);
}

/// The grid [`activations`] quantizes `x` on (updating the EMA as it does).
pub fn activation_grid(x: &[f32], bits: u32, ema: &mut RangeEma, training: bool) -> Grid {
    let (lo, range) = activation_range(x, ema, training);
    Grid::new(lo, range, bits)
}

/// Quantizes an error tensor in place with its own min/max and stochastic rounding.
pub fn errors(g: &mut [f32], bits: u32, seed: u64) {
    let (lo, hi) = min_max(g);
    fake_quant_stochastic(g, lo, hi - lo, bits, seed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn weights_use_per_channel_ranges() {
        let w = array![
            [0.0f32, 1.0, 2.0, 3.0],
            [-1.0, -0.4, 0.4, 1.0],
            [5.0, 5.0, 5.0, 5.0]
        ];
        let q = weights(w.view(), 1);
        // row 0: lo 0, step 3: u = 0, ⅓, ⅔, 1 → 0, 0, 1, 1
        // row 1: lo −1, step 2: u = 0, 0.3, 0.7, 1 → 0, 0, 1, 1
        // row 2: constant → lo
        assert_eq!(
            q,
            array![
                [0.0, 0.0, 3.0, 3.0],
                [-1.0, -1.0, 1.0, 1.0],
                [5.0, 5.0, 5.0, 5.0]
            ]
        );
        // 2 bits on row 1: step 2/3, u = 0, 0.9, 2.1, 3 → 0, 1, 2, 3
        let q2 = weights(w.view(), 2);
        let s = 2.0f32 / 3.0;
        let expect = [-1.0, -1.0 + s, -1.0 + 2.0 * s, 1.0];
        for (a, b) in q2.row(1).iter().zip(expect) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn activations_train_updates_ema_and_eval_uses_it() {
        let mut ema = RangeEma::default();
        let mut x = vec![0.0f32, 0.25, 1.0, 2.0];
        activations(&mut x, 2, &mut ema, true);
        // step 2/3: u = 0, 0.375, 1.5, 3 → 0, 0, 2, 3
        assert_eq!(x, vec![0.0, 0.0, 4.0 / 3.0, 2.0]);
        // EMA starts at 0: 0.1·batch
        assert!((ema.lo - 0.0).abs() < 1e-7 && (ema.range - 0.2).abs() < 1e-7);
        let mut e = vec![0.05f32, 0.5];
        activations(&mut e, 1, &mut ema, false);
        // eval range [0, 0.2], 1 bit: 0.05 → 0, 0.5 → clamped to 0.2
        assert_eq!(e[0], 0.0);
        assert!((e[1] - 0.2).abs() < 1e-6, "{}", e[1]);
        assert!(
            (ema.range - 0.2).abs() < 1e-7,
            "eval must not update the EMA"
        );
    }

    #[test]
    fn errors_land_on_the_per_tensor_grid() {
        let mut g: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.1).sin() * 1e-3).collect();
        let (lo, hi) = min_max(&g);
        errors(&mut g, 4, 3);
        let s = (hi - lo) / 15.0;
        for v in &g {
            let u = (v - lo) / s;
            assert!(
                (u - u.round()).abs() < 1e-3 && (-1e-3..=15.001).contains(&u),
                "{u}"
            );
        }
    }
}
