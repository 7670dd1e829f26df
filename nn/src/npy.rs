//! A minimal `.npy` reader and writer for little-endian C-order arrays (NumPy format versions
//! 1.0–3.0): magic `\x93NUMPY`, version, header length, a Python-dict header with `descr`,
//! `fortran_order` and `shape`, then the raw data. Hand-written rather than `ndarray-npy`, whose
//! errors name neither the file nor the offset (README, "Running a model"). The header is read as
//! strictly as NumPy reads it ([`header`]): a repeated or unknown key, or a `fortran_order` that
//! is not `True`/`False`, is an error naming the file and the key.
//!
//! The reader takes float32 (`<f4`) and, for token ids, int64 (`<i8`) and int32 (`<i4`), which
//! it converts exactly to the IR's f32 ids: an integer must lie in `0..2^24`
//! ([`MAX_VOCAB`](cptsim_models::ir::MAX_VOCAB), below which every integer is exact in f32).
//! The writer writes float32.

use std::io::Write;
use std::path::Path;

use crate::error::{Result, SimError};
use crate::layers::Tensor;

mod header;

const MAGIC: &[u8] = b"\x93NUMPY";

fn bad(path: &Path, offset: usize, msg: impl Into<String>) -> SimError {
    SimError::Data {
        path: path.to_path_buf(),
        offset: offset as u64,
        msg: msg.into(),
    }
}

/// Reads a float32, int64 or int32 `.npy` file (see the module docs).
pub fn read(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).map_err(|source| SimError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &bytes)
}

/// Parses the bytes of a `.npy` file (see [`read`]; `path` is used in messages).
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
    let header = header::parse(header).map_err(|e| bad(path, start, e))?;
    let dtype = ["<f4", "<i8", "<i4"]
        .into_iter()
        .find(|d| header.descr == *d)
        .ok_or_else(|| {
            bad(
                path,
                start,
                format!(
                    "dtype '{}': only little-endian float32 ('<f4'), or int64 ('<i8') and \
                     int32 ('<i4') token ids, are supported",
                    header.descr
                ),
            )
        })?;
    let size = if dtype == "<i8" { 8 } else { 4 };
    if header.fortran_order {
        return Err(bad(
            path,
            start,
            "Fortran-order array: save it in C order (numpy.ascontiguousarray)",
        ));
    }
    let shape = header.shape;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(path, start, format!("shape {shape:?} overflows")))?;
    let data = &bytes[data_at.min(bytes.len())..];
    let need = count.checked_mul(size);
    if need != Some(data.len()) {
        let need = need.map_or("more than fit in memory".to_string(), |n| n.to_string());
        return Err(bad(
            path,
            data_at,
            format!(
                "{} data bytes, shape {shape:?} of {dtype} needs {need} ({})",
                data.len(),
                if count.saturating_mul(size) > data.len() {
                    "truncated"
                } else {
                    "trailing bytes"
                }
            ),
        ));
    }
    let values = match dtype {
        "<f4" => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        "<i4" => ids(path, data_at, &shape, data, 4, |c| {
            i32::from_le_bytes([c[0], c[1], c[2], c[3]]).into()
        })?,
        _ => ids(path, data_at, &shape, data, 8, |c| {
            i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
        })?,
    };
    Tensor::from_shape_vec(shape, values).map_err(|e| bad(path, start, e.to_string()))
}

/// Integer elements (`size`-byte chunks of `data` decoded by `get`) as exact f32 token ids; a
/// value outside `0..2^24` is an error naming its index and byte offset.
fn ids(
    path: &Path,
    data_at: usize,
    shape: &[usize],
    data: &[u8],
    size: usize,
    get: impl Fn(&[u8]) -> i64,
) -> Result<Vec<f32>> {
    data.chunks_exact(size)
        .enumerate()
        .map(|(i, c)| {
            let v = get(c);
            if (0..cptsim_models::ir::MAX_VOCAB as i64).contains(&v) {
                Ok(v as f32)
            } else {
                Err(bad(
                    path,
                    data_at + i * size,
                    format!(
                        "element {i} (index {:?}) is {v}: integer inputs are token ids, \
                         which must lie in 0..2^24",
                        unravel(i, shape)
                    ),
                ))
            }
        })
        .collect()
}

