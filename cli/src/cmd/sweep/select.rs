//! `sweep run --only KEY=VALUE`: run part of a plan now and the rest later — one seed of every
//! setting first, say, to see the picture before paying for the error bars. A selected cell has
//! the id and directory it has in the whole plan, so a later run without `--only` (or with
//! another value) finds it done and runs only the others.

use anyhow::bail;

use super::cell::Cell;
use super::grid::CellSpec;

/// The cells `--only` keeps: for every key named, one of the values given for it (values of one
/// key are alternatives; different keys must all match). Empty: every cell.
#[derive(Debug, Default)]
pub struct Only(Vec<(String, Vec<String>)>);

impl Only {
    /// Parses the `--only` arguments against the plan's `cells`: each `KEY=VALUE`, `KEY` one of
    /// the plan's keys and `VALUE` one some cell has for it (as the plan writes it: `seed=0`,
    /// `schedule=deficit:375`).
    pub fn parse(args: &[String], cells: &[Cell]) -> anyhow::Result<Self> {
        let mut only: Vec<(String, Vec<String>)> = Vec::new();
        for arg in args {
            let Some((key, value)) = arg.split_once('=') else {
                bail!("--only {arg}: expected KEY=VALUE, e.g. --only seed=0");
            };
            let (key, value) = (key.trim().replace('-', "_"), value.trim().to_string());
            let values = values_of(&key, cells);
            if values.is_empty() {
                bail!(
                    "--only {arg}: the plan has no key `{key}` (its keys: {})",
                    keys_of(cells).join(", ")
                );
            }
            if !values.contains(&value) {
                bail!(
                    "--only {arg}: no cell has {key} = {value} (its values: {})",
                    values.join(", ")
                );
            }
            match only.iter_mut().find(|(k, _)| *k == key) {
                Some((_, vs)) => vs.push(value),
                None => only.push((key, vec![value])),
            }
        }
        Ok(Only(only))
    }

    /// Whether nothing was asked for (every cell is kept).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the cell of `spec` is kept.
    pub fn keeps(&self, spec: &CellSpec) -> bool {
        self.0
            .iter()
            .all(|(key, values)| value_of(spec, key).is_some_and(|v| values.contains(&v)))
    }
}

/// The cell's value for `key` as text ([`CellSpec::get`]: `-` and `_` alike).
fn value_of(spec: &CellSpec, key: &str) -> Option<String> {
    spec.get(key).map(|v| v.text())
}

/// The values cells have for `key`, in plan order, each once.
fn values_of(key: &str, cells: &[Cell]) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for v in cells.iter().filter_map(|c| value_of(&c.spec, key)) {
        if !values.contains(&v) {
            values.push(v);
        }
    }
    values
}

/// The keys of the plan's cells, in plan order, each once.
fn keys_of(cells: &[Cell]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (k, _) in cells.iter().flat_map(|c| &c.spec.keys) {
        if !keys.contains(k) {
            keys.push(k.clone());
        }
    }
    keys
}
