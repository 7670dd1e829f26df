//! Residual addition of two tensors of the same shape.

use std::mem::MaybeUninit;

use super::{
    block_of, cached, check_grad, expect_inputs, filled_by_blocks, standard, Epilogue, Layer, Mode,
    Tensor,
};
use crate::error::{Result, SimError};
use cptsim_kernels::elementwise::{add_in_place, add_into};
use rayon::prelude::*;

/// `y = a + b`; both inputs receive the output gradient.
pub struct Add {
    name: String,
    shape: Option<Vec<usize>>,
}

/// Rows per block of the sum (the epilogue runs on each block while it is in cache).
const ROWS: usize = 1024;

impl Add {
    /// A new residual-add layer.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            shape: None,
        }
    }

    /// The add as an epilogue step of the layer producing one of its operands
    /// (`net::fuse::eval_epilogue`): the layer will then not run, so it drops what an
    /// evaluation forward drops.
    pub(crate) fn fold_into_epilogue(&mut self) {
        self.shape = None;
    }

    /// An evaluation forward pass with `epilogue` applied to each block of the sum while it is
    /// in cache.
    pub(crate) fn forward_then(
        &mut self,
        inputs: &[&Tensor],
        epilogue: &Epilogue,
    ) -> Result<Tensor> {
        self.shape = None;
        self.sum(inputs, epilogue)
    }

    /// `a + b`, then `epilogue` block by block.
    fn sum(&self, inputs: &[&Tensor], epilogue: &Epilogue) -> Result<Tensor> {
        let v = expect_inputs(&self.name, inputs, 2)?;
        let shape = v[0].shape();
        if shape != v[1].shape() {
            return Err(SimError::shape(
                &self.name,
                format!("operand shapes differ: {shape:?} vs {:?}", v[1].shape()),
            ));
        }
        let (Some(a), Some(b)) = (v[0].as_slice(), v[1].as_slice()) else {
            let mut y = v[0] + v[1];
            epilogue.apply_to(&mut y)?;
            return Ok(y);
        };
        let c = shape.last().copied().unwrap_or(1).max(1);
        let block = ROWS.saturating_mul(c);
        let y = filled_by_blocks(a.len(), block, |i, y| {
            let y = add_into(block_of(a, block, i), block_of(b, block, i), y);
            epilogue.apply(y, c, i * block)?;
            Ok(y)
        })?;
        Tensor::from_shape_vec(shape, y).map_err(|e| SimError::shape(&self.name, e.to_string()))
    }
}

/// Elements per task of [`accumulate`] (element-wise, so results do not depend on the split).
const CHUNK: usize = 1 << 15;

/// `acc += d` element-wise, in parallel chunks: a value's gradient from one more of the layers
/// that read it. Shapes that differ are an error naming `layer`, the layer that gave `d`.
pub(crate) fn accumulate(layer: &str, acc: &mut Tensor, d: &Tensor) -> Result<()> {
    if acc.shape() != d.shape() {
        return Err(SimError::shape(
            layer,
            format!(
                "input gradient of shape {:?} for a value whose gradient so far is {:?}",
                d.shape(),
                acc.shape()
            ),
        ));
    }
    if let (Some(a), Some(b)) = (acc.as_slice_mut(), d.as_slice()) {
        a.par_chunks_mut(CHUNK)
            .zip(b.par_chunks(CHUNK))
            .for_each(|(a, b)| add_in_place(a, b));
        return Ok(());
    }
    *acc += d;
    Ok(())
}

impl Layer for Add {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let y = self.sum(inputs, &Epilogue::default())?;
        self.shape = (mode == Mode::Train).then(|| y.shape().to_vec());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.shape)?;
        check_grad(&self.name, &grad_out, shape)?;
        // The copy for the second input, in parallel blocks.
        let g = standard(grad_out);
        let src = g
            .as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
        let block = ROWS * shape.last().copied().unwrap_or(1).max(1);
        let copy = filled_by_blocks(src.len(), block, |i, out| {
            let from = block_of(src, block, i);
            for (o, &v) in out.iter_mut().zip(from) {
                o.write(v);
            }
            // SAFETY: `out` is as long as its block of `src` and every value was written.
            Ok(unsafe { &mut *(out as *mut [MaybeUninit<f32>] as *mut [f32]) })
        })?;
        let copy = Tensor::from_shape_vec(g.shape(), copy)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        Ok(vec![g, copy])
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn gradient_and_shape_check() {
        let a = rand_tensor(&[2, 3, 3, 2], 1.0, 1);
        let b = rand_tensor(&[2, 3, 3, 2], 1.0, 2);
        check_layer(&mut Add::new("add"), &[a.clone(), b], 1e-2, 1e-3, 20).unwrap();
        let c = rand_tensor(&[2, 3, 3, 1], 1.0, 2);
        let e = Add::new("add").forward(&[&a, &c], Mode::Eval).unwrap_err();
        assert!(e.to_string().contains("shapes differ"), "{e}");
    }

    #[test]
    fn accumulated_gradients_add_element_wise_and_shapes_must_match() {
        // Long enough for several parallel chunks; a transposed view takes the plain path.
        let a = rand_tensor(&[3, 17, 31, 64], 1.0, 1);
        let d = rand_tensor(&[3, 17, 31, 64], 1.0, 2);
        let want = &a + &d;
        let mut acc = a.clone();
        accumulate("conv", &mut acc, &d).unwrap();
        assert_eq!(acc, want);
        let mut t = a.t().to_owned();
        accumulate("conv", &mut t, &d.t().to_owned()).unwrap();
        assert_eq!(t, want.t());
        let e = accumulate("conv", &mut acc, &rand_tensor(&[3, 17, 31, 1], 1.0, 3)).unwrap_err();
        assert!(
            e.to_string().contains("conv") && e.to_string().contains("[3, 17, 31, 1]"),
            "{e}"
        );
    }
}
