//! The compact binary trace format, encoded with `prost`.
//!
//! Layout: the 8 magic bytes `CPTTRACE`; a length-delimited [`Header`] (format version, model
//! name, layer count and names, batch, iterations); one length-delimited [`Row`] per trace row;
//! an end marker (a zero length, which no row encodes to because `samples ≥ 1`); a
//! length-delimited [`Footer`] with the row count; end of file. A file cut anywhere is rejected.

use std::io::{BufReader, Read, Write};
use std::path::Path;

use cptsim_models::atomic::write_atomically;
use cptsim_models::ModelSummary;
use prost::Message;

use crate::coverage::Coverage;
use crate::error::TraceError;
use crate::meta::{check_for_writing, row_problem, TraceMeta};
use crate::{Bits, TraceRow};

/// First bytes of every binary trace.
pub const MAGIC: &[u8; 8] = b"CPTTRACE";
/// Format version written and understood.
pub const VERSION: u32 = 1;

/// Run metadata, the first message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    /// Format version ([`VERSION`]).
    #[prost(uint32, tag = "1")]
    pub version: u32,
    /// Model name.
    #[prost(string, tag = "2")]
    pub model: String,
    /// Number of conv / linear layers.
    #[prost(uint32, tag = "3")]
    pub layer_count: u32,
    /// Layer names in index order.
    #[prost(string, repeated, tag = "4")]
    pub layer_names: Vec<String>,
    /// Samples per iteration.
    #[prost(uint64, tag = "5")]
    pub batch: u64,
    /// Iterations of the run.
    #[prost(uint64, tag = "6")]
    pub iterations: u64,
}

/// One trace row; the span is stored as start and length.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Row {
    /// First iteration.
    #[prost(uint64, tag = "1")]
    pub iter_start: u64,
    /// Iterations in the span.
    #[prost(uint64, tag = "2")]
    pub iterations: u64,
    /// Layer index.
    #[prost(uint32, tag = "3")]
    pub layer: u32,
    /// Weight bits.
    #[prost(uint32, tag = "4")]
    pub b_w: u32,
    /// Activation bits.
    #[prost(uint32, tag = "5")]
    pub b_a: u32,
    /// Error bits.
    #[prost(uint32, tag = "6")]
    pub b_g: u32,
    /// Samples per iteration.
    #[prost(uint64, tag = "7")]
    pub samples: u64,
}

/// Closes the file: how many rows it holds.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Footer {
    /// Number of rows.
    #[prost(uint64, tag = "1")]
    pub rows: u64,
}

/// Writes `rows` with `meta` to `path` atomically; returns the number of rows.
pub fn write(
    path: &Path,
    meta: &TraceMeta,
    rows: impl IntoIterator<Item = TraceRow>,
) -> Result<u64, TraceError> {
    write_atomically(
        path,
        |out| {
            write_all(out, path, MAGIC)?;
            let header = Header {
                version: VERSION,
                model: meta.model.clone(),
                layer_count: u32::try_from(meta.layer_names.len()).unwrap_or(u32::MAX),
                layer_names: meta.layer_names.clone(),
                batch: meta.batch,
                iterations: meta.iterations,
            };
            let mut buf = Vec::with_capacity(64);
            header
                .encode_length_delimited(&mut buf)
                .map_err(|e| TraceError::io(path, std::io::Error::other(e)))?;
            write_all(out, path, &buf)?;
            let mut n = 0u64;
            for r in rows {
                check_for_writing(path, n, &r, meta)?;
                buf.clear();
                let msg = Row {
                    iter_start: r.iter_start,
                    iterations: r.iterations(),
                    layer: r.layer,
                    b_w: r.bits.w.into(),
                    b_a: r.bits.a.into(),
                    b_g: r.bits.g.into(),
                    samples: r.samples,
                };
                msg.encode_length_delimited(&mut buf)
                    .map_err(|e| TraceError::io(path, std::io::Error::other(e)))?;
                write_all(out, path, &buf)?;
                n += 1;
            }
            buf.clear();
            buf.push(0); // end marker
            Footer { rows: n }
                .encode_length_delimited(&mut buf)
                .map_err(|e| TraceError::io(path, std::io::Error::other(e)))?;
            write_all(out, path, &buf)?;
            Ok(n)
        },
        TraceError::io,
    )
}

