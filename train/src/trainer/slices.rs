//! How many images each forward of an evaluation under a stop hook takes: pieces of about
//! [`SLICE`] of work, so a stop is honoured within seconds, without letting a forward's fixed
//! cost (quantizing and packing a layer's weights, which does not depend on the images) be paid
//! once per image.
//!
//! A piece of `r` images takes about `F + c·r`: `F` the fixed cost, `c` the cost per image. From
//! the last two pieces of different sizes the slicer estimates both and takes as many images as
//! `c·r ≤ max(SLICE, 3·F)` allows, so fixed costs are at most about a quarter of the time and a
//! piece takes about `SLICE` when they are small. Pieces grow at most twofold at a time; before
//! two sizes are measured the second piece doubles the first.

use std::time::Duration;

/// The marginal work of one piece while fixed costs are small.
pub(crate) const SLICE: Duration = Duration::from_millis(500);

/// Times of evaluation pieces and the size of the next one.
#[derive(Clone, Debug)]
pub(crate) struct Slicer {
    rows: usize,
    /// The last piece: images and seconds.
    last: Option<(usize, f64)>,
    /// The last piece of a size different from `last`'s.
    other: Option<(usize, f64)>,
}

impl Default for Slicer {
    fn default() -> Self {
        Self {
            rows: 1,
            last: None,
            other: None,
        }
    }
}

impl Slicer {
    /// Images of the next piece (at least 1).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Records that a piece of `rows` images took `took` and picks the next piece's size.
    pub(crate) fn took(&mut self, rows: usize, took: Duration) {
        let t = took.as_secs_f64();
        if let Some(last) = self.last.filter(|&(r, _)| r != rows) {
            self.other = Some(last);
        }
        self.last = Some((rows, t));
        let slice = SLICE.as_secs_f64();
        let next = match self.other {
            Some((r0, t0)) => {
                let c = (t - t0) / (rows as f64 - r0 as f64);
                if c > 0.0 && c.is_finite() {
                    let fixed = (t - c * rows as f64).max(0.0);
                    (slice.max(3.0 * fixed) / c).floor() as usize
                } else {
                    // No measurable cost per image: fixed costs dominate.
                    usize::MAX
                }
            }
            None if t < slice / 2.0 || rows == 1 => usize::MAX,
            None if t > slice => rows / 2,
            None => rows,
        };
        self.rows = next.clamp(1, rows.saturating_mul(2).max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces the slicer cuts `n` images into when a piece of `r` images takes `fixed + per·r`
    /// seconds, and the longest piece's time.
    fn cut(n: usize, fixed: f64, per: f64) -> (usize, f64) {
        let mut s = Slicer::default();
        let (mut start, mut pieces, mut longest) = (0, 0, 0.0f64);
        while start < n {
            let r = s.rows().clamp(1, n - start);
            let t = fixed + per * r as f64;
            s.took(r, Duration::from_secs_f64(t));
            longest = longest.max(t);
            start += r;
            pieces += 1;
        }
        (pieces, longest)
    }

    /// VGG-11 at 224×224: a forward's fixed cost (its 25088×4096 classifier quantized and
    /// packed) is longer than a slice on its own. A rule that halves every piece over the slice
    /// stays at one image per forward and pays that cost 1024 times.
    #[test]
    fn a_fixed_cost_longer_than_a_slice_is_paid_a_few_dozen_times_not_once_per_image() {
        let (pieces, longest) = cut(1024, 1.5, 0.05);
        assert!(pieces <= 40, "{pieces} pieces");
        assert!(longest <= 4.0 * 1.5 + 0.1, "longest piece {longest} s");
    }

    /// Without fixed costs the pieces take about a slice each.
    #[test]
    fn without_fixed_costs_a_piece_is_about_a_slice() {
        let (pieces, longest) = cut(1000, 0.0, 0.01);
        assert!(
            longest <= SLICE.as_secs_f64() + 1e-9,
            "longest piece {longest} s"
        );
        // 1 + 2 + … + 32 = 63 images while growing, then pieces of 50.
        assert!(pieces <= 6 + 1000 / 50 + 1, "{pieces} pieces");
    }

    /// A slow image (a large model on a busy machine) keeps the pieces small.
    #[test]
    fn slow_images_keep_pieces_small() {
        let (_, longest) = cut(64, 0.01, 2.0);
        assert!(
            longest <= 2.0 * 2.0 + 0.01 + 1e-9,
            "longest piece {longest} s"
        );
    }
}
