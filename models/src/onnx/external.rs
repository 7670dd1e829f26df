//! Tensors whose bytes live outside the model file (ONNX external data, which PyTorch's dynamo
//! exporter writes by default and every exporter uses past protobuf's 2 GiB): each is read from
//! the file its `location` names, relative to the model's directory, into `raw_data`.
//!
//! Only files inside the model's directory are read (no absolute path, no `..`), and a tensor's
//! byte count is checked against its dims and data type before anything is allocated.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use onnx_protobuf::tensor_proto::DataLocation;
use onnx_protobuf::{ModelProto, TensorProto};

use super::tensor::{self, is_external};
use crate::error::ModelError;

/// Loads every external initializer and `Constant` value of `proto`'s main graph, read from
/// files beside `model` (the model file's path). Errors name the model file, the tensor and the
/// data file.
pub fn load(proto: &mut ModelProto, model: &Path) -> Result<(), ModelError> {
    let file = model.display().to_string();
    let dir = model.parent().unwrap_or(Path::new("")).to_path_buf();
    let Some(g) = proto.graph.as_mut() else {
        return Ok(());
    };
    let mut files = DataFiles {
        dir,
        open: HashMap::new(),
    };
    for init in g.initializer.iter_mut().filter(|t| is_external(t)) {
        let what = format!("initializer '{}'", init.name);
        files
            .fill(init)
            .map_err(|m| ModelError::graph(&file, format!("{what}: {m}")))?;
    }
    for node in &mut g.node {
        for attr in &mut node.attribute {
            if let Some(t) = attr.t.as_mut().filter(|t| is_external(t)) {
                let what = format!("node '{}' attribute '{}'", node.name, attr.name);
                files
                    .fill(t)
                    .map_err(|m| ModelError::graph(&file, format!("{what}: {m}")))?;
            }
        }
    }
    Ok(())
}

/// The data files read so far, open, with their sizes.
struct DataFiles {
    dir: PathBuf,
    open: HashMap<String, (File, u64)>,
}

impl DataFiles {
    /// Reads `t`'s bytes into its `raw_data` and marks it as stored inside.
    fn fill(&mut self, t: &mut TensorProto) -> Result<(), String> {
        let key = |k: &str| {
            t.external_data
                .iter()
                .find(|e| e.key == k)
                .map(|e| e.value.clone())
        };
        let location = key("location").ok_or("external data without a `location`")?;
        let number = |k: &str| -> Result<Option<u64>, String> {
            key(k)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("external data `{k}` '{v}' is not a byte count"))
                })
                .transpose()
        };
        let (offset, length) = (number("offset")?.unwrap_or(0), number("length")?);
        let need = tensor::byte_len(t)?;
        let (f, size) = self.file(&location)?;
        let length = length.unwrap_or(size.saturating_sub(offset));
        if length != need as u64 {
            return Err(format!(
                "external data in '{location}' is {length} bytes, but its dims and type need {need}"
            ));
        }
        if offset.checked_add(length).is_none_or(|end| end > size) {
            return Err(format!(
                "external data at bytes {offset}..{} lies past the end of '{location}' ({size} bytes)",
                offset.saturating_add(length)
            ));
        }
        let mut raw = vec![0u8; need];
        f.seek(SeekFrom::Start(offset))
            .and_then(|_| f.read_exact(&mut raw))
            .map_err(|e| format!("reading external data from '{location}': {e}"))?;
        t.raw_data = raw;
        t.external_data.clear();
        t.data_location = DataLocation::DEFAULT.into();
        Ok(())
    }

    /// The open data file `location` names and its size; it must lie inside the model's
    /// directory.
    fn file(&mut self, location: &str) -> Result<(&mut File, u64), String> {
        let rel = Path::new(location);
        let inside = rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if location.is_empty() || !inside {
            return Err(format!(
                "external data location '{location}' is not a path inside the model's directory"
            ));
        }
        let path = self.dir.join(rel);
        let open = |e: std::io::Error| format!("external data file '{}': {e}", path.display());
        let (f, size) = match self.open.entry(location.to_string()) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let f = File::open(&path).map_err(open)?;
                let size = f.metadata().map_err(open)?.len();
                v.insert((f, size))
            }
        };
        Ok((f, *size))
    }
}
