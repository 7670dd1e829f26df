//! A node wrapper with typed attribute getters whose errors name the node, the attribute and
//! the type mismatch, e.g. `node conv1 (Conv), attribute 'strides': expected ints, got float`.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, NodeProto};

use super::tensor;
use super::value::Const;
use crate::error::ModelError;

/// One ONNX node during import, with its resolved (unique, never empty) name.
pub struct NodeView<'a> {
    /// The node as stored in the file.
    pub proto: &'a NodeProto,
    /// Unique name: the file's name or `OpType_index`.
    pub name: String,
    /// File name or `zoo:NAME`, for errors.
    pub file: &'a str,
    /// The default-domain opset the model imports.
    pub opset: i64,
}

impl NodeView<'_> {
    /// The ONNX op type.
    pub fn op_type(&self) -> &str {
        &self.proto.op_type
    }

    /// An error about this node.
    pub fn err(&self, msg: impl Into<String>) -> ModelError {
        ModelError::Node {
            file: self.file.to_string(),
            node: self.name.clone(),
            op: self.proto.op_type.clone(),
            msg: msg.into(),
        }
    }

    /// Name of input `i`, `None` when absent or the empty "skipped optional input" name.
    pub fn input_name(&self, i: usize) -> Option<&str> {
        self.proto
            .input
            .get(i)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }

    /// Name of the first output.
    pub fn output_name(&self) -> Result<&str, ModelError> {
        self.proto
            .output
            .first()
            .map(String::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| self.err("has no output"))
    }

    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name == name)
    }

    fn typed(
        &self,
        name: &str,
        want: AttributeType,
    ) -> Result<Option<&AttributeProto>, ModelError> {
        let Some(a) = self.attr(name) else {
            return Ok(None);
        };
        let got = a
            .type_
            .enum_value()
            .map_err(|code| self.attr_err(name, want, &format!("unknown type {code}")))?;
        // Old exporters sometimes leave the type unset; accept when the wanted field is filled.
        if got == want || (got == AttributeType::UNDEFINED && filled(a, want)) {
            Ok(Some(a))
        } else {
            Err(self.attr_err(name, want, type_name(got)))
        }
    }

    fn attr_err(&self, name: &str, want: AttributeType, got: &str) -> ModelError {
        self.attr_error(name, format!("expected {}, got {got}", type_name(want)))
    }

    /// An error about attribute `attr` of this node.
    pub fn attr_error(&self, attr: &str, msg: impl Into<String>) -> ModelError {
        ModelError::Attribute {
            file: self.file.to_string(),
            node: self.name.clone(),
            op: self.proto.op_type.clone(),
            attr: attr.to_string(),
            msg: msg.into(),
        }
    }

    /// An `int` attribute.
    pub fn int(&self, name: &str) -> Result<Option<i64>, ModelError> {
        Ok(self.typed(name, AttributeType::INT)?.map(|a| a.i))
    }

    /// An `ints` attribute.
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, ModelError> {
        Ok(self
            .typed(name, AttributeType::INTS)?
            .map(|a| a.ints.clone()))
    }

    /// A `float` attribute.
    pub fn float(&self, name: &str) -> Result<Option<f32>, ModelError> {
        Ok(self.typed(name, AttributeType::FLOAT)?.map(|a| a.f))
    }

    /// A `string` attribute (lossy UTF-8).
    pub fn string(&self, name: &str) -> Result<Option<String>, ModelError> {
        Ok(self
            .typed(name, AttributeType::STRING)?
            .map(|a| String::from_utf8_lossy(&a.s).into_owned()))
    }

    /// A `strings` attribute (lossy UTF-8).
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, ModelError> {
        Ok(self.typed(name, AttributeType::STRINGS)?.map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        }))
    }

    /// A `tensor` attribute, decoded.
    pub fn tensor(&self, name: &str) -> Result<Option<Const>, ModelError> {
        let Some(a) = self.typed(name, AttributeType::TENSOR)? else {
            return Ok(None);
        };
        let t =
            a.t.as_ref()
                .ok_or_else(|| self.attr_error(name, "tensor is missing"))?;
        tensor::decode(t)
            .map(Some)
            .map_err(|m| self.attr_error(name, m))
    }

    /// An `ints` attribute that must hold non-negative values (sizes, strides, pads).
    pub fn sizes(&self, name: &str) -> Result<Option<Vec<usize>>, ModelError> {
        self.ints(name)?
            .map(|v| {
                v.iter()
                    .map(|&x| usize::try_from(x))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| self.attr_error(name, format!("negative value in {v:?}")))
            })
            .transpose()
    }

    /// Resolves a possibly negative axis against `rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize, ModelError> {
        let a = if axis < 0 { axis + rank as i64 } else { axis };
        usize::try_from(a)
            .ok()
            .filter(|&a| a < rank)
            .ok_or_else(|| self.err(format!("axis {axis} out of range for rank {rank}")))
    }
}

fn filled(a: &AttributeProto, want: AttributeType) -> bool {
    match want {
        AttributeType::INTS => !a.ints.is_empty(),
        AttributeType::FLOATS => !a.floats.is_empty(),
        AttributeType::STRING => !a.s.is_empty(),
        AttributeType::STRINGS => !a.strings.is_empty(),
        AttributeType::TENSOR => a.t.is_some(),
        _ => false,
    }
}

fn type_name(t: AttributeType) -> &'static str {
    match t {
        AttributeType::UNDEFINED => "undefined",
        AttributeType::FLOAT => "float",
        AttributeType::INT => "int",
        AttributeType::STRING => "string",
        AttributeType::TENSOR => "tensor",
        AttributeType::GRAPH => "graph",
        AttributeType::SPARSE_TENSOR => "sparse tensor",
        AttributeType::TYPE_PROTO => "type",
        AttributeType::FLOATS => "floats",
        AttributeType::INTS => "ints",
        AttributeType::STRINGS => "strings",
        AttributeType::TENSORS => "tensors",
        AttributeType::GRAPHS => "graphs",
        AttributeType::SPARSE_TENSORS => "sparse tensors",
        AttributeType::TYPE_PROTOS => "types",
    }
}
