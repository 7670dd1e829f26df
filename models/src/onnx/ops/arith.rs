//! Shape arithmetic that only ever meets constants in the exports cptsim reads: `Mod`, `Sqrt`,
//! `Trilu` (the causal mask `scaled_dot_product_attention(is_causal=True)` builds),
//! and the comparisons `Equal`, `Less`, `Greater` and `Not` (PyTorch's multi-head attention and
//! `Tensor.expand` compute head sizes, the `1/√d` scale and `-1` dimensions with them). They
//! fold; on a run-time tensor they are an error naming the node.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{broadcast_map, each_const, Const, Val};
use crate::error::ModelError;

/// Registers `Mod`, `Equal`, `Less`, `Greater`, `Not`, `Sqrt` and `Trilu`.
pub fn register(reg: &mut Registry) {
    reg.insert("Mod", modulo);
    reg.insert("Equal", |imp, node| compare(imp, node, |a, b| a == b));
    reg.insert("Less", |imp, node| compare(imp, node, |a, b| a < b));
    reg.insert("Greater", |imp, node| compare(imp, node, |a, b| a > b));
    reg.insert("Not", not);
    reg.insert("Sqrt", sqrt);
    reg.insert("Trilu", trilu);
}

/// Both inputs as constants, or an error saying the op only folds.
fn constants(imp: &Importer, node: &NodeView) -> Result<(Const, Const), ModelError> {
    match (imp.input(node, 0)?, imp.input(node, 1)?) {
        (Val::Const(a), Val::Const(b)) => Ok((a, b)),
        _ => Err(node.err(
            "is only supported on constants (shape arithmetic); a run-time input cannot be computed",
        )),
    }
}

/// `Mod(A, B)`: integer remainder with the divisor's sign (`fmod = 0`), or C's `fmod` on floats.
fn modulo(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let (a, b) = constants(imp, node)?;
    let fmod = node.attr_or("fmod", false)?;
    let out = match (&a, &b, fmod) {
        (Const::I64(a), Const::I64(b), false) => {
            if b.iter().any(|&v| v == 0) {
                return Err(node.err("integer modulo by zero"));
            }
            Const::I64(broadcast_map(a, b, floor_mod).map_err(|m| node.err(m))?)
        }
        _ => Const::F32(
            broadcast_map(&a.to_f32(), &b.to_f32(), |x, y| x % y).map_err(|m| node.err(m))?,
        ),
    };
    Ok(Val::Const(out))
}

/// `x mod y` with the sign of `y` (ONNX `Mod` with `fmod = 0`, Python's `%`); `y ≠ 0`.
fn floor_mod(x: i64, y: i64) -> i64 {
    let r = x.wrapping_rem(y);
    if r != 0 && (r < 0) != (y < 0) {
        r + y
    } else {
        r
    }
}

/// `Equal`, `Less`, `Greater` (chosen by `op`) on constants: a boolean (0/1) constant.
fn compare(
    imp: &mut Importer,
    node: &NodeView,
    op: fn(f64, f64) -> bool,
) -> Result<Val, ModelError> {
    let (a, b) = constants(imp, node)?;
    let (a, b) = (a.to_f32().mapv(f64::from), b.to_f32().mapv(f64::from));
    let out = broadcast_map(&a, &b, |x, y| i64::from(op(x, y))).map_err(|m| node.err(m))?;
    Ok(Val::Const(Const::I64(out)))
}

/// `Sqrt(X)` on a constant.
fn sqrt(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    match imp.input(node, 0)? {
        Val::Const(c) => Ok(Val::Const(Const::F32(c.to_f32().mapv(f32::sqrt)))),
        Val::Tensor(_) => Err(node.err("is only supported on constants")),
    }
}

/// `Trilu(X[, k])` on a constant: keeps the upper (`upper = 1`, default) or lower triangle of
/// the last two axes from diagonal `k`, zeroing the rest.
fn trilu(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let Val::Const(c) = imp.input(node, 0)? else {
        return Err(node.err("is only supported on constants (attention masks)"));
    };
    let k = match imp.opt_const(node, 1)? {
        Some(k) => k.ints().first().copied().unwrap_or(0),
        None => 0,
    };
    let upper = node.attr_or("upper", true)?;
    let shape = c.shape().to_vec();
    let [.., _, cols] = shape[..] else {
        return Err(node.err(format!("input {shape:?} needs rank ≥ 2")));
    };
    let keep = |flat: usize| {
        let (i, j) = (
            ((flat / cols.max(1)) % shape[shape.len() - 2].max(1)) as i64,
            (flat % cols.max(1)) as i64,
        );
        if upper {
            j - i >= k
        } else {
            j - i <= k
        }
    };
    let out = each_const!(&c, a => ndarray::ArrayD::from_shape_vec(
        shape.clone(),
        a.iter()
            .enumerate()
            .map(|(f, &x)| if keep(f) { x } else { Default::default() })
            .collect(),
    )
    .map_err(|e| node.err(e.to_string()))?);
    Ok(Val::Const(out))
}

/// `Not(X)` on a boolean constant.
fn not(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    match imp.input(node, 0)? {
        Val::Const(c) => Ok(Val::Const(Const::I64(
            c.to_i64().mapv(|v| i64::from(v == 0)),
        ))),
        Val::Tensor(_) => Err(node.err("is only supported on constants")),
    }
}

#[cfg(test)]
mod tests {
    use super::floor_mod as m;

    #[test]
    fn integer_mod_takes_the_divisor_sign() {
        assert_eq!(
            (m(7, 3), m(-7, 3), m(7, -3), m(-7, -3), m(6, -3)),
            (1, 2, -2, -1, 0)
        );
    }
}
