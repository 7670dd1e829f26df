//! The binary's basic contract: help works, an unknown subcommand fails with exit code 2.

use cptsim_e2e::{run, stderr, stdout};

#[test]
fn help_lists_usage() {
    let out = run(&["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Usage: cptsim"));
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = run(&["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-command"));
}
