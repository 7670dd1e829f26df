//! A cell's keys as the typed plans of the train crate: a [`TrainPlan`] for a training cell (its
//! `[train]` table and the grid/`[[cell]]` keys that are train keys), and the [`CostPlan`] of its
//! cost (`cptsim run`'s keys; a training cell's costs its trace). Values are read as a command
//! line reads them — a TOML string `"8"` and an integer `8` are the same value — and each plan
//! validates itself, so a cell that `train` or `run` would reject fails before anything runs.

use std::fmt;
use std::path::Path;

use anyhow::bail;
use cptsim_train::plan::NO_ACCEL;
use cptsim_train::{CostPlan, TrainPlan};
use serde::de::value::MapDeserializer;
use serde::de::DeserializeOwned;
use serde::de::{self, Deserializer, IntoDeserializer, Visitor};

use super::grid::{CellSpec, ACCEL};
use super::plan::{Fixed, Scalar};

/// Keys the sweep sets itself (each cell writes into `DIR/cells/ID/`), or that say how one
/// process prints or runs.
const RESERVED: [&str; 10] = [
    "format",
    "report",
    "trace",
    "save_trace",
    "out",
    "resume",
    "stop_at",
    "threads",
    "help",
    "version",
];

/// A cell's plans, validated.
#[derive(Clone, Debug)]
pub struct Plans {
    /// The training run (plans with a `[train]` table).
    pub train: Option<TrainPlan>,
    /// The cost: of the training run's trace, or of a synthesised schedule.
    pub cost: CostPlan,
}

/// A key whose value a plan rejects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError {
    pub key: String,
    pub message: String,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key `{}`: {}", self.key, self.message)
    }
}

/// A plan's keys as flags (sorted), for messages.
fn flags(keys: &[String]) -> String {
    let mut names: Vec<String> = keys
        .iter()
        .filter(|k| !RESERVED.contains(&k.as_str()))
        .map(|k| k.replace('_', "-"))
        .collect();
    names.sort_unstable();
    names.join(", ")
}

/// The keys of the plans (`train`: of `cptsim train`, else of `cptsim run`).
fn keys_of(train: bool) -> Vec<String> {
    match train {
        true => TrainPlan::keys(),
        false => CostPlan::keys(),
    }
}

/// Whether `key` (`-` or `_`) is a key of `keys` the sweep does not set itself.
fn has(keys: &[String], key: &str) -> bool {
    let key = key.replace('-', "_");
    !RESERVED.contains(&key.as_str()) && keys.contains(&key)
}

/// Checks that every plan key is a key of the commands its cells run (`train`: the plan has a
/// `[train]` table); the error names the key and the valid ones.
pub fn check_keys(keys: &[String], train: bool) -> anyhow::Result<()> {
    let (run_keys, train_keys) = (keys_of(false), keys_of(true));
    for key in keys {
        let name = key.replace('-', "_");
        if name == ACCEL {
            continue;
        }
        if RESERVED.contains(&name.as_str()) {
            let where_ = if name == "out" {
                "; the study's DIR is the plan's top-level `out` or `sweep run --out`"
            } else {
                ""
            };
            bail!(
                "plan key `{key}` is set by the sweep itself (each cell writes into \
                 DIR/cells/ID/){where_}"
            );
        }
        let (in_run, in_train) = (has(&run_keys, key), has(&train_keys, key));
        if !in_run && !in_train {
            bail!(
                "plan key `{key}` is neither a flag of `cptsim run` nor of `cptsim train`; \
                 `cptsim run` flags: {}; `cptsim train` flags: {}",
                flags(&run_keys),
                flags(&train_keys)
            );
        }
        if !train && !in_run {
            bail!(
                "plan key `{key}` is a flag of `cptsim train`, but the plan has no [train] \
                 table, so its cells only cost (`cptsim run`), whose flags are: {}",
                flags(&run_keys)
            );
        }
    }
    Ok(())
}

