//! The operations of the layer IR and their parameters.
//!
//! Every op is fully resolved at import: attributes are explicit numbers (no `auto_pad`, no
//! negative axes, no `-1` reshape entries), and every parameter tensor is owned by the node that
//! uses it, so two layers never share storage even when the ONNX file de-duplicated equal
//! initializers.
//!
//! **Layouts.** Image tensors are NCHW and the batch is axis 0. Sequence models keep the layout
//! their file declares, and two layouts occur:
//! - *batch-first* `[B, T, …]` (Transformer LMs and ViT token tensors `[B, tokens, dim]`, attention
//!   scores `[B, heads, T, T]`): the batch is axis 0 as for images;
//! - *sequence-first* `[T, B, …]`: the input and output of a [`Recurrent`] layer (ONNX `LSTM` /
//!   `GRU` / `RNN`), and the token-id input of a PyTorch `word_language_model`-style export, put the
//!   graph batch on axis 1.
//!
//! So "the batch is axis 0" holds for images and batch-first tensors only; nothing in the IR
//! relies on it. Per-sample counts (MACs, elements) divide a tensor's element count by
//! [`Graph::batch`](super::Graph::batch) instead of dropping axis 0, and each op documents where
//! its inputs keep the batch.
//!
//! **Token ids.** A language model's graph input holds token ids as `f32` (the IR has one element
//! type): each must be an exact integer below the embedding's vocabulary, which is at most
//! [`MAX_VOCAB`] = 2^24 (every integer up to 2^24 is exact in f32); ids are checked where they are
//! read ([`Embedding::token_id`]). The zoo's LMs declare their input
//! batch-first, `[B, T]`; an imported file keeps its own declaration (`[B, T]` or `[T, B]`) and
//! [`Graph::seq_len`](super::Graph::seq_len) records the bound `T`.
//!
//! **Ops not in the enum.** ONNX `Split` becomes one [`Op::Slice`] per output (IR nodes have one
//! output each); ONNX `Dropout` is imported as the identity it is in eval (the CNN trainer
//! predates [`Op::Dropout`], which graphs built for training use); shape arithmetic
//! (`Shape`, `Gather` of a shape, `Unsqueeze`, `Concat` of shapes, `Expand`, `Mod`, `Equal`,
//! `Trilu`, …) is folded at import
//! into the resolved shapes of [`Op::Reshape`] & co.; an additive causal mask (a constant, or
//! `Where` / `Expand` of one) becomes [`Op::CausalMask`]; the decomposed `LayerNormalization`
//! (ReduceMean/Sub/Pow/Sqrt/Add/Div, then Mul/Add by the affine constants) becomes
//! [`Op::LayerNorm`] and the `Erf` form of GELU `0.5·x·(1 + erf(x/√2))` becomes [`Op::Gelu`].

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
    /// Table lookup: input of any shape `S` holding token ids, output `S ++ [dim]`, row
    /// `table[id]` per id (ids as in the module header: exact integers below `vocab`). No MACs.
    Embedding(Embedding),
    /// Layer normalisation over the last axis: `(x − mean) / sqrt(var + ε) · scale + bias`, the
    /// biased variance (÷ D) as ONNX `LayerNormalization` and `torch.nn.LayerNorm`.
    LayerNorm(LayerNorm),
    /// `exp(x_i) / Σ_j exp(x_j)` along `axis` (a `-inf` entry, from [`Op::CausalMask`], gives 0);
    /// with `log`, its logarithm (ONNX `LogSoftmax`, a language model's last op).
    Softmax {
        /// The normalised axis (non-negative).
        axis: usize,
        /// `log(softmax(x))` instead of `softmax(x)`.
        log: bool,
    },
    /// GELU: `0.5·x·(1 + erf(x/√2))`, or with `tanh_approx` PyTorch's
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Gelu {
        /// The tanh approximation (`approximate="tanh"`) instead of the exact erf form.
        tanh_approx: bool,
    },
    /// Hyperbolic tangent.
    Tanh,
    /// Inverted dropout: zeroes each element with probability `ratio` and scales the rest by
    /// `1 / (1 − ratio)` in training; the identity in eval (and in every forward pass cptsim
    /// compares with onnxruntime).
    Dropout {
        /// Drop probability, `0 ≤ ratio < 1`.
        ratio: f32,
    },
    /// Causal attention mask on scores `[…, Tq, Tk]` (`Tq ≤ Tk`): entry `(i, j)` keeps its value
    /// when `j ≤ i + (Tk − Tq)` and becomes `-inf` otherwise, so a following softmax gives the
    /// later keys weight exactly 0. The importer folds PyTorch's additive masks into it (a
    /// constant `[T, T]` with 0 on and below the diagonal and `-inf` (or ≤ −1e4) above it, also
    /// behind `Where` / `Expand`), so the mask follows the bound sequence length.
    CausalMask,
    /// Prepends a learned token on axis 1: `[B, N, D] → [B, N + 1, D]` (the ViT class token).
    ClassToken {
        /// The token, `[D]`.
        token: ArrayD<f32>,
    },
    /// Adds a learned embedding per position: `x[…, t, …, :] += table[t]` for position `t` along
    /// `axis`; the last axis is the model width `D`. Table `[T_max, D]`: a sequence of up to
    /// `T_max` positions uses the first rows, a longer one is a shape error (a fixed-length
    /// export cannot run longer sequences).
    PositionEmbedding {
        /// Learned rows, `[T_max, D]`.
        table: ArrayD<f32>,
        /// The position axis of the input (1 for `[B, T, D]`, 0 for `[T, B, D]`).
        axis: usize,
    },
    /// An elementwise function without parameters beyond scalars (see [`Unary`]).
    Unary(Unary),
    /// `max(x, 0) + slope · min(x, 0)` with a learned slope broadcast onto the input (ONNX
    /// `PRelu`; `nn.PReLU(C)` exports one slope per channel, `[C, 1, 1]`).
    PRelu {
        /// The slope, broadcast onto the input without enlarging it.
        slope: ArrayD<f32>,
    },
    /// Group normalisation over axis 1 of `[N, C, …]`: the channels fall into `groups` groups,
    /// each normalised over its channels and all further axes, then scaled and shifted per
    /// channel (ONNX `GroupNormalization`; `InstanceNormalization` is `groups = C`).
    GroupNorm(GroupNorm),
    /// `Σ x` over `axes` (ONNX `ReduceSum` of a run-time tensor).
    ReduceSum {
        /// Axes reduced, ascending, non-negative.
        axes: Vec<usize>,
        /// Whether reduced axes stay as size 1.
        keepdims: bool,
    },
    /// `sqrt(Σ x²)` over `axes` (ONNX `ReduceL2`, `F.normalize`'s norm).
    ReduceL2 {
        /// Axes reduced, ascending, non-negative.
        axes: Vec<usize>,
        /// Whether reduced axes stay as size 1.
        keepdims: bool,
    },
    /// Resampling of the axes after the first two to `shape` (ONNX `Resize`, `nn.Upsample`);
    /// nearest or linear interpolation, no MACs.
    Resize {
        /// The output shape (batch and channels unchanged).
        shape: Vec<usize>,
        /// The ONNX `mode`: `nearest`, `linear` or `cubic`.
        mode: String,
    },
    /// A single-layer, single-direction recurrent layer (ONNX `RNN` / `LSTM` / `GRU`,
    /// `direction="forward"`), sequence-first: input `[T, B, I]`, output the hidden state of every
    /// step, `[T, B, H]` (ONNX `Y` without its `num_directions` axis). Initial states are zero.
    Recurrent(Recurrent),
    /// Running sum along `axis` (ONNX `CumSum`): position ids counted from a padding mask.
    CumSum {
        /// The summed axis.
        axis: usize,
        /// Whether element `i` sums the elements before it only.
        exclusive: bool,
        /// Whether the sum runs from the end of the axis.
        reverse: bool,
    },
    /// `out[…, i, …] = data[…, idx[…, i, …], …]` along `axis` with run-time indices of the same
    /// rank as the constant `data` (ONNX `GatherElements`; BERT's token-type buffer gathered at
    /// the position ids). Axes other than `axis` where `data` has size 1 read that one slice
    /// for every index (the buffer, stored once for any batch); the others must be at least as
    /// long in `data` as in the indices. Output: the indices' shape.
    GatherElements {
        /// The constant gathered from.
        data: ArrayD<f32>,
        /// The gathered axis.
        axis: usize,
    },
    /// Constant positions read from a block of consecutive axes of a run-time tensor (ONNX
    /// `Gather` at constant indices that do not step evenly, `GatherND` with `batch_dims` 0:
    /// the dynamo exporter's adaptive average pool over a small map); see [`Gather`]. Data
    /// movement, no MACs.
    Gather(Gather),
    /// Element-wise choice at a condition known at import (ONNX `Where` on a run-time tensor:
    /// the dynamo exporter's adaptive average pool over overlapping windows, `masked_fill` at a
    /// constant mask); see [`Where`]. Data movement, no MACs.
    Where(Where),
}

