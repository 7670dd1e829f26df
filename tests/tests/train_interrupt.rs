//! SIGTERM while a run evaluates: the evaluation stops between two batches, well within 5 s,
//! with exit 130 and a checkpoint that records the evaluation as pending; `--resume` runs it
//! first and ends at exactly the files of the uninterrupted run.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cptsim_e2e::{run, stderr};

/// Every iteration is a batch of 2 (tens of milliseconds) followed by an evaluation of the 1024
/// synthetic test images on ResNet-74 (seconds), so a signal sent shortly after one evaluation is
/// reported lands in the next.
const ARGS: &str = "train --model zoo:resnet74 --data synthetic --iters 3 --batch 2 \
                    --eval-every 1 --checkpoint-minutes 0";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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

    let mut child = cptsim_e2e::cptsim()
        .args(&args)
        .args(["--out", &c])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // The run's progress lines as they come: the signal goes 150 ms after the first evaluation
    // is reported, within the second iteration's evaluation (its step takes tens of
    // milliseconds, the evaluation seconds).
    let pipe = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut err = String::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(300))
            .unwrap_or_else(|e| panic!("no first evaluation after 300 s ({e}): {err}"));
        err.push_str(&line);
        err.push('\n');
        if line.starts_with("eval @ 1:") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(150));
    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -TERM failed");
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    let took = signalled.elapsed();
    reader.join().unwrap_or_else(|_| panic!("stderr reader"));
    err.extend(rx.try_iter().map(|l| l + "\n"));
    assert_eq!(status.code(), Some(130), "{err}");
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
