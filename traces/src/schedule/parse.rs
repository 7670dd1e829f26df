//! From command-line words to a validated [`Schedule`]: the schedule name, `--bits`,
//! `--grad-bits`, `--cycles`, `--iters` and the cycle-length rule.

use std::path::Path;

use super::cyclic::{Cyclic, Form, Segments};
use super::error::ScheduleError;
use super::profile::{Flip, Profile};
use super::{check_bits, deficit, file, parse_bits, pfq, BitRange, Kind, Schedule};

/// Every schedule name `--schedule` accepts (`cpt` is an alias of `cosine`; `pfq:` and `file:`
/// take an argument).
pub const SCHEDULE_NAMES: &[&str] = &[
    "static",
    "cosine",
    "cpt",
    "cosine-triangular",
    "linear",
    "linear-triangular",
    "exp",
    "exp-triangular-v",
    "exp-triangular-h",
    "demon",
    "demon-triangular-v",
    "demon-triangular-h",
    "cosine-anneal",
    "progressive",
    "pfq:ITER,ITER,…",
    "deficit:ITERS",
    "file:PATH",
];

/// Whose reference code a cyclic schedule follows to the last bit: it fixes where segments begin
/// and end and how the cosine is evaluated (which decides exact rounding ties).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Convention {
    /// CPT's code, with whole cycles: N segments over T iterations, segment `k` covering
    /// `⌊kT/N⌋ .. ⌊(k+1)T/N⌋`, cosine as `lo + ½(hi − lo)(1 + cos(πz + π))`. When N divides T
    /// (every run of CPT's code: 64 000 / 32) this is CPT's `P = T/N` exactly; otherwise the
    /// remainder is spread one iteration at a time over the cycles, so the last cycle still ends
    /// on the last iteration at the top of its rise, where CPT's `floor(T/N)` would start a
    /// partial 33rd cycle at the bottom.
    #[default]
    Cpt,
    /// Wolfe & Kyrillidis' training script: `P = floor(T/N) + 1` (§4.2) from iteration 0, the
    /// last segment cut short by the run's end; cosine as `lo + ½(hi − lo)(1 − cos πz)`.
    WolfeKyrillidis,
}

impl Convention {
    /// Names accepted by [`Convention::by_name`].
    pub const NAMES: [&'static str; 2] = ["cpt", "wk"];

    /// Looks a convention up by name (`cpt`, `wk`).
    pub fn by_name(name: &str) -> Option<Convention> {
        match name {
            "cpt" => Some(Convention::Cpt),
            "wk" => Some(Convention::WolfeKyrillidis),
            _ => None,
        }
    }

    /// The cosine profile as this code base evaluates it.
    pub fn cosine(self) -> Profile {
        match self {
            Convention::Cpt => Profile::CosineCpt,
            Convention::WolfeKyrillidis => Profile::Cosine,
        }
    }

    /// Segment layout for `iterations ≥ 1` and `1 ≤ cycles ≤ iterations`.
    pub fn segments(self, iterations: u64, cycles: u64) -> Segments {
        match self {
            Convention::Cpt => Segments::Whole {
                total: iterations,
                count: cycles,
            },
            Convention::WolfeKyrillidis => {
                Segments::Fixed((iterations / cycles.max(1)).saturating_add(1))
            }
        }
    }
}

/// The user's schedule request, validated by [`ScheduleArgs::build`].
#[derive(Clone, Debug)]
pub struct ScheduleArgs {
    name: String,
    iterations: u64,
    cycles: u64,
    bits: BitRange,
    grad_bits: BitRange,
    convention: Convention,
}

impl ScheduleArgs {
    /// A request with the paper's CIFAR defaults: 32 cycles, bits 3:8, grad bits 8, CPT convention.
    pub fn new(name: impl Into<String>, iterations: u64) -> ScheduleArgs {
        ScheduleArgs {
            name: name.into(),
            iterations,
            cycles: 32,
            bits: BitRange { min: 3, max: 8 },
            grad_bits: BitRange::fixed(8),
            convention: Convention::Cpt,
        }
    }
    /// Sets the number of cycles (`--cycles`; segments for triangular forms).
    pub fn cycles(mut self, cycles: u64) -> ScheduleArgs {
        self.cycles = cycles;
        self
    }
    /// Sets the forward range (`--bits`).
    pub fn bits(mut self, bits: BitRange) -> ScheduleArgs {
        self.bits = bits;
        self
    }
    /// Sets the backward range (`--grad-bits`).
    pub fn grad_bits(mut self, bits: BitRange) -> ScheduleArgs {
        self.grad_bits = bits;
        self
    }
    /// Sets the reference-code convention.
    pub fn convention(mut self, rule: Convention) -> ScheduleArgs {
        self.convention = rule;
        self
    }

