//! [`TrainPlan::validate`]: the rules that need no model or data — positive sizes and rates, the
//! bit ranges, which keys each policy accepts, the schedule and the policies' own settings —
//! each failure a [`PlanError`] naming its key. Rules that need the model or the data are checked
//! when a [`crate::Run`] is set up.

use std::fmt;

use cptsim_traces::schedule::ScheduleError;

use super::{flag, Choice, DfqExecKind, EvalBitsKind, PolicyKind, Quantizer, Range, TrainPlan};

/// A plan key whose value is rejected; the message names it as its flag (`--batch: …`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    /// The key (`batch`, `grad_bits`).
    pub key: String,
    /// What is wrong, naming the key as its command-line flag.
    pub message: String,
}

impl PlanError {
    /// An error of `key`.
    pub fn new(key: &str, message: impl Into<String>) -> Self {
        Self {
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// A schedule's error, on the key its flag names (the schedule name otherwise).
    pub fn of_schedule(e: &ScheduleError) -> Self {
        let key = match e {
            ScheduleError::Flag { flag, .. } => flag.trim_start_matches("--").replace('-', "_"),
            _ => "schedule".to_string(),
        };
        Self::new(&key, e.to_string())
    }

    /// An engine settings error (`invalid --weight-bits: …`), on the key its flag names, else
    /// on `key`.
    pub fn of_setting(e: &cptsim_nn::SimError, key: &str) -> Self {
        let named = match e {
            cptsim_nn::SimError::Invalid { what, .. } if what.starts_with("--") => {
                what.trim_start_matches("--").replace('-', "_")
            }
            _ => key.to_string(),
        };
        Self::new(&named, e.to_string())
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PlanError {}

/// `Err(PlanError)` of `key` unless `ok`.
fn check(ok: bool, key: &str, message: impl FnOnce() -> String) -> Result<(), PlanError> {
    match ok {
        true => Ok(()),
        false => Err(PlanError::new(key, message())),
    }
}

impl TrainPlan {
    /// The arithmetic of the run's quantized GEMMs (`arithmetic`, `accumulator`).
    pub fn arith(&self) -> Result<cptsim_nn::quant::arith::ArithSpec, PlanError> {
        cptsim_nn::quant::arith::ArithSpec::from_flags(
            &self.arithmetic,
            &self.accumulator,
            self.quantizer == Quantizer::Sbm,
            self.quantizer.name(),
        )
        .map_err(|(key, message)| PlanError::new(key, message))
    }

    /// Checks every rule that needs no model or data; the error names the key at fault.
    pub fn validate(&self) -> Result<(), PlanError> {
        check(
            !self.model.is_empty() && !self.data.is_empty(),
            if self.model.is_empty() {
                "model"
            } else {
                "data"
            },
            || "--model and --data are required (or --resume DIR)".into(),
        )?;
        self.validate_length()?;
        self.validate_bits()?;
        self.arith()?;
        self.validate_optimiser()?;
        self.validate_data()?;
        self.validate_invocation()?;
        self.validate_policy()?;
        self.validate_schedule()
    }

    fn validate_length(&self) -> Result<(), PlanError> {
        check(
            self.iters.is_none() || self.epochs.is_none(),
            "epochs",
            || "--iters and --epochs: give one of them".into(),
        )?;
        check(
            !matches!(self.iters, Some(0)) && !matches!(self.epochs, Some(0)),
            if self.iters == Some(0) {
                "iters"
            } else {
                "epochs"
            },
            || "--iters/--epochs: a run needs at least 1 iteration".into(),
        )?;
        check(self.batch > 0, "batch", || {
            "--batch: a batch needs at least 1 sample".into()
        })?;
        check(self.eval_every > 0, "eval_every", || {
            "--eval-every: must be at least 1".into()
        })?;
        check(self.pfq_check_every != Some(0), "pfq_check_every", || {
            "--pfq-check-every: must be at least 1".into()
        })
    }

    fn validate_bits(&self) -> Result<(), PlanError> {
        for (key, r) in [("bits", self.bits), ("grad_bits", self.grad_bits)] {
            let flag = if key == "bits" {
                "--bits"
            } else {
                "--grad-bits"
            };
            Range::parse_checked(flag, &r.to_string()).map_err(|m| PlanError::new(key, m))?;
        }
        if let Some(d) = self.depthwise_bits {
            check(
                self.quantize_depthwise != Some(false),
                "depthwise_bits",
                || {
                    format!(
                        "--depthwise-bits {d} contradicts --quantize-depthwise false (drop one of them)"
                    )
                },
            )?;
        }
        if self.quantizer == Quantizer::Wageubn {
            for (key, r) in [("bits", self.bits), ("grad_bits", self.grad_bits)] {
                check(r.min >= 2, key, || {
                    format!("{} {}: wageubn needs at least 2 bits", flag(key), r.min)
                })?;
            }
        }
        Ok(())
    }

    fn validate_optimiser(&self) -> Result<(), PlanError> {
        check(self.lr.is_finite() && self.lr > 0.0, "lr", || {
            format!("--lr: {} is not a positive learning rate", self.lr)
        })?;
        for (key, v) in [
            ("momentum", self.momentum),
            ("weight_decay", self.weight_decay),
        ] {
            check(v.is_finite() && v >= 0.0, key, || {
                format!("{} {v}: must be a finite number ≥ 0", flag(key))
            })?;
        }
        if let Some(c) = self.clip_grad {
            check(c.is_finite() && c > 0.0, "clip_grad", || {
                format!("--clip-grad {c}: must be a positive finite gradient norm")
            })?;
        }
        check(self.momentum < 1.0, "momentum", || {
            format!(
                "--momentum {}: must be below 1 (at 1 or above the velocity never decays)",
                self.momentum
            )
        })?;
        check(
            !self.max_loss.is_nan() && self.max_loss > 0.0,
            "max_loss",
            || format!("--max-loss {}: must be a positive loss", self.max_loss),
        )
    }

    fn validate_data(&self) -> Result<(), PlanError> {
        check(self.seq_len != Some(0), "seq_len", || {
            "--seq-len: a window needs at least 1 token".into()
        })?;
        let sequences = self.is_text() || self.data == "synthetic";
        check(self.seq_len.is_none() || sequences, "seq_len", || {
            format!(
                "--seq-len: `--data {}` has no sequences (text:FILE, ptb:DIR, wikitext:DIR, or \
                 synthetic for a model that reads token ids)",
                self.data
            )
        })?;
        check(
            !self.is_text() || self.policy == PolicyKind::Schedule,
            "policy",
            || {
                format!(
                    "--policy {}: language models train under --policy schedule (its per-sample \
                     and learned policies are written for image models)",
                    self.policy
                )
            },
        )?;
        if let Some(n) = self.classes {
            check(n > 0 && n <= usize::from(u16::MAX), "classes", || {
                format!("--classes {n}: must be in 1..={}", u16::MAX)
            })?;
        }
        check((0.0..1.0).contains(&self.val_split), "val_split", || {
            format!(
                "--val-split {}: must be a fraction in [0, 1)",
                self.val_split
            )
        })?;
        check(self.subset != Some(0), "subset", || {
            "--subset: needs at least 1 image".into()
        })?;
        check(self.test_subset != Some(0), "test_subset", || {
            "--test-subset: needs at least 1 sample".into()
        })
    }

    /// Checks that the data `data` names is there: a known kind, and its directory (or a text
    /// corpus's file or directory) present. The files themselves are read when the run loads.
    pub fn check_data_present(&self) -> Result<(), PlanError> {
        let spec = self.data.as_str();
        let (kind, path) = match spec.split_once(':') {
            Some((k, p)) => (k, Some(std::path::Path::new(p))),
            None => (spec, None),
        };
        let missing = |what: &str| PlanError::new("data", format!("--data {spec}: {what}"));
        match (kind, path) {
            ("synthetic", None) => Ok(()),
            ("synthetic", Some(_)) => Err(missing("synthetic takes no directory")),
            ("mnist" | "fashion-mnist" | "cifar10" | "cifar100" | "ptb" | "wikitext", None) => {
                Err(missing(&format!("needs a directory ({kind}:DIR)")))
            }
            ("mnist" | "fashion-mnist" | "cifar10" | "cifar100", Some(dir)) if !dir.is_dir() => {
                Err(missing(&format!("directory {} not found", dir.display())))
            }
            ("text" | "ptb" | "wikitext", Some(p)) if !p.exists() => {
                Err(missing(&format!("{} not found", p.display())))
            }
            ("text", None) => Err(missing("needs a file (text:FILE)")),
            (
                "mnist" | "fashion-mnist" | "cifar10" | "cifar100" | "text" | "ptb" | "wikitext",
                _,
            ) => Ok(()),
            _ => Err(missing(&format!(
                "unknown dataset kind `{kind}` (expected {})",
                super::DATA_KINDS
            ))),
        }
    }

    fn validate_invocation(&self) -> Result<(), PlanError> {
        let minutes = self.checkpoint_minutes;
        check(
            minutes.is_finite() && (0.0..=1e6).contains(&minutes),
            "checkpoint_minutes",
            || {
                format!(
                    "--checkpoint-minutes {minutes}: expected minutes ≥ 0 (0: only at evaluations)"
                )
            },
        )?;
        check(self.threads != Some(0), "threads", || {
            "--threads: at least 1".into()
        })
    }

    fn validate_policy(&self) -> Result<(), PlanError> {
        let gated = matches!(self.policy, PolicyKind::Dfq | PolicyKind::Fractrain);
        check(
            self.policy != PolicyKind::Schedule || self.target_cp.is_none(),
            "target_cp",
            || "--target-cp needs --policy dfq or fractrain".into(),
        )?;
        check(
            !gated || self.eval_bits == EvalBitsKind::Current,
            "eval_bits",
            || {
                format!(
                    "--eval-bits {}: not with --policy {} (its gate picks each sample's bits in \
                     evaluation too); use --eval-bits current",
                    self.eval_bits, self.policy
                )
            },
        )?;
        check(
            gated || self.dfq_exec != DfqExecKind::All,
            "dfq_exec",
            || "--dfq-exec all needs --policy dfq or fractrain".into(),
        )?;
        check(
            !gated || self.quantizer == Quantizer::Sbm,
            "quantizer",
            || {
                format!(
                    "--policy {} runs on the SBM quantizer only (drop --quantizer)",
                    self.policy
                )
            },
        )?;
        if gated {
            self.dfq_config()
                .validate()
                .map_err(|e| PlanError::of_setting(&e, "target_cp"))?;
        }
        match self.policy {
            PolicyKind::Ldp => self.validate_ldp(),
            _ => Ok(()),
        }
    }

    fn validate_ldp(&self) -> Result<(), PlanError> {
        check(self.quantizer == Quantizer::Sbm, "quantizer", || {
            "--policy ldp: needs --quantizer sbm (its step-size gradient is derived for SBM)".into()
        })?;
        check(!self.prt && self.schedule == "static", "schedule", || {
            format!(
                "--policy ldp: learns the bits itself; drop --schedule {} / --prt",
                self.schedule
            )
        })?;
        let target = self.target;
        check(target > 0.0 && target <= 1.0, "target", || {
            format!("--target {target}: must be a fraction of the static forward cost in (0, 1]")
        })?;
        check(self.bits.min < self.bits.max, "bits", || {
            format!(
                "--policy ldp --bits {}: LDP learns bits within a range; give MIN:MAX such as 3:8",
                self.bits
            )
        })?;
        check(
            self.grad_bits.min == self.grad_bits.max,
            "grad_bits",
            || {
                format!(
                    "--grad-bits {}: LDP keeps one fixed backward precision",
                    self.grad_bits
                )
            },
        )
    }

    /// The schedule (or PFQ's stages) and the PRT, when the run's length is known without the
    /// data; a `file:` schedule is read when the run is set up, not here.
    fn validate_schedule(&self) -> Result<(), PlanError> {
        if self.policy == PolicyKind::Ldp {
            return Ok(());
        }
        if self.schedule == "pfq" {
            return self
                .pfq_config()
                .validate()
                .map_err(|e| PlanError::of_setting(&e, "pfq_fw"));
        }
        let Some(iterations) = self.fixed_iterations() else {
            return Ok(());
        };
        if !self.schedule.trim_start().starts_with("file:") {
            self.schedule_args(iterations)
                .build()
                .map_err(|e| PlanError::of_schedule(&e))?;
        }
        self.check_prt(iterations)
    }

    /// The Precision Range Test's rules against a run of `iterations`: its start below the top
    /// of `bits`, and its steps within the run.
    pub fn check_prt(&self, iterations: u64) -> Result<(), PlanError> {
        let Some(cfg) = self.prt_config() else {
            return Ok(());
        };
        let Some(steps) = cfg.max_bits.checked_sub(cfg.start_bits) else {
            return Err(PlanError::new(
                "prt_start_bits",
                format!(
                    "--prt-start-bits {}: above the top of --bits ({})",
                    cfg.start_bits, cfg.max_bits
                ),
            ));
        };
        let steps = u64::from(steps) + 1;
        let Some(test) = steps.checked_mul(cfg.iters_per_step) else {
            return Err(PlanError::new(
                "prt_iters_per_step",
                format!(
                    "--prt-iters-per-step {}: {steps} steps of it overflow",
                    cfg.iters_per_step
                ),
            ));
        };
        check(test <= iterations, "prt", || {
            format!(
                "--prt: the test may take {test} iterations ({steps} steps × --prt-iters-per-step {}), more than the run's {iterations}",
                cfg.iters_per_step
            )
        })?;
        cfg.validate()
            .map_err(|e| PlanError::of_setting(&e, "prt_window"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> TrainPlan {
        TrainPlan {
            model: "zoo:lenet5".into(),
            data: "synthetic".into(),
            ..TrainPlan::default()
        }
    }

    #[test]
    fn data_is_checked_where_it_says_it_is() {
        let with = |data: &str| TrainPlan {
            data: data.into(),
            ..plan()
        };
        assert_eq!(with("synthetic").check_data_present(), Ok(()));
        let dir = std::env::temp_dir();
        assert_eq!(
            with(&format!("mnist:{}", dir.display())).check_data_present(),
            Ok(())
        );
        for (data, says) in [
            ("mnist:/no/such/dir", "directory /no/such/dir not found"),
            ("cifar10", "needs a directory (cifar10:DIR)"),
            ("text:/no/such/file.txt", "/no/such/file.txt not found"),
            ("imagenet:/x", "unknown dataset kind `imagenet`"),
            ("synthetic:/x", "takes no directory"),
        ] {
            let e = with(data).check_data_present().unwrap_err();
            assert!(e.key == "data" && e.message.contains(says), "{data}: {e:?}");
        }
    }

    #[test]
    fn rules_name_their_key() {
        assert_eq!(plan().validate(), Ok(()));
        let cases: Vec<(Box<dyn Fn(&mut TrainPlan)>, &str, &str)> = vec![
            (Box::new(|p| p.batch = 0), "batch", "--batch"),
            (Box::new(|p| p.bits = Range::new(9, 3)), "bits", "--bits"),
            (
                Box::new(|p| p.iters = Some(0)),
                "iters",
                "at least 1 iteration",
            ),
            (
                Box::new(|p| p.val_split = f64::NAN),
                "val_split",
                "--val-split NaN",
            ),
            (
                Box::new(|p| p.momentum = f32::INFINITY),
                "momentum",
                "--momentum inf",
            ),
            (
                Box::new(|p| p.max_loss = f32::NAN),
                "max_loss",
                "--max-loss",
            ),
            (Box::new(|p| p.classes = Some(0)), "classes", "--classes 0"),
            (
                Box::new(|p| p.test_subset = Some(0)),
                "test_subset",
                "--test-subset",
            ),
            (
                Box::new(|p| p.clip_grad = Some(0.0)),
                "clip_grad",
                "--clip-grad 0",
            ),
            (
                Box::new(|p| {
                    p.data = "mnist:/data".into();
                    p.seq_len = Some(16)
                }),
                "seq_len",
                "has no sequences",
            ),
            (
                Box::new(|p| p.target_cp = Some(3.0)),
                "target_cp",
                "needs --policy dfq",
            ),
            (
                Box::new(|p| {
                    p.policy = PolicyKind::Ldp;
                    p.bits = Range::new(5, 5);
                }),
                "bits",
                "LDP learns bits within a range",
            ),
            (
                Box::new(|p| {
                    p.policy = PolicyKind::Dfq;
                    p.quantizer = Quantizer::Dorefa;
                }),
                "quantizer",
                "SBM quantizer only",
            ),
            (
                Box::new(|p| p.schedule = "wavy".into()),
                "schedule",
                "'wavy'",
            ),
            (
                Box::new(|p| {
                    p.schedule = "cosine".into();
                    p.iters = Some(10);
                }),
                "cycles",
                "32 cycles do not fit in 10 iterations",
            ),
            (
                Box::new(|p| {
                    p.prt = true;
                    p.iters = Some(100);
                }),
                "prt",
                "more than the run's 100",
            ),
            (
                Box::new(|p| {
                    p.policy = PolicyKind::Dfq;
                    p.weight_bits = 1;
                }),
                "weight_bits",
                "--weight-bits",
            ),
            (Box::new(|p| p.iters = Some(5)), "", ""),
            (Box::new(|p| p.model.clear()), "model", "--model and --data"),
        ];
        for (change, key, needle) in cases {
            let mut p = plan();
            change(&mut p);
            match p.validate() {
                Ok(()) => assert_eq!(key, "", "{needle}: accepted"),
                Err(e) => {
                    assert_eq!(e.key, key, "{e}");
                    assert!(e.message.contains(needle), "{key}: {e}");
                }
            }
        }
    }
}
