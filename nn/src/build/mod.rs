//! Building a trainable engine network from an imported IR graph.
//!
//! [`build_network`] translates every IR node into engine layers (see [`ops`] for the op
//! mapping and the NCHW → channels-last convention), takes the weights from the ONNX initializers
//! or re-initialises them per spec §9.1, and records for every conv/linear layer its index in the
//! model's [`ModelSummary`] and whether it is quantized (spec §1.4, [`QuantScope`]).

mod ops;

use cptsim_models::ModelSummary;
use cptsim_traces::QuantScope;
use ndarray::Ix4;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::data::text::TokenLayout;
use crate::error::{Result, SimError};
use crate::layers::from_ir::{Ctx, Layout, Val};
use crate::layers::{Mode, Param, Tensor};
use crate::net::Graph;
use crate::quant::{mix64, LayerQuant, QuantMethod};

pub use crate::layers::from_ir::Init;

/// How to build the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildOptions {
    /// Initial weights.
    pub init: Init,
    /// The quantizer of every conv/linear layer.
    pub method: QuantMethod,
    /// Seed of the error-rounding noise (each layer derives its own stream from it).
    pub noise_seed: u64,
    /// Which layers follow the precision schedule.
    pub scope: QuantScope,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            init: Init::FromModel,
            method: QuantMethod::Sbm,
            noise_seed: 0,
            scope: QuantScope::default(),
        }
    }
}

/// A trainable network built from an IR graph, with the conv/linear layer map.
pub struct Network {
    graph: Graph,
    summary: ModelSummary,
    quantized: Vec<bool>,
    output_layout: Layout,
    /// A language model's token layout and vocabulary.
    tokens: Option<(TokenLayout, usize)>,
}

/// The token layout of a language model (its input feeds an embedding, directly or through
/// reshapes that keep its shape, as Hugging Face's `input_ids.view(-1, T)`) and that
/// embedding's vocabulary: `[B, T]` or `[T, B]` by where the batch is; when `B = T`,
/// sequence-first exactly when the model has a recurrent layer (PyTorch's RNN LMs are
/// sequence-first, its Transformer LMs batch-first).
fn token_input(graph: &cptsim_models::Graph) -> Option<(TokenLayout, usize)> {
    use cptsim_models::ir::Op;
    let input_shape = graph.shape(graph.input);
    let mut ids = vec![graph.input];
    for n in &graph.nodes {
        let reshapes = matches!(n.op, Op::Reshape { .. } | Op::Flatten { .. });
        if reshapes
            && n.inputs.first().is_some_and(|v| ids.contains(v))
            && graph.shape(n.output) == input_shape
        {
            ids.push(n.output);
        }
    }
    let vocab = graph.nodes.iter().find_map(|n| match &n.op {
        Op::Embedding(e) if n.inputs.first().is_some_and(|v| ids.contains(v)) => {
            Some(e.table.shape().first().copied().unwrap_or(0))
        }
        _ => None,
    })?;
    let recurrent = graph.nodes.iter().any(|n| matches!(n.op, Op::Recurrent(_)));
    let layout = match graph.shape(graph.input) {
        [a, b] if *a == graph.batch && *b != graph.batch => TokenLayout::BatchFirst,
        [a, b] if *b == graph.batch && *a != graph.batch => TokenLayout::SeqFirst,
        _ if recurrent => TokenLayout::SeqFirst,
        _ => TokenLayout::BatchFirst,
    };
    Some((layout, vocab))
}

