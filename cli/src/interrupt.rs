//! Ctrl-C (SIGINT) and SIGTERM: the temporary files and staging directories of the outputs being
//! written are removed before the process exits with 130 (128 + SIGINT), so an interrupted run
//! leaves the user's earlier outputs as they were and no hidden temporaries behind.

use std::sync::atomic::{AtomicI32, Ordering};

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
            let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
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
