//! `train --resume` on a checkpoint changed after it was written: an edited iteration or plan,
//! a flipped weight bit, a cut file, or an edit with a recomputed checksum is refused with exit
//! code 3 and one line naming the file and what does not hold — never resumed, and never with
//! advice about the learning rate.

use std::path::Path;

use cptsim_e2e::{assert_one_clear_line, run, stderr};

/// A LeNet-5 run stopped at iteration 4 of 8 (evaluations at 2 and 4).
fn stopped_run(dir: &Path) -> Vec<u8> {
    let d = dir.to_string_lossy().into_owned();
    let out = run(&[
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--iters",
        "8",
        "--batch",
        "16",
        "--eval-every",
        "2",
        "--schedule",
        "cosine",
        "--bits",
        "3:8",
        "--cycles",
        "2",
        "--stop-at",
        "4",
        "--out",
        &d,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read(dir.join("checkpoint.bin")).unwrap_or_else(|e| panic!("{e}"))
}

/// `bytes` with the first `from` replaced by `to`, of the same length.
fn edit(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("no {from} in the checkpoint"));
    let mut b = bytes.to_vec();
    b[at..at + to.len()].copy_from_slice(to.as_bytes());
    b
}

/// `bytes` with its checksum trailer recomputed.
fn resealed(bytes: &[u8]) -> Vec<u8> {
    let content = &bytes[..bytes.len() - 12];
    let mut b = content.to_vec();
    b.extend_from_slice(&cptsim_train::checkpoint::trailer(content));
    b
}

/// Resumes `dir` with its checkpoint replaced by `bytes`: the stderr of the refusal.
fn refused(dir: &Path, bytes: &[u8], what: &str) -> String {
    let path = dir.join("checkpoint.bin");
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&["train", "--resume", &dir.to_string_lossy()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{what}: {err}");
    assert!(
        err.contains(&path.to_string_lossy().into_owned()),
        "{what}: {err}"
    );
    assert!(!err.contains("--lr"), "{what}: {err}");
    assert!(!dir.join("summary.json").exists(), "{what}");
    assert_one_clear_line(&err);
    err
}

#[test]
fn a_checkpoint_changed_after_writing_is_refused_with_exit_3() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path().join("run");
    let good = stopped_run(&dir);
    let changes = [
        (
            "iteration",
            edit(&good, "\"iteration\":4,", "\"iteration\":8,"),
        ),
        ("plan", edit(&good, "\"iters\":8,", "\"iters\":9,")),
        ("weight bit", {
            let mut b = good.clone();
            let n = b.len();
            b[n - 4000] ^= 0x04;
            b
        }),
    ];
    for (what, bytes) in &changes {
        let err = refused(&dir, bytes, what);
        assert!(err.contains("checksum mismatch"), "{what}: {err}");
    }
    let err = refused(&dir, &good[..good.len() - 100], "cut");
    assert!(err.contains("truncated or damaged"), "{err}");
    // Behind a recomputed checksum, the semantic checks still hold the line.
    let err = refused(
        &dir,
        &resealed(&edit(&good, "\"iteration\":4,", "\"iteration\":8,")),
        "resealed iteration",
    );
    assert!(err.contains("covers 4 iterations, the run did 8"), "{err}");
    // The untouched checkpoint still resumes.
    std::fs::write(dir.join("checkpoint.bin"), &good).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&["train", "--resume", &dir.to_string_lossy()]);
    assert!(out.status.success(), "{}", stderr(&out));
}
