//! Makes cargo build the `cptsim` binary for every `cargo test`, so the end-to-end tests in
//! `tests/` find it beside their own executables; checks that it starts.

#[test]
fn binary_prints_its_version() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cptsim"))
        .arg("--version")
        .output()
        .map_err(|e| e.to_string());
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("cannot run cptsim: {e}"),
    };
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("cptsim "));
}
