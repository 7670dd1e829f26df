//! Translation of one IR node into engine layers.
//!
//! Image tensors (the NCHW input of a CNN and what its convs, pools and norms make of it) live in
//! the engine as channels-last `[N, H, W, C]` tensors; every other tensor (features `[N, F]`,
//! token ids, sequences `[B, T, D]` or `[T, B, D]`, attention heads `[B, h, T, d]`) is held as
//! the IR holds it. A tensor's layout follows from the op that makes it, not from its rank: a
//! reshape of a sequence to four axes is not an image.

use cptsim_models::ir::{self, Node, Op};
use rand::Rng;

use super::Init;
use crate::error::{Result, SimError};
use crate::init::{conv_weight, linear_weight_bias, uniform};
use crate::layers::embedding::Embedding;
use crate::layers::lastaxis::{Gelu, LayerNorm, Softmax};
use crate::layers::{
    elementwise::Constant, Activation, ActivationKind, Add, BatchNorm, CausalMask, ClassToken,
    Clip, Concat, Conv2d, Conv2dSpec, Dropout, Elementwise, ElementwiseKind, Flatten,
    GlobalAvgPool, Gru, Layer, Linear, Lstm, MatMul, Pad, Pool2d, PoolKind, PoolSpec,
    PositionEmbedding, Reshape, Sigmoid, SliceLayer, Tanh, Tensor, Transpose, Unflatten,
};
use crate::net::Graph;
use crate::quant::{mix64, LayerQuant};

/// Where an IR tensor lives in the engine network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// IR `[N, C, H, W]` held as `[N, H, W, C]`.
    Image,
    /// Held as in the IR (features `[N, F]`, token ids, sequences, attention heads).
    AsIs,
}

impl Layout {
    /// The engine axis holding IR axis `axis`.
    pub(super) fn engine_axis(self, axis: usize) -> usize {
        match (self, axis) {
            (Layout::Image, 1) => 3,
            (Layout::Image, 2) => 1,
            (Layout::Image, 3) => 2,
            _ => axis,
        }
    }

    /// The engine layout of a graph input of this shape: rank 4 is an image, ranks 2 and 3
    /// (features, token ids, sequences) are held as is.
    pub(super) fn of_input(source: &str, shape: &[usize]) -> Result<Self> {
        match shape.len() {
            4 => Ok(Layout::Image),
            2 | 3 => Ok(Layout::AsIs),
            r => Err(SimError::shape(
                source,
                format!(
                    "rank-{r} input {shape:?}: the engine takes images [N, C, H, W], features \
                     [N, F], token ids [B, T] / [T, B] or sequences"
                ),
            )),
        }
    }
}

/// An engine value: its id in the [`Graph`] and its layout.
#[derive(Clone, Copy, Debug)]
pub(super) struct Val {
    pub id: usize,
    pub layout: Layout,
}

/// What the builder needs while translating one node.
pub(super) struct Ctx<'a, R: Rng> {
    pub net: &'a mut Graph,
    pub ir: &'a ir::Graph,
    pub init: Init,
    pub rng: &'a mut R,
}

/// Half-width of the uniform initialisation of embeddings (PyTorch's word_language_model
/// example initialises its encoder with U(±0.1)).
const EMBED_INIT: f32 = 0.1;
/// Half-width of the uniform initialisation of learned positions and class tokens (small, as
/// ViT/GPT implementations draw them with σ = 0.02).
const POSITION_INIT: f32 = 0.02;

/// The error for an IR op (or an attribute of it) the engine cannot run: the importer and the
/// cost models take every IR op, so the message says that only training stops here.
fn unsupported(node: &Node, why: impl std::fmt::Display) -> SimError {
    SimError::shape(
        &node.name,
        format!(
            "op {}: import and cost work, training does not: {why}",
            node.op.name()
        ),
    )
}

/// The single input of a node, whatever its layout.
fn one_any(node: &Node, ins: &[Val]) -> Result<Val> {
    match ins {
        [v] => Ok(*v),
        _ => Err(unsupported(
            node,
            format!("{} inputs, expected 1", ins.len()),
        )),
    }
}

