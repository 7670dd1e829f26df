//! Layers that only move elements: [`Reshape`] to a fixed shape (row-major element order, as
//! ONNX `Reshape`) and [`Transpose`] by an axis permutation. Both return standard-layout tensors.

use super::from_ir::{one_any, unsupported, Ctx, Layout, Val};
use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Tensor};
use super::{Flatten, Unflatten};
use crate::error::{Result, SimError};
use cptsim_models::ir::rebatch::rebatch;
use cptsim_models::ir::Node;
use rand::Rng;

/// `t`'s elements in row-major order, as `shape`, or an error naming the layer and both shapes:
/// an owned tensor in standard layout keeps its storage (moved, not copied), a borrowed one is
/// copied.
fn reshaped<S: ndarray::Data<Elem = f32>>(
    name: &str,
    t: ndarray::ArrayBase<S, ndarray::IxDyn>,
    shape: &[usize],
) -> Result<Tensor> {
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if count != Some(t.len()) {
        let count = count.map_or("too many".to_string(), |c| c.to_string());
        return Err(SimError::shape(
            name,
            format!(
                "cannot reshape {:?} ({} elements) to {shape:?} ({count} elements)",
                t.shape(),
                t.len(),
            ),
        ));
    }
    standard(t)
        .into_shape_with_order(shape.to_vec())
        .map_err(|e| SimError::shape(name, e.to_string()))
}

/// Reinterprets the input's row-major element order as a target shape resolved at the built
/// batch (which it includes): an input of another batch gets the target with the axis that
/// carries the batch rebound ([`rebatch`]), so one network trains, evaluates and runs `forward`
/// at any batch.
pub struct Reshape {
    name: String,
    /// The input shape the target was resolved for, and the batch it holds.
    from: Vec<usize>,
    batch: usize,
    /// The row-major stride of one batch step in the input, where the graph tells it.
    batch_stride: Option<usize>,
    shape: Vec<usize>,
    /// Training pass: the input and output shapes.
    pass: Option<(Vec<usize>, Vec<usize>)>,
}

impl Reshape {
    /// A reshape of inputs shaped `from` (at batch `batch`) to exactly `shape`, rebound for
    /// other batches.
    pub fn new(name: &str, from: Vec<usize>, batch: usize, shape: Vec<usize>) -> Self {
        Self {
            name: name.to_string(),
            from,
            batch,
            batch_stride: None,
            shape,
            pass: None,
        }
    }

    /// The same reshape told where the batch sits in its input: one batch step is `stride`
    /// elements in row-major order ([`cptsim_models::ir::batch_axes`]), which settles a target
    /// with two axes of the batch's size.
    pub fn with_batch_stride(mut self, stride: Option<usize>) -> Self {
        self.batch_stride = stride;
        self
    }

    /// The target for an input of shape `x`: the built one when the element counts agree, else
    /// the built one rebound to `x`'s batch, or an error naming the layer and the shapes.
    fn target(&self, x: &[usize]) -> Result<Vec<usize>> {
        let count = |s: &[usize]| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if x == self.from.as_slice() || count(x) == count(&self.shape) {
            return Ok(self.shape.clone());
        }
        rebatch(&self.from, &self.shape, self.batch, self.batch_stride, x).map_err(|m| {
            SimError::shape(
                &self.name,
                format!(
                    "cannot reshape {x:?} to the file's target {:?}: {m}; the export pins its \
                     batch in this reshape's target, so re-export the model with a dynamic \
                     batch axis",
                    self.shape
                ),
            )
        })
    }
}

impl Layer for Reshape {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let shape = self.target(x.shape())?;
        let y = reshaped(&self.name, x.view(), &shape)?;
        self.pass = (mode == Mode::Train).then(|| (x.shape().to_vec(), shape));
        Ok(y)
    }

    fn forward_owned(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        let shape = self.target(x.shape())?;
        self.pass = (mode == Mode::Train).then(|| (x.shape().to_vec(), shape.clone()));
        reshaped(&self.name, x, &shape)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (in_shape, out_shape) = cached(&self.name, &self.pass)?;
        check_grad(&self.name, &grad_out, out_shape)?;
        Ok(vec![reshaped(&self.name, grad_out, in_shape)?])
    }
}

/// Permutes axes: output axis `i` is input axis `perm[i]` (ONNX `Transpose`).
pub struct Transpose {
    name: String,
    perm: Vec<usize>,
    /// `inverse[perm[i]] = i`.
    inverse: Vec<usize>,
    /// Training pass: the output shape.
    out_shape: Option<Vec<usize>>,
}

