//! The three training GEMMs of a conv / linear layer, each expressed as a (grouped) convolution
//! problem that every array model maps (docs/src/accelerators/overview.md).
//!
//! Operands take one of two roles: the *streamed* operand is indexed by (batch, pixel, reduction)
//! like activations, the *stationary* operand by (filter, reduction) like weights.
//!
//! | GEMM | streamed (bits) | stationary (bits) | reduction | "pixels" |
//! |---|---|---|---|---|
//! | forward | X (b_a) | W (b_w) | C_in/g·K·K | H_out·W_out per sample |
//! | error backprop | dY (b_g) | W (b_w) | C_out/g·K·K | H_out·W_out per sample |
//! | weight gradient | X (b_a) | dY (b_g) | batch·H_out·W_out | C_in/g·K·K |
//!
//! Error backprop is costed as a direct convolution over the error map with the roles of C_in and
//! C_out swapped (the col2im form), so it has exactly the forward MAC count for any stride. The
//! weight gradient is a batch-1 "convolution" with 1×1 kernel whose reduction runs over every output
//! pixel of the mini-batch, its activation rows formed on chip from a line buffer (each input element
//! read once, [`ConvProblem::input_scale`]); error backprop writes the whole `H_in × W_in` error
//! map ([`ConvProblem::output_scale`]). The first layer has no error-backprop GEMM: nothing consumes the
//! gradient of the input image.
//!
//! The sequence kinds fit the same table ([`LayerKind`]): a linear layer over `T` tokens and a
//! recurrent layer unrolled over `T` steps are 1×1 convolutions over `T` "pixels"; an
//! activation × activation product `A·B` (attention) streams `A` and holds `B` in the stationary
//! role (at the bits the trace records as `b_w`, which for such a layer are the activation bits
//! B was quantized to), and its third GEMM, the gradient of `B` (`dB = Aᵀ·dY`), reduces over the
//! `M` rows of each sample and head rather than over the mini-batch: there is no weight shared by
//! the samples.

use cptsim_models::ir::shape::window_out;
use cptsim_models::summary::{LayerInfo, LayerKind, LayerRole};
use cptsim_traces::row::Bits;
use serde::{Deserialize, Serialize};

/// Bits of one partial sum / output element in flight.
pub const PSUM_BITS: u64 = 32;

/// Which training GEMM of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GemmKind {
    /// `Y = X ⊛ W`: activations × weights.
    Forward,
    /// `dX = dY ⊛ᵀ W`: errors × weights.
    ErrorBackprop,
    /// `dW = X ⋆ dY`: activations × errors.
    WeightGrad,
}

impl GemmKind {
    /// All three, in execution order within an iteration.
    pub const ALL: [GemmKind; 3] = [Self::Forward, Self::ErrorBackprop, Self::WeightGrad];

    /// Short label used in reports (`fw`, `eb`, `wg`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Forward => "fw",
            Self::ErrorBackprop => "eb",
            Self::WeightGrad => "wg",
        }
    }
}

/// Bit-widths of the two operands of one GEMM, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct OperandBits {
    /// The streamed (activation-like) operand.
    pub stream: u32,
    /// The stationary (weight-like) operand.
    pub stationary: u32,
}

impl OperandBits {
    /// The operand bits of `gemm` for a layer that ran at `bits`; 0 bits (fp32 layer) count as 32.
    pub fn of(gemm: GemmKind, bits: Bits) -> Self {
        let fp = |b: u8| if b == 0 { 32 } else { u32::from(b) };
        let (stream, stationary) = match gemm {
            GemmKind::Forward => (bits.a, bits.w),
            GemmKind::ErrorBackprop => (bits.g, bits.w),
            GemmKind::WeightGrad => (bits.a, bits.g),
        };
        Self {
            stream: fp(stream),
            stationary: fp(stationary),
        }
    }
}

/// Largest MAC count and input footprint of one GEMM the models cost (2^44 ≈ 1.8·10^13, far
/// beyond any real layer even at batch 4096), so that bit and cycle counts — MACs times operand
/// bits times re-fetches — stay well inside `u64`.
pub const MAX_PROBLEM_SIZE: u64 = 1 << 44;

/// An exact fraction `num / den` scaling a tensor's element count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Ratio {
    pub num: u64,
    pub den: u64,
}

impl Ratio {
    /// No scaling.
    pub const ONE: Ratio = Ratio { num: 1, den: 1 };

    /// `ceil(x · num / den)` (in u128, saturating at `u64::MAX`).
    pub fn of(self, x: u64) -> u64 {
        let v = (u128::from(x) * u128::from(self.num)).div_ceil(u128::from(self.den.max(1)));
        u64::try_from(v).unwrap_or(u64::MAX)
    }
}

