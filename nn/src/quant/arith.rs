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

/// The arithmetic of a run: [`Arithmetic`] and the accumulators of its integer GEMMs, one for
/// the forward product and one for the backward ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArithSpec {
    /// fp32 or integer.
    pub arithmetic: Arithmetic,
    /// Accumulator of the forward GEMM (`fw`).
    pub forward: Accumulator,
    /// Accumulator of the error and weight-gradient GEMMs (`bw`).
    pub backward: Accumulator,
}

impl ArithSpec {
    /// Sets the accumulators from `BITS[:wrap|saturate]` or `exact` (both kinds), or a comma
    /// list of `fw=…` / `bw=…` (the kinds it names).
    pub fn set_accumulators(&mut self, s: &str) -> Result<()> {
        let parse = |v: &str| {
            v.parse::<Accumulator>()
                .map_err(|e| SimError::invalid("accumulator", e.to_string()))
        };
        if !s.contains('=') {
            let acc = parse(s)?;
            (self.forward, self.backward) = (acc, acc);
            return Ok(());
        }
        for part in s.split(',') {
            match part.split_once('=') {
                Some(("fw", v)) => self.forward = parse(v)?,
                Some(("bw", v)) => self.backward = parse(v)?,
                _ => {
                    return Err(SimError::invalid(
                        "accumulator",
                        format!("`{part}` in `{s}` (expected fw=ACC or bw=ACC)"),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for ArithSpec {
    /// `fp32`, or `int (accumulator fw=…, bw=…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arithmetic {
            Arithmetic::Fp32 => write!(f, "fp32"),
            Arithmetic::Int => write!(
                f,
                "int (accumulator fw={}, bw={})",
                self.forward, self.backward
            ),
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
        assert_eq!(a.forward, a.backward);
        assert_eq!(a.forward.to_string(), "24:saturate");
        a.set_accumulators("fw=16,bw=exact").unwrap();
        assert_eq!((a.forward.bits(), a.backward), (16, Accumulator::Exact));
        for bad in ["fw=1", "xw=24", "24:maybe", "fw=24,,bw=32", ""] {
            let e = a.set_accumulators(bad).unwrap_err().to_string();
            assert!(e.contains("accumulator"), "{bad}: {e}");
        }
        assert!(Arithmetic::parse("int8").is_err());
        assert_eq!(Arithmetic::parse("int").unwrap().name(), "int");
    }
}
