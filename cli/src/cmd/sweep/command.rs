//! A cell's `cptsim` command lines, built from its plan keys and checked against the flags the
//! binary's own clap structs declare, in-process, before anything runs: plan keys are long flags
//! of `cptsim run` / `cptsim train` (`_` and `-` alike), found by clap introspection, and each
//! command line is parsed with the top-level `Cli::try_parse_from`.

use std::path::Path;

use anyhow::bail;
use clap::CommandFactory;

use super::grid::{CellSpec, ACCEL};
use super::plan::{Fixed, Scalar};

/// Flags the sweep sets itself, per subcommand.
const RESERVED_RUN: [&str; 6] = ["format", "report", "trace", "save-trace", "help", "version"];
const RESERVED_TRAIN: [&str; 6] = ["format", "out", "resume", "stop-at", "help", "version"];

/// One long flag of a subcommand.
#[derive(Debug)]
struct Flag {
    long: String,
    /// Takes no value (`--no-augment`): `true` sets it, `false` leaves it out.
    switch: bool,
}

/// The long flags of `cptsim run` and `cptsim train`, read from the binary's clap definition.
#[derive(Debug)]
pub struct Flags {
    run: Vec<Flag>,
    train: Vec<Flag>,
}

impl Flags {
    /// Introspects the binary's `Cli`.
    pub fn of_cli() -> anyhow::Result<Self> {
        let cli = crate::Cli::command();
        let of = |name: &str, reserved: &[&str]| -> anyhow::Result<Vec<Flag>> {
            let Some(sub) = cli.find_subcommand(name) else {
                bail!("internal: the binary has no `{name}` subcommand");
            };
            Ok(sub
                .get_arguments()
                .filter_map(|a| {
                    let long = a.get_long()?;
                    (!reserved.contains(&long)).then(|| Flag {
                        long: long.to_string(),
                        switch: matches!(a.get_action(), clap::ArgAction::SetTrue),
                    })
                })
                .collect())
        };
        Ok(Self {
            run: of("run", &RESERVED_RUN)?,
            train: of("train", &RESERVED_TRAIN)?,
        })
    }

    fn find<'a>(flags: &'a [Flag], key: &str) -> Option<&'a Flag> {
        let long = key.replace('_', "-");
        flags.iter().find(|f| f.long == long)
    }

    fn names(flags: &[Flag]) -> String {
        let mut names: Vec<&str> = flags.iter().map(|f| f.long.as_str()).collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// Checks that every plan key is a flag of the commands its cells run (`train` = the plan
    /// has a `[train]` table); the error names the key and the valid ones.
    pub fn check_keys(&self, keys: &[String], train: bool) -> anyhow::Result<()> {
        for key in keys {
            let long = key.replace('_', "-");
            // reserved in either command: a cost-only plan's `out` is no more a cell flag
            let reserved =
                RESERVED_RUN.contains(&long.as_str()) || RESERVED_TRAIN.contains(&long.as_str());
            if reserved {
                let where_ = if long == "out" {
                    "; the study's DIR is the plan's top-level `out` or `sweep run --out`"
                } else {
                    ""
                };
                bail!(
                    "plan key `{key}` is set by the sweep itself (each cell writes into \
                     DIR/cells/ID/){where_}"
                );
            }
            let in_run = Self::find(&self.run, key).is_some();
            let in_train = Self::find(&self.train, key).is_some();
            if !in_run && !in_train {
                bail!(
                    "plan key `{key}` is neither a flag of `cptsim run` nor of `cptsim train`; \
                     `cptsim run` flags: {}; `cptsim train` flags: {}",
                    Self::names(&self.run),
                    Self::names(&self.train)
                );
            }
            if !train && !in_run {
                bail!(
                    "plan key `{key}` is a flag of `cptsim train`, but the plan has no [train] \
                     table, so its cells only cost (`cptsim run`), whose flags are: {}",
                    Self::names(&self.run)
                );
            }
        }
        Ok(())
    }
}

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

