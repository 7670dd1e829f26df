//! A run with integer GEMMs against the accelerators it is costed on: where its accumulator is
//! narrower than an accelerator's (the hardware would not overflow where the run did) or wider
//! (the run's accuracy assumes sums the hardware cannot hold), the output says so.

use cptsim_accel::Accelerator;
use cptsim_kernels::int::Accumulator;
use serde::Serialize;

/// One accelerator whose accumulator differs from the run's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccumulatorMismatch {
    /// The accelerator's name.
    pub accelerator: String,
    /// Its accumulator width, bits.
    pub accelerator_bits: u32,
    /// The run's accumulator width (64 when exact) and mode.
    pub run_bits: u32,
    pub run_mode: &'static str,
    /// `narrower` or `wider`: the run's accumulator against the accelerator's.
    pub run_is: &'static str,
    /// The warning line.
    pub message: String,
}

/// The accelerators of `accels` that state an accumulator width other than `run`'s.
pub fn mismatches(run: Accumulator, accels: &[Accelerator]) -> Vec<AccumulatorMismatch> {
    let bits = run.bits();
    accels
        .iter()
        .filter_map(|a| {
            let hw = a.config.accumulator_bits?;
            let (run_is, consequence) = match bits.cmp(&hw) {
                std::cmp::Ordering::Equal => return None,
                std::cmp::Ordering::Less => (
                    "narrower",
                    "the hardware would not overflow where the run did",
                ),
                std::cmp::Ordering::Greater => (
                    "wider",
                    "the run's accuracy assumes sums the hardware cannot hold",
                ),
            };
            Some(AccumulatorMismatch {
                accelerator: a.name().to_string(),
                accelerator_bits: hw,
                run_bits: bits,
                run_mode: run.mode(),
                run_is,
                message: format!(
                    "the run's accumulator ({run}, {bits} bits) is {run_is} than {}'s {hw}-bit \
                     one: {consequence}",
                    a.name()
                ),
            })
        })
        .collect()
}

/// Prints each mismatch as a `warning:` line on stderr.
pub fn warn(found: &[AccumulatorMismatch]) {
    for m in found {
        eprintln!("warning: {}", m.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_kernels::int::Overflow;

    #[test]
    fn narrower_and_wider_accumulators_are_named_and_equal_ones_are_not() {
        let accels: Vec<Accelerator> = ["zc706", "eyeriss"]
            .iter()
            .map(|n| Accelerator::load(n).unwrap())
            .collect();
        assert_eq!(accels[0].config.accumulator_bits, Some(32));
        assert_eq!(accels[1].config.accumulator_bits, Some(16));
        let narrow = Accumulator::narrow(24, Overflow::Saturate).unwrap();
        let m = mismatches(narrow, &accels);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].run_is, m[0].accelerator_bits), ("narrower", 32));
        assert!(m[0]
            .message
            .contains("24:saturate, 24 bits) is narrower than zc706's 32-bit"));
        assert_eq!((m[1].run_is, m[1].run_mode), ("wider", "saturate"));
        let m = mismatches(Accumulator::Exact, &accels);
        assert!(m.iter().all(|m| m.run_is == "wider" && m.run_bits == 64));
        let same = Accumulator::narrow(32, Overflow::Wrap).unwrap();
        let m = mismatches(same, &accels);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].accelerator, "eyeriss");
    }
}
