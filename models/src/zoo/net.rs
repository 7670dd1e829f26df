//! [`Net`]: the graph builder plus the seeded initialiser, with the layer helpers every zoo model
//! is written in (conv+BN, ReLU, FC, classifier head) and the naming scheme `prefix.conv1`.

use onnx_protobuf::ModelProto;

use crate::export::{BnParams, ConvGeom, ExportError, GraphBuilder, NodeRecord, Value};

use super::init::{Init, LinearInit};

/// A zoo model under construction.
pub(crate) struct Net {
    graph: GraphBuilder,
    init: Init,
    /// The per-sample input shape (set by [`Net::input`]), which picks the classifier's rule.
    input: Vec<usize>,
}

/// `prefix.name`, or `name` alone at the top level.
pub(crate) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

impl Net {
    /// An empty model called `name`, weights drawn from `seed`.
    pub(crate) fn new(name: &str, seed: u64) -> Self {
        Net {
            graph: GraphBuilder::new(name),
            init: Init::new(seed),
            input: Vec::new(),
        }
    }

    /// An empty model called `name` built for its shapes: zero weights, and conv/linear weight
    /// initializers without values ([`GraphBuilder::shapes_only`]).
    pub(crate) fn shapes_only(name: &str) -> Self {
        Net {
            graph: GraphBuilder::shapes_only(name),
            init: Init::zeros(),
            input: Vec::new(),
        }
    }

    /// The graph input `input` with per-sample `shape`.
    pub(crate) fn input(&mut self, shape: &[usize]) -> Result<Value, ExportError> {
        self.input = shape.to_vec();
        self.graph.input("input", shape)
    }

    /// Convolution, weights and (if `bias`) bias drawn by [`Init::conv`].
    pub(crate) fn conv(
        &mut self,
        name: &str,
        x: &Value,
        geom: ConvGeom,
        bias: bool,
    ) -> Result<Value, ExportError> {
        let in_channels = x.shape.first().copied().unwrap_or(0);
        let (weight, bias) = self.init.conv(geom.weight_dims(in_channels), bias);
        self.graph.conv(name, x, geom, &weight, bias.as_deref())
    }

    /// Freshly initialised BatchNormalization.
    pub(crate) fn bn(&mut self, name: &str, x: &Value) -> Result<Value, ExportError> {
        let channels = x.shape.first().copied().unwrap_or(0);
        self.graph.batch_norm(name, x, &BnParams::fresh(channels))
    }

    /// `prefix.conv{tag}` (no bias) followed by `prefix.bn{tag}`.
    pub(crate) fn conv_bn(
        &mut self,
        prefix: &str,
        tag: &str,
        x: &Value,
        geom: ConvGeom,
    ) -> Result<Value, ExportError> {
        let y = self.conv(&join(prefix, &format!("conv{tag}")), x, geom, false)?;
        self.bn(&join(prefix, &format!("bn{tag}")), &y)
    }

    /// ReLU.
    pub(crate) fn relu(&mut self, name: &str, x: &Value) -> Result<Value, ExportError> {
        self.graph.relu(name, x)
    }

    /// Residual sum.
    pub(crate) fn add(&mut self, name: &str, a: &Value, b: &Value) -> Result<Value, ExportError> {
        self.graph.add(name, a, b)
    }

    /// The underlying graph builder, for ops without initializers.
    pub(crate) fn graph(&mut self) -> &mut GraphBuilder {
        &mut self.graph
    }

    /// Flatten to `[features]`.
    pub(crate) fn flatten(&mut self, name: &str, x: &Value) -> Result<Value, ExportError> {
        self.graph.flatten(name, x)
    }

    /// A hidden fully connected layer with bias ([`LinearInit::of`] a hidden layer: PyTorch's).
    pub(crate) fn fc(&mut self, name: &str, x: &Value, out: usize) -> Result<Value, ExportError> {
        self.linear(name, x, out, false)
    }

    /// The fully connected layer that produces the model's output ([`LinearInit::of`] the
    /// classifier: spec §9.1's on CIFAR input).
    pub(crate) fn head(&mut self, name: &str, x: &Value, out: usize) -> Result<Value, ExportError> {
        self.linear(name, x, out, true)
    }

    fn linear(
        &mut self,
        name: &str,
        x: &Value,
        out: usize,
        classifier: bool,
    ) -> Result<Value, ExportError> {
        let rule = LinearInit::of(&self.input, classifier);
        let (weight, bias) = self.init.linear(out, x.elements(), rule);
        self.graph.gemm(name, x, out, &weight, Some(&bias))
    }

    /// The classifier head of the CNNs: `avgpool` (global) → `flatten` → `fc`.
    pub(crate) fn classifier(&mut self, x: &Value, classes: usize) -> Result<Value, ExportError> {
        let pooled = self.graph.global_avg_pool("avgpool", x)?;
        let flat = self.flatten("flatten", &pooled)?;
        self.head("fc", &flat, classes)
    }

    /// Finishes the graph with `logits` as its output.
    pub(crate) fn finish(
        self,
        logits: &Value,
        doc: &str,
    ) -> Result<(ModelProto, Vec<NodeRecord>), ExportError> {
        self.graph.finish(logits, "logits", doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_skips_empty_prefix() {
        assert_eq!(join("", "conv1"), "conv1");
        assert_eq!(join("layer1.0", "conv1"), "layer1.0.conv1");
    }

    #[test]
    fn cifar_classifier_init_uses_the_in_times_out_fan() {
        let mut net = Net::new("t", 5);
        let x = net.input(&[3, 32, 32]).unwrap();
        let x = net.flatten("flatten", &x).unwrap();
        let y = net.head("fc", &x, 10).unwrap();
        let (model, _) = net.finish(&y, "").unwrap();
        let w = &model.graph.as_ref().unwrap().initializer[0];
        let vals: Vec<f32> = w
            .raw_data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let std =
            (vals.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / vals.len() as f64).sqrt();
        let want = (2.0f64 / 30_720.0).sqrt();
        assert!((std / want - 1.0).abs() < 0.03, "std {std} want {want}");
    }
}
