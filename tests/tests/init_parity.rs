//! One seed, one network: the ONNX file `zoo export NAME --seed S` writes holds, weight for
//! weight, the network `train --model zoo:NAME --seed S` starts from (the trainer re-initialises
//! a zoo model from the seed by the same rule, `cptsim_models::zoo::init`), for every zoo model;
//! and training that file with its own weights (`--init model`) is the same run.

use std::path::Path;

use cptsim_e2e::{run, stderr};
use cptsim_models::head::{load_graph_for, HeadFit};
use cptsim_models::{export, zoo};
use cptsim_nn::build::{build_network, BuildOptions, Init, Network};

/// A `checkpoint.bin` as the book's format page describes it: the magic `CPTSIMCK`, the JSON
/// header's length (`u64`, little-endian), the header, then the tensors as little-endian `f32`,
/// then the 12-byte checksum trailer (which covers the header too, so it is left out). Returns
/// the parameter shapes the header lists and the tensor bytes.
fn checkpoint(path: &Path) -> (Vec<Vec<usize>>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"CPTSIMCK", "{}: magic", path.display());
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_else(|e| panic!("{e}")));
    let end = 16 + usize::try_from(len).unwrap_or_else(|e| panic!("{e}"));
    let header: serde_json::Value =
        serde_json::from_slice(&bytes[16..end]).unwrap_or_else(|e| panic!("header: {e}"));
    assert_eq!(
        header["velocity"],
        false,
        "{}: no step was taken",
        path.display()
    );
    let shapes = serde_json::from_value(header["params"].clone())
        .unwrap_or_else(|e| panic!("{}: params: {e}", path.display()));
    let tensors_end = bytes.len().saturating_sub(12).max(end);
    (shapes, bytes[end..tensors_end].to_vec())
}

/// The index of the first parameter whose bytes differ between two checkpoints' tensor data
/// (`None` when the parameters agree; what follows them, the batch-norm statistics, is compared
/// whole).
fn first_differing(shapes: &[Vec<usize>], a: &[u8], b: &[u8]) -> Option<String> {
    let mut at = 0;
    for (i, shape) in shapes.iter().enumerate() {
        let n = 4 * shape.iter().product::<usize>();
        if a.get(at..at + n) != b.get(at..at + n) {
            return Some(format!("parameter {i} {shape:?}"));
        }
        at += n;
    }
    (a.get(at..) != b.get(at..)).then(|| "the batch-norm statistics".into())
}

/// `zoo export NAME --seed 11` and `train --model zoo:NAME --seed 11`, each model read back
/// through the product: the checkpoint `train --stop-at 0` writes before the first step holds
/// the starting network, once for the zoo model re-initialised from the seed and once for the
/// exported file with its own weights (`--init model`). The two must agree to the bit. The
/// ImageNet-sized models are left to the next test: `--data synthetic` holds 5 120 images, 3 GB
/// at 3×224×224.
#[test]
fn the_exported_file_of_a_seed_is_the_checkpoint_train_starts_from() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let mut checked = 0;
    for &name in zoo::names() {
        let input = zoo::input_shape(name).unwrap_or_else(|| panic!("{name}: input"));
        if input[1] > 32 {
            continue;
        }
        let classes = zoo::default_classes(name)
            .unwrap_or_else(|| panic!("{name}: classes"))
            .to_string();
        let file = d(&format!("{name}.onnx"));
        let out = run(&["zoo", "export", name, "--seed", "11", "-o", &file]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let start = |model: &str, extra: &[&str], sub: &str| {
            let mut args = vec![
                "train",
                "--model",
                model,
                "--data",
                "synthetic",
                "--classes",
                &classes,
                "--batch",
                "1",
                "--seed",
                "11",
                "--stop-at",
                "0",
                "--out",
            ];
            let o = d(sub);
            args.push(&o);
            args.extend_from_slice(extra);
            let out = run(&args);
            assert!(out.status.success(), "{name}: {}", stderr(&out));
            checkpoint(&Path::new(&o).join("checkpoint.bin"))
        };
        let (shapes, seeded) = start(&format!("zoo:{name}"), &[], &format!("{name}-zoo"));
        let (file_shapes, from_file) = start(&file, &["--init", "model"], &format!("{name}-file"));
        assert_eq!(shapes, file_shapes, "{name}: parameter shapes");
        if let Some(what) = first_differing(&shapes, &seeded, &from_file) {
            panic!("{name}: {what} differs between train's seed 11 and the exported file");
        }
        for sub in [format!("{name}-zoo"), format!("{name}-file")] {
            std::fs::remove_dir_all(d(&sub)).unwrap_or_else(|e| panic!("{e}"));
        }
        checked += 1;
    }
    assert_eq!(checked, 18, "zoo models checked through train's checkpoint");
}

