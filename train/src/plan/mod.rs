//! Plans: typed, serialisable requests. [`TrainPlan`] is one training run — everything `cptsim
//! train`'s flags say, each key the flag's name with `_` for `-` — and [`CostPlan`] one cost of a
//! run (`cptsim run`). A plan reads from JSON or TOML (every key optional but `model`/`data`,
//! defaults as the command line's), validates itself with errors naming the key
//! ([`PlanError`]), and is what a checkpoint stores, so `--resume` does not depend on flags.

mod configs;
mod cost;
mod legacy;
mod resume;
mod validate;
pub mod values;

use std::path::PathBuf;

use cptsim_traces::QuantScope;
use serde::{Deserialize, Serialize};

pub use cost::{CostPlan, DEFAULT_COST_BATCH, DEFAULT_COST_ITERATIONS, NO_ACCEL};
pub(crate) use legacy::upgrade as upgrade_v2;
pub use validate::PlanError;
pub use values::{
    AccountingKind, CandidatesKind, Choice, Convention, DfqExecKind, EvalBitsKind, FwBw, InitKind,
    LrKind, MappingKind, PolicyKind, Quantizer, Range, ScopePreset, Stages,
};

/// Version of [`TrainPlan`]'s stored form; a checkpoint with an older one is converted
/// (version 2 nested the PFQ/PRT/DFQ/LDP keys), a newer one rejected.
///
/// 3: one flat table of keys, each named as its `cptsim train` flag.
pub const PLAN_VERSION: u32 = 3;

/// The `data` kinds.
pub const DATA_KINDS: &str = "mnist:DIR, fashion-mnist:DIR, cifar10:DIR, cifar100:DIR, \
     synthetic, text:FILE, ptb:DIR, wikitext:DIR";

/// Iterations when neither `iters` nor `epochs` is given, and the default `eval_every`.
pub const DEFAULT_ITERATIONS: u64 = 390;

/// Keys that say how one invocation runs, not what it computes: they may differ when a run is
/// resumed.
pub const INVOCATION_KEYS: [&str; 4] = ["out", "stop_at", "checkpoint_minutes", "threads"];

/// One training run: the model, data, precision policy and its bits, quantizer, length, optimiser,
/// evaluation and checkpoint cadence, outputs. Field names are the keys (and, with `-` for `_`,
/// the `cptsim train` flags); see `cptsim train --help` for each.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainPlan {
    /// `zoo:NAME` or an ONNX file.
    pub model: String,
    /// `mnist:DIR`, `fashion-mnist:DIR`, `cifar10:DIR`, `cifar100:DIR`, `synthetic`,
    /// `text:FILE`, `ptb:DIR` or `wikitext:DIR`.
    pub data: String,
    pub policy: PolicyKind,
    /// A schedule name of the traces crate, or `pfq` (the loss-plateau indicator).
    pub schedule: String,
    pub bits: Range,
    pub grad_bits: Range,
    pub cycles: u64,
    pub convention: Convention,
    pub quantizer: Quantizer,
    pub quantize_first: Option<bool>,
    pub quantize_last: Option<bool>,
    pub quantize_shortcut: Option<bool>,
    pub quantize_depthwise: Option<bool>,
    /// How the quantized GEMMs multiply: `fp32` or `int` (SBM's codes on integer sums).
    pub arithmetic: String,
    /// Accumulator of the integer GEMMs: `exact`, `BITS[:wrap|saturate]` or `fw=…`.
    pub accumulator: String,
    /// Fixed bits of depthwise convs.
    pub depthwise_bits: Option<FwBw>,
    /// Iterations (default [`DEFAULT_ITERATIONS`] unless `epochs`).
    pub iters: Option<u64>,
    pub epochs: Option<u64>,
    pub batch: usize,
    pub seq_len: Option<usize>,
    pub lr: f32,
    pub lr_schedule: LrKind,
    pub eval_bits: EvalBitsKind,
    pub warmup: u64,
    pub momentum: f32,
    pub weight_decay: f32,
    pub clip_grad: Option<f32>,
    pub seed: u64,
    pub init: InitKind,
    pub classes: Option<usize>,
    pub reinit_head: bool,
    pub subset: Option<usize>,
    /// Evaluate on the first N test samples only.
    pub test_subset: Option<usize>,
    pub val_split: f64,
    pub eval_every: u64,
    pub no_augment: bool,
    pub max_loss: f32,
    pub stop_on_collapse: bool,
    pub pfq_fw: Stages,
    pub pfq_bw: Stages,
    pub pfq_eps: f64,
    pub pfq_alpha: f64,
    pub pfq_check_every: Option<u64>,
    pub target_cp: Option<f64>,
    pub weight_bits: u32,
    pub candidates: CandidatesKind,
    pub cp_step: f64,
    pub cp_turns: usize,
    pub dfq_beta: f64,
    pub dfq_relax: f64,
    pub dfq_exec: DfqExecKind,
    pub prt: bool,
    pub prt_start_bits: u8,
    pub prt_iters_per_step: u64,
    pub prt_window: u64,
    pub prt_threshold: f64,
    /// LDP's target forward cost T as a fraction of the static cost.
    pub target: f64,
    pub ldp_mapping: MappingKind,
    pub ldp_init_bits: Option<f64>,
    pub ldp_lr: f64,
    pub ldp_alpha: f64,
    pub ldp_eps: f64,
    pub ldp_momentum: f64,
    pub ldp_weight_decay: f64,
    pub ldp_no_clip: bool,
    /// Directory of the outputs (none: nothing is written).
    pub out: Option<PathBuf>,
    /// Stop (checkpoint written) after this many iterations, as if interrupted.
    pub stop_at: Option<u64>,
    /// Minutes between checkpoints besides those at evaluations (0: only those).
    pub checkpoint_minutes: f64,
    /// Worker threads (default: the calling thread's rayon pool).
    pub threads: Option<usize>,
}