/// `keep ? a : b` element by element, `keep`, `a` and `b` broadcast against each other as NumPy
/// (and ONNX `Where`) broadcast. `a` is the first tensor input; `b` is the constant `fill`, or
/// the second tensor input when `fill` is `None`. The gradient reaches each tensor input where
/// it was chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct Where {
    /// Where the first input is chosen.
    pub keep: ArrayD<bool>,
    /// The value chosen elsewhere when it is a constant.
    pub fill: Option<ArrayD<f32>>,
}

/// `out[pre…, g…, post…] = x[pre…, b…, post…]` where `b…` is the block position of grid cell
/// `g…`: the block's axes `axis..axis + block.len()` of the input are replaced by the grid's
/// axes. The axes before and after the block (the batch among them) are taken whole, whatever
/// their size at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gather {
    /// First axis of the block.
    pub axis: usize,
    /// The block's sizes, `x[axis..axis + block.len()]`.
    pub block: Vec<usize>,
    /// The shape of the grid of positions that replaces the block.
    pub grid: Vec<usize>,
    /// Per grid cell (row-major), the row-major offset within the block it reads.
    pub positions: Vec<usize>,
}

impl Gather {
    /// The output shape for input `x`: its block replaced by the grid; an error when the block
    /// does not sit at `axis` or a position lies outside it.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let end = self.axis + self.block.len();
        if self.block.is_empty() || x.get(self.axis..end) != Some(self.block.as_slice()) {
            return Err(format!(
                "input {x:?} has no block {:?} at axis {}",
                self.block, self.axis
            ));
        }
        let size: usize = self.block.iter().product();
        if self.positions.len() != self.grid.iter().product::<usize>() {
            return Err(format!(
                "{} positions for a grid {:?}",
                self.positions.len(),
                self.grid
            ));
        }
        if let Some(p) = self.positions.iter().find(|&&p| p >= size) {
            return Err(format!("position {p} outside the block {:?}", self.block));
        }
        let mut out = x[..self.axis].to_vec();
        out.extend_from_slice(&self.grid);
        out.extend_from_slice(&x[end..]);
        Ok(out)
    }
}

