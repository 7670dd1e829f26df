//! Constructors for the ONNX protobuf messages the builder emits.

use onnx_protobuf::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto::dimension,
    tensor_shape_proto::Dimension, type_proto, AttributeProto, NodeProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// An integer-list attribute.
pub(super) fn attr_ints(name: &str, values: &[usize]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        type_: AttributeType::INTS.into(),
        ints: values.iter().map(|&v| v as i64).collect(),
        ..Default::default()
    }
}

/// An integer attribute.
pub(super) fn attr_int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        type_: AttributeType::INT.into(),
        i: value,
        ..Default::default()
    }
}

/// A float attribute.
pub(super) fn attr_float(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        type_: AttributeType::FLOAT.into(),
        f: value,
        ..Default::default()
    }
}

/// A node in the default domain.
pub fn node(
    op_type: &str,
    name: &str,
    inputs: &[&str],
    output: &str,
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: op_type.to_string(),
        name: name.to_string(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        attribute,
        ..Default::default()
    }
}

/// A float32 initializer stored as little-endian raw data.
pub fn float_tensor(name: &str, dims: &[usize], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.to_string(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: DataType::FLOAT as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// A float32 graph input/output `[batch_dim, dims...]` with a symbolic batch dimension.
pub fn batched_value_info(name: &str, batch_dim: &str, dims: &[usize]) -> ValueInfoProto {
    let mut dim = vec![Dimension {
        value: Some(dimension::Value::DimParam(batch_dim.to_string())),
        ..Default::default()
    }];
    dim.extend(dims.iter().map(|&d| Dimension {
        value: Some(dimension::Value::DimValue(d as i64)),
        ..Default::default()
    }));
    let tensor = type_proto::Tensor {
        elem_type: DataType::FLOAT as i32,
        shape: Some(TensorShapeProto {
            dim,
            ..Default::default()
        })
        .into(),
        ..Default::default()
    };
    ValueInfoProto {
        name: name.to_string(),
        type_: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(tensor)),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    }
}
