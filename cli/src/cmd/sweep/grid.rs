//! Expanding a plan into its cells: the `[grid]` cross product, each `[[cell]]` crossed with the
//! grid keys it does not set, `[[exclude]]` applied, duplicates dropped. `accel` is not crossed:
//! it is the list of accelerators every cell of its table is costed on.

use std::collections::HashSet;

use anyhow::bail;

pub use super::plan::same_key;
use super::plan::{Fixed, Plan, Scalar};
use super::spans::{Spans, Table};

/// The key whose values are a list per cell, not an axis.
pub const ACCEL: &str = "accel";

/// Most cells one plan may expand to.
const MAX_CELLS: usize = 100_000;

/// One cell's settings before they become command lines. Two specs are equal when their keys
/// and values are (where each value came from does not count).
#[derive(Clone, Debug)]
pub struct CellSpec {
    /// Grid and `[[cell]]` keys with this cell's values, in plan key order (`accel` apart).
    pub keys: Fixed,
    /// Accelerators the cell is costed on.
    pub accel: Vec<String>,
    /// Where each key's value is in the plan: its table and its place in the key's list.
    pub origins: Vec<(Table, usize)>,
    /// The table whose `accel` the cell is costed on.
    pub accel_from: Option<Table>,
    /// The table whose product the cell is of: `[grid]` or a `[[cell]]`.
    pub table: Table,
}

/// How one table's product became cells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableCount {
    pub table: Table,
    /// The crossed keys, how many values each has and the table they are from (a `[[cell]]`'s
    /// own, or `[grid]`'s for the keys it does not set), in plan order.
    pub axes: Vec<(String, usize, Table)>,
    /// The product's size.
    pub combinations: usize,
    /// Combinations an `[[exclude]]` dropped.
    pub excluded: usize,
    /// Combinations with the same settings as an earlier cell of the plan.
    pub repeated: usize,
}

/// A plan's cells and how each table contributed to them.
#[derive(Clone, Debug)]
pub struct Expansion {
    pub cells: Vec<CellSpec>,
    pub tables: Vec<TableCount>,
}

impl PartialEq for CellSpec {
    fn eq(&self, other: &Self) -> bool {
        (&self.keys, &self.accel) == (&other.keys, &other.accel)
    }
}

impl Eq for CellSpec {}

impl std::hash::Hash for CellSpec {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.keys, &self.accel).hash(state);
    }
}

/// One key's values and the table they are from.
type Axis<'a> = (&'a String, &'a Vec<Scalar>, Table);

impl CellSpec {
    /// Where the value of `key` is in the plan (its table, its place in the key's list).
    pub fn origin(&self, key: &str) -> Option<(Table, usize)> {
        if key == ACCEL {
            return self.accel_from.map(|t| (t, 0));
        }
        let i = self.keys.iter().position(|(k, _)| same_key(k, key))?;
        self.origins.get(i).copied()
    }

    /// The value of `key`, if the cell sets it (`-` and `_` alike in the name: `grad-bits`,
    /// `grad_bits`).
    pub fn get(&self, key: &str) -> Option<&Scalar> {
        self.keys
            .iter()
            .find(|(k, _)| same_key(k, key))
            .map(|(_, v)| v)
    }

    /// `key=value` pairs, for messages.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .keys
            .iter()
            .map(|(k, v)| format!("{k}={}", v.text()))
            .collect();
        if !self.accel.is_empty() {
            parts.push(format!("accel={}", self.accel.join(",")));
        }
        parts.join(" ")
    }
}

/// Every key of the plan's `[grid]`, `[train]` and `[[cell]]` tables once (as first spelled),
/// in plan order.
pub fn plan_keys(plan: &Plan) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let train = plan.train.iter().flatten().map(|(k, _)| k);
    let cells = plan.cells.iter().flatten().map(|(k, _)| k);
    for key in plan.grid.iter().map(|(k, _)| k).chain(train).chain(cells) {
        if !keys.iter().any(|k| same_key(k, key)) {
            keys.push(key.clone());
        }
    }
    keys
}

/// The plan's cells, in a stable order: the grid's (first key slowest), then each `[[cell]]`'s.
pub fn expand(plan: &Plan) -> anyhow::Result<Vec<CellSpec>> {
    Ok(expand_counted(plan)?.cells)
}

