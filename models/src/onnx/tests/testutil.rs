//! A tiny ModelProto builder for tests.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_shape_proto::{dimension::Value as Dim, Dimension};
use onnx_protobuf::type_proto::{Tensor, Value as TypeValue};
use onnx_protobuf::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// An attribute value for [`ModelBuilder::node`].
#[allow(clippy::large_enum_variant)] // a test-only attribute literal; size is irrelevant
pub enum A {
    I(i64),
    Is(Vec<i64>),
    F(f32),
    S(&'static str),
    Ss(Vec<&'static str>),
    T(TensorProto),
}

/// A value info of element type `elem` (1 float, 7 int64) whose dimensions are numbers or
/// symbolic names: `&["seq", "batch"]`, `&["N", "5", "16"]`.
pub fn named_value_info(name: &str, dims: &[&str], elem: i32) -> ValueInfoProto {
    let mut shape = TensorShapeProto::new();
    for d in dims {
        let mut dim = Dimension::new();
        dim.value = Some(match d.parse::<i64>() {
            Ok(v) => Dim::DimValue(v),
            Err(_) => Dim::DimParam(d.to_string()),
        });
        shape.dim.push(dim);
    }
    let mut tt = Tensor::new();
    tt.elem_type = elem;
    tt.shape = Some(shape).into();
    let mut tp = TypeProto::new();
    tp.value = Some(TypeValue::TensorType(tt));
    let mut vi = ValueInfoProto::new();
    vi.name = name.into();
    vi.type_ = Some(tp).into();
    vi
}

/// Builds a single-input, single-output model node by node.
pub struct ModelBuilder {
    pub model: ModelProto,
}

/// A float value info; a dimension `None` is the symbolic batch `N`.
pub fn value_info(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dims: Vec<String> = dims
        .iter()
        .map(|d| d.map_or_else(|| "N".to_string(), |v| v.to_string()))
        .collect();
    let dims: Vec<&str> = dims.iter().map(String::as_str).collect();
    named_value_info(name, &dims, 1)
}

/// A float tensor with deterministic values `0.01 · k`.
pub fn floats(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = dims.to_vec();
    t.data_type = 1;
    t.float_data = (0..n).map(|k| 0.01 * k as f32).collect();
    t
}

/// An int64 tensor.
pub fn ints(name: &str, values: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = vec![values.len() as i64];
    t.data_type = 7;
    t.int64_data = values.to_vec();
    t
}

impl ModelBuilder {
    /// A model with opset `opset` and input `x` of shape `dims` (`None` = batch).
    pub fn new(opset: i64, dims: &[Option<i64>]) -> Self {
        let mut model = ModelProto::new();
        model.ir_version = 8;
        let mut o = OperatorSetIdProto::new();
        o.version = opset;
        model.opset_import.push(o);
        let mut g = GraphProto::new();
        g.name = "test".into();
        g.input.push(value_info("x", dims));
        model.graph = Some(g).into();
        ModelBuilder { model }
    }

    fn graph(&mut self) -> &mut GraphProto {
        self.model.graph.mut_or_insert_default()
    }

    /// Adds an initializer.
    pub fn init(mut self, t: TensorProto) -> Self {
        self.graph().initializer.push(t);
        self
    }

    /// Adds a node.
    pub fn node(
        mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<(&str, A)>,
    ) -> Self {
        let mut n = NodeProto::new();
        n.op_type = op.into();
        n.name = name.into();
        n.input = inputs.iter().map(|s| s.to_string()).collect();
        n.output = outputs.iter().map(|s| s.to_string()).collect();
        for (k, v) in attrs {
            let mut a = AttributeProto::new();
            a.name = k.into();
            let ty = match v {
                A::I(i) => {
                    a.i = i;
                    AttributeType::INT
                }
                A::Is(v) => {
                    a.ints = v;
                    AttributeType::INTS
                }
                A::F(f) => {
                    a.f = f;
                    AttributeType::FLOAT
                }
                A::S(s) => {
                    a.s = s.as_bytes().to_vec();
                    AttributeType::STRING
                }
                A::Ss(v) => {
                    a.strings = v.iter().map(|s| s.as_bytes().to_vec()).collect();
                    AttributeType::STRINGS
                }
                A::T(t) => {
                    a.t = Some(t).into();
                    AttributeType::TENSOR
                }
            };
            a.type_ = ty.into();
            n.attribute.push(a);
        }
        self.graph().node.push(n);
        self
    }

    /// Replaces the main input `x` by `vi` (keep the name `x` for the nodes to read it).
    pub fn input_info(mut self, vi: ValueInfoProto) -> Self {
        self.graph().input[0] = vi;
        self
    }

    /// Adds another graph input.
    pub fn extra_input(mut self, vi: ValueInfoProto) -> Self {
        self.graph().input.push(vi);
        self
    }

    /// Declares the graph output by its value info.
    pub fn output_info(mut self, vi: ValueInfoProto) -> Self {
        self.graph().output.push(vi);
        self
    }

    /// Declares the graph output (`None` = batch).
    pub fn output(mut self, name: &str, dims: &[Option<i64>]) -> Self {
        self.graph().output.push(value_info(name, dims));
        self
    }

    /// Serialised bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.model.write_to_bytes().unwrap_or_default()
    }
}

/// Conv 3→8 3×3 pad 1 → BN → Relu → GAP → Flatten → Gemm 8→10 on a `[N,3,8,8]` input.
pub fn small_cnn() -> ModelBuilder {
    ModelBuilder::new(13, &[None, Some(3), Some(8), Some(8)])
        .init(floats("w1", &[8, 3, 3, 3]))
        .init(floats("g", &[8]))
        .init(floats("b", &[8]))
        .init(floats("m", &[8]))
        .init(floats("v", &[8]))
        .init(floats("fc.w", &[10, 8]))
        .init(floats("fc.b", &[10]))
        .node(
            "Conv",
            "conv1",
            &["x", "w1"],
            &["c1"],
            vec![
                ("pads", A::Is(vec![1, 1, 1, 1])),
                ("kernel_shape", A::Is(vec![3, 3])),
            ],
        )
        .node(
            "BatchNormalization",
            "bn1",
            &["c1", "g", "b", "m", "v"],
            &["b1"],
            vec![("epsilon", A::F(1e-5))],
        )
        .node("Relu", "relu1", &["b1"], &["r1"], vec![])
        .node("GlobalAveragePool", "gap", &["r1"], &["p"], vec![])
        .node("Flatten", "flat", &["p"], &["f"], vec![])
        .node(
            "Gemm",
            "fc",
            &["f", "fc.w", "fc.b"],
            &["y"],
            vec![("transB", A::I(1))],
        )
        .output("y", &[None, Some(10)])
}
