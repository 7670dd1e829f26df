//! CIFAR-10 / CIFAR-100 binary batches (gzip or raw): fixed-size records of label byte(s) then
//! 3072 pixel bytes (1024 red, 1024 green, 1024 blue, each plane row-major 32×32).

use std::path::Path;

use super::file::{data_err, read_maybe_gz};
use crate::error::Result;

/// Which CIFAR variant a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CifarKind {
    /// One label byte (0..9) per record.
    Cifar10,
    /// Coarse (0..19) then fine (0..99) label byte; the fine label is used.
    Cifar100,
}

/// Pixel bytes per image.
pub const IMAGE_BYTES: usize = 3 * 32 * 32;

impl CifarKind {
    /// Bytes per record.
    pub fn record_bytes(self) -> usize {
        match self {
            Self::Cifar10 => 1 + IMAGE_BYTES,
            Self::Cifar100 => 2 + IMAGE_BYTES,
        }
    }

    /// Number of (fine) classes.
    pub fn classes(self) -> usize {
        match self {
            Self::Cifar10 => 10,
            Self::Cifar100 => 100,
        }
    }
}

/// Parses CIFAR records: returns (images `[n, 3, 32, 32]` as bytes, labels).
pub fn parse_cifar(path: &Path, bytes: &[u8], kind: CifarKind) -> Result<(Vec<u8>, Vec<u16>)> {
    let rec = kind.record_bytes();
    if bytes.is_empty() {
        return Err(data_err(path, 0, "empty CIFAR batch file"));
    }
    if !bytes.len().is_multiple_of(rec) {
        let whole = bytes.len() / rec;
        return Err(data_err(path, whole * rec, format!("truncated: {} bytes is not a whole number of {rec}-byte records (record {whole} is incomplete)", bytes.len())));
    }
    let n = bytes.len() / rec;
    let mut images = Vec::with_capacity(n * IMAGE_BYTES);
    let mut labels = Vec::with_capacity(n);
    for (i, r) in bytes.chunks_exact(rec).enumerate() {
        let checks: &[(usize, usize)] = match kind {
            CifarKind::Cifar10 => &[(0, 10)],
            CifarKind::Cifar100 => &[(0, 20), (1, 100)],
        };
        for &(at, limit) in checks {
            if r[at] as usize >= limit {
                return Err(data_err(
                    path,
                    i * rec + at,
                    format!(
                        "label {} of record {i} is not below {limit} (wrong file or variant?)",
                        r[at]
                    ),
                ));
            }
        }
        labels.push(r[rec - IMAGE_BYTES - 1] as u16);
        images.extend_from_slice(&r[rec - IMAGE_BYTES..]);
    }
    Ok((images, labels))
}

/// Reads one CIFAR batch file (gzip or raw).
pub fn read_cifar(path: &Path, kind: CifarKind) -> Result<(Vec<u8>, Vec<u16>)> {
    parse_cifar(path, &read_maybe_gz(path)?, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_errors() {
        let p = Path::new("b.bin");
        let mut bytes = vec![7u8];
        bytes.extend((0..IMAGE_BYTES).map(|i| (i % 251) as u8));
        bytes.push(3);
        bytes.extend(vec![9u8; IMAGE_BYTES]);
        let (img, lab) = parse_cifar(p, &bytes, CifarKind::Cifar10).unwrap();
        assert_eq!(lab, vec![7, 3]);
        assert_eq!(img.len(), 2 * IMAGE_BYTES);
        assert_eq!(img[1024], (1024 % 251) as u8);
        let e = parse_cifar(p, &bytes[..5000], CifarKind::Cifar10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("b.bin") && e.contains("at byte 3073") && e.contains("truncated"),
            "{e}"
        );
        bytes[3073] = 12;
        let e = parse_cifar(p, &bytes, CifarKind::Cifar10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at byte 3073") && e.contains("label 12"), "{e}");
        // A CIFAR-10 file read as CIFAR-100 is not a whole number of records.
        assert!(parse_cifar(p, &bytes, CifarKind::Cifar100).is_err());
    }
}
