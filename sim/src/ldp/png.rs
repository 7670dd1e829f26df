//! A minimal PNG writer (8-bit RGB, no filtering) on top of `flate2`'s zlib stream and CRC-32,
//! so the LDP plot needs no imaging crate.

use std::io::Write;
use std::path::Path;

use flate2::write::ZlibEncoder;
use flate2::{Compression, Crc};

use crate::error::{Result, SimError};

/// An 8-bit RGB image, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Rgb {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `3·width·height` bytes.
    pub data: Vec<u8>,
}

impl Rgb {
    /// A `width × height` image filled with `color`.
    pub fn new(width: usize, height: usize, color: [u8; 3]) -> Self {
        Self {
            width,
            height,
            data: color.repeat(width * height),
        }
    }

    /// Sets pixel `(x, y)`; outside the image it does nothing.
    pub fn put(&mut self, x: usize, y: usize, color: [u8; 3]) {
        if x < self.width && y < self.height {
            let i = 3 * (y * self.width + x);
            self.data[i..i + 3].copy_from_slice(&color);
        }
    }

    /// Fills the rectangle `[x0, x1) × [y0, y1)` (clipped to the image).
    pub fn fill(&mut self, (x0, x1): (usize, usize), (y0, y1): (usize, usize), color: [u8; 3]) {
        for y in y0..y1.min(self.height) {
            for x in x0..x1.min(self.width) {
                self.put(x, y, color);
            }
        }
    }

    /// The PNG file bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let bad = |msg: String| SimError::invalid("PNG image", msg);
        let w = u32::try_from(self.width).map_err(|_| bad(format!("width {}", self.width)))?;
        let h = u32::try_from(self.height).map_err(|_| bad(format!("height {}", self.height)))?;
        if w == 0 || h == 0 || self.data.len() != 3 * self.width * self.height {
            return Err(bad(format!(
                "{}×{} with {} bytes",
                self.width,
                self.height,
                self.data.len()
            )));
        }
        let mut raw = Vec::with_capacity(self.data.len() + self.height);
        for row in self.data.chunks(3 * self.width) {
            raw.push(0); // filter type: none
            raw.extend_from_slice(row);
        }
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        let idat = z
            .write_all(&raw)
            .and_then(|()| z.finish())
            .map_err(|e| bad(format!("compression failed: {e}")))?;
        let mut ihdr = Vec::with_capacity(13);
        ihdr.extend_from_slice(&w.to_be_bytes());
        ihdr.extend_from_slice(&h.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit, RGB, deflate, no filter set, no interlace
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        for (kind, body) in [(b"IHDR", &ihdr), (b"IDAT", &idat), (b"IEND", &Vec::new())] {
            let len = u32::try_from(body.len()).map_err(|_| bad("image data too large".into()))?;
            out.extend_from_slice(&len.to_be_bytes());
            let mut crc = Crc::new();
            crc.update(kind);
            crc.update(body);
            out.extend_from_slice(kind);
            out.extend_from_slice(body);
            out.extend_from_slice(&crc.sum().to_be_bytes());
        }
        Ok(out)
    }

    /// Writes the PNG to `path` atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        let bytes = self.encode()?;
        let io_err = |p: &Path, source: std::io::Error| SimError::Io {
            path: p.to_path_buf(),
            source,
        };
        cptsim_models::atomic::write_atomically(
            path,
            |out| out.write_all(&bytes).map_err(|e| io_err(path, e)),
            io_err,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::ZlibDecoder;
    use std::io::Read;

    #[test]
    fn encodes_a_valid_png() {
        let mut img = Rgb::new(3, 2, [255, 255, 255]);
        img.put(1, 1, [10, 20, 30]);
        img.put(9, 9, [0, 0, 0]);
        let png = img.encode().unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes([png[16], png[17], png[18], png[19]]), 3);
        // The CRC of IHDR covers its type and body.
        let mut crc = Crc::new();
        crc.update(&png[12..29]);
        assert_eq!(&png[29..33], &crc.sum().to_be_bytes());
        // IDAT inflates to the filtered rows.
        let len = u32::from_be_bytes([png[33], png[34], png[35], png[36]]) as usize;
        assert_eq!(&png[37..41], b"IDAT");
        let mut raw = Vec::new();
        ZlibDecoder::new(&png[41..41 + len])
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(raw.len(), 2 * (1 + 9));
        assert_eq!(&raw[10..20], &[0, 255, 255, 255, 10, 20, 30, 255, 255, 255]);
        assert!(png.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]));
        assert!(Rgb::new(0, 2, [0; 3]).encode().is_err());
    }
}
