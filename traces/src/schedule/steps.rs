//! A step function of precision over iterations, shared by the PFQ stage schedule and user
//! schedule files: each step holds from its first iteration until the next step begins.

use super::{BitRange, Precision};

/// Steps sorted by strictly increasing start iteration; the first starts at 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steps {
    starts: Vec<u64>,
    precisions: Vec<Precision>,
}

impl Steps {
    /// Builds from `(start, precision)` pairs. The caller guarantees a first start of 0 and
    /// strictly increasing starts (the parsers check and report this with context); returns
    /// `None` otherwise.
    pub fn new(steps: Vec<(u64, Precision)>) -> Option<Steps> {
        let ok =
            steps.first().is_some_and(|s| s.0 == 0) && steps.windows(2).all(|w| w[0].0 < w[1].0);
        ok.then(|| Steps {
            starts: steps.iter().map(|s| s.0).collect(),
            precisions: steps.into_iter().map(|s| s.1).collect(),
        })
    }

    /// Precision at iteration `t`.
    pub fn at(&self, t: u64) -> Precision {
        let i = self.starts.partition_point(|&s| s <= t);
        // `starts[0] == 0`, so `i ≥ 1` for every `t`.
        self.precisions[i.saturating_sub(1)]
    }

    /// First iteration of the step after the one holding `t`, if there is one.
    pub fn next_start(&self, t: u64) -> Option<u64> {
        let i = self.starts.partition_point(|&s| s <= t);
        self.starts.get(i).copied()
    }

    /// The lowest and highest forward and backward bits of any step.
    pub fn bit_ranges(&self) -> (BitRange, BitRange) {
        let range = |bits: &dyn Fn(&Precision) -> u8| {
            let values = self.precisions.iter().map(bits);
            BitRange {
                min: values.clone().min().unwrap_or(0),
                max: values.max().unwrap_or(0),
            }
        };
        (range(&|p| p.fw), range(&|p| p.bw))
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Always false: a step function has at least one step.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(fw: u8, bw: u8) -> Precision {
        Precision { fw, bw }
    }

    #[test]
    fn holds_each_step_until_the_next() {
        let s = Steps::new(vec![(0, p(3, 6)), (10, p(4, 6)), (20, p(8, 8))]).unwrap();
        assert_eq!(s.at(0), p(3, 6));
        assert_eq!(s.at(9), p(3, 6));
        assert_eq!(s.at(10), p(4, 6));
        assert_eq!(s.at(1_000), p(8, 8));
    }

    #[test]
    fn bit_ranges_span_every_step() {
        let s = Steps::new(vec![(0, p(6, 8)), (10, p(4, 6)), (20, p(5, 7))]).unwrap();
        let (fw, bw) = s.bit_ranges();
        assert_eq!((fw.min, fw.max, bw.min, bw.max), (4, 6, 6, 8));
    }

    #[test]
    fn rejects_unsorted_or_late_start() {
        assert!(Steps::new(vec![(1, p(3, 6))]).is_none());
        assert!(Steps::new(vec![(0, p(3, 6)), (0, p(4, 6))]).is_none());
        assert!(Steps::new(vec![]).is_none());
    }
}
