//! Done cells on disk that the study's plan no longer has: `DIR/plan.toml` was edited (a value
//! removed or changed, `[train]` changed) after they ran. `sweep collect` refuses to drop their
//! rows unless asked to; `sweep run` of the edited plan says it leaves them out.

use std::collections::HashSet;

use super::cell::{CELL_JSON, DONE};
use super::collect::Written;
use super::study::Study;

/// A done cell of the study's directory that none of the plan's cells is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Unplanned {
    /// Its directory name under `DIR/cells/`.
    pub id: String,
    /// Its settings as its `cell.json` records them (`key=value …`), empty if unreadable.
    pub settings: String,
}

impl std::fmt::Display for Unplanned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.settings.is_empty() {
            true => f.write_str(&self.id),
            false => write!(f, "{} ({})", self.id, self.settings),
        }
    }
}

/// The done cells in `DIR/cells/` whose ids are not the plan's, by id.
pub fn done_cells(study: &Study) -> anyhow::Result<Vec<Unplanned>> {
    let cells_dir = study.dir.join("cells");
    let entries = match std::fs::read_dir(&cells_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("{}", cells_dir.display()))),
    };
    let planned: HashSet<&str> = study.cells.iter().map(|c| c.id.as_str()).collect();
    let mut found = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| anyhow::anyhow!("{}: {e}", cells_dir.display()))?
            .path();
        let id = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(id) = id.filter(|id| !planned.contains(id.as_str())) else {
            continue;
        };
        if path.join(DONE).is_file() {
            found.push(Unplanned {
                settings: settings(&path.join(CELL_JSON)),
                id,
            });
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// `key=value …` of a cell's `cell.json` (its keys, then its accelerators).
fn settings(path: &std::path::Path) -> String {
    let Some(json) = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        return String::new();
    };
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut parts: Vec<String> = json
        .get("keys")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", text(v)))
        .collect();
    let accel: Vec<String> = json
        .get("accel")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    if !accel.is_empty() {
        parts.push(format!("accel={}", accel.join(",")));
    }
    parts.join(" ")
}

/// The list for a message: up to five cells, then how many more.
pub fn list(cells: &[Unplanned]) -> String {
    let mut shown: Vec<String> = cells.iter().take(5).map(ToString::to_string).collect();
    if cells.len() > 5 {
        shown.push(format!("and {} more", cells.len() - 5));
    }
    shown.join("; ")
}

/// The warning when a rebuilt table has fewer rows than the one it replaced (`dropped`: done
/// cells the plan no longer has, whose rows it left out), if it does.
pub fn fewer_rows(study: &Study, written: &Written, dropped: &[Unplanned]) -> Option<String> {
    let lost = written.lost()?;
    let previous = written.previous.unwrap_or(written.rows);
    let why = match dropped.is_empty() {
        false => format!(
            "the plan no longer has {} done cell(s): {}",
            dropped.len(),
            list(dropped)
        ),
        true => format!(
            "cells that were done are not now; see `cptsim sweep status {}`",
            study.dir.display()
        ),
    };
    Some(format!(
        "{}: {} rows, {lost} fewer than the {previous} of the table it replaced ({why})",
        study.dir.join("results.csv").display(),
        written.rows
    ))
}
