//! Simulated low-precision arithmetic: the SBM quantizer of spec §1 and the DoReFa and WAGEUBN
//! baselines, plus the per-layer state ([`LayerQuant`]) a conv or linear layer carries.
//!
//! Convention (spec): `bits = 0` means "not quantized" (fp32). `bits_fw = 0` runs the whole layer
//! in fp32; `bits_bw = 0` with `bits_fw > 0` quantizes the forward operands only.

pub mod affine;
pub mod arith;
pub mod dorefa;
pub mod hook;
pub mod lsq;
pub mod per_sample;
pub mod sbm;
pub mod wageubn;

use cptsim_kernels::int::Accumulator;
use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};

/// Which quantizer family simulates low precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantMethod {
    /// SBM as the CPT/FracTrain reference code implements it (spec §1).
    Sbm,
    /// DoReFa-Net (see [`dorefa`]).
    Dorefa,
    /// WAGEUBN power-of-two fixed point (see [`wageubn`]).
    Wageubn,
}

impl QuantMethod {
    /// Parses `sbm`, `dorefa` or `wageubn`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "sbm" => Ok(Self::Sbm),
            "dorefa" => Ok(Self::Dorefa),
            "wageubn" => Ok(Self::Wageubn),
            _ => Err(SimError::invalid(
                "quantizer",
                format!("`{s}` (expected sbm, dorefa or wageubn)"),
            )),
        }
    }

    /// The name `--quantizer` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sbm => "sbm",
            Self::Dorefa => "dorefa",
            Self::Wageubn => "wageubn",
        }
    }

    fn min_bits(self) -> u32 {
        match self {
            Self::Wageubn => 2,
            Self::Sbm | Self::Dorefa => 1,
        }
    }
}

/// Exponential moving average of an activation range, `run ← 0.9·run + 0.1·batch`, starting at 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RangeEma {
    /// Running lower end.
    pub lo: f32,
    /// Running range (max − min).
    pub range: f32,
}

impl RangeEma {
    /// Momentum of the running statistics (weight of the old value).
    pub const MOMENTUM: f32 = 0.9;

    /// Folds one training batch's range into the running values.
    pub fn update(&mut self, lo: f32, range: f32) {
        self.lo = Self::MOMENTUM * self.lo + (1.0 - Self::MOMENTUM) * lo;
        self.range = Self::MOMENTUM * self.range + (1.0 - Self::MOMENTUM) * range;
    }
}

/// Quantized weights and, for quantizers whose backward is not the identity, the factor to
/// multiply the weight gradient by.
pub type QuantWeights = (Array2<f32>, Option<Array2<f32>>);

/// Quantization state of one conv or linear layer: method, current bits, activation range EMA,
/// the seed of its error-rounding noise, and the hook of the policy that needs more of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LayerQuant {
    /// Quantizer family.
    pub method: QuantMethod,
    /// Forward bits (weights and input activation); 0 = fp32.
    pub bits_fw: u32,
    /// Backward bits (error entering the layer from its output); 0 = fp32.
    pub bits_bw: u32,
    /// Running activation range used in eval mode (SBM).
    pub act_range: RangeEma,
    /// Running range of a second activation operand (the `B` of an act × act GEMM, the
    /// recurrent state of an LSTM/GRU), quantized by [`LayerQuant::activations_second`].
    #[serde(default)]
    pub act_range_b: RangeEma,
    /// Seed of this layer's stochastic-rounding noise.
    pub seed: u64,
    /// Number of error tensors quantized so far (advances the noise stream).
    pub error_calls: u64,
    /// Eval mode quantizes activations with the batch's own range instead of the running one
    /// (for one-shot inference of an imported model, which has no running ranges).
    #[serde(default)]
    pub batch_range_in_eval: bool,
    /// A policy's addition to this layer's quantizer (per-sample bits, a step-size probe), owned
    /// by the policy's type; set per pass, not checkpointed.
    #[serde(skip)]
    pub hook: Option<Box<dyn hook::QuantHook>>,
    /// The arithmetic of this layer's GEMMs (a setting of the run, not checkpointed).
    #[serde(skip)]
    pub arith: arith::ArithSpec,
}