    /// Validates the request and builds the schedule.
    pub fn build(&self) -> Result<Schedule, ScheduleError> {
        check_range("--bits", self.bits)?;
        check_range("--grad-bits", self.grad_bits)?;
        if self.iterations == 0 {
            return Err(ScheduleError::flag(
                "--iters",
                "a run needs at least 1 iteration",
            ));
        }
        let (name, kind) = self.kind()?;
        if matches!(kind, Kind::Cyclic(_)) {
            if self.cycles == 0 {
                return Err(ScheduleError::flag("--cycles", "needs at least 1 cycle"));
            }
            if self.cycles > self.iterations {
                return Err(ScheduleError::flag(
                    "--cycles",
                    format!(
                        "{} cycles do not fit in {} iterations (--iters)",
                        self.cycles, self.iterations
                    ),
                ));
            }
        }
        Ok(Schedule::new(
            name,
            kind,
            self.iterations,
            self.bits,
            self.grad_bits,
        ))
    }

    fn kind(&self) -> Result<(String, Kind), ScheduleError> {
        let name = self.name.trim();
        if let Some(spec) = name.strip_prefix("pfq:") {
            let steps = pfq::parse(spec, self.iterations, self.bits, self.grad_bits)?;
            return Ok((name.to_string(), Kind::Steps(steps)));
        }
        if let Some(spec) = name.strip_prefix("deficit:") {
            let steps = deficit::parse(spec, self.iterations, self.bits, self.grad_bits)?;
            return Ok((name.to_string(), Kind::Steps(steps)));
        }
        if let Some(path) = name.strip_prefix("file:") {
            let steps = file::read(Path::new(path), self.iterations)?;
            return Ok((name.to_string(), Kind::Steps(steps)));
        }
        let cyclic = |profile, form| {
            Kind::Cyclic(Cyclic {
                profile,
                form,
                segments: self.convention.segments(self.iterations, self.cycles),
            })
        };
        use Flip::{Horizontal as H, Vertical as V};
        let cosine = self.convention.cosine();
        let kind = match name {
            "static" => Kind::Static,
            "progressive" => Kind::Progressive,
            "cosine" | "cpt" => cyclic(cosine, Form::Repeated),
            "cosine-triangular" => cyclic(cosine, Form::Triangular(V)),
            "cosine-anneal" => cyclic(cosine, Form::Anneal),
            "linear" => cyclic(Profile::Linear, Form::Repeated),
            "linear-triangular" => cyclic(Profile::Linear, Form::Triangular(V)),
            "exp" => cyclic(Profile::Exp, Form::Repeated),
            "exp-triangular-v" => cyclic(Profile::Exp, Form::Triangular(V)),
            "exp-triangular-h" => cyclic(Profile::Exp, Form::Triangular(H)),
            "demon" => cyclic(Profile::Demon, Form::Repeated),
            "demon-triangular-v" => cyclic(Profile::Demon, Form::Triangular(V)),
            "demon-triangular-h" => cyclic(Profile::Demon, Form::Triangular(H)),
            _ => {
                return Err(ScheduleError::UnknownName {
                    name: name.to_string(),
                    valid: SCHEDULE_NAMES.join(", "),
                })
            }
        };
        let canonical = if name == "cpt" { "cosine" } else { name };
        Ok((canonical.to_string(), kind))
    }
}

fn check_range(flag: &'static str, r: BitRange) -> Result<(), ScheduleError> {
    check_bits(u64::from(r.min)).map_err(|m| ScheduleError::flag(flag, m))?;
    check_bits(u64::from(r.max)).map_err(|m| ScheduleError::flag(flag, m))?;
    if r.min > r.max {
        return Err(ScheduleError::flag(
            flag,
            format!("minimum {} exceeds maximum {}", r.min, r.max),
        ));
    }
    Ok(())
}

/// Parses `MIN:MAX` or a single `BITS` (meaning `BITS:BITS`) for `flag`.
pub fn parse_bit_range(flag: &'static str, text: &str) -> Result<BitRange, ScheduleError> {
    let range = match text.split_once(':') {
        Some((lo, hi)) => BitRange {
            min: parse_bits(flag, lo)?,
            max: parse_bits(flag, hi)?,
        },
        None => BitRange::fixed(parse_bits(flag, text)?),
    };
    check_range(flag, range)?;
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_builds() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), "0,4,8\n").unwrap();
        for name in SCHEDULE_NAMES {
            let name = match *name {
                "pfq:ITER,ITER,…" => "pfq:100,200".to_string(),
                "deficit:ITERS" => "deficit:100".to_string(),
                "file:PATH" => format!("file:{}", f.path().display()),
                n => n.to_string(),
            };
            let s = ScheduleArgs::new(name.as_str(), 1_000).build();
            assert!(s.is_ok(), "{name}: {:?}", s.err());
        }
    }

    #[test]
    fn cpt_is_an_alias_of_cosine() {
        let a = ScheduleArgs::new("cpt", 64_000).build().unwrap();
        let b = ScheduleArgs::new("cosine", 64_000).build().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.name(), "cosine");
    }

    #[test]
    fn bit_ranges_parse() {
        assert_eq!(
            parse_bit_range("--bits", "3:8").unwrap(),
            BitRange { min: 3, max: 8 }
        );
        assert_eq!(
            parse_bit_range("--grad-bits", "8").unwrap(),
            BitRange::fixed(8)
        );
        assert_eq!(
            parse_bit_range("--bits", "32").unwrap(),
            BitRange::fixed(32)
        );
    }

    #[test]
    fn bad_bit_ranges_name_the_flag() {
        for (text, want) in [
            ("8:3", "exceeds"),
            ("0", "1..32"),
            ("3:33", "1..32"),
            ("x", "not a bit-width"),
            ("3:", ""),
        ] {
            let e = parse_bit_range("--bits", text).unwrap_err().to_string();
            assert!(e.starts_with("--bits: ") && e.contains(want), "{text}: {e}");
        }
        let e = ScheduleArgs::new("cosine", 10)
            .bits(BitRange { min: 6, max: 4 })
            .build()
            .unwrap_err();
        assert!(e.to_string().starts_with("--bits: "), "{e}");
    }

    #[test]
    fn impossible_runs_are_rejected() {
        let e = ScheduleArgs::new("cosine", 0)
            .build()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--iters: "), "{e}");
        let e = ScheduleArgs::new("cosine", 10)
            .cycles(11)
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--cycles: ") && e.contains("11 cycles"),
            "{e}"
        );
        let e = ScheduleArgs::new("linear", 10)
            .cycles(0)
            .build()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--cycles: "), "{e}");
        // Cycles do not matter to a non-cyclic schedule.
        assert!(ScheduleArgs::new("static", 10).cycles(11).build().is_ok());
    }

    #[test]
    fn unknown_name_lists_valid_ones() {
        let e = ScheduleArgs::new("cosinus", 10)
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'cosinus'") && e.contains("demon-triangular-h") && e.contains("file:PATH"),
            "{e}"
        );
    }

    #[test]
    fn conventions() {
        let seg = |c: Convention, t| c.segments(64_000, 32).locate(t);
        assert_eq!(seg(Convention::Cpt, 2_000).len, 2_000);
        assert_eq!(seg(Convention::Cpt, 63_999).start, 62_000);
        let wk = Convention::WolfeKyrillidis.segments(64_000, 8);
        assert_eq!(wk, Segments::Fixed(8_001));
        assert_eq!(Convention::by_name("wk"), Some(Convention::WolfeKyrillidis));
        assert_eq!(Convention::by_name("x"), None);
    }
}
