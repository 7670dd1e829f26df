//! The per-layer summary every other crate works from: geometry, MACs and role of each
//! conv / linear layer of a model, plus the model-wide totals the paper cost rule needs.
//!
//! This is the contract between `models` and `traces`, `accel` and `sim`: it is produced from the
//! imported graph by shape inference and is independent of how the graph was obtained.

use serde::{Deserialize, Serialize};

/// What kind of GEMM-backed layer this is.
///
/// Every kind is described as a (grouped) convolution per sample so that one cost model serves
/// all: `groups` independent products, each reducing `in_shape[0] / groups · kh · kw` inputs into
/// `out_shape[0] / groups` outputs at each of `out_shape[1] · out_shape[2]` "pixels".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// 2-D convolution (any groups; depthwise when `groups == in_channels > 1`).
    Conv,
    /// Fully connected layer (ONNX Gemm, or MatMul with a constant weight) on the last axis; the
    /// other axes of a sample are its rows (`[in, rows, 1]` → `[out, rows, 1]`: the tokens of a
    /// Transformer, 1 for a classifier).
    Linear,
    /// Product of two activations `A [.., M, K] × B [.., K, N]` (attention `QKᵀ` and `AV`): the
    /// per-sample batch axes (heads) are `groups`; `in_shape = [groups·K, M, 1]`,
    /// `out_shape = [groups·N, M, 1]`. `A` plays the streamed role, `B` the stationary one.
    Matmul,
    /// A recurrent layer (LSTM / GRU / RNN) unrolled over its `T` steps: at each step
    /// `[x_t, h_{t−1}]` (`I + H`) times `[W R]ᵀ` gives the `gates·H` pre-activations;
    /// `in_shape = [I + H, T, 1]`, `out_shape = [gates·H, T, 1]`.
    Recurrent,
}

/// Which operands a layer's forward GEMM multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GemmOperands {
    /// Weights × activations (conv, linear, recurrent).
    WeightActivation,
    /// Activations × activations (attention).
    ActivationActivation,
}

impl LayerKind {
    /// The operands of the kind's forward GEMM.
    pub fn operands(self) -> GemmOperands {
        match self {
            LayerKind::Matmul => GemmOperands::ActivationActivation,
            _ => GemmOperands::WeightActivation,
        }
    }
    /// Name in tables (`Conv`, `Linear`, `MatMul`, `Recurrent`).
    pub fn name(self) -> &'static str {
        match self {
            LayerKind::Conv => "Conv",
            LayerKind::Linear => "Linear",
            LayerKind::Matmul => "MatMul",
            LayerKind::Recurrent => "Recurrent",
        }
    }
}

/// Where a layer sits in the network; decides the default quantization policy (spec §1.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerRole {
    /// The first conv/linear layer that reads the network input.
    First,
    /// An ordinary body layer.
    Body,
    /// A projection (1×1) conv on a residual shortcut path.
    Shortcut,
    /// A depthwise conv (`groups == in_channels == out_channels`, `groups > 1`).
    Depthwise,
    /// The last conv/linear layer (the classifier).
    Last,
}

/// One GEMM-backed layer (conv, linear, act × act matmul, recurrent), per sample (batch removed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerInfo {
    /// ONNX node name (unique within the model).
    pub name: String,
    pub kind: LayerKind,
    pub role: LayerRole,
    /// Input `[C, H, W]`; a linear layer with `n` inputs over `rows` rows is `[n, rows, 1]`
    /// (other kinds: see [`LayerKind`]).
    pub in_shape: [usize; 3],
    /// Output `[C, H, W]`; a linear layer with `m` outputs is `[m, rows, 1]`.
    pub out_shape: [usize; 3],
    /// Kernel `[kh, kw]` (`[1, 1]` for linear).
    pub kernel: [usize; 2],
    /// Stride `[sh, sw]`.
    pub stride: [usize; 2],
    /// Padding `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// Dilation `[dh, dw]`.
    pub dilation: [usize; 2],
    pub groups: usize,
    /// Trainable parameters (weights + bias).
    pub params: u64,
    /// Forward multiply-accumulates for one sample.
    pub macs: u64,
    /// A recurrent layer's hidden size `H` (its cell has `out_shape[0] / H` gates and
    /// `in_shape[0] − H` inputs); `None` for the other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<usize>,
}

impl LayerInfo {
    pub fn in_channels(&self) -> usize {
        self.in_shape[0]
    }
    pub fn out_channels(&self) -> usize {
        self.out_shape[0]
    }
    /// Output pixels per sample (`H_out · W_out`; the rows of a linear layer, `M` of a matmul,
    /// `T` of a recurrent layer).
    pub fn out_pixels(&self) -> usize {
        self.out_shape[1] * self.out_shape[2]
    }
    /// Length of the forward reduction axis: `C_in/groups · kh · kw`.
    pub fn reduction_len(&self) -> usize {
        self.in_shape[0] / self.groups.max(1) * self.kernel[0] * self.kernel[1]
    }
    /// The forward GEMM as `groups` products of `[M, K] × [K, N]` for `batch` samples:
    /// `(groups, M, N, K)` with `M = batch · pixels`, `N = out_channels / groups`,
    /// `K` = [`LayerInfo::reduction_len`] (a matmul's products are per sample: `groups · batch`
    /// products of `M = pixels` rows).
    pub fn gemm_dims(&self, batch: u64) -> (u64, u64, u64, u64) {
        let g = self.groups.max(1) as u64;
        let n = (self.out_channels() / self.groups.max(1)) as u64;
        let k = self.reduction_len() as u64;
        let pixels = self.out_pixels() as u64;
        match self.kind {
            LayerKind::Matmul => (g.saturating_mul(batch), pixels, n, k),
            _ => (g, batch.saturating_mul(pixels), n, k),
        }
    }
}

/// The model-wide view: every conv/linear layer in topological order and the totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub name: String,
    /// Input shape including the batch dimension the summary was made for.
    pub input: Vec<usize>,
    pub layers: Vec<LayerInfo>,
    /// BatchNormalization output elements per sample (0 when BN was folded into conv).
    pub bn_elements: u64,
    /// Output elements per sample of the adds that join two computed tensors (residual adds).
    #[serde(default)]
    pub residual_elements: u64,
    /// All trainable parameters of the model (conv/linear weights and biases, BN scale and shift).
    pub params: u64,
}

impl ModelSummary {
    /// Conv + linear MACs per sample.
    pub fn total_macs(&self) -> u64 {
        self.layers.iter().map(|l| l.macs).sum()
    }
    /// The papers' "thop-style" ops per image: MACs + 2 · BN output elements (methods.md §2.3).
    pub fn ops_per_image(&self) -> u64 {
        self.total_macs() + 2 * self.bn_elements
    }
    /// Index of the layer with this name.
    pub fn layer_index(&self, name: &str) -> Option<usize> {
        self.layers.iter().position(|l| l.name == name)
    }
}
