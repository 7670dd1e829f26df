//! Reading a whole data file, transparently gunzipping it when it starts with the gzip magic.

use std::io::Read;
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use crate::error::{Result, SimError};

/// The bytes of `path`, decompressed if it is gzip. A corrupt or truncated gzip stream is a
/// [`SimError::Data`] whose offset is the number of bytes decompressed before the failure.
pub fn read_maybe_gz(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|source| SimError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(raw);
    }
    let mut out = Vec::with_capacity(raw.len() * 4);
    let mut dec = MultiGzDecoder::new(&raw[..]);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match dec.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(k) => out.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(SimError::Data {
                    path: path.to_path_buf(),
                    offset: out.len() as u64,
                    msg: format!("gzip stream is corrupt or truncated ({e})"),
                })
            }
        }
    }
}

/// The first of `names` that exists in `dir`, also trying each with a `.gz` suffix.
pub fn find_file(dir: &Path, names: &[&str]) -> Result<PathBuf> {
    for n in names {
        for cand in [dir.join(n), dir.join(format!("{n}.gz"))] {
            if cand.is_file() {
                return Ok(cand);
            }
        }
    }
    Err(SimError::Io {
        path: dir.join(names.first().copied().unwrap_or("")),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("none of {names:?} (raw or .gz) found in {}", dir.display()),
        ),
    })
}

/// A [`SimError::Data`] for `path` at `offset`.
pub fn data_err(path: &Path, offset: usize, msg: impl Into<String>) -> SimError {
    SimError::Data {
        path: path.to_path_buf(),
        offset: offset as u64,
        msg: msg.into(),
    }
}
