//! Mini-batches: seeded shuffling per epoch, the standard CIFAR augmentation (4-pixel zero pad +
//! random crop, horizontal flip), per-channel normalisation (spec §9.4), and adaptation of a
//! dataset to a model with a different input shape (e.g. 1×28×28 → 3×32×32: centred zero padding
//! and a repeated grey channel). Output tensors are channels-last `[N, H, W, C]`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::dataset::Dataset;
use super::shuffle::shuffle;
use crate::error::{Result, SimError};
use crate::layers::Tensor;
use crate::quant::mix64;

/// Padding of the random-crop augmentation, in pixels.
pub const CROP_PAD: usize = 4;

/// A normalised mini-batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// Images `[N, H, W, C]`, normalised.
    pub images: Tensor,
    /// Labels, one per image.
    pub labels: Vec<usize>,
}

/// How a dataset's images are placed into a model's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adaptation {
    /// Source `[C, H, W]`.
    pub from: [usize; 3],
    /// Target `[C, H, W]`.
    pub to: [usize; 3],
}

impl Adaptation {
    /// The adaptation from `from` to `to`, or an error when it is not possible (the target must
    /// be at least as large, and channels equal or 1 → C).
    pub fn new(from: [usize; 3], to: [usize; 3]) -> Result<Self> {
        let ok = (from[0] == to[0] || from[0] == 1) && from[1] <= to[1] && from[2] <= to[2];
        if !ok {
            return Err(SimError::invalid(
                "dataset/model shape",
                format!("cannot adapt images of shape {from:?} to the model input {to:?} (only zero padding and repeating a grey channel are supported)"),
            ));
        }
        Ok(Self { from, to })
    }

    /// True when the shapes differ.
    pub fn is_needed(&self) -> bool {
        self.from != self.to
    }

    /// One line saying what is done, for the user.
    pub fn describe(&self) -> String {
        let [c, h, w] = self.from;
        let [tc, th, tw] = self.to;
        let mut parts = Vec::new();
        if (h, w) != (th, tw) {
            parts.push(format!("zero-padded {h}×{w} → {th}×{tw} (centred)"));
        }
        if c != tc {
            parts.push(format!("grey channel repeated {c} → {tc}"));
        }
        if parts.is_empty() {
            "dataset matches the model input".into()
        } else {
            format!(
                "dataset images adapted to the model input: {}",
                parts.join(", ")
            )
        }
    }
}

/// Writes one normalised `[H, W, C]` image into `out`. `shift` is the crop offset relative to
/// the centred placement (−CROP_PAD..=CROP_PAD), `flip` mirrors horizontally.
fn render(
    data: &Dataset,
    i: usize,
    ad: &Adaptation,
    shift: (isize, isize),
    flip: bool,
    out: &mut [f32],
) {
    let [c, h, w] = ad.from;
    let [tc, th, tw] = ad.to;
    let (oy, ox) = (((th - h) / 2) as isize, ((tw - w) / 2) as isize);
    let img = data.image(i);
    let norm: Vec<(f32, f32)> = (0..tc)
        .map(|ch| {
            let s = if c == 1 { 0 } else { ch };
            let mean = data.mean.get(s).copied().unwrap_or(0.0);
            let std = data.std.get(s).copied().unwrap_or(1.0).max(1e-12);
            (mean, 1.0 / std)
        })
        .collect();
    for y in 0..th {
        for x in 0..tw {
            let xx = if flip { tw - 1 - x } else { x };
            let sy = y as isize + shift.0 - oy;
            let sx = xx as isize + shift.1 - ox;
            let inside = sy >= 0 && sx >= 0 && (sy as usize) < h && (sx as usize) < w;
            let base = (y * tw + x) * tc;
            for (ch, &(mean, inv)) in norm.iter().enumerate() {
                let p = if inside {
                    let s = if c == 1 { 0 } else { ch };
                    img[(s * h + sy as usize) * w + sx as usize] as f32 / 255.0
                } else {
                    0.0
                };
                out[base + ch] = (p - mean) * inv;
            }
        }
    }
}

