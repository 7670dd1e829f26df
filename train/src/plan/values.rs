//! The value types of plan keys: named choices ([`Choice`], one per key such as `policy` or
//! `lr_schedule`), bit ranges (`3:8`), forward/backward pairs (`8/16`) and stage lists
//! (`3,4,6,8`). Each serialises as the text a command line takes and deserialises from that text
//! — or, for numbers, from a number — so a plan reads the same from TOML, JSON or flags.

use std::fmt;

use cptsim_traces::schedule::{BitRange, Convention as ConventionRule};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A key whose value is one of a few names.
pub trait Choice: Copy + Send + Sync + 'static {
    /// Each value, its name and one line on what it means.
    const VALUES: &'static [(Self, &'static str, &'static str)];

    /// The value's name.
    fn name(self) -> &'static str;

    /// The value of `name`, if it is one.
    fn from_name(name: &str) -> Option<Self> {
        Self::VALUES
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(v, _, _)| *v)
    }

    /// The names, comma-separated (for messages).
    fn names() -> String {
        let names: Vec<&str> = Self::VALUES.iter().map(|(_, n, _)| *n).collect();
        names.join(", ")
    }
}

/// Defines a [`Choice`] enum: variants with their names and doc lines, serialised as the name.
macro_rules! choice {
    ($(#[$meta:meta])* $name:ident {
        $($(#[doc = $doc:literal])* $variant:ident = $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[doc = $doc])* $variant),+
        }

        impl Choice for $name {
            const VALUES: &'static [(Self, &'static str, &'static str)] =
                &[$((Self::$variant, $text, concat!($($doc),*))),+];

            fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(TextVisitor::<Self>::new())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                Self::from_name(text).ok_or_else(|| {
                    format!("invalid value '{text}' (expected one of: {})", Self::names())
                })
            }
        }
    };
}

choice! {
    /// Who decides the precision (`policy`).
    PolicyKind {
        /// The precision follows --schedule (static, cyclic, pfq) or --prt.
        Schedule = "schedule",
        /// LDP: learnable per-layer precision (spec §8).
        Ldp = "ldp",
        /// DFQ: an LSTM gate picks each sample's (activation, error) bits per residual block (§6).
        Dfq = "dfq",
        /// FracTrain: DFQ whose cp target the PFQ indicator raises by --cp-step per turning point (§7).
        Fractrain = "fractrain",
    }
}

choice! {
    /// The learning-rate schedule (`lr_schedule`).
    LrKind {
        /// The base rate throughout.
        Constant = "constant",
        /// Annealed to 0 over the run, whatever its length.
        Cosine = "cosine",
        /// ×0.1 at 50 % and 75 % of the run (the CIFAR recipe's 32k/48k of 64k).
        Paper = "paper",
    }
}

choice! {
    /// The precision of every evaluation (`eval_bits`).
    EvalBitsKind {
        /// The bits of the iteration the evaluation follows (the papers' practice).
        Current = "current",
        /// Forward and backward at the top of --bits and --grad-bits.
        Max = "max",
        /// Every layer in fp32.
        Fp32 = "fp32",
    }
}

choice! {
    /// Where the initial weights come from (`init`).
    InitKind {
        /// Re-initialised per spec §9.1 from --seed.
        Seed = "seed",
        /// The model's stored weights.
        Model = "model",
        /// As `seed`, then each conv and linear layer scaled, in graph order, to unit output
        /// standard deviation on the first training samples (LSUV), the last layer of a residual
        /// branch to a tenth of its skip's: for deep networks without normalization layers.
        Lsuv = "lsuv",
    }
}

choice! {
    /// DFQ's candidate (activation, error) bit pairs (`candidates`, spec §6.1).
    CandidatesKind {
        /// (3,6) (4,6) (4,8) (6,8) (6,12).
        Cifar = "cifar",
        /// (3,6) (4,8) (6,12) (8,16).
        Imagenet = "imagenet",
    }
}

choice! {
    /// How DFQ/FracTrain executes its blocks in training (`dfq_exec`, spec §6.3).
    DfqExecKind {
        /// Each sample's selected candidate only; the gate learns from the cost term.
        Selected = "selected",
        /// Every candidate, mixed by the masks; the gate also gets the task gradient.
        All = "all",
    }
}

choice! {
    /// How LDP's β becomes bits (`ldp_mapping`).
    MappingKind {
        /// Reading 1: N = B_max.
        Scaled = "scaled",
        /// Reading 2: B_min + β·(B_max − B_min).
        Offset = "offset",
    }
}

choice! {
    /// The quantizer simulating low precision (`quantizer`).
    Quantizer {
        /// Stochastic block mantissa / affine quantizer of the CPT code.
        Sbm = "sbm",
        /// DoReFa.
        Dorefa = "dorefa",
        /// WAGEUBN.
        Wageubn = "wageubn",
        /// No quantization (fp32).
        None = "none",
    }
}

choice! {
    /// Whose reference code cyclic schedules follow (`convention`).
    Convention {
        /// CPT's: N whole cycles over T (P = T/N).
        Cpt = "cpt",
        /// Wolfe & Kyrillidis's: P = floor(T/N) + 1, the last cycle cut short.
        Wk = "wk",
    }
}

choice! {
    /// The BitOPs rule of a cost (`accounting`).
    AccountingKind {
        /// The papers' rule (methods.md §2.3).
        Paper = "paper",
        /// fp32 layers at 32 bits, BatchNorm apart.
        Hardware = "hardware",
    }
}

choice! {
    /// Which layers a synthesised trace quantizes (`cptsim run`'s `policy`).
    ScopePreset {
        /// Every conv/linear layer (the papers' accounting).
        All = "all",
        /// Every layer but the classifier (CPT's CIFAR code).
        Cifar = "cifar",
        /// Stem, shortcuts and classifier in fp32 (CPT's ImageNet code).
        Imagenet = "imagenet",
        /// Spec §1.4's default for the model's input size, as `train` does.
        Family = "family",
    }
}

impl Quantizer {
    /// The engine's method, `None` for fp32.
    pub fn method(self) -> Option<cptsim_nn::quant::QuantMethod> {
        use cptsim_nn::quant::QuantMethod;
        match self {
            Self::Sbm => Some(QuantMethod::Sbm),
            Self::Dorefa => Some(QuantMethod::Dorefa),
            Self::Wageubn => Some(QuantMethod::Wageubn),
            Self::None => None,
        }
    }
}

impl Convention {
    /// The traces crate's rule.
    pub fn rule(self) -> ConventionRule {
        match self {
            Self::Cpt => ConventionRule::Cpt,
            Self::Wk => ConventionRule::WolfeKyrillidis,
        }
    }
}

/// Deserialises a value from its text (a string) or, where the value is a number, from a number.
struct TextVisitor<T>(std::marker::PhantomData<T>);

impl<T> TextVisitor<T> {
    fn new() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<T> Visitor<'_> for TextVisitor<T>
where
    T: std::str::FromStr<Err = String>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
}

/// Implements Serialize (as the Display text) and Deserialize (from the text, or a number).
macro_rules! as_text {
    ($name:ident) => {
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(TextVisitor::<Self>::new())
            }
        }
    };
}

