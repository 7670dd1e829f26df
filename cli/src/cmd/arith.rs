//! `--arithmetic fp32|int` and `--accumulator ACC`: how the quantized GEMMs multiply
//! (docs/src/methods/integer-arithmetic.md).

use clap::Args;
use cptsim_nn::quant::arith::ArithSpec;

use super::shared::QuantizerArg;
use crate::exit::Exit;

/// The arithmetic flags of `train`, `forward` and `bench`.
#[derive(Args, Clone, Debug)]
pub struct ArithArgs {
    /// Arithmetic of the quantized GEMMs: `fp32` multiplies the quantized values in fp32 (as
    /// fake-quantization does); `int` multiplies SBM's integer codes with integer sums and
    /// applies the scales once per output (forward GEMMs of one-group convs and linear layers;
    /// the backward GEMMs stay fp32).
    #[arg(long, default_value = "fp32", value_name = "fp32|int")]
    pub arithmetic: String,
    /// Accumulator of the integer GEMMs: `exact`, `BITS` (2..=64, two's complement, wrapping),
    /// `BITS:wrap`, `BITS:saturate`, or per GEMM kind `fw=ACC`.
    #[arg(long, default_value = "exact", value_name = "ACC")]
    pub accumulator: String,
}

impl ArithArgs {
    /// The arithmetic these flags ask for with `quantizer`; a usage error naming the flag.
    pub fn spec(&self, quantizer: QuantizerArg) -> anyhow::Result<ArithSpec> {
        ArithSpec::from_flags(
            &self.arithmetic,
            &self.accumulator,
            quantizer == QuantizerArg::Sbm,
            quantizer.name(),
        )
        .map_err(|(_, message)| Exit::Usage.error(message))
    }
}
