//! Batched product of two activations, `A [..., M, K] × B [..., K, N] → [..., M, N]` (attention's
//! `Q·Kᵀ` and `P·V`), with equal leading dimensions (no broadcasting).
//!
//! Quantization: both operands of this act × act GEMM are quantized as activations at the forward
//! bits (`A` with the layer's running range [`LayerQuant::act_range`], `B` with its second one,
//! [`LayerQuant::act_range_b`]) and the incoming error at the backward bits, both backward GEMMs
//! reading the quantized error and the quantized forward operands: the rule spec §1.2 gives a
//! weight × activation GEMM, with the second activation in place of the weights. Per-sample
//! precision policies are rejected (their bits address the samples of one activation).

use cptsim_kernels::gemm::matmul_uninit;
use ndarray::{ArrayView3, CowArray, IxDyn};
use rayon::prelude::*;

use super::from_ir::{unsupported, Ctx, Layout, Val};
use super::qgemm::{mask_input_grad, quantize_error, reject_per_sample};
use super::{cached, check_grad, expect_inputs, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use crate::quant::LayerQuant;
use cptsim_models::ir::Node;
use rand::Rng;

/// What backward needs: the quantized operands, their gradient masks and the output shape.
struct Cache {
    a: Tensor,
    b: Tensor,
    a_mask: Option<Vec<f32>>,
    b_mask: Option<Vec<f32>>,
    out_shape: Vec<usize>,
}

/// The batched act × act matrix product.
pub struct MatMul {
    name: String,
    /// Quantization state (fp32 unless bits are set).
    pub quant: LayerQuant,
    cache: Option<Cache>,
}

impl MatMul {
    /// A matmul layer with the given quantizer state.
    pub fn new(name: &str, quant: LayerQuant) -> Self {
        Self {
            name: name.to_string(),
            quant,
            cache: None,
        }
    }

    /// The output shape and `(batch, M, K, N)`, or an error naming both operand shapes.
    fn dims(&self, a: &[usize], b: &[usize]) -> Result<(Vec<usize>, [usize; 4])> {
        let r = a.len();
        let fits = r >= 2 && b.len() == r && a[..r - 2] == b[..r - 2] && a[r - 1] == b[r - 2];
        if !fits {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "cannot multiply {a:?} × {b:?} (needs [..., M, K] × [..., K, N] with equal \
                     leading dimensions)"
                ),
            ));
        }
        let (m, k, n) = (a[r - 2], a[r - 1], b[r - 1]);
        let mut out = a[..r - 2].to_vec();
        out.extend([m, n]);
        Ok((out, [a[..r - 2].iter().product(), m, k, n]))
    }
}

/// `t` (standard layout, `batch·rows·cols` elements) as a `[batch, rows, cols]` view.
fn view3<'a, S: ndarray::Data<Elem = f32>>(
    name: &str,
    t: &'a ndarray::ArrayBase<S, ndarray::IxDyn>,
    dims: [usize; 3],
) -> Result<ArrayView3<'a, f32>> {
    t.view()
        .into_shape_with_order(dims)
        .map_err(|e| SimError::shape(name, e.to_string()))
}

/// `op_a(a[i]) · op_b(b[i])` for every batch slice `i`, with `op` a transpose when asked, as
/// `[batch, rows, cols]` values in row-major order: the slices (a batch's heads) in parallel, each
/// one product of the project's GEMM ([`matmul_uninit`]: every element one chain of fused
/// multiply-adds in reduction order, whatever the vector path or thread count), written into
/// fresh storage without zeroing it first.
fn batched(
    a: ArrayView3<f32>,
    b: ArrayView3<f32>,
    (ta, tb): (bool, bool),
    [batch, rows, cols]: [usize; 3],
) -> Result<Vec<f32>> {
    let per = rows * cols;
    let mut out = crate::arena::take(batch * per);
    if per > 0 {
        let slices: Vec<_> = a
            .outer_iter()
            .zip(b.outer_iter())
            .zip(out.spare_capacity_mut()[..batch * per].chunks_mut(per))
            .collect();
        slices.into_par_iter().try_for_each(|((ai, bi), oi)| {
            let ai = if ta { ai.reversed_axes() } else { ai };
            let bi = if tb { bi.reversed_axes() } else { bi };
            matmul_uninit(oi, ai, bi).map(drop)
        })?;
    }
    // SAFETY: each of the `batch` chunks of `per` values was written by its product above
    // (`matmul_uninit` initialises all of its output or errors, and an error returned early).
    unsafe { out.set_len(batch * per) };
    Ok(out)
}

