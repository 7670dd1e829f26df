//! [`CostPlan`]: one cost of a run in BitOPs and on accelerators — a precision schedule's
//! synthesised trace, or a trace file — as `cptsim run`'s flags say it, each key the flag's name
//! with `_` for `-`.
//!
//! It lives beside [`super::TrainPlan`] because the two share their value types and a study
//! (`cptsim sweep`) builds both for every cell: a training cell's cost is a `CostPlan` of the
//! trace its `TrainPlan` records.

use std::path::PathBuf;

use cptsim_traces::QuantScope;
use serde::{Deserialize, Serialize};

use super::validate::PlanError;
use super::values::{AccountingKind, Convention, Range, ScopePreset};
use super::{args_of, to_json};

/// Iterations of a synthesised run without `iters`: the papers' CIFAR run (a zoo sequence model
/// brings its own).
pub const DEFAULT_COST_ITERATIONS: u64 = 64_000;

/// Samples per iteration without `batch` (a zoo sequence model brings its own).
pub const DEFAULT_COST_BATCH: u64 = 128;

/// One cost of a run. Keys a trace file carries itself (`schedule`, `cycles`, `iters`, `batch`,
/// `policy`, `convention`) are unset with `trace`; unset, a synthesised run takes the command
/// line's defaults ([`CostPlan::canonical`] spells them out).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CostPlan {
    /// `zoo:NAME` or an ONNX file.
    pub model: String,
    /// A schedule name (default `cosine`).
    pub schedule: Option<String>,
    /// Forward bits (default 3:8; with `trace`, the trace's own).
    pub bits: Option<Range>,
    /// Backward bits (default 8; with `trace`, the trace's own).
    pub grad_bits: Option<Range>,
    /// Cycles of a cyclic schedule (default 32).
    pub cycles: Option<u64>,
    pub iters: Option<u64>,
    pub batch: Option<u64>,
    pub seq_len: Option<usize>,
    pub vocab: Option<usize>,
    pub accounting: AccountingKind,
    /// Which layers the synthesised trace quantizes (default `all`).
    pub policy: Option<ScopePreset>,
    pub quantize_first: Option<bool>,
    pub quantize_last: Option<bool>,
    pub quantize_shortcut: Option<bool>,
    pub quantize_depthwise: Option<bool>,
    /// Default `cpt`.
    pub convention: Option<Convention>,
    /// Also write the synthesised trace here.
    pub save_trace: Option<PathBuf>,
    /// Cost this trace file instead of synthesising one.
    pub trace: Option<PathBuf>,
    /// Accelerators (built-in names or TOML config paths); empty, `cptsim run`'s default ones;
    /// [`NO_ACCEL`] alone, none (BitOPs only).
    pub accel: Vec<String>,
    /// Directory of the per-accelerator CSV reports.
    pub report: Option<PathBuf>,
    pub epoch_iters: u64,
}

impl Default for CostPlan {
    fn default() -> Self {
        Self {
            model: String::new(),
            schedule: None,
            bits: None,
            grad_bits: None,
            cycles: None,
            iters: None,
            batch: None,
            seq_len: None,
            vocab: None,
            accounting: AccountingKind::Paper,
            policy: None,
            quantize_first: None,
            quantize_last: None,
            quantize_shortcut: None,
            quantize_depthwise: None,
            convention: None,
            save_trace: None,
            trace: None,
            accel: Vec::new(),
            report: None,
            epoch_iters: 391,
        }
    }
}

/// The `accel` value that asks for no accelerator.
pub const NO_ACCEL: &str = "none";

/// Keys a trace file decides itself.
const TRACE_OWN: [&str; 7] = [
    "schedule",
    "cycles",
    "iters",
    "batch",
    "policy",
    "convention",
    "save_trace",
];

/// The `quantize_*` keys.
const SCOPE_KEYS: [&str; 4] = [
    "quantize_first",
    "quantize_last",
    "quantize_shortcut",
    "quantize_depthwise",
];

impl CostPlan {
    /// Whether the cost includes accelerators (the default ones, or those named), not BitOPs
    /// alone.
    pub fn costs_on_accelerators(&self) -> bool {
        self.accel != [NO_ACCEL]
    }

    /// Every key.
    pub fn keys() -> Vec<String> {
        to_json(&Self::default()).keys().cloned().collect()
    }

