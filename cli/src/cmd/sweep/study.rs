//! A study: the plan, its output directory and its cells, every one checked before anything
//! runs — plan keys against the keys of the train crate's plans, each cell's keys read into a
//! typed [`TrainPlan`](cptsim_train::TrainPlan) / [`CostPlan`](cptsim_train::CostPlan) and
//! validated, each model and accelerator loaded once. Cells that mean the same run (values
//! spelled differently: `8` and `"8"`, `grad_bits` and `grad-bits`, a default given or not) are
//! one cell; [`Study::merged`] lists the others.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::cell::{cell_id, Cell};
use super::command;
use super::grid::{expand_counted, plan_keys, same_key, CellSpec, Expansion, TableCount, ACCEL};
use super::plan::Plan;
use super::spans::{Pos, Table};
use super::typed::{check_keys, plans, KeyError};

/// Where a study keeps its copy of the plan (what Slurm tasks, `status` and `collect` read).
pub const PLAN_COPY: &str = "plan.toml";

/// A validated plan and its cells.
#[derive(Debug)]
pub struct Study {
    pub plan: Plan,
    /// The output directory, absolute.
    pub dir: PathBuf,
    /// The plan's keys, in plan order.
    pub keys: Vec<String>,
    pub cells: Vec<Cell>,
    /// Cells of the expansion that are the same run as one of [`Study::cells`] (its index).
    pub merged: Vec<(CellSpec, usize)>,
    /// How each table's product became cells.
    pub tables: Vec<TableCount>,
}

impl Study {
    /// Reads the plan in `path` and checks it whole, models and accelerators included; the
    /// study's directory is `out`, else the plan's `out`.
    pub fn load(path: &Path, out: Option<&Path>) -> anyhow::Result<Self> {
        let study = Self::read(path, out)?;
        study
            .check_models_and_accelerators()
            .with_context(|| format!("plan {}", path.display()))?;
        Ok(study)
    }

    /// Reads the plan in `path` and builds its cells, without loading models or accelerators
    /// (`sweep cell`, whose children load them, and `status` / `collect`, which may run from
    /// another directory than the sweep's relative paths need).
    pub fn read(path: &Path, out: Option<&Path>) -> anyhow::Result<Self> {
        let plan = Plan::load(path)?;
        let dir = match (out, &plan.out) {
            (Some(dir), _) => dir.to_path_buf(),
            (None, Some(dir)) => dir.clone(),
            (None, None) => anyhow::bail!(
                "plan {}: no `out` in the plan and no --out: where should the study go?",
                path.display()
            ),
        };
        let dir = std::path::absolute(&dir).with_context(|| format!("--out {}", dir.display()))?;
        Self::check(plan, dir).with_context(|| format!("plan {}", path.display()))
    }

