//! [`GraphBuilder`]: appends ONNX nodes with their initializers, tracks per-sample shapes and
//! records each node's shapes, parameters and MACs.

use std::collections::HashSet;

use onnx_protobuf::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto};

use super::proto::{attr_float, attr_int, attr_ints, batched_value_info, float_tensor, node};
use super::{ExportError, BATCH_DIM, IR_VERSION, OPSET_VERSION};
use crate::ir::shape::{conv_macs, linear_macs, window_out};

/// A value flowing through the graph: its name and its per-sample shape (batch dim excluded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// Tensor name in the graph (the name of the node that produced it).
    pub name: String,
    /// Shape without the batch dimension, e.g. `[C, H, W]` or `[features]`.
    pub shape: Vec<usize>,
}

impl Value {
    /// Number of elements per sample.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Geometry of a square 2-D convolution (symmetric padding, no dilation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Output channels.
    pub out_channels: usize,
    /// Kernel height and width.
    pub kernel: usize,
    /// Stride in both directions.
    pub stride: usize,
    /// Zero padding on every side.
    pub pad: usize,
    /// Channel groups (`groups == in_channels == out_channels` is depthwise).
    pub groups: usize,
}

impl ConvGeom {
    /// Dense (groups 1) convolution.
    pub fn dense(out_channels: usize, kernel: usize, stride: usize, pad: usize) -> Self {
        ConvGeom {
            out_channels,
            kernel,
            stride,
            pad,
            groups: 1,
        }
    }

    /// Weight tensor dims `[C_out, C_in/groups, k, k]` for `in_channels` inputs.
    pub fn weight_dims(&self, in_channels: usize) -> [usize; 4] {
        [
            self.out_channels,
            in_channels / self.groups.max(1),
            self.kernel,
            self.kernel,
        ]
    }
}

/// Parameters and running statistics of one BatchNormalization node.
#[derive(Clone, Debug, PartialEq)]
pub struct BnParams {
    /// γ per channel.
    pub scale: Vec<f32>,
    /// β per channel.
    pub bias: Vec<f32>,
    /// Running mean per channel.
    pub mean: Vec<f32>,
    /// Running variance per channel.
    pub var: Vec<f32>,
    /// ε added to the variance.
    pub epsilon: f32,
}

impl BnParams {
    /// A freshly initialised BatchNorm: γ = 1, β = 0, mean 0, variance 1, ε = 1e-5 (PyTorch).
    pub fn fresh(channels: usize) -> Self {
        BnParams {
            scale: vec![1.0; channels],
            bias: vec![0.0; channels],
            mean: vec![0.0; channels],
            var: vec![1.0; channels],
            epsilon: 1e-5,
        }
    }
}

/// What the builder knows about one node it emitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRecord {
    /// Node name.
    pub name: String,
    /// ONNX op type (`Conv`, `Gemm`, `BatchNormalization`, …).
    pub op_type: &'static str,
    /// Per-sample shape of the (first) input.
    pub in_shape: Vec<usize>,
    /// Per-sample shape of the output.
    pub out_shape: Vec<usize>,
    /// Trainable parameters (weights, biases, BN γ and β; not running statistics).
    pub params: u64,
    /// Forward multiply-accumulates per sample (Conv and Gemm; 0 otherwise).
    pub macs: u64,
}

impl NodeRecord {
    /// Output elements per sample.
    pub fn out_elements(&self) -> u64 {
        self.out_shape.iter().product::<usize>() as u64
    }
}

/// Builds one ONNX graph with a single batched float input and a single output.
#[derive(Debug)]
pub struct GraphBuilder {
    graph_name: String,
    input: Option<Value>,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    records: Vec<NodeRecord>,
    node_names: HashSet<String>,
    tensor_names: HashSet<String>,
    /// Whether conv and linear weights carry their values (see [`GraphBuilder::shapes_only`]).
    weight_values: bool,
}

/// Everything `push` needs to emit one node.
struct NodeSpec<'a> {
    op_type: &'static str,
    name: &'a str,
    inputs: Vec<String>,
    attrs: Vec<onnx_protobuf::AttributeProto>,
    in_shape: &'a [usize],
    out_shape: Vec<usize>,
    params: u64,
    macs: u64,
}