/// An inclusive range of bit-widths: `MIN:MAX`, or one number for a fixed precision. Only the
/// syntax is checked here; [`super::TrainPlan::validate`] checks the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Range {
    /// Lowest bits.
    pub min: u8,
    /// Highest bits.
    pub max: u8,
}

impl Range {
    /// `min..=max`.
    pub const fn new(min: u8, max: u8) -> Self {
        Self { min, max }
    }

    /// The traces crate's range.
    pub fn bit_range(self) -> BitRange {
        BitRange {
            min: self.min,
            max: self.max,
        }
    }

    /// Parses `text` for `flag` with the range checks of the schedules (bits in 1..=32,
    /// MIN ≤ MAX), as a command line does.
    pub fn parse_checked(flag: &'static str, text: &str) -> Result<Self, String> {
        cptsim_traces::schedule::parse_bit_range(flag, text)
            .map(|r| Self::new(r.min, r.max))
            .map_err(|e| e.to_string())
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.min == self.max {
            true => write!(f, "{}", self.min),
            false => write!(f, "{}:{}", self.min, self.max),
        }
    }
}

impl std::str::FromStr for Range {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("invalid value '{text}' (expected bits such as 8 or 3:8)");
        let bits = |s: &str| s.trim().parse::<u8>().map_err(|_| bad());
        match text.split_once(':') {
            Some((lo, hi)) => Ok(Self::new(bits(lo)?, bits(hi)?)),
            None => {
                let b = bits(text)?;
                Ok(Self::new(b, b))
            }
        }
    }
}

