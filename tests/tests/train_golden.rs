//! Golden runs of `cptsim train`: a fixed set of short runs on synthetic data (static, CPT cosine,
//! PFQ, PRT, LDP, DFQ with both executions, FracTrain, and one DoReFa run with a non-default
//! scope) whose `trace.csv`, `metrics.csv`, `dfq.csv` and `summary.json` (minus its timing and
//! host fields) must equal, byte for byte, the files in `tests/fixtures/golden/NAME/`. They were
//! written by the binary before the structural refactor into crates, and written again once GEMM
//! reductions were blocked independently of the machine's caches (`cptsim_kernels::gemm::K_BLOCK`), by
//! the last commit before that refactor with only `sim/src/gemm.rs` changed: the files must be the
//! same on every machine of the pool; the LeNet-5 cases were written again when `--init seed`
//! took the zoo's initialisation rule (PyTorch's for LeNet-5's Linear layers; ResNet-20's weights
//! did not change). A change of behaviour shows as a diff here. `CPTSIM_BLESS=1` rewrites the fixtures (only when a change is intended).

use std::path::{Path, PathBuf};

use cptsim_e2e::{run, stderr, workspace_root};
use cptsim_kernels::VectorPath;

/// Summary keys that depend on the machine or the clock.
const VOLATILE: [&str; 5] = [
    "seconds",
    "images_per_s",
    "cpu_seconds",
    "images_per_cpu_s",
    "load_average",
];

/// Files compared when the run writes them.
const FILES: [&str; 4] = ["trace.csv", "metrics.csv", "dfq.csv", "summary.json"];

const LENET: [&str; 10] = [
    "--model",
    "zoo:lenet5",
    "--data",
    "synthetic",
    "--batch",
    "16",
    "--seed",
    "5",
    "--eval-every",
    "4",
];

const RESNET: [&str; 10] = [
    "--model",
    "zoo:resnet20",
    "--data",
    "synthetic",
    "--batch",
    "4",
    "--seed",
    "5",
    "--eval-every",
    "2",
];

