//! The initialisation rule, in one place for the zoo's ONNX export and the trainer's
//! re-initialisation (`train --init seed`): both draw from one ChaCha stream seeded with the seed,
//! layer after layer in graph order, with these functions, so `zoo export NAME --seed S` writes,
//! weight for weight, the network `train --model zoo:NAME --seed S` starts from.
//!
//! - Conv weights: `N(0, 2/(k·k·C_out))` (spec §9.1), drawn output channel by output channel,
//!   then kernel row, kernel column and input channel (`[O, KH, KW, I/g]`, the trainer's layout;
//!   the zoo rearranges them to ONNX's); a conv bias PyTorch's `U(±1/√fan_in)`.
//! - Linear layers: PyTorch's `nn.Linear` default, weight and bias `U(±1/√C_in)` — except the
//!   classifier of a CIFAR model (3×32×32 input), whose weight is `N(0, 2/(C_in·C_out))` as the
//!   CPT authors' CIFAR ResNets initialise their only Linear layer (spec §9.1), with the same
//!   bias ([`LinearInit::of`]).
//!
//! Normal draws are Box–Muller from two uniforms each (the cosine branch), uniform draws `rand`'s
//! inclusive float range; the same seed gives the same bytes on every machine.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a Linear layer's weight is drawn (its bias is `U(±1/√C_in)` either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearInit {
    /// PyTorch's `nn.Linear` default: `U(±1/√C_in)`.
    PyTorch,
    /// Spec §9.1, the CIFAR ResNets' classifier: `N(0, 2/(C_in·C_out))`.
    Cifar,
}

/// Per-sample input shape of the CIFAR models.
const CIFAR_INPUT: [usize; 3] = [3, 32, 32];

impl LinearInit {
    /// The rule for a Linear layer of a model whose per-sample input has shape `input`:
    /// [`LinearInit::Cifar`] for the `classifier` (the layer that produces the model's output)
    /// of a CIFAR model, [`LinearInit::PyTorch`] for every other Linear layer.
    pub fn of(input: &[usize], classifier: bool) -> Self {
        if classifier && input == CIFAR_INPUT {
            LinearInit::Cifar
        } else {
            LinearInit::PyTorch
        }
    }
}

/// One standard-normal sample (Box–Muller; uses two uniforms).
pub fn standard_normal<R: Rng>(rng: &mut R) -> f32 {
    // 1 − U[0, 1) lies in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// `n` draws from `N(0, std²)`.
pub fn normal<R: Rng>(rng: &mut R, n: usize, std: f32) -> Vec<f32> {
    (0..n).map(|_| std * standard_normal(rng)).collect()
}

/// `n` draws from `U(−a, a)`.
pub fn uniform<R: Rng>(rng: &mut R, n: usize, a: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-a..=a)).collect()
}

/// `1/√n` (1 for `n = 0`).
fn inv_sqrt(n: usize) -> f32 {
    (n.max(1) as f32).sqrt().recip()
}

/// Conv weights `[O, KH, KW, I/g]` from `N(0, 2/(KH·KW·O))`.
pub fn conv_weight<R: Rng>(
    rng: &mut R,
    out: usize,
    kernel: [usize; 2],
    in_per_group: usize,
) -> Vec<f32> {
    let fan = (kernel[0] * kernel[1] * out).max(1) as f32;
    let n = out * kernel[0] * kernel[1] * in_per_group;
    normal(rng, n, (2.0 / fan).sqrt())
}

/// A conv bias of `out` entries from `U(±1/√fan_in)`, `fan_in = KH·KW·I/g`.
pub fn conv_bias<R: Rng>(
    rng: &mut R,
    out: usize,
    kernel: [usize; 2],
    in_per_group: usize,
) -> Vec<f32> {
    uniform(rng, out, inv_sqrt(in_per_group * kernel[0] * kernel[1]))
}

/// Linear weights `[O, I]` by `rule`, then, if `bias`, a bias of `O` entries from `U(±1/√I)`.
pub fn linear<R: Rng>(
    rng: &mut R,
    out: usize,
    inp: usize,
    rule: LinearInit,
    bias: bool,
) -> (Vec<f32>, Option<Vec<f32>>) {
    let weight = match rule {
        LinearInit::PyTorch => uniform(rng, out * inp, inv_sqrt(inp)),
        LinearInit::Cifar => normal(rng, out * inp, (2.0 / (inp * out).max(1) as f32).sqrt()),
    };
    let bias = bias.then(|| uniform(rng, out, inv_sqrt(inp)));
    (weight, bias)
}

/// A conv weight drawn `[O, KH, KW, I]` (row-major, `w` of exactly that size) rearranged to
/// ONNX's `[O, I, KH, KW]`.
fn ohwi_to_oihw(w: &[f32], [o, kh, kw, i]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0.0; o * kh * kw * i];
    for (n, &v) in w.iter().enumerate().take(out.len()) {
        let c = n % i;
        let x = n / i % kw;
        let y = n / (i * kw) % kh;
        let f = n / (i * kw * kh);
        out[((f * i + c) * kh + y) * kw + x] = v;
    }
    out
}

/// The zoo's source of initial weights: the seeded stream, or zeros for a model built for its
/// shapes only.
pub(crate) struct Init {
    rng: Option<ChaCha8Rng>,
}

