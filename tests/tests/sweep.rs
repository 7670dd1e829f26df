//! End-to-end tests of `cptsim sweep` with the local executor: results table, status, collect,
//! bad plans, `--only`, resume after a kill, a failing cell, a training cell resumed from its checkpoint and
//! a tiny variant of the accuracy-study example. The Slurm executor is in `sweep_slurm.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cptsim_e2e::sweep::{cell_dirs, csv_rows, sweep, write_plan, COST_PLAN};
use cptsim_e2e::{cptsim, stderr, stdout, workspace_root};

const HEADER: &str = "cell,model,schedule,bits,grad_bits,seed,policy,iters,macs,gbitops,\
static_gbitops,reduction,accel,latency_s,energy_j,static_latency_s,static_energy_j,\
final_test_acc,best_test_acc,iterations,cpu_s";

fn done_count(out: &Path) -> usize {
    cell_dirs(out)
        .iter()
        .filter(|d| d.join("done").exists())
        .count()
}

/// How many times the cell's log says `cptsim SUB` started.
fn starts(cell: &Path, sub: &str) -> usize {
    let log = std::fs::read_to_string(cell.join("stderr.log")).unwrap_or_default();
    log.lines()
        .filter(|l| {
            l.starts_with("# cptsim-sweep start") && l.contains(&format!(": cptsim {sub} "))
        })
        .count()
}

#[test]
fn local_run_writes_the_table_and_status_and_collect_read_it() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(tmp.path(), COST_PLAN);
    let out = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--jobs", "2"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = tmp.path().join("out");
    let text = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(text.lines().next().unwrap(), HEADER);
    let rows = csv_rows(&dir.join("results.csv"));
    assert_eq!(rows.len(), 1 + 6 * 2);
    let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    for row in &rows[1..] {
        let reduction: f64 = row[col("reduction")].parse().unwrap();
        let cyclic = row[col("schedule")] == "cosine" && row[col("bits")] == "3:8";
        assert_eq!(reduction > 0.3, cyclic, "{row:?}");
        assert!(row[col("latency_s")].parse::<f64>().unwrap() > 0.0);
        assert!(row[col("final_test_acc")].is_empty());
    }
    let accels: Vec<&str> = rows[1..].iter().map(|r| r[col("accel")].as_str()).collect();
    assert!(
        accels.contains(&"zc706") && accels.contains(&"stripes"),
        "{accels:?}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 12);

    let status = sweep(tmp.path(), &["status", "out"]);
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(
        stdout(&status).contains("done 6  running 0  failed 0  pending 0"),
        "{}",
        stdout(&status)
    );

    std::fs::remove_file(dir.join("results.csv")).unwrap();
    let collect = sweep(tmp.path(), &["collect", "out"]);
    assert!(collect.status.success(), "{}", stderr(&collect));
    assert_eq!(
        std::fs::read_to_string(dir.join("results.csv")).unwrap(),
        text
    );

    // A cell another live process holds is not run, and is reported as running.
    let held = cell_dirs(&dir).remove(0);
    std::fs::remove_file(held.join("done")).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    std::fs::write(
        held.join("lock"),
        format!("{} {} 0\n", std::process::id(), host.trim()),
    )
    .unwrap();
    let status = sweep(tmp.path(), &["status", "out"]);
    assert!(
        stdout(&status).contains("done 5  running 1"),
        "{}",
        stdout(&status)
    );
    let busy = sweep(tmp.path(), &["run", "plan.toml", "--out", "out"]);
    assert!(!busy.status.success());
    assert!(
        stderr(&busy).contains("running elsewhere"),
        "{}",
        stderr(&busy)
    );
    assert_eq!(starts(&held, "run"), 1);
    std::fs::remove_file(held.join("lock")).unwrap();

    // A second run finds everything done and runs nothing but the released cell.
    let again = sweep(tmp.path(), &["run", "plan.toml", "--out", "out"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stderr(&again).contains("1 to run"), "{}", stderr(&again));
    for cell in cell_dirs(&dir) {
        let expected = if cell == held { 2 } else { 1 };
        assert_eq!(starts(&cell, "run"), expected, "{}", cell.display());
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("results.csv")).unwrap(),
        text
    );
}

