//! Learned tokens of transformer inputs, as the IR's `PositionEmbedding` and `ClassToken`:
//! [`PositionEmbedding`] adds a row of a `[T_max, D]` table per position, [`ClassToken`] prepends
//! a learned `[D]` token to every sequence of a batch-first `[B, T, D]` input. Neither parameter
//! takes weight decay (as timm's `pos_embed` and `cls_token`).

use ndarray::{s, Array1, Array3, Axis, Ix1, Ix3};

use super::from_ir::{Ctx, Layout, Val, POSITION_INIT};
use super::{cached, check_grad, expect_inputs, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use crate::init::uniform;
use cptsim_models::ir::Node;
use rand::Rng;

/// `x[…, t, …, :] += table[t]` for position `t` along `axis` (the last axis is the width `D`);
/// a sequence of `T ≤ T_max` positions uses the first `T` rows. The table's gradient sums over
/// every other axis (the batch); rows past `T` get 0.
pub struct PositionEmbedding {
    name: String,
    table: Param,
    axis: usize,
    /// Training pass: the input shape.
    shape: Option<Vec<usize>>,
}

impl PositionEmbedding {
    /// Learned positions from `table` (`[T_max, D]`) along `axis` of the input.
    pub fn new(name: &str, table: Tensor, axis: usize) -> Result<Self> {
        if table.ndim() != 2 || table.is_empty() {
            return Err(SimError::shape(
                name,
                format!("position table {:?} must be [T_max, D]", table.shape()),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            table: Param::new("weight", table, false),
            axis,
            shape: None,
        })
    }

    /// `(T, stride, D)` of an input of this shape: positions along `axis`, elements per position
    /// step, width; or an error naming the layer, as the IR's shape rule words it.
    fn dims(&self, x: &[usize]) -> Result<(usize, usize, usize)> {
        let (t_max, d) = (self.table.value.shape()[0], self.table.value.shape()[1]);
        if x.last() != Some(&d) || self.axis + 1 >= x.len() {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "position table [{t_max}, {d}] on axis {} does not fit input {x:?}",
                    self.axis
                ),
            ));
        }
        let t = x[self.axis];
        if t > t_max {
            return Err(SimError::shape(
                &self.name,
                format!("a sequence of {t} positions is longer than the model's {t_max} learned positions"),
            ));
        }
        Ok((t, x[self.axis + 1..].iter().product(), d))
    }

    /// Row of the table for flat (row-major) element `k`, and its column.
    fn at(k: usize, (t, stride, d): (usize, usize, usize)) -> usize {
        ((k / stride) % t) * d + k % d
    }
}

impl Layer for PositionEmbedding {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let dims = self.dims(x.shape())?;
        let table = self
            .table
            .value
            .as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "table not contiguous"))?;
        let mut y = x.as_standard_layout().into_owned();
        y.iter_mut()
            .enumerate()
            .for_each(|(k, v)| *v += table[Self::at(k, dims)]);
        self.shape = (mode == Mode::Train).then(|| x.shape().to_vec());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.shape)?;
        check_grad(&self.name, &grad_out, shape)?;
        let dims = self.dims(shape)?;
        let mut dt = vec![0.0f32; self.table.value.len()];
        grad_out
            .iter()
            .enumerate()
            .for_each(|(k, g)| dt[Self::at(k, dims)] += g);
        self.table.grad = Tensor::from_shape_vec(self.table.value.raw_dim(), dt)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        Ok(vec![grad_out])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.table]
    }
}

/// Prepends a learned token on axis 1: `[B, T, D] → [B, T + 1, D]` (the ViT class token).
pub struct ClassToken {
    name: String,
    token: Param,
    /// Training pass: the input shape.
    shape: Option<[usize; 3]>,
}

impl ClassToken {
    /// A class token `[D]`.
    pub fn new(name: &str, token: Tensor) -> Result<Self> {
        if token.ndim() != 1 || token.is_empty() {
            return Err(SimError::shape(
                name,
                format!("class token {:?} must be [D]", token.shape()),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            token: Param::new("token", token, false),
            shape: None,
        })
    }
}

impl Layer for ClassToken {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let tok = self
            .token
            .value
            .view()
            .into_dimensionality::<Ix1>()
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let x3 = x
            .view()
            .into_dimensionality::<Ix3>()
            .ok()
            .filter(|v| v.dim().2 == tok.len())
            .ok_or_else(|| {
                SimError::shape(
                    &self.name,
                    format!(
                        "class token [{}] does not fit input {:?} (needs [B, N, D])",
                        tok.len(),
                        x.shape()
                    ),
                )
            })?;
        let (b, n, d) = x3.dim();
        let mut y = Array3::<f32>::zeros((b, n + 1, d));
        y.slice_mut(s![.., 0, ..]).assign(&tok);
        y.slice_mut(s![.., 1.., ..]).assign(&x3);
        self.shape = (mode == Mode::Train).then_some([b, n, d]);
        Ok(y.into_dyn())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let [b, n, d] = *cached(&self.name, &self.shape)?;
        check_grad(&self.name, &grad_out, &[b, n + 1, d])?;
        let g = grad_out
            .view()
            .into_dimensionality::<Ix3>()
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let dtok: Array1<f32> = g.slice(s![.., 0, ..]).sum_axis(Axis(0));
        self.token.grad = dtok.into_dyn();
        let dx: Array3<f32> = g.slice(s![.., 1.., ..]).to_owned();
        Ok(vec![dx.into_dyn()])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.token]
    }
}

