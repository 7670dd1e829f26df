//! Token embedding: a lookup of rows of a `[vocab, dim]` table by token id. The ids arrive as an
//! f32 tensor of exact integers (the IR's convention); they carry no gradient.

use super::from_ir::{Ctx, Layout, Val, EMBED_INIT};
use super::{cached, check_grad, expect_inputs, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use crate::init::uniform;
use cptsim_models::ir::{self, Node};
use rand::Rng;

/// `y[…, :] = table[id[…], :]`.
pub struct Embedding {
    name: String,
    table: Param,
    /// Training pass: the ids and the output shape.
    cache: Option<(Vec<usize>, Vec<usize>)>,
}

impl Embedding {
    /// An embedding over `table` (`[vocab, dim]`).
    pub fn new(name: &str, table: Tensor) -> Result<Self> {
        if table.ndim() != 2 || table.is_empty() {
            return Err(SimError::shape(
                name,
                format!("table {:?} must be a non-empty [vocab, dim]", table.shape()),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            table: Param::new("weight", table, true),
            cache: None,
        })
    }

    fn dims(&self) -> (usize, usize) {
        let s = self.table.value.shape();
        (s[0], s[1])
    }

    /// The ids as table rows; anything but an integer in `0..vocab` is an error naming it.
    fn ids(&self, x: &Tensor) -> Result<Vec<usize>> {
        let vocab = self.dims().0;
        x.iter()
            .enumerate()
            .map(|(i, &v)| {
                if v.fract() == 0.0 && v >= 0.0 && (v as usize) < vocab {
                    Ok(v as usize)
                } else {
                    Err(SimError::shape(
                        &self.name,
                        format!("token id {v} at position {i} is not an integer in 0..{vocab}"),
                    ))
                }
            })
            .collect()
    }
}

impl Layer for Embedding {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let ids = self.ids(x)?;
        let dim = self.dims().1;
        let table = self
            .table
            .value
            .as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "table not contiguous"))?;
        let mut y = Vec::with_capacity(ids.len() * dim);
        for &id in &ids {
            y.extend_from_slice(&table[id * dim..(id + 1) * dim]);
        }
        let mut shape = x.shape().to_vec();
        shape.push(dim);
        let y = Tensor::from_shape_vec(shape.clone(), y)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        self.cache = (mode == Mode::Train).then_some((ids, shape));
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (ids, shape) = cached(&self.name, &self.cache)?;
        check_grad(&self.name, &grad_out, shape)?;
        let (vocab, dim) = self.dims();
        let g = grad_out.as_standard_layout();
        let g = g
            .as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
        // scatter-add, in id order of appearance (deterministic)
        let mut dt = vec![0.0f32; vocab * dim];
        for (row, &id) in g.chunks(dim).zip(ids) {
            dt[id * dim..(id + 1) * dim]
                .iter_mut()
                .zip(row)
                .for_each(|(d, &v)| *d += v);
        }
        self.table.grad = Tensor::from_shape_vec(vec![vocab, dim], dt)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let ids_shape = &shape[..shape.len() - 1];
        Ok(vec![Tensor::zeros(ids_shape.to_vec())])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.table]
    }
}

impl Embedding {
    /// The layer of an IR `Gather` of an embedding table: the model's table or U(±0.1).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        e: &ir::Embedding,
        ins: &[Val],
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let table = ctx.weight(&e.table, |rng| uniform(rng, e.table.shape(), EMBED_INIT));
        ctx.push(Embedding::new(&node.name, table)?, &[x.id], Layout::AsIs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::rand_tensor;
    use super::*;

    #[test]
    fn looks_up_rows_and_scatters_gradients() {
        let table = rand_tensor(&[5, 3], 1.0, 1);
        let mut e = Embedding::new("emb", table.clone()).unwrap();
        let x = Tensor::from_shape_vec(vec![2, 2], vec![4.0, 1.0, 4.0, 0.0]).unwrap();
        let y = e.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(y.shape(), &[2, 2, 3]);
        assert_eq!(
            y.as_slice().unwrap()[..3],
            table.as_slice().unwrap()[12..15]
        );
        // the table gradient by finite differences of Σ r·y (y is linear in the table: exact)
        let r = rand_tensor(&[2, 2, 3], 1.0, 2);
        let dx = e.backward(r.clone()).unwrap();
        assert_eq!(dx[0].shape(), &[2, 2]);
        let grad = e.table.grad.clone();
        for j in 0..15 {
            let mut t = table.clone();
            t.as_slice_mut().unwrap()[j] += 1.0;
            let mut e2 = Embedding::new("emb", t).unwrap();
            let y2 = e2.forward(&[&x], Mode::Eval).unwrap();
            let numeric: f32 = (&y2 - &y).iter().zip(r.iter()).map(|(a, b)| a * b).sum();
            assert!(
                (numeric - grad.as_slice().unwrap()[j]).abs() < 1e-5,
                "element {j}"
            );
        }
        // row 4 appears twice: its gradient is the sum of both positions
        let row4: Vec<f32> = (0..3).map(|k| r[[0, 0, k]] + r[[1, 0, k]]).collect();
        assert_eq!(&grad.as_slice().unwrap()[12..15], &row4[..]);
    }

    #[test]
    fn bad_ids_and_tables_are_errors() {
        let mut e = Embedding::new("emb", Tensor::zeros(vec![3, 2])).unwrap();
        for bad in [3.0, -1.0, 0.5, f32::NAN] {
            let x = Tensor::from_elem(vec![1], bad);
            let err = e.forward(&[&x], Mode::Eval).unwrap_err().to_string();
            assert!(
                err.contains("emb") && err.contains("not an integer in 0..3"),
                "{err}"
            );
        }
        assert!(Embedding::new("emb", Tensor::zeros(vec![3])).is_err());
    }
}
