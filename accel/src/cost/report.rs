//! CSV reports of a costed trace, written atomically (temp file in the same directory, then
//! rename).
//!
//! `<accelerator>-layers.csv`, one row per layer × GEMM:
//! `layer_index, layer, gemm (fw|eb|wg), latency_s, cycles, compute_cycles, stall_cycles,
//! energy_j, compute_j, sram_j, dram_j, dram_bytes, mem_cycles, bound (compute|memory)` — totals
//! over the whole trace.
//!
//! `<model>-<accelerator>-infer.csv` (`cptsim infer --report`): the layers columns for one
//! inference batch.
//!
//! `<accelerator>-epochs.csv`, one row per epoch:
//! `epoch, iter_start, iter_end (exclusive), latency_s, cycles, compute_cycles, stall_cycles,
//! energy_j, compute_j, sram_j, dram_j, dram_bytes`.

use std::io::Write;
use std::path::{Path, PathBuf};

use cptsim_models::atomic::write_atomically;
use cptsim_traces::TraceError;

use crate::cost::inference::InferenceCost;
use crate::cost::trace::{CostTotals, EpochCost, LayerGemmCost};

/// Column names shared by both files after their leading key columns.
const COST_COLUMNS: [&str; 9] = [
    "latency_s",
    "cycles",
    "compute_cycles",
    "stall_cycles",
    "energy_j",
    "compute_j",
    "sram_j",
    "dram_j",
    "dram_bytes",
];

fn cost_fields(t: &CostTotals) -> [String; 9] {
    [
        format!("{:.6e}", t.latency_s),
        format!("{:.0}", t.cycles),
        format!("{:.0}", t.compute_cycles),
        format!("{:.0}", t.stall_cycles),
        format!("{:.6e}", t.energy_j()),
        format!("{:.6e}", t.energy.compute_j),
        format!("{:.6e}", t.energy.sram_j),
        format!("{:.6e}", t.energy.dram_j),
        format!("{:.0}", t.dram_bytes),
    ]
}

/// Quotes a CSV field when it needs it.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut out = header.join(",");
    out.push('\n');
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| field(c)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// Writes `contents` to `path` atomically (the project's temp-file-and-rename writer).
fn write_file(path: &Path, contents: &[u8]) -> Result<(), TraceError> {
    write_atomically(
        path,
        |w| w.write_all(contents).map_err(|e| TraceError::io(path, e)),
        TraceError::io,
    )
}

/// A file-name-safe form of an accelerator name.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The layers CSV of `rows`.
fn layers_csv(rows: &[LayerGemmCost]) -> String {
    let mut head = vec!["layer_index", "layer", "gemm"];
    head.extend(COST_COLUMNS);
    head.extend(["mem_cycles", "bound"]);
    csv(
        &head,
        rows.iter().map(|l| {
            let mut r = vec![
                l.layer.to_string(),
                l.name.clone(),
                l.gemm.label().to_string(),
            ];
            r.extend(cost_fields(&l.totals));
            r.push(format!("{:.0}", l.totals.mem_cycles));
            r.push(l.totals.bound().to_string());
            r
        }),
    )
}

/// Writes `<model>-<accelerator>-infer.csv` (the layers CSV's columns, whole batch, `gemm` = `fw`)
/// of an inference into `dir` (created if missing); returns its path.
pub fn write_inference_report(
    dir: &Path,
    model: &str,
    cost: &InferenceCost,
) -> Result<PathBuf, TraceError> {
    std::fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
    let path = dir.join(format!(
        "{}-{}-infer.csv",
        file_stem(model),
        file_stem(&cost.accelerator)
    ));
    write_file(&path, layers_csv(&cost.per_layer).as_bytes())?;
    Ok(path)
}

/// Writes the two CSV files of accelerator `name`'s `per_layer_gemm` and `per_epoch` rows into
/// `dir` (created if missing); returns their paths.
pub fn write_report(
    dir: &Path,
    name: &str,
    per_layer_gemm: &[LayerGemmCost],
    per_epoch: &[EpochCost],
) -> Result<Vec<PathBuf>, TraceError> {
    std::fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
    let stem = file_stem(name);
    let layers = layers_csv(per_layer_gemm);
    let mut head = vec!["epoch", "iter_start", "iter_end"];
    head.extend(COST_COLUMNS);
    let epochs = csv(
        &head,
        per_epoch.iter().map(|e| {
            let mut r = vec![
                e.epoch.to_string(),
                e.iter_start.to_string(),
                e.iter_end.to_string(),
            ];
            r.extend(cost_fields(&e.totals));
            r
        }),
    );
    let lp = dir.join(format!("{stem}-layers.csv"));
    let ep = dir.join(format!("{stem}-epochs.csv"));
    write_file(&lp, layers.as_bytes())?;
    write_file(&ep, epochs.as_bytes())?;
    Ok(vec![lp, ep])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_are_quoted() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("x\"y"), "\"x\"\"y\"");
        assert_eq!(field("plain"), "plain");
        assert_eq!(file_stem("my accel/v2"), "my_accel_v2");
    }

    #[test]
    fn report_files_have_the_documented_columns() {
        let rows = [LayerGemmCost {
            layer: 3,
            name: "a,b".into(),
            gemm: crate::workload::gemm::GemmKind::WeightGrad,
            totals: CostTotals {
                cycles: 10.0,
                ..CostTotals::default()
            },
        }];
        let dir = tempfile::tempdir().unwrap();
        let paths = write_report(dir.path(), "my accel", &rows, &[]).unwrap();
        let layers = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(paths[0].ends_with("my_accel-layers.csv"));
        let mut lines = layers.lines();
        assert_eq!(
            lines.next().unwrap(),
            "layer_index,layer,gemm,latency_s,cycles,compute_cycles,stall_cycles,energy_j,compute_j,sram_j,dram_j,dram_bytes,mem_cycles,bound"
        );
        let row = lines.next().unwrap();
        assert!(row.starts_with("3,\"a,b\",wg,"), "{row}");
        assert!(row.ends_with(",0,compute"), "{row}");
        let epochs = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(epochs.starts_with("epoch,iter_start,iter_end,latency_s"));
        // no temp files left behind
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
