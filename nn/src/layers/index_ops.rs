//! Index arithmetic at run time: [`CumSum`] (position ids counted from a padding mask),
//! [`GatherElements`] of a constant at run-time indices (a token-type buffer read at the
//! position ids; the indices carry no gradient) and [`Gather`] of a run-time tensor at constant
//! positions (its gradient scattered back). All take tensors held as in the IR.

use super::from_ir::{Ctx, Layout, Val};
use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::index_ops::{cumsum, gather_block, gather_offsets, scatter_block_add};
use cptsim_models::ir::{self, Node};
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

/// Constant positions read from a block of axes `axis..axis + block.len()` (an IR
/// [`ir::Gather`]); the axes around the block, the batch among them, are taken whole at any
/// size. Backward adds each output's gradient back to the element it read.
pub struct Gather {
    name: String,
    op: ir::Gather,
    /// Training pass: the input shape.
    in_shape: Option<Vec<usize>>,
}

impl Gather {
    /// A gather of `op`'s positions.
    pub fn new(name: &str, op: ir::Gather) -> Self {
        Self {
            name: name.to_string(),
            op,
            in_shape: None,
        }
    }

    /// The layer of an IR `Gather` node, on its input held as in the IR.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        op: &ir::Gather,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::AsIs)?;
        ctx.push(Gather::new(&node.name, op.clone()), &[x.id], Layout::AsIs)
    }

    /// The output shape and `(outer, block, inner)` element counts for input shape `x`.
    fn geometry(&self, x: &[usize]) -> Result<(Vec<usize>, [usize; 3])> {
        let out = self
            .op
            .output_shape(x)
            .map_err(|m| SimError::shape(&self.name, m))?;
        let end = self.op.axis + self.op.block.len();
        let outer = x[..self.op.axis].iter().product();
        let inner = x[end..].iter().product();
        Ok((out, [outer, self.op.block.iter().product(), inner]))
    }
}

impl Layer for Gather {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = standard(expect_inputs(&self.name, inputs, 1)?[0].view());
        let (out, [outer, block, inner]) = self.geometry(x.shape())?;
        let flat = x.as_slice().unwrap_or(&[]);
        let v = gather_block(flat, outer, block, inner, &self.op.positions)
            .ok_or_else(|| SimError::shape(&self.name, "positions do not fit the input"))?;
        self.in_shape = (mode == Mode::Train).then(|| x.shape().to_vec());
        ArrayD::from_shape_vec(IxDyn(&out), v)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.in_shape)?.clone();
        let (out, [outer, block, inner]) = self.geometry(&shape)?;
        check_grad(&self.name, &grad_out, &out)?;
        let g = standard(grad_out.view());
        let dx = scatter_block_add(
            g.as_slice().unwrap_or(&[]),
            outer,
            block,
            inner,
            &self.op.positions,
        )
        .ok_or_else(|| SimError::shape(&self.name, "positions do not fit the gradient"))?;
        let dx = ArrayD::from_shape_vec(IxDyn(&shape), dx)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        Ok(vec![dx])
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

    #[test]
    fn gather_reads_a_block_at_any_batch_and_scatters_its_gradient_back() {
        // x [H 3, W 2, N, C 1]: the block is H·W, read at (2, 1), (0, 0), (2, 1)
        let op = ir::Gather {
            axis: 0,
            block: vec![3, 2],
            grid: vec![3],
            positions: vec![5, 0, 5],
        };
        let mut g = Gather::new("pool", op);
        for n in [1usize, 2] {
            let x = Tensor::from_shape_fn(IxDyn(&[3, 2, n, 1]), |i| {
                (10 * (i[0] * 2 + i[1]) + i[2]) as f32
            });
            let y = g.forward(&[&x], Mode::Train).unwrap();
            assert_eq!(y.shape(), [3, n, 1]);
            let want: Vec<f32> = [50.0, 0.0, 50.0]
                .iter()
                .flat_map(|&v| (0..n).map(move |b| v + b as f32))
                .collect();
            assert_eq!(y.iter().copied().collect::<Vec<_>>(), want);
        }
        let d = g.backward(Tensor::ones(IxDyn(&[3, 2, 1]))).unwrap();
        let mut want = vec![0.0; 12];
        want[..2].copy_from_slice(&[1.0, 1.0]);
        want[10..].copy_from_slice(&[2.0, 2.0]);
        assert_eq!(d[0].iter().copied().collect::<Vec<_>>(), want);
        let e = g
            .forward(&[&Tensor::zeros(IxDyn(&[2, 2, 1, 1]))], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pool") && e.contains("no block [3, 2] at axis 0"),
            "{e}"
        );
    }

    #[test]
    fn gather_has_the_gradient_of_its_values() {
        use super::super::gradcheck::{check_layer, rand_tensor};
        let op = ir::Gather {
            axis: 1,
            block: vec![4],
            grid: vec![2, 2],
            positions: vec![3, 1, 1, 0],
        };
        let mut g = Gather::new("g", op);
        check_layer(&mut g, &[rand_tensor(&[2, 4, 3], 1.0, 7)], 1e-3, 2e-3, 24).unwrap();
    }
}