/// A GEMM as a grouped convolution: per group, `out_ch` filters over `in_ch` channels and a
/// `kernel_h × kernel_w` window produce an `out_h × out_w` map for each of `batch` samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ConvProblem {
    /// Samples processed together.
    pub batch: u64,
    /// Reduction channels per group.
    pub in_ch: u64,
    /// Filters (output channels) per group.
    pub out_ch: u64,
    /// Output height.
    pub out_h: u64,
    /// Output width.
    pub out_w: u64,
    /// Kernel height.
    pub kernel_h: u64,
    /// Kernel width.
    pub kernel_w: u64,
    /// Stride (both axes; used only for the input footprint of a tile).
    pub stride: u64,
    /// Independent groups (depthwise convs have one channel per group).
    pub groups: u64,
    /// The host has im2col'ed the input: the array sees a `K·K·in_ch` reduction per pixel.
    pub im2col: bool,
    /// Elements of the streamed operand in DRAM and in the input buffer per element of its tile
    /// as the array sees it: below 1 when a line buffer builds the array's rows from a smaller
    /// tensor (the weight gradient's im2col'ed activations, see [`training_gemm`]).
    pub input_scale: Ratio,
    /// Elements of the stationary operand in DRAM and in the weight buffer per element the array
    /// sees: below 1 when most are zeros made on chip (a grouped conv run as one dense conv with
    /// block-diagonal weights).
    pub weight_scale: Ratio,
    /// A depthwise conv's GEMM: one channel per group (the engine needs a depthwise mapping).
    pub depthwise: bool,
    /// Output elements written per output of the problem: above 1 when the result is larger than
    /// the computed map (error backprop of a strided conv, see [`training_gemm`]).
    pub output_scale: Ratio,
}

impl ConvProblem {
    /// A single inference conv layer: square `hw × hw` input, square kernel `k`, symmetric padding
    /// `pad`, output size by [`window_out`]. The kernel must fit the padded input (callers check
    /// it: `cptsim layer` names the flags); one that does not is costed as one window.
    pub fn conv(batch: u64, ic: u64, oc: u64, hw: u64, k: u64, stride: u64, pad: u64) -> Self {
        let size = |v: u64| usize::try_from(v).ok();
        let out = match (
            size(hw),
            size(pad.saturating_mul(2)),
            size(k),
            size(stride.max(1)),
        ) {
            (Some(hw), Some(pad), Some(k), Some(s)) => window_out(hw, pad, k, s, 1, false).ok(),
            _ => None,
        }
        .map_or(1, |o| o as u64);
        Self {
            batch,
            in_ch: ic,
            out_ch: oc,
            out_h: out,
            out_w: out,
            kernel_h: k,
            kernel_w: k,
            stride: stride.max(1),
            groups: 1,
            im2col: false,
            input_scale: Ratio::ONE,
            weight_scale: Ratio::ONE,
            depthwise: false,
            output_scale: Ratio::ONE,
        }
    }

    /// A fully connected layer with `inputs` inputs and `outputs` outputs.
    pub fn fc(batch: u64, inputs: u64, outputs: u64) -> Self {
        Self::conv(batch, inputs, outputs, 1, 1, 1, 0)
    }

    /// The same problem with its input im2col'ed by the host.
    pub fn im2col(self) -> Self {
        Self {
            im2col: true,
            ..self
        }
    }

    /// Why the problem is too large for the models' 64-bit cycle and bit counters, if it is:
    /// its MACs or its input footprint exceed [`MAX_PROBLEM_SIZE`] (computed without overflow).
    pub fn size_problem(&self) -> Option<String> {
        let g = u128::from(self.groups.max(1));
        let macs = [
            self.batch,
            self.in_ch,
            self.out_ch,
            self.out_h,
            self.out_w,
            self.kernel_h,
            self.kernel_w,
        ]
        .iter()
        .fold(g, |acc, &d| acc.saturating_mul(u128::from(d)));
        let span = |out: u64, k: u64| {
            u128::from(out.saturating_sub(1))
                .saturating_mul(u128::from(self.stride))
                .saturating_add(u128::from(k))
        };
        let input = [self.batch, self.in_ch]
            .iter()
            .fold(g, |acc, &d| acc.saturating_mul(u128::from(d)))
            .saturating_mul(span(self.out_h, self.kernel_h))
            .saturating_mul(span(self.out_w, self.kernel_w));
        let limit = u128::from(MAX_PROBLEM_SIZE);
        if macs > limit {
            Some(format!("{macs} MACs exceed the limit of {limit} per GEMM"))
        } else if input > limit {
            Some(format!(
                "an input of {input} elements exceeds the limit of {limit}"
            ))
        } else {
            None
        }
    }

