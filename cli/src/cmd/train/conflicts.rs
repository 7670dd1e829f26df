//! `--resume DIR` against the flags given with it: the checkpoint's plan decides the run, so a
//! flag that contradicts it is an error naming the flag and both values; flags that only say how
//! this invocation runs (`--out`, `--stop-at`, `--checkpoint-minutes`, `--format`) may change.

use std::path::Path;

use anyhow::bail;
use clap::parser::ValueSource;
use clap::ArgMatches;

use super::args::TrainArgs;
use super::plan::TrainPlan;

/// Flags that are not part of the plan and may differ on resume.
const FREE: [&str; 5] = ["out", "resume", "stop_at", "checkpoint_minutes", "format"];

/// The ids of the flags given on the command line of `train` (not defaulted).
pub fn given_flags(matches: Option<&ArgMatches>) -> Vec<String> {
    let Some(m) = matches else { return Vec::new() };
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.as_str().to_string())
        .collect()
}

/// The plan field a flag id sets.
fn field_of(id: &str) -> &str {
    match id {
        "iters" | "epochs" => "length",
        "no_augment" => "augment",
        "target" => "ldp",
        "target_cp" | "weight_bits" | "candidates" | "cp_step" | "cp_turns" | "dfq_beta"
        | "dfq_relax" | "dfq_exec" => "dfq",
        _ if id.starts_with("quantize_") => "scope",
        _ if id.starts_with("pfq_") => "pfq",
        _ if id.starts_with("prt") => "prt",
        _ if id.starts_with("ldp_") => "ldp",
        _ => id,
    }
}

/// `--flag` from a clap id.
fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// Checks the flags given with `--resume` (`args.given`) against `saved`, the plan of the
/// checkpoint at `path`: each must leave the plan as it is.
pub(crate) fn check(args: &TrainArgs, saved: &TrainPlan, path: &Path) -> anyhow::Result<()> {
    let given: Vec<&str> = args
        .given
        .iter()
        .map(String::as_str)
        .filter(|id| !FREE.contains(id))
        .collect();
    if given.is_empty() {
        return Ok(());
    }
    // The plan these flags give, with the model, data and policy the checkpoint's unless given.
    let mut with = args.clone();
    with.model.get_or_insert_with(|| saved.model.clone());
    with.data.get_or_insert_with(|| saved.data.clone());
    if !given.contains(&"policy") {
        with.policy = saved.policy;
    }
    let theirs = with.resolve().map_err(|e| {
        anyhow::anyhow!(
            "--resume {}: the flags given with it: {e:#}",
            path.display()
        )
    })?;
    let (mine, saved_json) = (serde_json::to_value(&theirs)?, serde_json::to_value(saved)?);
    for id in given {
        let field = field_of(id);
        let (Some(new), Some(old)) = (mine.get(field), saved_json.get(field)) else {
            continue;
        };
        if new != old {
            let (flag, dir) = (flag(id), path.display());
            bail!(
                "--resume {dir}: {flag} gives {field} = {new}, but the checkpoint's run has {old}; \
                 a resumed run keeps its plan (drop {flag}, or start a new run; only --out, \
                 --stop-at, --checkpoint-minutes and --format may change on resume)"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_to_their_plan_fields() {
        for (id, field) in [
            ("iters", "length"),
            ("epochs", "length"),
            ("lr", "lr"),
            ("no_augment", "augment"),
            ("pfq_eps", "pfq"),
            ("prt_window", "prt"),
            ("ldp_lr", "ldp"),
            ("target", "ldp"),
            ("dfq_beta", "dfq"),
            ("quantize_first", "scope"),
        ] {
            assert_eq!(field_of(id), field, "{id}");
        }
        assert_eq!(flag("grad_bits"), "--grad-bits");
    }
}
