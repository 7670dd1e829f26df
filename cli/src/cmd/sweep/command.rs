//! A cell's `cptsim` command lines, written from its typed plans ([`Plans`]): each key the cell
//! sets becomes its flag with the value the plan read (`--bits=8` whether the plan said `8` or
//! `"8"`), in plan order; the sweep adds the outputs (`--out`, `--trace`, `--report`).

use super::grid::{CellSpec, ACCEL};
use super::plan::Fixed;
use super::typed::{split_keys, Plans};

/// The command lines of one cell (arguments after `cptsim`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Commands {
    /// `cptsim train … --out CELL/run` for training cells.
    pub train: Option<Vec<String>>,
    /// `cptsim inspect MODEL --format json`, for the model's MACs.
    pub inspect: Vec<String>,
    /// `cptsim run … --format json`: the cost, on each accelerator.
    pub cost: Vec<String>,
}

/// The command lines of a cell whose plans (already [`Plans::in_dir`]) are `plans`; `train` is
/// the plan's `[train]` table.
pub fn build(plans: &Plans, train: Option<&Fixed>, spec: &CellSpec) -> Commands {
    let (to_train, to_cost) = split_keys(train, spec);
    let train_keys: Vec<&str> = to_train.iter().map(|(k, _)| k.as_str()).collect();
    let cost_keys: Vec<&str> = to_cost.iter().map(|(k, _)| k.as_str()).collect();
    let cost = &plans.cost;
    let inspect = vec![
        "inspect".to_string(),
        cost.model.clone(),
        "--format=json".to_string(),
    ];
    let mut argv = vec!["run".to_string()];
    argv.extend(cost.args(&cost_keys));
    let train = plans.train.as_ref().map(|t| {
        let mut train_argv = vec!["train".to_string()];
        train_argv.extend(t.args(&train_keys));
        train_argv.extend(t.args(&["out"]));
        argv.extend(cost.args(&["model", "trace"]));
        train_argv
    });
    // a plan without `accel` costs in BitOPs alone (its plan says `--accel none`)
    argv.extend(cost.args(&[ACCEL, "report"]));
    argv.push("--format=json".to_string());
    Commands {
        train,
        inspect,
        cost: argv,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::cmd::sweep::grid::{expand, plan_keys};
    use crate::cmd::sweep::plan::Plan;
    use crate::cmd::sweep::typed::{check_keys, plans};

    fn commands(text: &str) -> anyhow::Result<Vec<Commands>> {
        let plan = Plan::parse(text)?;
        check_keys(&plan_keys(&plan), plan.train.is_some())?;
        expand(&plan)?
            .iter()
            .map(|spec| {
                let p = plans(plan.train.as_ref(), spec).map_err(|e| anyhow::anyhow!("{e}"))?;
                Ok(build(&p.in_dir(Path::new("/d")), plan.train.as_ref(), spec))
            })
            .collect()
    }

    #[test]
    fn training_cells_split_keys_between_train_and_cost() {
        let c = commands(
            r#"
name = "t"
[grid]
model = "zoo:lenet5"
seed = [3]
accounting = "hardware"
no_augment = true
accel = ["zc706"]
[train]
data = "synthetic"
iters = 2
"#,
        )
        .unwrap();
        let train = c[0].train.as_ref().unwrap();
        assert_eq!(
            train,
            &[
                "train",
                "--data=synthetic",
                "--iters=2",
                "--model=zoo:lenet5",
                "--seed=3",
                "--no-augment",
                "--out=/d/run"
            ]
        );
        assert_eq!(
            c[0].cost,
            [
                "run",
                "--accounting=hardware",
                "--model=zoo:lenet5",
                "--trace=/d/run/trace.pb",
                "--accel=zc706",
                "--report=/d/report",
                "--format=json"
            ]
        );
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let err = |t: &str| format!("{:#}", commands(t).unwrap_err());
        let e = err("name = \"t\"\n[grid]\nmodel = \"zoo:lenet5\"\nbitz = \"8\"");
        assert!(e.contains("`bitz`") && e.contains("grad-bits"), "{e}");
        let e = err("name = \"t\"\n[grid]\nmodel = \"zoo:lenet5\"\nseed = [1]");
        assert!(e.contains("`seed`") && e.contains("no [train]"), "{e}");
        let e = err("name = \"t\"\n[grid]\nmodel = \"zoo:lenet5\"\niters = [\"many\"]");
        assert!(e.contains("key `iters`") && e.contains("many"), "{e}");
        let e = err("name = \"t\"\n[grid]\nmodel = \"zoo:lenet5\"\nformat = \"table\"");
        assert!(
            e.contains("`format`") && e.contains("set by the sweep"),
            "{e}"
        );
        let e = err("name = \"t\"\n[grid]\nbits = \"8\"");
        assert!(e.contains("`model`"), "{e}");
    }
}