    /// DRAM bits no mapping can avoid: every input element a window touches (with its halo) read once at
    /// the streamed bits, every weight once at the stationary bits, every output written once at
    /// 32 bits (all groups).
    pub fn compulsory_bits(&self, bits: OperandBits) -> u64 {
        self.compulsory_bits_at(bits, PSUM_BITS)
    }

    /// [`Self::compulsory_bits`] with outputs written at `output_bits` (a design that stores
    /// its outputs in narrower words, such as Eyeriss's 16-bit ofmaps).
    pub fn compulsory_bits_at(&self, bits: OperandBits, output_bits: u64) -> u64 {
        let g = self.groups.max(1);
        let window = if self.im2col {
            self.pixels() * self.taps()
        } else {
            // rows a stride wider than the kernel skips are not read
            self.in_rows(self.out_h).min(self.out_h * self.kernel_h)
                * self.in_cols(self.out_w).min(self.out_w * self.kernel_w)
        };
        let input =
            self.input_scale
                .of(g * self.batch * self.in_ch * window * u64::from(bits.stream));
        let weight = self.weight_scale.of(g
            * self.out_ch
            * self.in_ch
            * self.taps()
            * u64::from(bits.stationary));
        let output =
            self.output_scale
                .of(g * self.batch * self.out_ch * self.pixels() * output_bits);
        input + weight + output
    }

    /// Kernel taps `K_h · K_w`.
    pub fn taps(&self) -> u64 {
        self.kernel_h * self.kernel_w
    }

    /// Output pixels per sample (`out_h · out_w`).
    pub fn pixels(&self) -> u64 {
        self.out_h * self.out_w
    }

    /// Multiply-accumulates of the whole problem (all groups).
    pub fn macs(&self) -> u64 {
        self.batch * self.pixels() * self.out_ch * self.in_ch * self.taps() * self.groups
    }

    /// Input rows needed for `out_rows` output rows.
    pub fn in_rows(&self, out_rows: u64) -> u64 {
        out_rows.saturating_sub(1) * self.stride + self.kernel_h
    }

    /// Input columns needed for `out_cols` output columns.
    pub fn in_cols(&self, out_cols: u64) -> u64 {
        out_cols.saturating_sub(1) * self.stride + self.kernel_w
    }
}

