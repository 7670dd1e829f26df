//! `cptsim sweep run --executor slurm` on a real Slurm (`scripts/slurm-local.sh start`): the same
//! plan through the local and the Slurm executor gives the same `results.csv` (timing columns
//! aside), and `--no-wait` returns the job id. Without Slurm the test prints `SKIPPED: <test>: <reason>` on stderr and passes;
//! with `CPTSIM_REQUIRE_SLURM=1` (CI) a missing Slurm fails it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cptsim_e2e::sweep::{sweep, COST_PLAN};
use cptsim_e2e::{stderr, stdout};

/// Why Slurm cannot be used here, if it cannot.
fn slurm_missing() -> Option<String> {
    match Command::new("sinfo").args(["-h", "-o", "%T"]).output() {
        Err(e) => Some(format!("sinfo cannot run ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "sinfo fails: {} (start Slurm with scripts/slurm-local.sh start)",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(out) => {
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let usable = ["idle", "mixed", "alloc"]
                .iter()
                .any(|s| state.starts_with(s));
            (!usable).then(|| format!("the Slurm node is `{state}`, not idle"))
        }
    }
}

/// `results.csv` without the timing column `cpu_s`.
fn table(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let cpu = header.iter().position(|c| *c == "cpu_s").unwrap();
    text.lines()
        .map(|l| {
            let mut fields: Vec<&str> = l.split(',').collect();
            fields.remove(cpu);
            fields.join(",")
        })
        .collect()
}

#[test]
fn slurm_and_local_executors_give_the_same_table() {
    if let Some(reason) = slurm_missing() {
        cptsim_testdata::skip_unless_required(
            "CPTSIM_REQUIRE_SLURM",
            &format!("Slurm is not usable here: {reason}"),
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("plan.toml"), COST_PLAN).unwrap();
    let local = sweep(tmp.path(), &["run", "plan.toml", "--out", "local"]);
    assert!(local.status.success(), "{}", stderr(&local));
    let slurm = sweep(
        tmp.path(),
        &[
            "run",
            "plan.toml",
            "--out",
            "slurm",
            "--executor",
            "slurm",
            "--jobs",
            "2",
        ],
    );
    assert!(slurm.status.success(), "{}", stderr(&slurm));
    assert!(
        stderr(&slurm).contains("submitted job"),
        "{}",
        stderr(&slurm)
    );
    let (a, b) = (
        table(&tmp.path().join("local/results.csv")),
        table(&tmp.path().join("slurm/results.csv")),
    );
    assert_eq!(a.len(), 1 + 6 * 2);
    assert_eq!(a, b);
    // Each cell ran as its own array task.
    let logs = std::fs::read_dir(tmp.path().join("slurm/slurm"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "out")
        })
        .count();
    assert_eq!(logs, 6);

    // --no-wait: the job id on stdout at once; the cells finish on their own.
    let nowait = sweep(
        tmp.path(),
        &[
            "run",
            "plan.toml",
            "--out",
            "nowait",
            "--executor",
            "slurm",
            "--no-wait",
        ],
    );
    assert!(nowait.status.success(), "{}", stderr(&nowait));
    let job = stdout(&nowait).trim().to_string();
    assert!(
        !job.is_empty() && job.chars().all(|c| c.is_ascii_digit()),
        "{job:?}"
    );
    let start = Instant::now();
    loop {
        let status = sweep(tmp.path(), &["status", "nowait"]);
        if stdout(&status).contains("done 6 ") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "job {job} did not finish: {}",
            stdout(&status)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let collect = sweep(tmp.path(), &["collect", "nowait"]);
    assert!(collect.status.success(), "{}", stderr(&collect));
    assert_eq!(table(&tmp.path().join("nowait/results.csv")), a);
}
