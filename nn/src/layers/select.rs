//! Element-wise choice at a condition known at import (the IR's [`ir::Where`]): each output
//! element is the first input's where the condition holds and the other value (a constant or a
//! second input) elsewhere, all three broadcast as NumPy does. The gradient reaches each input
//! where it was chosen, summed over the axes it was broadcast along.

use ndarray::{IxDyn, Zip};
use rand::Rng;

use super::elementwise::{broadcast_shape, reduce_to};
use super::from_ir::{owned, unsupported, Ctx, Layout, Val};
use super::{cached, check_grad, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::{self, Node};

/// `keep ? a : b`, `b` a constant or the second input; tensors held as in the IR.
pub struct Where {
    name: String,
    /// 1 where the first input is chosen, else 0.
    keep: Tensor,
    /// The constant chosen elsewhere, if the other value is one.
    fill: Option<Tensor>,
    /// Training pass: the shapes of the tensor inputs and of the output.
    shapes: Option<(Vec<Vec<usize>>, Vec<usize>)>,
}

impl Where {
    /// A choice of the first input where `keep` is nonzero, else of `fill` (or of the second
    /// input when `fill` is `None`).
    pub fn new(name: &str, keep: Tensor, fill: Option<Tensor>) -> Self {
        Self {
            name: name.to_string(),
            keep,
            fill,
            shapes: None,
        }
    }

    /// The layer of an IR `Where` node, on inputs held as in the IR.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        op: &ir::Where,
    ) -> Result<Val> {
        let want = if op.fill.is_some() { 1 } else { 2 };
        if ins.len() != want {
            return Err(unsupported(
                node,
                format!("{} tensor inputs, expected {want}", ins.len()),
            ));
        }
        let ids: Vec<usize> = ctx
            .all_as(node, ins, Layout::AsIs)?
            .iter()
            .map(|v| v.id)
            .collect();
        let keep = op.keep.mapv(|k| if k { 1.0 } else { 0.0 });
        let layer = Where::new(&node.name, keep, op.fill.as_ref().map(owned));
        ctx.push(layer, &ids, Layout::AsIs)
    }

    /// The chosen-from values `(a, b)` of `inputs`.
    fn operands<'a>(&'a self, inputs: &[&'a Tensor]) -> Result<(&'a Tensor, &'a Tensor)> {
        match (inputs, &self.fill) {
            ([a], Some(f)) => Ok((a, f)),
            ([a, b], None) => Ok((a, b)),
            _ => Err(SimError::shape(
                &self.name,
                format!(
                    "expects {} input(s), got {}",
                    if self.fill.is_some() { 1 } else { 2 },
                    inputs.len()
                ),
            )),
        }
    }

    /// The broadcast of `keep` and the operand shapes, or an error naming them.
    fn out_shape(&self, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
        broadcast_shape(self.keep.shape(), a)
            .and_then(|s| broadcast_shape(&s, b))
            .ok_or_else(|| {
                SimError::shape(
                    &self.name,
                    format!(
                        "condition {:?} and operands {a:?}, {b:?} do not broadcast",
                        self.keep.shape()
                    ),
                )
            })
    }

    /// The condition broadcast to `shape`.
    fn keep_at(&self, shape: &[usize]) -> Result<ndarray::ArrayViewD<'_, f32>> {
        self.keep
            .broadcast(IxDyn(shape))
            .ok_or_else(|| SimError::shape(&self.name, "condition does not broadcast"))
    }
}

impl Layer for Where {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let (a, b) = self.operands(inputs)?;
        let shape = self.out_shape(a.shape(), b.shape())?;
        let keep = self.keep_at(&shape)?;
        let (Some(av), Some(bv)) = (a.broadcast(IxDyn(&shape)), b.broadcast(IxDyn(&shape))) else {
            return Err(SimError::shape(&self.name, "broadcast failed"));
        };
        let mut out = Tensor::zeros(IxDyn(&shape));
        Zip::from(&mut out)
            .and(&keep)
            .and(&av)
            .and(&bv)
            .for_each(|y, &k, &x, &z| *y = if k != 0.0 { x } else { z });
        self.shapes = (mode == Mode::Train).then(|| {
            let ins = inputs.iter().map(|t| t.shape().to_vec()).collect();
            (ins, shape)
        });
        Ok(out)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (ins, shape) = cached(&self.name, &self.shapes)?.clone();
        check_grad(&self.name, &grad_out, &shape)?;
        let keep = self.keep_at(&shape)?;
        let part = |chosen: f32| {
            let mut g = Tensor::zeros(IxDyn(&shape));
            Zip::from(&mut g)
                .and(&keep)
                .and(&grad_out)
                .for_each(|d, &k, &go| {
                    *d = if (k != 0.0) == (chosen != 0.0) {
                        go
                    } else {
                        0.0
                    }
                });
            g
        };
        let mut grads = vec![reduce_to(part(1.0), &ins[0])];
        if let Some(b) = ins.get(1) {
            grads.push(reduce_to(part(0.0), b));
        }
        Ok(grads)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap()
    }

    #[test]
    fn a_constant_fill_is_chosen_where_the_condition_fails() {
        // keep [2, 1] against x [2, 3]: row 0 kept, row 1 filled with the fill's columns.
        let keep = t(&[2, 1], &[1.0, 0.0]);
        let fill = t(&[3], &[7.0, 8.0, 9.0]);
        let mut w = Where::new("w", keep, Some(fill));
        let x = t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let y = w.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(
            y.iter().copied().collect::<Vec<_>>(),
            [1., 2., 3., 7., 8., 9.]
        );
        let g = w.backward(t(&[2, 3], &[1.0; 6])).unwrap();
        assert_eq!(
            g[0].iter().copied().collect::<Vec<_>>(),
            [1., 1., 1., 0., 0., 0.]
        );
        // A NaN where the fill is chosen does not reach the output.
        let x = t(&[2, 3], &[1.0, 2.0, 3.0, f32::NAN, 5.0, 6.0]);
        assert!(w
            .forward(&[&x], Mode::Eval)
            .unwrap()
            .iter()
            .all(|v| v.is_finite()));
        let e = w.forward(&[&x, &x], Mode::Eval).unwrap_err().to_string();
        assert!(e.contains("expects 1 input(s)"), "{e}");
    }

    #[test]
    fn two_inputs_get_the_gradient_where_each_is_chosen_summed_over_broadcast_axes() {
        let keep = t(&[3, 1], &[1.0, 0.0, 1.0]);
        let a = rand_tensor(&[2, 3, 4], 1.0, 1);
        let b = rand_tensor(&[4], 1.0, 2);
        check_layer(
            &mut Where::new("w", keep.clone(), None),
            &[a, b],
            1e-2,
            2e-3,
            30,
        )
        .unwrap();
        let mut w = Where::new("w", keep, None);
        let a = Tensor::zeros(IxDyn(&[2, 3, 4]));
        let b = Tensor::ones(IxDyn(&[4]));
        w.forward(&[&a, &b], Mode::Train).unwrap();
        let g = w.backward(Tensor::ones(IxDyn(&[2, 3, 4]))).unwrap();
        // b is chosen in row 1 of both samples: each of its elements twice.
        assert_eq!(g[1].iter().copied().collect::<Vec<_>>(), [2.0; 4]);
        assert_eq!(g[0].sum(), 16.0);
        let bad = Tensor::zeros(IxDyn(&[5]));
        let e = w.forward(&[&a, &bad], Mode::Eval).unwrap_err().to_string();
        assert!(e.contains("do not broadcast"), "{e}");
    }
}
