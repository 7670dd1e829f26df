//! Models whose weights are in external data files, as the dynamo exporter writes them.

use std::path::Path;

use onnx_protobuf::tensor_proto::DataLocation;
use onnx_protobuf::{Message, StringStringEntryProto, TensorProto};

use super::testutil::small_cnn;
use crate::onnx::{decode, import_file, import_proto};

fn entry(key: &str, value: &str) -> StringStringEntryProto {
    let mut e = StringStringEntryProto::new();
    e.key = key.into();
    e.value = value.into();
    e
}

/// Moves every float initializer's values into `data` (one file, after 16 bytes of padding),
/// pointing at them with `location`, `offset` and `length` as the exporter does.
fn externalize(t: &mut TensorProto, data: &mut Vec<u8>, location: &str) {
    let bytes: Vec<u8> = t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect();
    let offset = data.len();
    data.extend_from_slice(&bytes);
    t.float_data.clear();
    t.data_location = DataLocation::EXTERNAL.into();
    t.external_data = vec![
        entry("location", location),
        entry("offset", &offset.to_string()),
        entry("length", &bytes.len().to_string()),
    ];
}

/// `small_cnn` written to `dir/model.onnx` with its weights in `dir/model.onnx.data`, after
/// `edit` has changed the tensors' external entries.
fn write_external(dir: &Path, edit: impl Fn(&mut TensorProto)) -> std::path::PathBuf {
    let mut m = small_cnn().model;
    let mut data = vec![0u8; 16];
    for t in &mut m.graph.mut_or_insert_default().initializer {
        externalize(t, &mut data, "model.onnx.data");
        edit(t);
    }
    std::fs::write(dir.join("model.onnx.data"), data).unwrap();
    let path = dir.join("model.onnx");
    std::fs::write(&path, m.write_to_bytes().unwrap()).unwrap();
    path
}

fn set(t: &mut TensorProto, key: &str, value: &str) {
    t.external_data.retain(|e| e.key != key);
    t.external_data.push(entry(key, value));
}

#[test]
fn weights_in_an_external_file_import_as_if_they_were_inside() {
    let dir = tempfile::tempdir().unwrap();
    let inside = import_proto(&small_cnn().model, "inline", 2).unwrap();
    let path = write_external(dir.path(), |_| {});
    let mut outside = import_file(&path, 2).unwrap();
    assert_eq!(outside.source, path.display().to_string());
    (outside.name, outside.source) = (inside.name.clone(), inside.source.clone());
    assert_eq!(outside, inside);
    // Without `length` the tensor runs to the end of the file: only the last one may omit it.
    let path = write_external(dir.path(), |t| {
        if t.name == "fc.b" {
            t.external_data.retain(|e| e.key != "length");
        }
    });
    assert!(import_file(&path, 2).is_ok());
}

#[test]
fn external_data_that_does_not_hold_together_is_an_error_naming_tensor_and_file() {
    let dir = tempfile::tempdir().unwrap();
    type Edit<'a> = &'a dyn Fn(&mut TensorProto);
    let cases: [(&str, Edit, &str); 6] = [
        (
            "escape",
            &|t| set(t, "location", "../model.onnx.data"),
            "not a path inside the model's directory",
        ),
        (
            "absolute",
            &|t| set(t, "location", "/etc/passwd"),
            "not a path inside the model's directory",
        ),
        ("missing", &|t| set(t, "location", "gone.data"), "gone.data"),
        (
            "length",
            &|t| set(t, "length", "4"),
            "but its dims and type need",
        ),
        (
            "past the end",
            &|t| set(t, "offset", "100000"),
            "past the end of 'model.onnx.data'",
        ),
        (
            "not a number",
            &|t| set(t, "offset", "-3"),
            "`offset` '-3' is not a byte count",
        ),
    ];
    for (case, edit, want) in cases {
        let path = write_external(dir.path(), |t| {
            if t.name == "w1" {
                edit(t)
            }
        });
        let err = import_file(&path, 2).unwrap_err().to_string();
        assert!(
            err.contains("model.onnx") && err.contains("initializer 'w1'") && err.contains(want),
            "{case}: {err}"
        );
    }
}

#[test]
fn external_data_without_the_file_it_came_from_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_external(dir.path(), |_| {});
    let bytes = std::fs::read(&path).unwrap();
    let proto = decode(&bytes, "bytes").unwrap();
    let err = import_proto(&proto, "bytes", 2).unwrap_err().to_string();
    assert!(
        err.contains("initializer 'w1'") && err.contains("external data file"),
        "{err}"
    );
}
