//! Value types several commands share: the output format, the quantizer choice and the bit-range
//! parser.

use cptsim_nn::quant::QuantMethod;
use cptsim_traces::schedule::{parse_bit_range, BitRange, Convention};
use serde::{Deserialize, Serialize};

/// `--format` values, the same for every command.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// Aligned text for people.
    #[default]
    #[value(alias = "text")]
    Table,
    /// JSON for programs.
    Json,
    /// CSV, one row per item (commands that print a list of rows: `inspect`).
    Csv,
}

impl OutputFormat {
    /// Whether JSON was asked for; an error naming `command` for CSV, which it does not print.
    pub fn json_or_table(self, command: &str) -> anyhow::Result<bool> {
        match self {
            Self::Table => Ok(false),
            Self::Json => Ok(true),
            Self::Csv => anyhow::bail!("--format csv: `cptsim {command}` prints table or json"),
        }
    }
}

/// `--quantizer` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantizerArg {
    /// SBM, after Banner et al.'s scalable 8-bit training: the affine min-max quantizer of the
    /// CPT code (docs/src/methods/quantizers.md).
    Sbm,
    /// DoReFa.
    Dorefa,
    /// WAGEUBN.
    Wageubn,
    /// No quantization (fp32).
    None,
}

impl QuantizerArg {
    /// The value's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sbm => "sbm",
            Self::Dorefa => "dorefa",
            Self::Wageubn => "wageubn",
            Self::None => "none",
        }
    }

    /// The engine's method, `None` for fp32.
    pub fn method(self) -> Option<QuantMethod> {
        match self {
            Self::Sbm => Some(QuantMethod::Sbm),
            Self::Dorefa => Some(QuantMethod::Dorefa),
            Self::Wageubn => Some(QuantMethod::Wageubn),
            Self::None => None,
        }
    }
}

/// Parses a `--bits`/`--grad-bits` value (`text`, or `default` when the flag is absent).
pub fn bit_range(
    flag: &'static str,
    text: Option<&str>,
    default: &str,
) -> anyhow::Result<BitRange> {
    Ok(parse_bit_range(flag, text.unwrap_or(default))?)
}

/// `--convention` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConventionArg {
    Cpt,
    Wk,
}

impl ConventionArg {
    /// The traces crate's convention.
    pub fn rule(self) -> Convention {
        match self {
            ConventionArg::Cpt => Convention::Cpt,
            ConventionArg::Wk => Convention::WolfeKyrillidis,
        }
    }
}