/// An IR constant operand (NumPy-broadcast against a tensor of `layout` and IR rank `rank`) in
/// engine layout: padded with leading size-1 axes to the tensor's rank, then NCHW → NHWC for
/// images.
fn engine_constant(
    node: &Node,
    value: &ndarray::ArrayD<f32>,
    layout: Layout,
    rank: usize,
) -> Result<Tensor> {
    if value.ndim() > rank {
        return Err(unsupported(
            node,
            format!(
                "constant of shape {:?} against a rank-{rank} tensor",
                value.shape()
            ),
        ));
    }
    let mut shape = vec![1; rank - value.ndim()];
    shape.extend_from_slice(value.shape());
    let full = owned(value)
        .into_shape_with_order(shape)
        .map_err(|e| SimError::shape(&node.name, e.to_string()))?;
    Ok(match layout {
        Layout::Image => full
            .permuted_axes(vec![0, 2, 3, 1])
            .as_standard_layout()
            .into_owned(),
        Layout::AsIs => full,
    })
}

/// A tensor's data as an owned standard-layout engine tensor.
fn owned(t: &ndarray::ArrayD<f32>) -> Tensor {
    t.as_standard_layout().into_owned()
}

impl<R: Rng> Ctx<'_, R> {
    fn shape(&self, id: ir::ValueId) -> &[usize] {
        self.ir.shape(id)
    }

    /// Appends the engine layer(s) for `node` reading `ins`; returns the value of its output.
    /// `quant` is consumed by conv and linear nodes.
    pub fn node(&mut self, node: &Node, ins: &[Val], quant: LayerQuant) -> Result<Val> {
        let name = node.name.as_str();
        let one = |layout: Layout| -> Result<Val> {
            match ins {
                [v] if v.layout == layout => Ok(*v),
                [v] => Err(unsupported(
                    node,
                    format!("input layout {:?}, expected {layout:?}", v.layout),
                )),
                _ => Err(unsupported(
                    node,
                    format!("{} inputs, expected 1", ins.len()),
                )),
            }
        };
        let image = |id: usize| Val {
            id,
            layout: Layout::Image,
        };
        let flat = |id: usize| Val {
            id,
            layout: Layout::AsIs,
        };
        match &node.op {
            Op::Conv(c) => {
                let x = one(Layout::Image)?;
                let layer = self.conv(node, c, quant)?;
                Ok(image(self.net.push(layer, &[x.id])?))
            }
            Op::BatchNorm(b) => {
                let x = ins
                    .first()
                    .copied()
                    .ok_or_else(|| unsupported(node, "no input"))?;
                let layer = self.batch_norm(name, b)?;
                Ok(Val {
                    id: self.net.push(layer, &[x.id])?,
                    layout: x.layout,
                })
            }
            Op::Relu => self.activation(node, ins, ActivationKind::Relu),
            Op::Clip { min, max } if *min == 0.0 && *max == 6.0 => {
                self.activation(node, ins, ActivationKind::Relu6)
            }
            Op::Clip { min, max } if *min == 0.0 && *max == f32::INFINITY => {
                self.activation(node, ins, ActivationKind::Relu)
            }
            Op::Clip { min, max } => {
                let x = one_any(node, ins)?;
                self.same_layout(Clip::new(name, *min, *max), x)
            }
            Op::Sigmoid => {
                let x = one_any(node, ins)?;
                self.same_layout(Sigmoid::new(name), x)
            }
            Op::Pad { pads, value } => {
                let x = one_any(node, ins)?;
                let mut engine = vec![(0, 0); pads.len()];
                for (a, &p) in pads.iter().enumerate() {
                    if let Some(slot) = engine.get_mut(x.layout.engine_axis(a)) {
                        *slot = p;
                    }
                }
                self.same_layout(Pad::new(name, engine, *value), x)
            }
            Op::Slice { axes } => {
                let x = one_any(node, ins)?;
                let engine = axes
                    .iter()
                    .map(|s| (x.layout.engine_axis(s.axis), s.start, s.len, s.step))
                    .collect();
                self.same_layout(SliceLayer::new(name, engine), x)
            }
            Op::Concat { axis } => {
                let first = ins.first().ok_or_else(|| unsupported(node, "no inputs"))?;
                if ins.iter().any(|v| v.layout != first.layout) {
                    return Err(unsupported(node, "inputs of different ranks"));
                }
                let ids: Vec<usize> = ins.iter().map(|v| v.id).collect();
                let layer = Concat::new(name, first.layout.engine_axis(*axis));
                Ok(Val {
                    id: self.net.push(layer, &ids)?,
                    layout: first.layout,
                })
            }
            Op::Binary(b) => self.binary(node, ins, b),
            Op::MaxPool(p) => {
                let x = one(Layout::Image)?;
                let layer = self.pool(node, PoolKind::Max, p, false)?;
                Ok(image(self.net.push(layer, &[x.id])?))
            }
            Op::AveragePool(a) => {
                let x = one(Layout::Image)?;
                let layer = self.pool(node, PoolKind::Avg, &a.pool, a.count_include_pad)?;
                Ok(image(self.net.push(layer, &[x.id])?))
            }
            Op::GlobalAveragePool => {
                let x = one(Layout::Image)?;
                Ok(image(self.net.push(GlobalAvgPool::new(name), &[x.id])?))
            }
            Op::ReduceMean { axes, keepdims } if axes.as_slice() == [2, 3] => {
                let x = one(Layout::Image)?;
                let id = self.net.push(GlobalAvgPool::new(name), &[x.id])?;
                if *keepdims {
                    return Ok(image(id));
                }
                let flat_name = format!("{name}/flatten");
                Ok(flat(self.net.push(Flatten::new(&flat_name), &[id])?))
            }
            Op::Flatten { axis: 1 } | Op::Reshape { .. } => self.reshape(node, ins),
            Op::Linear(l) => {
                let x = one(Layout::AsIs)?;
                let layer = self.linear(node, l, quant)?;
                Ok(flat(self.net.push(layer, &[x.id])?))
            }
            Op::MatMul => match ins {
                [a, b] if a.layout == Layout::AsIs && b.layout == Layout::AsIs => Ok(flat(
                    self.net.push(MatMul::new(name, quant), &[a.id, b.id])?,
                )),
                _ => Err(unsupported(
                    node,
                    "an act × act MatMul takes two non-image tensors",
                )),
            },
            Op::Transpose { perm } => {
                let x = one(Layout::AsIs)?;
                Ok(flat(
                    self.net
                        .push(Transpose::new(name, perm.clone())?, &[x.id])?,
                ))
            }
            Op::Embedding(e) => {
                let x = one(Layout::AsIs)?;
                let table = match self.init {
                    Init::FromModel => owned(&e.table),
                    Init::Seeded(_) => uniform(self.rng, e.table.shape(), EMBED_INIT),
                };
                Ok(flat(self.net.push(Embedding::new(name, table)?, &[x.id])?))
            }
            Op::LayerNorm(l) => {
                let x = one(Layout::AsIs)?;
                let (gamma, beta) = match self.init {
                    Init::FromModel => (owned(&l.scale), owned(&l.bias)),
                    Init::Seeded(_) => (
                        Tensor::ones(l.scale.raw_dim()),
                        Tensor::zeros(l.bias.raw_dim()),
                    ),
                };
                let layer = LayerNorm::new(name, gamma, beta, l.epsilon)?;
                Ok(flat(self.net.push(layer, &[x.id])?))
            }
            Op::Softmax { axis, log: false } => {
                let x = one(Layout::AsIs)?;
                if axis + 1 != self.shape(node.inputs[0]).len() {
                    return Err(unsupported(
                        node,
                        "only a softmax over the last axis trains",
                    ));
                }
                Ok(flat(self.net.push(Softmax::new(name), &[x.id])?))
            }
            Op::Softmax { log: true, .. } => Err(unsupported(
                node,
                "a LogSoftmax output: export the logits (the trainer's loss applies the \
                 log-softmax itself)",
            )),
            Op::Gelu { tanh_approx } => {
                let x = one_any(node, ins)?;
                self.same_layout(Gelu::new(name, *tanh_approx), x)
            }
            Op::Tanh => {
                let x = one_any(node, ins)?;
                self.same_layout(Tanh::new(name), x)
            }
            Op::Dropout { ratio } => {
                let x = one_any(node, ins)?;
                let seed = mix64(quant.seed ^ mix64(self.net.len() as u64));
                self.same_layout(Dropout::new(name, *ratio, seed)?, x)
            }
            Op::CausalMask => {
                let x = one(Layout::AsIs)?;
                Ok(flat(self.net.push(CausalMask::new(name), &[x.id])?))
            }
            Op::ClassToken { token } => {
                let x = one(Layout::AsIs)?;
                let token = match self.init {
                    Init::FromModel => owned(token),
                    Init::Seeded(_) => uniform(self.rng, token.shape(), POSITION_INIT),
                };
                Ok(flat(self.net.push(ClassToken::new(name, token)?, &[x.id])?))
            }
            Op::PositionEmbedding { table, axis } => {
                let x = one(Layout::AsIs)?;
                let table = match self.init {
                    Init::FromModel => owned(table),
                    Init::Seeded(_) => uniform(self.rng, table.shape(), POSITION_INIT),
                };
                let layer = PositionEmbedding::new(name, table, *axis)?;
                Ok(flat(self.net.push(layer, &[x.id])?))
            }
            Op::Recurrent(r) => {
                let x = one(Layout::AsIs)?;
                let id = match r.kind {
                    ir::CellKind::Lstm => {
                        let [w, rr, bw, br] = self.recurrent_weights(r);
                        self.net
                            .push(Lstm::new(name, w, rr, bw, br, quant)?, &[x.id])?
                    }
                    ir::CellKind::Gru {
                        linear_before_reset,
                    } => {
                        let [w, rr, bw, br] = self.recurrent_weights(r);
                        let layer = Gru::new(name, w, rr, bw, br, linear_before_reset, quant)?;
                        self.net.push(layer, &[x.id])?
                    }
                    ir::CellKind::Rnn => {
                        return Err(unsupported(
                            node,
                            "no engine layer for a plain RNN cell (LSTM and GRU train)",
                        ))
                    }
                };
                Ok(flat(id))
            }
            Op::Unary(_)
            | Op::PRelu { .. }
            | Op::GroupNorm(_)
            | Op::ReduceL2 { .. }
            | Op::Resize { .. } => Err(unsupported(node, "not trainable yet (no engine layer)")),
            // Every other op is listed, so a new IR op fails to compile here until it is mapped.
            Op::ReduceMean { .. } => Err(unsupported(
                node,
                "only a mean over the spatial axes [2, 3] has an engine layer",
            )),
            Op::Flatten { .. } => Err(unsupported(
                node,
                "only a flatten at axis 1 has an engine layer",
            )),
        }
    }

    /// A recurrent layer's `W`, `R`, `Wb`, `Rb`: the model's, or PyTorch's `nn.LSTM` / `nn.GRU`
    /// initialisation U(±1/√H) for every one of them.
    fn recurrent_weights(&mut self, r: &ir::Recurrent) -> [Tensor; 4] {
        let parts = [&r.w, &r.r, &r.bias_w, &r.bias_r];
        match self.init {
            Init::FromModel => parts.map(owned),
            Init::Seeded(_) => {
                let a = (r.hidden.max(1) as f32).sqrt().recip();
                parts.map(|t| uniform(self.rng, t.shape(), a))
            }
        }
    }

    /// Appends a one-input layer whose output has its input's layout.
    fn same_layout(&mut self, layer: impl Layer + 'static, x: Val) -> Result<Val> {
        Ok(Val {
            id: self.net.push(layer, &[x.id])?,
            layout: x.layout,
        })
    }

    /// Elementwise arithmetic: a residual add of equal shapes is an [`Add`]; anything else
    /// (broadcasting, other ops, a constant operand) an [`Elementwise`].
    fn binary(&mut self, node: &Node, ins: &[Val], b: &ir::Binary) -> Result<Val> {
        let kind = match b.kind {
            ir::BinaryKind::Add => ElementwiseKind::Add,
            ir::BinaryKind::Sub => ElementwiseKind::Sub,
            ir::BinaryKind::Mul => ElementwiseKind::Mul,
            ir::BinaryKind::Div => ElementwiseKind::Div,
        };
        let name = node.name.as_str();
        match (ins, &b.constant) {
            ([x], Some(c)) => {
                let rank = self.shape(node.inputs[0]).len();
                let value = engine_constant(node, &c.value, x.layout, rank)?;
                let constant = Constant {
                    value,
                    on_left: c.on_left,
                };
                self.same_layout(Elementwise::with_constant(name, kind, constant), *x)
            }
            ([a, c], None) => {
                if a.layout != c.layout {
                    return Err(unsupported(
                        node,
                        format!(
                            "operands of ranks {} and {}",
                            self.shape(node.inputs[0]).len(),
                            self.shape(node.inputs[1]).len()
                        ),
                    ));
                }
                let same = self.shape(node.inputs[0]) == self.shape(node.inputs[1]);
                let id = if same && kind == ElementwiseKind::Add {
                    self.net.push(Add::new(name), &[a.id, c.id])?
                } else {
                    self.net.push(Elementwise::new(name, kind), &[a.id, c.id])?
                };
                Ok(Val {
                    id,
                    layout: a.layout,
                })
            }
            _ => Err(unsupported(node, format!("{} tensor inputs", ins.len()))),
        }
    }

    fn activation(&mut self, node: &Node, ins: &[Val], kind: ActivationKind) -> Result<Val> {
        let [x] = ins else {
            return Err(unsupported(node, "expected one input"));
        };
        Ok(Val {
            id: self.net.push(Activation::new(&node.name, kind), &[x.id])?,
            layout: x.layout,
        })
    }

    /// Flatten (axis 1) or a reshape (NCHW element order, as ONNX). Between features `[N, F]`
    /// and images `[N, C, H, W]` that keep the batch: an image to features is a [`Flatten`],
    /// features to an image an [`Unflatten`] (the SE gate's `view(b, c, 1, 1)`), an image to
    /// another image both, features to features no layer. Any other reshape (heads of attention,
    /// ViT patches) is a [`Reshape`] of a tensor held as is, an image flattened first.
    fn reshape(&mut self, node: &Node, ins: &[Val]) -> Result<Val> {
        let [x] = ins else {
            return Err(unsupported(node, "expected one input"));
        };
        let in_shape = self.shape(node.inputs[0]).to_vec();
        let out_shape = self.shape(node.output).to_vec();
        let n = in_shape.first().copied().unwrap_or(0);
        let count = |s: &[usize]| s.iter().product::<usize>();
        if count(&in_shape) != count(&out_shape) {
            return Err(unsupported(
                node,
                format!("reshape {in_shape:?} → {out_shape:?} changes the element count"),
            ));
        }
        let features = x.layout == Layout::Image || in_shape.len() == 2;
        let image = match out_shape[..] {
            [m, _] if m == n && features => None,
            [m, c, h, w] if m == n && features => Some([c, h, w]),
            _ => {
                let x = match x.layout {
                    Layout::AsIs => x.id,
                    Layout::Image => {
                        let name = format!("{}/flatten", node.name);
                        self.net.push(Flatten::new(&name), &[x.id])?
                    }
                };
                let layer = Reshape::new(&node.name, out_shape);
                return Ok(Val {
                    id: self.net.push(layer, &[x])?,
                    layout: Layout::AsIs,
                });
            }
        };
        let flat = match x.layout {
            Layout::AsIs => x.id,
            Layout::Image => {
                let name = match image {
                    None => node.name.clone(),
                    Some(_) => format!("{}/flatten", node.name),
                };
                self.net.push(Flatten::new(&name), &[x.id])?
            }
        };
        Ok(match image {
            None => Val {
                id: flat,
                layout: Layout::AsIs,
            },
            Some(chw) => Val {
                id: self.net.push(Unflatten::new(&node.name, chw), &[flat])?,
                layout: Layout::Image,
            },
        })
    }

    fn conv(&mut self, node: &Node, c: &ir::Conv, quant: LayerQuant) -> Result<Conv2d> {
        let in_shape = self.shape(node.inputs[0]);
        let in_channels = in_shape.get(1).copied().unwrap_or(0);
        let kernel = c.kernel();
        let spec = Conv2dSpec {
            in_channels,
            out_channels: c.out_channels(),
            kernel,
            stride: c.strides,
            pads: c.pads,
            dilation: c.dilations,
            groups: c.groups,
        };
        spec.validate(&node.name)?;
        let (weight, bias) = match self.init {
            Init::FromModel => (
                Conv2d::weight_from_oihw(&c.weight)
                    .map_err(|e| SimError::shape(&node.name, e.to_string()))?,
                c.bias.as_ref().map(owned),
            ),
            Init::Seeded(_) => {
                let ipg = in_channels / c.groups.max(1);
                let w = conv_weight(self.rng, spec.out_channels, kernel, ipg);
                // PyTorch's default conv bias: U(±1/√fan_in).
                let fan_in = (ipg * kernel[0] * kernel[1]).max(1) as f32;
                let b = c
                    .bias
                    .as_ref()
                    .map(|b| uniform(self.rng, b.shape(), fan_in.sqrt().recip()));
                (w, b)
            }
        };
        Conv2d::new(&node.name, spec, weight, bias, quant)
    }

    fn linear(&mut self, node: &Node, l: &ir::Linear, quant: LayerQuant) -> Result<Linear> {
        let (weight, bias) = match self.init {
            Init::FromModel => (owned(&l.weight), l.bias.as_ref().map(owned)),
            Init::Seeded(_) => {
                let (w, b) = linear_weight_bias(self.rng, l.out_features(), l.in_features());
                (w, l.bias.as_ref().map(|_| b))
            }
        };
        Linear::new(&node.name, weight, bias, quant)
    }

    fn batch_norm(&mut self, name: &str, b: &ir::BatchNorm) -> Result<BatchNorm> {
        let c = b.scale.len();
        let mut bn = BatchNorm::new(name, c);
        // ONNX weighs the old running value by `momentum`; the engine weighs the new batch value.
        bn.momentum = 1.0 - b.momentum;
        bn.eps = b.epsilon;
        if self.init == Init::FromModel {
            let vec1 = |t: &ndarray::ArrayD<f32>, what: &str| -> Result<Vec<f32>> {
                if t.len() != c {
                    return Err(SimError::shape(
                        name,
                        format!("{what} has {} entries, expected {c}", t.len()),
                    ));
                }
                Ok(t.iter().copied().collect())
            };
            bn.gamma.value = Tensor::from_shape_vec(vec![c], vec1(&b.scale, "scale")?)
                .map_err(|e| SimError::shape(name, e.to_string()))?;
            bn.beta.value = Tensor::from_shape_vec(vec![c], vec1(&b.bias, "bias")?)
                .map_err(|e| SimError::shape(name, e.to_string()))?;
            bn.running_mean = vec1(&b.mean, "mean")?;
            bn.running_var = vec1(&b.var, "var")?;
        }
        Ok(bn)
    }

    fn pool(
        &mut self,
        node: &Node,
        kind: PoolKind,
        p: &ir::Pool,
        count_include_pad: bool,
    ) -> Result<Pool2d> {
        if p.dilations != [1, 1] {
            return Err(unsupported(node, format!("dilation {:?}", p.dilations)));
        }
        let spec = PoolSpec {
            kernel: p.kernel,
            stride: p.strides,
            pads: p.pads,
            count_include_pad,
        };
        // The engine rounds the output size down; ceil_mode is fine when it changes nothing.
        let (ins, outs) = (self.shape(node.inputs[0]), self.shape(node.output));
        let floor = |i: usize| {
            let padded = ins[i + 2] + p.pads[i] + p.pads[i + 2];
            padded
                .checked_sub(p.kernel[i])
                .map(|d| d / p.strides[i] + 1)
        };
        if ins.len() != 4 || floor(0) != outs.get(2).copied() || floor(1) != outs.get(3).copied() {
            return Err(unsupported(
                node,
                format!("ceil_mode output {outs:?} differs from the engine's floor rounding"),
            ));
        }
        Pool2d::new(&node.name, kind, spec)
    }
}
