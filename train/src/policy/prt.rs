//! The Precision Range Test (CPT, spec §3.2): starting at a low forward precision, train a fixed
//! number of iterations per precision step while averaging the training accuracy over the last
//! iterations of each step; the first precision whose average beats the previous step's by more
//! than a threshold is the lower bound `B_min` of the cyclic schedule. The published procedure
//! leaves these parameters open, so all are exposed. [`PrtPolicy`] runs the test, then the schedule.
//!
//! A step whose training diverges (NaN or exploding loss) is a precision below the range: it ends
//! there, the weights go back to where the step started, and the test goes on at the next
//! precision as if it had started there (the step after a diverged one has nothing to jump from;
//! counting the diverged step as accuracy 0 would make any step that trains at all the bound).
//! Divergence at the highest precision, or after the test, stops the run as usual.

use cptsim_traces::schedule::{BitRange, Precision, Schedule, ScheduleArgs};
use cptsim_traces::TraceRow;
use serde::{Deserialize, Serialize};

use super::{from_state, to_state, Policy, PolicyReport};
use crate::TrainNet;
use cptsim_nn::error::{Result, SimError};

/// Parameters of the test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrtConfig {
    /// First forward precision tried.
    pub start_bits: u8,
    /// Highest precision tried (the schedule's `B_max`).
    pub max_bits: u8,
    /// Training iterations per precision step.
    pub iters_per_step: u64,
    /// Iterations at the end of each step whose training accuracy is averaged.
    pub window: u64,
    /// Improvement of the averaged training accuracy, in percentage points, that marks `B_min`.
    pub threshold_pp: f64,
}

impl PrtConfig {
    /// Defaults: 2 → `max_bits` in steps of one bit, 60 iterations per step averaged over the last
    /// 10, threshold 4 percentage points.
    pub fn new(max_bits: u8) -> Self {
        Self {
            start_bits: 2,
            max_bits,
            iters_per_step: 60,
            window: 10,
            threshold_pp: 4.0,
        }
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if !(1..=32).contains(&self.start_bits) || self.start_bits > self.max_bits {
            return Err(SimError::invalid(
                "PRT bits",
                format!(
                    "start {} must lie in 1..={}",
                    self.start_bits, self.max_bits
                ),
            ));
        }
        if self.window == 0 || self.window > self.iters_per_step {
            return Err(SimError::invalid(
                "PRT window",
                format!(
                    "{} must lie in 1..={} (iterations per step)",
                    self.window, self.iters_per_step
                ),
            ));
        }
        Ok(())
    }

    /// Iterations the whole test may take (every step up to `max_bits`).
    pub fn max_iterations(&self) -> u64 {
        u64::from(self.max_bits - self.start_bits + 1) * self.iters_per_step
    }
}

/// One finished step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrtStep {
    /// Forward bits of the step.
    pub bits: u8,
    /// Mean training accuracy (%) over the step's last `window` iterations (0 when it diverged).
    pub train_acc: f64,
    /// True when the step ended early because its training diverged.
    #[serde(default)]
    pub diverged: bool,
}

/// The running test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prt {
    /// Parameters.
    pub config: PrtConfig,
    /// Finished steps.
    pub steps: Vec<PrtStep>,
    /// The bound, once found (or once every step ran).
    pub found: Option<u8>,
    in_step: u64,
    acc_sum: f64,
}