/// The problem of `gemm` for `layer` with `samples` samples per iteration, or `None` when the layer
/// has no such GEMM (error backprop of the first layer).
pub fn training_gemm(layer: &LayerInfo, gemm: GemmKind, samples: u64) -> Option<ConvProblem> {
    let groups = layer.groups.max(1) as u64;
    let cin = layer.in_channels() as u64 / groups;
    let cout = layer.out_channels() as u64 / groups;
    let (kh, kw) = match layer.kind {
        LayerKind::Conv => (layer.kernel[0] as u64, layer.kernel[1] as u64),
        LayerKind::Linear | LayerKind::Matmul | LayerKind::Recurrent => (1, 1),
    };
    let (oh, ow) = (layer.out_shape[1] as u64, layer.out_shape[2] as u64);
    let stride = layer.stride[0].max(layer.stride[1]).max(1) as u64;
    let forward = ConvProblem {
        batch: samples,
        in_ch: cin,
        out_ch: cout,
        out_h: oh,
        out_w: ow,
        kernel_h: kh,
        kernel_w: kw,
        stride,
        groups,
        im2col: false,
        input_scale: Ratio::ONE,
        weight_scale: Ratio::ONE,
        depthwise: groups > 1 && cin == 1 && cout == 1,
        output_scale: Ratio::ONE,
    };
    let (sh, sw) = match layer.kind {
        LayerKind::Conv => (layer.stride[0].max(1) as u64, layer.stride[1].max(1) as u64),
        LayerKind::Linear | LayerKind::Matmul | LayerKind::Recurrent => (1, 1),
    };
    match gemm {
        GemmKind::Forward => Some(forward),
        GemmKind::ErrorBackprop if layer.role == LayerRole::First => None,
        // The error map dX has the input's H_in × W_in pixels, s² times the computed map for
        // stride s: every one is written.
        GemmKind::ErrorBackprop => Some(ConvProblem {
            in_ch: cout,
            out_ch: cin,
            stride: 1,
            output_scale: Ratio {
                num: (layer.in_shape[1] * layer.in_shape[2]).max(1) as u64,
                den: (oh * ow).max(1),
            },
            ..forward
        }),
        // dB = Aᵀ·dY per sample and group: K×N outputs, each reducing the M rows.
        GemmKind::WeightGrad if layer.kind == LayerKind::Matmul => Some(ConvProblem {
            batch: samples,
            in_ch: oh * ow,
            out_ch: cout,
            out_h: cin,
            out_w: 1,
            stride: 1,
            ..forward
        }),
        GemmKind::WeightGrad => Some(ConvProblem {
            batch: 1,
            in_ch: samples * oh * ow,
            out_ch: cout,
            out_h: cin * kh * kw,
            out_w: 1,
            kernel_h: 1,
            kernel_w: 1,
            stride: 1,
            groups,
            im2col: false,
            // Row (c, kh, kw) of pixel (n, y, x) is X[n, c, y·s + kh, x·s + kw]: a line-buffered
            // engine reads each X element once and forms the K_h·K_w rows on chip, so the K² rows
            // of a channel cost min(s,K)² input elements per pixel, not K².
            input_scale: Ratio {
                num: sh.min(kh) * sw.min(kw),
                den: kh * kw,
            },
            weight_scale: Ratio::ONE,
            output_scale: Ratio::ONE,
            ..forward
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 3×3 pad-1 conv layer `cin → cout` on an `hw × hw` input.
    pub(crate) fn conv_layer(
        role: LayerRole,
        cin: usize,
        cout: usize,
        hw: usize,
        stride: usize,
    ) -> LayerInfo {
        let out = window_out(hw, 2, 3, stride, 1, false).unwrap();
        LayerInfo {
            name: "c".into(),
            kind: LayerKind::Conv,
            role,
            in_shape: [cin, hw, hw],
            out_shape: [cout, out, out],
            kernel: [3, 3],
            stride: [stride, stride],
            pads: [1; 4],
            dilation: [1, 1],
            groups: 1,
            params: (cin * cout * 9) as u64,
            macs: (cin * cout * 9 * out * out) as u64,
            hidden: None,
        }
    }

    #[test]
    fn every_gemm_has_the_layer_macs_times_samples() {
        let l = conv_layer(LayerRole::Body, 16, 32, 32, 2);
        for g in GemmKind::ALL {
            let p = training_gemm(&l, g, 128).unwrap();
            assert_eq!(p.macs(), l.macs * 128, "{g:?}");
        }
    }

    #[test]
    fn activation_products_keep_their_gradient_per_sample() {
        // 4 heads of [M=10, K=8] × [K=8, N=10] per sample.
        let l = LayerInfo {
            name: "qk".into(),
            kind: LayerKind::Matmul,
            in_shape: [4 * 8, 10, 1],
            out_shape: [4 * 10, 10, 1],
            kernel: [1, 1],
            groups: 4,
            params: 0,
            macs: 4 * 10 * 10 * 8,
            hidden: None,
            ..conv_layer(LayerRole::Body, 1, 1, 1, 1)
        };
        for g in GemmKind::ALL {
            let p = training_gemm(&l, g, 3).unwrap();
            assert_eq!(p.macs(), l.macs * 3, "{g:?}");
        }
        let wg = training_gemm(&l, GemmKind::WeightGrad, 3).unwrap();
        assert_eq!((wg.batch, wg.groups, wg.in_ch, wg.out_ch), (3, 4, 10, 10));
    }

    #[test]
    fn first_layer_has_no_error_backprop() {
        let l = conv_layer(LayerRole::First, 3, 16, 32, 1);
        assert!(training_gemm(&l, GemmKind::ErrorBackprop, 8).is_none());
        assert!(training_gemm(&l, GemmKind::WeightGrad, 8).is_some());
    }

    #[test]
    fn operand_roles_follow_the_table() {
        let b = Bits { w: 2, a: 4, g: 8 };
        assert_eq!(
            OperandBits::of(GemmKind::Forward, b),
            OperandBits {
                stream: 4,
                stationary: 2
            }
        );
        assert_eq!(
            OperandBits::of(GemmKind::ErrorBackprop, b),
            OperandBits {
                stream: 8,
                stationary: 2
            }
        );
        assert_eq!(
            OperandBits::of(GemmKind::WeightGrad, b),
            OperandBits {
                stream: 4,
                stationary: 8
            }
        );
        let fp = OperandBits::of(GemmKind::Forward, Bits { w: 0, a: 0, g: 0 });
        assert_eq!(
            fp,
            OperandBits {
                stream: 32,
                stationary: 32
            }
        );
    }

    #[test]
    fn conv_output_size_and_im2col() {
        let p = ConvProblem::conv(1, 16, 16, 32, 3, 1, 1);
        assert_eq!((p.out_h, p.out_w), (32, 32));
        let q = ConvProblem::conv(1, 16, 16, 32, 3, 2, 1);
        assert_eq!(q.out_h, 16);
        let i = p.im2col();
        assert!(i.im2col && !p.im2col);
        assert_eq!(i.macs(), p.macs());
    }
}
