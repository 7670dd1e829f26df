//! [`Reduce`]: the mean (ONNX `ReduceMean` over any axes; the dynamo exporter's adaptive
//! average pool averages a gathered window grid), the sum (`ReduceSum`) or the Euclidean norm (ONNX `ReduceL2`;
//! `F.normalize`'s norm in Swin V2's cosine attention) over some axes, on tensors held as in
//! the IR.

use super::from_ir::{Ctx, Layout, Val};
use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::Node;
use ndarray::{Axis, IxDyn, Zip};
use rand::Rng;

/// What a [`Reduce`] computes over its axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    /// `y = Σ x / n`; backward `∂y/∂x = 1 / n`.
    Mean,
    /// `y = Σ x`; backward `∂y/∂x = 1`.
    Sum,
    /// `y = sqrt(Σ x²)`; backward `∂y/∂x = x / y`, defined as 0 where the norm is 0 (the
    /// subgradient of least norm).
    L2,
}

/// A reduction over `axes` (see [`ReduceKind`]).
pub struct Reduce {
    name: String,
    kind: ReduceKind,
    /// Reduced axes, ascending.
    axes: Vec<usize>,
    keepdims: bool,
    /// Training pass: the input and the norm (reduced axes kept at size 1).
    pass: Option<(Tensor, Tensor)>,
}

impl Reduce {
    /// A reduction over `axes` (ascending), keeping them as size 1 when `keepdims`.
    pub fn new(name: &str, kind: ReduceKind, axes: Vec<usize>, keepdims: bool) -> Self {
        Self {
            name: name.to_string(),
            kind,
            axes,
            keepdims,
            pass: None,
        }
    }

    /// The layer of an IR `ReduceMean` or `ReduceL2` node, on its input held as in the IR.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        kind: ReduceKind,
        axes: &[usize],
        keepdims: bool,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let layer = Reduce::new(&node.name, kind, axes.to_vec(), keepdims);
        ctx.push(layer, &[x.id], Layout::AsIs)
    }

    /// The reduction with the reduced axes kept at size 1.
    fn reduce(&self, x: &Tensor) -> Result<Tensor> {
        if let Some(a) = self.axes.iter().find(|&&a| a >= x.ndim()) {
            return Err(SimError::shape(
                &self.name,
                format!("axis {a} out of range for input {:?}", x.shape()),
            ));
        }
        let mut sum = match self.kind {
            ReduceKind::Mean | ReduceKind::Sum => standard(x.view()),
            ReduceKind::L2 => x.mapv(|v| v * v),
        };
        for &a in self.axes.iter().rev() {
            sum = sum.sum_axis(Axis(a)).insert_axis(Axis(a));
        }
        Ok(match self.kind {
            ReduceKind::Mean => {
                let n = self.count(x.shape()) as f32;
                sum.mapv(|v| v / n)
            }
            ReduceKind::Sum => sum,
            ReduceKind::L2 => sum.mapv(f32::sqrt),
        })
    }

    /// Elements reduced into each output element of input shape `x`.
    fn count(&self, x: &[usize]) -> usize {
        self.axes.iter().map(|&a| x[a]).product()
    }

    /// `t` without the reduced axes unless `keepdims`.
    fn shaped(&self, t: Tensor) -> Tensor {
        if self.keepdims {
            return t;
        }
        let mut t = t;
        for &a in self.axes.iter().rev() {
            t = t.index_axis_move(Axis(a), 0);
        }
        t
    }
}

