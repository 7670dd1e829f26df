//! The sweep plan (`PLAN.toml`): its name, output directory, `[grid]`, optional `[train]`,
//! `[[cell]]` and `[[exclude]]` tables and `[slurm]` options, read with key order kept (it is the
//! column order of `results.csv`) and every key's line and column ([`Spans`]) for the errors.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::spans::{Pos, Spans, Table};

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
    /// Where each table, key and value is in the text.
    pub spans: Spans,
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
        let spans = Spans::parse(text)?;
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            // toml's message spans several lines (a source excerpt); keep its first line.
            anyhow::anyhow!("{}", e.message().lines().next().unwrap_or("invalid TOML"))
        })?;
        let at = |t: Table, key: &str, message: String| {
            anyhow::anyhow!(spans.at(t, key, None, &message))
        };
        for key in table.keys() {
            if !TOP_KEYS.contains(&key.as_str()) {
                let valid = TOP_KEYS.join(", ");
                return Err(at(
                    Table::Top,
                    key,
                    format!("unknown top-level key `{key}` (valid: {valid})"),
                ));
            }
        }
        let name = match table.get("name") {
            Some(toml::Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(_) => {
                return Err(at(
                    Table::Top,
                    "name",
                    "`name`: expected a non-empty string".into(),
                ))
            }
            None => bail!("`name` is missing (a short name for the study)"),
        };
        let out = match table.get("out") {
            Some(toml::Value::String(s)) => Some(PathBuf::from(s)),
            Some(_) => {
                return Err(at(
                    Table::Top,
                    "out",
                    "`out`: expected a path string".into(),
                ))
            }
            None => None,
        };
        let grid = match table.get("grid") {
            Some(v) => axes(sub_table(v, Table::Grid, &spans)?, Table::Grid, &spans)?,
            None => Vec::new(),
        };
        let train = match table.get("train") {
            Some(v) => Some(fixed(
                sub_table(v, Table::Train, &spans)?,
                Table::Train,
                &spans,
            )?),
            None => None,
        };
        if train.iter().flatten().any(|(k, _)| k == "accel") {
            let message = "[train] key `accel`: accelerators are a [grid] or [[cell]] key (every cell is costed on them)";
            return Err(at(Table::Train, "accel", message.into()));
        }
        let cells = array_of_tables(&table, "cell", &spans)?
            .into_iter()
            .enumerate()
            .map(|(i, t)| axes(t, Table::Cell(i), &spans))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let exclude = array_of_tables(&table, "exclude", &spans)?
            .into_iter()
            .enumerate()
            .map(|(i, t)| fixed(t, Table::Exclude(i), &spans))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let slurm = match table.get("slurm") {
            Some(v) => slurm_args(sub_table(v, Table::Slurm, &spans)?, &spans)?,
            None => Vec::new(),
        };
        let plan = Self {
            name,
            out,
            grid,
            train,
            cells,
            exclude,
            slurm,
            spans,
        };
        plan.check_repeated_keys()?;
        Ok(plan)
    }
}

/// Whether `a` and `b` name the same key, `-` and `_` alike.
pub fn same_key(a: &str, b: &str) -> bool {
    let sep = |c: u8| c == b'-' || c == b'_';
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || sep(x) && sep(y))
}

impl Plan {
    /// Refuses a key given twice: in one table under two spellings (`grad_bits`, `grad-bits`),
    /// or in `[train]` and in `[grid]` / a `[[cell]]` (a key is fixed for every cell or varied,
    /// not both); the error names both places.
    fn check_repeated_keys(&self) -> anyhow::Result<()> {
        let names = |keys: Vec<&String>| keys.into_iter().cloned().collect::<Vec<_>>();
        let train = names(self.train.iter().flatten().map(|(k, _)| k).collect());
        let mut tables = vec![(
            Table::Grid,
            names(self.grid.iter().map(|(k, _)| k).collect()),
        )];
        for (i, cell) in self.cells.iter().enumerate() {
            tables.push((Table::Cell(i), names(cell.iter().map(|(k, _)| k).collect())));
        }
        tables.push((Table::Train, train.clone()));
        let at = |t: Table, k: &str| self.spans.key(t, k, None);
        let pos = |p: Option<Pos>| p.map_or(String::new(), |p| format!(" ({p})"));
        for (table, keys) in &tables {
            for (i, a) in keys.iter().enumerate() {
                if let Some(b) = keys[..i].iter().find(|b| same_key(a, b)) {
                    let message = format!(
                        "{table} key `{a}` repeats `{b}`{}: give each key once",
                        pos(at(*table, b))
                    );
                    bail!(self.spans.at(*table, a, None, &message));
                }
                let fixed = train.iter().find(|t| same_key(a, t));
                if let Some(t) = fixed.filter(|_| *table != Table::Train) {
                    let message = format!(
                        "{table} key `{a}` is also set in [train]{}: a key is fixed for every \
                         cell in [train] or varied in [grid] / [[cell]], not both",
                        pos(at(Table::Train, t))
                    );
                    bail!(self.spans.at(*table, a, None, &message));
                }
            }
        }
        Ok(())
    }
}

