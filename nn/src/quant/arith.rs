//! How a quantized layer multiplies its operands: in fp32 on the dequantized values (the
//! fake-quantization every framework simulates), or as integer hardware does, on the integer
//! codes with integer sums ([`cptsim_kernels::int`]) and the scales applied once per output.

use std::fmt;

use cptsim_kernels::int::Accumulator;

use crate::error::{Result, SimError};

/// The arithmetic of the quantized GEMMs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Arithmetic {
    /// fp32 multiply-adds on the quantized values.
    #[default]
    Fp32,
    /// Integer multiply-adds on the codes (SBM operands of 1–16 bits; other quantizers, and
    /// layers outside [`Arithmetic::Int`]'s reach, stay fp32).
    Int,
}

impl Arithmetic {
    /// Parses `fp32` or `int`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "fp32" => Ok(Arithmetic::Fp32),
            "int" => Ok(Arithmetic::Int),
            _ => Err(SimError::invalid(
                "arithmetic",
                format!("`{s}` (expected fp32 or int)"),
            )),
        }
    }

    /// Its name, as [`Arithmetic::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Arithmetic::Fp32 => "fp32",
            Arithmetic::Int => "int",
        }
    }
}

/// The arithmetic of a run: [`Arithmetic`] and the accumulator of its integer GEMMs (the
/// forward products; the backward ones run in fp32 on the quantized values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArithSpec {
    /// fp32 or integer.
    pub arithmetic: Arithmetic,
    /// Accumulator of the forward GEMM (`fw`).
    pub forward: Accumulator,
}

impl ArithSpec {
    /// Sets the accumulator from `BITS[:wrap|saturate]` or `exact`, or per GEMM kind as
    /// `fw=…` (the only kind with integer GEMMs: `bw=…` is an error saying so).
    pub fn set_accumulators(&mut self, s: &str) -> Result<()> {
        let parse = |v: &str| {
            v.parse::<Accumulator>()
                .map_err(|e| SimError::invalid("accumulator", e.to_string()))
        };
        if !s.contains('=') {
            self.forward = parse(s)?;
            return Ok(());
        }
        for part in s.split(',') {
            match part.split_once('=') {
                Some(("fw", v)) => self.forward = parse(v)?,
                Some(("bw", _)) => {
                    return Err(SimError::invalid(
                        "accumulator",
                        format!(
                            "`{part}`: the backward GEMMs run in fp32 on the quantized values, \
                             only the forward ones (fw=) on integer codes"
                        ),
                    ))
                }
                _ => {
                    return Err(SimError::invalid(
                        "accumulator",
                        format!("`{part}` in `{s}` (expected fw=ACC)"),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl ArithSpec {
    /// The arithmetic `--arithmetic` and `--accumulator` ask for, for a run whose quantizer is
    /// SBM (`sbm`) or another; an error is the flag at fault (`arithmetic` or `accumulator`)
    /// and what is wrong.
    pub fn from_flags(
        arithmetic: &str,
        accumulator: &str,
        sbm: bool,
        quantizer: &str,
    ) -> std::result::Result<Self, (&'static str, String)> {
        let mut spec = ArithSpec {
            arithmetic: Arithmetic::parse(arithmetic)
                .map_err(|e| ("arithmetic", format!("--arithmetic {arithmetic}: {e}")))?,
            ..ArithSpec::default()
        };
        spec.set_accumulators(accumulator)
            .map_err(|e| ("accumulator", format!("--accumulator {accumulator}: {e}")))?;
        if spec.arithmetic == Arithmetic::Int && !sbm {
            return Err((
                "arithmetic",
                format!(
                    "--arithmetic int: integer GEMMs take SBM's codes (--quantizer sbm), not \
                     --quantizer {quantizer}"
                ),
            ));
        }
        if spec.arithmetic == Arithmetic::Fp32 && accumulator != "exact" {
            return Err((
                "accumulator",
                format!(
                    "--accumulator {accumulator}: fp32 arithmetic has no integer accumulator \
                     (add --arithmetic int)"
                ),
            ));
        }
        Ok(spec)
    }
}

impl fmt::Display for ArithSpec {
    /// `fp32`, or `int (accumulator fw=…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arithmetic {
            Arithmetic::Fp32 => write!(f, "fp32"),
            Arithmetic::Int => write!(f, "int (accumulator fw={})", self.forward),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulators_are_set_per_kind_and_bad_ones_are_named() {
        let mut a = ArithSpec::default();
        a.set_accumulators("24:saturate").unwrap();
        assert_eq!(a.forward.to_string(), "24:saturate");
        a.set_accumulators("fw=16").unwrap();
        assert_eq!(a.forward.bits(), 16);
        a.set_accumulators("exact").unwrap();
        assert_eq!(a.forward, Accumulator::Exact);
        let e = a.set_accumulators("fw=24,bw=32").unwrap_err().to_string();
        assert!(e.contains("backward GEMMs run in fp32"), "{e}");
        for bad in ["fw=1", "xw=24", "24:maybe", "fw=24,,fw=32", ""] {
            let e = a.set_accumulators(bad).unwrap_err().to_string();
            assert!(e.contains("accumulator"), "{bad}: {e}");
        }
        assert!(Arithmetic::parse("int8").is_err());
        assert_eq!(Arithmetic::parse("int").unwrap().name(), "int");
    }
}