/// Builds a batch from images `which` with the given per-image (shift, flip).
fn assemble(
    data: &Dataset,
    which: &[usize],
    ad: &Adaptation,
    aug: &[((isize, isize), bool)],
) -> Result<Batch> {
    let [tc, th, tw] = ad.to;
    let per = tc * th * tw;
    let mut buf = vec![0.0f32; which.len() * per];
    buf.par_chunks_mut(per.max(1))
        .zip(which.par_iter())
        .zip(aug.par_iter())
        .for_each(|((out, &i), &(shift, flip))| render(data, i, ad, shift, flip, out));
    let images = Tensor::from_shape_vec(vec![which.len(), th, tw, tc], buf)
        .map_err(|e| SimError::shape("batch", e.to_string()))?;
    Ok(Batch {
        images,
        labels: which.iter().map(|&i| data.labels[i] as usize).collect(),
    })
}

/// An endless, seeded stream of training batches: every epoch is a fresh shuffle; the last batch
/// of an epoch holds the remainder (not dropped).
pub struct Loader<'a> {
    data: &'a Dataset,
    batch: usize,
    adapt: Adaptation,
    augment: bool,
    seed: u64,
    order: Vec<usize>,
    pos: usize,
    epoch: u64,
    batch_index: u64,
}

impl<'a> Loader<'a> {
    /// A loader over `data` for a model with input `[C, H, W]`; `augment` enables pad-crop-flip.
    pub fn new(
        data: &'a Dataset,
        batch: usize,
        input: [usize; 3],
        augment: bool,
        seed: u64,
    ) -> Result<Self> {
        if batch == 0 || data.is_empty() {
            return Err(SimError::invalid(
                "batch",
                format!("batch size {batch} over {} images", data.len()),
            ));
        }
        let mut l = Self {
            data,
            batch,
            adapt: Adaptation::new(data.shape, input)?,
            augment,
            seed,
            order: (0..data.len()).collect(),
            pos: 0,
            epoch: 0,
            batch_index: 0,
        };
        l.reshuffle();
        Ok(l)
    }

    fn reshuffle(&mut self) {
        self.order = (0..self.data.len()).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(mix64(self.seed ^ mix64(self.epoch)));
        shuffle(&mut self.order, &mut rng);
        self.pos = 0;
    }

    /// The shape adaptation in use.
    pub fn adaptation(&self) -> &Adaptation {
        &self.adapt
    }

    /// Completed passes over the data.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Batches handed out so far.
    pub fn batches_done(&self) -> u64 {
        self.batch_index
    }

    /// Puts the loader where it is after `batches` calls of [`Loader::next_batch`] from a fresh
    /// start (to resume a run exactly).
    pub fn seek(&mut self, batches: u64) {
        let n = self.data.len() as u64;
        let b = self.batch as u64;
        let per_epoch = n.div_ceil(b);
        self.epoch = batches / per_epoch;
        self.reshuffle();
        self.pos = ((batches % per_epoch) * b).min(n) as usize;
        self.batch_index = batches;
    }

    /// The next training batch.
    pub fn next_batch(&mut self) -> Result<Batch> {
        if self.pos >= self.order.len() {
            self.epoch += 1;
            self.reshuffle();
        }
        let end = (self.pos + self.batch).min(self.order.len());
        let which = self.order[self.pos..end].to_vec();
        self.pos = end;
        let mut rng =
            ChaCha8Rng::seed_from_u64(mix64(self.seed.rotate_left(17) ^ mix64(self.batch_index)));
        self.batch_index += 1;
        let p = CROP_PAD as i64;
        let aug: Vec<_> = which
            .iter()
            .map(|_| {
                if self.augment {
                    (
                        (
                            rng.random_range(-p..=p) as isize,
                            rng.random_range(-p..=p) as isize,
                        ),
                        rng.random::<bool>(),
                    )
                } else {
                    ((0, 0), false)
                }
            })
            .collect();
        assemble(self.data, &which, &self.adapt, &aug)
    }
}

