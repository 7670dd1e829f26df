//! `cptsim validate`: every published figure cptsim claims to match is within its tolerance, the
//! JSON carries each row's numbers, and the committed validation page
//! (`docs/src/accelerators/validation.md`) is exactly the command's markdown, so the page cannot
//! drift from the code.

use cptsim_e2e::{run, stderr, stdout, workspace_root};

#[test]
fn the_committed_validation_page_is_the_commands_output() {
    let out = run(&["validate", "--format", "markdown"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = workspace_root().join("docs/src/accelerators/validation.md");
    let committed =
        std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    assert!(
        committed == stdout(&out),
        "{} differs from `cptsim validate --format markdown`: regenerate it with \
         `cptsim validate --format markdown > docs/src/accelerators/validation.md`",
        page.display()
    );
}

#[test]
fn every_held_row_passes_and_the_json_has_the_numbers() {
    let out = run(&["validate", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(rows.len() > 150, "{}", rows.len());
    for r in &rows {
        assert!(r["reference"].is_number() && r["cptsim"].is_number(), "{r}");
        assert_ne!(r["result"], "FAIL", "{r}");
    }
    // the headline at the sweep's bits is held; at the stated bits it is shown only
    let headline: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["group"].as_str().unwrap().contains("headline"))
        .collect();
    let held: Vec<&&serde_json::Value> =
        headline.iter().filter(|r| r["result"] == "pass").collect();
    assert_eq!(held.len(), 2);
    assert!(held
        .iter()
        .all(|r| r["model"].as_str().unwrap().contains("paper-sweep")));
}