/// Writes `bytes`, naming `path` in the error.
fn write_all(out: &mut impl Write, path: &Path, bytes: &[u8]) -> Result<(), TraceError> {
    out.write_all(bytes).map_err(|e| TraceError::io(path, e))
}

/// A byte reader that knows its offset, for error positions.
struct Cursor<'p, R> {
    inner: R,
    offset: u64,
    path: &'p Path,
}

impl<R: Read> Cursor<'_, R> {
    /// Reads exactly `buf.len()` bytes; `what` names the item for the truncation error.
    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), TraceError> {
        let at = self.offset;
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => TraceError::malformed(
                self.path,
                format!("byte {at}"),
                format!("file truncated inside {what}"),
            ),
            _ => TraceError::io(self.path, e),
        })?;
        self.offset += buf.len() as u64;
        Ok(())
    }

    /// Reads a base-128 varint length prefix.
    fn read_len(&mut self, what: &str) -> Result<usize, TraceError> {
        let at = self.offset;
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let mut byte = [0u8];
            self.read_exact(&mut byte, what)?;
            value |= u64::from(byte[0] & 0x7f) << shift;
            if byte[0] & 0x80 == 0 {
                return usize::try_from(value).map_err(|_| {
                    TraceError::malformed(
                        self.path,
                        format!("byte {at}"),
                        format!("length of {what} too large"),
                    )
                });
            }
        }
        Err(TraceError::malformed(
            self.path,
            format!("byte {at}"),
            format!("bad length prefix of {what}"),
        ))
    }

    /// Reads one length-delimited message body into `buf`; `None` at the end marker.
    fn read_message<'b>(
        &mut self,
        buf: &'b mut Vec<u8>,
        what: &str,
    ) -> Result<Option<&'b [u8]>, TraceError> {
        let len = self.read_len(what)?;
        if len == 0 {
            return Ok(None);
        }
        if len > 1 << 24 {
            let at = format!("byte {}", self.offset);
            return Err(TraceError::malformed(
                self.path,
                at,
                format!("{what} claims {len} bytes"),
            ));
        }
        // Read what is there rather than allocating the claimed length up front.
        buf.clear();
        let at = self.offset;
        let got = (&mut self.inner)
            .take(len as u64)
            .read_to_end(buf)
            .map_err(|e| TraceError::io(self.path, e))?;
        self.offset += got as u64;
        if got < len {
            return Err(TraceError::malformed(
                self.path,
                format!("byte {at}"),
                format!("file truncated inside {what}"),
            ));
        }
        Ok(Some(buf))
    }
}

/// Reads a binary trace of `model`, handing each checked row to `visit`; returns the header's
/// metadata.
pub fn read(
    path: &Path,
    model: &ModelSummary,
    visit: &mut dyn FnMut(&TraceRow) -> Result<(), String>,
) -> Result<TraceMeta, TraceError> {
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    read_from(BufReader::new(file), path, model, visit)
}

