//! In-memory labelled image datasets (raw bytes, `[C, H, W]` per image) with the normalisation
//! constants of their source, loaded from MNIST/Fashion-MNIST IDX files, CIFAR binary batches or a
//! seeded synthetic generator.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[cfg(test)]
use super::cifar::IMAGE_BYTES;
use super::cifar::{read_cifar, CifarKind};
use super::file::{data_err, find_file};
use super::idx::read_idx;
use super::shuffle::shuffle;
use crate::error::{Result, SimError};

/// Train or test split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// The training set.
    Train,
    /// The test set.
    Test,
}

/// A labelled image dataset held as bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Short name (`mnist`, `fashion-mnist`, `cifar10`, `cifar100`, `synthetic`).
    pub name: String,
    /// Image shape `[C, H, W]`.
    pub shape: [usize; 3],
    /// Pixels, `len = n·C·H·W`, each image channel-major (`[C, H, W]`), 0..255.
    pub images: Vec<u8>,
    /// One label per image, below `classes`.
    pub labels: Vec<u16>,
    /// Number of classes.
    pub classes: usize,
    /// Per-channel mean of pixel/255 used for normalisation.
    pub mean: Vec<f32>,
    /// Per-channel standard deviation used for normalisation.
    pub std: Vec<f32>,
    /// Whether the standard augmentation (pad-4 random crop + horizontal flip) applies.
    pub augment: bool,
}

/// CIFAR normalisation (spec §9.4).
pub const CIFAR_MEAN: [f32; 3] = [0.4914, 0.4822, 0.4465];
/// CIFAR normalisation (spec §9.4).
pub const CIFAR_STD: [f32; 3] = [0.2023, 0.1994, 0.2010];

impl Dataset {
    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Bytes per image.
    pub fn image_len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The pixels of image `i`.
    pub fn image(&self, i: usize) -> &[u8] {
        let l = self.image_len();
        &self.images[i * l..(i + 1) * l]
    }

    /// Keeps the first `n` images (all if fewer).
    pub fn truncate(&mut self, n: usize) {
        let n = n.min(self.len());
        self.images.truncate(n * self.image_len());
        self.labels.truncate(n);
    }

    /// Splits off a seeded random `fraction` (0..1) as a validation set; returns (train, val).
    pub fn split_validation(&self, fraction: f64, seed: u64) -> Result<(Dataset, Dataset)> {
        if !(0.0..1.0).contains(&fraction) {
            return Err(SimError::invalid(
                "validation split",
                format!("{fraction} (must be in [0, 1))"),
            ));
        }
        let mut idx: Vec<usize> = (0..self.len()).collect();
        shuffle(&mut idx, &mut ChaCha8Rng::seed_from_u64(seed));
        let nval = (self.len() as f64 * fraction).round() as usize;
        if fraction > 0.0 && nval == 0 {
            return Err(SimError::invalid(
                "validation split",
                format!(
                    "{fraction} of {} images of '{}' is no image at all",
                    self.len(),
                    self.name
                ),
            ));
        }
        let (val, train) = idx.split_at(nval);
        Ok((self.select(train), self.select(val)))
    }

    /// A dataset of the given images (in the given order).
    pub fn select(&self, which: &[usize]) -> Dataset {
        let mut out = Dataset {
            images: Vec::with_capacity(which.len() * self.image_len()),
            labels: Vec::with_capacity(which.len()),
            ..self.clone_meta()
        };
        for &i in which {
            out.images.extend_from_slice(self.image(i));
            out.labels.push(self.labels[i]);
        }
        out
    }

    fn clone_meta(&self) -> Dataset {
        Dataset {
            name: self.name.clone(),
            shape: self.shape,
            images: Vec::new(),
            labels: Vec::new(),
            classes: self.classes,
            mean: self.mean.clone(),
            std: self.std.clone(),
            augment: self.augment,
        }
    }
}

