//! CSV files read by column name, checked as they are read: a repeated column, a field longer
//! than [`MAX_FIELD`], a missing column, a cell that is not a finite number or is out of its
//! column's range ([`Range`]), and a row that repeats another's key are errors naming the file,
//! the line and the column; extra columns are ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{PlotError, Result};

/// Longest field, in bytes: names and numbers are far shorter, and every drawn label is text
/// a figure must hold (an SVG outlines each glyph, so a long field would make a huge file).
pub const MAX_FIELD: usize = 256;

/// A CSV file with a header line, held in memory.
#[derive(Debug)]
pub struct Table {
    path: PathBuf,
    headers: Vec<String>,
    rows: Vec<csv::StringRecord>,
    /// The file line each row starts on.
    lines: Vec<u64>,
}

/// What a numeric column may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// Any finite number.
    Any,
    /// A finite number ≥ 0 (a cost, a loss).
    NonNegative,
    /// A fraction in [0, 1] (an accuracy).
    Fraction,
    /// A whole number ≥ 0 (a seed, an iteration, an index).
    Count,
}

impl Range {
    /// Why `v` is not in this range, or `None`.
    fn problem(self, v: f64) -> Option<String> {
        match self {
            Range::Any => None,
            Range::NonNegative if v < 0.0 => Some(format!("{v} is negative")),
            Range::Fraction if !(0.0..=1.0).contains(&v) => Some(format!("{v} is outside [0, 1]")),
            Range::Count if v < 0.0 || v.fract() != 0.0 => {
                Some(format!("{v} is not a whole number >= 0"))
            }
            _ => None,
        }
    }
}

impl Table {
    /// Reads `path`.
    pub fn read(path: &Path) -> Result<Table> {
        let bytes = std::fs::read(path).map_err(|e| PlotError::io(path, e))?;
        Table::parse(&bytes, path)
    }

    /// Parses `bytes` as the CSV file `path` (named in errors): a header line of distinct names,
    /// then rows of as many fields, none longer than [`MAX_FIELD`].
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Table> {
        let malformed = |line: u64, problem: String| PlotError::Malformed {
            path: path.to_path_buf(),
            line,
            problem,
        };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(bytes);
        let raw = reader
            .headers()
            .map_err(|e| malformed(1, e.to_string()))?
            .clone();
        let mut headers: Vec<String> = Vec::with_capacity(raw.len());
        for (i, h) in raw.iter().enumerate() {
            let name = h.trim();
            if name.len() > MAX_FIELD {
                return Err(malformed(1, too_long(i + 1, name.len())));
            }
            if let Some(first) = headers.iter().position(|n| n == name) {
                return Err(PlotError::BadValue {
                    path: path.to_path_buf(),
                    line: 1,
                    column: name.to_string(),
                    problem: format!(
                        "the column is named twice (fields {} and {})",
                        first + 1,
                        i + 1
                    ),
                });
            }
            headers.push(name.to_string());
        }
        let mut rows = Vec::new();
        let mut lines = Vec::new();
        for r in reader.records() {
            let r = r.map_err(|e| {
                let line = e.position().map_or(0, csv::Position::line);
                malformed(line, e.to_string())
            })?;
            let line = r
                .position()
                .map_or(rows.len() as u64 + 2, csv::Position::line);
            if let Some((i, f)) = r.iter().enumerate().find(|(_, f)| f.len() > MAX_FIELD) {
                return Err(match headers.get(i) {
                    Some(column) => PlotError::BadValue {
                        path: path.to_path_buf(),
                        line,
                        column: column.clone(),
                        problem: format!("a field of {} bytes (at most {MAX_FIELD})", f.len()),
                    },
                    None => malformed(line, too_long(i + 1, f.len())),
                });
            }
            rows.push(r);
            lines.push(line);
        }
        Ok(Table {
            path: path.to_path_buf(),
            headers,
            rows,
            lines,
        })
    }
    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The column names, in file order.
    pub fn headers(&self) -> &[String] {
        &self.headers
    }

    /// Number of data rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The file line `row` starts on.
    pub fn line(&self, row: usize) -> u64 {
        self.lines.get(row).copied().unwrap_or(row as u64 + 2)
    }

    /// True when there is no data row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// True when the file has column `name`.
    pub fn has(&self, name: &str) -> bool {
        self.headers.iter().any(|h| h == name)
    }

    /// The index of column `name`, or an error naming the file and the column.
    pub fn column(&self, name: &str) -> Result<Column> {
        match self.headers.iter().position(|h| h == name) {
            Some(index) => Ok(Column {
                index,
                name: name.to_string(),
            }),
            None => Err(PlotError::MissingColumn {
                path: self.path.clone(),
                column: name.to_string(),
                found: self.headers().join(", "),
            }),
        }
    }

    /// The text of `row`'s cell in `col`.
    pub fn text(&self, row: usize, col: &Column) -> &str {
        self.rows[row].get(col.index).unwrap_or("").trim()
    }

