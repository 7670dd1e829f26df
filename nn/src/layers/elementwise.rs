//! Elementwise `a ∘ b` (add, subtract, multiply, divide) with NumPy broadcasting, between two
//! tensors or a tensor and a constant: input normalisation inside a model (`(x − mean) / std`),
//! the squeeze-and-excitation gate (`x · sigmoid(s)` with `s` of shape `[N, 1, 1, C]`), scalar
//! scaling. Backward sums each operand's gradient over the axes it was broadcast along.

use ndarray::{Axis, IxDyn, Zip};

use super::from_ir::{owned, unsupported, Ctx, Layout, Val};
use super::Add;
use super::{cached, check_grad, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::{self, Node};
use rand::Rng;

/// Which arithmetic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementwiseKind {
    /// `a + b`.
    Add,
    /// `a − b`.
    Sub,
    /// `a · b`.
    Mul,
    /// `a / b`.
    Div,
}

/// `a ∘ b` broadcast to `shape` row by row, where both operands are contiguous, of `shape`'s
/// rank, and neither is broadcast along the last axis (the same tensors, or a squeeze-and-
/// excitation gate `[N, 1, 1, C]` over `[N, H, W, C]`): each output row is one loop over two
/// contiguous rows. `None` for the other cases. The same operation on each element as the
/// general broadcast.
fn by_rows(kind: ElementwiseKind, a: &Tensor, b: &Tensor, shape: &[usize]) -> Option<Tensor> {
    let last = *shape.last()?;
    let (xa, xb) = (a.as_slice()?, b.as_slice()?);
    let fits = |t: &Tensor| t.ndim() == shape.len() && t.shape().last() == Some(&last);
    if !fits(a) || !fits(b) || last == 0 {
        return None;
    }
    // Each operand's row stride along each leading axis (0 where it is broadcast).
    let lead = &shape[..shape.len() - 1];
    let strides = |t: &Tensor| {
        let mut st = vec![0usize; lead.len()];
        let mut acc = 1;
        for (i, &d) in t.shape()[..lead.len()].iter().enumerate().rev() {
            st[i] = if d == 1 { 0 } else { acc };
            acc *= d;
        }
        st
    };
    let (sa, sb) = (strides(a), strides(b));
    let rows: usize = lead.iter().product();
    let mut y = crate::arena::take(rows * last);
    let mut idx = vec![0usize; lead.len()];
    for _ in 0..rows {
        let (ra, rb) = idx
            .iter()
            .zip(&sa)
            .zip(&sb)
            .fold((0, 0), |(ra, rb), ((&i, &s1), &s2)| {
                (ra + i * s1, rb + i * s2)
            });
        let (ar, br) = (
            &xa[ra * last..(ra + 1) * last],
            &xb[rb * last..(rb + 1) * last],
        );
        match kind {
            ElementwiseKind::Add => y.extend(ar.iter().zip(br).map(|(x, z)| x + z)),
            ElementwiseKind::Sub => y.extend(ar.iter().zip(br).map(|(x, z)| x - z)),
            ElementwiseKind::Mul => y.extend(ar.iter().zip(br).map(|(x, z)| x * z)),
            ElementwiseKind::Div => y.extend(ar.iter().zip(br).map(|(x, z)| x / z)),
        }
        for (i, &d) in idx.iter_mut().zip(lead).rev() {
            *i += 1;
            if *i < d {
                break;
            }
            *i = 0;
        }
    }
    Tensor::from_shape_vec(shape.to_vec(), y).ok()
}

impl ElementwiseKind {
    fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            Self::Add => a + b,
            Self::Sub => a - b,
            Self::Mul => a * b,
            Self::Div => a / b,
        }
    }

    /// `(∂y/∂a, ∂y/∂b)` at `(a, b)`.
    fn partials(self, a: f32, b: f32) -> (f32, f32) {
        match self {
            Self::Add => (1.0, 1.0),
            Self::Sub => (1.0, -1.0),
            Self::Mul => (b, a),
            Self::Div => (1.0 / b, -a / (b * b)),
        }
    }
}