as_text!(Range);

/// Fixed forward/backward bits, `FW/BW` (each in 1..=32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FwBw {
    /// Forward bits.
    pub fw: u8,
    /// Backward bits.
    pub bw: u8,
}

impl fmt::Display for FwBw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.fw, self.bw)
    }
}

impl std::str::FromStr for FwBw {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("expected FW/BW such as 8/16, got '{text}'");
        let (fw, bw) = text.split_once('/').ok_or_else(bad)?;
        let one = |s: &str| match s.trim().parse::<u8>() {
            Ok(b) if (1..=32).contains(&b) => Ok(b),
            _ => Err(format!(
                "'{}' is not a bit-width in 1..=32 (in '{text}')",
                s.trim()
            )),
        };
        Ok(Self {
            fw: one(fw)?,
            bw: one(bw)?,
        })
    }
}

as_text!(FwBw);

/// A list of bit-widths, `3,4,6,8` (PFQ's stages).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stages(pub Vec<u8>);

impl fmt::Display for Stages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u8::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

impl std::str::FromStr for Stages {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(|s| {
                s.trim()
                    .parse::<u8>()
                    .map_err(|_| format!("`{s}` is not a bit-width"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }
}

impl Serialize for Stages {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Stages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StagesVisitor;
        impl<'de> Visitor<'de> for StagesVisitor {
            type Value = Stages;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bit-widths such as \"3,4,6,8\" or [3, 4, 6, 8]")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Stages, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Stages, E> {
                self.visit_str(&v.to_string())
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Stages, E> {
                self.visit_str(&v.to_string())
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Stages, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Stages(out))
            }
        }
        d.deserialize_any(StagesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_from_their_text_and_from_numbers() {
        let r: Range = serde_json::from_str("\"3:8\"").unwrap();
        assert_eq!((r, r.to_string()), (Range::new(3, 8), "3:8".into()));
        let fixed: Range = serde_json::from_str("8").unwrap();
        assert_eq!(serde_json::to_string(&fixed).unwrap(), "\"8\"");
        assert_eq!("8:8".parse::<Range>().unwrap(), fixed);
        assert!("x".parse::<Range>().unwrap_err().contains("'x'"));
        let s: Stages = serde_json::from_str("[3, 4]").unwrap();
        assert_eq!(s, "3,4".parse().unwrap());
        assert_eq!("8/16".parse::<FwBw>().unwrap().to_string(), "8/16");
        assert!("8".parse::<FwBw>().unwrap_err().contains("FW/BW"));
        let p: PolicyKind = serde_json::from_str("\"ldp\"").unwrap();
        assert_eq!((p, p.name()), (PolicyKind::Ldp, "ldp"));
        let e = serde_json::from_str::<PolicyKind>("\"lpd\"").unwrap_err();
        assert!(
            e.to_string().contains("schedule, ldp, dfq, fractrain"),
            "{e}"
        );
        assert!(PolicyKind::VALUES[0].2.contains("--schedule"));
    }
}