    /// `row`'s cell in `col` as a finite number.
    pub fn number(&self, row: usize, col: &Column) -> Result<f64> {
        let text = self.text(row, col);
        let problem = match text.parse::<f64>() {
            Ok(v) if v.is_finite() => return Ok(v),
            Ok(v) => format!("{v} is not a finite number"),
            Err(_) if text.is_empty() => "empty cell, a number is needed".to_string(),
            Err(_) => format!("'{text}' is not a number"),
        };
        Err(PlotError::BadValue {
            path: self.path.clone(),
            line: self.line(row),
            column: col.name.clone(),
            problem,
        })
    }

    /// `row`'s cell in `col` as a finite number in `range`.
    pub fn checked(&self, row: usize, col: &Column, range: Range) -> Result<f64> {
        let v = self.number(row, col)?;
        match range.problem(v) {
            None => Ok(v),
            Some(problem) => Err(PlotError::BadValue {
                path: self.path.clone(),
                line: self.line(row),
                column: col.name.clone(),
                problem,
            }),
        }
    }

    /// Every row's number in column `name`, each in `range`.
    pub fn numbers(&self, name: &str, range: Range) -> Result<Vec<f64>> {
        let col = self.column(name)?;
        (0..self.len())
            .map(|r| self.checked(r, &col, range))
            .collect()
    }

    /// An error for the first row whose cells in `key` equal an earlier row's: the file holds
    /// each key once (a run's seed once per configuration, an iteration once).
    pub fn unique(&self, key: &[&Column]) -> Result<()> {
        let mut seen: HashMap<Vec<&str>, usize> = HashMap::with_capacity(self.len());
        for r in 0..self.len() {
            let cells: Vec<&str> = key.iter().map(|c| self.text(r, c)).collect();
            if let Some(first) = seen.insert(cells, r) {
                let names: Vec<&str> = key.iter().map(|c| c.name.as_str()).collect();
                return Err(PlotError::BadValue {
                    path: self.path.clone(),
                    line: self.line(r),
                    column: names.join(", "),
                    problem: format!("the row repeats line {}", self.line(first)),
                });
            }
        }
        Ok(())
    }

    /// An error saying the file has no data rows.
    pub fn empty_error(&self) -> PlotError {
        PlotError::empty(self.path.display(), "the file has a header but no rows")
    }
}

/// A column found by name.
#[derive(Clone, Debug)]
pub struct Column {
    index: usize,
    name: String,
}

/// The problem of a field with no column name to give.
fn too_long(field: usize, bytes: usize) -> String {
    format!("field {field} is {bytes} bytes long (at most {MAX_FIELD})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_by_name_and_bad_cells_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        std::fs::write(&path, "a,b,extra\n1,2.5,x\n3,NaN,y\n4,,z\n").unwrap();
        let t = Table::read(&path).unwrap();
        assert_eq!(t.len(), 3);
        let a = t.numbers("a", Range::Any).unwrap();
        assert_eq!(a, [1.0, 3.0, 4.0]);
        let b = t.column("b").unwrap();
        assert_eq!(t.number(0, &b).unwrap(), 2.5);
        let e = t.number(1, &b).unwrap_err().to_string();
        assert!(
            e.contains("r.csv: line 3, column 'b'") && e.contains("finite"),
            "{e}"
        );
        let e = t.number(2, &b).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("empty"), "{e}");
        let e = t.column("gbitops").unwrap_err().to_string();
        assert!(
            e.contains("r.csv: no column 'gbitops'") && e.contains("a, b, extra"),
            "{e}"
        );
        let e = Table::read(&dir.path().join("none.csv"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.csv"), "{e}");
    }

    fn err(text: &str) -> String {
        Table::parse(text.as_bytes(), Path::new("r.csv"))
            .and_then(|t| {
                let a = t.column("a")?;
                t.unique(&[&a])?;
                t.numbers("a", Range::Count)?;
                t.numbers("b", Range::Fraction)?;
                t.numbers("c", Range::NonNegative)
            })
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn repeats_ranges_and_long_fields_are_named() {
        assert_eq!(
            err("a,b,a\n1,2,3\n"),
            "r.csv: line 1, column 'a': the column is named twice (fields 1 and 3)"
        );
        assert_eq!(
            err("a,b,c\n1,0.5,1\n2,0.5,1\n1,0.5,1\n"),
            "r.csv: line 4, column 'a': the row repeats line 2"
        );
        assert!(err("a,b,c\nx,0.5,1\n").contains("line 2, column 'a': 'x' is not a number"));
        assert!(err("a,b,c\n1.5,0.5,1\n").contains("line 2, column 'a': 1.5 is not a whole"));
        assert!(err("a,b,c\n1,1.5,1\n").contains("line 2, column 'b': 1.5 is outside [0, 1]"));
        assert!(err("a,b,c\n1,0.5,-2\n").contains("line 2, column 'c': -2 is negative"));
        let long = format!("a,b,c\n1,0.5,{}\n", "9".repeat(1 << 20));
        assert_eq!(
            err(&long),
            "r.csv: line 2, column 'c': a field of 1048576 bytes (at most 256)"
        );
        let e = err("a,b,c\n1,0.5\n");
        assert!(
            e.starts_with("r.csv: line 2: ") && !e.contains("column"),
            "{e}"
        );
    }
}
