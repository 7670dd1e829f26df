//! Data-movement layers on any rank: constant padding, strided slicing and concatenation.
//! Axes are the engine tensor's axes (the network builder maps IR NCHW axes to them).

use ndarray::{Axis, Slice};

use super::from_ir::{one_any, unsupported, Ctx, Val};
use super::{cached, check_grad, standard, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::{self, Node};
use rand::Rng;

fn one<'a>(layer: &str, inputs: &[&'a Tensor]) -> Result<&'a Tensor> {
    match inputs {
        [x] => Ok(x),
        _ => Err(SimError::shape(
            layer,
            format!("expects 1 input, got {}", inputs.len()),
        )),
    }
}

/// Constant padding: `(before, after)` per axis.
pub struct Pad {
    name: String,
    pads: Vec<(usize, usize)>,
    value: f32,
    in_shape: Option<Vec<usize>>,
}

impl Pad {
    /// A padding layer with one `(before, after)` entry per input axis.
    pub fn new(name: &str, pads: Vec<(usize, usize)>, value: f32) -> Self {
        Self {
            name: name.to_string(),
            pads,
            value,
            in_shape: None,
        }
    }

    /// The slice of the padded tensor that holds the input, per axis.
    fn inner(&self, shape: &[usize]) -> Vec<Slice> {
        shape
            .iter()
            .zip(&self.pads)
            .map(|(&d, &(b, _))| Slice::from(b..b + d))
            .collect()
    }
}

/// A view of `t` restricted to `slices` (one per axis).
fn view_of<'a>(t: &'a Tensor, slices: &[Slice]) -> ndarray::ArrayViewD<'a, f32> {
    let mut v = t.view();
    for (i, s) in slices.iter().enumerate() {
        v.slice_axis_inplace(Axis(i), *s);
    }
    v
}

/// A mutable view of `t` restricted to `slices` (one per axis).
fn view_of_mut<'a>(t: &'a mut Tensor, slices: &[Slice]) -> ndarray::ArrayViewMutD<'a, f32> {
    let mut v = t.view_mut();
    for (i, s) in slices.iter().enumerate() {
        v.slice_axis_inplace(Axis(i), *s);
    }
    v
}

impl Layer for Pad {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = one(&self.name, inputs)?;
        if x.ndim() != self.pads.len() {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "{} pad entries for a rank-{} input",
                    self.pads.len(),
                    x.ndim()
                ),
            ));
        }
        let out: Vec<usize> = x
            .shape()
            .iter()
            .zip(&self.pads)
            .map(|(d, (b, a))| d + b + a)
            .collect();
        let mut y = Tensor::from_elem(out, self.value);
        view_of_mut(&mut y, &self.inner(x.shape())).assign(x);
        self.in_shape = (mode == Mode::Train).then(|| x.shape().to_vec());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.in_shape)?;
        let out: Vec<usize> = shape
            .iter()
            .zip(&self.pads)
            .map(|(d, (b, a))| d + b + a)
            .collect();
        check_grad(&self.name, &grad_out, &out)?;
        Ok(vec![view_of(&grad_out, &self.inner(shape)).to_owned()])
    }
}

/// Strided selection: per listed axis `(axis, start, len, step)`, output element `k` is input
/// element `start + k·step` (a negative step walks backwards from `start`).
pub struct SliceLayer {
    name: String,
    axes: Vec<(usize, usize, usize, i64)>,
    /// A sliced axis that holds the batch, and its length at the built batch.
    batch_axis: Option<(usize, usize)>,
    in_shape: Option<Vec<usize>>,
}

impl SliceLayer {
    /// A slice layer.
    pub fn new(name: &str, axes: Vec<(usize, usize, usize, i64)>) -> Self {
        Self {
            name: name.to_string(),
            axes,
            batch_axis: None,
            in_shape: None,
        }
    }