/// `t` in standard layout and its gradient mask: when `copy`, a copy quantized in place by `q`
/// (which returns the mask); else `t` itself where it is (copied only if not in standard layout).
fn quantized<'t>(
    t: &'t Tensor,
    copy: bool,
    q: impl FnOnce(&mut [f32]) -> Option<Vec<f32>>,
) -> (CowArray<'t, f32, IxDyn>, Option<Vec<f32>>) {
    if !copy {
        return (t.as_standard_layout(), None);
    }
    let mut c = t.as_standard_layout().into_owned();
    let mask = c.as_slice_mut().and_then(q);
    (CowArray::from(c), mask)
}

impl Layer for MatMul {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let ins = expect_inputs(&self.name, inputs, 2)?;
        let (out_shape, [batch, m, k, n]) = self.dims(ins[0].shape(), ins[1].shape())?;
        reject_per_sample(&self.name, &self.quant, "act × act GEMMs")?;
        let train = mode == Mode::Train;
        // Evaluating at fp32 there is nothing to quantize or keep: the operands are read in place.
        let copy = train || self.quant.bits_fw > 0;
        let (a, a_mask) = quantized(ins[0], copy, |s| self.quant.activations(s, train));
        let (b, b_mask) = quantized(ins[1], copy, |s| self.quant.activations_second(s, train));
        let y = batched(
            view3(&self.name, &a, [batch, m, k])?,
            view3(&self.name, &b, [batch, k, n])?,
            (false, false),
            [batch, m, n],
        )?;
        let y = Tensor::from_shape_vec(out_shape.clone(), y)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        self.cache = train.then(|| Cache {
            a: a.into_owned(),
            b: b.into_owned(),
            a_mask,
            b_mask,
            out_shape,
        });
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let c = cached(&self.name, &self.cache)?;
        check_grad(&self.name, &grad_out, &c.out_shape)?;
        let r = c.a.ndim();
        let (m, k, n) = (c.a.shape()[r - 2], c.a.shape()[r - 1], c.b.shape()[r - 1]);
        let batch = c.a.len() / (m * k).max(1);
        let gq = quantize_error(&mut self.quant, grad_out);
        let g = view3(&self.name, &gq, [batch, m, n])?;
        let a = view3(&self.name, &c.a, [batch, m, k])?;
        let b = view3(&self.name, &c.b, [batch, k, n])?;
        let da = batched(g, b, (false, true), [batch, m, k])?;
        let db = batched(a, g, (true, false), [batch, k, n])?;
        let shaped = |t: Vec<f32>, like: &Tensor| {
            Tensor::from_shape_vec(like.shape(), t)
                .map_err(|e| SimError::shape(&self.name, e.to_string()))
        };
        let (mut da, mut db) = (shaped(da, &c.a)?, shaped(db, &c.b)?);
        mask_input_grad(&mut da, c.a_mask.as_ref());
        mask_input_grad(&mut db, c.b_mask.as_ref());
        Ok(vec![da, db])
    }

    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        Some(&mut self.quant)
    }
}

