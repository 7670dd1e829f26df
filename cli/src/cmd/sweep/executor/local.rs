//! The local executor: `jobs` worker threads on this machine, each running one cell at a time
//! as `cptsim` child processes of `threads` worker threads; one progress bar per worker and an
//! overall bar on a terminal, one plain line per finished cell otherwise.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Executor, Finished};
use crate::cmd::sweep::cell::{Cell, Outcome};
use crate::cmd::sweep::study::Study;

/// Runs cells in a pool of local worker processes.
#[derive(Debug)]
pub struct Local {
    /// Cells run at once.
    pub jobs: usize,
    /// Worker threads of each cell's children (`RAYON_NUM_THREADS`).
    pub threads: usize,
}

impl Local {
    /// `jobs` workers (default: cores / `threads`) of `threads` threads each.
    pub fn new(jobs: Option<usize>, threads: usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = threads.max(1);
        Self {
            jobs: jobs.unwrap_or(cores / threads).max(1),
            threads,
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl Executor for Local {
    fn execute(&self, study: &Study, pending: &[&Cell]) -> anyhow::Result<Finished> {
        let tty = std::io::stderr().is_terminal();
        let multi = MultiProgress::with_draw_target(if tty {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        });
        let total = pending.len();
        let overall = multi.add(ProgressBar::new(total as u64));
        overall.set_style(style(
            "{prefix} [{bar:30}] {pos}/{len} cells, {elapsed} (eta {eta})",
        ));
        overall.set_prefix(study.plan.name.clone());
        let workers = self.jobs.min(total.max(1));
        let bars: Vec<ProgressBar> = (0..workers)
            .map(|w| {
                let bar = multi.add(ProgressBar::new_spinner());
                bar.set_style(style("{prefix} {spinner} {msg} {elapsed}"));
                bar.set_prefix(format!("worker {}", w + 1));
                if tty {
                    bar.enable_steady_tick(Duration::from_millis(250));
                }
                bar
            })
            .collect();
        let next = AtomicUsize::new(0);
        let finished = AtomicUsize::new(0);
        let say = |line: String| {
            if tty {
                multi.suspend(|| eprintln!("{line}"));
            } else {
                eprintln!("{line}");
            }
        };
        std::thread::scope(|scope| {
            for bar in &bars {
                let (next, finished, overall, say) = (&next, &finished, &overall, &say);
                scope.spawn(move || loop {
                    // After Ctrl-C / SIGTERM no further cell starts.
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(cell) = pending.get(i).filter(|_| !crate::interrupt::requested())
                    else {
                        bar.finish_and_clear();
                        break;
                    };
                    bar.reset_elapsed();
                    bar.set_message(format!("{}: start", cell.id));
                    let phase = |p: &str| bar.set_message(format!("{}: {p}", cell.id));
                    let outcome = cell.execute(Some(self.threads), &phase);
                    let n = finished.fetch_add(1, Ordering::SeqCst) + 1;
                    let what = match outcome {
                        Ok(Outcome::Ran) => format!("done {}", cell.id),
                        Ok(Outcome::AlreadyDone) => format!("already done {}", cell.id),
                        Ok(Outcome::Busy(owner)) => {
                            format!("skipped {}: running elsewhere ({owner})", cell.id)
                        }
                        Err(e) => format!("FAILED {}: {e:#}", cell.id),
                    };
                    say(format!("[{n}/{total}] {what}"));
                    overall.inc(1);
                });
            }
        });
        overall.finish_and_clear();
        Ok(Finished::Yes)
    }
}