/// The C-order multi-index of flat index `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx
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
        let e = err(&swap("(2, 2)", "(2, x)"));
        assert!(e.contains("'shape'") && e.contains("(2, x)"), "{e}");
    }

    /// A version-1.0 `.npy` of `descr` and `shape` (a Python tuple) over raw `data`.
    fn npy_bytes(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        h.push_str(&" ".repeat(63 - (10 + h.len()) % 64));
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn a_header_numpy_would_refuse_names_the_file_and_the_key() {
        let with = |header: &str| {
            let mut h = header.to_string();
            h.push_str(&" ".repeat(63 - (10 + h.len()) % 64));
            h.push('\n');
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            b.extend_from_slice(&(h.len() as u16).to_le_bytes());
            b.extend_from_slice(h.as_bytes());
            b.extend_from_slice(&[0; 8]);
            parse(Path::new("odd.npy"), &b)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let e = with("{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,), }");
        assert!(
            e.contains("odd.npy") && e.contains("'fortran_order'"),
            "{e}"
        );
        // The first `descr` fits the data; numpy would take the second.
        let e = with("{'descr': '<f4', 'fortran_order': False, 'descr': '<f8', 'shape': (2,), }");
        assert!(
            e.contains("odd.npy") && e.contains("'descr' appears twice"),
            "{e}"
        );
        let e = with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (1,), }");
        assert!(e.contains("'shape' appears twice"), "{e}");
        assert!(with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }").is_empty());
    }

    #[test]
    fn integer_token_ids_convert_exactly() {
        let max = (1i64 << 24) - 1;
        let v64: Vec<u8> = [0i64, 7, 49, max, 3, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let t = parse(Path::new("ids.npy"), &npy_bytes("<i8", "(2, 3)", &v64)).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(
            t.as_slice().unwrap(),
            &[0.0, 7.0, 49.0, 16_777_215.0, 3.0, 1.0]
        );
        let v32: Vec<u8> = [5i32, 0, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = parse(Path::new("ids.npy"), &npy_bytes("<i4", "(3,)", &v32)).unwrap();
        assert_eq!(t.as_slice().unwrap(), &[5.0, 0.0, 2.0]);
        // int64 data of the wrong length is caught as for float32
        let e = parse(
            Path::new("ids.npy"),
            &npy_bytes("<i8", "(2, 3)", &v64[..40]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("truncated") && e.contains("needs 48"), "{e}");
    }

    #[test]
    fn ids_outside_the_f32_exact_range_are_errors_naming_the_position() {
        for (bad_id, at) in [(-1i64, 4usize), (1 << 24, 1), (i64::MAX, 5)] {
            let mut v = [1i64, 2, 3, 4, 5, 6];
            v[at] = bad_id;
            let data: Vec<u8> = v.iter().flat_map(|v| v.to_le_bytes()).collect();
            let e = parse(Path::new("ids.npy"), &npy_bytes("<i8", "(3, 2)", &data))
                .unwrap_err()
                .to_string();
            let index = format!("[{}, {}]", at / 2, at % 2);
            assert!(
                e.contains("ids.npy")
                    && e.contains(&format!("element {at} (index {index}) is {bad_id}"))
                    && e.contains("0..2^24"),
                "{e}"
            );
        }
        let data: Vec<u8> = [3i32, -2].iter().flat_map(|v| v.to_le_bytes()).collect();
        let e = parse(Path::new("ids.npy"), &npy_bytes("<i4", "(2,)", &data))
            .unwrap_err()
            .to_string();
        assert!(e.contains("element 1 (index [1]) is -2"), "{e}");
    }

    #[test]
    fn other_dtypes_are_named_errors() {
        for descr in ["<i2", ">i8", "<u8", "<f8", "|b1"] {
            let e = parse(Path::new("x.npy"), &npy_bytes(descr, "(1,)", &[0; 8]))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("'{descr}'")) && e.contains("int64") && e.contains("x.npy"),
                "{e}"
            );
        }
    }
}