/// The elementwise functions of [`Op::Unary`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    /// `x · max(0, min(1, x/6 + 1/2))` (MobileNetV3's `nn.Hardswish`).
    HardSwish,
    /// `max(0, min(1, α·x + β))` (ONNX defaults α = 0.2, β = 0.5; PyTorch's `nn.Hardsigmoid`
    /// exports α = 1/6).
    HardSigmoid {
        /// α.
        alpha: f32,
        /// β.
        beta: f32,
    },
    /// `x` for `x ≥ 0`, else `α·x`.
    LeakyRelu {
        /// α.
        alpha: f32,
    },
    /// `x` for `x > 0`, else `α·(eˣ − 1)`.
    Elu {
        /// α.
        alpha: f32,
    },
    /// `ln(1 + eˣ)`.
    Softplus,
    /// `x · tanh(ln(1 + eˣ))`.
    Mish,
    /// `xᵖ` for a constant exponent `p`.
    Pow {
        /// The exponent.
        exponent: f32,
    },
    /// `eˣ`.
    Exp,
    /// `√x`.
    Sqrt,
    /// `|x|`.
    Abs,
    /// `−x`.
    Neg,
    /// The error function.
    Erf,
    /// 1 where `x` equals `value`, else 0 (ONNX `Equal` with a constant: a padding mask of ids).
    Equal {
        /// The constant compared with.
        value: f32,
    },
    /// 1 where `x` is 0, else 0 (ONNX `Not` of a mask).
    Not,
    /// `x` rounded toward zero (ONNX `Cast` of a run-time tensor to an integer type).
    Trunc,
}

impl Unary {
    /// The ONNX op type.
    pub fn name(self) -> &'static str {
        match self {
            Unary::HardSwish => "HardSwish",
            Unary::HardSigmoid { .. } => "HardSigmoid",
            Unary::LeakyRelu { .. } => "LeakyRelu",
            Unary::Elu { .. } => "Elu",
            Unary::Softplus => "Softplus",
            Unary::Mish => "Mish",
            Unary::Pow { .. } => "Pow",
            Unary::Exp => "Exp",
            Unary::Sqrt => "Sqrt",
            Unary::Abs => "Abs",
            Unary::Neg => "Neg",
            Unary::Erf => "Erf",
            Unary::Equal { .. } => "Equal",
            Unary::Not => "Not",
            Unary::Trunc => "Cast",
        }
    }
}