/// Appends `--flag=value` (or the bare switch) for a plan key.
fn push(argv: &mut Vec<String>, flag: &Flag, key: &str, value: &Scalar) -> anyhow::Result<()> {
    if flag.switch {
        match value {
            Scalar::Bool(true) => argv.push(format!("--{}", flag.long)),
            Scalar::Bool(false) => {}
            other => bail!(
                "key `{key}`: --{} is a switch; give true or false, not {}",
                flag.long,
                other.text()
            ),
        }
    } else {
        argv.push(format!("--{}={}", flag.long, value.text()));
    }
    Ok(())
}

/// Builds the cell's command lines with outputs under `cell_dir`; `train` is the plan's
/// `[train]` table. Keys were checked by [`Flags::check_keys`].
pub fn build(
    flags: &Flags,
    train: Option<&Fixed>,
    spec: &CellSpec,
    cell_dir: &Path,
) -> anyhow::Result<Commands> {
    let keys: Vec<&(String, Scalar)> = train.into_iter().flatten().chain(&spec.keys).collect();
    let Some(model) = keys
        .iter()
        .find(|(k, _)| k == "model")
        .map(|(_, v)| v.text())
    else {
        bail!("no `model` key: every cell needs a model (zoo:NAME or an ONNX file)");
    };
    let inspect = vec![
        "inspect".to_string(),
        model.clone(),
        "--format=json".to_string(),
    ];
    let mut cost = vec!["run".to_string()];
    let train_argv = match train {
        Some(_) => {
            let mut argv = vec!["train".to_string()];
            for (key, value) in &keys {
                if let Some(flag) = Flags::find(&flags.train, key) {
                    push(&mut argv, flag, key, value)?;
                } else if let Some(flag) = Flags::find(&flags.run, key) {
                    push(&mut cost, flag, key, value)?;
                }
            }
            let run_dir = cell_dir.join("run");
            argv.push(format!("--out={}", run_dir.display()));
            cost.push(format!("--model={model}"));
            cost.push(format!("--trace={}", run_dir.join("trace.pb").display()));
            Some(argv)
        }
        None => {
            for (key, value) in &keys {
                if let Some(flag) = Flags::find(&flags.run, key) {
                    push(&mut cost, flag, key, value)?;
                }
            }
            None
        }
    };
    if !spec.accel.is_empty() {
        cost.push(format!("--{ACCEL}={}", spec.accel.join(",")));
        cost.push(format!("--report={}", cell_dir.join("report").display()));
    }
    cost.push("--format=json".to_string());
    Ok(Commands {
        train: train_argv,
        inspect,
        cost,
    })
}

/// Parses each command line with the binary's own `Cli`, as the child will; the error names the
/// rejected flag's plan key.
pub fn check(commands: &Commands) -> anyhow::Result<()> {
    for argv in commands
        .train
        .iter()
        .chain([&commands.inspect, &commands.cost])
    {
        let args = std::iter::once("cptsim").chain(argv.iter().map(String::as_str));
        let parsed = <crate::Cli as clap::Parser>::try_parse_from(args);
        if let Ok(crate::Cli {
            command: crate::Command::Train(train),
        }) = &parsed
        {
            // The flags parse; the plan they make must validate too (ranges, combinations).
            train
                .to_plan()
                .and_then(|p| p.validate())
                .map_err(|e| anyhow::anyhow!("`cptsim train` rejects it: {e:#}"))?;
        }
        if let Err(e) = parsed {
            let text = e.to_string();
            let message = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("rejected")
                .trim_start_matches("error: ");
            let key = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::String(arg)) => {
                    let long = arg.trim_start_matches("--");
                    let long = long.split([' ', '=']).next().unwrap_or(long);
                    format!("key `{}`: ", long.replace('-', "_"))
                }
                _ => String::new(),
            };
            bail!("{key}`cptsim {}` rejects it: {message}", argv[0]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::sweep::grid::expand;
    use crate::cmd::sweep::plan::Plan;

    fn commands(text: &str) -> anyhow::Result<Vec<Commands>> {
        let plan = Plan::parse(text)?;
        let flags = Flags::of_cli()?;
        flags.check_keys(&super::super::grid::plan_keys(&plan), plan.train.is_some())?;
        expand(&plan)?
            .iter()
            .map(|spec| {
                let c = build(&flags, plan.train.as_ref(), spec, Path::new("/d"))?;
                check(&c)?;
                Ok(c)
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