impl Prt {
    /// A test at its first step.
    pub fn new(config: PrtConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            config,
            steps: Vec::new(),
            found: None,
            in_step: 0,
            acc_sum: 0.0,
        })
    }

    /// Forward bits of the current step.
    pub fn bits(&self) -> u8 {
        self.config.start_bits + self.steps.len() as u8
    }

    /// Adds one iteration's training accuracy (fraction 0..1); returns the bound when the test
    /// ends. If no step improves by the threshold, the lowest precision already trained as well as
    /// any higher one, and the bound is the lowest step that did not diverge.
    pub fn observe(&mut self, train_acc: f64) -> Option<u8> {
        if self.found.is_some() {
            return self.found;
        }
        self.in_step += 1;
        if self.in_step > self.config.iters_per_step - self.config.window {
            self.acc_sum += 100.0 * train_acc;
        }
        if self.in_step < self.config.iters_per_step {
            return None;
        }
        let step = PrtStep {
            bits: self.bits(),
            train_acc: self.acc_sum / self.config.window as f64,
            diverged: false,
        };
        self.finish(step)
    }

    /// True before a step's first iteration (and after the test).
    pub fn at_step_start(&self) -> bool {
        self.in_step == 0
    }

    /// Ends the current step as diverged (accuracy 0, not a base for the next step's jump). False, with nothing changed, when there is
    /// no higher precision to go on with (or the test is over).
    pub fn diverged(&mut self) -> bool {
        if self.found.is_some() || self.bits() >= self.config.max_bits {
            return false;
        }
        let step = PrtStep {
            bits: self.bits(),
            train_acc: 0.0,
            diverged: true,
        };
        self.finish(step);
        true
    }

    fn finish(&mut self, step: PrtStep) -> Option<u8> {
        (self.in_step, self.acc_sum) = (0, 0.0);
        let jump = self.steps.last().is_some_and(|prev| {
            !prev.diverged && step.train_acc - prev.train_acc > self.config.threshold_pp
        });
        self.steps.push(step);
        if jump {
            self.found = Some(step.bits);
        } else if step.bits >= self.config.max_bits {
            // no jump: the lowest precision that trained at all
            let trained = self.steps.iter().find(|s| !s.diverged);
            self.found = Some(trained.map_or(self.config.start_bits, |s| s.bits));
        }
        self.found
    }
}

/// The PRT policy: the test in the first iterations, then `args` with `B_min` set to the bound
/// found.
#[derive(Clone, Debug)]
pub struct PrtPolicy {
    /// The running test.
    pub prt: Prt,
    /// The schedule to follow afterwards (its `--bits` minimum is replaced).
    args: ScheduleArgs,
    /// Backward bits during the test.
    grad_bits: u8,
    /// The schedule once the bound is known.
    schedule: Option<Schedule>,
    /// Whether the trainer holds a recovery point of this process (a resumed run takes a new one
    /// at its first iteration, mid-step).
    recovery_taken: bool,
}

impl PrtPolicy {
    /// PRT first, then `args` from the bound found on; `grad_bits` during the test.
    pub fn new(prt: Prt, args: ScheduleArgs, grad_bits: u8) -> Self {
        Self {
            prt,
            args,
            grad_bits,
            schedule: None,
            recovery_taken: false,
        }
    }

    fn after(&self, prt: &Prt, bits: u8) -> Result<Schedule> {
        let range = BitRange {
            min: bits.min(prt.config.max_bits),
            max: prt.config.max_bits,
        };
        self.args
            .clone()
            .bits(range)
            .build()
            .map_err(|e| SimError::invalid("schedule", e.to_string()))
    }
}