/// A constant operand and its side.
#[derive(Clone, Debug)]
pub struct Constant {
    /// The value, in engine layout and of the tensor's rank (size-1 axes broadcast).
    pub value: Tensor,
    /// True for `c ∘ x`, false for `x ∘ c`.
    pub on_left: bool,
}

/// What a training pass keeps for backward.
enum Pass {
    /// The operands `(a, b)` and the output shape.
    Operands(Tensor, Tensor, Vec<usize>),
    /// Against a one-value constant: the input's shape, and the input itself when its partial
    /// derivative reads it (`c / x`).
    Scalar(Vec<usize>, Option<Tensor>),
}

/// `y = a ∘ b` with broadcasting; one input tensor with a [`Constant`], or two input tensors.
pub struct Elementwise {
    name: String,
    kind: ElementwiseKind,
    constant: Option<Constant>,
    /// The engine axis holding the batch and the length the constant has there, when that is
    /// more than 1: values that differ per sample, which only fit an input of that many.
    pinned: Option<(usize, usize)>,
    /// What the last training forward pass keeps for backward.
    cache: Option<Pass>,
}

/// The NumPy broadcast of two shapes, or `None` when they do not broadcast.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        (i + s.len())
            .checked_sub(rank)
            .map_or(1, |j| s.get(j).copied().unwrap_or(1))
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Sums `g` (of the broadcast shape) down to `shape` (same rank or lower, right-aligned).
pub(crate) fn reduce_to(g: Tensor, shape: &[usize]) -> Tensor {
    let mut g = g;
    while g.ndim() > shape.len() {
        g = g.sum_axis(Axis(0));
    }
    for (axis, &d) in shape.iter().enumerate() {
        if d == 1 && g.shape()[axis] != 1 {
            g = g.sum_axis(Axis(axis)).insert_axis(Axis(axis));
        }
    }
    g
}

impl Elementwise {
    /// `a ∘ b` of two input tensors.
    pub fn new(name: &str, kind: ElementwiseKind) -> Self {
        Self {
            name: name.to_string(),
            kind,
            constant: None,
            pinned: None,
            cache: None,
        }
    }

    /// `x ∘ c` or `c ∘ x` of one input tensor and a constant.
    pub fn with_constant(name: &str, kind: ElementwiseKind, constant: Constant) -> Self {
        Self {
            constant: Some(constant),
            ..Self::new(name, kind)
        }
    }

    /// The same layer told that its constant holds `n` samples along engine axis `axis` of the
    /// input (the batch axis): an input of another batch is refused, naming the layer, instead
    /// of being broadcast against per-sample values of the wrong samples.
    pub fn with_pinned_batch(mut self, axis: usize, n: usize) -> Self {
        self.pinned = Some((axis, n));
        self
    }

