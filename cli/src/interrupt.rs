//! Ctrl-C (SIGINT) and SIGTERM: the temporary files and staging directories of the outputs being
//! written are removed before the process exits with 130 (128 + SIGINT), so an interrupted run
//! leaves the user's earlier outputs as they were and no hidden temporaries behind. A training
//! run writing straight into its `--out` defers this ([`defer`]): the first signal asks it to
//! checkpoint after the current iteration and stop ([`requested`]), a second one exits at once.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Set while a signal should be left to a training loop to act on.
static DEFERRED: AtomicBool = AtomicBool::new(false);

/// Set when a signal arrived while deferred.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// While alive, a signal is left to the caller (see [`requested`]); dropping it restores the
/// immediate exit.
pub struct Deferred(());

impl Drop for Deferred {
    fn drop(&mut self) {
        DEFERRED.store(false, Ordering::SeqCst);
    }
}

/// Defers the exit on the next signal to the caller, which polls [`requested`].
pub fn defer() -> Deferred {
    DEFERRED.store(true, Ordering::SeqCst);
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
            // SAFETY: read(2) into a live local byte from the pipe this thread owns.
            while unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) } == 1 {
                if DEFERRED.load(Ordering::SeqCst) && !REQUESTED.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "interrupted: writing a checkpoint after the current iteration \
                         (interrupt again to stop at once)"
                    );
                    continue;
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
