//! [`Net`]: the graph builder plus the seeded initialiser, with the layer helpers every zoo model
//! is written in (conv+BN, ReLU, FC, classifier head) and the naming scheme `prefix.conv1`.

use onnx_protobuf::ModelProto;

use crate::export::{BnParams, ConvGeom, ExportError, GraphBuilder, NodeRecord, Value};

use super::init::Init;

/// How fully connected weights are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FcInit {
    /// Spec §9.1 (CIFAR models): `N(0, √(2/(C_in·C_out)))`.
    Cifar,
    /// PyTorch's `nn.Linear` default: `U(±1/√C_in)` (torchvision ImageNet ResNets, MNIST nets).
    PyTorch,
}

/// A zoo model under construction.
pub(crate) struct Net {
    graph: GraphBuilder,
    init: Init,
    fc_init: FcInit,
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
    pub(crate) fn new(name: &str, seed: u64, fc_init: FcInit) -> Self {
        Net {
            graph: GraphBuilder::new(name),
            init: Init::new(seed),
            fc_init,
        }
    }

    /// An empty model called `name` built for its shapes: zero weights, and conv/linear weight
    /// initializers without values ([`GraphBuilder::shapes_only`]).
    pub(crate) fn shapes_only(name: &str, fc_init: FcInit) -> Self {
        Net {
            graph: GraphBuilder::shapes_only(name),
            init: Init::zeros(),
            fc_init,
        }
    }

    /// The graph input `input` with per-sample `shape`.
    pub(crate) fn input(&mut self, shape: &[usize]) -> Result<Value, ExportError> {
        self.graph.input("input", shape)
    }

    /// Convolution with weights `N(0, √(2/(k·k·C_out)))` (spec §9.1) and, if `bias`, a PyTorch
    /// default bias `U(±1/√fan_in)`.
    pub(crate) fn conv(
        &mut self,
        name: &str,
        x: &Value,
        geom: ConvGeom,
        bias: bool,
    ) -> Result<Value, ExportError> {
        let in_channels = x.shape.first().copied().unwrap_or(0);
        let dims = geom.weight_dims(in_channels);
        let std = (2.0 / (geom.kernel * geom.kernel * geom.out_channels).max(1) as f64).sqrt();
        let weight = self.init.normal(dims.iter().product(), std);
        let fan_in = dims[1] * dims[2] * dims[3];
        let bias = bias.then(|| self.init.uniform(geom.out_channels, inv_sqrt(fan_in)));
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

    /// Fully connected layer with bias; weights per this model's [`FcInit`], bias `U(±1/√C_in)`.
    pub(crate) fn fc(&mut self, name: &str, x: &Value, out: usize) -> Result<Value, ExportError> {
        let n_in = x.elements();
        let weight = match self.fc_init {
            FcInit::Cifar => self
                .init
                .normal(n_in * out, (2.0 / (n_in * out).max(1) as f64).sqrt()),
            FcInit::PyTorch => self.init.uniform(n_in * out, inv_sqrt(n_in)),
        };
        let bias = self.init.uniform(out, inv_sqrt(n_in));
        self.graph.gemm(name, x, out, &weight, Some(&bias))
    }

    /// The classifier head of the CNNs: `avgpool` (global) → `flatten` → `fc`.
    pub(crate) fn classifier(&mut self, x: &Value, classes: usize) -> Result<Value, ExportError> {
        let pooled = self.graph.global_avg_pool("avgpool", x)?;
        let flat = self.flatten("flatten", &pooled)?;
        self.fc("fc", &flat, classes)
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

fn inv_sqrt(n: usize) -> f64 {
    1.0 / (n.max(1) as f64).sqrt()
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
    fn cifar_fc_init_uses_the_in_times_out_fan() {
        let mut net = Net::new("t", 5, FcInit::Cifar);
        let x = net.input(&[400]).unwrap();
        let y = net.fc("fc", &x, 100).unwrap();
        let (model, _) = net.finish(&y, "").unwrap();
        let w = &model.graph.as_ref().unwrap().initializer[0];
        let vals: Vec<f32> = w
            .raw_data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let std =
            (vals.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / vals.len() as f64).sqrt();
        let want = (2.0f64 / 40_000.0).sqrt();
        assert!((std / want - 1.0).abs() < 0.03, "std {std} want {want}");
    }
}
