//! A minimal `.npy` reader and writer for little-endian float32 C-order arrays (NumPy format
//! versions 1.0–3.0): magic `\x93NUMPY`, version, header length, a Python-dict header with
//! `descr`, `fortran_order` and `shape`, then the raw data. Hand-written rather than `ndarray-npy`,
//! whose errors name neither the file nor the offset (README, "Running a model").

use std::io::Write;
use std::path::Path;

use crate::error::{Result, SimError};
use crate::layers::Tensor;

const MAGIC: &[u8] = b"\x93NUMPY";

fn bad(path: &Path, offset: usize, msg: impl Into<String>) -> SimError {
    SimError::Data {
        path: path.to_path_buf(),
        offset: offset as u64,
        msg: msg.into(),
    }
}

/// Reads a float32 `.npy` file.
pub fn read(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|source| SimError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &bytes)
}

/// Parses the bytes of a float32 `.npy` file (`path` is used in messages).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad(path, 0, "not a .npy file (missing \\x93NUMPY magic)"));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len_bytes, header_len) = match major {
        1 => (2, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        2 | 3 if bytes.len() >= 12 => (
            4,
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
        ),
        _ => {
            return Err(bad(
                path,
                6,
                format!("unsupported .npy version {major}.{minor}"),
            ))
        }
    };
    let start = 8 + len_bytes;
    let data_at = start + header_len;
    let header = bytes.get(start..data_at).ok_or_else(|| {
        bad(
            path,
            start,
            format!("truncated header ({header_len} bytes announced)"),
        )
    })?;
    let header = std::str::from_utf8(header).map_err(|_| bad(path, start, "header is not text"))?;
    let field = |key: &str| -> Result<&str> {
        let at = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| bad(path, start, format!("header has no '{key}': {header}")))?;
        let rest = &header[at + key.len() + 2..];
        let colon = rest
            .find(':')
            .ok_or_else(|| bad(path, start, format!("header '{key}' has no value")))?;
        Ok(rest[colon + 1..].trim_start())
    };
    let descr = field("descr")?;
    if !(descr.starts_with("'<f4'") || descr.starts_with("\"<f4\"")) {
        let shown: String = descr.chars().take_while(|&c| c != ',').collect();
        return Err(bad(
            path,
            start,
            format!("dtype {shown}: only little-endian float32 ('<f4') is supported"),
        ));
    }
    if field("fortran_order")?.starts_with("True") {
        return Err(bad(
            path,
            start,
            "Fortran-order array: save it in C order (numpy.ascontiguousarray)",
        ));
    }
    let shape_text = field("shape")?;
    let close = shape_text
        .find(')')
        .filter(|_| shape_text.starts_with('('))
        .ok_or_else(|| bad(path, start, format!("malformed shape in header: {header}")))?;
    let shape = shape_text[1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad(path, start, format!("bad shape entry `{s}` in header")))
        })
        .collect::<Result<Vec<usize>>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(path, start, format!("shape {shape:?} overflows")))?;
    let data = &bytes[data_at.min(bytes.len())..];
    if data.len() != count * 4 {
        return Err(bad(
            path,
            data_at,
            format!(
                "{} data bytes, shape {shape:?} needs {} ({})",
                data.len(),
                count * 4,
                if data.len() < count * 4 {
                    "truncated"
                } else {
                    "trailing bytes"
                }
            ),
        ));
    }
    let values = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Tensor::from_shape_vec(shape, values).map_err(|e| bad(path, start, e.to_string()))
}

/// The `.npy` (version 1.0) bytes of `t` in C order.
pub fn to_bytes(t: &Tensor) -> Vec<u8> {
    let dims: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
    let shape = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that the data starts at a multiple of 64 bytes; the header ends in a newline.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * t.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in t.as_standard_layout().iter() {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Writes `t` to `path` as `.npy`, atomically (temporary sibling, then rename).
pub fn write(path: &Path, t: &Tensor) -> Result<()> {
    let bytes = to_bytes(t);
    cptsim_models::atomic::write_atomically(
        path,
        |w| w.write_all(&bytes).map_err(|e| SimError::output(path, e)),
        SimError::output,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_header_alignment() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        for shape in [vec![2, 3, 4], vec![5], vec![]] {
            let n: usize = shape.iter().product();
            let t = Tensor::from_shape_vec(
                shape.clone(),
                (0..n).map(|i| i as f32 * 0.5 - 1.0).collect(),
            )
            .unwrap();
            write(&p, &t).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + hlen) % 64, 0);
            assert_eq!(read(&p).unwrap(), t, "{shape:?}");
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    /// Bytes numpy 1.26 writes for `np.arange(3, dtype='<f4').reshape(1, 3)`.
    #[test]
    fn reads_what_numpy_writes() {
        let mut b =
            b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }"
                .to_vec();
        b.resize(127, b' ');
        b.push(b'\n');
        for v in [0f32, 1.0, 2.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let t = parse(Path::new("a.npy"), &b).unwrap();
        assert_eq!(t.shape(), &[1, 3]);
        assert_eq!(t.as_slice().unwrap(), &[0.0, 1.0, 2.0]);
    }

    #[test]
    fn bad_files_are_rejected_with_the_reason() {
        let t = Tensor::zeros(vec![2, 2]);
        let good = to_bytes(&t);
        let p = Path::new("in.npy");
        let err = |b: &[u8]| parse(p, b).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(b"hello").contains("magic"));
        assert!(err(&good[..good.len() - 3]).contains("truncated"));
        assert!(err(&good[..30]).contains("truncated header"));
        let swap = |from: &str, to: &str| {
            let at = good
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .unwrap();
            let mut b = good.clone();
            b[at..at + to.len()].copy_from_slice(to.as_bytes());
            b
        };
        let e = err(&swap("<f4", "<f8"));
        assert!(
            e.contains("'<f8'") && e.contains("float32") && e.contains("in.npy"),
            "{e}"
        );
        assert!(err(&swap("False", "True ")).contains("Fortran"));
        assert!(err(&swap("(2, 2)", "(2, x)")).contains("bad shape entry"));
    }
}
