//! Finite-difference gradient checks shared by the layer tests.
//!
//! For a random upstream gradient `R`, the scalar `L = Σ R·f(inputs)` is accumulated in f64; its
//! central differences with step `eps` are compared with what `backward` returns, for sampled
//! elements of every input and every parameter. A mismatch is returned as an error message.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Layer, Mode, Tensor};
use crate::quant::hook::QuantHook;

pub use cptsim_testdata::rand_tensor;

type Check<T> = Result<T, String>;

fn get(t: &Tensor, j: usize) -> Check<f64> {
    t.as_slice()
        .and_then(|s| s.get(j))
        .map(|&v| v as f64)
        .ok_or_else(|| format!("element {j} of a {:?} tensor", t.shape()))
}

fn add_at(t: &mut Tensor, j: usize, d: f32) -> Check<()> {
    let v = t
        .as_slice_mut()
        .and_then(|s| s.get_mut(j))
        .ok_or_else(|| format!("element {j} not addressable"))?;
    *v += d;
    Ok(())
}

fn loss(layer: &mut dyn Layer, inputs: &[Tensor], r: &Tensor) -> Check<f64> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let out = layer
        .forward(&refs, Mode::Train)
        .map_err(|e| e.to_string())?;
    Ok(out
        .iter()
        .zip(r.iter())
        .map(|(&a, &b)| a as f64 * b as f64)
        .sum())
}

fn nudge(layer: &mut dyn Layer, p: usize, j: usize, d: f32) -> Check<()> {
    let mut params = layer.params_mut();
    let param = params
        .get_mut(p)
        .ok_or_else(|| format!("no parameter {p}"))?;
    add_at(&mut param.value, j, d)
}

fn compare(what: &str, analytic: f64, numeric: f64, tol: f64) -> Check<()> {
    let scale = 1.0f64.max(analytic.abs()).max(numeric.abs());
    if (analytic - numeric).abs() <= tol * scale {
        Ok(())
    } else {
        Err(format!("{what}: analytic {analytic} vs numeric {numeric}"))
    }
}

/// [`Layer::forward_owned`] gives what [`Layer::forward`] gave (`out`, then the input and
/// parameter gradients of `r`), bit for bit, in training, and the same evaluation output.
fn owned_matches_borrowed(
    layer: &mut dyn Layer,
    x: &Tensor,
    out: &Tensor,
    r: &Tensor,
    dins: &[Tensor],
    pgrads: &[Tensor],
) -> Check<()> {
    let e = |e: crate::error::SimError| e.to_string();
    let owned = layer.forward_owned(x.clone(), Mode::Train).map_err(e)?;
    let d = layer.backward(r.clone()).map_err(e)?;
    let pg: Vec<Tensor> = layer.params_mut().iter().map(|p| p.grad.clone()).collect();
    if owned != *out || d != dins || pg != pgrads {
        return Err("training on an owned input differs from a borrowed one".into());
    }
    let borrowed = layer.forward(&[x], Mode::Eval).map_err(e)?;
    if layer.forward_owned(x.clone(), Mode::Eval).map_err(e)? != borrowed {
        return Err("evaluation on an owned input differs from a borrowed one".into());
    }
    Ok(())
}

/// Checks every input gradient and every parameter gradient of `layer` at `inputs` (at most
/// `samples` elements of each tensor), and, for one-input layers, that an owned input gives the
/// same results bit for bit.
pub fn check_layer(
    layer: &mut dyn Layer,
    inputs: &[Tensor],
    eps: f32,
    tol: f64,
    samples: usize,
) -> Check<()> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let out = layer
        .forward(&refs, Mode::Train)
        .map_err(|e| e.to_string())?;
    let r = rand_tensor(out.shape(), 1.0, 99);
    let dins = layer.backward(r.clone()).map_err(|e| e.to_string())?;
    if dins.len() != inputs.len() {
        return Err(format!(
            "{} gradients for {} inputs",
            dins.len(),
            inputs.len()
        ));
    }
    let pgrads: Vec<Tensor> = layer.params_mut().iter().map(|p| p.grad.clone()).collect();
    if let [x] = inputs {
        owned_matches_borrowed(layer, x, &out, &r, &dins, &pgrads)?;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut xs = inputs.to_vec();
    let h = 2.0 * eps as f64;
    for i in 0..xs.len() {
        if dins[i].shape() != xs[i].shape() {
            return Err(format!("input {i}: gradient shape {:?}", dins[i].shape()));
        }
        for _ in 0..samples.min(xs[i].len()) {
            let j = rng.random_range(0..xs[i].len());
            add_at(&mut xs[i], j, eps)?;
            let lp = loss(layer, &xs, &r)?;
            add_at(&mut xs[i], j, -2.0 * eps)?;
            let lm = loss(layer, &xs, &r)?;
            add_at(&mut xs[i], j, eps)?;
            compare(
                &format!("input {i}[{j}]"),
                get(&dins[i], j)?,
                (lp - lm) / h,
                tol,
            )?;
        }
    }
    for (p, grad) in pgrads.iter().enumerate() {
        for _ in 0..samples.min(grad.len()) {
            let j = rng.random_range(0..grad.len());
            nudge(layer, p, j, eps)?;
            let lp = loss(layer, &xs, &r)?;
            nudge(layer, p, j, -2.0 * eps)?;
            let lm = loss(layer, &xs, &r)?;
            nudge(layer, p, j, eps)?;
            compare(
                &format!("param {p}[{j}]"),
                get(grad, j)?,
                (lp - lm) / h,
                tol,
            )?;
        }
    }
    Ok(())
}

/// A hook asking for per-sample (activation, error) bits, as DFQ sets one.
#[derive(Debug, Clone)]
pub struct PerSample(pub Vec<(u32, u32)>);

impl QuantHook for PerSample {
    fn per_sample_bits(&self) -> Option<&[(u32, u32)]> {
        Some(&self.0)
    }
    fn clone_box(&self) -> Box<dyn QuantHook> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
