//! End-to-end tests of sweep plans: cells that mean the same run, plan errors with their line
//! and column, `collect` of an edited plan, `--dry-run`'s listing, and the sweep modules' own
//! plan types (no argument parser).

use cptsim_e2e::sweep::{cell_dirs, csv_rows, sweep, write_plan, COST_PLAN};
use cptsim_e2e::{stderr, stdout, workspace_root};

/// Values that differ only in spelling or TOML type (`cycles = 4` and `"4"`, `grad_bits` and
/// `grad-bits`, a default given or left out) mean one run: one cell, one row per accelerator
/// (an accelerator named twice, or by its alias, is costed once), and no cell of the sweep
/// "running elsewhere" under its own PID.
#[test]
fn cells_that_mean_the_same_run_are_one_cell() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(
        tmp.path(),
        "name = \"d\"\n[grid]\nmodel = \"zoo:lenet5\"\nschedule = \"cosine\"\nbits = \"3:8\"\n\
         iters = 200\ncycles = [4, \"4\"]\n\
         accel = [\"zc706\", \"zc706,bitfusion\", \"bitfusion-eyeriss-iso\"]\n\
         [[cell]]\ngrad_bits = 8\n[[cell]]\ngrad-bits = \"8\"\n[[cell]]\nbits = [\"3:8\", 3]\n",
    );
    let dry = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--dry-run"],
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    let listing = stdout(&dry);
    assert!(listing.contains(": 2 cells in "), "{listing}");
    let out = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--jobs", "2"],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("running elsewhere"), "{err}");
    // Two cells, each costed once on each of its two accelerators (the alias counts once).
    let rows = csv_rows(&tmp.path().join("out/results.csv"));
    assert_eq!(rows.len(), 1 + 2 * 2, "{rows:?}");
    let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    let mut pairs: Vec<(&str, &str)> = rows[1..]
        .iter()
        .map(|r| (r[col("cell")].as_str(), r[col("accel")].as_str()))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    assert_eq!(pairs.len(), 4, "{rows:?}");
    assert_eq!(cell_dirs(&tmp.path().join("out")).len(), 2);
}

