//! What an ONNX tensor name stands for during import: a runtime tensor of the IR, or a constant
//! known at import time (initializers and everything folded from them).

use ndarray::{ArrayD, IxDyn, Zip};

use crate::ir::shape::broadcast;
use crate::ir::ValueId;

/// A constant tensor: float data, or integer data (shape arithmetic, indices, bools).
#[derive(Clone, Debug, PartialEq)]
pub enum Const {
    /// Floating point (f32, f64, f16 files all land here).
    F32(ArrayD<f32>),
    /// Integer or boolean.
    I64(ArrayD<i64>),
}

/// An ONNX tensor name resolved during import.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// A tensor computed at run time by the IR graph.
    Tensor(ValueId),
    /// A value known at import time.
    Const(Const),
}

/// Applies a shape-only, element-type-generic operation to either variant of a [`Const`].
macro_rules! each_const {
    ($c:expr, $a:ident => $e:expr) => {
        match $c {
            Const::F32($a) => Const::F32($e),
            Const::I64($a) => Const::I64($e),
        }
    };
}
pub(crate) use each_const;

impl Const {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            Const::F32(a) => a.shape(),
            Const::I64(a) => a.shape(),
        }
    }

    /// The values as f32 (integers convert).
    pub fn to_f32(&self) -> ArrayD<f32> {
        match self {
            Const::F32(a) => a.clone(),
            Const::I64(a) => a.mapv(|v| v as f32),
        }
    }

    /// [`Const::to_f32`], without a copy of float values.
    pub fn into_f32(self) -> ArrayD<f32> {
        match self {
            Const::F32(a) => a,
            Const::I64(a) => a.mapv(|v| v as f32),
        }
    }

    /// The values as i64 (floats truncate toward zero, as ONNX `Cast` does).
    pub fn to_i64(&self) -> ArrayD<i64> {
        match self {
            Const::F32(a) => a.mapv(|v| v as i64),
            Const::I64(a) => a.clone(),
        }
    }

    /// Flattened integer values.
    pub fn ints(&self) -> Vec<i64> {
        self.to_i64().iter().copied().collect()
    }

    /// Flattened float values.
    pub fn floats(&self) -> Vec<f32> {
        self.to_f32().iter().copied().collect()
    }

    /// The single value of a one-element constant, as f32.
    pub fn scalar_f32(&self) -> Result<f32, String> {
        match self.floats().as_slice() {
            [v] => Ok(*v),
            other => Err(format!(
                "expected a single value, got {} values",
                other.len()
            )),
        }
    }

    /// A copy with a new shape of the same element count.
    pub fn reshaped(&self, shape: &[usize]) -> Result<Const, String> {
        fn go<T: Clone>(a: &ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>, String> {
            ArrayD::from_shape_vec(IxDyn(shape), a.iter().cloned().collect())
                .map_err(|_| format!("cannot reshape {:?} to {shape:?}", a.shape()))
        }
        Ok(each_const!(self, a => go(a, shape)?))
    }
}

/// Elementwise `f(a, b)` with numpy broadcasting.
pub fn broadcast_map<T: Clone, U>(
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    f: impl Fn(T, T) -> U,
) -> Result<ArrayD<U>, String> {
    let shape = broadcast(a.shape(), b.shape())?;
    let err = || {
        format!(
            "shapes {:?} and {:?} do not broadcast",
            a.shape(),
            b.shape()
        )
    };
    let av = a.broadcast(IxDyn(&shape)).ok_or_else(err)?;
    let bv = b.broadcast(IxDyn(&shape)).ok_or_else(err)?;
    Ok(Zip::from(&av)
        .and(&bv)
        .map_collect(|x, y| f(x.clone(), y.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::arr1;

    #[test]
    fn broadcast_map_adds_a_row_to_every_row() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![0i64, 1, 2, 3, 4, 5]).unwrap();
        let b = arr1(&[10i64, 20, 30]).into_dyn();
        let c = broadcast_map(&a, &b, |x, y| x + y).unwrap();
        assert_eq!(
            c.iter().copied().collect::<Vec<_>>(),
            vec![10, 21, 32, 13, 24, 35]
        );
    }

    #[test]
    fn reshape_keeps_order_and_rejects_wrong_counts() {
        let c = Const::I64(arr1(&[1i64, 2, 3, 4]).into_dyn());
        assert_eq!(c.reshaped(&[2, 2]).unwrap().shape(), &[2, 2]);
        assert!(c.reshaped(&[3]).is_err());
    }
}
