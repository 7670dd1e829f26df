//! CSV reports of a costed trace, written atomically (temp file in the same directory, then
//! rename).
//!
//! `<accelerator>-layers.csv`, one row per layer × GEMM:
//! `layer_index, layer, gemm (fw|eb|wg), latency_s, cycles, compute_cycles, stall_cycles,
//! energy_j, compute_j, sram_j, dram_j, dram_bytes` — totals over the whole trace.
//!
//! `<accelerator>-epochs.csv`, one row per epoch:
//! `epoch, iter_start, iter_end (exclusive), latency_s, cycles, compute_cycles, stall_cycles,
//! energy_j, compute_j, sram_j, dram_j, dram_bytes`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::trace_cost::{CostTotals, TraceCost};

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

/// Writes `contents` to `path` atomically.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(contents).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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

/// Writes the two CSV files of `cost` into `dir` (created if missing); returns their paths.
pub fn write_report(dir: &Path, cost: &TraceCost) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let stem = file_stem(&cost.accelerator);
    let mut head = vec!["layer_index", "layer", "gemm"];
    head.extend(COST_COLUMNS);
    let layers = csv(
        &head,
        cost.per_layer_gemm.iter().map(|l| {
            let mut r = vec![
                l.layer.to_string(),
                l.name.clone(),
                l.gemm.label().to_string(),
            ];
            r.extend(cost_fields(&l.totals));
            r
        }),
    );
    let mut head = vec!["epoch", "iter_start", "iter_end"];
    head.extend(COST_COLUMNS);
    let epochs = csv(
        &head,
        cost.per_epoch.iter().map(|e| {
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
    write_atomic(&lp, layers.as_bytes())?;
    write_atomic(&ep, epochs.as_bytes())?;
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
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
