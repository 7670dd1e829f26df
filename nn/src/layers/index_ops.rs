//! Index arithmetic at run time: [`CumSum`] (position ids counted from a padding mask) and
//! [`GatherElements`] of a constant at run-time indices (a token-type buffer read at the
//! position ids). Both take tensors held as in the IR; the indices carry no gradient.

use super::from_ir::{Ctx, Layout, Val};
use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::index_ops::{cumsum, gather_offsets};
use cptsim_models::ir::Node;
use ndarray::{ArrayD, IxDyn};
use rand::Rng;

/// Running sum along one axis (ONNX `CumSum`); backward sums the gradient the other way.
pub struct CumSum {
    name: String,
    axis: usize,
    exclusive: bool,
    reverse: bool,
    /// Training pass: the output shape.
    out_shape: Option<Vec<usize>>,
}

impl CumSum {
    /// A running sum along `axis` (`exclusive`: of the elements before; `reverse`: from the end).
    pub fn new(name: &str, axis: usize, exclusive: bool, reverse: bool) -> Self {
        Self {
            name: name.to_string(),
            axis,
            exclusive,
            reverse,
            out_shape: None,
        }
    }

    /// The layer of an IR `CumSum` node, on its input held as in the IR.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        axis: usize,
        exclusive: bool,
        reverse: bool,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let layer = CumSum::new(&node.name, axis, exclusive, reverse);
        ctx.push(layer, &[x.id], Layout::AsIs)
    }

    fn run(&self, x: &Tensor, reverse: bool) -> Result<Tensor> {
        if self.axis >= x.ndim() {
            return Err(SimError::shape(
                &self.name,
                format!("axis {} out of range for input {:?}", self.axis, x.shape()),
            ));
        }
        let mut y = standard(x.view());
        cumsum(&mut y, self.axis, self.exclusive, reverse);
        Ok(y)
    }
}

impl Layer for CumSum {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let y = self.run(x, self.reverse)?;
        self.out_shape = (mode == Mode::Train).then(|| y.shape().to_vec());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.out_shape)?;
        check_grad(&self.name, &grad_out, shape)?;
        // y_i = Σ_{j ≤ i} x_j, so ∂L/∂x_j = Σ_{i ≥ j} g_i: the same sum, run the other way
        Ok(vec![self.run(&grad_out, !self.reverse)?])
    }
}

/// `out = data[…, idx, …]` along one axis of a constant (ONNX `GatherElements`); the output
/// has the indices' shape, and the indices get a zero gradient.
pub struct GatherElements {
    name: String,
    data: Tensor,
    axis: usize,
    /// Training pass: the indices' shape.
    in_shape: Option<Vec<usize>>,
}

impl GatherElements {
    /// A gather from `data` along `axis` (axes of size 1 in `data` serve every index).
    pub fn new(name: &str, data: Tensor, axis: usize) -> Self {
        Self {
            name: name.to_string(),
            data: standard(data.view()),
            axis,
            in_shape: None,
        }
    }

    /// The layer of an IR `GatherElements` node, on indices held as in the IR.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        data: &ArrayD<f32>,
        axis: usize,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        let layer = GatherElements::new(&node.name, data.clone(), axis);
        ctx.push(layer, &[x.id], Layout::AsIs)
    }
}

impl Layer for GatherElements {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let idx = expect_inputs(&self.name, inputs, 1)?[0];
        let mut ids = Vec::with_capacity(idx.len());
        for &v in idx.iter() {
            if !(v.is_finite() && v.fract() == 0.0 && v.abs() < (1u32 << 24) as f32) {
                return Err(SimError::shape(
                    &self.name,
                    format!("index {v} is not an integer below 2^24"),
                ));
            }
            ids.push(v as i64);
        }
        let offsets = gather_offsets(self.data.shape(), self.axis, idx.shape(), ids.into_iter())
            .map_err(|m| SimError::shape(&self.name, m))?;
        let flat = self.data.as_slice().unwrap_or(&[]);
        let v: Vec<f32> = offsets
            .iter()
            .map(|&o| flat.get(o).copied().unwrap_or(f32::NAN))
            .collect();
        self.in_shape = (mode == Mode::Train).then(|| idx.shape().to_vec());
        ArrayD::from_shape_vec(IxDyn(idx.shape()), v)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.in_shape)?;
        check_grad(&self.name, &grad_out, shape)?;
        Ok(vec![Tensor::zeros(IxDyn(shape))])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap()
    }

    #[test]
    fn cumsum_counts_positions_and_sums_its_gradient_back() {
        let mut c = CumSum::new("pos", 1, false, false);
        let mask = t(&[2, 3], &[1.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
        let y = c.forward(&[&mask], Mode::Train).unwrap();
        assert_eq!(
            y.iter().copied().collect::<Vec<_>>(),
            [1.0, 2.0, 2.0, 0.0, 1.0, 2.0]
        );
        let g = c
            .backward(t(&[2, 3], &[1.0, 2.0, 3.0, 1.0, 1.0, 1.0]))
            .unwrap();
        assert_eq!(
            g[0].iter().copied().collect::<Vec<_>>(),
            [6.0, 5.0, 3.0, 3.0, 2.0, 1.0]
        );
        let mut c = CumSum::new("bad", 2, false, false);
        let e = c.forward(&[&mask], Mode::Eval).unwrap_err().to_string();
        assert!(
            e.contains("bad") && e.contains("axis 2 out of range"),
            "{e}"
        );
    }

    #[test]
    fn cumsum_has_the_gradient_of_its_values() {
        use super::super::gradcheck::{check_layer, rand_tensor};
        let x = rand_tensor(&[2, 4, 3], 1.0, 5);
        for (ex, rev) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut c = CumSum::new("c", 1, ex, rev);
            check_layer(&mut c, std::slice::from_ref(&x), 1e-3, 2e-3, 24).unwrap();
        }
    }

    #[test]
    fn gather_elements_reads_a_buffer_for_any_batch_and_checks_indices() {
        // a [1, 4] buffer read at position ids [3, 2]
        let mut g = GatherElements::new("tt", t(&[1, 4], &[10.0, 11.0, 12.0, 13.0]), 1);
        let idx = t(&[3, 2], &[0.0, 3.0, 1.0, 2.0, -1.0, 0.0]);
        let y = g.forward(&[&idx], Mode::Train).unwrap();
        assert_eq!(y.shape(), [3, 2]);
        assert_eq!(
            y.iter().copied().collect::<Vec<_>>(),
            [10.0, 13.0, 11.0, 12.0, 13.0, 10.0]
        );
        let d = g.backward(Tensor::ones(IxDyn(&[3, 2]))).unwrap();
        assert!(d[0].iter().all(|&v| v == 0.0));
        for (bad, want) in [(4.0, "index 4 out of range"), (0.5, "not an integer")] {
            let idx = t(&[1, 1], &[bad]);
            let e = g.forward(&[&idx], Mode::Eval).unwrap_err().to_string();
            assert!(e.contains("tt") && e.contains(want), "{e}");
        }
    }
}
