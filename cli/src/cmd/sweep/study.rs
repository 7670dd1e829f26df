//! A study: the plan, its output directory and its cells, every one checked before anything
//! runs — plan keys against the keys of the train crate's plans, each cell's keys read into a
//! typed [`TrainPlan`](cptsim_train::TrainPlan) / [`CostPlan`](cptsim_train::CostPlan) and
//! validated, each model and accelerator loaded once. Cells that mean the same run (values
//! spelled differently: `8` and `"8"`, `grad_bits` and `grad-bits`, a default given or not) are
//! one cell; [`Study::merged`] lists the others.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::cell::{cell_id, Cell};
use super::command;
use super::grid::{expand, plan_keys, CellSpec};
use super::plan::Plan;
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
        check_keys(&keys, plan.train.is_some())?;
        let specs = expand(&plan)?;
        // Every cell's values read first, then every cell validated: a value that does not read
        // is reported before a combination that does not run.
        let mut read = Vec::with_capacity(specs.len());
        for (i, spec) in specs.into_iter().enumerate() {
            let typed = plans(plan.train.as_ref(), &spec).map_err(|e| at(&spec, i, &e))?;
            read.push((spec, typed));
        }
        let cells_dir = dir.join("cells");
        let mut cells: Vec<Cell> = Vec::with_capacity(read.len());
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut merged = Vec::new();
        for (i, (spec, typed)) in read.into_iter().enumerate() {
            typed.validate().map_err(|e| at(&spec, i, &e))?;
            let identity = typed.identity();
            if let Some(&first) = seen.get(&identity) {
                merged.push((spec, first));
                continue;
            }
            let index = cells.len();
            seen.insert(identity, index);
            let id = cell_id(&spec, plan.train.as_deref());
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
        })
    }

    /// Loads each distinct model and accelerator list once, so a typo fails before any cell.
    fn check_models_and_accelerators(&self) -> anyhow::Result<()> {
        let mut models = BTreeSet::new();
        let mut accels = BTreeSet::new();
        let train = self.plan.train.iter().flatten();
        for cell in &self.cells {
            let keys = cell.spec.keys.iter().chain(train.clone());
            if let Some((_, m)) = keys.into_iter().find(|(k, _)| k == "model") {
                models.insert(m.text());
            }
            accels.insert(cell.spec.accel.clone());
        }
        for model in models {
            cptsim_models::load_summary(&model, 1)
                .with_context(|| format!("key `model` = {model}"))?;
        }
        for list in accels {
            crate::cmd::accel_costs::load_all(&list)
                .with_context(|| format!("key `accel` = {}", list.join(",")))?;
        }
        Ok(())
    }
}

/// The error of cell `index` of the expansion (`spec`).
fn at(spec: &CellSpec, index: usize, e: &KeyError) -> anyhow::Error {
    anyhow::anyhow!("cell #{index} ({}): {e}", spec.describe())
}
