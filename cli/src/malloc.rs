//! Allocator tuning for training runs, applied by the CLI to `train`, `bench` and `forward` (the
//! engine crate leaves process-wide settings to the program). A training step allocates and frees
//! tensors of tens of megabytes (evaluation batches of 500 CIFAR-sized images hold 33 MB per
//! activation). glibc serves blocks above its mmap threshold (dynamic, at most 32 MB) with fresh
//! `mmap`s, so every such tensor costs page faults and kernel zeroing, and freed heap tops are
//! trimmed back to the system. Raising both thresholds keeps freed blocks in the heap for reuse.
//! Results do not change.

/// Blocks up to this size come from the heap (glibc `M_MMAP_THRESHOLD`).
pub const MMAP_THRESHOLD: i32 = 512 << 20;

/// Free memory at the top of the heap up to this size is kept (glibc `M_TRIM_THRESHOLD`).
pub const TRIM_THRESHOLD: i32 = i32::MAX;

/// Makes the process allocator keep large blocks for reuse (see the module doc). Returns whether
/// the allocator accepted the settings (always `false` off glibc, where this is a no-op).
pub fn keep_large_blocks() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; it is safe to call at any time.
        let mmap = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        // SAFETY: as above.
        let trim = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) };
        mmap == 1 && trim == 1
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
