//! The initialisation rule's draws ([`cptsim_models::zoo::init`], shared with the zoo's export)
//! as engine tensors.

use cptsim_models::zoo::init::{self, LinearInit};
use rand::Rng;

/// The tensor type (the layers' [`crate::layers::Tensor`]).
type Tensor = ndarray::ArrayD<f32>;

/// `values` (exactly as many as `shape` holds) as a tensor of that shape.
fn tensor(shape: &[usize], values: Vec<f32>) -> Tensor {
    let mut values = values.into_iter();
    Tensor::from_shape_simple_fn(shape.to_vec(), || values.next().unwrap_or(0.0))
}

/// A tensor with i.i.d. `U(−a, a)` entries.
pub fn uniform<R: Rng>(rng: &mut R, shape: &[usize], a: f32) -> Tensor {
    tensor(shape, init::uniform(rng, shape.iter().product(), a))
}

/// Conv weights `[O, KH, KW, I/g]` ([`init::conv_weight`]).
pub fn conv_weight<R: Rng>(
    rng: &mut R,
    out: usize,
    kernel: [usize; 2],
    in_per_group: usize,
) -> Tensor {
    let shape = [out, kernel[0], kernel[1], in_per_group];
    tensor(&shape, init::conv_weight(rng, out, kernel, in_per_group))
}

/// A conv bias ([`init::conv_bias`]).
pub fn conv_bias<R: Rng>(
    rng: &mut R,
    out: usize,
    kernel: [usize; 2],
    in_per_group: usize,
) -> Tensor {
    tensor(&[out], init::conv_bias(rng, out, kernel, in_per_group))
}

/// Linear weights `[O, I]` by `rule` and, if `bias`, a bias ([`init::linear`]).
pub fn linear<R: Rng>(
    rng: &mut R,
    out: usize,
    inp: usize,
    rule: LinearInit,
    bias: bool,
) -> (Tensor, Option<Tensor>) {
    let (w, b) = init::linear(rng, out, inp, rule, bias);
    (tensor(&[out, inp], w), b.map(|b| tensor(&[out], b)))
}

/// A classifier's weights `[O, I]` and bias by spec §9.1's CIFAR rule (the test networks').
pub fn linear_weight_bias<R: Rng>(rng: &mut R, out: usize, inp: usize) -> (Tensor, Tensor) {
    let (w, b) = linear(rng, out, inp, LinearInit::Cifar, true);
    (w, b.unwrap_or_else(|| Tensor::zeros(vec![out])))
}