/// SplitMix64 finaliser: a well-mixed 64-bit value from `x`.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl LayerQuant {
    /// A layer at fp32 (bits 0/0) using `method`, with noise seed `seed`.
    pub fn new(method: QuantMethod, seed: u64) -> Self {
        Self {
            method,
            bits_fw: 0,
            bits_bw: 0,
            act_range: RangeEma::default(),
            act_range_b: RangeEma::default(),
            seed,
            error_calls: 0,
            batch_range_in_eval: false,
            hook: None,
            arith: arith::ArithSpec::default(),
        }
    }

    /// Sets the precision for the next iteration; 0 = fp32, otherwise within the method's range.
    pub fn set_bits(&mut self, bits_fw: u32, bits_bw: u32) -> Result<()> {
        let min = self.method.min_bits();
        for (name, b) in [("forward bits", bits_fw), ("backward bits", bits_bw)] {
            if b != 0 && !(min..=32).contains(&b) {
                return Err(SimError::invalid(
                    name,
                    format!(
                        "{b} for {} (allowed: 0 = fp32, or {min}..=32)",
                        self.method.name()
                    ),
                ));
            }
        }
        self.bits_fw = bits_fw;
        self.bits_bw = bits_bw;
        Ok(())
    }

    /// The accumulator of this layer's forward GEMM when it runs on integer codes: integer
    /// arithmetic, SBM at 1–16 forward bits, no policy hook.
    pub fn integer_gemms(&self) -> Option<Accumulator> {
        let a = self.arith;
        (a.arithmetic == arith::Arithmetic::Int
            && self.method == QuantMethod::Sbm
            && (1..=16).contains(&self.bits_fw)
            && self.hook.is_none())
        .then_some(a.forward)
    }

    /// The codes of the quantized weights (`[O, K]`, as `f32`) and each row's grid, when the
    /// layer's GEMMs are integer ([`LayerQuant::integer_gemms`]).
    pub fn weight_codes(&self, w: ArrayView2<f32>) -> Option<(Array2<f32>, Vec<affine::Grid>)> {
        self.integer_gemms()?;
        Some(sbm::weight_codes(w, self.bits_fw))
    }

    /// The grid the input activation `x` is quantized on, when the layer's GEMMs are integer;
    /// updates the running range as [`LayerQuant::activations`] does (call one of them, once).
    pub fn activation_grid(&mut self, x: &[f32], training: bool) -> Option<affine::Grid> {
        self.integer_gemms()?;
        let batch = training || self.batch_range_in_eval;
        Some(sbm::activation_grid(
            x,
            self.bits_fw,
            &mut self.act_range,
            batch,
        ))
    }

    /// The hook's per-sample (activation, error) bits, if it sets any.
    pub(crate) fn per_sample_bits(&self) -> Option<&[(u32, u32)]> {
        self.hook
            .as_deref()
            .and_then(hook::QuantHook::per_sample_bits)
    }

    /// Quantized copy of the weights `[O, K]` (rows = output channels), or `None` at fp32.
    pub fn weights(&self, w: ArrayView2<f32>) -> Option<QuantWeights> {
        let b = self.bits_fw;
        if b == 0 {
            return None;
        }
        Some(match self.method {
            QuantMethod::Sbm => (sbm::weights(w, b), None),
            QuantMethod::Dorefa => {
                let (q, d) = dorefa::weights(w, b);
                (q, Some(d))
            }
            QuantMethod::Wageubn => {
                let mut q = w.to_owned();
                if let Some(s) = q.as_slice_mut() {
                    wageubn::shift_quantize(s, b, None);
                } else {
                    let mut v = q.iter().copied().collect::<Vec<_>>();
                    wageubn::shift_quantize(&mut v, b, None);
                    q.iter_mut().zip(v).for_each(|(d, s)| *d = s);
                }
                (q, None)
            }
        })
    }

    /// Quantizes the input activation in place (no-op at fp32). Returns a gradient mask for
    /// quantizers whose backward is not the identity.
    pub fn activations(&mut self, x: &mut [f32], training: bool) -> Option<Vec<f32>> {
        self.activations_on(x, training, false)
    }

    /// As [`LayerQuant::activations`] for a second activation operand, with its own running
    /// range [`LayerQuant::act_range_b`].
    pub fn activations_second(&mut self, x: &mut [f32], training: bool) -> Option<Vec<f32>> {
        self.activations_on(x, training, true)
    }

    /// The body of both activation quantizers; `second` picks the running range.
    fn activations_on(&mut self, x: &mut [f32], training: bool, second: bool) -> Option<Vec<f32>> {
        let b = self.bits_fw;
        if b == 0 {
            return None;
        }
        let batch = training || self.batch_range_in_eval;
        let ps_bits = self
            .per_sample_bits()
            .map(|ps| ps.iter().map(|p| p.0).collect::<Vec<u32>>());
        let range = if second {
            &mut self.act_range_b
        } else {
            &mut self.act_range
        };
        if let Some(bits) = ps_bits {
            per_sample::activations(x, &bits, range, batch);
            return None;
        }
        match self.method {
            QuantMethod::Sbm => {
                sbm::activations(x, b, range, batch);
                None
            }
            QuantMethod::Dorefa => Some(dorefa::activations(x, b)),
            QuantMethod::Wageubn => {
                wageubn::shift_quantize(x, b, None);
                None
            }
        }
    }

    /// Quantizes the error `dL/dY` in place (`samples` = batch size), with stochastic rounding
    /// from this layer's noise stream. No-op when either precision is fp32.
    pub fn errors(&mut self, g: &mut [f32], samples: usize) {
        let b = self.bits_bw;
        if b == 0 || self.bits_fw == 0 {
            return;
        }
        let seed = mix64(self.seed ^ mix64(self.error_calls));
        self.error_calls += 1;
        if let Some(ps) = self.per_sample_bits() {
            let bits: Vec<u32> = ps.iter().map(|p| p.1).collect();
            per_sample::errors(g, &bits, seed);
            return;
        }
        match self.method {
            QuantMethod::Sbm => sbm::errors(g, b, seed),
            QuantMethod::Dorefa => dorefa::errors(g, samples, b, seed),
            QuantMethod::Wageubn => wageubn::shift_quantize(g, b, Some(seed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn fp32_is_a_no_op() {
        let mut q = LayerQuant::new(QuantMethod::Sbm, 1);
        assert!(q.weights(array![[1.0f32, 2.0]].view()).is_none());
        let mut x = [0.123f32, 4.5];
        assert!(q.activations(&mut x, true).is_none());
        q.errors(&mut x, 1);
        assert_eq!(x, [0.123, 4.5]);
        q.set_bits(8, 0).unwrap();
        q.errors(&mut x, 1);
        assert_eq!(x, [0.123, 4.5], "bits_bw = 0 leaves errors fp32");
    }

    #[test]
    fn bad_bits_and_methods_are_rejected() {
        let mut q = LayerQuant::new(QuantMethod::Wageubn, 1);
        let e = q.set_bits(1, 8).unwrap_err().to_string();
        assert!(e.contains("forward bits") && e.contains("2..=32"), "{e}");
        assert!(q.set_bits(8, 33).is_err());
        assert!(QuantMethod::parse("int8").is_err());
        assert_eq!(QuantMethod::parse("dorefa").unwrap(), QuantMethod::Dorefa);
    }

    #[test]
    fn error_noise_advances_between_calls() {
        let mut q = LayerQuant::new(QuantMethod::Sbm, 3);
        q.set_bits(4, 2).unwrap();
        let base: Vec<f32> = (0..64).map(|i| i as f32 / 63.0).collect();
        let (mut a, mut b) = (base.clone(), base.clone());
        q.errors(&mut a, 1);
        q.errors(&mut b, 1);
        assert_ne!(a, b);
    }
}