impl Transpose {
    /// A transpose by `perm`, which must hold each of `0..perm.len()` once.
    pub fn new(name: &str, perm: Vec<usize>) -> Result<Self> {
        let mut inverse = vec![usize::MAX; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            match inverse.get_mut(p) {
                Some(slot) if *slot == usize::MAX => *slot = i,
                _ => {
                    return Err(SimError::shape(
                        name,
                        format!("{perm:?} is not a permutation of 0..{}", perm.len()),
                    ))
                }
            }
        }
        Ok(Self {
            name: name.to_string(),
            perm,
            inverse,
            out_shape: None,
        })
    }

    /// `t` with its axes permuted by `perm`, in standard layout.
    fn permute(&self, t: &Tensor, perm: &[usize]) -> Result<Tensor> {
        if t.ndim() != perm.len() {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "permutation {:?} needs rank {}, got {:?}",
                    self.perm,
                    perm.len(),
                    t.shape()
                ),
            ));
        }
        if let Some(out) = permute_rows(t, perm) {
            return Ok(out);
        }
        Ok(t.view()
            .permuted_axes(perm)
            .as_standard_layout()
            .into_owned())
    }
}

/// `t` (standard layout) with its axes permuted by `perm` when the last axis stays last (the
/// heads of attention, `[B, T, H, d] ↔ [B, H, T, d]`; a channel shuffle, `[N, 2, C/2, H, W] →
/// [N, C/2, 2, H, W]`): whole runs of the trailing axes that stay in place copied at once. A
/// dynamic-rank permuted copy moves value by value (4 % of a Transformer LM step).
fn permute_rows(t: &Tensor, perm: &[usize]) -> Option<Tensor> {
    let r = perm.len();
    if r < 2 || perm[r - 1] != r - 1 || !t.is_standard_layout() {
        return None;
    }
    let (src, shape) = (t.as_slice()?, t.shape());
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    // The trailing axes left in place form one contiguous run per step of the others.
    let kept = perm
        .iter()
        .rev()
        .enumerate()
        .take_while(|&(i, &p)| p == r - 1 - i)
        .count();
    if kept == r {
        return Some(t.clone());
    }
    let lead = r - kept;
    let row: usize = shape[lead..].iter().product();
    // Where one step along each leading output axis moves in the source (standard layout:
    // non-negative strides).
    let steps: Vec<usize> = perm[..lead]
        .iter()
        .map(|&p| t.strides()[p] as usize)
        .collect();
    let mut out = crate::arena::take(t.len());
    let mut at = vec![0usize; lead - 1];
    // The source offset of the current output run, kept up to date as the index advances.
    let mut off = 0usize;
    let (inner, inner_step) = (out_shape[lead - 1], steps[lead - 1]);
    for _ in 0..t.len().checked_div(row * inner).unwrap_or(0) {
        // The innermost leading axis: `inner` runs `inner_step` apart.
        for i in 0..inner {
            let from = off + i * inner_step;
            out.extend_from_slice(src.get(from..from + row)?);
        }
        for a in (0..lead - 1).rev() {
            at[a] += 1;
            off += steps[a];
            if at[a] < out_shape[a] {
                break;
            }
            off -= steps[a] * out_shape[a];
            at[a] = 0;
        }
    }
    Tensor::from_shape_vec(out_shape, out).ok()
}

impl Layer for Transpose {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let y = self.permute(x, &self.perm)?;
        self.out_shape = (mode == Mode::Train).then(|| y.shape().to_vec());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.out_shape)?;
        check_grad(&self.name, &grad_out, shape)?;
        Ok(vec![self.permute(&grad_out, &self.inverse)?])
    }
}

