//! Elementwise evaluators: arithmetic (integers stay integers), comparisons and logic (booleans
//! as int 0/1), unary math, `Where`, `Cast`, and the value ops `Constant`, `Identity`,
//! `Dropout`.

use ndarray::{ArrayD, IxDyn, Zip};

use super::{arg, check_size, Eval};
use crate::error::ModelError;
use crate::ir::shape::broadcast;
use crate::onnx::node::NodeView;
use crate::onnx::ops::constant::value_of;
use crate::onnx::value::{broadcast_map, Const};

/// The evaluator of an elementwise op type.
pub fn evaluator(op_type: &str) -> Option<Eval> {
    Some(match op_type {
        "Constant" => |node, _| value_of(node.proto).map_err(|m| node.err(m)),
        "Identity" | "Dropout" => |node, x| arg(node, x, 0).cloned(),
        "Cast" => cast,
        "Add" => |n, x| arith(n, x, |a, b| a.wrapping_add(b), |a, b| a + b),
        "Sub" => |n, x| arith(n, x, |a, b| a.wrapping_sub(b), |a, b| a - b),
        "Mul" => |n, x| arith(n, x, |a, b| a.wrapping_mul(b), |a, b| a * b),
        "Div" => div,
        "Mod" => modulo,
        "Pow" => pow,
        "Min" => |n, x| variadic(n, x, i64::min, f32::min),
        "Max" => |n, x| variadic(n, x, i64::max, f32::max),
        "Equal" => |n, x| compare(n, x, |a, b| a == b),
        "Less" => |n, x| compare(n, x, |a, b| a < b),
        "LessOrEqual" => |n, x| compare(n, x, |a, b| a <= b),
        "Greater" => |n, x| compare(n, x, |a, b| a > b),
        "GreaterOrEqual" => |n, x| compare(n, x, |a, b| a >= b),
        "And" => |n, x| logic(n, x, |a, b| a && b),
        "Or" => |n, x| logic(n, x, |a, b| a || b),
        "Xor" => |n, x| logic(n, x, |a, b| a != b),
        "Not" => |n, x| {
            Ok(Const::I64(
                arg(n, x, 0)?.to_i64().mapv(|v| i64::from(v == 0)),
            ))
        },
        "IsNaN" => |n, x| {
            Ok(Const::I64(
                arg(n, x, 0)?.to_f32().mapv(|v| i64::from(v.is_nan())),
            ))
        },
        "IsInf" => is_inf,
        "Neg" => |n, x| signed(n, x, i64::wrapping_neg, |v| -v),
        "Abs" => |n, x| signed(n, x, i64::wrapping_abs, f32::abs),
        "Sign" => |n, x| {
            signed(
                n,
                x,
                i64::signum,
                |v| if v == 0.0 { 0.0 } else { v.signum() },
            )
        },
        "Ceil" => |n, x| float(n, x, f32::ceil),
        "Floor" => |n, x| float(n, x, f32::floor),
        "Round" => |n, x| float(n, x, f32::round_ties_even),
        "Sqrt" => |n, x| float(n, x, f32::sqrt),
        "Exp" => |n, x| float(n, x, f32::exp),
        "Log" => |n, x| float(n, x, f32::ln),
        "Reciprocal" => |n, x| float(n, x, f32::recip),
        "Tanh" => |n, x| float(n, x, f32::tanh),
        "Sigmoid" => |n, x| float(n, x, |v| 1.0 / (1.0 + (-v).exp())),
        "Relu" => |n, x| signed(n, x, |v| v.max(0), |v| v.max(0.0)),
        "Where" => where_,
        "Clip" => clip,
        _ => return None,
    })
}

/// Both operands, broadcast-checked against the fold limit before any allocation.
fn pair<'a>(node: &NodeView, x: &'a [Option<Const>]) -> Result<(&'a Const, &'a Const), ModelError> {
    let (a, b) = (arg(node, x, 0)?, arg(node, x, 1)?);
    let shape = broadcast(a.shape(), b.shape()).map_err(|m| node.err(m))?;
    check_size(node, &shape)?;
    Ok((a, b))
}

/// `a ∘ b`: `int` on two integer tensors, else `float` on both as f32.
fn arith(
    node: &NodeView,
    x: &[Option<Const>],
    int: fn(i64, i64) -> i64,
    float: fn(f32, f32) -> f32,
) -> Result<Const, ModelError> {
    let (a, b) = pair(node, x)?;
    match (a, b) {
        (Const::I64(a), Const::I64(b)) => broadcast_map(a, b, int).map(Const::I64),
        _ => broadcast_map(&a.to_f32(), &b.to_f32(), float).map(Const::F32),
    }
    .map_err(|m| node.err(m))
}

