//! The IDX format of MNIST and Fashion-MNIST (gzip or raw): `00 00`, type `0x08` (unsigned byte),
//! the number of dimensions, each dimension as a big-endian u32, then the bytes row-major.

use std::path::Path;

use super::file::{data_err, read_maybe_gz};
use crate::error::Result;

/// A parsed IDX file of unsigned bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Idx {
    /// Dimensions, outermost first.
    pub dims: Vec<usize>,
    /// The elements, row-major.
    pub data: Vec<u8>,
}

/// Parses IDX bytes read from `path` (used in error messages).
pub fn parse_idx(path: &Path, bytes: &[u8]) -> Result<Idx> {
    if bytes.len() < 4 {
        return Err(data_err(
            path,
            bytes.len(),
            "file ends inside the 4-byte IDX magic",
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(data_err(
            path,
            0,
            "not an IDX file (first two bytes must be zero)",
        ));
    }
    if bytes[2] != 0x08 {
        return Err(data_err(
            path,
            2,
            format!(
                "element type 0x{:02x}, only 0x08 (unsigned byte) is supported",
                bytes[2]
            ),
        ));
    }
    let nd = bytes[3] as usize;
    let header = 4 + 4 * nd;
    if bytes.len() < header {
        return Err(data_err(
            path,
            bytes.len(),
            format!("file ends inside the header ({nd} dimensions need {header} bytes)"),
        ));
    }
    let dims: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let count = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let Some(count) = count else {
        return Err(data_err(path, 4, format!("dimensions {dims:?} overflow")));
    };
    let have = bytes.len() - header;
    if have < count {
        return Err(data_err(path, bytes.len(), format!("truncated: dimensions {dims:?} need {count} data bytes after the {header}-byte header, file has {have}")));
    }
    if have > count {
        return Err(data_err(
            path,
            header + count,
            format!(
                "{} trailing bytes after the data of dimensions {dims:?}",
                have - count
            ),
        ));
    }
    Ok(Idx {
        dims,
        data: bytes[header..].to_vec(),
    })
}

/// Reads an IDX file (gzip or raw).
pub fn read_idx(path: &Path) -> Result<Idx> {
    parse_idx(path, &read_maybe_gz(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(dims: &[u32], body: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 8, dims.len() as u8];
        dims.iter()
            .for_each(|d| v.extend_from_slice(&d.to_be_bytes()));
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn parses_and_rejects_with_offsets() {
        let p = Path::new("x.idx");
        let ok = parse_idx(p, &idx(&[2, 3], &[1, 2, 3, 4, 5, 6])).unwrap();
        assert_eq!(ok.dims, vec![2, 3]);
        assert_eq!(ok.data, vec![1, 2, 3, 4, 5, 6]);
        let e = parse_idx(p, &idx(&[2, 3], &[1, 2, 3]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.idx") && e.contains("at byte 15") && e.contains("truncated"),
            "{e}"
        );
        let e = parse_idx(p, &idx(&[2], &[1, 2, 3]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at byte 10") && e.contains("trailing"), "{e}");
        let mut bad = idx(&[1], &[1]);
        bad[2] = 0x0d;
        assert!(parse_idx(p, &bad)
            .unwrap_err()
            .to_string()
            .contains("at byte 2"));
        assert!(parse_idx(p, &[0, 0, 8, 3, 0])
            .unwrap_err()
            .to_string()
            .contains("header"));
    }
}
