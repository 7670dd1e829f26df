//! Decoding `TensorProto` payloads (typed fields or little-endian `raw_data`) into [`Const`]s.

use ndarray::{ArrayD, IxDyn};
use onnx_protobuf::tensor_proto::DataLocation;
use onnx_protobuf::TensorProto;

use super::value::Const;

/// ONNX `TensorProto.DataType` codes cptsim reads.
mod dt {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const BOOL: i32 = 9;
    pub const DOUBLE: i32 = 11;
}

/// Decodes a tensor. Errors name the problem (the caller adds the tensor and file).
pub fn decode(t: &TensorProto) -> Result<Const, String> {
    let (shape, count) = shape_of(t)?;
    let raw = &t.raw_data;
    let flat = match t.data_type {
        dt::FLOAT if raw.is_empty() => Flat::F32(t.float_data.clone()),
        dt::FLOAT => Flat::F32(le::<4, _>(raw, count, f32::from_le_bytes)?),
        dt::DOUBLE if raw.is_empty() => {
            Flat::F32(t.double_data.iter().map(|&v| v as f32).collect())
        }
        dt::DOUBLE => Flat::F32(le::<8, _>(raw, count, |b| f64::from_le_bytes(b) as f32)?),
        dt::INT64 if raw.is_empty() => Flat::I64(t.int64_data.clone()),
        dt::INT64 => Flat::I64(le::<8, _>(raw, count, i64::from_le_bytes)?),
        dt::INT32 | dt::INT16 | dt::INT8 | dt::UINT8 | dt::BOOL if raw.is_empty() => {
            Flat::I64(t.int32_data.iter().map(|&v| v as i64).collect())
        }
        dt::INT32 => Flat::I64(le::<4, _>(raw, count, |b| i32::from_le_bytes(b) as i64)?),
        dt::INT16 => Flat::I64(le::<2, _>(raw, count, |b| i16::from_le_bytes(b) as i64)?),
        dt::INT8 => Flat::I64(le::<1, _>(raw, count, |b| i8::from_le_bytes(b) as i64)?),
        dt::UINT8 | dt::BOOL => Flat::I64(le::<1, _>(raw, count, |b| b[0] as i64)?),
        other => return Err(format!("unsupported data type {other}")),
    };
    flat.into_shaped(&shape, count)
}

/// A float tensor stored as dims without values (a zoo model built for its shapes), as zeros
/// allocated zeroed; `None` when `t` is anything else.
pub fn zeros_without_values(t: &TensorProto) -> Result<Option<Const>, String> {
    let payload = !t.raw_data.is_empty() || !t.float_data.is_empty() || !t.double_data.is_empty();
    if t.data_type != dt::FLOAT || payload {
        return Ok(None);
    }
    let (shape, _) = shape_of(t)?;
    Ok(Some(Const::F32(ArrayD::zeros(IxDyn(&shape)))))
}

/// Whether `t` keeps its bytes in an external data file.
pub fn is_external(t: &TensorProto) -> bool {
    !t.external_data.is_empty() || t.data_location.value() == DataLocation::EXTERNAL as i32
}

/// The bytes `t`'s values take in `raw_data`, from its dims and data type.
pub fn byte_len(t: &TensorProto) -> Result<usize, String> {
    let size = match t.data_type {
        dt::DOUBLE | dt::INT64 => 8,
        dt::FLOAT | dt::INT32 => 4,
        dt::INT16 => 2,
        dt::INT8 | dt::UINT8 | dt::BOOL => 1,
        other => return Err(format!("unsupported data type {other}")),
    };
    Ok(dims_of(t)?.1 * size)
}

/// The tensor's dims as sizes, and their product (at most 2³² elements).
fn shape_of(t: &TensorProto) -> Result<(Vec<usize>, usize), String> {
    if is_external(t) {
        return Err(
            "its values are in an external data file, which is read only when the \
             model is imported from its file"
                .into(),
        );
    }
    dims_of(t)
}

/// [`shape_of`] without looking at where the values are stored.
fn dims_of(t: &TensorProto) -> Result<(Vec<usize>, usize), String> {
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        match usize::try_from(d) {
            Ok(0) => return Err(format!("zero-size dimension in dims {:?}", t.dims)),
            Ok(d) => shape.push(d),
            Err(_) => return Err(format!("negative dimension in dims {:?}", t.dims)),
        }
    }
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&c| c <= 1 << 32)
        .ok_or_else(|| format!("dims {:?} are too large", t.dims))?;
    Ok((shape, count))
}

/// A flat payload of one element type, before shaping.
enum Flat {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

impl Flat {
    fn into_shaped(self, shape: &[usize], count: usize) -> Result<Const, String> {
        let n = match &self {
            Flat::F32(v) => v.len(),
            Flat::I64(v) => v.len(),
        };
        if n != count {
            return Err(format!("holds {n} values but dims {shape:?} need {count}"));
        }
        let bad = |_| format!("cannot shape {n} values as {shape:?}");
        Ok(match self {
            Flat::F32(v) => Const::F32(ArrayD::from_shape_vec(IxDyn(shape), v).map_err(bad)?),
            Flat::I64(v) => Const::I64(ArrayD::from_shape_vec(IxDyn(shape), v).map_err(bad)?),
        })
    }
}

fn le<const N: usize, T>(
    raw: &[u8],
    count: usize,
    f: impl Fn([u8; N]) -> T,
) -> Result<Vec<T>, String> {
    if raw.len() != count * N {
        return Err(format!(
            "raw_data has {} bytes but {count} values of {N} bytes need {}",
            raw.len(),
            count * N
        ));
    }
    Ok(raw
        .chunks_exact(N)
        .map(|c| {
            let mut b = [0u8; N];
            b.copy_from_slice(c);
            f(b)
        })
        .collect())
}