impl Init {
    /// A stream seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Init {
            rng: Some(ChaCha8Rng::seed_from_u64(seed)),
        }
    }

    /// No draws: every request is zeros (allocated zeroed, so pages nobody writes stay unmapped).
    pub(crate) fn zeros() -> Self {
        Init { rng: None }
    }

    /// A conv's weight in ONNX's `[O, I/g, K, K]` (`dims`) and, if `bias`, its bias.
    pub(crate) fn conv(&mut self, dims: [usize; 4], bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
        let [o, ipg, kh, kw] = dims;
        let Some(rng) = &mut self.rng else {
            return (vec![0.0; o * ipg * kh * kw], bias.then(|| vec![0.0; o]));
        };
        let w = conv_weight(rng, o, [kh, kw], ipg);
        let b = bias.then(|| conv_bias(rng, o, [kh, kw], ipg));
        (ohwi_to_oihw(&w, [o, kh, kw, ipg]), b)
    }

    /// A Linear layer's weight `[O, I]` by `rule` and its bias.
    pub(crate) fn linear(
        &mut self,
        out: usize,
        inp: usize,
        rule: LinearInit,
    ) -> (Vec<f32>, Vec<f32>) {
        let Some(rng) = &mut self.rng else {
            return (vec![0.0; out * inp], vec![0.0; out]);
        };
        let (w, b) = linear(rng, out, inp, rule, true);
        (w, b.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(v: &[f32]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        (mean, var)
    }

    #[test]
    fn normal_has_requested_moments() {
        let v = normal(&mut ChaCha8Rng::seed_from_u64(7), 200_001, 0.5);
        assert_eq!(v.len(), 200_001);
        let (mean, var) = moments(&v);
        assert!(mean.abs() < 0.005, "mean {mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.005, "std {}", var.sqrt());
    }

    #[test]
    fn uniform_stays_in_bounds_and_fills_them() {
        let v = uniform(&mut ChaCha8Rng::seed_from_u64(3), 100_000, 0.25);
        assert!(v.iter().all(|x| x.abs() <= 0.25));
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(max > 0.249);
    }

    #[test]
    fn conv_init_has_the_spec_variance() {
        let w = conv_weight(&mut ChaCha8Rng::seed_from_u64(1), 64, [3, 3], 64);
        let (mean, var) = moments(&w);
        let want = 2.0 / (9.0 * 64.0);
        // std error of a sample variance ≈ var·√(2/n) (≈ 0.7 % here); allow 5 %.
        assert!((var / want - 1.0).abs() < 0.05, "var {var} want {want}");
        assert!(mean.abs() < 5.0 * (want / w.len() as f64).sqrt());
    }

    #[test]
    fn linear_rules_have_their_spreads() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (w, b) = linear(&mut rng, 100, 400, LinearInit::Cifar, true);
        let want = (2.0f64 / 40_000.0).sqrt();
        assert!((moments(&w).1.sqrt() / want - 1.0).abs() < 0.03);
        let b = b.unwrap_or_default();
        assert!(b.len() == 100 && b.iter().all(|x| x.abs() <= 0.05));
        // U(±a) has std a/√3: fc1 of LeNet-5 (400 → 120) gets 0.0289.
        let (w, b) = linear(&mut rng, 120, 400, LinearInit::PyTorch, false);
        let want = 0.05 / 3f64.sqrt();
        assert!((moments(&w).1.sqrt() / want - 1.0).abs() < 0.03);
        assert!(w.iter().all(|x| x.abs() <= 0.05) && b.is_none());
    }

    #[test]
    fn only_a_cifar_classifier_gets_the_cifar_rule() {
        assert_eq!(LinearInit::of(&[3, 32, 32], true), LinearInit::Cifar);
        assert_eq!(LinearInit::of(&[3, 32, 32], false), LinearInit::PyTorch);
        assert_eq!(LinearInit::of(&[1, 28, 28], true), LinearInit::PyTorch);
        assert_eq!(LinearInit::of(&[3, 224, 224], true), LinearInit::PyTorch);
    }

    #[test]
    fn ohwi_to_oihw_moves_each_entry_to_its_place() {
        let dims = [2, 3, 2, 4]; // O, KH, KW, I
        let w: Vec<f32> = (0..48).map(|v| v as f32).collect();
        let t = ohwi_to_oihw(&w, dims);
        for (o, y, x, i) in indices(dims) {
            assert_eq!(
                t[((o * 4 + i) * 3 + y) * 2 + x],
                w[((o * 3 + y) * 2 + x) * 4 + i]
            );
        }
    }

    fn indices([o, kh, kw, i]: [usize; 4]) -> Vec<(usize, usize, usize, usize)> {
        let mut v = Vec::new();
        for a in 0..o {
            for y in 0..kh {
                for x in 0..kw {
                    for c in 0..i {
                        v.push((a, y, x, c));
                    }
                }
            }
        }
        v
    }

    #[test]
    fn same_seed_same_draws_other_seed_other_draws() {
        let draw = |s| normal(&mut ChaCha8Rng::seed_from_u64(s), 10, 1.0);
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn zeros_draws_nothing() {
        let (w, b) = Init::zeros().conv([4, 2, 3, 3], true);
        assert!(w.len() == 72 && w.iter().all(|&v| v == 0.0) && b == Some(vec![0.0; 4]));
    }
}