#[test]
fn only_runs_the_chosen_cells_and_a_later_run_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(tmp.path(), COST_PLAN);
    // Bad selections fail before anything runs, naming the argument and what the plan has.
    for (arg, says) in [
        (
            "seed=0",
            "no key `seed` (its keys: model, schedule, bits, iters)",
        ),
        (
            "model=zoo:vgg",
            "no cell has model = zoo:vgg (its values: zoo:lenet5, zoo:mlp)",
        ),
        ("model", "expected KEY=VALUE"),
    ] {
        let out = sweep(
            tmp.path(),
            &["run", "plan.toml", "--out", "out", "--only", arg],
        );
        assert!(!out.status.success(), "--only {arg} ran");
        assert!(
            stderr(&out).contains(says),
            "--only {arg}: {}",
            stderr(&out)
        );
        assert!(
            !tmp.path().join("out").exists(),
            "--only {arg} wrote output"
        );
    }
    // Values of one key are alternatives, different keys must all match: 2 of the 6 cells.
    let args = [
        "--only",
        "schedule=cosine",
        "--only",
        "bits=8",
        "--only",
        "bits=3:8",
    ];
    let dry = sweep(
        tmp.path(),
        &[
            &[
                "run",
                "plan.toml",
                "--out",
                "out",
                "--dry-run",
                "--only",
                "model=zoo:mlp",
            ],
            &args[..],
        ]
        .concat(),
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(
        stdout(&dry).contains("6 cells (2 chosen by --only)"),
        "{}",
        stdout(&dry)
    );
    assert_eq!(
        stdout(&dry).lines().filter(|l| l.starts_with('#')).count(),
        2
    );
    let part = sweep(
        tmp.path(),
        &[&["run", "plan.toml", "--out", "out"], &args[..]].concat(),
    );
    assert!(part.status.success(), "{}", stderr(&part));
    assert!(
        stderr(&part).contains("4 chosen by --only), 4 to run"),
        "{}",
        stderr(&part)
    );
    let dir = tmp.path().join("out");
    assert_eq!(done_count(&dir), 4);
    let rows = csv_rows(&dir.join("results.csv"));
    let col = rows[0].iter().position(|c| c == "schedule").unwrap();
    assert!(rows[1..].iter().all(|r| r[col] == "cosine"), "{rows:?}");
    // The same cells in the whole plan: a run without --only runs only the other two.
    let rest = sweep(tmp.path(), &["run", "plan.toml", "--out", "out"]);
    assert!(rest.status.success(), "{}", stderr(&rest));
    assert!(
        stderr(&rest).contains("6 cells, 2 to run"),
        "{}",
        stderr(&rest)
    );
    for cell in cell_dirs(&dir) {
        assert_eq!(starts(&cell, "run"), 1, "{}", cell.display());
    }
    assert_eq!(csv_rows(&dir.join("results.csv")).len(), 1 + 6 * 2);
}

