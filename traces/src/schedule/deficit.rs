//! Wolfe & Kyrillidis' critical-learning-period probe (methods.md §4.3) as a schedule: the first
//! `D` iterations run the forward pass at the bottom of `--bits`, the rest at its top; the
//! backward bits stay at the top of `--grad-bits` throughout.
//!
//! `--iters` counts the whole run, deficit included (their runs are `D + 256 000` iterations:
//! pass `--iters` accordingly). `deficit:0` is the control, static at the top.

use super::error::ScheduleError;
use super::steps::Steps;
use super::{BitRange, Precision};

const FLAG: &str = "--schedule";

/// The deficit D of a `deficit:D` schedule name, `None` for any other name or a malformed D.
pub fn deficit_of(name: &str) -> Option<u64> {
    deficit(name.trim().strip_prefix("deficit:")?).ok()
}

/// D from the text after `deficit:`.
fn deficit(spec: &str) -> Result<u64, ScheduleError> {
    spec.trim().parse::<u64>().map_err(|_| {
        ScheduleError::flag(
            FLAG,
            format!("deficit: '{spec}' is not a whole number of iterations"),
        )
    })
}

/// Builds the step function from the text after `deficit:`.
pub fn parse(
    spec: &str,
    iterations: u64,
    fw: BitRange,
    bw: BitRange,
) -> Result<Steps, ScheduleError> {
    let d = deficit(spec)?;
    if d >= iterations {
        return Err(ScheduleError::flag(
            FLAG,
            format!(
                "deficit:{d} leaves no iteration at the top of --bits in a run of {iterations} \
                 (--iters counts the deficit too: give more than {d})"
            ),
        ));
    }
    let low = Precision {
        fw: fw.min,
        bw: bw.max,
    };
    let high = Precision {
        fw: fw.max,
        bw: bw.max,
    };
    let steps = if d == 0 {
        vec![(0, high)]
    } else {
        vec![(0, low), (d, high)]
    };
    Steps::new(steps).ok_or_else(|| ScheduleError::flag(FLAG, "deficit: bad step layout"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FW: BitRange = BitRange { min: 3, max: 8 };
    const BW: BitRange = BitRange { min: 8, max: 8 };

    #[test]
    fn low_for_the_deficit_then_high() {
        let s = parse("100", 1_000, FW, BW).unwrap();
        assert_eq!(s.at(0), Precision { fw: 3, bw: 8 });
        assert_eq!(s.at(99), Precision { fw: 3, bw: 8 });
        assert_eq!(s.at(100), Precision { fw: 8, bw: 8 });
        assert_eq!(s.at(999), Precision { fw: 8, bw: 8 });
        assert_eq!(deficit_of("deficit:100"), Some(100));
        assert_eq!(deficit_of("cosine"), None);
        let control = parse("0", 1_000, FW, BW).unwrap();
        assert_eq!(control.len(), 1);
        assert_eq!(control.at(0), Precision { fw: 8, bw: 8 });
    }

    #[test]
    fn bad_deficits_name_the_flag() {
        for (spec, want) in [("x", "not a whole number"), ("1000", "leaves no iteration")] {
            let e = parse(spec, 1_000, FW, BW).unwrap_err().to_string();
            assert!(
                e.starts_with("--schedule: ") && e.contains(want),
                "{spec}: {e}"
            );
        }
    }
}
