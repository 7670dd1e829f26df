//! The parameter-free element-wise functions of the IR's `Unary` op (HardSwish, HardSigmoid,
//! LeakyRelu, Elu, Softplus, Mish, a constant power, Exp, Sqrt, Abs, Neg, Erf): one layer that
//! keeps its input in training and differentiates the function there.

use super::from_ir::{one_any, Ctx, Val};
use super::lastaxis::erfc_nonnegative;
use super::{cached, check_grad, expect_inputs, standard, EpilogueStep, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::{Node, Unary};
use rand::Rng;

/// `2/√π`, the error function's derivative at 0.
const TWO_OVER_SQRT_PI: f32 = std::f32::consts::FRAC_2_SQRT_PI;

/// `ln(1 + eˣ)` without overflow for large `x`.
fn softplus(x: f32) -> f32 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn erf(x: f32) -> f32 {
    let e = 1.0 - erfc_nonnegative(x.abs());
    if x < 0.0 {
        -e
    } else {
        e
    }
}

/// `f(x)` for the function `u`.
pub(crate) fn value(u: Unary, x: f32) -> f32 {
    match u {
        Unary::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        Unary::HardSigmoid { alpha, beta } => (alpha * x + beta).clamp(0.0, 1.0),
        Unary::LeakyRelu { alpha } => {
            if x >= 0.0 {
                x
            } else {
                alpha * x
            }
        }
        Unary::Elu { alpha } => {
            if x > 0.0 {
                x
            } else {
                alpha * x.exp_m1()
            }
        }
        Unary::Softplus => softplus(x),
        Unary::Mish => x * softplus(x).tanh(),
        Unary::Pow { exponent } => x.powf(exponent),
        Unary::Exp => x.exp(),
        Unary::Sqrt => x.sqrt(),
        Unary::Abs => x.abs(),
        Unary::Neg => -x,
        Unary::Erf => erf(x),
        Unary::Equal { value } => f32::from(u8::from(x == value)),
        Unary::Not => f32::from(u8::from(x == 0.0)),
        Unary::Trunc => x.trunc(),
    }
}

cptsim_kernels::simd::multiversion! {
    /// [`value`] of HardSwish for each of `x`, in place: the same operations, vectorised.
    fn hard_swish_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            let t = *v;
            *v = t * cptsim_kernels::simd::clamp(t / 6.0 + 0.5, 0.0, 1.0);
        }
    }
}

cptsim_kernels::simd::multiversion! {
    /// [`value`] of HardSigmoid for each of `x`, in place: the same operations, vectorised.
    fn hard_sigmoid_in_place(x: &mut [f32], alpha: f32, beta: f32) {
        for v in x.iter_mut() {
            *v = cptsim_kernels::simd::clamp(alpha * *v + beta, 0.0, 1.0);
        }
    }
}

/// Values per slice [`map_checked`] maps at once (16 KiB: in L1 with its copy).
const CHECK_SLICE: usize = 4096;

/// `x[i] = value(u, x[i])` for every value, or an error naming `layer` and the first value
/// whose result is not a number (`x` then partly mapped). HardSwish and HardSigmoid run
/// vectorised, the other functions value by value; each value gets [`value`]'s operations.
pub(crate) fn map_checked(layer: &str, u: Unary, x: &mut [f32]) -> Result<()> {
    let mut before = [0.0f32; CHECK_SLICE];
    for part in x.chunks_mut(CHECK_SLICE) {
        let before = &mut before[..part.len()];
        before.copy_from_slice(part);
        match u {
            Unary::HardSwish => hard_swish_in_place(part),
            Unary::HardSigmoid { alpha, beta } => hard_sigmoid_in_place(part, alpha, beta),
            _ => part.iter_mut().for_each(|v| *v = value(u, *v)),
        }
        if let Some(i) = part.iter().position(|v| v.is_nan()) {
            return Err(SimError::shape(
                layer,
                format!("{} of {} is not a number", u.name(), before[i]),
            ));
        }
    }
    Ok(())
}

/// `f′(x)` for the function `u` (one-sided where `f` has a kink: the side PyTorch takes).
pub(crate) fn derivative(u: Unary, x: f32) -> f32 {
    match u {
        Unary::HardSwish => {
            if x < -3.0 {
                0.0
            } else if x > 3.0 {
                1.0
            } else {
                x / 3.0 + 0.5
            }
        }
        Unary::HardSigmoid { alpha, beta } => {
            let z = alpha * x + beta;
            if z > 0.0 && z < 1.0 {
                alpha
            } else {
                0.0
            }
        }
        Unary::LeakyRelu { alpha } => {
            if x > 0.0 {
                1.0
            } else {
                alpha
            }
        }
        Unary::Elu { alpha } => {
            if x > 0.0 {
                1.0
            } else {
                alpha * x.exp()
            }
        }
        Unary::Softplus => sigmoid(x),
        Unary::Mish => {
            let t = softplus(x).tanh();
            t + x * sigmoid(x) * (1.0 - t * t)
        }
        Unary::Pow { exponent } if exponent == 0.0 => 0.0,
        Unary::Pow { exponent } => exponent * x.powf(exponent - 1.0),
        Unary::Exp => x.exp(),
        Unary::Sqrt => 0.5 / x.sqrt(),
        Unary::Abs => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        Unary::Neg => -1.0,
        Unary::Erf => TWO_OVER_SQRT_PI * (-x * x).exp(),
        // steps: zero almost everywhere (masks and ids carry no gradient)
        Unary::Equal { .. } | Unary::Not | Unary::Trunc => 0.0,
    }
}

/// An element-wise [`Unary`] function; in training it keeps its input for backward.
pub struct UnaryLayer {
    name: String,
    f: Unary,
    input: Option<Tensor>,
}

