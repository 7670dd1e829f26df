//! Finite-difference gradient checks shared by the layer tests.
//!
//! For a random upstream gradient `R`, the scalar `L = Σ R·f(inputs)` is accumulated in f64; its
//! central differences with step `eps` are compared with what `backward` returns, for sampled
//! elements of every input and every parameter.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Layer, Mode, Tensor};

/// A tensor of uniform values in `[-a, a]`, seeded.
pub fn rand_tensor(shape: &[usize], a: f32, seed: u64) -> Tensor {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Tensor::from_shape_simple_fn(shape.to_vec(), || rng.random_range(-a..=a))
}

fn loss(layer: &mut dyn Layer, inputs: &[Tensor], r: &Tensor) -> f64 {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let out = layer.forward(&refs, Mode::Train).unwrap();
    out.iter()
        .zip(r.iter())
        .map(|(&a, &b)| a as f64 * b as f64)
        .sum()
}

fn nudge(layer: &mut dyn Layer, p: usize, j: usize, d: f32) {
    layer.params_mut()[p].value.as_slice_mut().unwrap()[j] += d;
}

fn compare(what: &str, analytic: f64, numeric: f64, tol: f64) {
    let scale = 1.0f64.max(analytic.abs()).max(numeric.abs());
    assert!(
        (analytic - numeric).abs() <= tol * scale,
        "{what}: analytic {analytic} vs numeric {numeric}"
    );
}

/// Checks every input gradient and every parameter gradient of `layer` at `inputs`
/// (at most `samples` elements of each tensor). Panics on a mismatch.
pub fn check_layer(layer: &mut dyn Layer, inputs: &[Tensor], eps: f32, tol: f64, samples: usize) {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let out = layer.forward(&refs, Mode::Train).unwrap();
    let r = rand_tensor(out.shape(), 1.0, 99);
    let dins = layer.backward(r.clone()).unwrap();
    assert_eq!(dins.len(), inputs.len(), "one gradient per input");
    let pgrads: Vec<Tensor> = layer.params_mut().iter().map(|p| p.grad.clone()).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut xs = inputs.to_vec();
    for i in 0..xs.len() {
        assert_eq!(dins[i].shape(), xs[i].shape(), "input {i} gradient shape");
        for _ in 0..samples.min(xs[i].len()) {
            let j = rng.random_range(0..xs[i].len());
            let orig = xs[i].as_slice().unwrap()[j];
            xs[i].as_slice_mut().unwrap()[j] = orig + eps;
            let lp = loss(layer, &xs, &r);
            xs[i].as_slice_mut().unwrap()[j] = orig - eps;
            let lm = loss(layer, &xs, &r);
            xs[i].as_slice_mut().unwrap()[j] = orig;
            let num = (lp - lm) / (2.0 * eps as f64);
            compare(
                &format!("input {i}[{j}]"),
                dins[i].as_slice().unwrap()[j] as f64,
                num,
                tol,
            );
        }
    }
    for (p, grad) in pgrads.iter().enumerate() {
        for _ in 0..samples.min(grad.len()) {
            let j = rng.random_range(0..grad.len());
            nudge(layer, p, j, eps);
            let lp = loss(layer, &xs, &r);
            nudge(layer, p, j, -2.0 * eps);
            let lm = loss(layer, &xs, &r);
            nudge(layer, p, j, eps);
            let num = (lp - lm) / (2.0 * eps as f64);
            compare(
                &format!("param {p}[{j}]"),
                grad.as_slice().unwrap()[j] as f64,
                num,
                tol,
            );
        }
    }
}