#[test]
fn bad_plans_fail_before_anything_runs_naming_the_key_and_cell() {
    let cases: [(&str, &[&str]); 7] = [
        (
            "name = \"b\"\ngird = 1",
            &["`gird`", "valid: name, out, grid"],
        ),
        (
            "name = \"b\"\n[grid]\nmodel = \"zoo:lenet5\"\nbitz = [\"8\"]",
            &["`bitz`", "neither", "grad-bits"],
        ),
        (
            "name = \"b\"\n[grid]\nmodel = \"zoo:lenet5\"\nseed = [0, 1]",
            &["`seed`", "no [train]"],
        ),
        (
            "name = \"b\"\n[grid]\nmodel = \"zoo:lenet5\"\nbits = []",
            &["`bits`", "empty"],
        ),
        ("name = \"b\"", &["no cells"]),
        (
            "name = \"b\"\n[grid]\nmodel = \"zoo:lenet5\"\niters = [\"10\", \"many\"]",
            &["cell #1", "iters=many", "key `iters`", "'many'"],
        ),
        (
            "name = \"b\"\n[grid]\nmodel = \"zoo:lenet5\"\naccel = [\"zc707\"]",
            &["`accel`", "zc707"],
        ),
    ];
    for (plan, expected) in cases {
        let tmp = tempfile::tempdir().unwrap();
        write_plan(tmp.path(), plan);
        let out = sweep(tmp.path(), &["run", "plan.toml", "--out", "out"]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{plan}");
        for part in expected {
            assert!(err.contains(part), "{plan}: `{part}` not in: {err}");
        }
        assert!(!tmp.path().join("out").exists(), "{plan}: wrote output");
    }
}

#[test]
fn slurm_executor_without_sbatch_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(tmp.path(), COST_PLAN);
    let out = cptsim()
        .current_dir(tmp.path())
        .env("PATH", tmp.path())
        .args([
            "sweep",
            "run",
            "plan.toml",
            "--out",
            "out",
            "--executor",
            "slurm",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("`sbatch` is not on PATH"),
        "{}",
        stderr(&out)
    );
    assert!(!tmp.path().join("out").exists());
}

/// Starts `cptsim sweep run plan.toml --out out --jobs 1` in `dir`.
fn spawn_sweep(dir: &Path, stderr: std::process::Stdio) -> std::process::Child {
    cptsim()
        .current_dir(dir)
        .args(["sweep", "run", "plan.toml", "--out", "out", "--jobs", "1"])
        .stderr(stderr)
        .spawn()
        .unwrap()
}

#[test]
fn a_killed_sweep_resumes_and_runs_no_done_cell_twice() {
    let tmp = tempfile::tempdir().unwrap();
    // 16 cells: 4 models × 4 iteration counts.
    write_plan(
        tmp.path(),
        "name = \"k\"\n[grid]\nmodel = [\"zoo:lenet5\", \"zoo:mlp\", \"zoo:resnet20\", \"zoo:resnet38\"]\n\
         iters = [1000, 2000, 3000, 4000]\naccel = [\"zc706\"]\n",
    );
    let out = tmp.path().join("out");
    let mut child = spawn_sweep(tmp.path(), std::process::Stdio::null());
    let start = Instant::now();
    while done_count(&out) < 3 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let done_before: Vec<PathBuf> = cell_dirs(&out)
        .into_iter()
        .filter(|d| d.join("done").exists())
        .collect();
    assert!(
        (3..16).contains(&done_before.len()),
        "killed with {} of 16 cells done",
        done_before.len()
    );
    let again = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--jobs", "2"],
    );
    assert!(again.status.success(), "{}", stderr(&again));
    let cells = cell_dirs(&out);
    assert_eq!(cells.len(), 16);
    assert_eq!(done_count(&out), 16);
    for cell in &done_before {
        assert_eq!(
            starts(cell, "run"),
            1,
            "done cell rerun: {}",
            cell.display()
        );
    }
    // With one worker, at most the one cell interrupted mid-way started twice.
    let total: usize = cells.iter().map(|c| starts(c, "run")).sum();
    assert!(total <= 17, "{total} cost runs for 16 cells");
    assert_eq!(csv_rows(&out.join("results.csv")).len(), 17);
}