    /// An error when the input's batch differs from the one the constant was exported at.
    fn check_batch(&self, inputs: &[&Tensor]) -> Result<()> {
        let (Some((axis, n)), Some(c), [x]) = (self.pinned, &self.constant, inputs) else {
            return Ok(());
        };
        match x.shape().get(axis) {
            Some(&m) if m != n => Err(SimError::shape(
                &self.name,
                format!(
                    "the input {:?} holds a batch of {m} in axis {axis}, but the constant \
                     operand {:?} holds {n} different values there (one per sample of the batch \
                     it was exported at); the export pins its batch in this constant, so \
                     re-export the model with a dynamic batch axis",
                    x.shape(),
                    c.value.shape()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Whether it is the product of its two inputs (no constant): SiLU's second half after a
    /// sigmoid (`net::fuse::eval_epilogue`).
    pub(crate) fn is_product(&self) -> bool {
        self.kind == ElementwiseKind::Mul && self.constant.is_none()
    }

    /// Readies it to be run as part of the layer before it in evaluation: drops what a
    /// training pass kept.
    pub(crate) fn fold_into_epilogue(&mut self) {
        self.cache = None;
    }

    /// The constant's one value and side, when it has a single value, the output is the input's
    /// `shape` and the input is contiguous: then `y = x ∘ c` is one loop over the input, without
    /// broadcasting the constant.
    fn scalar_against(&self, inputs: &[&Tensor], shape: &[usize]) -> Option<(f32, bool)> {
        let c = self.constant.as_ref()?;
        let [x] = inputs else { return None };
        let v = match c.value.as_slice()? {
            [v] => *v,
            _ => return None,
        };
        (x.shape() == shape && x.is_standard_layout()).then_some((v, c.on_left))
    }

    /// Backward against a one-value constant: `dx = g · ∂y/∂x` element by element, the same
    /// products as the broadcast path.
    fn scalar_backward(&self, grad_out: Tensor, x: Option<&Tensor>) -> Result<Vec<Tensor>> {
        let c = self
            .constant
            .as_ref()
            .and_then(|c| c.value.first().map(|&v| (v, c.on_left)));
        let Some((v, on_left)) = c else {
            return Err(SimError::shape(&self.name, "no one-value constant"));
        };
        let kind = self.kind;
        let mut g = super::standard(grad_out);
        let gs = g
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
        match (on_left, x.and_then(|x| x.as_slice())) {
            (true, Some(xs)) if xs.len() == gs.len() => gs
                .iter_mut()
                .zip(xs)
                .for_each(|(g, &x)| *g *= kind.partials(v, x).1),
            (true, _) if kind == ElementwiseKind::Div => {
                return Err(SimError::shape(&self.name, "input of `c / x` not kept"));
            }
            // The other partial derivatives do not read `x`.
            (true, _) => {
                let p = kind.partials(v, 0.0).1;
                gs.iter_mut().for_each(|g| *g *= p);
            }
            (false, _) => {
                let p = kind.partials(0.0, v).0;
                gs.iter_mut().for_each(|g| *g *= p);
            }
        }
        Ok(vec![g])
    }

    /// Backward of `a ± b`: the partial derivatives are ±1, so each wanted operand's gradient
    /// is the incoming one (negated for `b` of a difference) summed down to its shape — the
    /// values the general path's products by ±1 give, without computing them, nor the
    /// constant's gradient.
    fn sum_backward(&self, grad_out: Tensor, a: &[usize], b: &[usize]) -> Vec<Tensor> {
        let g = super::standard(grad_out);
        let gb = |g: Tensor| match self.kind {
            ElementwiseKind::Sub => reduce_to(g.mapv_into(|v| -v), b),
            _ => reduce_to(g, b),
        };
        match &self.constant {
            Some(c) if c.on_left => vec![gb(g)],
            Some(_) => vec![reduce_to(g, a)],
            None => vec![reduce_to(g.clone(), a), gb(g)],
        }
    }

    fn operands<'a>(&'a self, inputs: &[&'a Tensor]) -> Result<(&'a Tensor, &'a Tensor)> {
        match (inputs, &self.constant) {
            ([x], Some(c)) if c.on_left => Ok((&c.value, x)),
            ([x], Some(c)) => Ok((x, &c.value)),
            ([a, b], None) => Ok((a, b)),
            _ => Err(SimError::shape(
                &self.name,
                format!(
                    "expects {} input(s), got {}",
                    if self.constant.is_some() { 1 } else { 2 },
                    inputs.len()
                ),
            )),
        }
    }
}

impl Layer for Elementwise {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        self.check_batch(inputs)?;
        let (a, b) = self.operands(inputs)?;
        let shape = broadcast_shape(a.shape(), b.shape()).ok_or_else(|| {
            SimError::shape(
                &self.name,
                format!(
                    "operand shapes {:?} and {:?} do not broadcast",
                    a.shape(),
                    b.shape()
                ),
            )
        })?;
        let kind = self.kind;
        if let Some((v, on_left)) = self.scalar_against(inputs, &shape) {
            let x = inputs[0];
            let xs = x
                .as_slice()
                .ok_or_else(|| SimError::shape(&self.name, "input not contiguous"))?;
            let mut y = crate::arena::take(xs.len());
            match on_left {
                true => y.extend(xs.iter().map(|&x| kind.apply(v, x))),
                false => y.extend(xs.iter().map(|&x| kind.apply(x, v))),
            }
            let keep_x = on_left && kind == ElementwiseKind::Div;
            self.cache = (mode == Mode::Train)
                .then(|| Pass::Scalar(shape.clone(), keep_x.then(|| x.clone())));
            return Tensor::from_shape_vec(shape, y)
                .map_err(|e| SimError::shape(&self.name, e.to_string()));
        }
        let out = match by_rows(kind, a, b, &shape) {
            Some(out) => out,
            None => {
                let (av, bv) = (a.broadcast(IxDyn(&shape)), b.broadcast(IxDyn(&shape)));
                let (Some(av), Some(bv)) = (av, bv) else {
                    return Err(SimError::shape(&self.name, "broadcast failed"));
                };
                let mut out = Tensor::zeros(IxDyn(&shape));
                Zip::from(&mut out)
                    .and(&av)
                    .and(&bv)
                    .for_each(|y, &x, &z| *y = kind.apply(x, z));
                out
            }
        };
        self.cache = (mode == Mode::Train).then(|| Pass::Operands(a.clone(), b.clone(), shape));
        Ok(out)
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let (a, b, shape) = match cached(&self.name, &self.cache)? {
            Pass::Operands(a, b, shape) => (a, b, shape),
            Pass::Scalar(shape, x) => {
                check_grad(&self.name, &grad_out, shape)?;
                return self.scalar_backward(grad_out, x.as_ref());
            }
        };
        check_grad(&self.name, &grad_out, shape)?;
        let (Some(av), Some(bv)) = (a.broadcast(IxDyn(shape)), b.broadcast(IxDyn(shape))) else {
            return Err(SimError::shape(&self.name, "broadcast failed"));
        };
        let kind = self.kind;
        if matches!(kind, ElementwiseKind::Add | ElementwiseKind::Sub) {
            return Ok(self.sum_backward(grad_out, a.shape(), b.shape()));
        }
        let mut ga = Tensor::zeros(IxDyn(shape));
        let mut gb = Tensor::zeros(IxDyn(shape));
        Zip::from(&mut ga)
            .and(&mut gb)
            .and(&grad_out)
            .and(&av)
            .and(&bv)
            .for_each(|da, db, &g, &x, &z| {
                let (pa, pb) = kind.partials(x, z);
                *da = g * pa;
                *db = g * pb;
            });
        let (ga, gb) = (reduce_to(ga, a.shape()), reduce_to(gb, b.shape()));
        Ok(match &self.constant {
            Some(c) if c.on_left => vec![gb],
            Some(_) => vec![ga],
            None => vec![ga, gb],
        })
    }
}

impl Elementwise {
    /// The layer of an IR binary node: a residual add of equal shapes is an [`Add`]; anything
    /// else (broadcasting, other ops, a constant operand) an [`Elementwise`].
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        b: &ir::Binary,
    ) -> Result<Val> {
        let kind = match b.kind {
            ir::BinaryKind::Add => ElementwiseKind::Add,
            ir::BinaryKind::Sub => ElementwiseKind::Sub,
            ir::BinaryKind::Mul => ElementwiseKind::Mul,
            ir::BinaryKind::Div => ElementwiseKind::Div,
        };
        let name = node.name.as_str();
        match (ins, &b.constant) {
            ([x], Some(c)) => {
                let rank = ctx.shape(node.inputs[0]).len();
                let value = engine_constant(node, &c.value, x.layout, rank)?;
                let pinned = pinned_batch(ctx, node, &c.value, x.layout);
                let constant = Constant {
                    value,
                    on_left: c.on_left,
                };
                let mut layer = Elementwise::with_constant(name, kind, constant);
                if let Some((axis, n)) = pinned {
                    layer = layer.with_pinned_batch(axis, n);
                }
                ctx.same_layout(layer, *x)
            }
            ([_, _], None) => {
                let [a, c] = ctx.shared_layout(node, ins)?[..] else {
                    return Err(unsupported(node, "expected two operands"));
                };
                let same = ctx.shape(node.inputs[0]) == ctx.shape(node.inputs[1]);
                let ids = [a.id, c.id];
                if same && kind == ElementwiseKind::Add {
                    ctx.push(Add::new(name), &ids, a.layout)
                } else {
                    ctx.push(Elementwise::new(name, kind), &ids, a.layout)
                }
            }
            _ => Err(unsupported(node, format!("{} tensor inputs", ins.len()))),
        }
    }
}

/// The engine axis of `node`'s input that holds the batch and the length of constant `value`
/// (IR layout, right-aligned) there, when that is more than 1 (the importer keeps a constant
/// that repeats along the batch at 1 there, so this one differs per sample).
fn pinned_batch<R: Rng>(
    ctx: &Ctx<'_, R>,
    node: &Node,
    value: &ndarray::ArrayD<f32>,
    layout: Layout,
) -> Option<(usize, usize)> {
    let x = *node.inputs.first()?;
    let axis = ctx.batch_axes.get(x.0).copied().flatten()?.axis;
    let lead = ctx.shape(x).len().checked_sub(value.ndim())?;
    let n = *value.shape().get(axis.checked_sub(lead)?)?;
    (n > 1).then(|| (layout.engine_axis(axis), n))
}

/// An IR constant operand (NumPy-broadcast against a tensor of `layout` and IR rank `rank`) in
/// engine layout: padded with leading size-1 axes to the tensor's rank, then NCHW → NHWC for
/// images.
fn engine_constant(
    node: &Node,
    value: &ndarray::ArrayD<f32>,
    layout: Layout,
    rank: usize,
) -> Result<Tensor> {
    if value.ndim() > rank {
        return Err(unsupported(
            node,
            format!(
                "constant of shape {:?} against a rank-{rank} tensor",
                value.shape()
            ),
        ));
    }
    let mut shape = vec![1; rank - value.ndim()];
    shape.extend_from_slice(value.shape());
    let full = owned(value)
        .into_shape_with_order(shape)
        .map_err(|e| SimError::shape(&node.name, e.to_string()))?;
    Ok(match layout {
        Layout::Image => full
            .permuted_axes(vec![0, 2, 3, 1])
            .as_standard_layout()
            .into_owned(),
        Layout::AsIs => full,
    })
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;
    use ElementwiseKind::*;

    #[test]
    fn shapes_broadcast_as_numpy() {
        assert_eq!(
            broadcast_shape(&[2, 3, 3, 4], &[2, 1, 1, 4]),
            Some(vec![2, 3, 3, 4])
        );
        assert_eq!(broadcast_shape(&[2, 4], &[4]), Some(vec![2, 4]));
        assert_eq!(broadcast_shape(&[1], &[2, 3]), Some(vec![2, 3]));
        assert_eq!(broadcast_shape(&[2, 3], &[3, 3]), None);
    }

    #[test]
    fn gradients_of_every_kind_with_broadcasting_between_tensors() {
        for kind in [Add, Sub, Mul, Div] {
            // Both kept away from 0 (either may be the divisor).
            let a = rand_tensor(&[2, 3, 3, 4], 1.0, 1).mapv(|v| v + 2.5);
            // The SE gate's shape.
            let b = rand_tensor(&[2, 1, 1, 4], 0.5, 2).mapv(|v| v + 1.5);
            check_layer(
                &mut Elementwise::new("e", kind),
                &[a.clone(), b.clone()],
                1e-2,
                2e-3,
                30,
            )
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            check_layer(&mut Elementwise::new("e", kind), &[b, a], 1e-2, 2e-3, 30)
                .unwrap_or_else(|e| panic!("{kind:?} swapped: {e}"));
        }
    }

    #[test]
    fn gradients_with_a_constant_on_either_side() {
        for kind in [Add, Sub, Mul, Div] {
            for on_left in [false, true] {
                let value = rand_tensor(&[1, 1, 1, 3], 0.5, 3).mapv(|v| v + 1.5);
                let c = Constant { value, on_left };
                let x = rand_tensor(&[2, 2, 2, 3], 1.0, 4).mapv(|v| v + 2.5);
                check_layer(
                    &mut Elementwise::with_constant("e", kind, c),
                    &[x],
                    1e-2,
                    2e-3,
                    30,
                )
                .unwrap_or_else(|e| panic!("{kind:?} left={on_left}: {e}"));
            }
        }
    }

    #[test]
    fn values_and_errors() {
        let c = Constant {
            value: Tensor::from_shape_vec(vec![1, 2], vec![1.0, 4.0]).unwrap(),
            on_left: true,
        };
        let x = Tensor::from_shape_vec(vec![2, 2], vec![1.0, 2.0, 4.0, 8.0]).unwrap();
        let y = Elementwise::with_constant("div", Div, c)
            .forward(&[&x], Mode::Eval)
            .unwrap();
        assert_eq!(y.as_slice().unwrap(), &[1.0, 2.0, 0.25, 0.5]);
        let bad = Tensor::zeros(vec![3, 2]);
        let e = Elementwise::new("mul", Mul)
            .forward(&[&x, &bad], Mode::Eval)
            .unwrap_err();
        assert!(e.to_string().contains("do not broadcast"), "{e}");
        let e = Elementwise::new("mul", Mul)
            .forward(&[&x], Mode::Eval)
            .unwrap_err();
        assert!(e.to_string().contains("expects 2 input(s)"), "{e}");
    }

    #[test]
    fn row_by_row_broadcast_equals_the_general_one() {
        let kinds = [
            ElementwiseKind::Add,
            ElementwiseKind::Sub,
            ElementwiseKind::Mul,
            ElementwiseKind::Div,
        ];
        let pairs = [
            (vec![2, 3, 4, 5], vec![2, 1, 1, 5]),
            (vec![2, 1, 1, 5], vec![2, 3, 4, 5]),
            (vec![2, 3, 4, 5], vec![2, 3, 4, 5]),
            (vec![2, 1, 4, 5], vec![1, 3, 1, 5]),
        ];
        for (i, (sa, sb)) in pairs.iter().enumerate() {
            let a = rand_tensor(sa, 2.0, 10 + i as u64);
            let b = rand_tensor(sb, 2.0, 20 + i as u64).mapv(|v| v + 3.0);
            let shape = broadcast_shape(sa, sb).unwrap();
            for kind in kinds {
                let got = by_rows(kind, &a, &b, &shape).unwrap();
                let (av, bv) = (
                    a.broadcast(IxDyn(&shape)).unwrap(),
                    b.broadcast(IxDyn(&shape)).unwrap(),
                );
                let mut want = Tensor::zeros(IxDyn(&shape));
                Zip::from(&mut want)
                    .and(&av)
                    .and(&bv)
                    .for_each(|y, &x, &z| *y = kind.apply(x, z));
                assert_eq!(got, want, "{kind:?} {sa:?} {sb:?}");
            }
        }
        // Broadcast along the last axis, or by rank: the general path.
        let (a, c) = (rand_tensor(&[2, 3], 1.0, 1), rand_tensor(&[2, 1], 1.0, 2));
        assert!(by_rows(ElementwiseKind::Mul, &a, &c, &[2, 3]).is_none());
        let r = rand_tensor(&[3], 1.0, 3);
        assert!(by_rows(ElementwiseKind::Mul, &a, &r, &[2, 3]).is_none());
    }
}