impl GraphBuilder {
    /// An empty graph called `graph_name`.
    pub fn new(graph_name: &str) -> Self {
        GraphBuilder {
            graph_name: graph_name.to_string(),
            input: None,
            nodes: Vec::new(),
            initializers: Vec::new(),
            records: Vec::new(),
            node_names: HashSet::new(),
            tensor_names: HashSet::new(),
            weight_values: true,
        }
    }

    /// A builder whose conv and linear weight initializers carry dims but no values: a model for
    /// costing, which needs only shapes (not a valid ONNX file for other tools; import it with
    /// [`crate::onnx::ImportOptions::shapes_only`]). Biases and batch-norm parameters keep theirs.
    pub fn shapes_only(graph_name: &str) -> Self {
        GraphBuilder {
            weight_values: false,
            ..GraphBuilder::new(graph_name)
        }
    }

    /// Declares the graph input `name` with per-sample `shape`; the batch dim is symbolic.
    pub fn input(&mut self, name: &str, shape: &[usize]) -> Result<Value, ExportError> {
        if self.input.is_some() {
            return Err(self.graph_error("a second graph input was declared"));
        }
        if shape.is_empty() || shape.contains(&0) {
            return Err(self.graph_error(&format!("input shape {shape:?} is empty")));
        }
        self.claim_tensor(name)?;
        let value = Value {
            name: name.to_string(),
            shape: shape.to_vec(),
        };
        self.input = Some(value.clone());
        Ok(value)
    }

