//! The sweep plan (`PLAN.toml`): its name, output directory, `[grid]`, optional `[train]`,
//! `[[cell]]` and `[[exclude]]` tables and `[slurm]` options, read with key order kept (it is the
//! column order of `results.csv`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// One plan value: what a TOML scalar becomes on a `cptsim` command line. Floats are finite
/// (a plan's `nan` and `inf` are refused), so equality is an equivalence and cells can be hashed.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Eq for Scalar {}

impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Self::Str(s) => s.hash(state),
            Self::Int(i) => i.hash(state),
            // -0.0 == 0.0, so both hash as 0.0.
            Self::Float(f) => (if *f == 0.0 { 0.0f64 } else { *f }).to_bits().hash(state),
            Self::Bool(b) => b.hash(state),
        }
    }
}

impl Scalar {
    /// The value as a command-line argument (floats in Rust's shortest round-trip form).
    pub fn text(&self) -> String {
        match self {
            Self::Str(s) => s.clone(),
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Bool(b) => b.to_string(),
        }
    }

    /// The value in `results.json` and `cell.json`.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Self::Str(s) => serde_json::Value::from(s.as_str()),
            Self::Int(i) => serde_json::Value::from(*i),
            Self::Float(f) => serde_json::Value::from(*f),
            Self::Bool(b) => serde_json::Value::from(*b),
        }
    }

    fn from_toml(v: &toml::Value, what: &str) -> anyhow::Result<Self> {
        Ok(match v {
            toml::Value::String(s) => Self::Str(s.clone()),
            toml::Value::Integer(i) => Self::Int(*i),
            toml::Value::Float(f) if f.is_finite() => Self::Float(*f),
            toml::Value::Float(_) => bail!("{what}: not a finite number"),
            toml::Value::Boolean(b) => Self::Bool(*b),
            other => bail!(
                "{what}: expected a string, number or boolean, found a {}",
                other.type_str()
            ),
        })
    }
}

/// A table of keys, each with one or more values, in plan order.
pub type Axes = Vec<(String, Vec<Scalar>)>;

/// A table of keys with one value each, in plan order.
pub type Fixed = Vec<(String, Scalar)>;

/// The parsed plan.
#[derive(Debug)]
pub struct Plan {
    pub name: String,
    /// `out`, relative to the working directory; `--out` overrides it.
    pub out: Option<PathBuf>,
    /// `[grid]`: crossed.
    pub grid: Axes,
    /// `[train]`: present = every cell trains, with these fixed flags.
    pub train: Option<Fixed>,
    /// `[[cell]]`: extra cells; each crosses its own values with the grid keys it does not set.
    pub cells: Vec<Axes>,
    /// `[[exclude]]`: a cell matching every key of one of these is dropped.
    pub exclude: Vec<Fixed>,
    /// `[slurm]`: sbatch options.
    pub slurm: Vec<String>,
}

/// Top-level keys a plan may have.
const TOP_KEYS: [&str; 7] = ["name", "out", "grid", "train", "cell", "exclude", "slurm"];

/// `[slurm]` keys that become `--KEY=VALUE` sbatch options; `extra` is a list of raw arguments.
const SLURM_KEYS: [&str; 8] = [
    "partition",
    "time",
    "cpus-per-task",
    "mem",
    "account",
    "qos",
    "constraint",
    "extra",
];

impl Plan {
    /// Reads and parses the plan in `path`.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("plan {}: cannot read", path.display()))?;
        Self::parse(&text).with_context(|| format!("plan {}", path.display()))
    }

    /// Parses plan text.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            // toml's message spans several lines (a source excerpt); keep its first line.
            anyhow::anyhow!("{}", e.message().lines().next().unwrap_or("invalid TOML"))
        })?;
        for key in table.keys() {
            if !TOP_KEYS.contains(&key.as_str()) {
                bail!(
                    "unknown top-level key `{key}` (valid: {})",
                    TOP_KEYS.join(", ")
                );
            }
        }
        let name = match table.get("name") {
            Some(toml::Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(_) => bail!("`name`: expected a non-empty string"),
            None => bail!("`name` is missing (a short name for the study)"),
        };
        let out = match table.get("out") {
            Some(toml::Value::String(s)) => Some(PathBuf::from(s)),
            Some(_) => bail!("`out`: expected a path string"),
            None => None,
        };
        let grid = match table.get("grid") {
            Some(v) => axes(sub_table(v, "[grid]")?, "[grid]")?,
            None => Vec::new(),
        };
        let train = match table.get("train") {
            Some(v) => Some(fixed(sub_table(v, "[train]")?, "[train]")?),
            None => None,
        };
        if train.iter().flatten().any(|(k, _)| k == "accel") {
            bail!("[train] key `accel`: accelerators are a [grid] or [[cell]] key (every cell is costed on them)");
        }
        let cells = array_of_tables(&table, "cell")?
            .into_iter()
            .enumerate()
            .map(|(i, t)| axes(t, &format!("[[cell]] #{}", i + 1)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let exclude = array_of_tables(&table, "exclude")?
            .into_iter()
            .enumerate()
            .map(|(i, t)| fixed(t, &format!("[[exclude]] #{}", i + 1)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let slurm = match table.get("slurm") {
            Some(v) => slurm_args(sub_table(v, "[slurm]")?)?,
            None => Vec::new(),
        };
        Ok(Self {
            name,
            out,
            grid,
            train,
            cells,
            exclude,
            slurm,
        })
    }
}

fn sub_table<'a>(v: &'a toml::Value, what: &str) -> anyhow::Result<&'a toml::Table> {
    v.as_table()
        .with_context(|| format!("{what}: expected a table"))
}

fn array_of_tables<'a>(table: &'a toml::Table, key: &str) -> anyhow::Result<Vec<&'a toml::Table>> {
    match table.get(key) {
        None => Ok(Vec::new()),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_table()
                    .with_context(|| format!("[[{key}]]: expected tables"))
            })
            .collect(),
        Some(_) => bail!("`{key}`: expected an array of tables ([[{key}]])"),
    }
}