/// `Div`: integer division truncates toward zero; by zero it is an error.
fn div(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    if let (Some(Some(Const::I64(_))), Some(Some(Const::I64(b)))) = (x.first(), x.get(1)) {
        if b.iter().any(|&v| v == 0) {
            return Err(node.err("integer division by zero"));
        }
    }
    arith(node, x, i64::wrapping_div, |a, b| a / b)
}

/// `Mod(A, B)`: integer remainder with the divisor's sign (`fmod = 0`), or C's `fmod` on floats.
fn modulo(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let fmod = node.attr_or("fmod", false)?;
    let (a, b) = pair(node, x)?;
    match (a, b, fmod) {
        (Const::I64(a), Const::I64(b), false) => {
            if b.iter().any(|&v| v == 0) {
                return Err(node.err("integer modulo by zero"));
            }
            broadcast_map(a, b, floor_mod).map(Const::I64)
        }
        _ => broadcast_map(&a.to_f32(), &b.to_f32(), |x, y| x % y).map(Const::F32),
    }
    .map_err(|m| node.err(m))
}

/// `x mod y` with the sign of `y` (ONNX `Mod` with `fmod = 0`, Python's `%`); `y ≠ 0`.
pub fn floor_mod(x: i64, y: i64) -> i64 {
    let r = x.wrapping_rem(y);
    if r != 0 && (r < 0) != (y < 0) {
        r + y
    } else {
        r
    }
}

/// `Pow(X, Y)`: the output has the base's type (an integer base raised to a float power
/// truncates, as ONNX casts it back).
fn pow(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (a, b) = pair(node, x)?;
    let r = broadcast_map(&a.to_f32(), &b.to_f32(), |x, y| {
        (f64::from(x).powf(f64::from(y))) as f32
    })
    .map_err(|m| node.err(m))?;
    Ok(match a {
        Const::I64(_) => Const::I64(r.mapv(|v| v as i64)),
        Const::F32(_) => Const::F32(r),
    })
}

/// `Min` / `Max` over one or more inputs.
fn variadic(
    node: &NodeView,
    x: &[Option<Const>],
    int: fn(i64, i64) -> i64,
    float: fn(f32, f32) -> f32,
) -> Result<Const, ModelError> {
    let mut acc = arg(node, x, 0)?.clone();
    for i in 1..x.len() {
        let next = [Some(acc), x[i].clone()];
        acc = arith(node, &next, int, float)?;
    }
    Ok(acc)
}

/// A comparison on two constants: a boolean constant. Integers compare exactly.
fn compare(
    node: &NodeView,
    x: &[Option<Const>],
    op: fn(f64, f64) -> bool,
) -> Result<Const, ModelError> {
    let (a, b) = pair(node, x)?;
    let r = match (a, b) {
        (Const::I64(a), Const::I64(b)) => {
            broadcast_map(a, b, |x, y| i64::from(op(x.cmp(&y) as i64 as f64, 0.0)))
        }
        _ => broadcast_map(&a.to_f32(), &b.to_f32(), |x, y| {
            i64::from(op(f64::from(x), f64::from(y)))
        }),
    };
    r.map(Const::I64).map_err(|m| node.err(m))
}

/// `And`, `Or`, `Xor` on boolean constants.
fn logic(
    node: &NodeView,
    x: &[Option<Const>],
    op: fn(bool, bool) -> bool,
) -> Result<Const, ModelError> {
    let (a, b) = pair(node, x)?;
    broadcast_map(&a.to_i64(), &b.to_i64(), |x, y| {
        i64::from(op(x != 0, y != 0))
    })
    .map(Const::I64)
    .map_err(|m| node.err(m))
}

/// `IsInf(X)` with `detect_positive` / `detect_negative` (both 1 by default).
fn is_inf(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let pos = node.attr_or("detect_positive", true)?;
    let neg = node.attr_or("detect_negative", true)?;
    let a = arg(node, x, 0)?.to_f32();
    Ok(Const::I64(a.mapv(|v| {
        i64::from(v.is_infinite() && ((v > 0.0 && pos) || (v < 0.0 && neg)))
    })))
}

/// A unary op defined on integers and floats alike.
fn signed(
    node: &NodeView,
    x: &[Option<Const>],
    int: fn(i64) -> i64,
    float: fn(f32) -> f32,
) -> Result<Const, ModelError> {
    Ok(match arg(node, x, 0)? {
        Const::I64(a) => Const::I64(a.mapv(int)),
        Const::F32(a) => Const::F32(a.mapv(float)),
    })
}