/// The golden cases: name, base arguments, extra arguments.
fn cases() -> Vec<(&'static str, &'static [&'static str], Vec<&'static str>)> {
    vec![
        (
            "static",
            &LENET,
            vec![
                "--schedule",
                "static",
                "--bits",
                "8",
                "--grad-bits",
                "8",
                "--iters",
                "8",
            ],
        ),
        (
            "cpt_cosine",
            &LENET,
            vec![
                "--schedule",
                "cosine",
                "--bits",
                "3:8",
                "--cycles",
                "2",
                "--iters",
                "8",
            ],
        ),
        (
            "pfq",
            &LENET,
            vec![
                "--schedule",
                "pfq",
                "--pfq-fw",
                "3,8",
                "--pfq-bw",
                "8,8",
                "--pfq-eps",
                "10",
                "--pfq-check-every",
                "1",
                "--iters",
                "8",
            ],
        ),
        (
            "prt",
            &LENET,
            vec![
                "--prt",
                "--prt-iters-per-step",
                "2",
                "--prt-window",
                "1",
                "--schedule",
                "cosine",
                "--bits",
                "3:8",
                "--cycles",
                "2",
                "--iters",
                "20",
            ],
        ),
        (
            "ldp",
            &LENET,
            vec![
                "--policy",
                "ldp",
                "--bits",
                "3:8",
                "--grad-bits",
                "8",
                "--iters",
                "8",
            ],
        ),
        (
            "dorefa_scope",
            &LENET,
            vec![
                "--quantizer",
                "dorefa",
                "--quantize-first",
                "false",
                "--quantize-last",
                "true",
                "--bits",
                "4",
                "--grad-bits",
                "8",
                "--iters",
                "4",
            ],
        ),
        (
            "dfq_selected",
            &RESNET,
            vec!["--policy", "dfq", "--iters", "4"],
        ),
        (
            "dfq_all",
            &RESNET,
            vec!["--policy", "dfq", "--dfq-exec", "all", "--iters", "4"],
        ),
        (
            "fractrain",
            &RESNET,
            vec![
                "--policy",
                "fractrain",
                "--pfq-check-every",
                "1",
                "--pfq-eps",
                "10",
                "--iters",
                "7",
            ],
        ),
    ]
}

/// `summary.json` without its volatile lines (one key per line, as the run writes it).
fn stable_summary(text: &str) -> String {
    text.lines()
        .filter(|l| {
            !VOLATILE
                .iter()
                .any(|k| l.starts_with(&format!("  \"{k}\":")))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn golden_dir(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures/golden").join(name)
}

/// The comparable contents of `file` in the run directory `dir`, if the run wrote it.
fn produced(dir: &Path, file: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    Some(if file == "summary.json" {
        stable_summary(&text)
    } else {
        text
    })
}

#[test]
fn golden_runs_are_byte_identical() {
    let bless = std::env::var("CPTSIM_BLESS").as_deref() == Ok("1");
    let failures = golden_failures(None, bless, true);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The goldens hold on every other vector path this CPU runs (`CPTSIM_VECTOR_PATH`), not only on
/// the widest, which the test above uses: the GEMMs' sums do not depend on the path.
#[test]
fn golden_runs_are_byte_identical_on_every_vector_path() {
    for p in VectorPath::ALL.into_iter().filter(|p| !p.runs_here()) {
        cptsim_testdata::skip(&format!("the {} path: this CPU does not run it", p.name()));
    }
    let paths = VectorPath::runnable().filter(|&p| p != VectorPath::detect());
    for path in paths {
        if path == VectorPath::Portable {
            cptsim_testdata::skip("the ResNet cases on the portable path (minutes without FMA)");
        }
        // The portable path's fused multiply-add is a library call without FMA hardware (20×
        // slower): its ResNet cases would take minutes, so it runs the LeNet ones.
        let failures = golden_failures(Some(path), false, path != VectorPath::Portable);
        assert!(
            failures.is_empty(),
            "CPTSIM_VECTOR_PATH={}:\n{}",
            path.name(),
            failures.join("\n\n")
        );
    }
}

/// Runs the golden cases (all, or only the LeNet ones without `resnets`) on the GEMM vector path
/// `path` (or the default) and returns what differs from the fixtures; with `bless`, rewrites
/// the fixtures instead.
fn golden_failures(path: Option<VectorPath>, bless: bool, resnets: bool) -> Vec<String> {
    let mut failures = Vec::new();
    let cases = cases()
        .into_iter()
        .filter(|(_, base, _)| resnets || *base == LENET);
    for (name, base, extra) in cases {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let o = dir.path().to_string_lossy().into_owned();
        let mut args = vec!["train", "--out", &o];
        args.extend_from_slice(base);
        args.extend_from_slice(&extra);
        let mut cmd = cptsim_e2e::cptsim();
        if let Some(path) = path {
            cmd.env("CPTSIM_VECTOR_PATH", path.name());
        }
        let out = cmd
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run cptsim: {e}"));
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let golden = golden_dir(name);
        if bless {
            std::fs::create_dir_all(&golden).unwrap_or_else(|e| panic!("{e}"));
        }
        for file in FILES {
            let got = produced(dir.path(), file);
            let path = golden.join(file);
            if bless {
                if let Some(text) = &got {
                    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
                }
                continue;
            }
            let want = std::fs::read_to_string(&path).ok();
            if got != want {
                failures.push(format!(
                    "{name}/{file}: got\n{}\nwant\n{}",
                    got.as_deref().unwrap_or("(not written)"),
                    want.as_deref().unwrap_or("(no fixture)")
                ));
            }
        }
    }
    failures
}

#[test]
fn summary_filter_drops_only_the_volatile_keys() {
    let text = "{\n  \"policy\": \"dfq\",\n  \"seconds\": 1.5,\n  \"gbitops\": 2.0,\n  \"load_average\": null\n}\n";
    assert_eq!(
        stable_summary(text),
        "{\n  \"policy\": \"dfq\",\n  \"gbitops\": 2.0,\n}\n"
    );
}

/// `tests/fixtures/checkpoint_v0/checkpoint.bin` was written by the binary before the structural
/// refactor (the `pfq` case above with `--stop-at 3`): checkpoint format 1, without a checksum,
/// so `--resume` rejects it with one clear line and writes nothing.
#[test]
fn checkpoint_from_before_the_train_plan_is_rejected_clearly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let fixture = workspace_root().join("tests/fixtures/checkpoint_v0/checkpoint.bin");
    std::fs::copy(&fixture, dir.path().join("checkpoint.bin"))
        .unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
    let d = dir.path().to_string_lossy().into_owned();
    let out = run(&["train", "--resume", &d]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("written by an older cptsim"), "{err}");
    assert!(err.contains("checkpoint.bin"), "{err}");
    cptsim_e2e::assert_one_clear_line(&err);
    for file in ["trace.csv", "metrics.csv", "summary.json"] {
        assert!(!dir.path().join(file).exists(), "{file}");
    }
}

/// A run stopped with `--stop-at` and resumed ends with the golden files (the checkpoint holds
/// the train plan and the policy's `{name, state}`).
#[test]
fn stopped_and_resumed_pfq_run_ends_at_the_golden_files() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (_, base, extra) = cases()
        .into_iter()
        .find(|c| c.0 == "pfq")
        .unwrap_or_else(|| panic!("no pfq case"));
    let o = dir.path().to_string_lossy().into_owned();
    let mut args = vec!["train", "--out", &o, "--stop-at", "3"];
    args.extend_from_slice(base);
    args.extend_from_slice(&extra);
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["train", "--resume", &o]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("resumed at iteration 3/8"),
        "{}",
        stderr(&out)
    );
    let golden = golden_dir("pfq");
    for file in ["trace.csv", "metrics.csv", "summary.json"] {
        let want = std::fs::read_to_string(golden.join(file)).ok();
        assert_eq!(produced(dir.path(), file), want, "{file}");
    }
}
