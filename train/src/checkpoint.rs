//! Checkpoints that resume a run exactly: one file holding a JSON header (progress, the policy's
//! name and state, quantizer states, tensor sizes, and the caller's own settings) followed by every
//! parameter, optimiser velocity and batch-norm statistic as little-endian f32, sealed by a CRC-32
//! trailer ([`frame`]). Written atomically.
//!
//! Loading checks the trailer first, then that the header holds together ([`checks`]: the trace
//! covers exactly the iterations done, the evaluations lie within them, the tensor sizes add up
//! to the data, every value is finite), and restoring that it fits the run rebuilt from the
//! settings (iteration within the run, tensor shapes, quantizer count, policy, traced layers).
//! Formats 1 and 2 had no checksum and are refused with a message saying so.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::trainer::{RunState, Trainer};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::Tensor;
use cptsim_nn::quant::LayerQuant;

mod checks;
mod frame;

pub use frame::trailer;
use frame::{bad, MAGIC};

const VERSION: u32 = 3;

/// The JSON part of a checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// Format version.
    pub version: u32,
    /// Whatever the caller needs to rebuild the run (the command-line settings).
    pub settings: serde_json::Value,
    /// Progress.
    pub state: RunState,
    /// The precision policy.
    pub policy: SavedPolicy,
    /// Quantizer state of each quantizable layer (EMA ranges, noise counters).
    pub quant: Vec<LayerQuant>,
    /// Shape of each parameter, in [`Trainer::params_mut`] order (network, then DFQ gate).
    pub params: Vec<Vec<usize>>,
    /// Whether optimiser velocities follow the parameters.
    pub velocity: bool,
    /// Length of each buffer (batch-norm statistics).
    pub buffers: Vec<usize>,
}

/// A policy in a checkpoint: its [`Policy::name`] and [`Policy::state`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedPolicy {
    /// The policy's name.
    pub name: String,
    /// Its state.
    pub state: serde_json::Value,
}

/// Bytes of little-endian f32 converted and written at a time.
const CHUNK: usize = 64 * 1024;

/// Writes `values` as little-endian f32, a chunk at a time (no copy of the whole tensor).
fn put<W: std::io::Write>(
    out: &mut frame::Sealer<W>,
    values: impl IntoIterator<Item = f32>,
) -> std::io::Result<()> {
    let mut chunk = Vec::with_capacity(CHUNK);
    for v in values {
        chunk.extend_from_slice(&v.to_le_bytes());
        if chunk.len() >= CHUNK {
            out.write_all(&chunk)?;
            chunk.clear();
        }
    }
    out.write_all(&chunk)
}

/// The shape of every parameter, in order.
fn param_shapes(tr: &mut Trainer<'_>) -> Vec<Vec<usize>> {
    tr.params_mut()
        .iter()
        .map(|p| p.value.shape().to_vec())
        .collect()
}

/// Writes the trainer's complete state with the caller's `settings` to `path` (atomically),
/// streaming the tensors to the file rather than building the file in memory first.
pub fn save(path: &Path, tr: &mut Trainer<'_>, settings: serde_json::Value) -> Result<()> {
    let json = header_json(tr, settings)?;
    let write = |out: &mut std::io::BufWriter<std::fs::File>| {
        encode_to(tr, &json, out).map_err(|e| SimError::output(path, e))
    };
    cptsim_models::atomic::write_atomically(path, write, SimError::output)
}

/// Writes checkpoint bytes ([`encode`]) to `path` (atomically).
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let write = |out: &mut std::io::BufWriter<std::fs::File>| {
        out.write_all(bytes)
            .map_err(|e: std::io::Error| SimError::output(path, e))
    };
    cptsim_models::atomic::write_atomically(path, write, SimError::output)
}

/// The trainer's complete state with the caller's `settings`, as the bytes of a checkpoint file
/// (kept in memory to go back to, or written with [`write`]), sealed by its trailer.
pub fn encode(tr: &mut Trainer<'_>, settings: serde_json::Value) -> Result<Vec<u8>> {
    let json = header_json(tr, settings)?;
    let mut bytes = Vec::new();
    encode_to(tr, &json, &mut bytes).map_err(|e| SimError::invalid("checkpoint", e.to_string()))?;
    Ok(bytes)
}