/// The cell's keys, `[train]`'s first, with `_` names: those of the train plan and those of the
/// cost plan (a training cell's keys go to its training run when it has them).
pub fn split_keys<'a>(
    train: Option<&'a Fixed>,
    spec: &'a CellSpec,
) -> (Vec<(String, &'a Scalar)>, Vec<(String, &'a Scalar)>) {
    let all = train.into_iter().flatten().chain(&spec.keys);
    let train_keys = keys_of(true);
    let (mut to_train, mut to_cost) = (Vec::new(), Vec::new());
    for (key, value) in all.filter(|(k, _)| k != ACCEL) {
        let name = key.replace('-', "_");
        match train.is_some() && has(&train_keys, &name) {
            true => to_train.push((name, value)),
            false => to_cost.push((name, value)),
        }
    }
    (to_train, to_cost)
}

/// The accelerators a cell is costed on: those the plan names, else none (BitOPs alone, whatever
/// `cptsim run`'s own default).
fn cell_accels(spec: &CellSpec) -> Vec<String> {
    match spec.accel.is_empty() {
        true => vec![NO_ACCEL.into()],
        false => spec.accel.clone(),
    }
}

/// The cell's plans, without its directory (`out`, `trace`, `report` unset), not validated yet
/// ([`Plans::validate`]).
pub fn plans(train: Option<&Fixed>, spec: &CellSpec) -> Result<Plans, KeyError> {
    let (to_train, to_cost) = split_keys(train, spec);
    let model = to_train
        .iter()
        .chain(&to_cost)
        .find(|(k, _)| k == "model")
        .map(|(_, v)| v.text());
    let Some(model) = model else {
        return Err(KeyError {
            key: "model".into(),
            message: "missing: every cell needs a model (zoo:NAME or an ONNX file)".into(),
        });
    };
    Ok(match train {
        Some(_) => {
            let plan: TrainPlan = read(&to_train)?;
            let mut cost: CostPlan = read(&to_cost)?;
            cost.model = model;
            cost.accel = cell_accels(spec);
            Plans {
                train: Some(plan),
                cost,
            }
        }
        None => {
            let mut cost: CostPlan = read(&to_cost)?;
            cost.accel = cell_accels(spec);
            Plans { train: None, cost }
        }
    })
}

impl Plans {
    /// Checks both plans as `cptsim train` and `cptsim run` would.
    pub fn validate(&self) -> Result<(), KeyError> {
        let rejected = |e: cptsim_train::PlanError| KeyError {
            key: e.key.clone(),
            message: e.message,
        };
        if let Some(t) = &self.train {
            t.validate().map_err(rejected)?;
        }
        // A training cell's cost reads the trace its run writes; checked as such.
        let mut cost = self.cost.clone();
        if self.train.is_some() {
            cost.trace = Some("trace.pb".into());
        }
        cost.validate().map_err(rejected)
    }

    /// What identifies the run: both plans with their defaults spelled out, as JSON. Two cells
    /// with the same identity are the same run.
    pub fn identity(&self) -> String {
        let train = self.train.as_ref().map(|t| t.canonical().to_json());
        let cost = self.cost.canonical().to_json();
        serde_json::json!({ "train": train, "cost": cost }).to_string()
    }

    /// The plans writing into `cell_dir`: the training run's `out` (`run/`), the cost's trace
    /// (`run/trace.pb`) and report (`report/`, when costed on accelerators).
    pub fn in_dir(mut self, cell_dir: &Path) -> Self {
        let run = cell_dir.join("run");
        if let Some(t) = &mut self.train {
            self.cost.trace = Some(run.join("trace.pb"));
            t.out = Some(run);
        }
        if self.cost.costs_on_accelerators() {
            self.cost.report = Some(cell_dir.join("report"));
        }
        self
    }
}

