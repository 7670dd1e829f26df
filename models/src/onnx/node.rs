//! A node wrapper with typed, checked attribute getters (`node.attr::<bool>("ceil_mode")?`,
//! `node.attr_or("axis", 0i64)?`) whose errors name the node, its op and the attribute, e.g.
//! `node conv1 (Conv), attribute 'strides': expected ints, got float`.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, NodeProto};

use super::tensor;
use super::value::Const;
use crate::error::ModelError;

/// One ONNX node during import, with its resolved (unique, never empty) name.
pub struct NodeView<'a> {
    /// The node as stored in the file.
    pub proto: &'a NodeProto,
    /// Unique name, the IR node's: the PyTorch module path the file records, the file's name
    /// or `OpType_index`.
    pub name: String,
    /// How errors name the node: the file's name, with the PyTorch module it comes from (or
    /// the nearest one) when the file records it.
    pub label: String,
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
            node: self.label.clone(),
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

    /// Attribute `name` as a `T`, `None` when the node does not set it. A wrong attribute type
    /// or an invalid value (a boolean other than 0 or 1, a negative size) is an error naming the
    /// node, its op and the attribute.
    pub fn attr_opt<T: AttrValue>(&self, name: &str) -> Result<Option<T>, ModelError> {
        read_attr(self.proto, name).map_err(|m| self.attr_error(name, m))
    }

    /// Attribute `name` as a `T`; a missing attribute is an error.
    pub fn attr<T: AttrValue>(&self, name: &str) -> Result<T, ModelError> {
        self.attr_opt(name)?
            .ok_or_else(|| self.attr_error(name, "is missing"))
    }

    /// Attribute `name` as a `T`, `default` when the node does not set it.
    pub fn attr_or<T: AttrValue>(&self, name: &str, default: T) -> Result<T, ModelError> {
        Ok(self.attr_opt(name)?.unwrap_or(default))
    }

    /// An `ints` attribute.
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, ModelError> {
        self.attr_opt(name)
    }

    /// A `floats` attribute.
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, ModelError> {
        self.attr_opt(name)
    }

    /// A `string` attribute (lossy UTF-8).
    pub fn string(&self, name: &str) -> Result<Option<String>, ModelError> {
        self.attr_opt(name)
    }

    /// A `strings` attribute (lossy UTF-8).
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, ModelError> {
        self.attr_opt(name)
    }

    /// A `tensor` attribute, decoded.
    pub fn tensor(&self, name: &str) -> Result<Option<Const>, ModelError> {
        self.attr_opt(name)
    }

    /// An `ints` attribute that must hold non-negative values (sizes, strides, pads).
    pub fn sizes(&self, name: &str) -> Result<Option<Vec<usize>>, ModelError> {
        self.attr_opt(name)
    }

    /// An error about attribute `attr` of this node.
    pub fn attr_error(&self, attr: &str, msg: impl Into<String>) -> ModelError {
        ModelError::Attribute {
            file: self.file.to_string(),
            node: self.label.clone(),
            op: self.proto.op_type.clone(),
            attr: attr.to_string(),
            msg: msg.into(),
        }
    }

    /// Resolves a possibly negative axis (read from an input) against `rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize, ModelError> {
        resolve_axis(axis, rank).map_err(|m| self.err(m))
    }

    /// The axis attribute `name` resolved against `rank`: `default` when absent, or an error
    /// when there is none; out of range is an error naming the attribute.
    pub fn axis_attr(
        &self,
        name: &str,
        default: Option<i64>,
        rank: usize,
    ) -> Result<usize, ModelError> {
        let axis = match default {
            Some(d) => self.attr_or(name, d)?,
            None => self.attr(name)?,
        };
        resolve_axis(axis, rank).map_err(|m| self.attr_error(name, m))
    }
}

/// A possibly negative axis resolved against `rank`.
fn resolve_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a)
        .ok()
        .filter(|&a| a < rank)
        .ok_or_else(|| format!("axis {axis} out of range for rank {rank}"))
}

/// A Rust type an ONNX attribute reads as: its ONNX attribute type and how to take the value
/// out (checked: a `bool` is an `int` of 0 or 1, a `usize` a non-negative `int`).
pub trait AttrValue: Sized {
    /// The attribute type the value is stored as.
    const TYPE: AttributeType;
    /// The value of `a` (already known to be of [`AttrValue::TYPE`]), or why it is invalid.
    fn read(a: &AttributeProto) -> Result<Self, String>;
}

/// `impl AttrValue for $t` stored as `$kind`, its value `$read` of the attribute `$a`.
macro_rules! attr_value {
    ($t:ty, $kind:ident, |$a:ident| $read:expr) => {
        impl AttrValue for $t {
            const TYPE: AttributeType = AttributeType::$kind;
            fn read($a: &AttributeProto) -> Result<Self, String> {
                $read
            }
        }
    };
}

attr_value!(i64, INT, |a| Ok(a.i));
attr_value!(f32, FLOAT, |a| Ok(a.f));
attr_value!(String, STRING, |a| Ok(
    String::from_utf8_lossy(&a.s).into_owned()
));
attr_value!(Vec<i64>, INTS, |a| Ok(a.ints.clone()));
attr_value!(Vec<f32>, FLOATS, |a| Ok(a.floats.clone()));
attr_value!(Vec<String>, STRINGS, |a| Ok(a
    .strings
    .iter()
    .map(|s| String::from_utf8_lossy(s).into_owned())
    .collect()));
attr_value!(bool, INT, |a| match a.i {
    0 => Ok(false),
    1 => Ok(true),
    v => Err(format!("expected a boolean (0 or 1), got {v}")),
});
attr_value!(usize, INT, |a| usize::try_from(a.i)
    .map_err(|_| format!("expected a non-negative int, got {}", a.i)));
attr_value!(Vec<usize>, INTS, |a| a
    .ints
    .iter()
    .map(|&x| usize::try_from(x))
    .collect::<Result<Vec<_>, _>>()
    .map_err(|_| format!("negative value in {:?}", a.ints)));
attr_value!(Const, TENSOR, |a| tensor::decode(
    a.t.as_ref().ok_or("tensor is missing")?
));

/// Attribute `name` of `node` as a `T`, `None` when absent; the error is the message only (the
/// caller names node and attribute). [`NodeView::attr_opt`] is the form op handlers use; this
/// one serves passes that run before the nodes have views (fusion).
pub fn read_attr<T: AttrValue>(node: &NodeProto, name: &str) -> Result<Option<T>, String> {
    let Some(a) = node.attribute.iter().find(|a| a.name == name) else {
        return Ok(None);
    };
    let got = a
        .type_
        .enum_value()
        .map_err(|code| format!("expected {}, got unknown type {code}", type_name(T::TYPE)))?;
    // Old exporters sometimes leave the type unset; accept when the wanted field is filled.
    if got == T::TYPE || (got == AttributeType::UNDEFINED && filled(a, T::TYPE)) {
        T::read(a).map(Some)
    } else {
        Err(format!(
            "expected {}, got {}",
            type_name(T::TYPE),
            type_name(got)
        ))
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
