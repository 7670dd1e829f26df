//! Element-wise layers beyond ReLU: a general clip to `[lo, hi]`, the logistic sigmoid and the
//! hyperbolic tangent.

use super::from_ir::{one_any, unsupported, Ctx, Val};
use super::{cached, check_grad, expect_inputs, EpilogueStep, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_kernels::fastexp;
use cptsim_models::ir::{Node, Op};
use rand::Rng;

/// `min(max(x, lo), hi)`; the gradient passes where `lo < x < hi`.
pub struct Clip {
    name: String,
    lo: f32,
    hi: f32,
    mask: Option<(Vec<usize>, Tensor)>,
}

impl Clip {
    /// A clip layer (either bound may be infinite).
    pub fn new(name: &str, lo: f32, hi: f32) -> Self {
        Self {
            name: name.to_string(),
            lo,
            hi,
            mask: None,
        }
    }
}

impl Layer for Clip {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let (lo, hi) = (self.lo, self.hi);
        self.mask = (mode == Mode::Train).then(|| {
            let m = x.mapv(|v| if v > lo && v < hi { 1.0 } else { 0.0 });
            (x.shape().to_vec(), m)
        });
        Ok(x.mapv(|v| v.max(lo).min(hi)))
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (shape, mask) = cached(&self.name, &self.mask)?;
        check_grad(&self.name, &grad_out, shape)?;
        Ok(vec![grad_out * mask])
    }
}

/// An element-wise function whose derivative is a function of its output `y` (sigmoid, tanh).
struct OutputDerived {
    name: String,
    /// The function, applied in place to a contiguous copy of the input.
    f: fn(&mut [f32]),
    /// `dy/dx` in terms of `y`.
    df: fn(f32) -> f32,
    out: Option<Tensor>,
}

impl OutputDerived {
    fn new(name: &str, f: fn(&mut [f32]), df: fn(f32) -> f32) -> Self {
        Self {
            name: name.to_string(),
            f,
            df,
            out: None,
        }
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let mut y = x.as_standard_layout().into_owned();
        let data = y
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "output is not contiguous"))?;
        (self.f)(data);
        self.out = (mode == Mode::Train).then(|| y.clone());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let y = cached(&self.name, &self.out)?;
        check_grad(&self.name, &grad_out, y.shape())?;
        Ok(vec![grad_out * &y.mapv(self.df)])
    }
}

/// Implements [`Layer`] for a newtype over [`OutputDerived`].
macro_rules! output_derived_layer {
    ($t:ident) => {
        impl Layer for $t {
            fn name(&self) -> &str {
                &self.0.name
            }

            fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
                self.0.forward(inputs, mode)
            }

            fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
                self.0.backward(grad_out)
            }
        }
    };
}

/// `1 / (1 + e^(−x))` (on the vectorised [`fastexp::exp`], relative error below 5·10⁻⁷); backward
/// `y(1 − y)`.
pub struct Sigmoid(OutputDerived);

impl Sigmoid {
    /// A sigmoid layer.
    pub fn new(name: &str) -> Self {
        Self(OutputDerived::new(name, fastexp::sigmoid_in_place, |s| {
            s * (1.0 - s)
        }))
    }
}

output_derived_layer!(Sigmoid);

impl Sigmoid {
    /// Its evaluation pass as an epilogue step (dropping what a training pass kept), alone or,
    /// with the product after it, as SiLU (`net::fuse::eval_epilogue`).
    pub(crate) fn eval_step(&mut self, silu: bool) -> EpilogueStep {
        self.0.out = None;
        if silu {
            EpilogueStep::Silu
        } else {
            EpilogueStep::Sigmoid
        }
    }
}

/// `tanh(x)`; backward `1 − y²`.
pub struct Tanh(OutputDerived);

impl Tanh {
    /// A tanh layer.
    pub fn new(name: &str) -> Self {
        Self(OutputDerived::new(
            name,
            |x| x.iter_mut().for_each(|v| *v = v.tanh()),
            |y| 1.0 - y * y,
        ))
    }
}

output_derived_layer!(Tanh);

/// The layer of an IR `Clip` (other than a ReLU's), `Sigmoid` or `Tanh` node.
pub(crate) fn build<R: Rng>(ctx: &mut Ctx<'_, R>, node: &Node, ins: &[Val]) -> Result<Val> {
    let x = one_any(node, ins)?;
    let name = node.name.as_str();
    match node.op {
        Op::Clip { min, max } => ctx.same_layout(Clip::new(name, min, max), x),
        Op::Sigmoid => ctx.same_layout(Sigmoid::new(name), x),
        Op::Tanh => ctx.same_layout(Tanh::new(name), x),
        _ => Err(unsupported(node, "not a point-wise op")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn clip_values_and_gradient() {
        let mut c = Clip::new("c", -1.0, 2.0);
        let x = Tensor::from_shape_vec(vec![1, 4], vec![-3.0, 0.5, 2.5, 1.0]).unwrap();
        let y = c.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y.as_slice().unwrap(), &[-1.0, 0.5, 2.0, 1.0]);
        // Kept away from the kinks so finite differences are valid.
        let x = rand_tensor(&[2, 3, 3, 2], 4.0, 1).mapv(|v| {
            if (v + 1.0).abs() < 0.05 || (v - 2.0).abs() < 0.05 {
                v + 0.2
            } else {
                v
            }
        });
        check_layer(&mut c, &[x], 1e-2, 1e-3, 30).unwrap();
    }

    #[test]
    fn sigmoid_values_and_gradient() {
        let mut s = Sigmoid::new("s");
        let x = Tensor::from_shape_vec(vec![1, 2], vec![0.0, 2.0]).unwrap();
        let y = s.forward(&[&x], Mode::Eval).unwrap();
        assert!((y[[0, 0]] - 0.5).abs() < 1e-7 && (y[[0, 1]] - 0.880_797_1).abs() < 1e-6);
        check_layer(&mut s, &[rand_tensor(&[3, 5], 3.0, 2)], 1e-2, 1e-3, 15).unwrap();
    }

    #[test]
    fn tanh_values_gradient_and_errors() {
        let mut t = Tanh::new("th");
        let x = Tensor::from_shape_vec(vec![1, 2], vec![0.0, 1.0]).unwrap();
        let y = t.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y[[0, 0]], 0.0);
        assert!((y[[0, 1]] - 0.761_594_2).abs() < 1e-6);
        check_layer(&mut t, &[rand_tensor(&[2, 3, 4], 2.0, 3)], 1e-2, 1e-3, 15).unwrap();
        t.forward(&[&x], Mode::Train).unwrap();
        let e = t
            .backward(Tensor::ones(vec![2, 1]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`th`"), "{e}");
        assert!(t.forward(&[&x, &x], Mode::Eval).is_err());
    }
}
