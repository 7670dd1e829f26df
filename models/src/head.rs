//! The classifier head against the dataset's class count: a zoo model is built with a head of
//! that many outputs; an ONNX file whose head disagrees is an error naming both numbers, unless
//! the caller asks to re-initialise the head (`--reinit-head`).

use ndarray::{ArrayD, IxDyn};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::ModelError;
use crate::ir::{Graph, Op};
use crate::zoo::init::{self, LinearInit};

/// How the head must fit the dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadFit {
    /// Outputs the head must have (the dataset's classes, or `--classes`).
    pub classes: usize,
    /// Replace a disagreeing head of an ONNX file with a freshly initialised one.
    pub reinit: bool,
    /// Seed of a re-initialised head (and of a zoo model's weights).
    pub seed: u64,
}

/// Loads the model `spec` names (as [`crate::load_graph`]) with a head of `fit.classes`
/// outputs: `zoo:NAME` is built with that head; a file's head must agree or, with
/// `fit.reinit`, is replaced. Also returns the outputs of a head that was replaced.
pub fn load_graph_for(
    spec: &str,
    batch: usize,
    fit: HeadFit,
) -> Result<(Graph, Option<usize>), ModelError> {
    match spec.strip_prefix("zoo:") {
        Some(name) => Ok((
            crate::source::zoo_graph(name, Some(fit.classes), spec, batch)?,
            None,
        )),
        None => {
            let mut g = crate::load_graph(spec, batch)?;
            let replaced = fit_head(&mut g, fit)?;
            Ok((g, replaced))
        }
    }
}

/// Checks that `graph`'s head has `fit.classes` outputs; with `fit.reinit`, replaces a
/// disagreeing final Linear layer by one of `fit.classes` outputs, initialised as PyTorch's
/// `nn.Linear` (uniform ±1/√in, [`init::linear`]) from `fit.seed`. Returns the outputs of the
/// head it replaced.
pub fn fit_head(graph: &mut Graph, fit: HeadFit) -> Result<Option<usize>, ModelError> {
    let have = graph.head_outputs();
    if have == fit.classes {
        return Ok(None);
    }
    let fail = |m: String| ModelError::graph(&graph.source, m);
    if !fit.reinit {
        return Err(fail(format!(
            "the model's head has {have} outputs but the data has {} classes \
             (--classes sets the count; --reinit-head replaces the head)",
            fit.classes
        )));
    }
    if fit.classes == 0 {
        return Err(fail("a head needs at least 1 class".into()));
    }
    let output = graph.output;
    let rank = graph.shape(output).len();
    let Some(node) = graph.nodes.iter_mut().rev().find(|n| n.output == output) else {
        return Err(fail("the graph output is not computed by a node".into()));
    };
    let Op::Linear(lin) = &mut node.op else {
        return Err(fail(format!(
            "cannot re-initialise the head: the output comes from node '{}' ({}), not a \
             Linear layer",
            node.name,
            node.op.name()
        )));
    };
    let inputs = lin.in_features();
    let mut rng = ChaCha8Rng::seed_from_u64(fit.seed);
    let (weight, bias) = init::linear(&mut rng, fit.classes, inputs, LinearInit::PyTorch, true);
    let shape_err = |e: ndarray::ShapeError| fail(format!("new head: {e}"));
    lin.weight =
        ArrayD::from_shape_vec(IxDyn(&[fit.classes, inputs]), weight).map_err(shape_err)?;
    let bias = bias.unwrap_or_default();
    lin.bias = Some(ArrayD::from_shape_vec(IxDyn(&[fit.classes]), bias).map_err(shape_err)?);
    if let Some(v) = graph.values.get_mut(output.0) {
        if let Some(last) = v.shape.get_mut(rank.saturating_sub(1)) {
            *last = fit.classes;
        }
    }
    Ok(Some(have))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(classes: usize, reinit: bool) -> HeadFit {
        HeadFit {
            classes,
            reinit,
            seed: 7,
        }
    }

    #[test]
    fn a_zoo_head_follows_the_class_count() {
        let (g, replaced) = load_graph_for("zoo:resnet20", 2, fit(10, false)).unwrap();
        assert_eq!((g.shape(g.output), replaced), (&[2, 10][..], None));
        let (g, _) = load_graph_for("zoo:lenet5", 2, fit(3, false)).unwrap();
        assert_eq!(g.head_outputs(), 3);
    }

    #[test]
    fn a_disagreeing_file_head_is_an_error_with_both_numbers_or_is_replaced() {
        let mut g = crate::load_graph("zoo:lenet5", 2).unwrap();
        assert_eq!(fit_head(&mut g, fit(10, false)).unwrap(), None);
        let e = fit_head(&mut g, fit(7, false)).unwrap_err().to_string();
        assert!(
            e.contains("head has 10 outputs") && e.contains("7 classes"),
            "{e}"
        );
        assert_eq!(fit_head(&mut g, fit(7, true)).unwrap(), Some(10));
        assert_eq!(g.shape(g.output), &[2, 7]);
        let s = g.summary();
        let head = s.layers.last().unwrap();
        assert_eq!(head.out_channels(), 7);
        assert!(g.validate().is_ok());
        // Deterministic from the seed.
        let mut h = crate::load_graph("zoo:lenet5", 2).unwrap();
        fit_head(&mut h, fit(7, true)).unwrap();
        assert_eq!(g, h);
    }
}