    /// The same layer told that its sliced axis `axis` holds the batch and was `len` long when
    /// built: bounds that no longer fit an input of another batch are then refused saying so.
    pub fn with_batch_axis(mut self, axis: usize, len: usize) -> Self {
        self.batch_axis = Some((axis, len));
        self
    }

    /// Per input axis, the ndarray slice selecting the output (checked against `shape`).
    fn slices(&self, shape: &[usize]) -> Result<Vec<Slice>> {
        let mut out: Vec<Slice> = shape.iter().map(|&d| Slice::from(0..d)).collect();
        for &(axis, start, len, step) in &self.axes {
            let d = shape.get(axis).copied().unwrap_or(0);
            let span = len.saturating_sub(1) * step.unsigned_abs() as usize;
            let (lo, hi) = if step > 0 {
                (start, start + span + 1)
            } else {
                (start.saturating_sub(span), start + 1)
            };
            if step == 0 || len == 0 || hi > d || (step < 0 && span > start) {
                let why = match self.batch_axis {
                    Some((a, n)) if a == axis && n != d => format!(
                        ": axis {axis} holds the batch ({n} long when built, {d} now) and the \
                         export pins the slice's bounds at its batch, so re-export the model \
                         with a dynamic batch axis"
                    ),
                    _ => String::new(),
                };
                return Err(SimError::shape(
                    &self.name,
                    format!(
                        "slice start {start} len {len} step {step} outside axis {axis} of \
                         {shape:?}{why}"
                    ),
                ));
            }
            let s = step.unsigned_abs() as isize;
            out[axis] = Slice::new(
                lo as isize,
                Some(hi as isize),
                if step > 0 { s } else { -s },
            );
        }
        Ok(out)
    }
}

impl Layer for SliceLayer {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = one(&self.name, inputs)?;
        let y = standard(view_of(x, &self.slices(x.shape())?));
        self.in_shape = (mode == Mode::Train).then(|| x.shape().to_vec());
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.in_shape)?.clone();
        let slices = self.slices(&shape)?;
        let mut dx = Tensor::zeros(shape);
        let mut v = view_of_mut(&mut dx, &slices);
        check_grad(&self.name, &grad_out, v.shape())?;
        v.assign(&grad_out);
        Ok(vec![dx])
    }
}

/// Concatenation of all inputs along one axis.
pub struct Concat {
    name: String,
    axis: usize,
    sizes: Option<(Vec<usize>, Vec<usize>)>,
}

impl Concat {
    /// A concatenation layer along `axis`.
    pub fn new(name: &str, axis: usize) -> Self {
        Self {
            name: name.to_string(),
            axis,
            sizes: None,
        }
    }
}

impl Layer for Concat {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let y = concat(&self.name, self.axis, inputs)?;
        self.sizes = (mode == Mode::Train).then(|| {
            let sizes = inputs.iter().map(|t| t.shape()[self.axis]).collect();
            (y.shape().to_vec(), sizes)
        });
        Ok(y)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (shape, sizes) = cached(&self.name, &self.sizes)?;
        check_grad(&self.name, &grad_out, shape)?;
        let mut at = 0;
        Ok(sizes
            .iter()
            .map(|&n| {
                let part = grad_out
                    .slice_axis(Axis(self.axis), Slice::from(at..at + n))
                    .to_owned();
                at += n;
                part
            })
            .collect())
    }
}