/// Every parameter of `net` (conv and linear weights and biases, BN scales and shifts), in order.
fn params(net: &mut Network) -> Vec<(Vec<usize>, Vec<f32>)> {
    net.params_mut()
        .iter()
        .map(|p| (p.value.shape().to_vec(), p.value.iter().copied().collect()))
        .collect()
}

fn network(graph: &cptsim_models::Graph, init: Init) -> Network {
    let opts = BuildOptions {
        init,
        ..Default::default()
    };
    build_network(graph, &opts).unwrap_or_else(|e| panic!("{}: {e}", graph.source))
}

/// The same comparison for the ImageNet-sized zoo models, through the functions `train` builds
/// its network with: the exported file imported with its weights against `zoo:NAME`
/// re-initialised from the seed.
#[test]
fn the_exported_file_of_a_seed_is_the_network_train_starts_from_imagenet_sized() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let seed = 11;
    let mut checked = 0;
    for &name in zoo::names() {
        let input = zoo::input_shape(name).unwrap_or_else(|| panic!("{name}: input"));
        if input[1] <= 32 {
            continue;
        }
        let classes = zoo::default_classes(name).unwrap_or_else(|| panic!("{name}: classes"));
        // What `zoo export NAME --seed 11 -o FILE` writes.
        let file = dir.path().join(format!("{name}.onnx"));
        let proto = zoo::build(name, None, seed).unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = export::model_bytes(&proto).unwrap_or_else(|e| panic!("{name}: {e}"));
        drop(proto);
        std::fs::write(&file, bytes).unwrap_or_else(|e| panic!("{e}"));
        let path = file.to_string_lossy().into_owned();
        let exported = cptsim_models::load_graph(&path, 1).unwrap_or_else(|e| panic!("{e}"));
        let from_file = params(&mut network(&exported, Init::FromModel));
        drop(exported);
        std::fs::remove_file(&file).unwrap_or_else(|e| panic!("{e}"));
        // What `train --model zoo:NAME --seed 11` builds.
        let fit = HeadFit {
            classes,
            reinit: false,
            seed,
        };
        let (zoo_graph, _) = load_graph_for(&format!("zoo:{name}"), 1, fit)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let seeded = params(&mut network(&zoo_graph, Init::Seeded(seed)));
        assert_eq!(from_file.len(), seeded.len(), "{name}: parameter count");
        for (i, (f, s)) in from_file.iter().zip(&seeded).enumerate() {
            assert_eq!(f.0, s.0, "{name}: shape of parameter {i}");
            if let Some(j) =
                f.1.iter()
                    .zip(&s.1)
                    .position(|(a, b)| a.to_bits() != b.to_bits())
            {
                panic!(
                    "{name}: parameter {i} {:?} differs at {j}: file {} vs train's seed {}",
                    f.0, f.1[j], s.1[j]
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 5, "ImageNet-sized zoo models checked");
}

/// `train --model zoo:lenet5 --seed 3`, `train --model FILE --init model` and `train --model FILE
/// --seed 3`, FILE from `zoo export lenet5 --seed 3`, write the same metrics and trace.
#[test]
fn training_the_exported_file_is_training_the_zoo_model_of_its_seed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("lenet5.onnx");
    let f = file.to_string_lossy().into_owned();
    let out = run(&["zoo", "export", "lenet5", "--seed", "3", "-o", &f]);
    assert!(out.status.success(), "{}", stderr(&out));
    let train = |model: &str, extra: &[&str], sub: &str| {
        let o = dir.path().join(sub).to_string_lossy().into_owned();
        let mut args = vec![
            "train",
            "--model",
            model,
            "--data",
            "synthetic",
            "--batch",
            "8",
            "--iters",
            "6",
            "--eval-every",
            "3",
            "--schedule",
            "cosine",
            "--bits",
            "3:8",
            "--cycles",
            "2",
            "--seed",
            "3",
            "--out",
            &o,
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(out.status.success(), "{model}: {}", stderr(&out));
        let read = |name: &str| {
            std::fs::read_to_string(dir.path().join(sub).join(name))
                .unwrap_or_else(|e| panic!("{sub}/{name}: {e}"))
        };
        (read("metrics.csv"), read("trace.csv"))
    };
    let zoo_run = train("zoo:lenet5", &[], "zoo");
    let file_run = train(&f, &["--init", "model"], "file");
    assert_eq!(zoo_run, file_run);
    // Re-initialised from its own seed (`--init seed`, the default), the file is itself again.
    let reseeded = train(&f, &[], "reseeded");
    assert_eq!(zoo_run, reseeded);
}
