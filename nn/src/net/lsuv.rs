//! Layer-sequential unit-variance scaling of initial weights (LSUV, Mishkin & Matas 2016). A
//! deep network without normalization layers — a MobileNet or EfficientNet exported in eval mode,
//! its batch norm folded into the convs — does not keep its signal at any fixed per-layer init:
//! SiLU halves a small signal, a squeeze-and-excitation gate halves it again, residual adds grow
//! it. Going through the layers in order, each one's weight and bias are scaled so that its
//! output on a real batch has unit standard deviation, so the next layer is measured on a signal
//! of the size it will see.
//!
//! The last layer of a residual branch (its output read only by the sum with the skip) is scaled
//! to [`BRANCH`] of the skip's standard deviation instead: at unit size every branch adds as much
//! as the skip carries, the residual stream grows block by block and the network trains like a
//! plain one of its full depth (an EfficientNet without its batch norm diverges at SGD's lr 0.1);
//! small branches start it close to its shortcuts, as zero-initialising each branch's last
//! batch norm (SkipInit, Fixup) does.

use std::any::Any;

use super::Graph;
use crate::error::{Result, SimError};
use crate::layers::add::Add;
use crate::layers::{Mode, Tensor};

/// Tries per layer: a layer's output std after one scaling is exactly 1 unless a clamp or a
/// quantizer after the weights makes it nonlinear in the scale.
const TRIES: usize = 3;
/// Close enough to 1 to stop.
const TOLERANCE: f64 = 0.05;
/// A residual branch's output standard deviation, relative to its skip's.
pub const BRANCH: f64 = 0.1;

/// One layer's scaling.
#[derive(Clone, Debug, PartialEq)]
pub struct Scaled {
    /// The graph node.
    pub node: usize,
    /// The output's standard deviation before scaling.
    pub std_before: f64,
    /// The standard deviation it was scaled to: 1, or [`BRANCH`] of its skip's.
    pub target: f64,
    /// The product of the factors applied to its parameters.
    pub factor: f64,
}

/// Scales the parameters of each node of `nodes` (in order; conv or linear layers whose output is
/// linear in their parameters) so that its output on `x` has unit standard deviation, or
/// [`BRANCH`] of its skip's when it ends a residual branch ([`skip_of`]). Runs the graph in
/// evaluation (no running statistics or activation ranges change). An output that is all zero or
/// not finite is an error naming the layer.
pub fn unit_variance(graph: &mut Graph, nodes: &[usize], x: &Tensor) -> Result<Vec<Scaled>> {
    let mut out = Vec::with_capacity(nodes.len());
    for (k, &node) in nodes.iter().enumerate() {
        let target = match skip_of(graph, node, &nodes[k + 1..]) {
            Some(0) => BRANCH * std_dev(x),
            Some(v) => BRANCH * std_dev(&graph.forward_range(0..v, x.clone(), Mode::Eval)?),
            None => 1.0,
        };
        let target = if target.is_finite() && target > 0.0 {
            target
        } else {
            1.0
        };
        let mut done = Scaled {
            node,
            std_before: f64::NAN,
            target,
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
            if (s / target - 1.0).abs() <= TOLERANCE {
                break;
            }
            let f = (target / s) as f32;
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

/// The skip of the residual branch `node` ends: the other input of the two-input [`Add`] that is
/// the only reader of `node`'s output, when that value is final by the time `node` is scaled (the
/// network input, or made by a node that is not among the `later` ones still to scale; of a sum
/// of two layers still to scale, such as a branch and its projection shortcut, the later one is
/// the branch).
fn skip_of(graph: &Graph, node: usize, later: &[usize]) -> Option<usize> {
    let value = node + 1;
    let mut readers = graph.nodes.iter().filter(|n| n.inputs.contains(&value));
    let sum = readers.next()?;
    if readers.next().is_some() || !(sum.layer.as_ref() as &dyn Any).is::<Add>() {
        return None;
    }
    match sum.inputs[..] {
        [a, b] if a != b => {
            let skip = if a == value { b } else { a };
            (skip == 0 || !later.contains(&(skip - 1))).then_some(skip)
        }
        _ => None,
    }
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
        let x = ArrayD::from_shape_fn(IxDyn(&[64, 32]), |_| rng.random_range(-1.0f32..1.0));
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

    /// Std of value `v` (the output of node `v - 1`) on `x`.
    fn std_of(g: &mut Graph, v: usize, x: &Tensor) -> f64 {
        std_dev(
            &g.forward_range(0..v, x.clone(), Mode::Eval)
                .expect("forward"),
        )
    }

    /// A residual block with an identity skip, then one whose skip is a projection (two layers
    /// summed, both still to scale): each branch's last layer starts at a tenth of its skip, the
    /// other layers at unit std.
    #[test]
    fn a_residual_branch_ends_at_a_tenth_of_its_skip() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut g = Graph::new();
        let relu = |n: &str| Activation::new(n, ActivationKind::Relu);
        let fc0 = g.push(linear("fc0", &mut rng, 1.0), &[0]).expect("push"); // value 1
        let r0 = g.push(relu("r0"), &[fc0]).expect("push"); // 2
        let fc1 = g.push(linear("fc1", &mut rng, 1.0), &[r0]).expect("push"); // 3
        let r1 = g.push(relu("r1"), &[fc1]).expect("push"); // 4
        let fc2 = g.push(linear("fc2", &mut rng, 1.0), &[r1]).expect("push"); // 5
        let sum = g.push(Add::new("add"), &[r0, fc2]).expect("push"); // 6
        let short = g
            .push(linear("short", &mut rng, 1.0), &[sum])
            .expect("push"); // 7
        let fc3 = g.push(linear("fc3", &mut rng, 1.0), &[sum]).expect("push"); // 8
        let sum2 = g.push(Add::new("add2"), &[short, fc3]).expect("push"); // 9
        let out = g.push(linear("out", &mut rng, 1.0), &[sum2]).expect("push"); // 10
        let nodes: Vec<usize> = [fc0, fc1, fc2, short, fc3, out]
            .iter()
            .map(|v| v - 1)
            .collect();
        let x = ArrayD::from_shape_fn(IxDyn(&[64, 32]), |_| rng.random_range(-1.0f32..1.0));
        let scaled = unit_variance(&mut g, &nodes, &x).expect("lsuv");
        let targets: Vec<f64> = scaled.iter().map(|s| s.target).collect();
        let skip = BRANCH * std_of(&mut g, r0, &x);
        let projected = BRANCH * std_of(&mut g, short, &x);
        assert_eq!(targets, [1.0, 1.0, skip, 1.0, projected, 1.0]);
        for (&v, want) in [fc0, fc1, fc2, short, fc3, out].iter().zip(targets) {
            let got = std_of(&mut g, v, &x);
            assert!(
                (got / want - 1.0).abs() <= TOLERANCE,
                "value {v}: {got} vs {want}"
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
