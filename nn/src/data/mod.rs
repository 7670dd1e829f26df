//! Datasets: MNIST/Fashion-MNIST IDX and CIFAR binary readers (gzip or raw), a seeded synthetic
//! dataset, mini-batch assembly with augmentation, normalisation and shape adaptation, and text
//! corpora for language models.

pub mod batch;
pub mod cifar;
pub mod dataset;
pub mod file;
pub mod idx;
pub mod shuffle;
pub mod text;

pub use batch::{eval_batches, Adaptation, Batch, Loader};
pub use cifar::CifarKind;
pub use dataset::{load_cifar, load_mnist, synthetic, Dataset, Split};
