//! `run --report`'s `<accelerator>-layers.csv` read once into typed rows (one per layer × GEMM;
//! columns by name, extra ones ignored), for every figure and page that draws it.

use std::path::{Path, PathBuf};

use crate::error::{PlotError, Result};
use crate::table::{Range, Table};

/// The cost columns a figure may need, in file order.
pub const COST_COLUMNS: [&str; 7] = [
    "latency_s",
    "cycles",
    "compute_cycles",
    "energy_j",
    "compute_j",
    "sram_j",
    "dram_j",
];

/// One row: a layer's GEMM and its costs over the run.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerRow {
    /// The file line the row is on.
    pub line: u64,
    /// Index of the layer in the model.
    pub layer_index: u64,
    pub layer: String,
    /// `fw`, `eb` or `wg` as the file has it.
    pub gemm: String,
    /// The [`COST_COLUMNS`], `None` where the file lacks the column.
    pub costs: [Option<f64>; 7],
}

/// The rows of one `<accelerator>-layers.csv`.
#[derive(Clone, Debug)]
pub struct LayerRows {
    pub path: PathBuf,
    /// The accelerator, from the file name.
    pub accelerator: String,
    pub rows: Vec<LayerRow>,
    /// The file's columns, for errors naming what it has.
    headers: String,
    /// Which of [`COST_COLUMNS`] the file has.
    has: [bool; 7],
}

impl LayerRows {
    /// Reads `path`: its key columns must be there; each cost column is read when present.
    pub fn read(path: &Path) -> Result<LayerRows> {
        LayerRows::of(&Table::read(path)?)
    }

    /// The rows of table `t` (read from a `*-layers.csv`): each (layer, GEMM) once, costs not
    /// negative.
    pub fn of(t: &Table) -> Result<LayerRows> {
        let path = t.path();
        let index = t.column("layer_index")?;
        let name = t.column("layer")?;
        let gemm = t.column("gemm")?;
        let cols = COST_COLUMNS.map(|c| t.column(c).ok());
        t.unique(&[&index, &gemm])?;
        let mut rows = Vec::with_capacity(t.len());
        for r in 0..t.len() {
            let line = r as u64 + 2;
            let li = t.number(r, &index)?;
            if li < 0.0 || li.fract() != 0.0 {
                return Err(PlotError::BadValue {
                    path: path.to_path_buf(),
                    line,
                    column: "layer_index".into(),
                    problem: format!("{li} is not a layer index"),
                });
            }
            let mut costs = [None; 7];
            for (slot, col) in costs.iter_mut().zip(&cols) {
                if let Some(c) = col {
                    *slot = Some(t.checked(r, c, Range::NonNegative)?);
                }
            }
            rows.push(LayerRow {
                line,
                layer_index: li as u64,
                layer: t.text(r, &name).to_string(),
                gemm: t.text(r, &gemm).to_string(),
                costs,
            });
        }
        let accelerator = path
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_end_matches("-layers.csv")
                    .to_string()
            })
            .unwrap_or_default();
        Ok(LayerRows {
            path: path.to_path_buf(),
            accelerator,
            rows,
            headers: t.headers().join(", "),
            has: cols.map(|c| c.is_some()),
        })
    }

    /// The positions in [`COST_COLUMNS`] of `names`, or an error naming the first the file lacks.
    pub fn columns(&self, names: &[&str]) -> Result<Vec<usize>> {
        names
            .iter()
            .map(|n| {
                let k = COST_COLUMNS.iter().position(|c| c == n);
                match k {
                    Some(k) if self.has[k] => Ok(k),
                    _ => Err(PlotError::MissingColumn {
                        path: self.path.clone(),
                        column: n.to_string(),
                        found: self.headers.clone(),
                    }),
                }
            })
            .collect()
    }

    /// An error saying the file has no data rows.
    pub fn empty_error(&self) -> PlotError {
        PlotError::empty(self.path.display(), "the file has a header but no rows")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_hold_the_columns_the_file_has() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zc706-layers.csv");
        std::fs::write(
            &path,
            "layer_index,layer,gemm,latency_s,energy_j,x\n0,conv1,fw,1.5,2,y\n",
        )
        .unwrap();
        let rows = LayerRows::read(&path).unwrap();
        assert_eq!(rows.accelerator, "zc706");
        let r = &rows.rows[0];
        assert_eq!((r.line, r.layer_index, r.gemm.as_str()), (2, 0, "fw"));
        assert_eq!(r.costs[0], Some(1.5));
        assert_eq!(r.costs[1], None);
        assert_eq!(rows.columns(&["energy_j", "latency_s"]).unwrap(), [3, 0]);
        let e = rows.columns(&["cycles"]).unwrap_err().to_string();
        assert!(
            e.contains("no column 'cycles'") && e.contains("latency_s, energy_j, x"),
            "{e}"
        );
        std::fs::write(&path, "layer_index,layer,gemm\n-1,a,fw\n").unwrap();
        let e = LayerRows::read(&path).unwrap_err().to_string();
        assert!(e.contains("line 2, column 'layer_index'"), "{e}");
    }
}