/// A plan from `(key, value)` pairs; a rejected value is named by its key.
fn read<T: DeserializeOwned>(entries: &[(String, &Scalar)]) -> Result<T, KeyError> {
    let map = |items: &[(String, &Scalar)]| {
        let pairs: Vec<(String, ScalarDe)> = items
            .iter()
            .map(|(k, v)| (k.clone(), ScalarDe((*v).clone())))
            .collect();
        MapDeserializer::<_, ValueError>::new(pairs.into_iter())
    };
    match T::deserialize(map(entries)) {
        Ok(plan) => Ok(plan),
        Err(whole) => {
            // Which key: the first whose value alone does not read.
            for one in entries.chunks(1) {
                if let Err(e) = T::deserialize(map(one)) {
                    return Err(KeyError {
                        key: one[0].0.clone(),
                        message: e.0,
                    });
                }
            }
            Err(KeyError {
                key: entries.first().map_or_else(String::new, |e| e.0.clone()),
                message: whole.0,
            })
        }
    }
}

/// Why a value does not read.
#[derive(Debug)]
struct ValueError(String);

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValueError {}

impl de::Error for ValueError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

/// One plan value, read as its command-line text where the plan wants text or a number.
struct ScalarDe(Scalar);

impl ScalarDe {
    fn text_or_any<'de, V: Visitor<'de>>(
        self,
        v: V,
        parse: impl Fn(&str, V) -> Option<Result<V::Value, ValueError>>,
        expected: &str,
    ) -> Result<V::Value, ValueError> {
        match self.0 {
            Scalar::Str(s) => match parse(s.trim(), v) {
                Some(r) => r,
                None => Err(ValueError(format!(
                    "invalid value '{s}': expected {expected}"
                ))),
            },
            other => ScalarDe(other).deserialize_any(v),
        }
    }
}

impl<'de> IntoDeserializer<'de, ValueError> for ScalarDe {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for ScalarDe {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        match self.0 {
            Scalar::Str(s) => v.visit_string(s),
            Scalar::Int(i) => v.visit_i64(i),
            Scalar::Float(f) => v.visit_f64(f),
            Scalar::Bool(b) => v.visit_bool(b),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.text_or_any(
            v,
            |s, v| s.parse().ok().map(|b| v.visit_bool(b)),
            "true or false",
        )
    }

    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.text_or_any(
            v,
            |s, v| s.parse().ok().map(|n| v.visit_u64(n)),
            "a whole number ≥ 0",
        )
    }

    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.deserialize_u64(v)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.deserialize_u64(v)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.deserialize_u64(v)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.text_or_any(
            v,
            |s, v| s.parse().ok().map(|n| v.visit_i64(n)),
            "a whole number",
        )
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.text_or_any(v, |s, v| s.parse().ok().map(|x| v.visit_f64(x)), "a number")
    }

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        self.deserialize_f64(v)
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        v.visit_string(self.0.text())
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        v.visit_string(self.0.text())
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ValueError> {
        v.visit_some(self)
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i128 u128 char bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(keys: &[(&str, Scalar)]) -> CellSpec {
        CellSpec {
            keys: keys
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            accel: Vec::new(),
            origins: Vec::new(),
            accel_from: None,
            table: crate::cmd::sweep::spans::Table::Grid,
        }
    }

    #[test]
    fn text_and_numbers_are_the_same_values() {
        let model = ("model", Scalar::Str("zoo:lenet5".into()));
        let a = spec(&[
            model.clone(),
            ("cycles", Scalar::Int(4)),
            ("bits", Scalar::Int(8)),
        ]);
        let b = spec(&[
            model.clone(),
            ("cycles", Scalar::Str("4".into())),
            ("bits", Scalar::Str("8:8".into())),
        ]);
        let (pa, pb) = (plans(None, &a).unwrap(), plans(None, &b).unwrap());
        assert_eq!(pa.identity(), pb.identity());
        let c = spec(&[model.clone(), ("iters", Scalar::Str("many".into()))]);
        let e = plans(None, &c).unwrap_err();
        assert_eq!(e.key, "iters");
        assert!(e.message.contains("'many'"), "{e}");
        let d = spec(&[model, ("iters", Scalar::Int(10))]);
        let e = plans(None, &d).unwrap().validate().unwrap_err();
        assert!(e.key == "cycles" && e.message.contains("do not fit"), "{e}");
    }
}