    /// The plan as JSON (every key; floats in their shortest form).
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        to_json(self)
    }

    /// The `cptsim run` arguments that set `keys` to this plan's values.
    pub fn args(&self, keys: &[&str]) -> Vec<String> {
        args_of(self, keys)
    }

    /// The iterations and batch a synthesised run of `model` takes when not given: a zoo
    /// sequence model's paper run, else 64 000 of 128.
    pub fn lengths(model: &str) -> (u64, u64) {
        let entry = model
            .strip_prefix("zoo:")
            .and_then(cptsim_models::zoo::seq::entry);
        entry.map_or((DEFAULT_COST_ITERATIONS, DEFAULT_COST_BATCH), |e| {
            (e.iters, e.batch)
        })
    }

    /// Iterations of a synthesised run: `iters`, else [`CostPlan::lengths`]'.
    pub fn iterations(&self) -> u64 {
        self.iters.unwrap_or_else(|| Self::lengths(&self.model).0)
    }

    /// Samples per iteration of a synthesised run: `batch`, else [`CostPlan::lengths`]'.
    pub fn batch_size(&self) -> u64 {
        self.batch.unwrap_or_else(|| Self::lengths(&self.model).1)
    }

    /// The quantization scope of a synthesised run: `policy`'s preset with the roles the
    /// `quantize_*` keys set.
    pub fn scope(&self) -> QuantScope {
        let base = match self.policy.unwrap_or(ScopePreset::All) {
            ScopePreset::All => QuantScope::ALL,
            ScopePreset::Cifar => QuantScope::CPT_CIFAR,
            ScopePreset::Imagenet => QuantScope::CPT_IMAGENET,
            ScopePreset::Family => QuantScope::default(),
        };
        QuantScope {
            first: self.quantize_first,
            last: self.quantize_last,
            shortcut: self.quantize_shortcut,
            depthwise: self.quantize_depthwise,
        }
        .or(base)
    }

    /// The same cost with every default a synthesised run takes spelled out (a trace's plan as
    /// it is): two plans of the same cost have the same canonical form.
    pub fn canonical(&self) -> Self {
        if self.trace.is_some() {
            return self.clone();
        }
        Self {
            schedule: Some(self.schedule.clone().unwrap_or_else(|| "cosine".into())),
            bits: Some(self.bits.unwrap_or(Range::new(3, 8))),
            grad_bits: Some(self.grad_bits.unwrap_or(Range::new(8, 8))),
            cycles: Some(self.cycles.unwrap_or(32)),
            iters: Some(self.iterations()),
            batch: Some(self.batch_size()),
            policy: Some(self.policy.unwrap_or(ScopePreset::All)),
            convention: Some(self.convention.unwrap_or(Convention::Cpt)),
            ..self.clone()
        }
    }

    /// The schedule request of a synthesised run.
    pub fn schedule_args(&self) -> cptsim_traces::schedule::ScheduleArgs {
        let c = self.canonical();
        let name = c.schedule.unwrap_or_default();
        cptsim_traces::schedule::ScheduleArgs::new(name, self.iterations())
            .cycles(c.cycles.unwrap_or(32))
            .bits(c.bits.unwrap_or(Range::new(3, 8)).bit_range())
            .grad_bits(c.grad_bits.unwrap_or(Range::new(8, 8)).bit_range())
            .convention(c.convention.unwrap_or(Convention::Cpt).rule())
    }

    /// Checks every rule that needs no model, trace file or accelerator: sizes, bit ranges, what
    /// a trace file decides itself, and the schedule (a `file:` schedule is read when costing).
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.model.is_empty() {
            return Err(PlanError::new("model", "--model is required"));
        }
        if self.batch_size() == 0 {
            return Err(PlanError::new(
                "batch",
                "--batch: a batch needs at least 1 sample",
            ));
        }
        if self.epoch_iters == 0 {
            return Err(PlanError::new(
                "epoch_iters",
                "--epoch-iters: an epoch needs at least 1 iteration",
            ));
        }
        if self.report.is_some() && !self.costs_on_accelerators() {
            return Err(PlanError::new(
                "report",
                "--report: needs an accelerator to report on (drop --accel none)",
            ));
        }
        for (key, r) in [("bits", self.bits), ("grad_bits", self.grad_bits)] {
            if let Some(r) = r {
                let flag = if key == "bits" {
                    "--bits"
                } else {
                    "--grad-bits"
                };
                Range::parse_checked(flag, &r.to_string()).map_err(|m| PlanError::new(key, m))?;
            }
        }
        if self.trace.is_some() {
            return self.validate_trace();
        }
        let name = self.schedule.as_deref().unwrap_or("cosine");
        if !name.trim_start().starts_with("file:") {
            self.schedule_args()
                .build()
                .map_err(|e| PlanError::of_schedule(&e))?;
        }
        Ok(())
    }

    fn validate_trace(&self) -> Result<(), PlanError> {
        let json = self.to_json();
        let set = |key: &str| json.get(key).is_some_and(|v| !v.is_null());
        if let Some(key) = SCOPE_KEYS.iter().find(|k| set(k)) {
            return Err(PlanError::new(
                key,
                format!(
                    "{}: a --trace file carries its own scope (the layers it ran in fp32)",
                    super::flag(key)
                ),
            ));
        }
        if let Some(key) = TRACE_OWN.iter().find(|k| set(k)) {
            return Err(PlanError::new(
                key,
                format!(
                    "{}: not with --trace (a trace file carries its own)",
                    super::flag(key)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> CostPlan {
        CostPlan {
            model: "zoo:resnet20".into(),
            ..CostPlan::default()
        }
    }

    #[test]
    fn defaults_are_spelled_out_and_rules_name_the_key() {
        let c = plan().canonical();
        assert_eq!(c.schedule.as_deref(), Some("cosine"));
        assert_eq!(
            (c.iters, c.batch, c.cycles),
            (Some(64_000), Some(128), Some(32))
        );
        assert_eq!(plan().validate(), Ok(()));
        let err = |p: CostPlan| p.validate().unwrap_err();
        let e = err(CostPlan {
            iters: Some(10),
            ..plan()
        });
        assert_eq!(e.key, "cycles");
        let e = err(CostPlan {
            schedule: Some("wavy".into()),
            ..plan()
        });
        assert!(e.key == "schedule" && e.message.contains("'wavy'"), "{e}");
        let e = err(CostPlan {
            trace: Some("t.pb".into()),
            quantize_last: Some(true),
            ..plan()
        });
        assert!(
            e.message.starts_with("--quantize-last: a --trace file"),
            "{e}"
        );
        let e = err(CostPlan {
            batch: Some(0),
            ..plan()
        });
        assert_eq!(e.message, "--batch: a batch needs at least 1 sample");
        let file = CostPlan {
            schedule: Some("file:no/such.csv".into()),
            ..plan()
        };
        assert_eq!(
            file.validate(),
            Ok(()),
            "a schedule file is read when costing"
        );
        assert_eq!(
            plan().args(&["model", "accel", "bits"]),
            ["--model=zoo:resnet20"]
        );
    }
}
