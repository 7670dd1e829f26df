//! Expanding a plan into its cells: the `[grid]` cross product, each `[[cell]]` crossed with the
//! grid keys it does not set, `[[exclude]]` applied, duplicates dropped. `accel` is not crossed:
//! it is the list of accelerators every cell of its table is costed on.

use std::collections::HashSet;

use anyhow::bail;

use super::plan::{Axes, Fixed, Plan, Scalar};

/// The key whose values are a list per cell, not an axis.
pub const ACCEL: &str = "accel";

/// Most cells one plan may expand to.
const MAX_CELLS: usize = 100_000;

/// One cell's settings before they become command lines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CellSpec {
    /// Grid and `[[cell]]` keys with this cell's values, in plan key order (`accel` apart).
    pub keys: Fixed,
    /// Accelerators the cell is costed on.
    pub accel: Vec<String>,
}

impl CellSpec {
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

/// Every key of the plan's `[grid]`, `[train]` and `[[cell]]` tables once, in plan order.
pub fn plan_keys(plan: &Plan) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let train = plan.train.iter().flatten().map(|(k, _)| k);
    let cells = plan.cells.iter().flatten().map(|(k, _)| k);
    for key in plan.grid.iter().map(|(k, _)| k).chain(train).chain(cells) {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// The plan's cells, in a stable order: the grid's (first key slowest), then each `[[cell]]`'s.
pub fn expand(plan: &Plan) -> anyhow::Result<Vec<CellSpec>> {
    let order = plan_keys(plan);
    let mut tables: Vec<Axes> = Vec::new();
    if !plan.grid.is_empty() {
        tables.push(plan.grid.clone());
    }
    for cell in &plan.cells {
        // The cell's own values, and the grid's for the keys it does not set, in plan order.
        let mut axes: Axes = Vec::new();
        for key in &order {
            let own = cell.iter().find(|(k, _)| k == key);
            let grid = plan.grid.iter().find(|(k, _)| k == key);
            if let Some(axis) = own.or(grid) {
                axes.push(axis.clone());
            }
        }
        tables.push(axes);
    }
    if tables.is_empty() {
        bail!("the plan has no cells: [grid] is empty and there is no [[cell]]");
    }
    for exclude in &plan.exclude {
        for (key, _) in exclude {
            if !order.contains(key) {
                bail!(
                    "[[exclude]] key `{key}` is not a [grid] or [[cell]] key (those are: {})",
                    order.join(", ")
                );
            }
        }
    }
    let mut cells: Vec<CellSpec> = Vec::new();
    // Cells seen so far: a hash set, since a plan may have 10^5 cells (a linear search each was
    // minutes of checking before any error).
    let mut seen: HashSet<CellSpec> = HashSet::new();
    let mut excluded = 0usize;
    for axes in &tables {
        for spec in product(axes)? {
            if plan.exclude.iter().any(|ex| matches(&spec, ex)) {
                excluded += 1;
            } else if seen.insert(spec.clone()) {
                cells.push(spec);
            }
        }
    }
    if cells.is_empty() {
        bail!("every one of the plan's {excluded} cells is excluded by [[exclude]]");
    }
    Ok(cells)
}

/// The cross product of `axes` (first key slowest); `accel` values form each cell's list.
fn product(axes: &Axes) -> anyhow::Result<Vec<CellSpec>> {
    let mut accel: Vec<String> = Vec::new();
    let mut crossed: Vec<&(String, Vec<Scalar>)> = Vec::new();
    for axis in axes {
        if axis.0 == ACCEL {
            for v in &axis.1 {
                match v {
                    Scalar::Str(s) => accel.extend(
                        s.split(',')
                            .map(str::trim)
                            .filter(|a| !a.is_empty())
                            .map(String::from),
                    ),
                    other => bail!(
                        "key `accel`: expected accelerator names or config paths, found {}",
                        other.text()
                    ),
                }
            }
        } else {
            crossed.push(axis);
        }
    }
    let total = crossed.iter().try_fold(1usize, |n, (_, values)| {
        n.checked_mul(values.len()).filter(|&n| n <= MAX_CELLS)
    });
    let Some(total) = total else {
        bail!("the plan has more than {MAX_CELLS} cells");
    };
    let mut cells = Vec::with_capacity(total);
    for mut rest in 0..total {
        let mut keys: Fixed = Vec::with_capacity(crossed.len());
        // Mixed radix, last key fastest.
        let mut picks = vec![0usize; crossed.len()];
        for (i, (_, values)) in crossed.iter().enumerate().rev() {
            picks[i] = rest % values.len();
            rest /= values.len();
        }
        for ((key, values), pick) in crossed.iter().zip(picks) {
            keys.push((key.clone(), values[pick].clone()));
        }
        cells.push(CellSpec {
            keys,
            accel: accel.clone(),
        });
    }
    Ok(cells)
}

/// Whether `a` and `b` name the same key, `-` and `_` alike.
fn same_key(a: &str, b: &str) -> bool {
    let sep = |c: u8| c == b'-' || c == b'_';
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || sep(x) && sep(y))
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
    }

    #[test]
    fn duplicate_cells_count_once() {
        let c = cells("name = \"t\"\n[grid]\nlr = [0.0, -0.0, 1]\n[[cell]]\nlr = 1").unwrap();
        let lr: Vec<String> = c.iter().map(|s| s.describe()).collect();
        assert_eq!(lr, ["lr=0", "lr=1"]);
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
