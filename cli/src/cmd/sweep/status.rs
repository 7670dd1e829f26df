//! `cptsim sweep status DIR`: how many cells are done, running (a live lock), failed
//! (`error.txt`) or pending, and each failure's error.

use std::io::Write;

use super::cell::{Cell, ERROR, LOCK};
use super::lock::live_owner;
use super::study::Study;

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

/// Prints the study's status.
pub fn print(study: &Study, out: &mut dyn Write) -> std::io::Result<()> {
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
            State::Running(owner) => writeln!(out, "running {} ({owner})", cell.id)?,
            State::Failed(error) => writeln!(out, "failed {}: {error}", cell.id)?,
            _ => {}
        }
    }
    Ok(())
}
