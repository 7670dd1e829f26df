//! The machine's streaming memory bandwidth on one thread and on several at once: what bounds
//! the passes of a training step that only move data (padding copies, batch-norm applies,
//! residual adds), and so how far such passes can gain from a second core.
//!
//! The loop is STREAM's "add", `c[i] = a[i] + b[i]`, over arrays beyond the last-level cache
//! (48 MiB per thread, 192 MiB in all at most), each thread on its own arrays; its rate counts
//! the bytes the loop names (two read, one written), as STREAM does.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

/// Floats per array on one or two threads: three arrays of 16 MiB per thread, 48 MiB, more than
/// the 32 MiB L3 of the project's machines.
const LEN: usize = 4 << 20;

/// Floats of all threads' arrays together at most (192 MiB): with more than four threads each
/// thread's arrays shrink, so `--threads 64` does not allocate 3 GiB.
const TOTAL: usize = 4 * 3 * LEN;

/// Floats per array for each of `threads` threads.
fn per_thread(threads: usize) -> usize {
    LEN.min(TOTAL / 3 / threads.max(1)).max(1)
}

/// The streaming rate of one thread alone and of `threads` at once (the same when `threads` is
/// 1), in GB/s.
#[derive(Clone, Copy, Debug)]
pub struct StreamRates {
    pub one: f64,
    pub threads: usize,
    pub all: f64,
}

impl StreamRates {
    /// Measures both, each for at least `min_secs`.
    pub fn measure(threads: usize, min_secs: f64) -> Self {
        let one = stream_add(1, min_secs);
        let threads = threads.max(1);
        let all = match threads {
            1 => one,
            _ => stream_add(threads, min_secs),
        };
        StreamRates { one, threads, all }
    }
}

/// Streaming rate of `threads` threads at once, in GB per second of wall time: all threads' bytes
/// over the time from their common start to the last one's end, each running `c = a + b` passes
/// for at least `min_secs` (at least 0.01 s; one pass at least). `threads` is at least 1.
pub fn stream_add(threads: usize, min_secs: f64) -> f64 {
    let threads = threads.max(1);
    let min_secs = min_secs.max(0.01);
    let len = per_thread(threads);
    let start = Barrier::new(threads + 1);
    let (passes, t0): (Vec<u64>, Instant) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    // Every value written (calloc'd zeros would map `c`'s pages inside the timed
                    // passes).
                    let a = vec![1.0f32 + t as f32; len];
                    let b = vec![2.0f32; len];
                    let mut c = vec![-1.0f32; len];
                    start.wait();
                    let t0 = Instant::now();
                    let mut passes = 0u64;
                    while passes == 0 || t0.elapsed().as_secs_f64() < min_secs {
                        for ((c, a), b) in c.iter_mut().zip(&a).zip(&b) {
                            *c = a + b;
                        }
                        black_box(&mut c);
                        passes += 1;
                    }
                    passes
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let passes = workers.into_iter().map(|w| w.join().unwrap_or(0)).collect();
        (passes, t0)
    });
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let bytes = (3 * len * size_of::<f32>()) as f64 * passes.iter().sum::<u64>() as f64;
    bytes / secs / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_shrink_past_four_threads_so_memory_stays_bounded() {
        assert_eq!(per_thread(1), LEN);
        assert_eq!(per_thread(4), LEN);
        assert_eq!(per_thread(8), LEN / 2);
        assert!(3 * 64 * per_thread(64) <= TOTAL && per_thread(usize::MAX) == 1);
    }

    #[test]
    fn streaming_rates_are_positive_and_finite_on_one_and_two_threads() {
        for threads in [1, 2] {
            let gbs = stream_add(threads, 0.01);
            assert!(
                gbs.is_finite() && gbs > 0.1,
                "{threads} threads: {gbs} GB/s"
            );
        }
    }
}