impl Layer for Reduce {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let n = self.reduce(x)?;
        if n.iter().any(|v| !v.is_finite()) {
            return Err(SimError::shape(&self.name, "the reduction is not finite"));
        }
        let y = self.shaped(n.clone());
        self.pass = (mode == Mode::Train).then(|| (standard(x.view()), n));
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (x, n) = cached(&self.name, &self.pass)?;
        check_grad(&self.name, &grad_out, self.shaped(n.clone()).shape())?;
        let g = grad_out
            .into_shape_with_order(IxDyn(n.shape()))
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let (g, n) = match (g.broadcast(x.raw_dim()), n.broadcast(x.raw_dim())) {
            (Some(g), Some(n)) => (g, n),
            _ => {
                return Err(SimError::shape(
                    &self.name,
                    "the reduction does not broadcast",
                ))
            }
        };
        let dx = match self.kind {
            ReduceKind::Mean => {
                let count = self.count(x.shape()) as f32;
                g.mapv(|g| g / count)
            }
            ReduceKind::Sum => g.to_owned(),
            ReduceKind::L2 => {
                Zip::from(x)
                    .and(&g)
                    .and(&n)
                    .map_collect(|&v, &g, &n| if n > 0.0 { g * v / n } else { 0.0 })
            }
        };
        Ok(vec![dx])
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn the_norm_over_the_last_axis_matches_its_definition() {
        let x = Tensor::from_shape_vec(IxDyn(&[2, 2]), vec![3.0, 4.0, 0.0, 0.0]).unwrap();
        let mut l = Reduce::new("norm", ReduceKind::L2, vec![1], true);
        let y = l.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(
            (y.shape(), y.iter().copied().collect::<Vec<_>>()),
            (&[2, 1][..], vec![5.0, 0.0])
        );
        // at a zero norm the gradient is 0, not NaN
        let d = l.backward(Tensor::ones(IxDyn(&[2, 1]))).unwrap();
        assert_eq!(
            d[0].iter().copied().collect::<Vec<_>>(),
            [0.6, 0.8, 0.0, 0.0]
        );
        let mut l = Reduce::new("flat", ReduceKind::L2, vec![0, 1], false);
        assert_eq!(
            l.forward(&[&x], Mode::Eval).unwrap().shape(),
            &[] as &[usize]
        );
        let mut l = Reduce::new("bad", ReduceKind::L2, vec![2], true);
        let e = l.forward(&[&x], Mode::Eval).unwrap_err().to_string();
        assert!(
            e.contains("bad") && e.contains("axis 2 out of range"),
            "{e}"
        );
    }

    #[test]
    fn the_mean_and_sum_over_trailing_axes_reduce_each_window() {
        // [1, 2, 2, 2]: the mean over the last two axes of each channel
        let x = Tensor::from_shape_vec(IxDyn(&[1, 2, 2, 2]), (0..8).map(|v| v as f32).collect())
            .unwrap();
        let mut l = Reduce::new("mean", ReduceKind::Mean, vec![2, 3], false);
        let y = l.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(
            (y.shape(), y.iter().copied().collect::<Vec<_>>()),
            (&[1, 2][..], vec![1.5, 5.5])
        );
        let d = l.backward(Tensor::ones(IxDyn(&[1, 2]))).unwrap();
        assert!(d[0].iter().all(|&v| v == 0.25));
        let mut l = Reduce::new("sum", ReduceKind::Sum, vec![2, 3], true);
        let y = l.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(
            (y.shape(), y.iter().copied().collect::<Vec<_>>()),
            (&[1, 2, 1, 1][..], vec![6.0, 22.0])
        );
        let d = l.backward(Tensor::ones(IxDyn(&[1, 2, 1, 1]))).unwrap();
        assert!(d[0].iter().all(|&v| v == 1.0));
    }

    #[test]
    fn the_norm_has_the_gradient_of_its_values() {
        let x = rand_tensor(&[2, 3, 4], 1.0, 9);
        for (axes, keep) in [(vec![2], true), (vec![1, 2], false), (vec![0], true)] {
            for kind in [ReduceKind::L2, ReduceKind::Mean, ReduceKind::Sum] {
                let mut l = Reduce::new("n", kind, axes.clone(), keep);
                check_layer(&mut l, std::slice::from_ref(&x), 1e-3, 2e-3, 24).unwrap();
            }
        }
    }
}