/// The JSON header describing the trainer's state and the caller's `settings`.
fn header_json(tr: &mut Trainer<'_>, settings: serde_json::Value) -> Result<Vec<u8>> {
    let quant = tr
        .net
        .graph
        .quant_layers_mut()
        .into_iter()
        .map(|(_, q)| q.clone())
        .collect();
    let shapes = param_shapes(tr);
    let buffers = tr.net.graph.buffers_mut().iter().map(|b| b.len()).collect();
    let header = Header {
        version: VERSION,
        settings,
        state: tr.state.clone(),
        policy: SavedPolicy {
            name: tr.policy.name().into(),
            state: tr.policy.state()?,
        },
        quant,
        params: shapes,
        velocity: !tr.opt.velocity.is_empty(),
        buffers,
    };
    serde_json::to_vec(&header).map_err(|e| SimError::invalid("checkpoint header", e.to_string()))
}

/// Writes the frame (magic, header, every tensor, trailer) to `out`.
fn encode_to<W: std::io::Write>(tr: &mut Trainer<'_>, json: &[u8], out: W) -> std::io::Result<()> {
    let mut sealer = frame::Sealer::new(out);
    let out = &mut sealer;
    out.write_all(MAGIC)?;
    out.write_all(&(json.len() as u64).to_le_bytes())?;
    out.write_all(json)?;
    for p in tr.params_mut() {
        put(out, p.value.iter().copied())?;
    }
    for v in &tr.opt.velocity {
        put(out, v.iter().copied())?;
    }
    for b in tr.net.graph.buffers_mut() {
        put(out, b.iter().copied())?;
    }
    // Last: bytes cut short have no valid trailer.
    sealer.finish()
}

/// A loaded checkpoint.
pub struct Checkpoint {
    /// The JSON part.
    pub header: Header,
    values: Vec<f32>,
    path: std::path::PathBuf,
}

/// The iteration the checkpoint at `path` was written at, from its header alone (progress
/// reports: `sweep status`); the checkpoint is not checked further.
pub fn iteration(path: &Path) -> Result<u64> {
    let io = |source| SimError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut head = [0u8; 16];
    f.read_exact(&mut head)
        .map_err(|_| bad(path, 0, "not a cptsim checkpoint (too short)"))?;
    if &head[..8] != MAGIC {
        return Err(bad(path, 0, "not a cptsim checkpoint (bad magic)"));
    }
    let len = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
    let size = f.metadata().map_err(io)?.len();
    if len > size.saturating_sub(16) {
        return Err(bad(path, 16, format!("header of {len} bytes is truncated")));
    }
    let mut json = Vec::new();
    f.take(len).read_to_end(&mut json).map_err(io)?;
    // Only `state.iteration` is kept: the rest of the header (the trace so far) is skipped.
    #[derive(Deserialize)]
    struct Head {
        state: Progress,
    }
    #[derive(Deserialize)]
    struct Progress {
        iteration: u64,
    }
    serde_json::from_slice::<Head>(&json)
        .map(|h| h.state.iteration)
        .map_err(|e| bad(path, 16, format!("header: {e}")))
}

/// Reads and checks a checkpoint file (see the module docs).
pub fn load(path: &Path) -> Result<Checkpoint> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| SimError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    parse(path, &bytes)
}

/// Checks and decodes the bytes of a checkpoint file (`path` names it in messages).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Checkpoint> {
    let (json, body) = frame::open(path, bytes)?;
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| bad(path, 16, format!("header: {e}")))?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) if v > u64::from(VERSION) => {
            return Err(bad(
                path,
                16,
                format!("written by a newer cptsim (format {v}; this build reads {VERSION})"),
            ))
        }
        v => {
            return Err(bad(
                path,
                16,
                format!("format version {v:?}: this build reads format {VERSION}"),
            ))
        }
    }
    let header: Header =
        serde_json::from_value(value).map_err(|e| bad(path, 16, format!("header: {e}")))?;
    let data_at = 16 + json.len() as u64;
    if body.len() % 4 != 0 {
        return Err(bad(
            path,
            data_at,
            "tensor data is not a whole number of f32",
        ));
    }
    let values: Vec<f32> = body
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    checks::header(&header, values.len()).map_err(|e| bad(path, 16, e))?;
    checks::finite(&header, &values).map_err(|(i, e)| bad(path, data_at + 4 * i as u64, e))?;
    Ok(Checkpoint {
        header,
        values,
        path: path.to_path_buf(),
    })
}