    /// 2-D convolution of `x` (`[C, H, W]`) with `weight` (`[C_out, C/groups, k, k]`, row-major)
    /// and an optional bias of length `C_out`.
    pub fn conv(
        &mut self,
        name: &str,
        x: &Value,
        geom: ConvGeom,
        weight: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Value, ExportError> {
        let [c, h, w] = chw(name, x)?;
        let ConvGeom {
            out_channels: co,
            kernel: k,
            stride: s,
            pad: p,
            groups: g,
        } = geom;
        if g == 0 || c % g != 0 || co % g != 0 || co == 0 {
            return Err(shape_err(
                name,
                format!("groups {g} must divide input channels {c} and output channels {co}"),
            ));
        }
        let (oh, ow) = (
            spatial_out(name, h, k, s, p)?,
            spatial_out(name, w, k, s, p)?,
        );
        let dims = geom.weight_dims(c);
        check_len(name, "weight", weight.len(), dims.iter().product())?;
        let mut inputs = vec![
            x.name.clone(),
            self.weight_initializer(name, &dims, weight)?,
        ];
        let mut params = weight.len() as u64;
        if let Some(b) = bias {
            check_len(name, "bias", b.len(), co)?;
            inputs.push(self.initializer(name, "bias", &[co], b)?);
            params += co as u64;
        }
        let macs = conv_macs([co, oh, ow], c, g, [k, k]);
        self.push(NodeSpec {
            op_type: "Conv",
            name,
            inputs,
            attrs: vec![
                attr_ints("kernel_shape", &[k, k]),
                attr_ints("strides", &[s, s]),
                attr_ints("pads", &[p, p, p, p]),
                attr_ints("dilations", &[1, 1]),
                attr_int("group", g as i64),
            ],
            in_shape: &x.shape,
            out_shape: vec![co, oh, ow],
            params,
            macs,
        })
    }

    /// Inference-form BatchNormalization over the channel axis (axis 1 of the batched tensor).
    pub fn batch_norm(
        &mut self,
        name: &str,
        x: &Value,
        bn: &BnParams,
    ) -> Result<Value, ExportError> {
        let c = x.shape.first().copied().unwrap_or(0);
        for (what, v) in [
            ("scale", &bn.scale),
            ("bias", &bn.bias),
            ("running_mean", &bn.mean),
            ("running_var", &bn.var),
        ] {
            check_len(name, what, v.len(), c)?;
        }
        let mut inputs = vec![x.name.clone()];
        for (suffix, data) in [
            ("weight", &bn.scale),
            ("bias", &bn.bias),
            ("running_mean", &bn.mean),
            ("running_var", &bn.var),
        ] {
            inputs.push(self.initializer(name, suffix, &[c], data)?);
        }
        self.push(NodeSpec {
            op_type: "BatchNormalization",
            name,
            inputs,
            attrs: vec![
                attr_float("epsilon", bn.epsilon),
                attr_float("momentum", 0.9),
            ],
            in_shape: &x.shape,
            out_shape: x.shape.clone(),
            params: 2 * c as u64,
            macs: 0,
        })
    }

    /// Elementwise ReLU.
    pub fn relu(&mut self, name: &str, x: &Value) -> Result<Value, ExportError> {
        self.elementwise("Relu", name, x, vec![x.name.clone()])
    }

    /// Elementwise clip to `[min, max]` (opset-13 form: bounds as scalar initializer inputs);
    /// `clip(x, 0, 6)` is ReLU6.
    pub fn clip(
        &mut self,
        name: &str,
        x: &Value,
        min: f32,
        max: f32,
    ) -> Result<Value, ExportError> {
        if min.is_nan() || max.is_nan() || min > max {
            return Err(shape_err(
                name,
                format!("clip bounds [{min}, {max}] are not ordered"),
            ));
        }
        let lo = self.initializer(name, "min", &[], &[min])?;
        let hi = self.initializer(name, "max", &[], &[max])?;
        self.elementwise("Clip", name, x, vec![x.name.clone(), lo, hi])
    }

    /// Elementwise sum of two values of the same shape (a residual connection).
    pub fn add(&mut self, name: &str, a: &Value, b: &Value) -> Result<Value, ExportError> {
        if a.shape != b.shape {
            return Err(shape_err(
                name,
                format!(
                    "cannot add `{}` {:?} and `{}` {:?}",
                    a.name, a.shape, b.name, b.shape
                ),
            ));
        }
        self.elementwise("Add", name, a, vec![a.name.clone(), b.name.clone()])
    }

    /// Max pooling with a square `kernel`, `stride` and symmetric `pad`.
    pub fn max_pool(
        &mut self,
        name: &str,
        x: &Value,
        kernel: usize,
        stride: usize,
        pad: usize,
    ) -> Result<Value, ExportError> {
        let [c, h, w] = chw(name, x)?;
        if pad >= kernel {
            return Err(shape_err(
                name,
                format!("pad {pad} must be smaller than kernel {kernel}"),
            ));
        }
        let out_shape = vec![
            c,
            spatial_out(name, h, kernel, stride, pad)?,
            spatial_out(name, w, kernel, stride, pad)?,
        ];
        self.push(NodeSpec {
            op_type: "MaxPool",
            name,
            inputs: vec![x.name.clone()],
            attrs: vec![
                attr_ints("kernel_shape", &[kernel, kernel]),
                attr_ints("strides", &[stride, stride]),
                attr_ints("pads", &[pad, pad, pad, pad]),
            ],
            in_shape: &x.shape,
            out_shape,
            params: 0,
            macs: 0,
        })
    }

    /// Global average pooling `[C, H, W] → [C, 1, 1]`.
    pub fn global_avg_pool(&mut self, name: &str, x: &Value) -> Result<Value, ExportError> {
        let [c, _, _] = chw(name, x)?;
        self.push(NodeSpec {
            op_type: "GlobalAveragePool",
            name,
            inputs: vec![x.name.clone()],
            attrs: Vec::new(),
            in_shape: &x.shape,
            out_shape: vec![c, 1, 1],
            params: 0,
            macs: 0,
        })
    }

    /// Flattens everything after the batch dimension (`axis = 1`).
    pub fn flatten(&mut self, name: &str, x: &Value) -> Result<Value, ExportError> {
        self.push(NodeSpec {
            op_type: "Flatten",
            name,
            inputs: vec![x.name.clone()],
            attrs: vec![attr_int("axis", 1)],
            in_shape: &x.shape,
            out_shape: vec![x.elements()],
            params: 0,
            macs: 0,
        })
    }

    /// Fully connected layer `y = x·Wᵀ + b` as Gemm with `transB = 1`; `weight` is
    /// `[out_features, in_features]` row-major, `bias` has `out_features` entries.
    pub fn gemm(
        &mut self,
        name: &str,
        x: &Value,
        out_features: usize,
        weight: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Value, ExportError> {
        let n_in = match x.shape.as_slice() {
            [n] => *n,
            other => {
                return Err(shape_err(
                    name,
                    format!("Gemm input `{}` must be flat, got {other:?}", x.name),
                ))
            }
        };
        check_len(name, "weight", weight.len(), out_features * n_in)?;
        let mut inputs = vec![
            x.name.clone(),
            self.weight_initializer(name, &[out_features, n_in], weight)?,
        ];
        let mut params = weight.len() as u64;
        if let Some(b) = bias {
            check_len(name, "bias", b.len(), out_features)?;
            inputs.push(self.initializer(name, "bias", &[out_features], b)?);
            params += out_features as u64;
        }
        self.push(NodeSpec {
            op_type: "Gemm",
            name,
            inputs,
            attrs: vec![
                attr_float("alpha", 1.0),
                attr_float("beta", 1.0),
                attr_int("transB", 1),
            ],
            in_shape: &x.shape,
            out_shape: vec![out_features],
            params,
            macs: linear_macs(1, n_in, out_features),
        })
    }

    /// Finishes the graph with `output` as its only output, renamed to `output_name`, and returns
    /// the model together with the records of every node in order.
    pub fn finish(
        mut self,
        output: &Value,
        output_name: &str,
        doc: &str,
    ) -> Result<(ModelProto, Vec<NodeRecord>), ExportError> {
        let input = self
            .input
            .clone()
            .ok_or_else(|| self.graph_error("no graph input was declared"))?;
        let producer = self
            .nodes
            .iter()
            .position(|n| n.output.contains(&output.name))
            .ok_or_else(|| {
                self.graph_error(&format!(
                    "output `{}` is not produced by any node",
                    output.name
                ))
            })?;
        if output_name != output.name {
            self.claim_tensor(output_name)?;
            for n in &mut self.nodes[producer..] {
                for t in n.input.iter_mut().chain(n.output.iter_mut()) {
                    if *t == output.name {
                        *t = output_name.to_string();
                    }
                }
            }
        }
        let graph = GraphProto {
            name: self.graph_name.clone(),
            node: self.nodes,
            initializer: self.initializers,
            input: vec![batched_value_info(&input.name, BATCH_DIM, &input.shape)],
            output: vec![batched_value_info(output_name, BATCH_DIM, &output.shape)],
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: IR_VERSION,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: OPSET_VERSION,
                ..Default::default()
            }],
            producer_name: "cptsim".to_string(),
            producer_version: env!("CARGO_PKG_VERSION").to_string(),
            doc_string: doc.to_string(),
            graph: Some(graph).into(),
            ..Default::default()
        };
        Ok((model, self.records))
    }