/// A unary op on floats (an integer input converts).
fn float(node: &NodeView, x: &[Option<Const>], f: fn(f32) -> f32) -> Result<Const, ModelError> {
    Ok(Const::F32(arg(node, x, 0)?.to_f32().mapv(f)))
}

/// `Cast` to a float, integer or boolean type.
fn cast(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let to: i64 = node.attr("to")?;
    let c = arg(node, x, 0)?;
    Ok(match to {
        1 | 10 | 11 | 16 => Const::F32(c.to_f32()),
        9 => Const::I64(c.to_f32().mapv(|v| i64::from(v != 0.0))),
        2..=7 | 12 | 13 => Const::I64(c.to_i64()),
        other => return Err(node.err(format!("cast to data type {other} is not supported"))),
    })
}

/// `Clip(X[, min][, max])` on constants (bounds as attributes before opset 11, as inputs
/// after; an absent bound is none); integers stay integers.
fn clip(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let bound = |i: usize, attr: &str| -> Result<Option<f32>, ModelError> {
        if let Some(v) = node.attr_opt::<f32>(attr)? {
            return Ok(Some(v));
        }
        match x.get(i).and_then(Option::as_ref) {
            Some(c) => c
                .scalar_f32()
                .map(Some)
                .map_err(|m| node.err(format!("input {i} ({attr}): {m}"))),
            None => Ok(None),
        }
    };
    let (lo, hi) = (bound(1, "min")?, bound(2, "max")?);
    if lo.is_some_and(f32::is_nan) || hi.is_some_and(f32::is_nan) {
        return Err(node.err(format!("bound min {lo:?}, max {hi:?} is NaN")));
    }
    let (lo, hi) = (lo.unwrap_or(f32::NEG_INFINITY), hi.unwrap_or(f32::INFINITY));
    if lo > hi {
        return Err(node.err(format!("min {lo} exceeds max {hi}")));
    }
    Ok(match arg(node, x, 0)? {
        // integer bounds of an integer tensor are exact in f32 up to 2^24, beyond it they round
        Const::I64(a) => Const::I64(a.mapv(|v| {
            let f = v as f32;
            if f < lo {
                lo as i64
            } else if f > hi {
                hi as i64
            } else {
                v
            }
        })),
        Const::F32(a) => Const::F32(a.mapv(|v| v.max(lo).min(hi))),
    })
}

/// `Where(cond, X, Y)` on constants: integer when both branches are, else float.
fn where_(node: &NodeView, x: &[Option<Const>]) -> Result<Const, ModelError> {
    let (c, a, b) = (arg(node, x, 0)?, arg(node, x, 1)?, arg(node, x, 2)?);
    let ab = broadcast(a.shape(), b.shape()).map_err(|m| node.err(m))?;
    let shape = broadcast(c.shape(), &ab).map_err(|m| node.err(m))?;
    check_size(node, &shape)?;
    let cond = spread(node, &c.to_i64(), &shape)?;
    match (a, b) {
        (Const::I64(a), Const::I64(b)) => Ok(Const::I64(select(
            &cond,
            &spread(node, a, &shape)?,
            &spread(node, b, &shape)?,
        ))),
        _ => Ok(Const::F32(select(
            &cond,
            &spread(node, &a.to_f32(), &shape)?,
            &spread(node, &b.to_f32(), &shape)?,
        ))),
    }
}

/// `a` broadcast to `shape`, owned.
fn spread<T: Clone>(
    node: &NodeView,
    a: &ArrayD<T>,
    shape: &[usize],
) -> Result<ArrayD<T>, ModelError> {
    a.broadcast(IxDyn(shape))
        .map(|v| v.to_owned())
        .ok_or_else(|| node.err(format!("{:?} does not broadcast to {shape:?}", a.shape())))
}

fn select<T: Clone>(cond: &ArrayD<i64>, a: &ArrayD<T>, b: &ArrayD<T>) -> ArrayD<T> {
    Zip::from(cond)
        .and(a)
        .and(b)
        .map_collect(|&k, x, y| if k != 0 { x.clone() } else { y.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_mod_takes_the_divisor_sign() {
        let m = floor_mod;
        assert_eq!(
            (m(7, 3), m(-7, 3), m(7, -3), m(-7, -3), m(6, -3)),
            (1, 2, -2, -1, 0)
        );
    }
}