/// `inputs` joined along `axis`, in standard layout: for each index of the axes before `axis`,
/// each input's contiguous run in turn (the consumers read it as it lies, with no reordering
/// copy).
fn concat(layer: &str, axis: usize, inputs: &[&Tensor]) -> Result<Tensor> {
    let bad = |msg: String| SimError::shape(layer, format!("cannot concatenate: {msg}"));
    let first = inputs.first().ok_or_else(|| bad("no inputs".into()))?;
    let shape = first.shape();
    if axis >= shape.len() {
        return Err(bad(format!("axis {axis} of a rank-{} tensor", shape.len())));
    }
    let mut joined = 0usize;
    for t in inputs {
        let s = t.shape();
        let fits = s.len() == shape.len()
            && s.iter()
                .zip(shape)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !fits {
            return Err(bad(format!(
                "shapes {shape:?} and {s:?} differ off axis {axis}"
            )));
        }
        joined = joined
            .checked_add(s[axis])
            .ok_or_else(|| bad("size overflows".into()))?;
    }
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let parts: Vec<_> = inputs.iter().map(|t| t.as_standard_layout()).collect();
    let mut runs = Vec::with_capacity(parts.len());
    for (p, t) in parts.iter().zip(inputs) {
        let data = p
            .as_slice()
            .ok_or_else(|| bad("input is not contiguous".into()))?;
        runs.push((data, t.shape()[axis] * inner));
    }
    let mut out_shape = shape.to_vec();
    out_shape[axis] = joined;
    let len = joined
        .checked_mul(inner)
        .and_then(|r| r.checked_mul(outer))
        .ok_or_else(|| bad("size overflows".into()))?;
    let mut y = Vec::with_capacity(len);
    for o in 0..outer {
        for &(data, run) in &runs {
            y.extend_from_slice(&data[o * run..(o + 1) * run]);
        }
    }
    Tensor::from_shape_vec(out_shape, y).map_err(|e| bad(e.to_string()))
}

impl Pad {
    /// The layer of an IR `Pad` node: the pads moved to the engine's axes.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        pads: &[(usize, usize)],
        value: f32,
    ) -> Result<Val> {
        let x = one_any(node, ins)?;
        let mut engine = vec![(0, 0); pads.len()];
        for (a, &p) in pads.iter().enumerate() {
            if let Some(slot) = engine.get_mut(x.layout.engine_axis(a)) {
                *slot = p;
            }
        }
        ctx.same_layout(Pad::new(&node.name, engine, value), x)
    }
}

impl SliceLayer {
    /// The layer of an IR `Slice` node: the axes moved to the engine's.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        axes: &[ir::SliceAxis],
    ) -> Result<Val> {
        let x = one_any(node, ins)?;
        let engine = axes
            .iter()
            .map(|s| (x.layout.engine_axis(s.axis), s.start, s.len, s.step))
            .collect();
        let mut layer = SliceLayer::new(&node.name, engine);
        let input = node.inputs.first().copied();
        let batch = input.and_then(|v| ctx.batch_axes.get(v.0).copied().flatten());
        if let (Some(b), Some(v)) = (batch, input) {
            if axes.iter().any(|s| s.axis == b.axis) {
                let len = ctx.shape(v).get(b.axis).copied().unwrap_or(0);
                layer = layer.with_batch_axis(x.layout.engine_axis(b.axis), len);
            }
        }
        ctx.same_layout(layer, x)
    }
}