    /// A node whose output has the shape of its first input.
    fn elementwise(
        &mut self,
        op_type: &'static str,
        name: &str,
        x: &Value,
        inputs: Vec<String>,
    ) -> Result<Value, ExportError> {
        self.push(NodeSpec {
            op_type,
            name,
            inputs,
            attrs: Vec::new(),
            in_shape: &x.shape,
            out_shape: x.shape.clone(),
            params: 0,
            macs: 0,
        })
    }

    /// Emits one node whose output value carries the node's name, and records it.
    fn push(&mut self, spec: NodeSpec<'_>) -> Result<Value, ExportError> {
        let NodeSpec {
            op_type,
            name,
            inputs,
            attrs,
            in_shape,
            out_shape,
            params,
            macs,
        } = spec;
        for input in &inputs {
            if !self.tensor_names.contains(input) {
                return Err(shape_err(name, format!("input `{input}` is not defined")));
            }
        }
        if !self.node_names.insert(name.to_string()) {
            return Err(ExportError::DuplicateName(name.to_string()));
        }
        self.claim_tensor(name)?;
        let input_refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        self.nodes
            .push(node(op_type, name, &input_refs, name, attrs));
        self.records.push(NodeRecord {
            name: name.to_string(),
            op_type,
            in_shape: in_shape.to_vec(),
            out_shape: out_shape.clone(),
            params,
            macs,
        });
        Ok(Value {
            name: name.to_string(),
            shape: out_shape,
        })
    }

