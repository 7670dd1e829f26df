//! `MatMul` and `Gemm` of constants (Swin V2's continuous position bias runs its small MLP on a
//! constant coordinate table): numpy `matmul` semantics, batch axes broadcast, 1-D operands
//! promoted and their axis dropped again.

use ndarray::{ArrayD, Ix2, IxDyn};

use super::{arg, check_size, Eval};
use crate::error::ModelError;
use crate::ir::shape::broadcast;
use crate::onnx::node::NodeView;
use crate::onnx::value::Const;

/// The evaluator of a linear-algebra op type.
pub fn evaluator(op_type: &str) -> Option<Eval> {
    Some(match op_type {
        "MatMul" => {
            |n, x| matmul(n, &arg(n, x, 0)?.to_f32(), &arg(n, x, 1)?.to_f32()).map(Const::F32)
        }
        "Gemm" => gemm,
        _ => return None,
    })
}

/// `a @ b` with numpy's rules.
fn matmul(node: &NodeView, a: &ArrayD<f32>, b: &ArrayD<f32>) -> Result<ArrayD<f32>, ModelError> {
    let (ra, rb) = (a.ndim(), b.ndim());
    if ra == 0 || rb == 0 {
        return Err(node.err("matmul of a scalar"));
    }
    let a2 = if ra == 1 {
        a.clone().insert_axis(ndarray::Axis(0))
    } else {
        a.clone()
    };
    let b2 = if rb == 1 {
        b.clone().insert_axis(ndarray::Axis(1))
    } else {
        b.clone()
    };
    let (sa, sb) = (a2.shape().to_vec(), b2.shape().to_vec());
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if k != k2 {
        return Err(node.err(format!(
            "matmul of {:?} and {:?}: inner sizes differ",
            a.shape(),
            b.shape()
        )));
    }
    let batch = broadcast(&sa[..sa.len() - 2], &sb[..sb.len() - 2]).map_err(|e| node.err(e))?;
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    check_size(node, &out_shape)?;
    let spread = |x: &ArrayD<f32>, r: usize, c: usize| -> Result<ArrayD<f32>, ModelError> {
        let mut s = batch.clone();
        s.extend([r, c]);
        x.broadcast(IxDyn(&s))
            .map(|v| v.to_owned())
            .ok_or_else(|| node.err("matmul batch axes do not broadcast"))
    };
    let (ab, bb) = (spread(&a2, m, k)?, spread(&b2, k, n)?);
    let count: usize = batch.iter().product();
    let mut out = Vec::with_capacity(count * m * n);
    let (fa, fb) = (ab.as_standard_layout(), bb.as_standard_layout());
    let (va, vb) = (fa.as_slice().unwrap_or(&[]), fb.as_slice().unwrap_or(&[]));
    for p in 0..count {
        let am = ndarray::ArrayView::from_shape((m, k), &va[p * m * k..(p + 1) * m * k]);
        let bm = ndarray::ArrayView::from_shape((k, n), &vb[p * k * n..(p + 1) * k * n]);
        let (Ok(am), Ok(bm)) = (am, bm) else {
            return Err(node.err("matmul operands are not contiguous"));
        };
        out.extend(am.dot(&bm).iter().copied());
    }
    if ra == 1 {
        out_shape.remove(out_shape.len() - 2);
    }
    if rb == 1 {
        out_shape.pop();
    }
    ArrayD::from_shape_vec(IxDyn(&out_shape), out).map_err(|e| node.err(e.to_string()))
}

/// `Gemm(A, B[, C])`: `alpha · A' B' + beta · C` with `transA` / `transB`.
fn gemm(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let two = |c: &Const, what: &str| -> Result<ndarray::Array2<f32>, ModelError> {
        c.to_f32()
            .into_dimensionality::<Ix2>()
            .map_err(|_| node.err(format!("{what} {:?} is not 2-D", c.shape())))
    };
    let mut a = two(arg(node, x, 0)?, "A")?;
    let mut b = two(arg(node, x, 1)?, "B")?;
    if node.attr_or("transA", false)? {
        a = a.reversed_axes();
    }
    if node.attr_or("transB", false)? {
        b = b.reversed_axes();
    }
    let alpha: f32 = node.attr_or("alpha", 1.0)?;
    let beta: f32 = node.attr_or("beta", 1.0)?;
    let mut y = matmul(node, &a.into_dyn(), &b.into_dyn())? * alpha;
    if let Some(c) = x.get(2).and_then(Option::as_ref) {
        let c = c.to_f32() * beta;
        let s = broadcast(y.shape(), c.shape()).map_err(|e| node.err(e))?;
        let cb = c
            .broadcast(IxDyn(&s))
            .ok_or_else(|| node.err("C does not broadcast onto A·B"))?;
        y = &y + &cb;
    }
    Ok(Const::F32(y))
}