impl Default for TrainPlan {
    /// The command line's defaults, with no model or data.
    fn default() -> Self {
        Self {
            model: String::new(),
            data: String::new(),
            policy: PolicyKind::Schedule,
            schedule: "static".into(),
            bits: Range::new(3, 8),
            grad_bits: Range::new(8, 8),
            cycles: 32,
            convention: Convention::Cpt,
            quantizer: Quantizer::Sbm,
            quantize_first: None,
            quantize_last: None,
            quantize_shortcut: None,
            quantize_depthwise: None,
            arithmetic: "fp32".into(),
            accumulator: "exact".into(),
            depthwise_bits: None,
            iters: None,
            epochs: None,
            batch: 128,
            seq_len: None,
            lr: 0.1,
            lr_schedule: LrKind::Cosine,
            eval_bits: EvalBitsKind::Current,
            warmup: 0,
            momentum: 0.9,
            weight_decay: 1e-4,
            clip_grad: None,
            seed: 0,
            init: InitKind::Seed,
            classes: None,
            reinit_head: false,
            subset: None,
            test_subset: None,
            val_split: 0.0,
            eval_every: DEFAULT_ITERATIONS,
            no_augment: false,
            max_loss: 1000.0,
            stop_on_collapse: false,
            pfq_fw: Stages(vec![3, 4, 6, 8]),
            pfq_bw: Stages(vec![6, 6, 8, 8]),
            pfq_eps: 0.05,
            pfq_alpha: 0.3,
            pfq_check_every: None,
            target_cp: None,
            weight_bits: 4,
            candidates: CandidatesKind::Cifar,
            cp_step: 0.5,
            cp_turns: 3,
            dfq_beta: 1e-3,
            dfq_relax: 0.0,
            dfq_exec: DfqExecKind::Selected,
            prt: false,
            prt_start_bits: 2,
            prt_iters_per_step: 60,
            prt_window: 10,
            prt_threshold: 4.0,
            target: 0.6,
            ldp_mapping: MappingKind::Scaled,
            ldp_init_bits: None,
            ldp_lr: 0.1,
            ldp_alpha: 1.0,
            ldp_eps: 1e-8,
            ldp_momentum: 0.0,
            ldp_weight_decay: 0.0,
            ldp_no_clip: false,
            out: None,
            stop_at: None,
            checkpoint_minutes: 10.0,
            threads: None,
        }
    }
}

/// A plan's keys as JSON, floats in their shortest form (an `f32` 0.1 is `0.1`, not the
/// `0.10000000149011612` of its widening to `f64`).
pub(crate) fn to_json<T: Serialize>(plan: &T) -> serde_json::Map<String, serde_json::Value> {
    let text = serde_json::to_string(plan).unwrap_or_default();
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// `--flag` of a key.
pub fn flag(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

/// The command-line text of a key's JSON value (`None`: a switch left off or an unset option).
pub(crate) fn arg_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) if items.is_empty() => None,
        serde_json::Value::Array(items) => {
            let texts: Vec<String> = items.iter().filter_map(arg_text).collect();
            Some(texts.join(","))
        }
        other => Some(other.to_string()),
    }
}