impl Policy for PrtPolicy {
    fn name(&self) -> &'static str {
        "prt"
    }

    fn precision(&self, t: u64) -> Precision {
        match &self.schedule {
            Some(s) => s.at(t),
            None => Precision {
                fw: self.prt.bits(),
                bw: self.grad_bits,
            },
        }
    }

    fn recovery_point(&mut self, _t: u64) -> bool {
        let wanted = self.schedule.is_none() && (self.prt.at_step_start() || !self.recovery_taken);
        self.recovery_taken |= wanted;
        wanted
    }

    fn diverged(&mut self, t: u64, loss: f32) -> Result<Option<String>> {
        let bits = self.prt.bits();
        if self.schedule.is_some() || !self.prt.diverged() {
            return Ok(None);
        }
        if let Some(bound) = self.prt.found {
            self.schedule = Some(self.after(&self.prt, bound)?);
        }
        Ok(Some(format!(
            "PRT: training at {bits} forward bits diverged at iteration {t} (loss {loss}); \
             {bits} bits count as too low, the test goes on at {} bits",
            bits + 1
        )))
    }

    fn observe(&mut self, _loss: f32, train_acc: f64) -> Result<()> {
        if self.schedule.is_none() {
            if let Some(bits) = self.prt.observe(train_acc) {
                self.schedule = Some(self.after(&self.prt, bits)?);
            }
        }
        Ok(())
    }

    fn state(&self) -> Result<serde_json::Value> {
        to_state(self.name(), &self.prt)
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        let s: Prt = from_state(self.name(), state)?;
        self.schedule = match s.found {
            Some(bits) => Some(self.after(&s, bits)?),
            None => None,
        };
        self.prt = s;
        Ok(())
    }

    fn report(&self, _net: &mut TrainNet, _rows: &[TraceRow], _iterations: u64) -> PolicyReport {
        PolicyReport {
            prt_bits: self.prt.found,
            prt_diverged: self
                .prt
                .steps
                .iter()
                .filter(|s| s.diverged)
                .map(|s| s.bits)
                .collect(),
            ..PolicyReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(prt: &mut Prt, accs: &[f64]) -> Option<u8> {
        let mut out = None;
        for &a in accs {
            for _ in 0..prt.config.iters_per_step {
                out = prt.observe(a);
            }
        }
        out
    }

    #[test]
    fn first_jump_above_threshold_is_the_bound() {
        let cfg = PrtConfig {
            iters_per_step: 20,
            window: 5,
            ..PrtConfig::new(8)
        };
        let mut prt = Prt::new(cfg.clone()).unwrap();
        // 2 bits: chance; 3 bits: +30 pp → bound 3.
        assert_eq!(run(&mut prt, &[0.10, 0.40]), Some(3));
        assert_eq!(prt.steps.len(), 2);
        assert!((prt.steps[1].train_acc - 40.0).abs() < 1e-9);
        // Small gains only: bound stays at the start after the last step.
        let mut flat = Prt::new(cfg.clone()).unwrap();
        assert_eq!(run(&mut flat, &[0.5, 0.52, 0.53, 0.54, 0.55, 0.56]), None);
        assert_eq!(run(&mut flat, &[0.57]), Some(2));
        assert_eq!(flat.steps.len(), 7);
        assert!(Prt::new(PrtConfig { window: 30, ..cfg }).is_err());
    }

    #[test]
    fn a_diverged_step_is_below_the_range() {
        let cfg = PrtConfig {
            iters_per_step: 4,
            window: 2,
            ..PrtConfig::new(5)
        };
        let mut prt = Prt::new(cfg.clone()).unwrap();
        prt.observe(0.1);
        assert!(prt.diverged());
        assert_eq!(prt.bits(), 3);
        // 3 bits has nothing to jump from; 4 bits jumps from it
        assert_eq!(run(&mut prt, &[0.4]), None);
        assert_eq!(run(&mut prt, &[0.5]), Some(4));
        // no jump at all: the lowest step that trained
        let mut flat = Prt::new(cfg).unwrap();
        assert!(flat.diverged());
        assert_eq!(run(&mut flat, &[0.5, 0.51, 0.52]), Some(3));
        // nothing above the highest precision to go on with
        let mut top = Prt::new(PrtConfig {
            start_bits: 5,
            ..flat.config.clone()
        })
        .unwrap();
        assert!(!top.diverged());
        assert!(top.steps.is_empty());
    }

    #[test]
    fn only_the_window_is_averaged() {
        let mut prt = Prt::new(PrtConfig {
            iters_per_step: 4,
            window: 2,
            ..PrtConfig::new(3)
        })
        .unwrap();
        for a in [0.0, 0.0, 0.5, 1.0] {
            prt.observe(a);
        }
        assert!((prt.steps[0].train_acc - 75.0).abs() < 1e-9);
        assert_eq!(prt.bits(), 3);
    }

    #[test]
    fn prt_hands_over_to_the_schedule_with_the_bound() {
        let cfg = PrtConfig {
            iters_per_step: 2,
            window: 1,
            ..PrtConfig::new(8)
        };
        let args = ScheduleArgs::new("cosine", 100).cycles(4);
        let mut p = PrtPolicy::new(Prt::new(cfg).unwrap(), args, 8);
        assert_eq!(p.precision(0), Precision { fw: 2, bw: 8 });
        for acc in [0.1, 0.1, 0.5, 0.5] {
            p.observe(1.0, acc).unwrap();
        }
        assert_eq!(p.prt.found, Some(3));
        // Cycle 2 starts at 25 with B_min = 3.
        assert_eq!(p.precision(25), Precision { fw: 3, bw: 8 });
        let state = p.state().unwrap();
        let mut fresh = PrtPolicy::new(
            Prt::new(PrtConfig::new(8)).unwrap(),
            ScheduleArgs::new("cosine", 100).cycles(4),
            8,
        );
        fresh.restore(state).unwrap();
        assert_eq!(fresh.precision(25), p.precision(25));
        assert!(fresh.restore(serde_json::Value::Null).is_err());
    }

    /// PRT whose training blows up at `at` forward bits from the third iteration of that step.
    struct BlowUp {
        inner: PrtPolicy,
        at: u8,
        in_step: u64,
    }

    impl Policy for BlowUp {
        fn name(&self) -> &'static str {
            "prt"
        }
        fn precision(&self, t: u64) -> Precision {
            self.inner.precision(t)
        }
        fn apply(
            &mut self,
            t: u64,
            net: &mut TrainNet,
            quantize: bool,
        ) -> Result<Vec<(u32, cptsim_traces::Bits)>> {
            self.in_step = if self.inner.prt.at_step_start() {
                0
            } else {
                self.in_step + 1
            };
            self.inner.apply(t, net, quantize)
        }
        fn forward(
            &mut self,
            net: &mut TrainNet,
            x: cptsim_nn::layers::Tensor,
            mode: cptsim_nn::layers::Mode,
        ) -> Result<cptsim_nn::layers::Tensor> {
            let y = self.inner.forward(net, x, mode)?;
            let blow = self.inner.schedule.is_none() && self.inner.prt.bits() == self.at;
            Ok(if blow && self.in_step >= 2 {
                y.mapv(|v| v * f32::INFINITY)
            } else {
                y
            })
        }
        fn observe(&mut self, loss: f32, acc: f64) -> Result<()> {
            self.inner.observe(loss, acc)
        }
        fn recovery_point(&mut self, t: u64) -> bool {
            self.inner.recovery_point(t)
        }
        fn diverged(&mut self, t: u64, loss: f32) -> Result<Option<String>> {
            self.inner.diverged(t, loss)
        }
        fn state(&self) -> Result<serde_json::Value> {
            self.inner.state()
        }
        fn restore(&mut self, state: serde_json::Value) -> Result<()> {
            self.inner.restore(state)
        }
    }

    fn blow_up_run(
        at: u8,
        start_bits: u8,
    ) -> (Result<Vec<String>>, Vec<TraceRow>, Vec<PrtStep>, Vec<f32>) {
        use crate::trainer::tests::{config, small_data, small_net};
        use crate::Trainer;
        let data = small_data();
        let cfg = PrtConfig {
            iters_per_step: 5,
            window: 2,
            start_bits,
            ..PrtConfig::new(4)
        };
        let inner = PrtPolicy::new(
            Prt::new(cfg).unwrap(),
            ScheduleArgs::new("cosine", 30).cycles(2),
            8,
        );
        let policy = Box::new(BlowUp {
            inner,
            at,
            in_step: 0,
        });
        let mut tr = Trainer::new(small_net(3), &data, config(30), policy).unwrap();
        let mut notes = Vec::new();
        let result = loop {
            if tr.done() {
                break Ok(notes);
            }
            match tr.step() {
                Ok(r) => notes.extend(r.notes),
                Err(e) => break Err(e),
            }
        };
        let steps = tr.policy_as::<BlowUp>().unwrap().inner.prt.steps.clone();
        let params = tr
            .param_values()
            .iter()
            .flat_map(|t| t.iter().copied())
            .collect();
        (result, tr.rows(), steps, params)
    }

    #[test]
    fn a_diverging_step_counts_as_too_low_and_the_test_goes_on() {
        let (result, rows, steps, params) = blow_up_run(2, 2);
        let notes = result.unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("2 forward bits diverged at iteration 2"),
            "{}",
            notes[0]
        );
        assert!(
            notes[0].contains("state before iteration 0"),
            "{}",
            notes[0]
        );
        assert_eq!(
            steps[0],
            PrtStep {
                bits: 2,
                train_acc: 0.0,
                diverged: true
            }
        );
        assert!(!steps[1].diverged && steps[1].bits == 3);
        // 3 bits cannot be the jump (nothing to compare with): the test ran on to 4 bits
        assert_eq!(steps[2].bits, 4, "{steps:?}");
        // every iteration is in the trace exactly once: the diverged one ran again at 3 bits
        let mut first: Vec<&TraceRow> = rows.iter().filter(|r| r.layer == 0).collect();
        first.sort_by_key(|r| r.iter_start);
        let mut next = 0;
        for r in first {
            assert_eq!(r.iter_start, next, "{rows:?}");
            next = r.iter_end;
        }
        assert_eq!(next, 30);
        assert_eq!(
            rows.iter()
                .find(|r| r.iter_start <= 2 && 2 < r.iter_end)
                .unwrap()
                .bits
                .w,
            3
        );
        assert!(params.iter().all(|v| v.is_finite()));
        // deterministic
        assert_eq!(blow_up_run(2, 2).3, params);
    }

    #[test]
    fn divergence_at_the_highest_precision_still_stops_the_run() {
        let (result, _, steps, _) = blow_up_run(4, 4);
        let err = result.unwrap_err();
        assert!(matches!(err, SimError::Diverged { fw: 4, .. }), "{err}");
        assert!(steps.iter().all(|s| !s.diverged));
    }
}
