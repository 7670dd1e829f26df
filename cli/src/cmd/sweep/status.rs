//! `cptsim sweep status DIR`: how many cells are done, running (a live lock), failed
//! (`error.txt`) or pending, each failure's error, how far each running training cell has got
//! and where each interrupted one resumes.

use std::io::Write;

use super::cell::{Cell, ERROR, LOCK, STDERR_LOG};
use super::lock::live_owner;
use super::study::Study;
use crate::cmd::train::{parse_progress, CHECKPOINT};

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