impl Reshape {
    /// The layers of an IR `Flatten` (axis 1) or `Reshape` node (NCHW element order, as ONNX).
    /// Between features `[N, F]` and images `[N, C, H, W]` that keep the batch: an image to
    /// features is a [`Flatten`], features to an image an [`Unflatten`] (the SE gate's
    /// `view(b, c, 1, 1)`), an image to another image both, features to features no layer. Any
    /// other reshape (heads of attention, ViT patches) is a [`Reshape`] of a tensor held as is,
    /// an image flattened first.
    pub(crate) fn build<R: Rng>(ctx: &mut Ctx<'_, R>, node: &Node, ins: &[Val]) -> Result<Val> {
        let [x] = ins else {
            return Err(unsupported(node, "expected one input"));
        };
        let in_shape = ctx.shape(node.inputs[0]).to_vec();
        let out_shape = ctx.shape(node.output).to_vec();
        let n = in_shape.first().copied().unwrap_or(0);
        let count = |s: &[usize]| s.iter().product::<usize>();
        if count(&in_shape) != count(&out_shape) {
            return Err(unsupported(
                node,
                format!("reshape {in_shape:?} → {out_shape:?} changes the element count"),
            ));
        }
        let features = x.layout == Layout::Image || in_shape.len() == 2;
        // What the layer reads: the IR shape, or an image flattened to [N, C·H·W].
        let from = match x.layout {
            Layout::AsIs => in_shape.clone(),
            Layout::Image => vec![n, count(&in_shape).checked_div(n).unwrap_or(0)],
        };
        let flattened = |ctx: &mut Ctx<'_, R>, name: String| match x.layout {
            Layout::AsIs => Ok(x.id),
            Layout::Image => ctx
                .push(Flatten::new(&name), &[x.id], Layout::AsIs)
                .map(|v| v.id),
        };
        let image = match out_shape[..] {
            [m, _] if m == n && features => None,
            [m, c, h, w] if m == n && features => Some([c, h, w]),
            _ => {
                let x = flattened(ctx, format!("{}/flatten", node.name))?;
                let stride = ctx.batch_stride(node.inputs[0]);
                let layer = Reshape::new(&node.name, from, ctx.ir.batch, out_shape)
                    .with_batch_stride(stride);
                return ctx.push(layer, &[x], Layout::AsIs);
            }
        };
        let name = match image {
            None => node.name.clone(),
            Some(_) => format!("{}/flatten", node.name),
        };
        let flat = flattened(ctx, name)?;
        match image {
            None => Ok(Val {
                id: flat,
                layout: Layout::AsIs,
            }),
            Some(chw) => ctx.push(Unflatten::new(&node.name, chw), &[flat], Layout::Image),
        }
    }
}

