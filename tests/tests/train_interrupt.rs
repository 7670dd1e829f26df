//! SIGTERM while a run evaluates: the evaluation stops between two batches, well within 5 s,
//! with exit 130 and a checkpoint that records the evaluation as pending; `--resume` runs it
//! first and ends at exactly the files of the uninterrupted run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cptsim_e2e::{run, stderr};

/// Every iteration is a batch of 2 followed by an evaluation of the 1024 synthetic test images
/// on ResNet-20 (seconds), so a signal sent just after an evaluation's checkpoint lands in the
/// next evaluation.
const ARGS: &str = "train --model zoo:resnet20 --data synthetic --iters 3 --batch 2 \
                    --eval-every 1 --checkpoint-minutes 0";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The mtime of `path`, if it exists.
fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[test]
fn sigterm_during_an_evaluation_stops_within_seconds_and_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (whole, cut) = (dir.path().join("whole"), dir.path().join("cut"));
    let (w, c) = (
        whole.to_string_lossy().into_owned(),
        cut.to_string_lossy().into_owned(),
    );
    let args: Vec<&str> = ARGS.split_whitespace().collect();
    let out = run(&[&args[..], &["--out", &w]].concat());
    assert!(out.status.success(), "{}", stderr(&out));

    let child = cptsim_e2e::cptsim()
        .args(&args)
        .args(["--out", &c])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // The first evaluation's checkpoint; the second iteration's step (a batch of 2) takes
    // milliseconds, its evaluation seconds.
    let checkpoint = cut.join("checkpoint.bin");
    let started = Instant::now();
    while modified(&checkpoint).is_none() {
        assert!(
            started.elapsed().as_secs() < 300,
            "no checkpoint after 300 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -TERM failed");
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let took = signalled.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted at iteration 2/3 during its evaluation: checkpoint written"),
        "{err}"
    );
    eprintln!("SIGTERM during the evaluation: exit 130 after {took:?}");
    assert!(took < Duration::from_secs(5), "exit {took:?} after SIGTERM");
    assert!(!cut.join("summary.json").exists());

    let out = run(&["train", "--resume", &c]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("resumed at iteration 2/3"),
        "{}",
        stderr(&out)
    );
    for file in ["trace.csv", "metrics.csv"] {
        assert_eq!(read(&cut.join(file)), read(&whole.join(file)), "{file}");
    }
}