    /// Adds initializer `{node}.{suffix}` and returns its name.
    fn initializer(
        &mut self,
        node: &str,
        suffix: &str,
        dims: &[usize],
        data: &[f32],
    ) -> Result<String, ExportError> {
        let name = format!("{node}.{suffix}");
        self.claim_tensor(&name)?;
        self.initializers.push(float_tensor(&name, dims, data));
        Ok(name)
    }

    /// A conv or linear weight: [`Self::initializer`], without its values in a
    /// [`Self::shapes_only`] builder.
    fn weight_initializer(
        &mut self,
        node: &str,
        dims: &[usize],
        data: &[f32],
    ) -> Result<String, ExportError> {
        let values = if self.weight_values { data } else { &[] };
        self.initializer(node, "weight", dims, values)
    }

    fn claim_tensor(&mut self, name: &str) -> Result<(), ExportError> {
        if name.is_empty() || !self.tensor_names.insert(name.to_string()) {
            return Err(ExportError::DuplicateName(name.to_string()));
        }
        Ok(())
    }

    fn graph_error(&self, msg: &str) -> ExportError {
        ExportError::Graph {
            graph: self.graph_name.clone(),
            msg: msg.to_string(),
        }
    }
}

fn shape_err(node: &str, msg: String) -> ExportError {
    ExportError::Shape {
        node: node.to_string(),
        msg,
    }
}

/// The `[C, H, W]` shape of `x`, or an error naming the node.
fn chw(node: &str, x: &Value) -> Result<[usize; 3], ExportError> {
    match x.shape.as_slice() {
        [c, h, w] => Ok([*c, *h, *w]),
        other => Err(shape_err(
            node,
            format!("input `{}` must be [C, H, W], got {other:?}", x.name),
        )),
    }
}

/// Output length of a square window with symmetric padding `p` (floor mode, [`window_out`]), or
/// an error when the window does not fit.
fn spatial_out(
    node: &str,
    size: usize,
    k: usize,
    s: usize,
    p: usize,
) -> Result<usize, ExportError> {
    if k == 0 || s == 0 {
        return Err(shape_err(
            node,
            format!("kernel {k} and stride {s} must be positive"),
        ));
    }
    let pad = p
        .checked_mul(2)
        .ok_or_else(|| shape_err(node, format!("padding {p} overflows")))?;
    window_out(size, pad, k, s, 1, false).map_err(|m| shape_err(node, m))
}