#[test]
fn a_failing_cell_does_not_stop_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(
        tmp.path(),
        "name = \"f\"\n[grid]\nmodel = \"zoo:lenet5\"\n\
         schedule = [\"static\", \"file:no/such/schedule.csv\", \"cosine\"]\niters = 500\n",
    );
    let out = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--jobs", "1"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("FAILED") && err.contains("1 failed"), "{err}");
    let dir = tmp.path().join("out");
    assert_eq!(done_count(&dir), 2);
    let rows = csv_rows(&dir.join("results.csv"));
    assert_eq!(rows.len(), 3);
    let status = sweep(tmp.path(), &["status", "out"]);
    let text = stdout(&status);
    assert!(
        text.contains("done 2  running 0  failed 1  pending 0"),
        "{text}"
    );
    assert!(
        text.contains("failed ") && text.contains("schedule.csv"),
        "{text}"
    );
}

#[test]
fn an_interrupted_training_cell_resumes_from_its_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(
        tmp.path(),
        "name = \"r\"\n[grid]\nmodel = \"zoo:lenet5\"\nseed = 1\naccel = [\"zc706\"]\n\
         [train]\ndata = \"synthetic\"\niters = 4\neval_every = 2\nbatch = 16\n",
    );
    let first = sweep(tmp.path(), &["run", "plan.toml", "--out", "out"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let dir = tmp.path().join("out");
    let cell = cell_dirs(&dir).remove(0);
    let full = csv_rows(&dir.join("results.csv"));
    // Make it a cell interrupted at iteration 2: its own train command, stopped there.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cell.join("cell.json")).unwrap()).unwrap();
    let train: Vec<String> = record["commands"]["train"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for name in ["done", "cost.json", "inspect.json"] {
        std::fs::remove_file(cell.join(name)).unwrap();
    }
    std::fs::remove_dir_all(cell.join("run")).unwrap();
    let stopped = Command::new(cptsim_e2e::cptsim_path())
        .current_dir(tmp.path())
        .args(&train)
        .arg("--stop-at=2")
        .output()
        .unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert!(cell.join("run/checkpoint.bin").exists());
    assert!(!cell.join("run/summary.json").exists());

    let again = sweep(tmp.path(), &["run", "plan.toml", "--out", "out"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let log = std::fs::read_to_string(cell.join("stderr.log")).unwrap();
    assert!(log.contains("cptsim train --resume="), "{log}");
    assert!(log.contains("resumed at iteration 2/4"), "{log}");
    let resumed = csv_rows(&dir.join("results.csv"));
    let col = |name: &str| full[0].iter().position(|c| c == name).unwrap();
    assert_eq!(resumed[1][col("iterations")], "4");
    // Exact resume: the same accuracy and cost as the uninterrupted run.
    for name in ["final_test_acc", "gbitops", "latency_s"] {
        assert_eq!(resumed[1][col(name)], full[1][col(name)], "{name}");
    }
}

#[test]
fn sigterm_to_a_sweep_checkpoints_its_training_cell_at_the_iteration_reached() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(
        tmp.path(),
        "name = \"t\"\n[grid]\nmodel = \"zoo:lenet5\"\nseed = [1, 2]\naccel = [\"zc706\"]\n\
         [train]\ndata = \"synthetic\"\niters = 1000000\neval_every = 5\nbatch = 16\n",
    );
    let out = tmp.path().join("out");
    let child = spawn_sweep(tmp.path(), std::process::Stdio::piped());
    let start = Instant::now();
    let run = loop {
        let found = cell_dirs(&out)
            .into_iter()
            .map(|c| c.join("run"))
            .find(|r| r.join("checkpoint.bin").exists());
        if let Some(run) = found {
            break run;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "no checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    // `status` says how far the running cell has got (its log's last progress line).
    let status = sweep(tmp.path(), &["status", "out"]);
    let text = stdout(&status);
    assert!(
        text.lines().any(|l| l.starts_with("running ")
            && l.contains("iteration ")
            && l.contains("/1000000, ETA ")),
        "{text}"
    );
    // The sweep alone is signalled (not its process group): it forwards to the cell's child.
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -TERM failed");
    let done = child.wait_with_output().unwrap();
    let err = stderr(&done);
    assert_eq!(done.status.code(), Some(130), "{err}");
    assert!(err.contains("rerun the same command"), "{err}");
    // One cell started, none after the signal; its child checkpointed where it was.
    let logs: Vec<String> = cell_dirs(&out)
        .iter()
        .filter_map(|c| std::fs::read_to_string(c.join("stderr.log")).ok())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let at = logs[0]
        .split("interrupted at iteration ")
        .nth(1)
        .and_then(|t| t.split('/').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no checkpoint message: {}", logs[0]));
    // … and where an interrupted one resumes (its checkpoint's iteration).
    let status = stdout(&sweep(tmp.path(), &["status", "out"]));
    assert!(
        status.contains(&format!(" (resumes from iteration {at})")),
        "{status}"
    );
    let resumed = Command::new(cptsim_e2e::cptsim_path())
        .args(["train", "--resume", &run.to_string_lossy(), "--stop-at"])
        .arg((at + 1).to_string())
        .output()
        .unwrap();
    let text = stderr(&resumed);
    assert!(resumed.status.success(), "{text}");
    assert!(
        text.contains(&format!("resumed at iteration {at}/1000000")),
        "{text}"
    );
}

/// The accuracy-study example with synthetic data, 2 iterations, 1 seed and 1 cycle.
#[test]
fn the_accuracy_study_example_runs_end_to_end_in_a_tiny_variant() {
    let example = workspace_root().join("examples/sweeps/accuracy-fmnist-resnet20.toml");
    let mut text = std::fs::read_to_string(example).unwrap();
    for (from, to) in [
        (
            "data = \"fashion-mnist:../shared/data/fashion-mnist\"",
            "data = \"synthetic\"",
        ),
        ("epochs = 8", "iters = 2"),
        ("seed = [0, 1, 2]", "seed = [0]"),
        ("cycles = 32", "cycles = 1"),
    ] {
        assert!(text.contains(from), "the example no longer has `{from}`");
        text = text.replace(from, to);
    }
    let tmp = tempfile::tempdir().unwrap();
    write_plan(tmp.path(), &text);
    let dry = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--dry-run"],
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    let listing = stdout(&dry);
    assert!(listing.contains(": 5 cells in "), "{listing}");
    assert_eq!(
        listing.matches("cptsim train --data=synthetic").count(),
        5,
        "{listing}"
    );
    assert!(!tmp.path().join("out").exists(), "--dry-run wrote output");
    let out = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--jobs", "2"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = csv_rows(&tmp.path().join("out/results.csv"));
    assert_eq!(rows.len(), 1 + 5);
    let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    let mut policies: Vec<&str> = rows[1..]
        .iter()
        .map(|r| r[col("policy")].as_str())
        .collect();
    policies.sort_unstable();
    assert_eq!(policies, ["dfq", "ldp", "schedule", "schedule", "schedule"]);
    for row in &rows[1..] {
        assert_eq!(row[col("iterations")], "2");
        let acc: f64 = row[col("final_test_acc")].parse().unwrap();
        assert!((0.0..=1.0).contains(&acc));
        assert_eq!(row[col("accel")], "zc706");
    }
}

/// CPT Table 2's cost grid, as shipped: 12 cells × 3 accelerators, CPT 3-8/8 on ResNet-74 at
/// the formula's −36.67 % (spec note 6).
#[test]
fn the_table2_example_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = workspace_root().join("examples/sweeps/cpt-table2-cost.toml");
    let out = sweep(
        tmp.path(),
        &["run", plan.to_str().unwrap(), "--out", "out", "--jobs", "2"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = csv_rows(&tmp.path().join("out/results.csv"));
    assert_eq!(rows.len(), 1 + 12 * 3);
    let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    let cpt = rows
        .iter()
        .find(|r| r[col("model")] == "zoo:resnet74" && r[col("bits")] == "3:8")
        .unwrap();
    let reduction: f64 = cpt[col("reduction")].parse().unwrap();
    assert!((reduction - 0.3667).abs() < 5e-4, "{reduction}");
}