impl Checkpoint {
    /// Restores this state into a trainer freshly built from the same settings, once every check
    /// of it against the trainer has passed.
    pub fn restore(self, tr: &mut Trainer<'_>) -> Result<()> {
        let h = self.header;
        let path = self.path;
        let mismatch = |what: String| bad(&path, 16, format!("does not fit the run: {what}"));
        let shapes = param_shapes(tr);
        let buf_lens: Vec<usize> = tr.net.graph.buffers_mut().iter().map(|b| b.len()).collect();
        let layers: Vec<u32> = tr.net.slots.iter().map(|s| s.layer).collect();
        checks::fits(
            &h,
            &checks::Run {
                iterations: tr.config.iterations,
                shapes: &shapes,
                buffers: &buf_lens,
                quant_layers: tr.net.graph.quant_layers_mut().len(),
                policy: tr.policy.name(),
                layers: &layers,
            },
        )
        .map_err(mismatch)?;
        let mut rest = self.values.as_slice();
        let mut take = |n: usize| {
            let (a, b) = rest.split_at(n.min(rest.len()));
            rest = b;
            a.to_vec()
        };
        let tensor = |shape: &[usize], v: Vec<f32>| {
            Tensor::from_shape_vec(shape.to_vec(), v).map_err(|e| mismatch(e.to_string()))
        };
        let params = shapes
            .iter()
            .map(|s| tensor(s, take(s.iter().product())))
            .collect::<Result<Vec<_>>>()?;
        let velocity = if h.velocity {
            shapes
                .iter()
                .map(|s| tensor(s, take(s.iter().product())))
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        let buffers: Vec<Vec<f32>> = buf_lens.iter().map(|&n| take(n)).collect();
        for (p, v) in tr.params_mut().into_iter().zip(params) {
            p.value = v;
        }
        tr.opt.velocity = velocity;
        for (b, v) in tr.net.graph.buffers_mut().into_iter().zip(buffers) {
            *b = v;
        }
        for ((_, q), saved) in tr.net.graph.quant_layers_mut().iter_mut().zip(h.quant) {
            **q = saved;
        }
        tr.policy.restore(h.policy.state)?;
        tr.seek_data(h.state.iteration);
        tr.state = h.state;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::trainer::tests::{config, small_data, small_net};
    use super::*;
    use crate::SchedulePolicy;
    use cptsim_traces::schedule::ScheduleArgs;

    fn trainer<'a>(data: &'a super::super::trainer::TrainData) -> Trainer<'a> {
        let s = ScheduleArgs::new("cosine", 30).cycles(3).build().unwrap();
        Trainer::new(small_net(7), data, config(30), Box::new(SchedulePolicy(s))).unwrap()
    }