/// The `--flag=value` arguments of `keys` of a plan, in that order: switches (keys whose default
/// is `false`) as a bare `--flag` when true and left out when false.
pub(crate) fn args_of<T: Serialize + Default>(plan: &T, keys: &[&str]) -> Vec<String> {
    let (json, defaults) = (to_json(plan), to_json(&T::default()));
    let mut argv = Vec::new();
    for key in keys {
        let Some(value) = json.get(*key) else {
            continue;
        };
        if matches!(defaults.get(*key), Some(serde_json::Value::Bool(false))) {
            if value == &serde_json::Value::Bool(true) {
                argv.push(flag(key));
            }
            continue;
        }
        if let Some(text) = arg_text(value) {
            argv.push(format!("{}={text}", flag(key)));
        }
    }
    argv
}

/// How long a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// A number of iterations.
    Iterations(u64),
    /// Passes over the training set (iterations follow from its size and the batch).
    Epochs(u64),
}

impl TrainPlan {
    /// How long the run is: `iters`, `epochs`, or [`DEFAULT_ITERATIONS`].
    pub fn length(&self) -> Length {
        match (self.iters, self.epochs) {
            (Some(n), _) => Length::Iterations(n),
            (None, Some(e)) => Length::Epochs(e),
            (None, None) => Length::Iterations(DEFAULT_ITERATIONS),
        }
    }

    /// Every key.
    pub fn keys() -> Vec<String> {
        to_json(&Self::default()).keys().cloned().collect()
    }

    /// The plan as JSON: every key, with floats in their shortest form. Two plans of the same run
    /// have the same canonical form ([`TrainPlan::canonical`] first for the defaults).
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        to_json(self)
    }

    /// The same run with the defaults that depend on other keys made explicit: `iters` when
    /// neither it nor `epochs` is given.
    pub fn canonical(&self) -> Self {
        let mut plan = self.clone();
        if plan.iters.is_none() && plan.epochs.is_none() {
            plan.iters = Some(DEFAULT_ITERATIONS);
        }
        plan
    }

    /// The `cptsim train` arguments that set `keys` to this plan's values.
    pub fn args(&self, keys: &[&str]) -> Vec<String> {
        args_of(self, keys)
    }

    /// The quantization scope the `quantize_*` keys set.
    pub fn scope(&self) -> QuantScope {
        QuantScope {
            first: self.quantize_first,
            last: self.quantize_last,
            shortcut: self.quantize_shortcut,
            depthwise: self.quantize_depthwise,
        }
    }

    /// Whether `data` names a text corpus (a language model's data).
    pub fn is_text(&self) -> bool {
        matches!(
            self.data.split_once(':').map(|(kind, _)| kind),
            Some("text" | "ptb" | "wikitext")
        )
    }

    /// Iterations when they do not depend on the data (`epochs` not given).
    pub fn fixed_iterations(&self) -> Option<u64> {
        match self.length() {
            Length::Iterations(n) => Some(n),
            Length::Epochs(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_and_keys_are_the_flags() {
        let plan = TrainPlan::default();
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(serde_json::from_value::<TrainPlan>(json).unwrap(), plan);
        let keys = TrainPlan::keys();
        assert!(keys.contains(&"grad_bits".to_string()));
        assert!(keys.contains(&"ldp_no_clip".to_string()));
        assert_eq!(plan.to_json()["lr"], serde_json::json!(0.1));
        let from_toml: TrainPlan = toml::from_str("model = \"zoo:lenet5\"\nbits = 8\n").unwrap();
        assert_eq!(from_toml.bits, Range::new(8, 8));
        let e = toml::from_str::<TrainPlan>("modle = \"x\"").unwrap_err();
        assert!(e.to_string().contains("modle"), "{e}");
    }

    #[test]
    fn args_name_each_key_as_its_flag() {
        let plan = TrainPlan {
            lr: 0.05,
            no_augment: true,
            bits: Range::new(3, 8),
            ..TrainPlan::default()
        };
        assert_eq!(
            plan.args(&["lr", "no_augment", "reinit_head", "bits", "classes"]),
            ["--lr=0.05", "--no-augment", "--bits=3:8"]
        );
    }
}
