//! The per-layer summary every other crate works from: geometry, MACs and role of each
//! conv / linear layer of a model, plus the model-wide totals the paper cost rule needs.
//!
//! This is the contract between `models` and `traces`, `accel` and `sim`: it is produced from the
//! imported graph by shape inference and is independent of how the graph was obtained.

use serde::{Deserialize, Serialize};

/// What kind of GEMM-backed layer this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// 2-D convolution (any groups; depthwise when `groups == in_channels > 1`).
    Conv,
    /// Fully connected layer (ONNX Gemm, or MatMul with a constant weight).
    Linear,
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

/// One conv or linear layer, per sample (batch dimension removed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerInfo {
    /// ONNX node name (unique within the model).
    pub name: String,
    pub kind: LayerKind,
    pub role: LayerRole,
    /// Input `[C, H, W]`; a linear layer with `n` inputs is `[n, 1, 1]`.
    pub in_shape: [usize; 3],
    /// Output `[C, H, W]`; a linear layer with `m` outputs is `[m, 1, 1]`.
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
}

impl LayerInfo {
    pub fn in_channels(&self) -> usize {
        self.in_shape[0]
    }
    pub fn out_channels(&self) -> usize {
        self.out_shape[0]
    }
    /// Output pixels per sample (`H_out · W_out`; 1 for linear layers).
    pub fn out_pixels(&self) -> usize {
        self.out_shape[1] * self.out_shape[2]
    }
    /// Length of the forward reduction axis: `C_in/groups · kh · kw`.
    pub fn reduction_len(&self) -> usize {
        self.in_shape[0] / self.groups.max(1) * self.kernel[0] * self.kernel[1]
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
