//! Weight initialisation (spec §9.1) from a seeded ChaCha stream.

use rand::Rng;

/// The tensor type (the layers' [`crate::layers::Tensor`]).
type Tensor = ndarray::ArrayD<f32>;

/// One standard-normal sample (Box–Muller; uses two uniforms).
pub fn standard_normal<R: Rng>(rng: &mut R) -> f32 {
    let u1 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2 = rng.random::<f64>();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// A tensor of the given shape with i.i.d. `N(0, std²)` entries.
pub fn normal<R: Rng>(rng: &mut R, shape: &[usize], std: f32) -> Tensor {
    Tensor::from_shape_simple_fn(shape.to_vec(), || std * standard_normal(rng))
}

/// A tensor with i.i.d. `U(−a, a)` entries.
pub fn uniform<R: Rng>(rng: &mut R, shape: &[usize], a: f32) -> Tensor {
    Tensor::from_shape_simple_fn(shape.to_vec(), || rng.random_range(-a..=a))
}

/// Conv weights `[O, KH, KW, I/g]` drawn from `N(0, 2/(KH·KW·O))` (spec §9.1).
pub fn conv_weight<R: Rng>(
    rng: &mut R,
    out: usize,
    kernel: [usize; 2],
    in_per_group: usize,
) -> Tensor {
    let fan = (kernel[0] * kernel[1] * out).max(1) as f32;
    normal(
        rng,
        &[out, kernel[0], kernel[1], in_per_group],
        (2.0 / fan).sqrt(),
    )
}

/// Linear weights `[O, I]` from `N(0, 2/(I·O))` and bias from PyTorch's default
/// `U(−1/√I, 1/√I)` (spec §9.1).
pub fn linear_weight_bias<R: Rng>(rng: &mut R, out: usize, inp: usize) -> (Tensor, Tensor) {
    let w = normal(rng, &[out, inp], (2.0 / (inp * out).max(1) as f32).sqrt());
    let b = uniform(rng, &[out], 1.0 / (inp.max(1) as f32).sqrt());
    (w, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn conv_init_has_the_spec_variance() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let w = conv_weight(&mut rng, 64, [3, 3], 64);
        let n = w.len() as f64;
        let mean = w.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = w.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let want = 2.0 / (9.0 * 64.0);
        // std error of a sample variance ≈ var·√(2/n) (≈ 0.7 % here); allow 5 %.
        assert!((var / want - 1.0).abs() < 0.05, "var {var} want {want}");
        assert!(mean.abs() < 5.0 * (want / n).sqrt());
    }
}
