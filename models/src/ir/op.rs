//! The operations of the layer IR and their parameters.
//!
//! Every op is fully resolved at import: attributes are explicit numbers (no `auto_pad`, no
//! negative axes, no `-1` reshape entries), and every parameter tensor is owned by the node that
//! uses it, so two layers never share storage even when the ONNX file de-duplicated equal
//! initializers. Tensors are NCHW; the batch dimension is axis 0 throughout.

use ndarray::ArrayD;

/// One operation of the IR. Inputs are runtime tensors; constants live inside the op.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// 2-D convolution over an NCHW input.
    Conv(Conv),
    /// Batch normalisation over axis 1.
    BatchNorm(BatchNorm),
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, min), max)` (ReLU6 is `Clip { min: 0, max: 6 }`).
    Clip {
        /// Lower bound (`-inf` when absent).
        min: f32,
        /// Upper bound (`+inf` when absent).
        max: f32,
    },
    /// Logistic sigmoid.
    Sigmoid,
    /// Elementwise binary arithmetic with numpy broadcasting.
    Binary(Binary),
    /// Max pooling.
    MaxPool(Pool),
    /// Average pooling.
    AveragePool(AvgPool),
    /// Mean over H and W, keeping them as size 1: `[N, C, H, W] → [N, C, 1, 1]`.
    GlobalAveragePool,
    /// Mean over `axes`.
    ReduceMean {
        /// Axes reduced, ascending, non-negative.
        axes: Vec<usize>,
        /// Whether reduced axes stay as size 1.
        keepdims: bool,
    },
    /// `[d0 … dn] → [d0·…·d(axis-1), d(axis)·…·dn]`.
    Flatten {
        /// First axis of the second output dimension.
        axis: usize,
    },
    /// Reinterpret the element order as `shape` (fully resolved, includes the batch).
    Reshape {
        /// The output shape.
        shape: Vec<usize>,
    },
    /// Fully connected layer on the last axis: `y = x · Wᵀ + b`.
    Linear(Linear),
    /// General matrix product of two runtime tensors (numpy `matmul` semantics, rank ≥ 2).
    MatMul,
    /// Concatenation of all inputs along `axis`.
    Concat {
        /// The concatenation axis.
        axis: usize,
    },
    /// Strided selection along some axes.
    Slice {
        /// One entry per sliced axis; other axes are kept whole.
        axes: Vec<SliceAxis>,
    },
    /// Constant padding.
    Pad {
        /// `(before, after)` padding per axis, one entry per input axis.
        pads: Vec<(usize, usize)>,
        /// The fill value.
        value: f32,
    },
    /// Axis permutation: output axis `i` is input axis `perm[i]`.
    Transpose {
        /// The permutation.
        perm: Vec<usize>,
    },
}

/// Convolution parameters. Weight `[C_out, C_in/groups, kh, kw]`, bias `[C_out]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv {
    /// The kernel, `[C_out, C_in/groups, kh, kw]`.
    pub weight: ArrayD<f32>,
    /// Optional bias, `[C_out]`.
    pub bias: Option<ArrayD<f32>>,
    /// `[sh, sw]`.
    pub strides: [usize; 2],
    /// `[top, left, bottom, right]`, explicit (auto_pad already resolved).
    pub pads: [usize; 4],
    /// `[dh, dw]`.
    pub dilations: [usize; 2],
    /// Channel groups (`C_in` for depthwise).
    pub groups: usize,
}

impl Conv {
    /// Output channels.
    pub fn out_channels(&self) -> usize {
        self.weight.shape().first().copied().unwrap_or(0)
    }
    /// Kernel `[kh, kw]`.
    pub fn kernel(&self) -> [usize; 2] {
        match self.weight.shape() {
            [_, _, kh, kw] => [*kh, *kw],
            _ => [0, 0],
        }
    }
}

/// Batch normalisation parameters, all `[C]`.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNorm {
    /// γ.
    pub scale: ArrayD<f32>,
    /// β.
    pub bias: ArrayD<f32>,
    /// Running mean.
    pub mean: ArrayD<f32>,
    /// Running variance.
    pub var: ArrayD<f32>,
    /// ε added to the variance.
    pub epsilon: f32,
    /// ONNX momentum: `running = running · momentum + batch · (1 − momentum)` (PyTorch's 0.1 is 0.9 here).
    pub momentum: f32,
    /// True when the file was exported in training mode (`training_mode = 1`): batch statistics
    /// are used in the forward pass.
    pub training_mode: bool,
}