impl UnaryLayer {
    /// A layer applying `f` element-wise.
    pub fn new(name: &str, f: Unary) -> Self {
        Self {
            name: name.to_string(),
            f,
            input: None,
        }
    }

    /// The layer of an IR `Unary` node (any input layout: the function is element-wise).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        f: Unary,
    ) -> Result<Val> {
        let x = one_any(node, ins)?;
        ctx.same_layout(UnaryLayer::new(&node.name, f), x)
    }
}

impl UnaryLayer {
    /// Its evaluation pass as an epilogue step (`net::fuse::eval_epilogue`), dropping what a
    /// training pass kept.
    pub(crate) fn eval_step(&mut self) -> EpilogueStep {
        self.input = None;
        EpilogueStep::Unary {
            layer: self.name.clone(),
            f: self.f,
        }
    }
}

impl Layer for UnaryLayer {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let mut y = standard(x.view());
        let ys = y
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "output not contiguous"))?;
        map_checked(&self.name, self.f, ys)?;
        self.input = (mode == Mode::Train).then(|| x.to_owned());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let x = cached(&self.name, &self.input)?;
        check_grad(&self.name, &grad_out, x.shape())?;
        let f = self.f;
        let mut dx = grad_out;
        dx.zip_mut_with(x, |g, &v| *g *= derivative(f, v));
        Ok(vec![dx])
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    fn all() -> Vec<Unary> {
        vec![
            Unary::HardSwish,
            Unary::HardSigmoid {
                alpha: 1.0 / 6.0,
                beta: 0.5,
            },
            Unary::LeakyRelu { alpha: 0.1 },
            Unary::Elu { alpha: 1.0 },
            Unary::Softplus,
            Unary::Mish,
            Unary::Pow { exponent: 3.0 },
            Unary::Pow { exponent: 2.0 },
            Unary::Exp,
            Unary::Abs,
            Unary::Neg,
            Unary::Erf,
        ]
    }

    #[test]
    fn values_match_their_definitions() {
        let v = |u, x| value(u, x);
        assert_eq!(v(Unary::HardSwish, 1.0), 1.0 * (1.0 / 6.0 + 0.5));
        assert_eq!(v(Unary::HardSwish, -4.0), 0.0);
        assert_eq!(v(Unary::HardSwish, 5.0), 5.0);
        assert_eq!(v(Unary::LeakyRelu { alpha: 0.01 }, -2.0), -0.02);
        assert!((v(Unary::Elu { alpha: 1.0 }, -1.0) - (-0.632_120_6)).abs() < 1e-6);
        assert!((v(Unary::Softplus, 0.0) - std::f32::consts::LN_2).abs() < 1e-7);
        assert_eq!(v(Unary::Softplus, 100.0), 100.0);
        assert!((v(Unary::Mish, 1.0) - 0.865_098_4).abs() < 1e-6);
        assert_eq!(v(Unary::Pow { exponent: 3.0 }, -2.0), -8.0);
        assert!((v(Unary::Erf, 0.5) - 0.520_499_9).abs() < 1e-6);
        assert!((v(Unary::Erf, -1.0) + 0.842_700_8).abs() < 1e-6);
        assert_eq!(v(Unary::Sqrt, 4.0), 2.0);
        // RoBERTa's padding mask and position ids
        let ids = [1.0, 5.0, 0.0, 1.0];
        let eq: Vec<f32> = ids
            .iter()
            .map(|&x| v(Unary::Equal { value: 1.0 }, x))
            .collect();
        assert_eq!(eq, [1.0, 0.0, 0.0, 1.0]);
        let not: Vec<f32> = eq.iter().map(|&x| v(Unary::Not, x)).collect();
        assert_eq!(not, [0.0, 1.0, 1.0, 0.0]);
        assert_eq!((v(Unary::Trunc, -2.7), v(Unary::Trunc, 3.9)), (-2.0, 3.0));
        assert_eq!(derivative(Unary::Not, 0.0), 0.0);
    }

    #[test]
    fn every_function_has_the_gradient_of_its_values() {
        // Kept away from the kinks (0, ±3, the hard sigmoid's ±3) for finite differences.
        let x = rand_tensor(&[2, 3, 3, 4], 4.0, 11).mapv(|v| {
            let near = |k: f32| (v - k).abs() < 0.05;
            if near(0.0) || near(3.0) || near(-3.0) {
                v + 0.2
            } else {
                v
            }
        });
        for u in all() {
            let mut l = UnaryLayer::new(u.name(), u);
            check_layer(&mut l, std::slice::from_ref(&x), 1e-3, 2e-3, 40)
                .unwrap_or_else(|e| panic!("{}: {e}", u.name()));
        }
        let pos = x.mapv(|v| v.abs() + 0.5);
        let mut s = UnaryLayer::new("sqrt", Unary::Sqrt);
        check_layer(&mut s, &[pos.clone()], 1e-3, 2e-3, 40).unwrap();
        let mut p = UnaryLayer::new("pow", Unary::Pow { exponent: 0.5 });
        check_layer(&mut p, &[pos], 1e-3, 2e-3, 40).unwrap();
    }

    #[test]
    fn a_not_a_number_is_an_error_naming_the_layer() {
        let mut s = UnaryLayer::new("enc/sqrt", Unary::Sqrt);
        let x = Tensor::from_shape_vec(vec![1, 2], vec![4.0, -1.0]).unwrap();
        let e = s.forward(&[&x], Mode::Eval).unwrap_err().to_string();
        assert!(e.contains("enc/sqrt") && e.contains("Sqrt of -1"), "{e}");
        let mut s = UnaryLayer::new("u", Unary::Exp);
        assert!(s.backward(Tensor::ones(vec![1, 2])).is_err());
    }
}