    /// The study whose copy of the plan is in `dir` (written by `sweep run`).
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        let copy = dir.join(PLAN_COPY);
        if !copy.exists() {
            anyhow::bail!(
                "{}: not a sweep directory (no {PLAN_COPY}; `cptsim sweep run` writes it)",
                dir.display()
            );
        }
        Self::read(&copy, Some(dir))
    }

    /// The study of a parsed plan in `dir`: keys checked, cells expanded, each cell's plans
    /// read, validated and made command lines (no file is read or written).
    pub fn check(plan: Plan, dir: PathBuf) -> anyhow::Result<Self> {
        let keys = plan_keys(&plan);
        check_keys(&keys, plan.train.is_some()).map_err(|e| {
            let bad = keys
                .iter()
                .find(|k| e.to_string().contains(&format!("`{k}`")));
            match bad.and_then(|k| first_use(&plan, k)) {
                Some(pos) => anyhow::anyhow!("{pos}: {e}"),
                None => e,
            }
        })?;
        let Expansion {
            cells: specs,
            tables,
        } = expand_counted(&plan)?;
        // Every cell's values read first, then every cell validated: a value that does not read
        // is reported before a combination that does not run.
        let mut read = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let typed = plans(plan.train.as_ref(), &spec).map_err(|e| at(&plan, &spec, i, &e))?;
            read.push((spec, typed));
        }
        let cells_dir = dir.join("cells");
        let mut cells: Vec<Cell> = Vec::with_capacity(read.len());
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut merged = Vec::new();
        for (i, (spec, typed)) in read.into_iter().enumerate() {
            typed.validate().map_err(|e| at(&plan, &spec, i, &e))?;
            let identity = typed.identity();
            if let Some(&first) = seen.get(&identity) {
                merged.push((spec, first));
                continue;
            }
            let index = cells.len();
            seen.insert(identity, index);
            let id = cell_id(&spec, plan.train.as_deref());
            // Two runs in one directory would take each other's lock and rows.
            if let Some(other) = cells.iter().find(|c| c.id == id) {
                anyhow::bail!(
                    "cells #{} ({}) and #{index} ({}) are different runs with one id, {id}: \
                     change a value of one of them",
                    other.index,
                    other.spec.describe(),
                    spec.describe()
                );
            }
            let cell_dir = cells_dir.join(&id);
            let typed = typed.in_dir(&cell_dir);
            let commands = command::build(&typed, plan.train.as_ref(), &spec);
            cells.push(Cell {
                index,
                id,
                spec,
                commands,
                plans: typed,
                dir: cell_dir,
            });
        }
        Ok(Self {
            plan,
            dir,
            keys,
            cells,
            merged,
            tables,
        })
    }

    /// Loads each distinct model and accelerator list once, so a typo fails before any cell;
    /// the error says where the plan sets the value.
    fn check_models_and_accelerators(&self) -> anyhow::Result<()> {
        let mut models: BTreeMap<String, &CellSpec> = BTreeMap::new();
        let mut accels: BTreeMap<Vec<String>, &CellSpec> = BTreeMap::new();
        for cell in &self.cells {
            if let Some(m) = cell.plans.train.as_ref().map(|t| &t.model) {
                models.entry(m.clone()).or_insert(&cell.spec);
            }
            models
                .entry(cell.plans.cost.model.clone())
                .or_insert(&cell.spec);
            accels.entry(cell.spec.accel.clone()).or_insert(&cell.spec);
        }
        let pos = |spec: &CellSpec, key: &str| {
            locate(&self.plan, spec, key).map_or(String::new(), |p| format!("{p}: "))
        };
        let mut data: BTreeMap<&str, &Cell> = BTreeMap::new();
        for cell in &self.cells {
            if let Some(t) = &cell.plans.train {
                data.entry(t.data.as_str()).or_insert(cell);
            }
        }
        for cell in data.into_values() {
            if let Some(Err(e)) = cell.plans.train.as_ref().map(|t| t.check_data_present()) {
                anyhow::bail!("{}key `data`: {}", pos(&cell.spec, "data"), e.message);
            }
        }
        for (model, spec) in models {
            cptsim_models::load_summary(&model, 1)
                .with_context(|| format!("{}key `model` = {model}", pos(spec, "model")))?;
        }
        for (list, spec) in accels {
            crate::cmd::accel_costs::load_all(&list)
                .with_context(|| format!("{}key `accel` = {}", pos(spec, ACCEL), list.join(",")))?;
        }
        Ok(())
    }
}

/// The error of cell `index` of the expansion (`spec`), prefixed with where its key's value is.
fn at(plan: &Plan, spec: &CellSpec, index: usize, e: &KeyError) -> anyhow::Error {
    let pos = locate(plan, spec, &e.key).map_or(String::new(), |p| format!("{p}: "));
    anyhow::anyhow!("{pos}cell #{index} ({}): {e}", spec.describe())
}

/// Where the value of `key` that `spec` took is in the plan (its `[grid]` or `[[cell]]` value,
/// or `[train]`'s).
pub fn locate(plan: &Plan, spec: &CellSpec, key: &str) -> Option<Pos> {
    if let Some((table, item)) = spec.origin(key) {
        if key == ACCEL {
            return plan.spans.key(table, ACCEL, None);
        }
        let written = spec.keys.iter().find(|(k, _)| same_key(k, key))?;
        return plan.spans.key(table, &written.0, Some(item));
    }
    let train = plan
        .train
        .iter()
        .flatten()
        .find(|(k, _)| same_key(k, key))?;
    plan.spans.key(Table::Train, &train.0, Some(0))
}

/// Where `key` is first set in the plan.
fn first_use(plan: &Plan, key: &str) -> Option<Pos> {
    let tables = [(
        Table::Grid,
        plan.grid.iter().map(|(k, _)| k).collect::<Vec<_>>(),
    )]
    .into_iter()
    .chain([(
        Table::Train,
        plan.train.iter().flatten().map(|(k, _)| k).collect(),
    )])
    .chain(
        plan.cells
            .iter()
            .enumerate()
            .map(|(i, c)| (Table::Cell(i), c.iter().map(|(k, _)| k).collect())),
    );
    tables
        .filter(|(_, keys)| keys.iter().any(|k| *k == key))
        .find_map(|(t, _)| plan.spans.key(t, key, None))
}
