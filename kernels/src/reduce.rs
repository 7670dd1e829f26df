//! Deterministic per-channel reductions over channels-last data, parallel over fixed row chunks
//! whose partial sums are added in chunk order (so results do not depend on the thread count).

use rayon::prelude::*;

/// Rows (positions) per partial sum.
pub const ROWS_PER_CHUNK: usize = 2048;

/// For data laid out `[rows, c]`, returns `k` per-channel sums `Σ_rows f(row_index, values)` where
/// `f` adds its contributions into `acc` (length `k·c`).
pub fn channel_sums<F>(data: &[f32], c: usize, k: usize, f: F) -> Vec<f64>
where
    F: Fn(usize, &[f32], &mut [f64]) + Sync,
{
    chunk_sums(data, c, k, |first, chunk, acc| {
        for (r, row) in chunk.chunks(c).enumerate() {
            f(first + r, row, acc);
        }
    })
}

/// As [`channel_sums`], with `f(first_row, rows, acc)` called once per fixed chunk of rows (in
/// row order within the chunk, so the sums are the same as row by row) — for kernels that loop
/// over the rows themselves.
pub fn chunk_sums<F>(data: &[f32], c: usize, k: usize, f: F) -> Vec<f64>
where
    F: Fn(usize, &[f32], &mut [f64]) + Sync,
{
    chunk_sums_by(data, c, k, ROWS_PER_CHUNK, f)
}

/// [`chunk_sums`] over chunks of `rows` rows.
pub fn chunk_sums_by<F>(data: &[f32], c: usize, k: usize, rows: usize, f: F) -> Vec<f64>
where
    F: Fn(usize, &[f32], &mut [f64]) + Sync,
{
    if c == 0 {
        return Vec::new();
    }
    let rows = rows.max(1);
    let partials: Vec<Vec<f64>> = data
        .par_chunks(rows.saturating_mul(c))
        .enumerate()
        .map(|(ci, chunk)| {
            let mut acc = vec![0.0f64; k * c];
            f(ci * rows, chunk, &mut acc);
            acc
        })
        .collect();
    add_in_order(k * c, partials)
}

/// The sum of `partials` (each `len` values), added in their order.
pub fn add_in_order(len: usize, partials: impl IntoIterator<Item = Vec<f64>>) -> Vec<f64> {
    let mut total = vec![0.0f64; len];
    for p in partials {
        total.iter_mut().zip(p).for_each(|(t, v)| *t += v);
    }
    total
}

crate::simd::multiversion! {
    /// Adds `Σ x` and `Σ x²` per channel of the rows `x` (`[rows, c]`) into `acc = [Σx | Σx²]`
    /// (`2c` values), row by row: batch norm's training statistics, whether it sums its input
    /// itself or the layer producing it sums each block of its output.
    pub fn sums_and_squares(x: &[f32], acc: &mut [f64]) {
        let c = acc.len() / 2;
        let (a, b) = acc.split_at_mut(c);
        for row in x.chunks_exact(c) {
            for ((s1, s2), &v) in a.iter_mut().zip(b.iter_mut()).zip(row) {
                *s1 += v as f64;
                *s2 += v as f64 * v as f64;
            }
        }
    }
}

crate::simd::multiversion! {
    /// Adds each row of `x` (`[rows, c]`, `c = acc.len()`) into `acc`, row by row.
    pub fn add_rows(x: &[f32], acc: &mut [f64]) {
        for row in x.chunks_exact(acc.len().max(1)) {
            acc.iter_mut().zip(row).for_each(|(a, &v)| *a += v as f64);
        }
    }
}

/// Plain per-channel sums of `[rows, c]` data (a bias gradient), each in row order.
pub fn sum_channels(data: &[f32], c: usize) -> Vec<f64> {
    chunk_sums(data, c, 1, |_, rows, acc| add_rows(rows, acc))
}
