//! Replays the fuzz corpora on stable: every committed input of every fuzz target
//! (`fuzz/replay/<target>/`, plus the repo's ONNX fixtures and accelerator configs, the targets'
//! seeds) goes through the same entry point the `cargo fuzz` target calls. Crash inputs the
//! campaign found live in the same folders, so each is a regression test; the seeds must still be
//! accepted, so a reader that starts rejecting everything fails here too.

use std::path::{Path, PathBuf};

use cptsim_e2e::fuzz::TARGETS;
use cptsim_e2e::workspace_root;

/// Seed folders outside `fuzz/replay/` that a target also replays.
fn extra_seeds(target: &str) -> Vec<PathBuf> {
    let root = workspace_root();
    match target {
        "onnx_import" => vec![root.join("tests/fixtures")],
        "accel_config" => vec![root.join("accel/configs")],
        "sweep_plan" => vec![root.join("examples/sweeps")],
        _ => Vec::new(),
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    out.retain(|p| p.is_file());
    out.sort();
    out
}

#[test]
fn every_corpus_input_replays_without_a_crash() {
    for (target, entry) in TARGETS {
        let mut dirs = vec![workspace_root().join("fuzz/replay").join(target)];
        dirs.extend(extra_seeds(target));
        let inputs: Vec<PathBuf> = dirs.iter().flat_map(|d| files(d)).collect();
        assert!(!inputs.is_empty(), "{target}: no corpus files in {dirs:?}");
        let mut accepted = Vec::new();
        for path in &inputs {
            let data = std::fs::read(path).unwrap();
            if entry(&data) {
                accepted.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        println!("{target}: {} inputs, accepted {accepted:?}", inputs.len());
        assert!(!accepted.is_empty(), "{target}: no seed input was accepted");
    }
}

#[test]
fn the_seeds_that_must_parse_do() {
    let root = workspace_root();
    let read = |p: &str| std::fs::read(root.join(p)).unwrap();
    use cptsim_e2e::fuzz as f;
    assert!(f::onnx_import(&read(
        "tests/fixtures/tiny_dynamo_opset20.onnx"
    )));
    assert!(!f::onnx_import(&read(
        "tests/fixtures/bad_zero_size_dim.onnx"
    )));
    for t in ["cosine.csv", "static.csv"] {
        assert!(
            f::trace_csv(&read(&format!("fuzz/replay/trace_csv/{t}"))),
            "{t}"
        );
    }
    for t in ["cosine.pb", "static.pb"] {
        assert!(
            f::trace_pb(&read(&format!("fuzz/replay/trace_pb/{t}"))),
            "{t}"
        );
    }
    assert!(f::accel_config(&read("accel/configs/zc706.toml")));
    for t in ["results.csv", "metrics.csv", "layers.csv"] {
        assert!(
            f::plot_csv(&read(&format!("fuzz/replay/plot_csv/{t}"))),
            "{t}"
        );
    }
    assert!(f::idx(&read("fuzz/replay/idx/images.idx")));
    assert!(f::cifar(&read("fuzz/replay/cifar/two_records.bin")));
    assert!(f::schedule(b"cosine\n3:8\n8\n1000\n8\n"));
    assert!(f::schedule(&read("fuzz/replay/schedule/pfq")));
    assert!(
        !f::schedule(b"file:/dev/zero"),
        "file: schedules are refused"
    );
    for plan in std::fs::read_dir(root.join("examples/sweeps")).unwrap() {
        let path = plan.unwrap().path();
        assert!(f::sweep_plan(&std::fs::read(&path).unwrap()), "{path:?}");
    }
    for plan in ["cost-small.toml", "train-cells-slurm.toml"] {
        let path = format!("fuzz/replay/sweep_plan/{plan}");
        assert!(f::sweep_plan(&read(&path)), "{path}");
    }
    for npy in ["f32-2x3.npy", "i64-ids.npy", "i32-scalar.npy", "v2-f32.npy"] {
        assert!(f::npy(&read(&format!("fuzz/replay/npy/{npy}"))), "{npy}");
    }
    for npy in ["bad-fortran-order-string.npy", "bad-duplicate-descr.npy"] {
        assert!(!f::npy(&read(&format!("fuzz/replay/npy/{npy}"))), "{npy}");
    }
    // A checkpoint of the small test network (`cptsim_train`'s checkpoint tests), and one of an
    // older format without a checksum: it is refused as it is, read once resealed.
    let ck = read("fuzz/replay/checkpoint/cosine-12.bin");
    assert!(cptsim_train::checkpoint::parse(Path::new("c"), &ck).is_ok());
    let old = read("fuzz/replay/checkpoint/old-format-2.bin");
    assert!(cptsim_train::checkpoint::parse(Path::new("c"), &old).is_err());
    assert!(f::sweep_cells(&read("fuzz/replay/sweep_cells/done-cell")));
    assert!(f::sweep_cells(&read(
        "fuzz/replay/sweep_cells/no-best-in-summary"
    )));
    assert!(!f::sweep_cells(&read(
        "fuzz/replay/sweep_cells/failed-cell"
    )));
    for entry in std::fs::read_dir(root.join("fuzz/replay/sweep_plan")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("bad-") {
            assert!(!f::sweep_plan(&std::fs::read(&path).unwrap()), "{name}");
        }
    }
}
