//! Detecting a collapsed training run: the network predicts the same distribution for every input,
//! so the test loss sits at `ln(classes)` (a uniform softmax) and the accuracy at chance, and
//! stays there. Such a run "finishes" without error; this type lets the trainer say so.
//!
//! One evaluation is *collapsed* when its loss is within [`CollapseDetector::LOSS_TOLERANCE`] of
//! `ln(classes)` and its accuracy below twice chance (`2 / classes`: a collapsed net that always
//! predicts the most frequent class scores that class's share, e.g. 11.35 % on MNIST's test
//! set). The run is collapsed once the last `window` evaluations all were.

use std::collections::VecDeque;
use std::fmt;

use crate::error::{Result, SimError};

/// Watches the evaluations of one run.
#[derive(Clone, Debug)]
pub struct CollapseDetector {
    classes: usize,
    window: usize,
    /// Whether each of the last `window` evaluations was collapsed.
    recent: VecDeque<bool>,
    evaluations: u64,
}

/// A detected collapse: what the last evaluation measured against chance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Collapse {
    /// Consecutive collapsed evaluations (the window).
    pub evaluations: usize,
    /// Loss of the last evaluation.
    pub loss: f64,
    /// Its accuracy (fraction).
    pub accuracy: f64,
    /// `ln(classes)`.
    pub chance_loss: f64,
    /// `1 / classes`.
    pub chance_accuracy: f64,
}

impl fmt::Display for Collapse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "training collapsed: the last {} evaluations scored loss {:.4} (ln of the class \
             count is {:.4}) and accuracy {:.2} % (chance {:.2} %)",
            self.evaluations,
            self.loss,
            self.chance_loss,
            self.accuracy * 100.0,
            self.chance_accuracy * 100.0
        )
    }
}

impl CollapseDetector {
    /// How far from `ln(classes)` a collapsed evaluation's loss may be.
    pub const LOSS_TOLERANCE: f64 = 0.05;
    /// Default number of consecutive collapsed evaluations.
    pub const DEFAULT_WINDOW: usize = 3;

    /// A detector for `classes` ≥ 2 classes that reports after `window` ≥ 1 collapsed
    /// evaluations in a row.
    pub fn new(classes: usize, window: usize) -> Result<CollapseDetector> {
        if classes < 2 {
            return Err(SimError::invalid(
                "collapse detector",
                format!("{classes} classes (needs at least 2)"),
            ));
        }
        if window == 0 {
            return Err(SimError::invalid(
                "collapse detector",
                "a window of 0 evaluations",
            ));
        }
        Ok(CollapseDetector {
            classes,
            window,
            recent: VecDeque::with_capacity(window),
            evaluations: 0,
        })
    }

    fn chance_loss(&self) -> f64 {
        (self.classes as f64).ln()
    }

    fn chance_accuracy(&self) -> f64 {
        1.0 / self.classes as f64
    }

    /// Whether one evaluation (`loss`, `accuracy` as a fraction) looks collapsed. A non-finite
    /// loss is divergence, not collapse.
    pub fn is_collapsed_eval(&self, loss: f64, accuracy: f64) -> bool {
        loss.is_finite()
            && (loss - self.chance_loss()).abs() <= Self::LOSS_TOLERANCE
            && accuracy < 2.0 * self.chance_accuracy()
    }

    /// Records an evaluation; returns the collapse when the last `window` evaluations (this one
    /// included) were all collapsed.
    pub fn observe(&mut self, loss: f64, accuracy: f64) -> Option<Collapse> {
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent
            .push_back(self.is_collapsed_eval(loss, accuracy));
        self.evaluations += 1;
        (self.recent.len() == self.window && self.recent.iter().all(|&c| c)).then(|| Collapse {
            evaluations: self.window,
            loss,
            accuracy,
            chance_loss: self.chance_loss(),
            chance_accuracy: self.chance_accuracy(),
        })
    }

    /// Whether the run is collapsed now.
    pub fn is_collapsed(&self) -> bool {
        self.recent.len() == self.window && self.recent.iter().all(|&c| c)
    }

    /// Evaluations observed so far.
    pub fn evaluations(&self) -> u64 {
        self.evaluations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LN10: f64 = std::f64::consts::LN_10;

    #[test]
    fn a_run_stuck_at_chance_for_the_window_is_collapsed() {
        let mut d = CollapseDetector::new(10, 3).unwrap();
        // The measured collapse of the README recipe (seed 1): test loss 2.3011, acc 11.35 %.
        assert_eq!(d.observe(2.3011, 0.1135), None);
        assert_eq!(d.observe(2.3050, 0.0980), None);
        let c = d.observe(2.3011, 0.1135).unwrap();
        assert_eq!(c.evaluations, 3);
        assert!((c.chance_loss - LN10).abs() < 1e-12);
        let msg = c.to_string();
        assert!(
            msg.contains("loss 2.3011") && msg.contains("11.35 %"),
            "{msg}"
        );
        assert!(d.is_collapsed());
        // Learning again ends the collapse.
        assert_eq!(d.observe(0.9, 0.7), None);
        assert!(!d.is_collapsed());
        assert_eq!(d.evaluations(), 4);
    }

    #[test]
    fn learning_or_diverging_runs_are_not_collapsed() {
        let mut d = CollapseDetector::new(10, 2).unwrap();
        for (loss, acc) in [(2.30, 0.12), (1.5, 0.45), (2.30, 0.11), (0.3, 0.95)] {
            assert_eq!(d.observe(loss, acc), None, "{loss} {acc}");
        }
        // Loss near ln 10 but accuracy well above chance: a slow start, not a collapse.
        let mut d = CollapseDetector::new(10, 1).unwrap();
        assert_eq!(d.observe(2.28, 0.35), None);
        // NaN / inf loss is divergence.
        assert_eq!(d.observe(f64::NAN, 0.1), None);
        assert_eq!(d.observe(f64::INFINITY, 0.1), None);
        // Far from ln(classes) at chance accuracy (e.g. confidently wrong): not this pattern.
        assert_eq!(d.observe(4.0, 0.1), None);
    }

    #[test]
    fn chance_follows_the_class_count() {
        let mut d = CollapseDetector::new(100, 1).unwrap();
        assert!(d.observe(100f64.ln(), 0.012).is_some());
        assert!(d.observe(LN10, 0.012).is_none());
        assert!(d.observe(100f64.ln(), 0.05).is_none());
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(CollapseDetector::new(1, 3).is_err());
        assert!(CollapseDetector::new(10, 0).is_err());
    }
}