/// The plan's cells ([`expand`]) with each table's count.
pub fn expand_counted(plan: &Plan) -> anyhow::Result<Expansion> {
    let order = plan_keys(plan);
    let mut tables: Vec<(Table, Vec<Axis<'_>>)> = Vec::new();
    if !plan.grid.is_empty() {
        let axes = plan.grid.iter().map(|(k, v)| (k, v, Table::Grid)).collect();
        tables.push((Table::Grid, axes));
    }
    for (i, cell) in plan.cells.iter().enumerate() {
        // The cell's own values, and the grid's for the keys it does not set, in plan order.
        let mut axes: Vec<Axis<'_>> = Vec::new();
        for key in &order {
            let own = cell.iter().find(|(k, _)| same_key(k, key));
            let grid = plan.grid.iter().find(|(k, _)| same_key(k, key));
            match (own, grid) {
                (Some((k, v)), _) => axes.push((k, v, Table::Cell(i))),
                (None, Some((k, v))) => axes.push((k, v, Table::Grid)),
                (None, None) => {}
            }
        }
        tables.push((Table::Cell(i), axes));
    }
    if tables.is_empty() {
        bail!("the plan has no cells: [grid] is empty and there is no [[cell]]");
    }
    for (i, exclude) in plan.exclude.iter().enumerate() {
        for (key, _) in exclude {
            if !order.iter().any(|k| same_key(k, key)) {
                let message = format!(
                    "[[exclude]] key `{key}` is not a [grid] or [[cell]] key (those are: {})",
                    order.join(", ")
                );
                bail!(plan.spans.at(Table::Exclude(i), key, None, &message));
            }
        }
    }
    let mut cells: Vec<CellSpec> = Vec::new();
    // Cells seen so far: a hash set, since a plan may have 10^5 cells (a linear search each was
    // minutes of checking before any error).
    let mut seen: HashSet<CellSpec> = HashSet::new();
    let mut counts = Vec::with_capacity(tables.len());
    for (table, axes) in &tables {
        let specs = product(*table, axes, &plan.spans)?;
        let mut count = TableCount {
            table: *table,
            axes: axes
                .iter()
                .filter(|a| a.0 != ACCEL)
                .map(|a| (a.0.clone(), a.1.len(), a.2))
                .collect(),
            combinations: specs.len(),
            excluded: 0,
            repeated: 0,
        };
        for spec in specs {
            if plan.exclude.iter().any(|ex| matches(&spec, ex)) {
                count.excluded += 1;
            } else if seen.insert(spec.clone()) {
                cells.push(spec);
            } else {
                count.repeated += 1;
            }
        }
        counts.push(count);
    }
    if cells.is_empty() {
        let excluded: usize = counts.iter().map(|c| c.excluded).sum();
        bail!("every one of the plan's {excluded} cells is excluded by [[exclude]]");
    }
    Ok(Expansion {
        cells,
        tables: counts,
    })
}

/// The cross product of `axes` (first key slowest); `accel` values form each cell's list.
fn product(table: Table, axes: &[Axis<'_>], spans: &Spans) -> anyhow::Result<Vec<CellSpec>> {
    let mut accel: Vec<String> = Vec::new();
    let mut accel_from = None;
    let mut crossed: Vec<&Axis<'_>> = Vec::new();
    for axis in axes {
        if axis.0 == ACCEL {
            accel_from = Some(axis.2);
            for (i, v) in axis.1.iter().enumerate() {
                match v {
                    Scalar::Str(s) => {
                        for name in s.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                            if !accel.iter().any(|a| same_accelerator(a, name)) {
                                accel.push(name.to_string());
                            }
                        }
                    }
                    other => {
                        let message = format!(
                            "key `accel`: expected accelerator names or config paths, found {}",
                            other.text()
                        );
                        bail!(spans.at(axis.2, ACCEL, Some(i), &message))
                    }
                }
            }
        } else {
            crossed.push(axis);
        }
    }
    let total = crossed.iter().try_fold(1usize, |n, (_, values, _)| {
        n.checked_mul(values.len()).filter(|&n| n <= MAX_CELLS)
    });
    let Some(total) = total else {
        bail!("the plan has more than {MAX_CELLS} cells");
    };
    let mut cells = Vec::with_capacity(total);
    for mut rest in 0..total {
        let mut keys: Fixed = Vec::with_capacity(crossed.len());
        let mut origins = Vec::with_capacity(crossed.len());
        // Mixed radix, last key fastest.
        let mut picks = vec![0usize; crossed.len()];
        for (i, (_, values, _)) in crossed.iter().enumerate().rev() {
            picks[i] = rest % values.len();
            rest /= values.len();
        }
        for ((key, values, table), pick) in crossed.iter().zip(picks) {
            keys.push((key.to_string(), values[pick].clone()));
            origins.push((*table, pick));
        }
        cells.push(CellSpec {
            keys,
            accel: accel.clone(),
            origins,
            accel_from,
            table,
        });
    }
    Ok(cells)
}

/// Whether two accelerator names are one accelerator: the same name, or a built-in and its
/// alias (`bitfusion`, `bitfusion-eyeriss-iso`). Costing one twice would give twice its rows.
fn same_accelerator(a: &str, b: &str) -> bool {
    let builtin = cptsim_accel::config::builtin_text;
    a == b || builtin(a).is_some_and(|text| builtin(b) == Some(text))
}

/// Whether the cell has every value of `exclude` (compared as command-line text).
fn matches(spec: &CellSpec, exclude: &Fixed) -> bool {
    exclude
        .iter()
        .all(|(key, v)| spec.get(key).is_some_and(|own| own.text() == v.text()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(text: &str) -> anyhow::Result<Vec<CellSpec>> {
        expand(&Plan::parse(text)?)
    }

    #[test]
    fn crosses_excludes_and_adds_explicit_cells() {
        let c = cells(
            r#"
name = "t"
[grid]
schedule = ["static", "cosine"]
bits = ["8", "3:8"]
seed = [0, 1]
accel = ["zc706", "stripes"]
[[exclude]]
schedule = "static"
bits = "3:8"
[[cell]]
schedule = "cosine"
policy = "ldp"
bits = "3:8"
"#,
        )
        .unwrap();
        // 2·2·2 = 8 grid cells, 2 excluded, plus the explicit cell over both seeds.
        assert_eq!(c.len(), 8);
        assert!(c[..6].iter().all(|s| s.table == Table::Grid));
        assert!(c[6..].iter().all(|s| s.table == Table::Cell(0)));
        assert_eq!(
            c[0].describe(),
            "schedule=static bits=8 seed=0 accel=zc706,stripes"
        );
        assert_eq!(
            c[1].describe(),
            "schedule=static bits=8 seed=1 accel=zc706,stripes"
        );
        assert!(c.iter().all(|s| s.accel.len() == 2));
        assert_eq!(
            c[6].describe(),
            "schedule=cosine bits=3:8 seed=0 policy=ldp accel=zc706,stripes"
        );
    }

    #[test]
    fn a_plan_of_the_most_cells_expands_at_once() {
        // 10^5 cells: a linear duplicate search made this minutes of CPU (found writing the
        // `sweep_plan` fuzz target); with the hash set it takes under a second (not a timed
        // test: a regression shows as a slow test run).
        let list = |f: &dyn Fn(usize) -> String| {
            let v: Vec<String> = (0..10).map(f).collect();
            format!("[{}]", v.join(", "))
        };
        let mut text = String::from("name = \"t\"\n[grid]\n");
        for key in ["bits", "grad_bits", "cycles", "iters", "schedule"] {
            text += &format!("{key} = {}\n", list(&|i| format!("\"{key}{i}\"")));
        }
        assert_eq!(cells(&text).unwrap().len(), 100_000);
        text += "seed = [1, 2]\n";
        assert!(format!("{:#}", cells(&text).unwrap_err()).contains("more than 100000"));
    }

    #[test]
    fn keys_are_found_in_either_spelling() {
        let c = cells("name = \"t\"\n[grid]\ngrad_bits = \"6\"\nlr = 0.1").unwrap();
        for key in ["grad_bits", "grad-bits"] {
            assert_eq!(
                c[0].get(key).map(Scalar::text).as_deref(),
                Some("6"),
                "{key}"
            );
        }
        assert!(c[0].get("grad_bit").is_none() && c[0].get("gradxbits").is_none());
        // A [[cell]]'s `grad-bits` replaces the grid's `grad_bits`, and excludes match either.
        let c = cells(
            "name = \"t\"\n[grid]\ngrad_bits = [6, 7]\n[[cell]]\ngrad-bits = 8\n\
             [[exclude]]\ngrad-bits = 7",
        )
        .unwrap();
        let described: Vec<String> = c.iter().map(CellSpec::describe).collect();
        assert_eq!(described, ["grad_bits=6", "grad-bits=8"]);
    }

    #[test]
    fn an_accelerator_named_twice_is_costed_once() {
        let c = cells(
            "name = \"t\"\n[grid]\nlr = 1\n\
             accel = [\"zc706\", \"zc706,bitfusion\", \"bitfusion-eyeriss-iso\", \"stripes\"]",
        )
        .unwrap();
        assert_eq!(c[0].accel, ["zc706", "bitfusion", "stripes"]);
    }

    #[test]
    fn duplicate_cells_count_once() {
        let plan = Plan::parse("name = \"t\"\n[grid]\nlr = [0.0, -0.0, 1]\n[[cell]]\nlr = 1");
        let e = expand_counted(&plan.unwrap()).unwrap();
        let lr: Vec<String> = e.cells.iter().map(|s| s.describe()).collect();
        assert_eq!(lr, ["lr=0", "lr=1"]);
        let grid = &e.tables[0];
        assert_eq!((grid.combinations, grid.repeated), (3, 1));
        assert_eq!(grid.axes, [("lr".to_string(), 3, Table::Grid)]);
        let cell = &e.tables[1];
        assert_eq!(
            (cell.table, cell.combinations, cell.repeated),
            (Table::Cell(0), 1, 1)
        );
    }

    #[test]
    fn empty_and_fully_excluded_plans_are_errors() {
        let err = |t: &str| format!("{:#}", cells(t).unwrap_err());
        assert!(err("name = \"t\"").contains("no cells"));
        assert!(
            err("name = \"t\"\n[grid]\nbits = [\"8\"]\n[[exclude]]\nbits = \"8\"")
                .contains("excluded")
        );
        assert!(
            err("name = \"t\"\n[grid]\nbits = [\"8\"]\n[[exclude]]\nbitz = \"8\"")
                .contains("`bitz`")
        );
    }
}