/// Builds the engine network for `graph` (see the module docs). An IR op the engine cannot run
/// is an error naming the node and the op.
pub fn build_network(graph: &cptsim_models::Graph, opts: &BuildOptions) -> Result<Network> {
    let summary = graph.summary();
    let quantized = opts.scope.resolve(&summary);
    let input_shape = graph.shape(graph.input);
    let mut net = Graph::new();
    let mut rng = ChaCha8Rng::seed_from_u64(match opts.init {
        Init::Seeded(s) => s,
        Init::FromModel => 0,
    });
    let mut vals: Vec<Option<Val>> = vec![None; graph.values.len()];
    let input = Val {
        id: 0,
        layout: Layout::of_input(&graph.source, input_shape)?,
    };
    set(&mut vals, graph.input.0, input);
    let mut layer_index = 0u64;
    let batch_axes = cptsim_models::ir::batch_axes::batch_axes(graph);
    for node in &graph.nodes {
        let ins = node
            .inputs
            .iter()
            .map(|v| {
                vals.get(v.0).copied().flatten().ok_or_else(|| {
                    SimError::shape(
                        &node.name,
                        format!("reads tensor #{} before it exists", v.0),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let quant = LayerQuant::new(opts.method, mix64(opts.noise_seed ^ mix64(layer_index)));
        if matches!(
            node.op,
            cptsim_models::ir::Op::Conv(_)
                | cptsim_models::ir::Op::Linear(_)
                | cptsim_models::ir::Op::MatMul
                | cptsim_models::ir::Op::Recurrent(_)
        ) {
            layer_index += 1;
        }
        let mut ctx = Ctx {
            net: &mut net,
            ir: graph,
            batch_axes: &batch_axes,
            init: opts.init,
            rng: &mut rng,
        };
        let out = ops::node(&mut ctx, node, &ins, quant)?;
        set(&mut vals, node.output.0, out);
    }
    let out = vals
        .get(graph.output.0)
        .copied()
        .flatten()
        .ok_or_else(|| SimError::shape(&graph.source, "the graph output is never produced"))?;
    if out.id != net.last() {
        return Err(SimError::shape(
            &graph.source,
            "the graph output is not the last computed tensor (dead branches after it)",
        ));
    }
    let mut network = Network {
        graph: net,
        summary,
        quantized,
        output_layout: out.layout,
        tokens: token_input(graph),
    };
    network.check_layer_map()?;
    Ok(network)
}

fn set(vals: &mut [Option<Val>], i: usize, v: Val) {
    if let Some(slot) = vals.get_mut(i) {
        *slot = Some(v);
    }
}

impl Network {
    /// Checks that the engine's conv/linear layers are the summary's layers, in order.
    fn check_layer_map(&mut self) -> Result<()> {
        let names: Vec<String> = self
            .graph
            .quant_layers_mut()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let want: Vec<&str> = self
            .summary
            .layers
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        if names.len() != want.len() || names.iter().zip(&want).any(|(a, b)| a != b) {
            return Err(SimError::shape(
                &self.summary.name,
                format!("engine layers {names:?} differ from the summary's {want:?}"),
            ));
        }
        Ok(())
    }

    /// The model's per-layer summary; layer `i` of it is quantization layer `i` here.
    pub fn summary(&self) -> &ModelSummary {
        &self.summary
    }

    /// A language model's token layout (`None` when the input is not token ids).
    pub fn tokens(&self) -> Option<TokenLayout> {
        self.tokens.map(|(layout, _)| layout)
    }

    /// A language model's vocabulary: its token ids lie in `0..vocab` (`None` when the input is
    /// not token ids).
    pub fn token_vocab(&self) -> Option<usize> {
        self.tokens.map(|(_, vocab)| vocab)
    }

    /// Per summary layer: whether it follows the precision schedule (spec §1.4 scope).
    pub fn quantized(&self) -> &[bool] {
        &self.quantized
    }

    /// The engine network (for running it with other tools).
    pub fn graph_mut(&mut self) -> &mut Graph {
        &mut self.graph
    }

    /// Per-sample input shape as in the IR: `[C, H, W]` (an `[N, F]` model gives `[F, 1, 1]`).
    pub fn input_chw(&self) -> [usize; 3] {
        match self.summary.input.as_slice() {
            [_, c, h, w] => [*c, *h, *w],
            [_, f] => [*f, 1, 1],
            _ => [0, 0, 0],
        }
    }

    /// The quantization state of every conv/linear layer, indexed like [`Network::summary`]'s
    /// layers.
    pub fn layer_quants_mut(&mut self) -> Vec<&mut LayerQuant> {
        self.graph
            .quant_layers_mut()
            .into_iter()
            .map(|(_, q)| q)
            .collect()
    }

    /// Sets one layer's bits (layer index as in the summary), whatever the scope says.
    pub fn set_layer_bits(&mut self, layer: usize, bits_fw: u32, bits_bw: u32) -> Result<()> {
        let count = self.summary.layers.len();
        let mut qs = self.layer_quants_mut();
        let q = qs.get_mut(layer).ok_or_else(|| {
            SimError::invalid(
                "layer index",
                format!("{layer} (the model has {count} layers)"),
            )
        })?;
        q.set_bits(bits_fw, bits_bw)
    }

    /// Sets every in-scope layer to `bits_fw`/`bits_bw` and every other layer to fp32.
    pub fn set_bits(&mut self, bits_fw: u32, bits_bw: u32) -> Result<()> {
        let scope = self.quantized.clone();
        for (q, on) in self.layer_quants_mut().into_iter().zip(scope) {
            if on {
                q.set_bits(bits_fw, bits_bw)?;
            } else {
                q.set_bits(0, 0)?;
            }
        }
        Ok(())
    }

    /// Makes eval-mode forward passes quantize activations with each batch's own range (one-shot
    /// inference of an imported model, which has no running ranges) instead of the running range.
    pub fn use_batch_ranges_in_eval(&mut self, on: bool) {
        for q in self.layer_quants_mut() {
            q.batch_range_in_eval = on;
        }
    }

    /// Sets the arithmetic of every layer's quantized GEMMs (and their accumulators).
    pub fn use_arithmetic(&mut self, arith: crate::quant::arith::ArithSpec) {
        for q in self.layer_quants_mut() {
            q.arith = arith;
        }
    }

    /// Runs the network on an engine-layout input (`[N, H, W, C]`, or `[N, F]`).
    pub fn forward(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.graph.forward(x, mode)
    }

    /// Back-propagates the output gradient; parameter gradients land in [`Param::grad`].
    pub fn backward(&mut self, grad: Tensor) -> Result<Tensor> {
        self.graph.backward(grad)
    }

    /// Back-propagates for training: parameter gradients only ([`Graph::backward_params`]).
    pub fn backward_params(&mut self, grad: Tensor) -> Result<()> {
        self.graph.backward_params(grad)
    }

    /// All trainable parameters in a fixed order.
    pub fn params_mut(&mut self) -> Vec<&mut Param> {
        self.graph.params_mut()
    }

    /// Number of trainable parameters (equals the summary's `params`).
    pub fn param_count(&mut self) -> u64 {
        self.params_mut().iter().map(|p| p.value.len() as u64).sum()
    }

    /// Converts an IR-layout input (`[N, C, H, W]`, `[N, F]`, or token ids of exactly the built
    /// shape, `[B, T]` or `[T, B]`) to the engine layout (images channels-last, the rest as is).
    pub fn input_from_ir(&self, x: &Tensor) -> Result<Tensor> {
        let rank = self.summary.input.len();
        let n = x.shape().first().copied().unwrap_or(0);
        if x.is_empty() {
            return Err(SimError::shape(
                "input",
                format!("got {:?}: the input is empty", x.shape()),
            ));
        }
        let (want, what) = match self.tokens() {
            Some(TokenLayout::SeqFirst) => (self.summary.input.clone(), "token ids [T, B]".into()),
            Some(TokenLayout::BatchFirst) => {
                (self.summary.input.clone(), "token ids [B, T]".into())
            }
            None => {
                let mut want = self.summary.input.clone();
                if let Some(b) = want.first_mut() {
                    *b = n;
                }
                (want, format!("this batch of {n}"))
            }
        };
        if x.shape() != want.as_slice() {
            return Err(SimError::shape(
                "input",
                format!(
                    "got {:?}, model `{}` expects {want:?} for {what}",
                    x.shape(),
                    self.summary.name
                ),
            ));
        }
        if rank != 4 {
            return Ok(x.as_standard_layout().into_owned());
        }
        nchw_nhwc(x, [0, 2, 3, 1])
    }

    /// Splits the network into its engine graph, summary and per-layer quantization scope.
    pub fn into_parts(self) -> (Graph, ModelSummary, Vec<bool>) {
        (self.graph, self.summary, self.quantized)
    }

    /// Converts an engine-layout output to the IR layout (`[N, H, W, C]` → `[N, C, H, W]`).
    pub fn output_to_ir(&self, y: Tensor) -> Result<Tensor> {
        match self.output_layout {
            Layout::AsIs => Ok(y),
            Layout::Image => nchw_nhwc(&y, [0, 3, 1, 2]),
        }
    }
}

/// Permutes a 4-D tensor's axes into a new standard-layout tensor.
fn nchw_nhwc(x: &Tensor, perm: [usize; 4]) -> Result<Tensor> {
    let x4 = x
        .view()
        .into_dimensionality::<Ix4>()
        .map_err(|_| SimError::shape("input", format!("expected 4-D, got {:?}", x.shape())))?;
    Ok(x4
        .permuted_axes(perm)
        .as_standard_layout()
        .into_owned()
        .into_dyn())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::SoftmaxCrossEntropy;
    use cptsim_models::ir::{self, Op};
    use cptsim_models::{load_graph, load_summary, LayerRole};
    use ndarray::ArrayD;

    fn build(spec: &str, batch: usize, opts: &BuildOptions) -> Network {
        let g = load_graph(spec, batch).unwrap();
        build_network(&g, opts).unwrap()
    }

    /// One training step (forward, loss, backward) on random data; returns the output.
    fn train_step(net: &mut Network, batch: usize) -> Tensor {
        let [c, h, w] = net.input_chw();
        let x = crate::layers::gradcheck::rand_tensor(&[batch, c, h, w], 1.0, 5);
        let x = net.input_from_ir(&x).unwrap();
        let y = net.forward(x, Mode::Train).unwrap();
        let classes = y.shape()[1];
        let labels: Vec<usize> = (0..batch).map(|i| i % classes).collect();
        let mut loss = SoftmaxCrossEntropy::new();
        assert!(loss.forward(&y, &labels).unwrap().0.is_finite());
        let dx = net.backward(loss.backward().unwrap()).unwrap();
        assert_eq!(dx.shape(), &[batch, h, w, c]);
        y
    }

    #[test]
    fn zoo_models_build_train_and_count_the_summary_params() {
        for (spec, classes) in [
            ("zoo:resnet20", 100),
            ("zoo:lenet5", 10),
            ("zoo:mobilenetv2", 100),
        ] {
            let mut net = build(spec, 2, &BuildOptions::default());
            assert_eq!(net.param_count(), net.summary().params, "{spec}");
            net.set_bits(8, 8).unwrap();
            let y = train_step(&mut net, 2);
            assert_eq!(y.shape(), &[2, classes], "{spec}");
            let grads: f32 = net
                .params_mut()
                .iter()
                .map(|p| p.grad.iter().map(|g| g.abs()).sum::<f32>())
                .sum();
            assert!(grads > 0.0, "{spec}: no parameter gradient");
        }
    }

    /// A PyTorch export with Clip, Pad, Slice, Concat, Sigmoid and MatMul trains too.
    #[test]
    fn pytorch_fixture_trains() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/mixed_legacy_opset11.onnx"
        );
        let mut net = build(path, 3, &BuildOptions::default());
        assert_eq!(net.param_count(), net.summary().params);
        net.set_bits(8, 8).unwrap();
        assert_eq!(train_step(&mut net, 3).shape(), &[3, 10]);
    }

    #[test]
    fn scope_follows_spec_1_4() {
        let mut net = build("zoo:resnet20", 2, &BuildOptions::default());
        let roles: Vec<LayerRole> = net.summary().layers.iter().map(|l| l.role).collect();
        let q = net.quantized().to_vec();
        for (r, on) in roles.iter().zip(&q) {
            assert_eq!(*on, *r != LayerRole::Last, "{r:?}");
        }
        net.set_bits(4, 8).unwrap();
        let bits: Vec<u32> = net.layer_quants_mut().iter().map(|q| q.bits_fw).collect();
        assert_eq!(bits.last(), Some(&0));
        assert_eq!(bits.first(), Some(&4));
        net.set_layer_bits(bits.len() - 1, 6, 6).unwrap();
        assert_eq!(net.layer_quants_mut().last().map(|q| q.bits_fw), Some(6));
        assert!(net.set_layer_bits(bits.len(), 6, 6).is_err());

        // ImageNet-sized input: stem and shortcuts fp32; overrides win.
        let r18 = load_summary("zoo:resnet18", 1).unwrap();
        let q = QuantScope::default().resolve(&r18);
        for (l, on) in r18.layers.iter().zip(&q) {
            assert_eq!(*on, l.role == LayerRole::Body, "{} {:?}", l.name, l.role);
        }
        let all = QuantScope {
            first: Some(true),
            last: Some(true),
            shortcut: Some(true),
            depthwise: None,
        };
        assert!(all.resolve(&r18).iter().all(|&b| b));
    }

    /// conv(2→3, 3×3, stride 2, pad 1, bias) → relu → flatten → linear, against a direct NCHW
    /// computation: checks weight layout, the channels-last conversion and NCHW flatten order.
    #[test]
    fn eval_forward_equals_a_direct_nchw_computation() {
        let t =
            |shape: &[usize], seed: u64| crate::layers::gradcheck::rand_tensor(shape, 1.0, seed);
        let (wc, bc, wl) = (t(&[3, 2, 3, 3], 1), t(&[3], 2), t(&[4, 3 * 3 * 2], 3));
        let mut g = ir::Graph::new("tiny", "test", 2, "x", vec![2, 2, 5, 4]);
        let conv = ir::Conv {
            weight: wc.clone(),
            bias: Some(bc.clone()),
            strides: [2, 2],
            pads: [1, 1, 1, 1],
            dilations: [1, 1],
            groups: 1,
        };
        let a = g.push("conv", Op::Conv(conv), vec![g.input], "a").unwrap();
        let r = g.push("relu", Op::Relu, vec![a], "r").unwrap();
        let f = g
            .push("flat", Op::Flatten { axis: 1 }, vec![r], "f")
            .unwrap();
        let lin = ir::Linear {
            weight: wl.clone(),
            bias: None,
        };
        g.output = g.push("fc", Op::Linear(lin), vec![f], "y").unwrap();
        let mut net = build_network(&g, &BuildOptions::default()).unwrap();
        let x = t(&[2, 2, 5, 4], 4);
        let y = net
            .forward(net.input_from_ir(&x).unwrap(), Mode::Eval)
            .unwrap();
        // Direct: conv output [2, 3, 3, 2] in NCHW.
        let mut feat = ArrayD::<f32>::zeros(vec![2, 3, 3, 2]);
        for (n, o, oy, ox) in itertools4(2, 3, 3, 2) {
            let mut s = bc[[o]];
            for (i, ky, kx) in
                (0..2).flat_map(|i| (0..3).flat_map(move |ky| (0..3).map(move |kx| (i, ky, kx))))
            {
                let (iy, ix) = ((oy * 2 + ky) as isize - 1, (ox * 2 + kx) as isize - 1);
                if (0..5).contains(&iy) && (0..4).contains(&ix) {
                    s += x[[n, i, iy as usize, ix as usize]] * wc[[o, i, ky, kx]];
                }
            }
            feat[[n, o, oy, ox]] = s.max(0.0);
        }
        for n in 0..2 {
            for j in 0..4 {
                let want: f32 = feat
                    .index_axis(ndarray::Axis(0), n)
                    .iter()
                    .zip(wl.index_axis(ndarray::Axis(0), j).iter())
                    .map(|(a, b)| a * b)
                    .sum();
                assert!(
                    (y[[n, j]] - want).abs() < 1e-5,
                    "y[{n},{j}] = {} want {want}",
                    y[[n, j]]
                );
            }
        }
    }

    /// Input normalisation by constants and a squeeze-and-excitation gate (GAP → sigmoid →
    /// broadcasting Mul) against a direct NCHW computation; the network also trains a step.
    #[test]
    fn normalisation_constants_and_a_broadcast_gate_equal_a_direct_computation() {
        let t =
            |shape: &[usize], seed: u64| crate::layers::gradcheck::rand_tensor(shape, 1.0, seed);
        let (mean, std) = (t(&[3, 1, 1], 1), t(&[3, 1, 1], 2).mapv(|v| v.abs() + 0.5));
        let binary = |kind, value: &ArrayD<f32>, on_left| {
            Op::Binary(ir::Binary {
                kind,
                constant: Some(ir::ConstOperand {
                    value: value.clone(),
                    on_left,
                }),
            })
        };
        let mut g = ir::Graph::new("se", "test", 2, "x", vec![2, 3, 2, 2]);
        let c = g
            .push(
                "sub",
                binary(ir::BinaryKind::Sub, &mean, false),
                vec![g.input],
                "c",
            )
            .unwrap();
        let z = g
            .push(
                "div",
                binary(ir::BinaryKind::Div, &std, false),
                vec![c],
                "z",
            )
            .unwrap();
        let p = g.push("gap", Op::GlobalAveragePool, vec![z], "p").unwrap();
        let s = g.push("gate", Op::Sigmoid, vec![p], "s").unwrap();
        let mul = Op::Binary(ir::Binary {
            kind: ir::BinaryKind::Mul,
            constant: None,
        });
        let m = g.push("scale", mul, vec![z, s], "m").unwrap();
        g.output = g
            .push("flat", Op::Flatten { axis: 1 }, vec![m], "y")
            .unwrap();
        let mut net = build_network(&g, &BuildOptions::default()).unwrap();
        let x = t(&[2, 3, 2, 2], 3);
        let y = net
            .forward(net.input_from_ir(&x).unwrap(), Mode::Eval)
            .unwrap();
        for n in 0..2 {
            for ch in 0..3 {
                let zs: Vec<f32> = (0..4)
                    .map(|k| (x[[n, ch, k / 2, k % 2]] - mean[[ch, 0, 0]]) / std[[ch, 0, 0]])
                    .collect();
                let gate = 1.0 / (1.0 + (-zs.iter().sum::<f32>() / 4.0).exp());
                for (k, zk) in zs.iter().enumerate() {
                    let got = y[[n, ch * 4 + k]];
                    assert!(
                        (got - zk * gate).abs() < 1e-5,
                        "y[{n},{}] = {got}",
                        ch * 4 + k
                    );
                }
            }
        }
        let out = net
            .forward(net.input_from_ir(&x).unwrap(), Mode::Train)
            .unwrap();
        let grad = net.backward(Tensor::ones(out.raw_dim())).unwrap();
        assert_eq!(grad.shape(), [2, 2, 2, 3]);
        assert!(grad.iter().all(|v| v.is_finite()));
    }

    fn itertools4(
        a: usize,
        b: usize,
        c: usize,
        d: usize,
    ) -> impl Iterator<Item = (usize, usize, usize, usize)> {
        (0..a).flat_map(move |i| {
            (0..b).flat_map(move |j| (0..c).flat_map(move |k| (0..d).map(move |l| (i, j, k, l))))
        })
    }

    #[test]
    fn unsupported_ops_name_the_node_and_op() {
        // A LogSoftmax output (a language model's) runs; over another axis than the last it is
        // refused naming the node and op.
        let mut g = ir::Graph::new("m", "test", 2, "x", vec![2, 4]);
        let op = Op::Softmax { axis: 1, log: true };
        g.output = g.push("out/lsm", op, vec![g.input], "y").unwrap();
        let mut net = build_network(&g, &BuildOptions::default()).unwrap();
        let x = Tensor::from_shape_vec(vec![2, 4], (0..8).map(|v| v as f32).collect()).unwrap();
        let y = net.forward(x, Mode::Eval).unwrap();
        let sum: f32 = y.iter().take(4).map(|v| v.exp()).sum();
        assert!((sum - 1.0).abs() < 1e-6, "{y:?}");
        let mut g = ir::Graph::new("m", "test", 2, "x", vec![2, 4]);
        let op = Op::Softmax { axis: 0, log: true };
        g.output = g.push("out/lsm", op, vec![g.input], "y").unwrap();
        let err = build_network(&g, &BuildOptions::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("out/lsm") && err.contains("LogSoftmax"),
            "{err}"
        );
        assert!(
            err.contains("import and cost work, training does not"),
            "{err}"
        );
        // A plain RNN cell imports and costs but does not train.
        let mut g = ir::Graph::new("m", "test", 2, "x", vec![3, 2, 4]);
        let rec = ir::Recurrent {
            kind: ir::CellKind::Rnn,
            hidden: 5,
            w: ArrayD::zeros(vec![5, 4]),
            r: ArrayD::zeros(vec![5, 5]),
            bias_w: ArrayD::zeros(vec![5]),
            bias_r: ArrayD::zeros(vec![5]),
        };
        g.output = g
            .push("rnn", Op::Recurrent(rec), vec![g.input], "y")
            .unwrap();
        let err = build_network(&g, &BuildOptions::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("`rnn`") || err.contains("rnn"), "{err}");
        assert!(err.contains("training does not"), "{err}");
    }

    /// One training step of a language model on random ids; returns the logits.
    fn lm_step(net: &mut Network, vocab: usize) -> Tensor {
        let shape = net.summary().input.clone();
        let n: usize = shape.iter().product();
        let ids: Vec<f32> = (0..n).map(|i| ((i * 7 + 3) % vocab) as f32).collect();
        let x = Tensor::from_shape_vec(shape, ids).unwrap();
        let y = net.forward(x, Mode::Train).unwrap();
        let v = *y.shape().last().unwrap();
        let rows = y.len() / v;
        let flat = y.clone().into_shape_with_order(vec![rows, v]).unwrap();
        let labels: Vec<usize> = (0..rows).map(|i| (i * 5 + 1) % vocab).collect();
        let mut loss = SoftmaxCrossEntropy::new();
        assert!(loss.forward(&flat, &labels).unwrap().0.is_finite());
        let g = loss
            .backward()
            .unwrap()
            .into_shape_with_order(y.shape().to_vec())
            .unwrap();
        net.backward(g).unwrap();
        y
    }

    #[test]
    fn zoo_language_models_build_and_train_a_step_quantized() {
        for (name, layout) in [
            ("lstm-lm", TokenLayout::SeqFirst),
            ("transformer-lm", TokenLayout::BatchFirst),
        ] {
            let spec = format!("zoo:{name}");
            let g = cptsim_models::load_lm_graph(&spec, 2, Some(6), 11).unwrap();
            let opts = BuildOptions {
                init: Init::Seeded(1),
                ..Default::default()
            };
            let mut net = build_network(&g, &opts).unwrap();
            assert_eq!(net.tokens(), Some(layout), "{name}");
            assert_eq!(net.param_count(), net.summary().params, "{name}");
            net.set_bits(4, 8).unwrap();
            let y = lm_step(&mut net, 11);
            assert_eq!(y.shape().last(), Some(&11), "{name}");
            let grads: f32 = net
                .params_mut()
                .iter()
                .map(|p| p.grad.iter().map(|g| g.abs()).sum::<f32>())
                .sum();
            assert!(grads > 0.0 && grads.is_finite(), "{name}: {grads}");
        }
    }

    /// PyTorch's exports of an LSTM LM, a GRU LM, a Transformer LM (both exporters) and a ViT
    /// build into engine networks with their weights and train a step.
    #[test]
    fn pytorch_sequence_exports_build_and_train() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/seq/");
        // The export length (`tests/python/make_seq_fixtures.py`): the legacy Transformer runs
        // at it only.
        const SEQ: usize = 7;
        for file in [
            "lstm_lm_legacy_opset14.onnx",
            "gru_lm_legacy_opset14.onnx",
            "transformer_lm_dynamo_opset18.onnx",
            "transformer_lm_legacy_opset14.onnx",
            "vit_dynamo_opset18.onnx",
        ] {
            let path = format!("{dir}{file}");
            let seq = (!file.starts_with("vit")).then_some(SEQ);
            let g = cptsim_models::load_graph_with(&path, 2, seq)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let mut net = build_network(&g, &BuildOptions::default())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(net.param_count(), net.summary().params, "{file}");
            net.set_bits(8, 8).unwrap();
            match net.tokens() {
                Some(_) => {
                    let vocab = g.nodes.iter().find_map(|n| match &n.op {
                        Op::Embedding(e) => Some(e.table.shape()[0]),
                        _ => None,
                    });
                    lm_step(&mut net, vocab.unwrap());
                }
                None => {
                    train_step(&mut net, 2);
                }
            }
        }
    }

    /// Hugging Face's GPT-2 views its ids as `[-1, T]` before the embedding: a reshape that
    /// keeps the shape still makes a language model; one that changes it does not.
    #[test]
    fn token_ids_reach_the_embedding_through_shape_keeping_reshapes() {
        let lm = |target: Vec<usize>| {
            let mut g = ir::Graph::new("m", "test", 2, "ids", vec![2, 5]);
            let v = g
                .push("view", Op::Reshape { shape: target }, vec![g.input], "v")
                .unwrap();
            let table = ndarray::ArrayD::from_elem(vec![10, 4], 0.5f32);
            let e = g
                .push("wte", Op::Embedding(ir::Embedding { table }), vec![v], "e")
                .unwrap();
            g.output = e;
            build_network(&g, &BuildOptions::default()).unwrap()
        };
        let net = lm(vec![2, 5]);
        assert_eq!(
            net.tokens(),
            Some(crate::data::text::TokenLayout::BatchFirst)
        );
        assert_eq!(net.token_vocab(), Some(10));
        assert_eq!(lm(vec![10]).tokens(), None);
    }

    #[test]
    fn seeded_init_is_deterministic_and_replaces_the_model_weights() {
        let weights = |init: Init| {
            let mut n = build(
                "zoo:lenet5",
                2,
                &BuildOptions {
                    init,
                    ..Default::default()
                },
            );
            n.params_mut()
                .iter()
                .map(|p| p.value.clone())
                .collect::<Vec<_>>()
        };
        let (a, b, m) = (
            weights(Init::Seeded(7)),
            weights(Init::Seeded(7)),
            weights(Init::FromModel),
        );
        assert_eq!(a, b);
        assert_ne!(a, m);
        assert_ne!(a, weights(Init::Seeded(8)));
    }
}

#[cfg(test)]
#[path = "tests/init.rs"]
mod init_tests;
