//! Layer-sequential unit-variance scaling of initial weights (LSUV, Mishkin & Matas 2016). A
//! deep network without normalization layers — a MobileNet or EfficientNet exported in eval mode,
//! its batch norm folded into the convs — does not keep its signal at any fixed per-layer init:
//! SiLU halves a small signal, a squeeze-and-excitation gate halves it again, residual adds grow
//! it. Going through the layers in order, each one's weight and bias are scaled so that its
//! output on a real batch has unit standard deviation, so the next layer is measured on a signal
//! of the size it will see.

use super::Graph;
use crate::error::{Result, SimError};
use crate::layers::{Mode, Tensor};

/// Tries per layer: a layer's output std after one scaling is exactly 1 unless a clamp or a
/// quantizer after the weights makes it nonlinear in the scale.
const TRIES: usize = 3;
/// Close enough to 1 to stop.
const TOLERANCE: f64 = 0.05;

/// One layer's scaling.
#[derive(Clone, Debug, PartialEq)]
pub struct Scaled {
    /// The graph node.
    pub node: usize,
    /// The output's standard deviation before scaling.
    pub std_before: f64,
    /// The product of the factors applied to its parameters.
    pub factor: f64,
}

/// Scales the parameters of each node of `nodes` (in order; conv or linear layers whose output is
/// linear in their parameters) so that its output on `x` has unit standard deviation. Runs the
/// graph in evaluation (no running statistics or activation ranges change). An output that is all
/// zero or not finite is an error naming the layer.
pub fn unit_variance(graph: &mut Graph, nodes: &[usize], x: &Tensor) -> Result<Vec<Scaled>> {
    let mut out = Vec::with_capacity(nodes.len());
    for &node in nodes {
        let mut done = Scaled {
            node,
            std_before: f64::NAN,
            factor: 1.0,
        };
        for _ in 0..TRIES {
            let y = graph.forward_range(0..node + 1, x.clone(), Mode::Eval)?;
            let s = std_dev(&y);
            let name = || graph.nodes[node].layer.name().to_string();
            if !s.is_finite() || s == 0.0 {
                return Err(SimError::invalid(
                    &format!("layer `{}`", name()),
                    format!(
                        "its output at initialisation has standard deviation {s}: \
                         nothing to scale to unit variance (--init lsuv)"
                    ),
                ));
            }
            if done.std_before.is_nan() {
                done.std_before = s;
            }
            if (s - 1.0).abs() <= TOLERANCE {
                break;
            }
            let f = (1.0 / s) as f32;
            let params = graph.nodes[node].layer.params_mut();
            if params.is_empty() {
                break;
            }
            for p in params {
                p.value.mapv_inplace(|v| v * f);
            }
            done.factor *= f64::from(f);
        }
        out.push(done);
    }
    Ok(out)
}

/// Population standard deviation, in f64.
pub fn std_dev(y: &Tensor) -> f64 {
    let n = y.len().max(1) as f64;
    let mean = y.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = y
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    var.sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::linear_weight_bias;
    use crate::layers::activation::{Activation, ActivationKind};
    use crate::layers::linear::Linear;
    use crate::quant::{LayerQuant, QuantMethod};
    use ndarray::{ArrayD, IxDyn};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn linear(name: &str, rng: &mut ChaCha8Rng, scale: f32) -> Linear {
        let (w, b) = linear_weight_bias(rng, 32, 32);
        let quant = LayerQuant::new(QuantMethod::Sbm, 1);
        Linear::new(name, w * scale, Some(b * scale), quant).expect("linear")
    }

    /// A 12-layer ReLU MLP drawn at a tenth of PyTorch's scale shrinks its signal at every
    /// layer; after scaling, every linear layer's output has unit std on the batch.
    #[test]
    fn every_scaled_layer_leaves_unit_std_on_the_batch() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut g = Graph::new();
        let mut linears = Vec::new();
        for i in 0..12 {
            let v = g
                .then(linear(&format!("fc{i}"), &mut rng, 0.1))
                .expect("push");
            linears.push(v - 1);
            g.then(Activation::new(&format!("relu{i}"), ActivationKind::Relu))
                .expect("push");
        }
        let x = ArrayD::from_shape_fn(IxDyn(&[64, 32]), |_| rng.gen_range(-1.0f32..1.0));
        let before = g.forward(x.clone(), Mode::Eval).expect("forward");
        assert!(std_dev(&before) < 1e-2, "{}", std_dev(&before));
        let scaled = unit_variance(&mut g, &linears, &x).expect("lsuv");
        assert_eq!(scaled.len(), 12);
        assert!(scaled[1].std_before < 0.1, "{scaled:?}");
        for &n in &linears {
            let y = g
                .forward_range(0..n + 1, x.clone(), Mode::Eval)
                .expect("forward");
            assert!(
                (std_dev(&y) - 1.0).abs() <= TOLERANCE,
                "node {n}: {}",
                std_dev(&y)
            );
        }
    }

    #[test]
    fn an_all_zero_output_is_an_error_naming_the_layer() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut g = Graph::new();
        g.then(linear("dead", &mut rng, 0.0)).expect("push");
        let x = ArrayD::from_elem(IxDyn(&[2, 32]), 1.0f32);
        let e = unit_variance(&mut g, &[0], &x).expect_err("all zero");
        assert!(e.to_string().contains("`dead`"), "{e}");
    }
}