/// Group normalisation parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupNorm {
    /// Channel groups; divides the channel count.
    pub groups: usize,
    /// γ per channel, `[C]`.
    pub scale: ArrayD<f32>,
    /// β per channel, `[C]`.
    pub bias: ArrayD<f32>,
    /// ε added to the variance.
    pub epsilon: f32,
}

/// An embedding table.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    /// `[vocab, dim]`, `vocab ≤ 2^24`.
    pub table: ArrayD<f32>,
}

/// Largest vocabulary an [`Embedding`] may have: every id below it is exact in f32.
pub const MAX_VOCAB: usize = 1 << 24;

impl Embedding {
    /// Rows of the table.
    pub fn vocab(&self) -> usize {
        self.table.shape().first().copied().unwrap_or(0)
    }
    /// Width of a row.
    pub fn dim(&self) -> usize {
        self.table.shape().get(1).copied().unwrap_or(0)
    }
    /// The row index an input element names: an exact non-negative integer below
    /// [`Embedding::vocab`]; anything else (fraction, negative, NaN, too large) is an error
    /// quoting the value.
    pub fn token_id(&self, x: f32) -> Result<usize, String> {
        let vocab = self.vocab();
        if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && (x as f64) < vocab as f64 {
            Ok(x as usize)
        } else {
            Err(format!(
                "token id {x} is not an integer in 0..{vocab} (the embedding's vocabulary)"
            ))
        }
    }
}

/// Layer normalisation over the last axis.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    /// γ, `[D]`.
    pub scale: ArrayD<f32>,
    /// β, `[D]` (zeros when the file has none).
    pub bias: ArrayD<f32>,
    /// ε added to the variance.
    pub epsilon: f32,
}

/// Which recurrent cell a [`Recurrent`] layer runs; gate order and equations as in the ONNX
/// operator specification (opset 14), default activations only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKind {
    /// `h_t = tanh(W x_t + Wb + R h_{t−1} + Rb)`; 1 gate.
    Rnn,
    /// 4 gates in ONNX order `i, o, f, c` (PyTorch's `i, f, g, o` is reordered by its exporter):
    /// `i, o, f = σ(·)`, `c̃ = tanh(·)`, `c_t = f ⊙ c_{t−1} + i ⊙ c̃`, `h_t = o ⊙ tanh(c_t)`.
    /// No peepholes, no clipping, `input_forget = 0`.
    Lstm,
    /// 3 gates in ONNX order `z, r, h`: `z, r = σ(·)`, `h̃ = tanh(W_h x + r ⊙ (R_h h + Rb_h) + Wb_h)`
    /// with `linear_before_reset` (PyTorch's form), else `tanh(W_h x + R_h (r ⊙ h) + Rb_h + Wb_h)`;
    /// `h_t = (1 − z) ⊙ h̃ + z ⊙ h_{t−1}`.
    Gru {
        /// ONNX `linear_before_reset` (1 in every PyTorch export).
        linear_before_reset: bool,
    },
}

impl CellKind {
    /// Gates per hidden unit (rows of W and R are `gates · hidden`).
    pub fn gates(self) -> usize {
        match self {
            CellKind::Rnn => 1,
            CellKind::Lstm => 4,
            CellKind::Gru { .. } => 3,
        }
    }
    /// The ONNX op type.
    pub fn name(self) -> &'static str {
        match self {
            CellKind::Rnn => "RNN",
            CellKind::Lstm => "LSTM",
            CellKind::Gru { .. } => "GRU",
        }
    }
}

/// A recurrent layer's weights (ONNX `W`, `R`, `B` with the `num_directions` axis of 1 removed
/// and `B` split in its two halves).
#[derive(Clone, Debug, PartialEq)]
pub struct Recurrent {
    /// The cell.
    pub kind: CellKind,
    /// Hidden size `H`.
    pub hidden: usize,
    /// Input weights `W`, `[gates·H, I]`, gate blocks in the cell's order.
    pub w: ArrayD<f32>,
    /// Recurrent weights `R`, `[gates·H, H]`.
    pub r: ArrayD<f32>,
    /// Input bias `Wb`, `[gates·H]` (zeros when the file has no `B`).
    pub bias_w: ArrayD<f32>,
    /// Recurrent bias `Rb`, `[gates·H]`.
    pub bias_r: ArrayD<f32>,
}