fn sub_table<'a>(
    v: &'a toml::Value,
    what: Table,
    spans: &Spans,
) -> anyhow::Result<&'a toml::Table> {
    v.as_table().with_context(|| {
        let key = what.to_string().trim_matches(['[', ']']).to_string();
        spans.at(Table::Top, &key, None, &format!("{what}: expected a table"))
    })
}

fn array_of_tables<'a>(
    table: &'a toml::Table,
    key: &str,
    spans: &Spans,
) -> anyhow::Result<Vec<&'a toml::Table>> {
    let expected = || {
        let message = format!("`{key}`: expected an array of tables ([[{key}]])");
        anyhow::anyhow!(spans.at(Table::Top, key, None, &message))
    };
    match table.get(key) {
        None => Ok(Vec::new()),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| v.as_table().ok_or_else(expected))
            .collect(),
        Some(_) => Err(expected()),
    }
}

/// Keys with one value or an array of values.
fn axes(table: &toml::Table, what: Table, spans: &Spans) -> anyhow::Result<Axes> {
    table
        .iter()
        .map(|(key, v)| {
            let place = |i: Option<usize>| spans.at(what, key, i, &format!("{what} key `{key}`"));
            let values = match v {
                toml::Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| Scalar::from_toml(item, &place(Some(i))))
                    .collect::<anyhow::Result<Vec<_>>>()?,
                scalar => vec![Scalar::from_toml(scalar, &place(Some(0)))?],
            };
            if values.is_empty() {
                bail!(
                    "{}: the list of values is empty (an empty grid has no cells)",
                    place(None)
                );
            }
            Ok((key.clone(), values))
        })
        .collect()
}

/// Keys with one value each.
fn fixed(table: &toml::Table, what: Table, spans: &Spans) -> anyhow::Result<Fixed> {
    table
        .iter()
        .map(|(key, v)| {
            let place = |i| spans.at(what, key, i, &format!("{what} key `{key}`"));
            if v.is_array() {
                let place = place(None);
                bail!("{place}: takes one value (put lists of values in [grid])");
            }
            let place = place(Some(0));
            Ok((key.clone(), Scalar::from_toml(v, &place)?))
        })
        .collect()
}

/// `[slurm]` as sbatch arguments.
fn slurm_args(table: &toml::Table, spans: &Spans) -> anyhow::Result<Vec<String>> {
    let mut args = Vec::new();
    for (key, v) in table {
        let flag = key.replace('_', "-");
        if !SLURM_KEYS.contains(&flag.as_str()) {
            let message = format!(
                "[slurm]: unknown key `{key}` (valid: {})",
                SLURM_KEYS.join(", ")
            );
            bail!(spans.at(Table::Slurm, key, None, &message));
        }
        let place = spans.at(Table::Slurm, key, None, &format!("[slurm] key `{key}`"));
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
        // … and where it is.
        assert!(err("name = \"x\"\ngird = 1").starts_with("line 2, column 1: "));
        let e = err("name = \"x\"\n[grid]\nseed = [1,\n  [2]]");
        assert!(e.starts_with("line 4, column 3: [grid] key `seed`"), "{e}");
        assert!(err("name = \"x\"\n[grid\n").starts_with("line 2, column "));
        assert!(err("name = \"x\"\ncell = 1").starts_with("line 2, column 1: `cell`"));
    }

    #[test]
    fn a_key_given_twice_names_both_lines() {
        let err = |text: &str| format!("{:#}", Plan::parse(text).unwrap_err());
        let e = err("name = \"x\"\n[grid]\ngrad_bits = 8\ngrad-bits = [6]");
        assert!(
            e.starts_with(
                "line 4, column 1: [grid] key `grad-bits` repeats `grad_bits` (line 3, column 1)"
            ),
            "{e}"
        );
        let e = err("name = \"x\"\n[train]\niters = 2\n[[cell]]\niters = 3");
        assert!(
            e.starts_with(
                "line 5, column 1: [[cell]] #1 key `iters` is also set in [train] (line 3"
            ),
            "{e}"
        );
        // A [[cell]] may set a grid key in the other spelling: its value replaces the grid's.
        let plan = Plan::parse("name = \"x\"\n[grid]\ngrad_bits = 8\n[[cell]]\ngrad-bits = 6");
        assert!(plan.is_ok());
    }
}
