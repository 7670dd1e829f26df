//! Where each key and value of a plan is in its text, so an error names the line and column
//! (as accelerator configs' errors do): read with the `toml` crate's spanned tables.

use std::collections::HashMap;

use toml::de::{DeTable, DeValue};

/// A table of the plan: the top level, `[grid]`, `[train]`, `[slurm]`, or the `i`th (0-based)
/// `[[cell]]` or `[[exclude]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    Top,
    Grid,
    Train,
    Slurm,
    Cell(usize),
    Exclude(usize),
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Top => f.write_str("the top level"),
            Self::Grid => f.write_str("[grid]"),
            Self::Train => f.write_str("[train]"),
            Self::Slurm => f.write_str("[slurm]"),
            Self::Cell(i) => write!(f, "[[cell]] #{}", i + 1),
            Self::Exclude(i) => write!(f, "[[exclude]] #{}", i + 1),
        }
    }
}

/// A line and column, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    /// The position of byte `offset` of `text`.
    pub fn of(text: &str, offset: usize) -> Self {
        let before = text.get(..offset).unwrap_or(text);
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// The positions of a plan's tables, keys and list items.
#[derive(Debug, Default)]
pub struct Spans {
    tables: HashMap<Table, Pos>,
    /// (table, key) → the key; (table, key, i) → the `i`th value of its list.
    keys: HashMap<(Table, String), Pos>,
    items: HashMap<(Table, String, usize), Pos>,
}

impl Spans {
    /// The positions in `text`; a syntax error says where it is.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let top = DeTable::parse(text).map_err(|e| {
            let message = e
                .message()
                .lines()
                .next()
                .unwrap_or("invalid TOML")
                .to_string();
            match e.span() {
                Some(span) => anyhow::anyhow!("{}: {message}", Pos::of(text, span.start)),
                None => anyhow::anyhow!("{message}"),
            }
        })?;
        let mut spans = Self::default();
        spans.walk(text, top.get_ref(), Table::Top);
        Ok(spans)
    }

    fn walk(&mut self, text: &str, table: &DeTable<'_>, at: Table) {
        for (key, value) in table {
            let name = key.get_ref().to_string();
            let pos = Pos::of(text, key.span().start);
            self.keys.insert((at, name.clone()), pos);
            let sub = match (at, name.as_str()) {
                (Table::Top, "grid") => Some(Table::Grid),
                (Table::Top, "train") => Some(Table::Train),
                (Table::Top, "slurm") => Some(Table::Slurm),
                _ => None,
            };
            match value.get_ref() {
                DeValue::Table(t) => {
                    if let Some(sub) = sub {
                        self.tables.insert(sub, pos);
                        self.walk(text, t, sub);
                    }
                }
                DeValue::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let item_pos = Pos::of(text, item.span().start);
                        let of = match name.as_str() {
                            "cell" if at == Table::Top => Some(Table::Cell(i)),
                            "exclude" if at == Table::Top => Some(Table::Exclude(i)),
                            _ => None,
                        };
                        match (of, item.get_ref()) {
                            (Some(of), DeValue::Table(t)) => {
                                self.tables.insert(of, item_pos);
                                self.walk(text, t, of);
                            }
                            _ => {
                                self.items.insert((at, name.clone(), i), item_pos);
                            }
                        }
                    }
                }
                _ => {
                    let value_pos = Pos::of(text, value.span().start);
                    self.items.insert((at, name, 0), value_pos);
                }
            }
        }
    }

    /// Where a table starts (its header, or its first key).
    pub fn table(&self, table: Table) -> Option<Pos> {
        let first_key = self
            .keys
            .iter()
            .filter(|((t, _), _)| *t == table)
            .map(|(_, p)| *p)
            .min_by_key(|p| (p.line, p.column));
        match self.tables.get(&table) {
            Some(p) if first_key.is_none_or(|k| p.line <= k.line) => Some(*p),
            _ => first_key,
        }
    }

    /// Where `key` of `table` is; with `item`, its `item`th list value (a value that is not a
    /// list is item 0).
    pub fn key(&self, table: Table, key: &str, item: Option<usize>) -> Option<Pos> {
        let own = item.and_then(|i| self.items.get(&(table, key.to_string(), i)));
        own.or_else(|| self.keys.get(&(table, key.to_string())))
            .copied()
    }

    /// `message` prefixed with where `key` of `table` is, when known.
    pub fn at(&self, table: Table, key: &str, item: Option<usize>, message: &str) -> String {
        match self.key(table, key, item) {
            Some(p) => format!("{p}: {message}"),
            None => message.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_items_and_tables_have_their_lines() {
        let text = "name = \"t\"\n[grid]\nbits = [\"8\",\n  \"3:8\"]\n[[cell]]\nlr = 1\n";
        let s = Spans::parse(text).unwrap();
        assert_eq!(
            s.key(Table::Grid, "bits", None),
            Some(Pos { line: 3, column: 1 })
        );
        assert_eq!(s.key(Table::Grid, "bits", Some(1)).map(|p| p.line), Some(4));
        assert_eq!(
            s.key(Table::Cell(0), "lr", Some(0)),
            Some(Pos { line: 6, column: 6 })
        );
        assert_eq!(s.table(Table::Grid).map(|p| p.line), Some(2));
        assert_eq!(s.table(Table::Cell(0)).map(|p| p.line), Some(5));
        let e = Spans::parse("name = \"t\"\n[grid\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2, column "), "{e}");
    }
}