impl Recurrent {
    /// Input features `I`.
    pub fn input_size(&self) -> usize {
        self.w.shape().get(1).copied().unwrap_or(0)
    }
    /// Rows of `W` and `R`: `gates · H`.
    pub fn gate_rows(&self) -> usize {
        self.kind.gates() * self.hidden
    }
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
            Op::Embedding(_) => "Embedding",
            Op::LayerNorm(_) => "LayerNorm",
            Op::Softmax { log: false, .. } => "Softmax",
            Op::Softmax { log: true, .. } => "LogSoftmax",
            Op::Gelu { .. } => "Gelu",
            Op::Tanh => "Tanh",
            Op::Dropout { .. } => "Dropout",
            Op::CausalMask => "CausalMask",
            Op::ClassToken { .. } => "ClassToken",
            Op::PositionEmbedding { .. } => "PositionEmbedding",
            Op::Recurrent(r) => r.kind.name(),
            Op::Unary(u) => u.name(),
            Op::PRelu { .. } => "PRelu",
            Op::GroupNorm(_) => "GroupNorm",
            Op::ReduceSum { .. } => "ReduceSum",
            Op::ReduceL2 { .. } => "ReduceL2",
            Op::Resize { .. } => "Resize",
            Op::CumSum { .. } => "CumSum",
            Op::GatherElements { .. } => "GatherElements",
            Op::Gather(_) => "Gather",
            Op::Where(_) => "Where",
        }
    }

    /// Trainable parameters: conv/linear/recurrent weights and biases, BN and LayerNorm scale
    /// and shift, embedding tables, class tokens and position embeddings.
    pub fn params(&self) -> u64 {
        let opt = |t: &Option<ArrayD<f32>>| t.as_ref().map_or(0, |t| t.len() as u64);
        match self {
            Op::Conv(c) => c.weight.len() as u64 + opt(&c.bias),
            Op::Linear(l) => l.weight.len() as u64 + opt(&l.bias),
            Op::BatchNorm(b) => (b.scale.len() + b.bias.len()) as u64,
            Op::LayerNorm(l) => (l.scale.len() + l.bias.len()) as u64,
            Op::Embedding(e) => e.table.len() as u64,
            Op::ClassToken { token } => token.len() as u64,
            Op::PositionEmbedding { table, .. } => table.len() as u64,
            Op::Recurrent(r) => (r.w.len() + r.r.len() + r.bias_w.len() + r.bias_r.len()) as u64,
            Op::PRelu { slope } => slope.len() as u64,
            Op::GroupNorm(n) => (n.scale.len() + n.bias.len()) as u64,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emb(vocab: usize) -> Embedding {
        Embedding {
            table: ArrayD::zeros(vec![vocab, 2]),
        }
    }

    #[test]
    fn token_ids_must_be_exact_integers_below_the_vocabulary() {
        let e = emb(10);
        assert_eq!(e.token_id(0.0), Ok(0));
        assert_eq!(e.token_id(9.0), Ok(9));
        for bad in [10.0, -1.0, 2.5, f32::NAN, f32::INFINITY] {
            let m = e.token_id(bad).unwrap_err();
            assert!(m.contains("0..10"), "{m}");
        }
    }

    #[test]
    fn new_ops_count_their_parameters() {
        let rec = Recurrent {
            kind: CellKind::Lstm,
            hidden: 3,
            w: ArrayD::zeros(vec![12, 5]),
            r: ArrayD::zeros(vec![12, 3]),
            bias_w: ArrayD::zeros(vec![12]),
            bias_r: ArrayD::zeros(vec![12]),
        };
        assert_eq!(rec.gate_rows(), 12);
        assert_eq!(rec.input_size(), 5);
        // PyTorch's nn.LSTM(5, 3): 4·3·(5 + 3) weights + 2·4·3 biases.
        assert_eq!(Op::Recurrent(rec).params(), 96 + 24);
        assert_eq!(Op::Embedding(emb(7)).params(), 14);
        let ln = LayerNorm {
            scale: ArrayD::zeros(vec![4]),
            bias: ArrayD::zeros(vec![4]),
            epsilon: 1e-5,
        };
        assert_eq!(Op::LayerNorm(ln).params(), 8);
        assert_eq!(
            Op::Softmax {
                axis: 1,
                log: false
            }
            .params(),
            0
        );
        assert_eq!(
            CellKind::Gru {
                linear_before_reset: true
            }
            .name(),
            "GRU"
        );
    }
}