/// Keys with one value or an array of values.
fn axes(table: &toml::Table, what: &str) -> anyhow::Result<Axes> {
    table
        .iter()
        .map(|(key, v)| {
            let place = format!("{what} key `{key}`");
            let values = match v {
                toml::Value::Array(items) => items
                    .iter()
                    .map(|item| Scalar::from_toml(item, &place))
                    .collect::<anyhow::Result<Vec<_>>>()?,
                scalar => vec![Scalar::from_toml(scalar, &place)?],
            };
            if values.is_empty() {
                bail!("{place}: the list of values is empty (an empty grid has no cells)");
            }
            Ok((key.clone(), values))
        })
        .collect()
}

/// Keys with one value each.
fn fixed(table: &toml::Table, what: &str) -> anyhow::Result<Fixed> {
    table
        .iter()
        .map(|(key, v)| {
            let place = format!("{what} key `{key}`");
            if v.is_array() {
                bail!("{place}: takes one value (put lists of values in [grid])");
            }
            Ok((key.clone(), Scalar::from_toml(v, &place)?))
        })
        .collect()
}

/// `[slurm]` as sbatch arguments.
fn slurm_args(table: &toml::Table) -> anyhow::Result<Vec<String>> {
    let mut args = Vec::new();
    for (key, v) in table {
        let flag = key.replace('_', "-");
        if !SLURM_KEYS.contains(&flag.as_str()) {
            bail!(
                "[slurm]: unknown key `{key}` (valid: {})",
                SLURM_KEYS.join(", ")
            );
        }
        let place = format!("[slurm] key `{key}`");
        if flag == "extra" {
            let items = v
                .as_array()
                .with_context(|| format!("{place}: expected a list of sbatch arguments"))?;
            for item in items {
                match item {
                    toml::Value::String(s) => args.push(s.clone()),
                    _ => bail!("{place}: expected strings"),
                }
            }
        } else {
            if v.is_array() {
                bail!("{place}: takes one value");
            }
            args.push(format!("--{flag}={}", Scalar::from_toml(v, &place)?.text()));
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_reads_every_table() {
        let plan = Plan::parse(
            r#"
name = "t"
out = "runs/t"
[grid]
schedule = ["static", "cosine"]
bits = "8"
model = ["zoo:resnet20"]
[train]
iters = 2
[[cell]]
policy = "ldp"
target = 0.6
[[exclude]]
schedule = "static"
[slurm]
partition = "debug"
cpus_per_task = 2
extra = ["--exclusive"]
"#,
        )
        .unwrap();
        let keys: Vec<&str> = plan.grid.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["schedule", "bits", "model"]);
        assert_eq!(plan.grid[1].1, vec![Scalar::Str("8".into())]);
        assert_eq!(plan.train.unwrap()[0], ("iters".into(), Scalar::Int(2)));
        assert_eq!(plan.cells[0][1].1, vec![Scalar::Float(0.6)]);
        assert_eq!(plan.exclude.len(), 1);
        assert_eq!(
            plan.slurm,
            ["--partition=debug", "--cpus-per-task=2", "--exclusive"]
        );
    }

    #[test]
    fn bad_plans_name_the_key() {
        let err = |text: &str| format!("{:#}", Plan::parse(text).unwrap_err());
        assert!(err("name = \"x\"\ngird = 1").contains("`gird`"));
        assert!(err("name = \"x\"\n[grid]\nseed = []").contains("`seed`"));
        assert!(err("name = \"x\"\n[train]\nseed = [1, 2]").contains("[grid]"));
        assert!(err("name = \"x\"\n[slurm]\npartitoin = \"a\"").contains("`partitoin`"));
        assert!(err("[grid]\nseed = [1]").contains("`name`"));
        assert!(err("name = \"x\"\n[train]\naccel = \"zc706\"").contains("`accel`"));
        assert!(err("name = \"x\"\n[grid]\nseed = [[1]]").contains("`seed`"));
    }
}
