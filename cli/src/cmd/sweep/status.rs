//! `cptsim sweep status DIR`: how many cells are done, running (a live lock), failed
//! (`error.txt`) or pending, each failure's error, how far each running training cell has got,
//! where each interrupted one resumes, and the done cells the plan no longer has; as text or
//! JSON.

use std::io::Write;

use super::cell::{Cell, ERROR, LOCK, STDERR_LOG};
use super::lock::live_owner;
use super::study::Study;
use super::unplanned::{self, Unplanned};
use crate::cmd::train::parse_progress;
use cptsim_train::run::CHECKPOINT;

/// Where a cell stands.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Done,
    Running(String),
    Failed(String),
    Pending,
}

/// The cell's state as its files show it.
pub fn state(cell: &Cell) -> State {
    if cell.is_done() {
        return State::Done;
    }
    if let Some(owner) = live_owner(&cell.dir.join(LOCK)) {
        return State::Running(owner.to_string());
    }
    match std::fs::read_to_string(cell.dir.join(ERROR)) {
        Ok(text) => State::Failed(text.trim().to_string()),
        Err(_) => State::Pending,
    }
}

/// Counts of done, running, failed and pending cells.
pub fn counts(study: &Study) -> [usize; 4] {
    let mut n = [0; 4];
    for cell in &study.cells {
        n[match state(cell) {
            State::Done => 0,
            State::Running(_) => 1,
            State::Failed(_) => 2,
            State::Pending => 3,
        }] += 1;
    }
    n
}

/// One cell's line of `status --format json`.
#[derive(Debug, serde::Serialize)]
struct CellStatus<'a> {
    index: usize,
    id: &'a str,
    /// `done`, `running`, `failed` or `pending`.
    state: &'static str,
    /// Who runs it (`PID N on HOST`).
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// How far a running training cell has got.
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<String>,
    /// The iteration an unfinished training cell resumes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    resumes_from: Option<u64>,
}

/// Prints the study's status as JSON: the counts, every cell's state and the done cells the
/// plan no longer has.
pub fn print_json(study: &Study, out: &mut dyn Write) -> anyhow::Result<()> {
    let [done, running, failed, pending] = counts(study);
    let cells: Vec<CellStatus<'_>> = study
        .cells
        .iter()
        .map(|cell| {
            let mut line = CellStatus {
                index: cell.index,
                id: &cell.id,
                state: "done",
                owner: None,
                error: None,
                progress: None,
                resumes_from: None,
            };
            match state(cell) {
                State::Done => {}
                State::Running(owner) => {
                    line.state = "running";
                    line.owner = Some(owner);
                    line.progress = last_progress(cell);
                }
                State::Failed(error) => {
                    line.state = "failed";
                    line.error = Some(error);
                    line.resumes_from = checkpoint_iteration(cell);
                }
                State::Pending => {
                    line.state = "pending";
                    line.resumes_from = checkpoint_iteration(cell);
                }
            }
            line
        })
        .collect();
    let report = serde_json::json!({
        "name": study.plan.name,
        "dir": study.dir,
        "total": study.cells.len(),
        "done": done,
        "running": running,
        "failed": failed,
        "pending": pending,
        "cells": cells,
        "unplanned": unplanned::done_cells(study)?,
    });
    writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    Ok(())
}

/// Prints the study's status.
pub fn print(study: &Study, out: &mut dyn Write) -> anyhow::Result<()> {
    let [done, running, failed, pending] = counts(study);
    writeln!(
        out,
        "sweep {} in {}: {} cells",
        study.plan.name,
        study.dir.display(),
        study.cells.len()
    )?;
    writeln!(
        out,
        "done {done}  running {running}  failed {failed}  pending {pending}"
    )?;
    for cell in &study.cells {
        match state(cell) {
            State::Running(owner) => {
                let at = last_progress(cell).map_or(String::new(), |p| format!(", {p}"));
                writeln!(out, "running {} ({owner}{at})", cell.id)?
            }
            State::Failed(error) => match checkpoint_iteration(cell) {
                Some(i) => writeln!(
                    out,
                    "failed {} (resumes from iteration {i}): {error}",
                    cell.id
                )?,
                None => writeln!(out, "failed {}: {error}", cell.id)?,
            },
            State::Pending => {
                if let Some(i) = checkpoint_iteration(cell) {
                    writeln!(out, "pending {} (resumes from iteration {i})", cell.id)?
                }
            }
            State::Done => {}
        }
    }
    let dropped: Vec<Unplanned> = unplanned::done_cells(study)?;
    if !dropped.is_empty() {
        writeln!(
            out,
            "not in the plan (done before it was edited): {}",
            unplanned::list(&dropped)
        )?;
    }
    Ok(())
}

/// The last progress line (`iteration N/T, ETA …`) a training cell's log holds, from its last
/// 4 KiB.
fn last_progress(cell: &Cell) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(cell.dir.join(STDERR_LOG)).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    let tail = String::from_utf8_lossy(&tail);
    let (i, t, eta) = tail.lines().rev().find_map(parse_progress)?;
    let eta = eta.map_or(String::new(), |e| format!(", ETA {e}"));
    Some(format!("iteration {i}/{t}{eta}"))
}

/// The iteration of the checkpoint an unfinished training cell left (it resumes there).
fn checkpoint_iteration(cell: &Cell) -> Option<u64> {
    let path = cell.dir.join("run").join(CHECKPOINT);
    cptsim_train::checkpoint::iteration(&path).ok()
}