    #[test]
    fn header_floats_come_back_bit_for_bit() {
        // The header holds policy state as JSON (DFQ's per-iteration confidence, LDP's bits):
        // serde_json's default parser can be one unit in the last place off, which made a resumed
        // DFQ run differ from the uninterrupted one (0.23604735338853466 came back as …464).
        let mut x = 0.123_456_789_f64;
        let mut values = vec![0.236_047_353_388_534_66, 1e-300, f64::MAX, 5e-324];
        for _ in 0..2000 {
            x = (x * 3.987_654_321 + 0.1).fract();
            values.push(x);
            values.push(x * 1e-7);
        }
        let json = serde_json::to_vec(&serde_json::json!({ "v": values })).unwrap();
        let back: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let back: Vec<f64> = serde_json::from_value(back["v"].clone()).unwrap();
        for (a, b) in values.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits(), "{a} came back as {b}");
        }
    }

    #[test]
    fn resume_equals_uninterrupted_run() {
        let data = small_data();
        let mut full = trainer(&data);
        while !full.done() {
            full.step().unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.bin");
        let mut first = trainer(&data);
        for _ in 0..13 {
            first.step().unwrap();
        }
        save(&path, &mut first, serde_json::json!({"k": 1})).unwrap();
        assert_eq!(iteration(&path).unwrap(), 13);
        let ck = load(&path).unwrap();
        assert_eq!(ck.header.settings["k"], 1);
        let mut second = trainer(&data);
        ck.restore(&mut second).unwrap();
        while !second.done() {
            second.step().unwrap();
        }
        assert_eq!(second.state, full.state);
        assert_eq!(second.param_values(), full.param_values());
    }

    #[test]
    fn truncated_or_foreign_files_are_rejected() {
        let data = small_data();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.bin");
        let mut tr = trainer(&data);
        tr.step().unwrap();
        save(&path, &mut tr, serde_json::Value::Null).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
        let e = load(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("ck.bin") && e.contains("truncated"), "{e}");
        // The header alone still reads; cut inside the header, it does not.
        assert_eq!(iteration(&path).unwrap(), 1);
        std::fs::write(&path, &bytes[..40]).unwrap();
        let e = iteration(&path).unwrap_err().to_string();
        assert!(e.contains("ck.bin") && e.contains("truncated"), "{e}");
        std::fs::write(&path, b"hello world, not a checkpoint").unwrap();
        let e = load(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("bad magic"), "{e}");
        let e = iteration(&path).unwrap_err().to_string();
        assert!(e.contains("bad magic"), "{e}");
    }

    /// `bytes` with the first `from` replaced by `to` (same length).
    fn edit(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let at = bytes
            .windows(from.len())
            .position(|w| w == from.as_bytes())
            .unwrap_or_else(|| panic!("no {from}"));
        let mut b = bytes.to_vec();
        b[at..at + to.len()].copy_from_slice(to.as_bytes());
        b
    }

    /// `bytes` with its trailer recomputed (what a careful forger, or a bug, would write).
    fn resealed(bytes: &[u8]) -> Vec<u8> {
        let content = &bytes[..bytes.len() - 12];
        let mut b = content.to_vec();
        b.extend_from_slice(&trailer(content));
        b
    }

    fn load_err(path: &Path, bytes: &[u8]) -> String {
        match parse(path, bytes) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    fn saved_at(data: &super::super::trainer::TrainData, steps: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.bin");
        let mut tr = trainer(data);
        for _ in 0..steps {
            tr.step().unwrap();
        }
        save(
            &path,
            &mut tr,
            serde_json::json!({"plan": {"iterations": 30}}),
        )
        .unwrap();
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn any_change_after_writing_fails_the_checksum() {
        let data = small_data();
        let good = saved_at(&data, 13);
        let p = Path::new("runs/a/checkpoint.bin");
        assert!(parse(p, &good).is_ok());
        let changed = [
            edit(&good, "\"iteration\":13", "\"iteration\":19"),
            edit(&good, "\"iterations\":30", "\"iterations\":32"),
            edit(&good, "\"a\":3", "\"a\":4"),
        ];
        for bytes in changed.iter().chain([&{
            // one bit of a stored weight
            let mut b = good.clone();
            let n = b.len();
            b[n - 100] ^= 0x10;
            b
        }]) {
            let e = load_err(p, bytes);
            assert!(
                e.contains("runs/a/checkpoint.bin") && e.contains("checksum mismatch"),
                "{e}"
            );
            assert!(!e.contains("--lr"), "{e}");
        }
    }

    #[test]
    fn a_resealed_header_that_does_not_hold_together_is_refused() {
        let data = small_data();
        let good = saved_at(&data, 13);
        let p = Path::new("ck.bin");
        let e = load_err(
            p,
            &resealed(&edit(&good, "\"iteration\":13", "\"iteration\":19")),
        );
        assert!(e.contains("covers 13 iterations, the run did 19"), "{e}");
        let e = load_err(p, &resealed(&edit(&good, "\"end\":13", "\"end\":12")));
        assert!(e.contains("covers 12 iterations, the run did 13"), "{e}");
        // a NaN weight
        let mut nan = good.clone();
        let n = nan.len();
        nan[n - 16..n - 12].copy_from_slice(&f32::NAN.to_le_bytes());
        let e = load_err(p, &resealed(&nan));
        assert!(e.contains("is NaN"), "{e}");
        // tensor sizes that overflow or do not match the data
        let e = load_err(p, &resealed(&edit(&good, "[[6,3,3,1]", "[[6,3,3,9]")));
        assert!(e.contains("values, the file stores"), "{e}");
    }

    #[test]
    fn a_checkpoint_past_the_end_of_the_run_or_of_another_network_is_refused() {
        let data = small_data();
        let full = saved_at(&data, 30);
        let ck = parse(Path::new("ck.bin"), &full).unwrap();
        let s = ScheduleArgs::new("cosine", 20).cycles(3).build().unwrap();
        let mut shorter =
            Trainer::new(small_net(7), &data, config(20), Box::new(SchedulePolicy(s))).unwrap();
        let e = ck.restore(&mut shorter).unwrap_err().to_string();
        assert!(
            e.contains("ck.bin") && e.contains("iteration 30 of a run of 20"),
            "{e}"
        );
        let ck = parse(Path::new("ck.bin"), &full).unwrap();
        let mut other = Trainer::new(
            super::super::trainer::tests::small_net_scoped(7, true),
            &data,
            config(30),
            Box::new(SchedulePolicy(
                ScheduleArgs::new("cosine", 30).cycles(3).build().unwrap(),
            )),
        )
        .unwrap();
        // Same shapes, the classifier quantized too: it fits.
        assert!(ck.restore(&mut other).is_ok());
    }

    #[test]
    fn checkpoints_without_a_checksum_are_refused_naming_the_file() {
        let data = small_data();
        let good = saved_at(&data, 3);
        let unsealed = edit(&good[..good.len() - 12], "\"version\":3", "\"version\":2");
        let e = load_err(Path::new("old/checkpoint.bin"), &unsealed);
        assert!(
            e.contains("old/checkpoint.bin")
                && e.contains("older cptsim")
                && e.contains("no checksum"),
            "{e}"
        );
    }
}