/// MNIST (`fashion = false`) or Fashion-MNIST from a folder holding the four IDX files (raw or .gz).
pub fn load_mnist(dir: &Path, split: Split, fashion: bool) -> Result<Dataset> {
    let prefix = match split {
        Split::Train => "train",
        Split::Test => "t10k",
    };
    let img_path = find_file(
        dir,
        &[
            &format!("{prefix}-images-idx3-ubyte"),
            &format!("{prefix}-images.idx3-ubyte"),
        ],
    )?;
    let lab_path = find_file(
        dir,
        &[
            &format!("{prefix}-labels-idx1-ubyte"),
            &format!("{prefix}-labels.idx1-ubyte"),
        ],
    )?;
    let img = read_idx(&img_path)?;
    let lab = read_idx(&lab_path)?;
    if img.dims.len() != 3 {
        return Err(data_err(
            &img_path,
            3,
            format!(
                "image file must have 3 dimensions, has {:?} (labels file?)",
                img.dims
            ),
        ));
    }
    if lab.dims.len() != 1 {
        return Err(data_err(
            &lab_path,
            3,
            format!(
                "label file must have 1 dimension, has {:?} (images file?)",
                lab.dims
            ),
        ));
    }
    if img.dims.contains(&0) {
        return Err(data_err(
            &img_path,
            4,
            format!("holds no images (dimensions {:?})", img.dims),
        ));
    }
    if img.dims[0] != lab.dims[0] {
        return Err(data_err(
            &lab_path,
            4,
            format!(
                "{} labels for {} images in {}",
                lab.dims[0],
                img.dims[0],
                img_path.display()
            ),
        ));
    }
    let header = 8;
    if let Some(pos) = lab.data.iter().position(|&l| l >= 10) {
        return Err(data_err(
            &lab_path,
            header + pos,
            format!("label {} of item {pos} is not a class 0..9", lab.data[pos]),
        ));
    }
    let (name, mean, std) = if fashion {
        ("fashion-mnist", 0.2860, 0.3530)
    } else {
        ("mnist", 0.1307, 0.3081)
    };
    Ok(Dataset {
        name: name.into(),
        shape: [1, img.dims[1], img.dims[2]],
        images: img.data,
        labels: lab.data.iter().map(|&l| l as u16).collect(),
        classes: 10,
        mean: vec![mean],
        std: vec![std],
        augment: false,
    })
}

