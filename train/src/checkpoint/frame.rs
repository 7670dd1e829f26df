//! The frame around a checkpoint's contents: `CPTSIMCK`, the header length (u64 LE), the JSON
//! header, the tensor data, then a trailer — the tag `CRC32LE\0` and the CRC-32 (u32 LE) of every
//! byte before the CRC. The trailer is written last and checked before anything else is read, so
//! a file changed or cut after it was written is refused rather than resumed.

use std::io::Write;
use std::path::Path;

use cptsim_nn::error::{Result, SimError};

pub(super) const MAGIC: &[u8; 8] = b"CPTSIMCK";
const TAG: &[u8; 8] = b"CRC32LE\0";
/// Bytes of the trailer: the tag and the CRC.
pub(super) const TRAILER: usize = 12;

pub(super) fn bad(path: &Path, offset: u64, msg: impl Into<String>) -> SimError {
    SimError::Data {
        path: path.to_path_buf(),
        offset,
        msg: msg.into(),
    }
}

/// The trailer that seals `content` (all the bytes before it).
pub fn trailer(content: &[u8]) -> [u8; TRAILER] {
    let mut h = crc32fast::Hasher::new();
    h.update(content);
    h.update(TAG);
    seal(h)
}

/// The trailer from a hasher that has seen the content and the tag.
fn seal(h: crc32fast::Hasher) -> [u8; TRAILER] {
    let mut out = [0u8; TRAILER];
    out[..8].copy_from_slice(TAG);
    out[8..].copy_from_slice(&h.finalize().to_le_bytes());
    out
}

/// A writer that passes bytes on while hashing them; [`Sealer::finish`] appends the trailer.
pub(super) struct Sealer<W: Write> {
    out: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Sealer<W> {
    pub(super) fn new(out: W) -> Self {
        Self {
            out,
            crc: crc32fast::Hasher::new(),
        }
    }

    pub(super) fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.out.write_all(bytes)
    }

    /// Writes the trailer.
    pub(super) fn finish(mut self) -> std::io::Result<()> {
        self.crc.update(TAG);
        let t = seal(self.crc);
        self.out.write_all(&t)
    }
}

/// The format version a header claims, read only to word the message about a file that fails
/// its check (an older cptsim wrote no trailer).
fn claimed_version(bytes: &[u8]) -> Option<u64> {
    let len = usize::try_from(u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?)).ok()?;
    let json = bytes.get(16..16usize.checked_add(len)?)?;
    #[derive(serde::Deserialize)]
    struct Version {
        version: u64,
    }
    serde_json::from_slice::<Version>(json)
        .ok()
        .map(|v| v.version)
}

/// Checks the magic and the trailer of a whole checkpoint file and returns its JSON header and
/// tensor bytes.
pub(super) fn open<'a>(path: &Path, bytes: &'a [u8]) -> Result<(&'a [u8], &'a [u8])> {
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad(path, 0, "not a cptsim checkpoint (bad magic)"));
    }
    let n = bytes.len();
    let sealed = n >= 16 + TRAILER && &bytes[n - TRAILER..n - 4] == TAG;
    if !sealed {
        return Err(match claimed_version(bytes) {
            Some(v @ 1..=2) => bad(
                path,
                0,
                format!(
                    "written by an older cptsim (checkpoint format {v}, which has no checksum), \
                     so it cannot be verified and is not resumed: rerun the training, or finish \
                     it with the cptsim that wrote it"
                ),
            ),
            _ => bad(
                path,
                n as u64,
                "no checksum trailer at the end: the file is truncated or damaged",
            ),
        });
    }
    let stored = u32::from_le_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]]);
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[..n - 4]);
    let computed = h.finalize();
    if stored != computed {
        return Err(bad(
            path,
            (n - 4) as u64,
            format!(
                "checksum mismatch (stored CRC-32 {stored:08x}, contents {computed:08x}): the \
                 file was changed or damaged after it was written; it is not resumed"
            ),
        ));
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default());
    let content = &bytes[16..n - TRAILER];
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= content.len())
        .ok_or_else(|| {
            bad(
                path,
                8,
                format!("header of {len} bytes does not fit the file"),
            )
        })?;
    Ok(content.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(content: &[u8]) -> Vec<u8> {
        let mut b = content.to_vec();
        b.extend_from_slice(&trailer(content));
        b
    }

    fn frame(json: &str, body: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&(json.len() as u64).to_le_bytes());
        b.extend_from_slice(json.as_bytes());
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn the_streamed_and_the_whole_trailer_agree() {
        let content = frame("{\"version\":3}", &[1, 2, 3, 4]);
        let mut out = Vec::new();
        let mut s = Sealer::new(&mut out);
        s.write_all(&content[..5]).unwrap();
        s.write_all(&content[5..]).unwrap();
        s.finish().unwrap();
        assert_eq!(out, sealed(&content));
        let (json, body) = open(Path::new("c.bin"), &out).unwrap();
        assert_eq!((json, body), (&b"{\"version\":3}"[..], &[1u8, 2, 3, 4][..]));
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let good = sealed(&frame(
            "{\"version\":3,\"state\":{\"iteration\":100}}",
            &[7; 16],
        ));
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut b = good.clone();
                b[byte] ^= 1 << bit;
                assert!(
                    open(Path::new("c.bin"), &b).is_err(),
                    "byte {byte} bit {bit}"
                );
            }
        }
    }

    #[test]
    fn unsealed_files_are_told_apart_from_damaged_ones() {
        let p = Path::new("old.bin");
        let msg = |b: &[u8]| open(p, b).err().map(|e| e.to_string()).unwrap_or_default();
        let e = msg(&frame("{\"version\":2}", &[0; 8]));
        assert!(
            e.contains("old.bin") && e.contains("older cptsim") && e.contains("format 2"),
            "{e}"
        );
        let good = sealed(&frame("{\"version\":3}", &[0; 8]));
        let e = msg(&good[..good.len() - 1]);
        assert!(e.contains("truncated or damaged"), "{e}");
        assert!(msg(b"CPTSIM").contains("bad magic"));
        // A header length beyond the file, sealed all the same, is an error, not a panic.
        let mut lying = frame("{}", &[]);
        lying[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(msg(&sealed(&lying)).contains("does not fit"));
    }
}