/// Plan errors say where, as accelerator configs' do: a TOML syntax error, an unknown key, a
/// value a cell's plan cannot read and a combination it rejects each name the line and column.
#[test]
fn plan_errors_name_the_line_and_column() {
    let grid = "name = \"p\"\n[grid]\nmodel = \"zoo:lenet5\"\n";
    let cases: [(String, &[&str]); 9] = [
        (
            format!("{grid}iters = [\"10\",\n  \"many\"]\n"),
            &["line 5, column 3: ", "key `iters`", "'many'"],
        ),
        (
            "name = \"p\"\n[grid\nmodel = 1\n".into(),
            &["line 2, column "],
        ),
        (
            format!("{grid}bitz = 8\n"),
            &["line 4, column 1: ", "`bitz`"],
        ),
        (
            format!("{grid}schedule = \"cosine\"\niters = 100\n[[cell]]\ncycles = 200\n"),
            &[
                "line 7, column 10: ",
                "key `cycles`",
                "200 cycles do not fit",
            ],
        ),
        (
            format!("{grid}[train]\ndata = \"synthetic\"\nbatch = 0\n"),
            &["line 6, column 9: ", "key `batch`", "--batch"],
        ),
        (
            "name = \"p\"\n[grid]\nmodel = [\"zoo:lenet5\",\n  \"zoo:lenet6\"]\n".into(),
            &["line 4, column 3: ", "zoo:lenet6", "unknown zoo model"],
        ),
        (
            format!("{grid}accel = [\"zc706\"]\n[[cell]]\naccel = \"zc707\"\n"),
            &["line 6, column 1: ", "`accel` = zc707"],
        ),
        (
            format!("{grid}[[exclude]]\nbitz = 8\n"),
            &["line 5, column 1: ", "[[exclude]] key `bitz`"],
        ),
        (
            format!("{grid}grad_bits = 8\n[[cell]]\niters = 9\ngrad-bits = 6\niters = 8\n"),
            &["line 8, column 1: ", "duplicate key"],
        ),
    ];
    for (plan, expected) in cases {
        let tmp = tempfile::tempdir().unwrap();
        write_plan(tmp.path(), &plan);
        let out = sweep(
            tmp.path(),
            &["run", "plan.toml", "--out", "out", "--dry-run"],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{plan}: {err}");
        assert!(err.starts_with("error: plan plan.toml: line "), "{err}");
        for part in expected {
            assert!(err.contains(part), "{plan}: `{part}` not in: {err}");
        }
    }
}

/// `sweep collect` after `DIR/plan.toml` was edited: the done cells it no longer plans make it
/// refuse (exit 3, naming them, the table untouched) unless `--drop-unplanned`, and a table
/// replaced with fewer rows says so; `status` lists those cells; both speak JSON.
#[test]
fn collect_refuses_an_edited_plan_and_never_shrinks_the_table_silently() {
    let tmp = tempfile::tempdir().unwrap();
    write_plan(tmp.path(), COST_PLAN);
    let out = sweep(tmp.path(), &["run", "plan.toml", "--out", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = tmp.path().join("out");
    let table = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let mlp: Vec<String> = cell_dirs(&dir)
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|id| id.starts_with("mlp_"))
        .collect();
    assert_eq!(mlp.len(), 3, "{mlp:?}");
    // The plan copy loses zoo:mlp: its three done cells are no longer planned.
    let edited = COST_PLAN.replace(r#"["zoo:lenet5", "zoo:mlp"]"#, r#""zoo:lenet5""#);
    assert_ne!(edited, COST_PLAN);
    std::fs::write(dir.join("plan.toml"), &edited).unwrap();
    let refused = sweep(tmp.path(), &["collect", "out"]);
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    for id in &mlp {
        assert!(
            stderr(&refused).contains(id.as_str()),
            "{}",
            stderr(&refused)
        );
    }
    assert!(stderr(&refused).contains("--drop-unplanned"));
    assert_eq!(
        std::fs::read_to_string(dir.join("results.csv")).unwrap(),
        table
    );
    let status = sweep(tmp.path(), &["status", "out", "--format", "json"]);
    assert!(status.status.success(), "{}", stderr(&status));
    let s: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        (s["total"].as_u64(), s["done"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(s["cells"].as_array().unwrap().len(), 3);
    assert!(s["cells"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["state"] == "done"));
    let unplanned: Vec<&str> = s["unplanned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(unplanned, mlp);
    let text = sweep(tmp.path(), &["status", "out"]);
    assert!(
        stdout(&text).contains("not in the plan"),
        "{}",
        stdout(&text)
    );

    let dropped = sweep(
        tmp.path(),
        &["collect", "out", "--drop-unplanned", "--format", "json"],
    );
    assert!(dropped.status.success(), "{}", stderr(&dropped));
    let c: serde_json::Value = serde_json::from_slice(&dropped.stdout).unwrap();
    assert_eq!(
        (c["rows"].as_u64(), c["previous_rows"].as_u64()),
        (Some(6), Some(12))
    );
    assert_eq!(c["dropped"].as_array().unwrap().len(), 3);
    assert!(
        stderr(&dropped).contains("6 rows, 6 fewer than the 12 of the table it replaced"),
        "{}",
        stderr(&dropped)
    );
    assert_eq!(csv_rows(&dir.join("results.csv")).len(), 1 + 6);

    // A cell that is no longer done: the smaller table says so too.
    let lenet = cell_dirs(&dir)
        .into_iter()
        .find(|d| {
            d.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("lenet5_")
        })
        .unwrap();
    std::fs::remove_file(lenet.join("done")).unwrap();
    let shrunk = sweep(tmp.path(), &["collect", "out", "--drop-unplanned"]);
    assert!(shrunk.status.success(), "{}", stderr(&shrunk));
    assert!(
        stdout(&shrunk).starts_with("4 rows: "),
        "{}",
        stdout(&shrunk)
    );
    assert!(
        stderr(&shrunk).contains("2 fewer than the 6"),
        "{}",
        stderr(&shrunk)
    );
}

/// `--dry-run` shows where a plan's cells come from (a 2×2 grid and two [[cell]]s run 6), each
/// cell's table and the defaults it takes, and checks every cell as `train` / `run` would.
#[test]
fn dry_run_lists_each_tables_cells_and_checks_them_all() {
    let tmp = tempfile::tempdir().unwrap();
    let plan =
        "name = \"d\"\n[grid]\nmodel = \"zoo:lenet5\"\nschedule = [\"static\", \"cosine\"]\n\
                bits = [\"8\", \"3:8\"]\n\
                [[cell]]\nschedule = \"cosine\"\ngrad_bits = [6, 7]\n\
                [[cell]]\nschedule = \"static\"\nbits = 8\n";
    write_plan(tmp.path(), plan);
    let dry = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--dry-run"],
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    let listing = stdout(&dry);
    for line in [
        "sweep d: 8 cells in ",
        "  [grid] (line 2): schedule 2 × bits 2 = 4 combinations → 4 cells",
        "  [[cell]] #1 (line 6): bits 2 × grad_bits 2 = 4 combinations of its schedule, \
         grad_bits and [grid]'s model, bits → 4 cells",
        "  [[cell]] #2 (line 9): 1 combination of its schedule, bits and [grid]'s model; \
         1 the same run as an earlier cell → 0 cells",
        "  [[cell]] #2 (line 9) model=zoo:lenet5 schedule=static bits=8 is the same run as #0",
        "  model=zoo:lenet5 schedule=static bits=8; defaults: grad_bits=8",
    ] {
        assert!(listing.contains(line), "`{line}` not in:\n{listing}");
    }
    assert!(
        listing.contains(" from [[cell]] #1 (line 6)\n"),
        "{listing}"
    );
    assert_eq!(listing.lines().filter(|l| l.starts_with('#')).count(), 8);
    assert!(!tmp.path().join("out").exists());
    // Each training cell is checked as `cptsim train` would check it.
    let train = "name = \"t\"\n[grid]\nmodel = \"zoo:lenet5\"\n[train]\ndata = \"synthetic\"\n\
                 iters = 50\n[[cell]]\nschedule = \"cosine\"\ncycles = [4, 64]\n\
                 [[cell]]\nschedule = \"bogus\"\n";
    write_plan(tmp.path(), train);
    let bad = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--dry-run"],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("line 9, column 14: ")
            && stderr(&bad).contains("64 cycles do not fit in 50 iterations"),
        "{}",
        stderr(&bad)
    );
    write_plan(tmp.path(), &train.replace("[4, 64]", "4"));
    let bad = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--dry-run"],
    );
    assert!(
        stderr(&bad).contains("line 11, column 12: ") && stderr(&bad).contains("'bogus'"),
        "{}",
        stderr(&bad)
    );
    write_plan(
        tmp.path(),
        &train
            .replace("[4, 64]", "4")
            .replace("\"bogus\"", "\"linear\"")
            .replace("synthetic", "mnist:no/such/dir"),
    );
    let bad = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--dry-run"],
    );
    assert!(
        stderr(&bad).contains("line 5, column 8: key `data`")
            && stderr(&bad).contains("directory no/such/dir not found"),
        "{}",
        stderr(&bad)
    );
}

/// The accumulator study's plan, as shipped: 18 training cells (static 8/8 and CPT 3-8/8, each
/// with an exact accumulator and 32/24/20/16 bits wrapping or saturating), each checked as
/// `cptsim train` would check it, nothing run.
#[test]
fn the_accumulator_study_plan_lists_its_cells_in_a_dry_run() {
    let plan = workspace_root().join("examples/sweeps/accumulator-fmnist-resnet20.toml");
    let data = workspace_root().join("../shared/data/fashion-mnist");
    if !data.is_dir() {
        eprintln!(
            "SKIPPED: the_accumulator_study_plan_lists_its_cells_in_a_dry_run: no {}",
            data.display()
        );
        return;
    }
    let text = std::fs::read_to_string(plan).unwrap();
    let relative = "fashion-mnist:../shared/data/fashion-mnist";
    assert!(
        text.contains(relative),
        "the plan no longer reads `{relative}`"
    );
    let tmp = tempfile::tempdir().unwrap();
    let absolute = format!("fashion-mnist:{}", data.display());
    write_plan(tmp.path(), &text.replace(relative, &absolute));
    let dry = sweep(
        tmp.path(),
        &["run", "plan.toml", "--out", "out", "--dry-run"],
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    let listing = stdout(&dry);
    assert!(listing.contains(": 18 cells in "), "{listing}");
    for acc in ["exact", "32:wrap", "20:wrap", "24:saturate", "16:saturate"] {
        let flag = format!("--arithmetic=int --grad-bits=8 --seed=0 --accumulator={acc} ");
        assert_eq!(listing.matches(&flag).count(), 2, "`{flag}` in:\n{listing}");
    }
    assert_eq!(listing.matches("--schedule=cosine --bits=3:8 ").count(), 9);
    assert_eq!(listing.matches(" --cycles=8 ").count(), 9);
    assert!(!tmp.path().join("out").exists());
}

/// The sweep is a library of its own: its modules name no argument-parser type (the command
/// line is read in `cmd/sweep_args.rs`).
#[test]
fn the_sweep_modules_know_no_argument_parser() {
    let dir = workspace_root().join("cli/src/cmd/sweep");
    let mut stack = vec![dir];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(!text.contains("clap"), "{} names clap", path.display());
            }
        }
    }
    assert!(files > 10, "{files} files");
}
