//! `--arithmetic int` and `--accumulator`: integer forward GEMMs close to the fp32 emulation,
//! a narrow accumulator that changes the logits, and bad values as usage errors naming the flag.

use std::path::Path;

use cptsim_e2e::{assert_one_clear_line, run, stderr, write_npy};

fn logits(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap();
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `forward` of zoo:lenet5 at 8 bits with `extra` flags; the logits, or the failed output.
fn forward(dir: &Path, name: &str, extra: &[&str]) -> Result<Vec<f32>, std::process::Output> {
    let (x, y) = (dir.join("x.npy"), dir.join(format!("{name}.npy")));
    write_npy(&x, &[4, 1, 28, 28], |i| {
        ((i * 37) % 101) as f32 / 50.0 - 1.0
    });
    let mut args = vec![
        "forward",
        "--model",
        "zoo:lenet5",
        "--input",
        x.to_str().unwrap(),
        "--output",
        y.to_str().unwrap(),
        "--bits",
        "8",
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    if out.status.success() {
        Ok(logits(&y))
    } else {
        Err(out)
    }
}

#[test]
fn integer_logits_are_close_to_the_fp32_emulation_and_narrow_sums_move_them() {
    let dir = tempfile::tempdir().unwrap();
    let fp = forward(dir.path(), "fp", &[]).unwrap();
    let int = forward(dir.path(), "int", &["--arithmetic", "int"]).unwrap();
    let wide = forward(
        dir.path(),
        "wide",
        &["--arithmetic", "int", "--accumulator", "fw=32:saturate"],
    )
    .unwrap();
    let narrow = forward(
        dir.path(),
        "narrow",
        &["--arithmetic", "int", "--accumulator", "12"],
    )
    .unwrap();
    let scale = fp.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
    assert!(
        fp.iter()
            .zip(&int)
            .all(|(a, b)| (a - b).abs() <= 1e-3 * scale),
        "{fp:?}\n{int:?}"
    );
    assert_eq!(int, wide, "a 32-bit register holds LeNet-5's 8-bit sums");
    assert_ne!(int, narrow, "a 12-bit register wraps them");
}

#[test]
fn bad_arithmetic_flags_are_usage_errors_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (flags, want) in [
        (&["--arithmetic", "int8"][..], "--arithmetic int8"),
        (
            &["--arithmetic", "int", "--accumulator", "1"][..],
            "--accumulator 1",
        ),
        (
            &["--arithmetic", "int", "--accumulator", "24:clip"][..],
            "--accumulator 24:clip",
        ),
        (
            &["--arithmetic", "int", "--accumulator", "fw=24,bw=32"][..],
            "backward GEMMs run in fp32",
        ),
        (&["--accumulator", "24"][..], "add --arithmetic int"),
        (
            &["--arithmetic", "int", "--quantizer", "dorefa"][..],
            "--quantizer sbm",
        ),
    ] {
        let out = forward(dir.path(), "bad", flags).unwrap_err();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(want), "{flags:?}: {err}");
        assert_one_clear_line(&err);
    }
}