/// CIFAR-10 or CIFAR-100 from a folder with the binary batches (or its `cifar-10-batches-bin` /
/// `cifar-100-binary` subfolder).
pub fn load_cifar(dir: &Path, split: Split, kind: CifarKind) -> Result<Dataset> {
    let (sub, files): (&str, Vec<String>) = match (kind, split) {
        (CifarKind::Cifar10, Split::Train) => (
            "cifar-10-batches-bin",
            (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
        ),
        (CifarKind::Cifar10, Split::Test) => {
            ("cifar-10-batches-bin", vec!["test_batch.bin".into()])
        }
        (CifarKind::Cifar100, Split::Train) => ("cifar-100-binary", vec!["train.bin".into()]),
        (CifarKind::Cifar100, Split::Test) => ("cifar-100-binary", vec!["test.bin".into()]),
    };
    let base = if dir.join(sub).is_dir() {
        dir.join(sub)
    } else {
        dir.to_path_buf()
    };
    let mut images = Vec::new();
    let mut labels = Vec::new();
    for f in &files {
        let path = find_file(&base, &[f])?;
        let (i, l) = read_cifar(&path, kind)?;
        images.extend(i);
        labels.extend(l);
    }
    Ok(Dataset {
        name: match kind {
            CifarKind::Cifar10 => "cifar10",
            CifarKind::Cifar100 => "cifar100",
        }
        .into(),
        shape: [3, 32, 32],
        images,
        labels,
        classes: kind.classes(),
        mean: CIFAR_MEAN.to_vec(),
        std: CIFAR_STD.to_vec(),
        augment: true,
    })
}

/// A seeded synthetic dataset: each class has a smooth random prototype image; samples are the
/// prototype plus Gaussian-like pixel noise (sum of uniforms), clipped to 0..255. Learnable but not
/// trivially separable at `noise` ≈ 60.
pub fn synthetic(
    n: usize,
    shape: [usize; 3],
    classes: usize,
    noise: f32,
    seed: u64,
) -> Result<Dataset> {
    let mut parts = synthetic_parts(n, &[0..n], shape, classes, noise, seed)?;
    Ok(parts.remove(0))
}

/// The samples of [`synthetic`]`(n, …)` whose indices lie in each of `parts` (ranges within
/// `0..n`, in order, not overlapping), one dataset per part: every sample is drawn in turn, but
/// only those in a part are kept, so a run that needs a few of them holds only those.
pub fn synthetic_parts(
    n: usize,
    parts: &[std::ops::Range<usize>],
    shape: [usize; 3],
    classes: usize,
    noise: f32,
    seed: u64,
) -> Result<Vec<Dataset>> {
    let ordered = parts.windows(2).all(|w| w[0].end <= w[1].start);
    if !ordered || parts.iter().any(|r| r.start > r.end || r.end > n) {
        return Err(SimError::invalid(
            "synthetic dataset",
            format!("parts {parts:?} of {n} samples"),
        ));
    }
    if classes == 0 || classes > u16::MAX as usize || shape.contains(&0) {
        return Err(SimError::invalid(
            "synthetic dataset",
            format!("shape {shape:?} with {classes} classes"),
        ));
    }
    let [c, h, w] = shape;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Prototypes: a 4×4 grid of random levels per channel, bilinearly upsampled.
    let protos: Vec<Vec<f32>> = (0..classes)
        .map(|_| {
            let grid: Vec<f32> = (0..c * 16).map(|_| rng.random_range(30.0..225.0)).collect();
            let mut img = Vec::with_capacity(c * h * w);
            for ch in 0..c {
                for y in 0..h {
                    for x in 0..w {
                        let fy = y as f32 / h.max(2) as f32 * 3.0;
                        let fx = x as f32 / w.max(2) as f32 * 3.0;
                        let (y0, x0) = (fy.floor() as usize, fx.floor() as usize);
                        let (ty, tx) = (fy - y0 as f32, fx - x0 as f32);
                        let g = |yy: usize, xx: usize| grid[ch * 16 + yy.min(3) * 4 + xx.min(3)];
                        let top = g(y0, x0) * (1.0 - tx) + g(y0, x0 + 1) * tx;
                        let bot = g(y0 + 1, x0) * (1.0 - tx) + g(y0 + 1, x0 + 1) * tx;
                        img.push(top * (1.0 - ty) + bot * ty);
                    }
                }
            }
            img
        })
        .collect();
    let pixels = c * h * w;
    let mut out = Vec::with_capacity(parts.len());
    let mut next = 0;
    for part in parts {
        let mut images = Vec::with_capacity(part.len() * pixels);
        let mut labels = Vec::with_capacity(part.len());
        for i in next..part.end {
            let k = rng.random_range(0..classes);
            let keep = i >= part.start;
            if keep {
                labels.push(k as u16);
            }
            for &p in &protos[k] {
                let z: f32 = (0..4).map(|_| rng.random::<f32>() - 0.5).sum::<f32>() * 1.7320508;
                if keep {
                    images.push((p + noise * z).clamp(0.0, 255.0).round() as u8);
                }
            }
        }
        next = part.end;
        out.push(Dataset {
            name: "synthetic".into(),
            shape,
            images,
            labels,
            classes,
            mean: vec![0.5; c],
            std: vec![0.25; c],
            augment: false,
        });
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    pub(crate) use cptsim_testdata::shared_data;

    #[test]
    fn synthetic_parts_are_the_slices_of_the_whole_set() {
        let all = synthetic(40, [2, 5, 3], 4, 30.0, 9).unwrap();
        let parts = synthetic_parts(40, &[3..10, 10..10, 25..40], [2, 5, 3], 4, 30.0, 9).unwrap();
        for (part, r) in parts.iter().zip([3..10, 10..10, 25..40]) {
            let want = all.select(&r.collect::<Vec<_>>());
            assert_eq!((&part.images, &part.labels), (&want.images, &want.labels));
        }
        for bad in [vec![5..3], vec![0..41], vec![4..9, 8..12]] {
            let e = synthetic_parts(40, &bad, [2, 5, 3], 4, 30.0, 9).unwrap_err();
            assert!(e.to_string().contains("of 40 samples"), "{e}");
        }
    }

    #[test]
    fn real_mnist_and_fashion_load_with_published_counts() {
        let Some(dir) = shared_data("mnist") else {
            return;
        };
        let test = load_mnist(&dir, Split::Test, false).unwrap();
        assert_eq!((test.len(), test.shape), (10_000, [1, 28, 28]));
        let mut counts = [0usize; 10];
        test.labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert_eq!(
            counts,
            [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
        );
        let Some(fdir) = shared_data("fashion-mnist") else {
            return;
        };
        let f = load_mnist(&fdir, Split::Test, true).unwrap();
        let mut counts = [0usize; 10];
        f.labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert_eq!(counts, [1000; 10]);
        assert_eq!(f.name, "fashion-mnist");
    }

    fn write_idx(path: &Path, dims: &[u32], body: &[u8], gz: bool) {
        let mut v = vec![0, 0, 8, dims.len() as u8];
        dims.iter()
            .for_each(|d| v.extend_from_slice(&d.to_be_bytes()));
        v.extend_from_slice(body);
        let f = std::fs::File::create(path).unwrap();
        if gz {
            let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
            e.write_all(&v).unwrap();
            e.finish().unwrap();
        } else {
            (&f).write_all(&v).unwrap();
        }
    }

    #[test]
    fn mislabeled_and_truncated_idx_files_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write_idx(
            &d.join("t10k-images-idx3-ubyte.gz"),
            &[2, 2, 2],
            &[0; 8],
            true,
        );
        write_idx(&d.join("t10k-labels-idx1-ubyte"), &[2], &[3, 11], false);
        let e = load_mnist(d, Split::Test, false).unwrap_err().to_string();
        assert!(
            e.contains("t10k-labels-idx1-ubyte")
                && e.contains("at byte 9")
                && e.contains("label 11"),
            "{e}"
        );
        write_idx(&d.join("t10k-labels-idx1-ubyte"), &[3], &[3, 1, 2], false);
        let e = load_mnist(d, Split::Test, false).unwrap_err().to_string();
        assert!(e.contains("3 labels for 2 images"), "{e}");
        write_idx(&d.join("t10k-labels-idx1-ubyte"), &[2], &[3, 1], false);
        assert_eq!(
            load_mnist(d, Split::Test, false).unwrap().labels,
            vec![3, 1]
        );
        // Truncated gzip stream.
        let gz = std::fs::read(d.join("t10k-images-idx3-ubyte.gz")).unwrap();
        std::fs::write(d.join("t10k-images-idx3-ubyte.gz"), &gz[..gz.len() - 12]).unwrap();
        let e = load_mnist(d, Split::Test, false).unwrap_err().to_string();
        assert!(
            e.contains("t10k-images-idx3-ubyte.gz") && e.contains("at byte"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_test_set_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write_idx(&d.join("t10k-images-idx3-ubyte"), &[0, 28, 28], &[], false);
        write_idx(&d.join("t10k-labels-idx1-ubyte"), &[0], &[], false);
        let e = load_mnist(d, Split::Test, false).unwrap_err().to_string();
        assert!(
            e.contains("t10k-images-idx3-ubyte") && e.contains("holds no images"),
            "{e}"
        );
        let e = synthetic(5, [1, 2, 2], 2, 1.0, 1)
            .unwrap()
            .split_validation(0.01, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no image at all"), "{e}");
    }

    #[test]
    fn cifar_folder_in_standard_layout() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("cifar-10-batches-bin");
        std::fs::create_dir(&sub).unwrap();
        for (i, name) in [
            "data_batch_1.bin",
            "data_batch_2.bin",
            "data_batch_3.bin",
            "data_batch_4.bin",
            "data_batch_5.bin",
            "test_batch.bin",
        ]
        .iter()
        .enumerate()
        {
            let mut rec = vec![(i % 10) as u8];
            rec.extend((0..IMAGE_BYTES).map(|p| ((p / 1024) * 100 + i) as u8));
            std::fs::write(sub.join(name), rec.repeat(2)).unwrap();
        }
        let train = load_cifar(dir.path(), Split::Train, CifarKind::Cifar10).unwrap();
        assert_eq!(train.len(), 10);
        assert_eq!(train.labels[..4], [0, 0, 1, 1]);
        // Red plane first, then green (second plane of image 0 = 100).
        assert_eq!(train.image(0)[1024], 100);
        let test = load_cifar(dir.path(), Split::Test, CifarKind::Cifar10).unwrap();
        assert_eq!(test.labels, vec![5, 5]);
        assert!(test.augment && test.classes == 10);
        // CIFAR-100 layout: coarse, fine, pixels; gzip accepted.
        let mut rec = vec![19u8, 99u8];
        rec.extend(vec![1u8; IMAGE_BYTES]);
        let f = std::fs::File::create(dir.path().join("test.bin.gz")).unwrap();
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        e.write_all(&rec).unwrap();
        e.finish().unwrap();
        let c100 = load_cifar(dir.path(), Split::Test, CifarKind::Cifar100).unwrap();
        assert_eq!((c100.labels.clone(), c100.classes), (vec![99], 100));
    }

    #[test]
    fn synthetic_is_seeded_and_split_is_disjoint() {
        let a = synthetic(50, [3, 8, 8], 4, 60.0, 1).unwrap();
        assert_eq!(a, synthetic(50, [3, 8, 8], 4, 60.0, 1).unwrap());
        assert_ne!(
            a.images,
            synthetic(50, [3, 8, 8], 4, 60.0, 2).unwrap().images
        );
        let (tr, va) = a.split_validation(0.2, 3).unwrap();
        assert_eq!((tr.len(), va.len()), (40, 10));
        assert!(a.split_validation(1.0, 3).is_err());
        let mut t = a.clone();
        t.truncate(7);
        assert_eq!((t.len(), t.images.len()), (7, 7 * 192));
    }
}
