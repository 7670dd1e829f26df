//! Allocator tuning for training runs, applied by the CLI to `train`, `bench` and `forward` (the
//! engine crate leaves process-wide settings to the program). A training step allocates and frees
//! tensors of tens of megabytes (evaluation batches of 500 CIFAR-sized images hold 33 MB per
//! activation). glibc serves blocks above its mmap threshold (dynamic, at most 32 MB) with fresh
//! `mmap`s, so every such tensor costs page faults and kernel zeroing, and freed heap tops are
//! trimmed back to the system. Raising both thresholds keeps freed blocks in the heap for reuse.
//! The work runs on rayon's threads, and glibc gives each thread its own arena of heaps of at
//! most 64 MB, deleted as soon as they are empty: ImageNet ResNet-50 eval at batch 16 (51 MB
//! activations) mapped and unmapped a 64 MB heap per layer, doubling its page faults once the
//! in-place layers freed blocks earlier. One arena (the main heap, kept by the trim setting)
//! serves every thread instead; a layer allocates a handful of blocks, so its lock is not
//! contended. Results do not change.

/// Blocks up to this size come from the heap (glibc `M_MMAP_THRESHOLD`).
pub const MMAP_THRESHOLD: i32 = 512 << 20;

/// Free memory at the top of the heap up to this size is kept (glibc `M_TRIM_THRESHOLD`).
pub const TRIM_THRESHOLD: i32 = i32::MAX;

/// Arenas the threads share (glibc `M_ARENA_MAX`).
pub const ARENAS: i32 = 1;

/// Makes the process allocator keep large blocks for reuse (see the module doc). Call it before
/// any thread pool starts (threads keep the arena they first allocated from). Returns whether
/// the allocator accepted the settings (always `false` off glibc, where this is a no-op).
pub fn keep_large_blocks() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; it is safe to call at any time.
        let mmap = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        // SAFETY: as above.
        let trim = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) };
        // SAFETY: as above.
        let arenas = unsafe { libc::mallopt(libc::M_ARENA_MAX, ARENAS) };
        mmap == 1 && trim == 1 && arenas == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_accepted_on_glibc() {
        let ok = keep_large_blocks();
        assert_eq!(ok, cfg!(all(target_os = "linux", target_env = "gnu")));
        // Large allocations still work afterwards.
        let v = vec![1.0f32; 10 << 20];
        assert_eq!(v.iter().sum::<f32>(), (10 << 20) as f32);
    }
}