/// All images in order, in batches of `batch`, without augmentation (for evaluation). An empty
/// dataset is an error: its accuracy would read as 0 %.
pub fn eval_batches(data: &Dataset, batch: usize, input: [usize; 3]) -> Result<Vec<Batch>> {
    if data.is_empty() {
        return Err(SimError::invalid(
            &format!("dataset '{}'", data.name),
            "no images to evaluate on (an accuracy over 0 images is meaningless)",
        ));
    }
    let ad = Adaptation::new(data.shape, input)?;
    let idx: Vec<usize> = (0..data.len()).collect();
    idx.chunks(batch.max(1))
        .map(|w| assemble(data, w, &ad, &vec![((0, 0), false); w.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::dataset::synthetic;
    use super::*;

    fn tiny() -> Dataset {
        // 2 grey 2×2 images with distinct pixels.
        Dataset {
            name: "t".into(),
            shape: [1, 2, 2],
            images: vec![0, 51, 102, 255, 255, 255, 255, 255],
            labels: vec![1, 0],
            classes: 2,
            mean: vec![0.2],
            std: vec![0.5],
            augment: false,
        }
    }

    #[test]
    fn evaluating_on_no_images_is_an_error() {
        let mut d = tiny();
        d.truncate(0);
        let e = eval_batches(&d, 4, [1, 2, 2]).unwrap_err().to_string();
        assert!(e.contains("dataset 't'") && e.contains("no images"), "{e}");
        assert_eq!(eval_batches(&tiny(), 4, [1, 2, 2]).unwrap().len(), 1);
    }

    #[test]
    fn adaptation_pads_centred_and_repeats_grey() {
        let d = tiny();
        let b = eval_batches(&d, 8, [3, 4, 4]).unwrap().remove(0);
        assert_eq!(b.images.shape(), &[2, 4, 4, 3]);
        assert_eq!(b.labels, vec![1, 0]);
        let bg = (0.0 - 0.2) / 0.5;
        assert!((b.images[[0, 0, 0, 0]] - bg).abs() < 1e-6);
        // pixel (0,1) of the source sits at (1,2), same value in all three channels
        let v = (51.0 / 255.0 - 0.2) / 0.5;
        for ch in 0..3 {
            assert!((b.images[[0, 1, 2, ch]] - v).abs() < 1e-6);
        }
        let ad = Adaptation::new([1, 28, 28], [3, 32, 32]).unwrap();
        assert!(ad.describe().contains("28×28 → 32×32") && ad.describe().contains("grey"));
        assert!(Adaptation::new([3, 32, 32], [1, 28, 28]).is_err());
    }

    #[test]
    fn flip_and_shift_move_pixels() {
        let d = tiny();
        let ad = Adaptation::new([1, 2, 2], [1, 2, 2]).unwrap();
        let b = assemble(&d, &[0], &ad, &[((0, 0), true)]).unwrap();
        let v = |p: f32| (p / 255.0 - 0.2) / 0.5;
        assert!((b.images[[0, 0, 0, 0]] - v(51.0)).abs() < 1e-6);
        let b = assemble(&d, &[0], &ad, &[((1, 0), false)]).unwrap();
        // shifted up by one row: top row now holds the source's bottom row, bottom is padding
        assert!((b.images[[0, 0, 1, 0]] - v(255.0)).abs() < 1e-6);
        assert!((b.images[[0, 1, 1, 0]] - v(0.0)).abs() < 1e-6);
    }

    #[test]
    fn loader_covers_every_image_per_epoch_with_remainder_batch() {
        let d = synthetic(10, [1, 4, 4], 3, 30.0, 1).unwrap();
        let mut l = Loader::new(&d, 4, [1, 4, 4], true, 7).unwrap();
        let sizes: Vec<usize> = (0..3)
            .map(|_| l.next_batch().unwrap().labels.len())
            .collect();
        assert_eq!(sizes, vec![4, 4, 2]);
        assert_eq!(l.epoch(), 0);
        l.next_batch().unwrap();
        assert_eq!(l.epoch(), 1);
        // Same seed → same batches; other seed → different order.
        let mut a = Loader::new(&d, 4, [1, 4, 4], true, 7).unwrap();
        let mut b = Loader::new(&d, 4, [1, 4, 4], true, 7).unwrap();
        let mut c = Loader::new(&d, 4, [1, 4, 4], true, 8).unwrap();
        let (ba, bb, bc) = (
            a.next_batch().unwrap(),
            b.next_batch().unwrap(),
            c.next_batch().unwrap(),
        );
        assert_eq!(ba, bb);
        assert_ne!(ba, bc);
    }

    #[test]
    fn seek_resumes_the_batch_stream() {
        let d = synthetic(10, [1, 4, 4], 3, 30.0, 1).unwrap();
        let mut a = Loader::new(&d, 4, [1, 4, 4], true, 7).unwrap();
        let stream: Vec<Batch> = (0..8).map(|_| a.next_batch().unwrap()).collect();
        for (k, batch) in stream.iter().enumerate() {
            let mut b = Loader::new(&d, 4, [1, 4, 4], true, 7).unwrap();
            b.seek(k as u64);
            assert_eq!(b.batches_done(), k as u64);
            assert_eq!(&b.next_batch().unwrap(), batch, "after {k} batches");
        }
    }
}