impl Concat {
    /// The layer of an IR `Concat` node (its inputs brought to one layout).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        axis: usize,
    ) -> Result<Val> {
        let ins = ctx.shared_layout(node, ins)?;
        let first = ins.first().ok_or_else(|| unsupported(node, "no inputs"))?;
        let ids: Vec<usize> = ins.iter().map(|v| v.id).collect();
        let layer = Concat::new(&node.name, first.layout.engine_axis(axis));
        ctx.push(layer, &ids, first.layout)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn pad_values_and_gradient() {
        let x = Tensor::from_shape_vec(vec![1, 2], vec![1.0, 2.0]).unwrap();
        let mut p = Pad::new("p", vec![(0, 1), (2, 0)], -1.0);
        let y = p.forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y.shape(), &[2, 4]);
        assert_eq!(
            y.as_slice().unwrap(),
            &[-1.0, -1.0, 1.0, 2.0, -1.0, -1.0, -1.0, -1.0]
        );
        let mut p = Pad::new("p", vec![(0, 0), (1, 0), (0, 2), (0, 0)], 0.0);
        check_layer(
            &mut p,
            &[rand_tensor(&[2, 3, 3, 2], 1.0, 1)],
            1e-2,
            1e-3,
            30,
        )
        .unwrap();
    }

    #[test]
    fn slice_values_and_gradient() {
        let x = Tensor::from_shape_vec(vec![1, 6], (0..6).map(|v| v as f32).collect()).unwrap();
        let mut s = SliceLayer::new("s", vec![(1, 4, 3, -2)]);
        assert_eq!(
            s.forward(&[&x], Mode::Eval).unwrap().as_slice().unwrap(),
            &[4.0, 2.0, 0.0]
        );
        let mut s = SliceLayer::new("s", vec![(1, 1, 2, 1)]);
        assert_eq!(
            s.forward(&[&x], Mode::Eval).unwrap().as_slice().unwrap(),
            &[1.0, 2.0]
        );
        assert!(SliceLayer::new("s", vec![(1, 5, 2, 1)])
            .forward(&[&x], Mode::Eval)
            .is_err());
        // the batch's axis flattened with 3 values per sample, sliced at batch 2 as [0, 6):
        // an input of batch 1 says the export pinned its batch there
        let mut s = SliceLayer::new("pin", vec![(1, 0, 6, 1)]).with_batch_axis(1, 6);
        assert_eq!(s.forward(&[&x], Mode::Eval).unwrap().shape(), &[1, 6]);
        let short = Tensor::zeros(vec![1, 3]);
        let e = s.forward(&[&short], Mode::Eval).unwrap_err().to_string();
        assert!(
            e.contains("pin") && e.contains("axis 1 holds the batch (6 long when built, 3 now)"),
            "{e}"
        );
        let mut s = SliceLayer::new("s", vec![(1, 1, 2, 1), (3, 3, 2, -2)]);
        check_layer(
            &mut s,
            &[rand_tensor(&[2, 4, 3, 5], 1.0, 2)],
            1e-2,
            1e-3,
            30,
        )
        .unwrap();
    }

    #[test]
    fn concat_values_and_gradient() {
        let a = Tensor::from_shape_vec(vec![1, 2], vec![1.0, 2.0]).unwrap();
        let b = Tensor::from_shape_vec(vec![1, 1], vec![3.0]).unwrap();
        let mut c = Concat::new("c", 1);
        assert_eq!(
            c.forward(&[&a, &b], Mode::Eval)
                .unwrap()
                .as_slice()
                .unwrap(),
            &[1.0, 2.0, 3.0]
        );
        check_layer(
            &mut Concat::new("c", 3),
            &[
                rand_tensor(&[2, 2, 2, 3], 1.0, 3),
                rand_tensor(&[2, 2, 2, 1], 1.0, 4),
            ],
            1e-2,
            1e-3,
            30,
        )
        .unwrap();
    }

    #[test]
    fn concat_is_in_standard_layout_on_every_axis_and_checks_shapes() {
        let a = rand_tensor(&[2, 3, 4, 5], 1.0, 5);
        // A transposed (non-standard) input is read as its values, not its memory.
        let b = rand_tensor(&[5, 4, 3, 2], 1.0, 6).reversed_axes();
        for axis in 0..4 {
            let mut shape = vec![2, 3, 4, 5];
            shape[axis] = 1;
            let c = rand_tensor(&shape, 1.0, 7 + axis as u64);
            let want = ndarray::concatenate(Axis(axis), &[a.view(), b.view(), c.view()]).unwrap();
            let got = Concat::new("c", axis)
                .forward(&[&a, &b, &c], Mode::Eval)
                .unwrap();
            assert!(got.is_standard_layout());
            assert_eq!(got, want, "axis {axis}");
        }
        let odd = rand_tensor(&[2, 3, 4, 6], 1.0, 9);
        let err = Concat::new("c", 1)
            .forward(&[&a, &odd], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(err.contains("differ off axis 1"), "{err}");
        assert!(Concat::new("c", 4).forward(&[&a], Mode::Eval).is_err());
    }
}
