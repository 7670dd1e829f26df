//! CSV files read by column name: a missing column or a cell that is not a finite number is an
//! error naming the file, the line and the column; extra columns are ignored.

use std::path::{Path, PathBuf};

use crate::error::{PlotError, Result};

/// A CSV file with a header line, held in memory.
#[derive(Debug)]
pub struct Table {
    path: PathBuf,
    headers: Vec<String>,
    rows: Vec<csv::StringRecord>,
}

impl Table {
    /// Reads `path`.
    pub fn read(path: &Path) -> Result<Table> {
        let bad = |line: u64, problem: String| PlotError::BadValue {
            path: path.to_path_buf(),
            line,
            column: String::new(),
            problem,
        };
        let file = std::fs::File::open(path).map_err(|e| PlotError::io(path, e))?;
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(file);
        let headers = reader
            .headers()
            .map_err(|e| bad(1, e.to_string()))?
            .iter()
            .map(|h| h.trim().to_string())
            .collect();
        let mut rows = Vec::new();
        for (i, r) in reader.records().enumerate() {
            rows.push(r.map_err(|e| bad(i as u64 + 2, e.to_string()))?);
        }
        Ok(Table {
            path: path.to_path_buf(),
            headers,
            rows,
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
            line: row as u64 + 2,
            column: col.name.clone(),
            problem,
        })
    }

    /// Every row's number in column `name`.
    pub fn numbers(&self, name: &str) -> Result<Vec<f64>> {
        let col = self.column(name)?;
        (0..self.len()).map(|r| self.number(r, &col)).collect()
    }

    /// An error saying the file has no data rows.
    pub fn empty_error(&self) -> PlotError {
        PlotError::empty(self.path.display(), "the file has a header but no rows")
    }
}

/// A column found by name.
#[derive(Debug)]
pub struct Column {
    index: usize,
    name: String,
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
        let a = t.numbers("a").unwrap();
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
}