impl MatMul {
    /// The layer of an IR activation × activation `MatMul` node (two tensors held as is).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        quant: LayerQuant,
    ) -> Result<Val> {
        match ins {
            [a, b] if a.layout == Layout::AsIs && b.layout == Layout::AsIs => {
                ctx.push(MatMul::new(&node.name, quant), &[a.id, b.id], Layout::AsIs)
            }
            _ => Err(unsupported(
                node,
                "an act × act MatMul takes two non-image tensors",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor, PerSample};
    use super::*;
    use crate::quant::QuantMethod;

    fn mm() -> MatMul {
        MatMul::new("qk", LayerQuant::new(QuantMethod::Sbm, 7))
    }

    #[test]
    fn forward_is_a_matmul_per_batch_slice() {
        let a = rand_tensor(&[2, 3, 4, 5], 1.0, 1);
        let b = rand_tensor(&[2, 3, 5, 2], 1.0, 2);
        let y = mm().forward(&[&a, &b], Mode::Eval).unwrap();
        assert_eq!(y.shape(), [2, 3, 4, 2]);
        for (i, j, r, c) in [(0, 0, 0, 0), (1, 2, 3, 1), (0, 1, 2, 0)] {
            let want: f32 = (0..5).map(|k| a[[i, j, r, k]] * b[[i, j, k, c]]).sum();
            assert!((y[[i, j, r, c]] - want).abs() < 1e-5);
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let a = rand_tensor(&[2, 3, 4], 1.0, 3);
        let b = rand_tensor(&[2, 4, 5], 1.0, 4);
        check_layer(&mut mm(), &[a, b], 1e-2, 1e-3, 20).unwrap();
        let a = rand_tensor(&[3, 4], 1.0, 5);
        let b = rand_tensor(&[4, 2], 1.0, 6);
        check_layer(&mut mm(), &[a, b], 1e-2, 1e-3, 12).unwrap();
    }

    #[test]
    fn bad_shapes_name_the_layer() {
        let mut l = mm();
        for (a, b) in [
            (vec![2, 3, 4], vec![2, 5, 2]),
            (vec![2, 3, 4], vec![3, 4, 2]),
            (vec![2, 3, 4], vec![4, 2]),
            (vec![4], vec![4]),
        ] {
            let e = l
                .forward(&[&Tensor::zeros(a.clone()), &Tensor::zeros(b)], Mode::Eval)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("`qk`") && e.contains("cannot multiply"),
                "{a:?}: {e}"
            );
        }
        assert!(l
            .forward(&[&Tensor::zeros(vec![2, 2])], Mode::Eval)
            .is_err());
    }

    #[test]
    fn quantized_operands_and_error() {
        let a = rand_tensor(&[2, 4, 6], 1.0, 8);
        let b = rand_tensor(&[2, 6, 3], 2.0, 9);
        let y32 = mm().forward(&[&a, &b], Mode::Train).unwrap();
        let mut q = mm();
        q.quant.set_bits(8, 8).unwrap();
        let y8 = q.forward(&[&a, &b], Mode::Train).unwrap();
        let diff = (&y8 - &y32).mapv(f32::abs).fold(0.0f32, |m, &v| m.max(v));
        assert!(diff > 0.0 && diff < 0.1, "{diff}");
        // each operand folded its own batch range into its own EMA
        assert!(
            q.quant.act_range.range > 0.0 && q.quant.act_range_b.range > q.quant.act_range.range
        );
        let g = rand_tensor(&[2, 4, 3], 1.0, 10);
        let d1 = q.backward(g.clone()).unwrap();
        let mut q2 = mm();
        q2.quant.set_bits(8, 8).unwrap();
        q2.forward(&[&a, &b], Mode::Train).unwrap();
        let d2 = q2.backward(g).unwrap();
        assert_eq!(d1, d2, "a quantized pass is deterministic");
        assert_eq!(q.quant.error_calls, 1);
    }

    #[test]
    fn per_sample_policies_are_rejected() {
        let mut q = mm();
        q.quant.set_bits(8, 8).unwrap();
        q.quant.hook = Some(Box::new(PerSample(vec![(4, 4), (8, 8)])));
        let a = rand_tensor(&[2, 2, 2], 1.0, 1);
        let e = q.forward(&[&a, &a], Mode::Train).unwrap_err().to_string();
        assert!(e.contains("`qk`") && e.contains("act × act"), "{e}");
    }
}