/// The four arithmetic ops of [`Binary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryKind {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
}

impl BinaryKind {
    /// The ONNX op type name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryKind::Add => "Add",
            BinaryKind::Sub => "Sub",
            BinaryKind::Mul => "Mul",
            BinaryKind::Div => "Div",
        }
    }
}

/// Elementwise `a ∘ b`. With `constant: None` the node has two tensor inputs `a, b`; otherwise
/// one tensor input and the constant stands on the side it had in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Binary {
    /// Which operation.
    pub kind: BinaryKind,
    /// A constant operand, if any.
    pub constant: Option<ConstOperand>,
}

/// A constant operand of a [`Binary`] op.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstOperand {
    /// The value (broadcast against the tensor input).
    pub value: ArrayD<f32>,
    /// True when the constant is the left operand (`c - x`, `c / x`).
    pub on_left: bool,
}

/// Window geometry shared by the pooling ops (2-D, NCHW).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    /// `[kh, kw]`.
    pub kernel: [usize; 2],
    /// `[sh, sw]`.
    pub strides: [usize; 2],
    /// `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// `[dh, dw]` (always 1 for average pooling).
    pub dilations: [usize; 2],
    /// Output size rounds up (a window may start in the right/bottom padding region but not
    /// wholly beyond it).
    pub ceil_mode: bool,
}

/// Average pooling: window geometry plus the divisor rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AvgPool {
    /// The window.
    pub pool: Pool,
    /// Padded positions count in the divisor.
    pub count_include_pad: bool,
}

/// Fully connected layer on the last axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// `[out, in]` (Gemm's alpha and transB already applied).
    pub weight: ArrayD<f32>,
    /// `[out]` (Gemm's beta already applied).
    pub bias: Option<ArrayD<f32>>,
}

impl Linear {
    /// Output features.
    pub fn out_features(&self) -> usize {
        self.weight.shape().first().copied().unwrap_or(0)
    }
    /// Input features.
    pub fn in_features(&self) -> usize {
        self.weight.shape().get(1).copied().unwrap_or(0)
    }
}

/// Selection along one axis: output element `k` is input element `start + k · step`, for
/// `k < len`. `step` is never 0; a negative step walks backwards from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceAxis {
    /// The axis.
    pub axis: usize,
    /// First selected index.
    pub start: usize,
    /// Number of selected elements.
    pub len: usize,
    /// Stride between selected elements.
    pub step: i64,
}

impl Op {
    /// A short name for tables (`Conv`, `BatchNorm`, `Add`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Conv(_) => "Conv",
            Op::BatchNorm(_) => "BatchNorm",
            Op::Relu => "Relu",
            Op::Clip { .. } => "Clip",
            Op::Sigmoid => "Sigmoid",
            Op::Binary(b) => b.kind.name(),
            Op::MaxPool(_) => "MaxPool",
            Op::AveragePool(_) => "AveragePool",
            Op::GlobalAveragePool => "GlobalAveragePool",
            Op::ReduceMean { .. } => "ReduceMean",
            Op::Flatten { .. } => "Flatten",
            Op::Reshape { .. } => "Reshape",
            Op::Linear(_) => "Linear",
            Op::MatMul => "MatMul",
            Op::Concat { .. } => "Concat",
            Op::Slice { .. } => "Slice",
            Op::Pad { .. } => "Pad",
            Op::Transpose { .. } => "Transpose",
        }
    }

    /// Trainable parameters: conv/linear weights and biases, BN scale and shift.
    pub fn params(&self) -> u64 {
        let opt = |t: &Option<ArrayD<f32>>| t.as_ref().map_or(0, |t| t.len() as u64);
        match self {
            Op::Conv(c) => c.weight.len() as u64 + opt(&c.bias),
            Op::Linear(l) => l.weight.len() as u64 + opt(&l.bias),
            Op::BatchNorm(b) => (b.scale.len() + b.bias.len()) as u64,
            _ => 0,
        }
    }
}
