//! PFQ stages at given turning iterations (FracTrain, methods.md §5), as a step function.
//!
//! Spec syntax after `pfq:`: the turning iterations, comma-separated, optionally followed by
//! `:fw=F0,F1,…` and `:bw=G0,G1,…` stage lists (K turning points → K + 1 stages). Without lists,
//! the stages are spread evenly over the `--bits` range (and the `--grad-bits` range),
//! rounded half-to-even: `pfq:16000,32000,48000` with 3:8 gives 3, 5, 6, 8.

use super::error::ScheduleError;
use super::steps::Steps;
use super::{parse_bits, BitRange, Precision};

const FLAG: &str = "--schedule";

/// Builds the PFQ step function from the text after `pfq:`.
pub fn parse(
    spec: &str,
    iterations: u64,
    fw: BitRange,
    bw: BitRange,
) -> Result<Steps, ScheduleError> {
    let mut parts = spec.split(':');
    let turns_text = parts.next().unwrap_or_default();
    let turns = turns_text
        .split(',')
        .map(|s| {
            s.trim().parse::<u64>().map_err(|_| {
                ScheduleError::flag(
                    FLAG,
                    format!("pfq: turning iteration '{s}' is not a whole number"),
                )
            })
        })
        .collect::<Result<Vec<u64>, _>>()?;
    for w in turns.windows(2) {
        if w[0] >= w[1] {
            return Err(ScheduleError::flag(
                FLAG,
                format!(
                    "pfq: turning iterations must increase ({} then {})",
                    w[0], w[1]
                ),
            ));
        }
    }
    if let Some(&t) = turns.iter().find(|&&t| t == 0 || t >= iterations) {
        return Err(ScheduleError::flag(
            FLAG,
            format!(
                "pfq: turning iteration {t} must lie inside the run (1..{iterations}, --iters)"
            ),
        ));
    }
    let stages = turns.len() + 1;
    let (mut fw_list, mut bw_list) = (spread(fw, stages), spread(bw, stages));
    for part in parts {
        let (key, list) = part.split_once('=').ok_or_else(|| {
            ScheduleError::flag(FLAG, format!("pfq: expected fw=… or bw=…, got '{part}'"))
        })?;
        let values = list
            .split(',')
            .map(|b| parse_bits(FLAG, b))
            .collect::<Result<Vec<u8>, _>>()?;
        if values.len() != stages {
            return Err(ScheduleError::flag(
                FLAG,
                format!(
                    "pfq: {key} lists {} stages but {} turning points need {stages}",
                    values.len(),
                    turns.len()
                ),
            ));
        }
        match key {
            "fw" => fw_list = values,
            "bw" => bw_list = values,
            _ => {
                return Err(ScheduleError::flag(
                    FLAG,
                    format!("pfq: unknown stage list '{key}' (use fw= or bw=)"),
                ))
            }
        }
    }
    let starts = std::iter::once(0).chain(turns);
    let steps = starts
        .zip(fw_list.into_iter().zip(bw_list))
        .map(|(t, (fw, bw))| (t, Precision { fw, bw }))
        .collect();
    Steps::new(steps)
        .ok_or_else(|| ScheduleError::flag(FLAG, "pfq: turning iterations must increase"))
}

/// `n` stage bit-widths spread evenly over `r`, rounded half-to-even.
fn spread(r: BitRange, n: usize) -> Vec<u8> {
    if n <= 1 {
        return vec![r.max];
    }
    let span = f64::from(r.max - r.min);
    (0..n)
        .map(|k| r.round(f64::from(r.min) + span * k as f64 / (n - 1) as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FW: BitRange = BitRange { min: 3, max: 8 };
    const BW8: BitRange = BitRange { min: 8, max: 8 };

    #[test]
    fn default_stages_spread_over_the_range() {
        let s = parse("16000,32000,48000", 64_000, FW, BW8).unwrap();
        let fws: Vec<u8> = [0, 15_999, 16_000, 32_000, 63_999]
            .iter()
            .map(|&t| s.at(t).fw)
            .collect();
        assert_eq!(fws, [3, 3, 5, 6, 8]);
        assert_eq!(s.at(40_000).bw, 8);
    }

    #[test]
    fn explicit_stage_lists() {
        let s = parse("100,200,300:fw=3,4,6,8:bw=6,6,8,8", 1_000, FW, BW8).unwrap();
        assert_eq!(s.at(150), Precision { fw: 4, bw: 6 });
        assert_eq!(s.at(999), Precision { fw: 8, bw: 8 });
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "",
            "10,5",
            "0,10",
            "10,2000",
            "10:fw=3",
            "10:xx=3,4",
            "10:fw=3,40",
            "a",
        ] {
            let e = parse(bad, 1_000, FW, BW8).unwrap_err().to_string();
            assert!(
                e.starts_with("--schedule: pfq:") || e.starts_with("--schedule:"),
                "{bad}: {e}"
            );
        }
    }
}
