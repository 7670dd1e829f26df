//! Ctrl-C (SIGINT) and SIGTERM: the temporary files and staging directories of the outputs being
//! written are removed before the process exits with 130 (128 + SIGINT), so an interrupted run
//! leaves the user's earlier outputs as they were and no hidden temporaries behind. Work that
//! can stop cleanly defers this ([`defer`]): a training run writing straight into its `--out`
//! checkpoints after the current iteration, a sweep forwards the signal to its cells' children
//! and waits for them, both polling [`requested`]. A second signal exits at once — unless it
//! follows the first within [`SAME_INTERRUPT`], as when a terminal or Slurm signals a whole
//! process tree and a sweep forwards the signal too.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Signals this close to the first count as the same interrupt.
pub const SAME_INTERRUPT: Duration = Duration::from_secs(2);

/// How many [`Deferred`] guards are alive.
static DEFERRED: AtomicUsize = AtomicUsize::new(0);

/// Set when a signal arrived while deferred.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// While alive, a signal is left to the callers (see [`requested`]); once the last one is
/// dropped, a signal exits at once again.
pub struct Deferred(());

impl Drop for Deferred {
    fn drop(&mut self) {
        DEFERRED.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Defers the exit on the next signal to the caller, which polls [`requested`].
pub fn defer() -> Deferred {
    DEFERRED.fetch_add(1, Ordering::SeqCst);
    Deferred(())
}

/// Whether a deferred signal arrived.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// The write end of the pipe the signal handler wakes the cleanup thread through.
static WAKE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = WAKE.load(Ordering::Relaxed);
    let byte = 1u8;
    // SAFETY: write(2) is async-signal-safe; the buffer is a live local byte.
    unsafe {
        libc::write(fd, (&byte as *const u8).cast(), 1);
    }
}

/// Installs the handler and its cleanup thread (best effort: without them the default action
/// applies).
pub fn install() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe(2) fills the two-element array it is given.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    let [read_end, write_end] = fds;
    WAKE.store(write_end, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            let mut byte = 0u8;
            let mut first: Option<Instant> = None;
            // SAFETY: read(2) into a live local byte from the pipe this thread owns.
            while unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) } == 1 {
                if DEFERRED.load(Ordering::SeqCst) > 0 {
                    match first {
                        None => {
                            first = Some(Instant::now());
                            REQUESTED.store(true, Ordering::SeqCst);
                            eprintln!(
                                "interrupted: stopping cleanly (interrupt again to stop at once)"
                            );
                            continue;
                        }
                        Some(t) if t.elapsed() < SAME_INTERRUPT => continue,
                        Some(_) => {}
                    }
                }
                let removed = cptsim_models::atomic::remove_temporaries();
                if removed > 0 {
                    eprintln!("interrupted: removed {removed} unfinished output(s)");
                }
                std::process::exit(crate::exit::Exit::Interrupted as i32);
            }
        });
    if spawned.is_err() {
        return;
    }
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only calls write(2) on a pipe that stays open for the process's life.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}
