//! Checkpoints that resume a run exactly: one file holding a JSON header (progress, the policy's
//! name and state, quantizer states, tensor sizes, and the caller's own settings) followed by every
//! parameter, optimiser velocity and batch-norm statistic as little-endian f32. Written atomically.
//!
//! Format version 2 stores the policy as `{name, state}`; version 1 (before the `Policy` trait)
//! kept a tagged schedule/PFQ/PRT/LDP state plus a separate DFQ state and is converted on load.

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::trainer::{RunState, Trainer};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::Tensor;
use cptsim_nn::quant::LayerQuant;

const MAGIC: &[u8; 8] = b"CPTSIMCK";
const VERSION: u32 = 2;

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

/// Rewrites a version-1 header into version 2: the tagged policy state (`kind`: schedule, pfq,
/// prt or ldp) and the separate `dfq` state become one `{name, state}`.
fn upgrade_v1(header: &mut serde_json::Value) -> std::result::Result<(), String> {
    let obj = header
        .as_object_mut()
        .ok_or("the header is not a JSON object")?;
    let dfq = obj.remove("dfq").unwrap_or(serde_json::Value::Null);
    let mut policy = obj.remove("policy").ok_or("no policy state")?;
    let saved = if dfq.is_null() {
        let fields = policy
            .as_object_mut()
            .ok_or("policy state is not an object")?;
        let kind = fields
            .remove("kind")
            .and_then(|k| k.as_str().map(str::to_owned))
            .ok_or("policy state without a kind")?;
        let state = match kind.as_str() {
            "schedule" => serde_json::Value::Null,
            "pfq" | "prt" | "ldp" => serde_json::Value::Object(fields.clone()),
            other => return Err(format!("unknown policy kind `{other}`")),
        };
        SavedPolicy { name: kind, state }
    } else {
        // DFQ ran beside a (stateless) schedule; FracTrain is DFQ with an indicator.
        let fractrain = dfq.get("pfq").is_some_and(|p| !p.is_null());
        let name = if fractrain { "fractrain" } else { "dfq" };
        SavedPolicy {
            name: name.into(),
            state: dfq,
        }
    };
    let saved = serde_json::to_value(saved).map_err(|e| e.to_string())?;
    obj.insert("policy".into(), saved);
    obj.insert("version".into(), VERSION.into());
    Ok(())
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> SimError {
    SimError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    }
}

fn put(out: &mut impl Write, values: &[f32]) -> std::io::Result<()> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    out.write_all(&bytes)
}

fn tensor_values(t: &Tensor) -> Vec<f32> {
    t.iter().copied().collect()
}

/// The shape of every parameter, in order.
fn param_shapes(tr: &mut Trainer<'_>) -> Vec<Vec<usize>> {
    tr.params_mut()
        .iter()
        .map(|p| p.value.shape().to_vec())
        .collect()
}

/// Writes the trainer's complete state with the caller's `settings` to `path` (atomically).
pub fn save(path: &Path, tr: &mut Trainer<'_>, settings: serde_json::Value) -> Result<()> {
    let quant = tr
        .net
        .graph
        .quant_layers_mut()
        .into_iter()
        .map(|(_, q)| q.clone())
        .collect();
    let params: Vec<Vec<f32>> = tr
        .params_mut()
        .iter()
        .map(|p| tensor_values(&p.value))
        .collect();
    let shapes = param_shapes(tr);
    let buffers: Vec<Vec<f32>> = tr.net.graph.buffer_values();
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
        buffers: buffers.iter().map(Vec::len).collect(),
    };
    let json = serde_json::to_vec(&header).map_err(|e| io_err(path, e))?;
    let write = |out: &mut std::io::BufWriter<std::fs::File>| {
        let werr = |e: std::io::Error| SimError::output(path, e);
        out.write_all(MAGIC).map_err(werr)?;
        out.write_all(&(json.len() as u64).to_le_bytes())
            .map_err(werr)?;
        out.write_all(&json).map_err(werr)?;
        for p in &params {
            put(out, p).map_err(werr)?;
        }
        for v in &tr.opt.velocity {
            put(out, &tensor_values(v)).map_err(werr)?;
        }
        for b in &buffers {
            put(out, b).map_err(werr)?;
        }
        Ok(())
    };
    cptsim_models::atomic::write_atomically(path, write, SimError::output)
}

/// A loaded checkpoint.
pub struct Checkpoint {
    /// The JSON part.
    pub header: Header,
    values: Vec<f32>,
    path: std::path::PathBuf,
}

