//! Datasets: MNIST/Fashion-MNIST IDX and CIFAR binary readers (gzip or raw), a seeded synthetic
//! dataset, mini-batch assembly with augmentation, normalisation and shape adaptation, text
//! corpora for language models, and seeded token sequences for sequence classifiers.

pub mod batch;
pub mod cifar;
pub mod dataset;
pub mod file;
pub mod idx;
pub mod shuffle;
pub mod text;
pub mod tokens;

pub use batch::{eval_batches, Adaptation, Batch, Loader};
pub use cifar::CifarKind;
pub use dataset::{load_cifar, load_mnist, synthetic, synthetic_parts, Dataset, Split};
