//! `PRelu`: `max(x, 0) + slope·min(x, 0)` with a learned slope broadcast onto the input.

use ndarray::{Axis, IxDyn, Zip};

use super::from_ir::{one_any, unsupported, Ctx, Layout, Val};
use super::{cached, check_grad, expect_inputs, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::Node;
use rand::Rng;

/// PyTorch's initial slope of `nn.PReLU`.
const INIT_SLOPE: f32 = 0.25;

/// A parametric ReLU; the slope has the input's rank and broadcasts onto it.
pub struct PRelu {
    name: String,
    slope: Param,
    input: Option<Tensor>,
}

impl PRelu {
    /// A layer with this slope (same rank as its inputs, each axis 1 or the input's length).
    pub fn new(name: &str, slope: Tensor) -> Self {
        Self {
            name: name.to_string(),
            slope: Param::new("slope", slope, false),
            input: None,
        }
    }

    /// The layer of an IR `PRelu` node: the slope gets the input's rank and, for an image,
    /// the engine's channels-last axis order.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        slope: &Tensor,
    ) -> Result<Val> {
        let x = one_any(node, ins)?;
        let rank = node
            .inputs
            .first()
            .map(|&i| ctx.shape(i).len())
            .ok_or_else(|| unsupported(node, "no input"))?;
        if slope.ndim() > rank {
            return Err(unsupported(node, "slope has more axes than the input"));
        }
        let mut dims = vec![1; rank - slope.ndim()];
        dims.extend_from_slice(slope.shape());
        let stored = super::from_ir::owned(slope)
            .into_shape_with_order(IxDyn(&dims))
            .map_err(|e| unsupported(node, e))?;
        let full = ctx.weight(&stored, |_| Tensor::from_elem(IxDyn(&dims), INIT_SLOPE));
        let engine = if x.layout == Layout::Image && rank == 4 {
            full.permuted_axes(IxDyn(&[0, 2, 3, 1]))
                .as_standard_layout()
                .into_owned()
        } else {
            full
        };
        ctx.same_layout(PRelu::new(&node.name, engine), x)
    }

    fn slope_onto(&self, x: &Tensor) -> Result<ndarray::ArrayViewD<'_, f32>> {
        self.slope.value.broadcast(x.raw_dim()).ok_or_else(|| {
            SimError::shape(
                &self.name,
                format!(
                    "slope {:?} does not broadcast onto the input {:?}",
                    self.slope.value.shape(),
                    x.shape()
                ),
            )
        })
    }
}

impl Layer for PRelu {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let s = self.slope_onto(x)?;
        let y = Zip::from(x)
            .and(&s)
            .map_collect(|&v, &a| if v >= 0.0 { v } else { a * v });
        self.input = (mode == Mode::Train).then(|| x.to_owned());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let x = cached(&self.name, &self.input)?;
        check_grad(&self.name, &grad_out, x.shape())?;
        let s = self.slope_onto(x)?;
        let dx = Zip::from(&grad_out)
            .and(x)
            .and(&s)
            .map_collect(|&g, &v, &a| if v >= 0.0 { g } else { a * g });
        let mut ds = Zip::from(&grad_out)
            .and(x)
            .map_collect(|&g, &v| if v >= 0.0 { 0.0 } else { g * v });
        for (axis, &len) in self.slope.value.shape().iter().enumerate() {
            if len == 1 && ds.shape()[axis] != 1 {
                ds = ds.sum_axis(Axis(axis)).insert_axis(Axis(axis));
            }
        }
        self.slope.grad = ds;
        Ok(vec![dx])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.slope]
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn values_and_gradients_of_input_and_slope() {
        let slope = rand_tensor(&[1, 1, 1, 3], 0.5, 2);
        let mut p = PRelu::new("prelu", slope.clone());
        let x =
            rand_tensor(&[2, 2, 2, 3], 2.0, 4).mapv(|v| if v.abs() < 0.05 { v + 0.1 } else { v });
        let y = p.forward(&[&x], Mode::Eval).unwrap();
        for ((i, &v), &got) in x.indexed_iter().zip(y.iter()) {
            let want = if v >= 0.0 {
                v
            } else {
                slope[[0, 0, 0, i[3]]] * v
            };
            assert_eq!(got, want);
        }
        check_layer(&mut p, &[x], 1e-3, 2e-3, 30).unwrap();
        let e = p
            .forward(&[&Tensor::ones(vec![2, 4])], Mode::Eval)
            .unwrap_err();
        assert!(e.to_string().contains("prelu"), "{e}");
    }
}