impl Transpose {
    /// The layer of an IR `Transpose` node, in whichever layout its input is held. The IR
    /// permutation becomes one of the engine tensor; a rank-4 result whose engine order
    /// already is an image's (`permute(0, 3, 1, 2)` of a channels-last tensor) or the IR's
    /// (`permute(0, 2, 3, 1)` of an image) is the input relabelled, with no layer.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        perm: &[usize],
    ) -> Result<Val> {
        let x = one_any(node, ins)?;
        let as_is: Vec<usize> = perm.iter().map(|&p| x.layout.engine_axis(p)).collect();
        let identity = |p: &[usize]| p.iter().enumerate().all(|(i, &a)| i == a);
        if as_is.len() == 4 {
            let image: Vec<usize> = [0, 2, 3, 1].iter().map(|&k| as_is[k]).collect();
            if identity(&image) {
                return Ok(Val {
                    id: x.id,
                    layout: Layout::Image,
                });
            }
        }
        if identity(&as_is) {
            return Ok(Val {
                id: x.id,
                layout: Layout::AsIs,
            });
        }
        let layer = Transpose::new(&node.name, as_is)?;
        ctx.push(layer, &[x.id], Layout::AsIs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn reshape_keeps_row_major_order_and_checks() {
        let mut r = Reshape::new("r", vec![2, 3], 2, vec![3, 2]);
        let x = Tensor::from_shape_vec(vec![2, 3], (0..6).map(|v| v as f32).collect()).unwrap();
        let y = r.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y.shape(), [3, 2]);
        assert_eq!(y.as_slice().unwrap(), x.as_slice().unwrap());
        // a transposed (non-standard) view is reshaped in its logical order
        let xt = x.t().to_owned();
        let y = r.forward(&[&xt], Mode::Eval).unwrap();
        assert_eq!(y.as_slice().unwrap(), &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let mut r = Reshape::new("r", vec![2, 12], 2, vec![4, 3, 2]);
        check_layer(&mut r, &[rand_tensor(&[2, 12], 1.0, 1)], 1e-2, 1e-3, 10).unwrap();
    }

    #[test]
    fn reshape_built_at_one_batch_runs_and_trains_at_others() {
        // a channel shuffle built at batch 2: [2, 2·3·4] → [2, 2, 3, 4]
        let mut r = Reshape::new("shuffle", vec![2, 24], 2, vec![2, 2, 3, 4]);
        let x = rand_tensor(&[5, 24], 1.0, 4);
        let y = r.forward(&[&x], Mode::Train).unwrap();
        assert_eq!(y.shape(), [5, 2, 3, 4]);
        assert_eq!(y.as_slice().unwrap(), x.as_slice().unwrap());
        let dx = r.backward(y.clone()).unwrap();
        assert_eq!(dx[0].shape(), [5, 24]);
        check_layer(&mut r, &[rand_tensor(&[1, 24], 1.0, 5)], 1e-2, 1e-3, 10).unwrap();
        // attention heads merged with the batch, [T, N, E] → [T, N·h, d]
        let mut r = Reshape::new("heads", vec![3, 2, 8], 2, vec![3, 8, 2]);
        let y = r.forward(&[&rand_tensor(&[3, 7, 8], 1.0, 6)], Mode::Eval);
        assert_eq!(y.unwrap().shape(), [3, 28, 2]);
        // a batch the target splits: the error names the layer and asks for a dynamic axis
        let mut r = Reshape::new("split", vec![4, 6], 4, vec![2, 12]);
        let e = r
            .forward(&[&Tensor::zeros(vec![6, 6])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("split") && e.contains("[6, 6]") && e.contains("dynamic batch axis"),
            "{e}"
        );
    }

    #[test]
    fn reshape_count_mismatch_names_both_shapes() {
        let e = Reshape::new("flat", vec![3, 3], 3, vec![5, 2])
            .forward(&[&Tensor::zeros(vec![3, 3])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("flat") && e.contains("[3, 3]") && e.contains("[5, 2]"),
            "{e}"
        );
        let e = Reshape::new("flat", vec![3, 3], 3, vec![usize::MAX, 3])
            .forward(&[&Tensor::zeros(vec![3, 3])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(e.contains("too many elements"), "{e}");
    }

    #[test]
    fn transpose_permutes_and_inverts() {
        let mut t = Transpose::new("t", vec![2, 0, 1]).unwrap();
        let x = rand_tensor(&[2, 3, 4], 1.0, 2);
        let y = t.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y.shape(), [4, 2, 3]);
        assert!(y.is_standard_layout());
        assert_eq!(y[[3, 1, 2]], x[[1, 2, 3]]);
        check_layer(&mut t, &[x], 1e-2, 1e-3, 10).unwrap();
    }

    #[test]
    fn permutations_keeping_the_last_axis_copy_rows_as_the_general_path_does() {
        let x = rand_tensor(&[2, 3, 4, 5], 1.0, 3);
        for perm in [
            vec![0, 2, 1, 3],
            vec![2, 0, 1, 3],
            vec![0, 1, 2, 3],
            vec![1, 2, 0, 3],
        ] {
            let fast = permute_rows(&x, &perm).unwrap();
            let general = x
                .view()
                .permuted_axes(perm.as_slice())
                .as_standard_layout()
                .into_owned();
            assert_eq!(fast, general, "{perm:?}");
        }
        assert!(permute_rows(&x, &[0, 1, 3, 2]).is_none());
        // A channel shuffle keeps two trailing axes in place: runs of H·W values.
        let x = rand_tensor(&[2, 2, 3, 4, 5], 1.0, 4);
        for perm in [
            vec![0, 2, 1, 3, 4],
            vec![1, 0, 2, 3, 4],
            vec![2, 1, 0, 3, 4],
        ] {
            let general = x
                .view()
                .permuted_axes(perm.as_slice())
                .as_standard_layout()
                .into_owned();
            assert_eq!(permute_rows(&x, &perm).unwrap(), general, "{perm:?}");
        }
        let empty = Tensor::zeros(vec![2, 0, 3]);
        assert_eq!(permute_rows(&empty, &[1, 0, 2]).unwrap().shape(), [0, 2, 3]);
    }

    #[test]
    fn transpose_rejects_bad_perms_and_ranks() {
        for perm in [vec![0, 0, 1], vec![0, 3, 1]] {
            let e = Transpose::new("tp", perm).err().unwrap().to_string();
            assert!(e.contains("tp") && e.contains("not a permutation"), "{e}");
        }
        let e = Transpose::new("tp", vec![1, 0])
            .unwrap()
            .forward(&[&Tensor::zeros(vec![2, 3, 4])], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tp") && e.contains("rank 2"), "{e}");
    }
}