impl ClassToken {
    /// The layer of an IR class-token node: the model's token or U(±0.02).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        token: &Tensor,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let token = ctx.weight(token, |rng| uniform(rng, token.shape(), POSITION_INIT));
        ctx.push(ClassToken::new(&node.name, token)?, &[x.id], Layout::AsIs)
    }
}

impl PositionEmbedding {
    /// The layer of an IR learned-position node: the model's table or U(±0.02).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        table: &Tensor,
        axis: usize,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let table = ctx.weight(table, |rng| uniform(rng, table.shape(), POSITION_INIT));
        let layer = PositionEmbedding::new(&node.name, table, axis)?;
        ctx.push(layer, &[x.id], Layout::AsIs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn positions_add_table_rows_along_the_axis() {
        let table = rand_tensor(&[5, 3], 1.0, 1);
        let x = rand_tensor(&[2, 4, 3], 1.0, 2);
        let mut p = PositionEmbedding::new("pos", table.clone(), 1).unwrap();
        let y = p.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y[[1, 2, 0]], x[[1, 2, 0]] + table[[2, 0]]);
        // sequence-first [T, B, D], axis 0
        let mut p0 = PositionEmbedding::new("pos", table.clone(), 0).unwrap();
        let y = p0.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y[[1, 3, 2]], x[[1, 3, 2]] + table[[1, 2]]);
    }

    #[test]
    fn position_gradients_sum_over_the_batch() {
        for axis in [0, 1] {
            let mut p = PositionEmbedding::new("pos", rand_tensor(&[5, 3], 1.0, 3), axis).unwrap();
            let x = rand_tensor(&[3, 4, 3], 1.0, 4);
            check_layer(&mut p, &[x], 1e-2, 1e-3, 15).unwrap();
            // rows past the sequence get no gradient
            assert!(p
                .table
                .grad
                .index_axis(Axis(0), 4)
                .iter()
                .all(|&v| v == 0.0));
        }
    }

    #[test]
    fn position_bad_shapes_name_the_layer() {
        assert!(PositionEmbedding::new("pe", Tensor::zeros(vec![4]), 1).is_err());
        let mut p = PositionEmbedding::new("pe", Tensor::zeros(vec![4, 3]), 1).unwrap();
        let e = p
            .forward(&[&Tensor::zeros(vec![2, 5, 3])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`pe`") && e.contains("longer"), "{e}");
        for s in [vec![2, 4, 2], vec![2, 3]] {
            let e = p
                .forward(&[&Tensor::zeros(s)], Mode::Eval)
                .unwrap_err()
                .to_string();
            assert!(e.contains("`pe`") && e.contains("does not fit"), "{e}");
        }
    }

    #[test]
    fn class_token_prepends_and_checks() {
        let tok = rand_tensor(&[3], 1.0, 5);
        let mut c = ClassToken::new("cls", tok.clone()).unwrap();
        let x = rand_tensor(&[2, 4, 3], 1.0, 6);
        let y = c.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y.shape(), [2, 5, 3]);
        assert_eq!(y[[1, 0, 2]], tok[2]);
        assert_eq!(y[[1, 3, 1]], x[[1, 2, 1]]);
        check_layer(&mut c, &[x], 1e-2, 1e-3, 15).unwrap();
    }

    #[test]
    fn class_token_bad_shapes_name_the_layer() {
        assert!(ClassToken::new("cls", Tensor::zeros(vec![2, 3])).is_err());
        let mut c = ClassToken::new("cls", Tensor::zeros(vec![3])).unwrap();
        for s in [vec![2, 4, 5], vec![4, 3]] {
            let e = c
                .forward(&[&Tensor::zeros(s)], Mode::Eval)
                .unwrap_err()
                .to_string();
            assert!(e.contains("`cls`") && e.contains("[B, N, D]"), "{e}");
        }
    }
}