fn check_len(node: &str, what: &str, got: usize, want: usize) -> Result<(), ExportError> {
    if got != want {
        return Err(shape_err(
            node,
            format!("{what} has {got} values, expected {want}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_net() -> Result<(ModelProto, Vec<NodeRecord>), ExportError> {
        let mut g = GraphBuilder::new("tiny");
        let x = g.input("input", &[2, 5, 5])?;
        let geom = ConvGeom::dense(4, 3, 2, 1);
        let w = vec![0.5; 4 * 2 * 9];
        let c = g.conv("conv", &x, geom, &w, Some(&[0.0; 4]))?;
        let b = g.batch_norm("bn", &c, &BnParams::fresh(4))?;
        let r = g.clip("relu6", &b, 0.0, 6.0)?;
        let r2 = g.relu("relu", &r)?;
        let a = g.add("add", &r, &r2)?;
        let m = g.max_pool("pool", &a, 3, 1, 1)?;
        let p = g.global_avg_pool("gap", &m)?;
        let f = g.flatten("flatten", &p)?;
        let y = g.gemm("fc", &f, 3, &[0.1; 12], Some(&[0.0; 3]))?;
        g.finish(&y, "logits", "test")
    }

    #[test]
    fn records_shapes_params_and_macs() {
        let (model, rec) = small_net().unwrap();
        assert_eq!(rec[0].out_shape, vec![4, 3, 3]);
        assert_eq!(rec[0].macs, 4 * 3 * 3 * 2 * 9);
        assert_eq!(rec[0].params, 4 * 2 * 9 + 4);
        assert_eq!(rec[1].op_type, "BatchNormalization");
        assert_eq!(rec[1].out_elements(), 36);
        assert_eq!(rec[5].out_shape, vec![4, 3, 3]);
        assert_eq!(rec.last().unwrap().macs, 12);
        let graph = model.graph.as_ref().unwrap();
        assert_eq!(graph.node.len(), 9);
        assert_eq!(
            graph.node.last().unwrap().output,
            vec!["logits".to_string()]
        );
        assert_eq!(graph.output[0].name, "logits");
        // conv w+b, bn 4, clip 2, fc w+b
        assert_eq!(graph.initializer.len(), 10);
        assert_eq!(model.opset_import[0].version, OPSET_VERSION);
    }

    #[test]
    fn batch_dim_is_symbolic() {
        use onnx_protobuf::tensor_shape_proto::dimension::Value as D;
        let (model, _) = small_net().unwrap();
        let graph = model.graph.as_ref().unwrap();
        for vi in [&graph.input[0], &graph.output[0]] {
            let dims = &vi.type_.tensor_type().shape.dim;
            assert_eq!(dims[0].value, Some(D::DimParam("N".into())));
        }
    }

    #[test]
    fn clip_bounds_are_scalar_initializers() {
        let (model, _) = small_net().unwrap();
        let graph = model.graph.as_ref().unwrap();
        let min = graph
            .initializer
            .iter()
            .find(|t| t.name == "relu6.min")
            .unwrap();
        assert!(min.dims.is_empty());
        assert_eq!(min.raw_data, 0f32.to_le_bytes().to_vec());
        let clip = graph.node.iter().find(|n| n.op_type == "Clip").unwrap();
        assert_eq!(clip.input, vec!["bn", "relu6.min", "relu6.max"]);
    }

    #[test]
    fn bad_inputs_are_errors_naming_the_node() {
        let mut g = GraphBuilder::new("bad");
        let x = g.input("input", &[3, 4, 4]).unwrap();
        let err = g
            .conv("c1", &x, ConvGeom::dense(2, 3, 1, 0), &[0.0; 5], None)
            .unwrap_err();
        assert!(
            err.to_string().contains("`c1`") && err.to_string().contains("weight"),
            "{err}"
        );
        let big = ConvGeom::dense(2, 7, 1, 0);
        let err = g.conv("c2", &x, big, &[0.0; 2 * 3 * 49], None).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        let grouped = ConvGeom {
            groups: 2,
            ..ConvGeom::dense(2, 1, 1, 0)
        };
        assert!(g.conv("c3", &x, grouped, &[0.0; 3], None).is_err());
        let y = g.relu("r", &x).unwrap();
        assert!(matches!(
            g.relu("r", &x),
            Err(ExportError::DuplicateName(_))
        ));
        let p = g.global_avg_pool("gap", &y).unwrap();
        assert!(g.add("sum", &x, &p).is_err());
        assert!(g.gemm("fc", &x, 2, &[0.0; 96], None).is_err());
        assert!(g.clip("clip", &x, 6.0, 0.0).is_err());
        let ghost = Value {
            name: "ghost".into(),
            shape: vec![3, 4, 4],
        };
        assert!(g.relu("r2", &ghost).is_err());
    }

    #[test]
    fn finish_needs_an_input_and_a_produced_output() {
        let g = GraphBuilder::new("empty");
        let v = Value {
            name: "x".into(),
            shape: vec![1],
        };
        assert!(g.finish(&v, "y", "").is_err());
        let mut g = GraphBuilder::new("noop");
        let x = g.input("input", &[1]).unwrap();
        assert!(g.finish(&x, "y", "").is_err());
    }

    #[test]
    fn depthwise_conv_counts_one_input_channel_per_output() {
        let mut g = GraphBuilder::new("dw");
        let x = g.input("input", &[8, 6, 6]).unwrap();
        let geom = ConvGeom {
            groups: 8,
            ..ConvGeom::dense(8, 3, 2, 1)
        };
        g.conv("dw", &x, geom, &[0.0; 8 * 9], None).unwrap();
        let (_, rec) = {
            let y = Value {
                name: "dw".into(),
                shape: vec![8, 3, 3],
            };
            g.finish(&y, "dw", "").unwrap()
        };
        assert_eq!(rec[0].macs, 8 * 3 * 3 * 9);
    }
}