fn bad(path: &Path, offset: u64, msg: impl Into<String>) -> SimError {
    SimError::Data {
        path: path.to_path_buf(),
        offset,
        msg: msg.into(),
    }
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

/// Reads a checkpoint file.
pub fn load(path: &Path) -> Result<Checkpoint> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| SimError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad(path, 0, "not a cptsim checkpoint (bad magic)"));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[8..16]);
    let len = usize::try_from(u64::from_le_bytes(len)).unwrap_or(usize::MAX);
    let json = bytes
        .get(16..16usize.saturating_add(len))
        .ok_or_else(|| bad(path, 16, format!("header of {len} bytes is truncated")))?;
    let mut value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| bad(path, 16, format!("header: {e}")))?;
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    match version {
        Some(1) => upgrade_v1(&mut value).map_err(|e| {
            bad(
                path,
                16,
                format!("written by an older cptsim (format 1) and not convertible: {e}"),
            )
        })?,
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) if v > u64::from(VERSION) => {
            return Err(bad(
                path,
                16,
                format!("written by a newer cptsim (format {v}; this build reads up to {VERSION})"),
            ))
        }
        v => {
            return Err(bad(
                path,
                16,
                format!("unknown format version {v:?} (this build reads 1..={VERSION})"),
            ))
        }
    }
    let header: Header =
        serde_json::from_value(value).map_err(|e| bad(path, 16, format!("header: {e}")))?;
    let body = &bytes[16 + len..];
    if body.len() % 4 != 0 {
        return Err(bad(
            path,
            bytes.len() as u64,
            "tensor data is not a whole number of f32",
        ));
    }
    let values = body
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(Checkpoint {
        header,
        values,
        path: path.to_path_buf(),
    })
}

impl Checkpoint {
    /// Restores this state into a trainer freshly built from the same settings.
    pub fn restore(self, tr: &mut Trainer<'_>) -> Result<()> {
        let h = self.header;
        let path = self.path;
        let mismatch = |what: String| bad(&path, 16, format!("does not fit the network: {what}"));
        let shapes = param_shapes(tr);
        if shapes != h.params {
            return Err(mismatch(format!(
                "{} parameter tensors in the checkpoint, {} in the network (or shapes differ)",
                h.params.len(),
                shapes.len()
            )));
        }
        let buf_lens: Vec<usize> = tr.net.graph.buffers_mut().iter().map(|b| b.len()).collect();
        if buf_lens != h.buffers {
            return Err(mismatch("batch-norm statistics differ in size".into()));
        }
        let sizes: Vec<usize> = shapes.iter().map(|s| s.iter().product()).collect();
        let total: usize = sizes.iter().sum::<usize>() * if h.velocity { 2 } else { 1 }
            + buf_lens.iter().sum::<usize>();
        if total != self.values.len() {
            return Err(bad(
                &path,
                0,
                format!(
                    "{} tensor values stored, {total} expected (truncated file?)",
                    self.values.len()
                ),
            ));
        }
        let mut rest = self.values.as_slice();
        let mut take = |n: usize| {
            let (a, b) = rest.split_at(n);
            rest = b;
            a.to_vec()
        };
        let tensor = |shape: &[usize], v: Vec<f32>| {
            Tensor::from_shape_vec(shape.to_vec(), v).map_err(|e| mismatch(e.to_string()))
        };
        for (p, shape) in tr.params_mut().into_iter().zip(&shapes) {
            p.value = tensor(shape, take(shape.iter().product()))?;
        }
        tr.opt.velocity = if h.velocity {
            shapes
                .iter()
                .map(|s| tensor(s, take(s.iter().product())))
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        for b in tr.net.graph.buffers_mut() {
            let n = b.len();
            *b = take(n);
        }
        let mut layers = tr.net.graph.quant_layers_mut();
        if layers.len() != h.quant.len() {
            return Err(mismatch(format!(
                "{} quantizer states for {} layers",
                h.quant.len(),
                layers.len()
            )));
        }
        for ((_, q), saved) in layers.iter_mut().zip(h.quant) {
            **q = saved;
        }
        if h.policy.name != tr.policy.name() {
            return Err(mismatch(format!(
                "the checkpoint's policy is `{}`, the run's `{}`",
                h.policy.name,
                tr.policy.name()
            )));
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
        let e = load(&path)
            .unwrap()
            .restore(&mut trainer(&data))
            .unwrap_err()
            .to_string();
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
}
