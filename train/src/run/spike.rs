//! The warning for a training loss that climbs far above where it started without diverging: SGD
//! overshooting on a network too sharp for the learning rate (a deep network without
//! normalization layers after `--init lsuv`, whose loss falls for a few iterations and then
//! jumps by orders of magnitude). The warning names a learning rate a third of the run's; a NaN or
//! a loss above `--max-loss` still stops the run as a divergence.

/// A loss above this multiple of the first iteration's is flagged.
const RISE: f32 = 3.0;
/// The advised learning rate, as a fraction of the run's.
const LOWER: f32 = 1.0 / 3.0;

/// Watches the training loss of each iteration; warns once.
#[derive(Debug)]
pub(super) struct LossRise {
    lr: f32,
    first: Option<f32>,
    warned: bool,
}

impl LossRise {
    /// A watch for a run at learning rate `lr`.
    pub(super) fn new(lr: f32) -> Self {
        Self {
            lr,
            first: None,
            warned: false,
        }
    }

    /// Takes the loss of 0-based iteration `t`; the warning when it is the first above [`RISE`]
    /// times the first loss this watch saw.
    pub(super) fn observe(&mut self, t: u64, loss: f32) -> Option<String> {
        if !loss.is_finite() {
            return None;
        }
        let first = *self.first.get_or_insert(loss);
        if self.warned || first <= 0.0 || loss <= RISE * first {
            return None;
        }
        self.warned = true;
        Some(format!(
            "the training loss rose to {loss:.4} at iteration {}, {:.0}x its {first:.4} at the \
             start: at --lr {} the steps overshoot on this network; try --lr {:.3e} (or higher \
             --bits, if the precision is near its limit)",
            t + 1,
            loss / first,
            self.lr,
            self.lr * LOWER
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loss that falls, then jumps past three times its start, is flagged once, with a third
    /// of the learning rate; one that only wobbles is not.
    #[test]
    fn a_loss_three_times_its_start_is_flagged_once() {
        let mut w = LossRise::new(0.1);
        let flagged: Vec<Option<String>> = [7.0, 2.2, 20.0, 158.0, 682.0]
            .iter()
            .enumerate()
            .map(|(t, &l)| w.observe(t as u64, l))
            .collect();
        assert_eq!(flagged.iter().filter(|f| f.is_some()).count(), 1);
        let msg = flagged[3].as_deref().expect("iteration 4 flagged");
        assert!(msg.contains("rose to 158.0000 at iteration 4"), "{msg}");
        assert!(msg.contains("try --lr 3.333e-2"), "{msg}");
        let mut calm = LossRise::new(0.1);
        for (t, l) in [6.9, 12.2, 3.3, f32::NAN, 0.4].iter().enumerate() {
            assert_eq!(calm.observe(t as u64, *l), None);
        }
    }
}