/// [`read`] from any byte source; `path` names it in errors.
pub fn read_from(
    source: impl Read,
    path: &Path,
    model: &ModelSummary,
    visit: &mut dyn FnMut(&TraceRow) -> Result<(), String>,
) -> Result<TraceMeta, TraceError> {
    let mut cur = Cursor {
        inner: source,
        offset: 0,
        path,
    };
    let mut magic = [0u8; 8];
    cur.read_exact(&mut magic, "the magic bytes")?;
    if &magic != MAGIC {
        return Err(TraceError::malformed(
            path,
            "byte 0",
            "not a cptsim binary trace (bad magic bytes)",
        ));
    }
    let mut buf = Vec::new();
    let header_at = cur.offset;
    let bytes = cur
        .read_message(&mut buf, "the header")?
        .unwrap_or_default();
    let header = Header::decode(bytes).map_err(|e| {
        TraceError::malformed(
            path,
            format!("byte {header_at}"),
            format!("bad header: {e}"),
        )
    })?;
    if header.version != VERSION {
        return Err(TraceError::malformed(
            path,
            "header",
            format!(
                "format version {} (this cptsim reads {VERSION})",
                header.version
            ),
        ));
    }
    if header.layer_count as usize != header.layer_names.len() {
        let m = format!(
            "layer count {} but {} layer names",
            header.layer_count,
            header.layer_names.len()
        );
        return Err(TraceError::malformed(path, "header", m));
    }
    let meta = TraceMeta {
        model: header.model,
        layer_names: header.layer_names,
        batch: header.batch,
        iterations: header.iterations,
    };
    if let Some(message) = meta.layer_mismatch(model) {
        return Err(TraceError::ModelMismatch {
            path: path.to_path_buf(),
            model: model.name.clone(),
            message,
        });
    }
    let mut coverage = Coverage::new(meta.layer_names.len());
    let mut n = 0u64;
    loop {
        let at = cur.offset;
        let position = || format!("byte {at} (row {n})");
        let what = format!("row {n}");
        let Some(bytes) = cur.read_message(&mut buf, &what)? else {
            break;
        };
        let msg = Row::decode(bytes)
            .map_err(|e| TraceError::malformed(path, position(), format!("bad row: {e}")))?;
        let row = to_row(&msg).map_err(|m| TraceError::malformed(path, position(), m))?;
        if let Some(problem) = row_problem(&row, meta.layer_names.len(), Some(&meta)) {
            return Err(TraceError::malformed(path, position(), problem));
        }
        coverage
            .add(&row)
            .map_err(|m| TraceError::malformed(path, position(), m))?;
        visit(&row).map_err(|message| TraceError::Rejected {
            path: path.to_path_buf(),
            position: position(),
            message,
        })?;
        n += 1;
    }
    let footer_at = cur.offset;
    let bytes = cur
        .read_message(&mut buf, "the footer")?
        .unwrap_or_default();
    let footer = Footer::decode(bytes).map_err(|e| {
        TraceError::malformed(
            path,
            format!("byte {footer_at}"),
            format!("bad footer: {e}"),
        )
    })?;
    if footer.rows != n {
        let m = format!("footer counts {} rows but the file holds {n}", footer.rows);
        return Err(TraceError::malformed(path, format!("byte {footer_at}"), m));
    }
    if let Some(problem) = coverage.problem(&meta.layer_names, meta.iterations) {
        return Err(TraceError::malformed(path, format!("row {n}"), problem));
    }
    let mut extra = [0u8; 1];
    if cur
        .inner
        .read(&mut extra)
        .map_err(|e| TraceError::io(path, e))?
        != 0
    {
        return Err(TraceError::malformed(
            path,
            format!("byte {}", cur.offset),
            "unexpected bytes after the footer",
        ));
    }
    Ok(meta)
}

fn to_row(msg: &Row) -> Result<TraceRow, String> {
    let bits = |v: u32| u8::try_from(v).map_err(|_| format!("bit-width {v} out of range 0..32"));
    let iter_end = msg
        .iter_start
        .checked_add(msg.iterations)
        .ok_or("span end overflows")?;
    Ok(TraceRow {
        iter_start: msg.iter_start,
        iter_end,
        layer: msg.layer,
        bits: Bits {
            w: bits(msg.b_w)?,
            a: bits(msg.b_a)?,
            g: bits(msg.b_g)?,
        },
        samples: msg.samples,
    })
}
