//! Parsing, key and value errors of the configurations.

use super::*;

#[test]
fn every_builtin_parses() {
    for name in builtin_names() {
        let c = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(c.dram_bits_per_cycle() > 0.0, "{name}");
    }
    assert_eq!(load("bitfusion").unwrap().name, "bitfusion-eyeriss-iso");
}

fn edited(from: &str, to: &str) -> String {
    let t = builtin_text("bitfusion").unwrap();
    assert!(t.contains(from), "{from}");
    t.replacen(from, to, 1)
}

#[test]
fn unknown_key_is_named() {
    let e = parse(
        &edited("clock_mhz = 500", "clock_mhz = 500\nturbo = true"),
        "x.toml",
    )
    .unwrap_err();
    let s = e.to_string();
    assert!(s.contains("x.toml") && s.contains("turbo"), "{s}");
}

#[test]
fn parse_errors_are_one_line_with_position() {
    let e = parse(
        &edited("clock_mhz = 500", "clock_mhz = 500\nturbo = true"),
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    let line = edited("clock_mhz = 500", "clock_mhz = 500\nturbo = true")
        .lines()
        .position(|l| l.starts_with("turbo"))
        .unwrap()
        + 1;
    assert!(!e.contains('\n'), "{e}");
    assert!(e.contains(&format!("line {line}, column 1")), "{e}");
    let e = parse("name = [", "bad.toml").unwrap_err().to_string();
    assert!(!e.contains('\n') && e.contains("line 1, column 9"), "{e}");
}

#[test]
fn missing_file_error_has_no_repeated_cause() {
    let e = load("/no/such/accel.toml").unwrap_err();
    assert!(std::error::Error::source(&e).is_none());
    let s = anyhow_like(&e);
    assert_eq!(s.matches("os error 2").count(), 1, "{s}");
}

/// `{:#}` of an error chain the way `anyhow` prints it: each cause after a colon.
fn anyhow_like(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(&format!(": {c}"));
        cause = c.source();
    }
    s
}

#[test]
fn zero_buffer_is_named() {
    let e = parse(&edited("input_kib = 32", "input_kib = 0"), "x.toml").unwrap_err();
    assert!(e.to_string().contains("buffers.input_kib"), "{e}");
}

#[test]
fn negative_bandwidth_is_named() {
    let e = parse(
        &edited("bits_per_cycle = 192", "bits_per_cycle = -192"),
        "x.toml",
    )
    .unwrap_err();
    assert!(e.to_string().contains("dram.bits_per_cycle"), "{e}");
}

#[test]
fn zc706_limits_are_enforced() {
    let t = builtin_text("zc706").unwrap();
    let over = t.replacen("peak_gb_per_s = 12.8", "peak_gb_per_s = 25.6", 1);
    let e = parse(&over, "z").unwrap_err();
    assert!(e.to_string().contains("dram.peak_gb_per_s"), "{e}");
    let no_section = parse(
        &edited("engine = \"bitfusion\"", "engine = \"zc706-bit-linear\""),
        "z",
    );
    let e = no_section.unwrap_err().to_string();
    assert!(
        e.contains("missing field `zc706` (engine `zc706-bit-linear`)"),
        "{e}"
    );
}

#[test]
fn zc706_buffer_sum_cannot_wrap_past_the_board_check() {
    // u64::MAX KiB: (a + b + c) · 8192 wrapped to a small number before
    let t = builtin_text("zc706").unwrap();
    let huge = t.replacen("input_kib = 512", &format!("input_kib = {}", i64::MAX), 1);
    let e = parse(&huge, "z").unwrap_err().to_string();
    assert!(e.contains("buffers.input_kib"), "{e}");
    // within the per-buffer range but beyond the board's block RAM
    let over = t.replacen("input_kib = 512", "input_kib = 1073741824", 1);
    let e = parse(&over, "z").unwrap_err().to_string();
    assert!(e.contains("`buffers`") && e.contains("block RAM"), "{e}");
}

#[test]
fn extreme_values_that_would_give_nan_or_inf_are_named() {
    for (from, to, key) in [
        ("clock_mhz = 500", "clock_mhz = 1e-300", "clock_mhz"),
        ("clock_mhz = 500", "clock_mhz = 1e300", "clock_mhz"),
        (
            "bits_per_cycle = 192",
            "bits_per_cycle = 1e-300",
            "dram.bits_per_cycle",
        ),
        (
            "dram_pj_per_bit = 15.0",
            "dram_pj_per_bit = 1e308",
            "energy.dram_pj_per_bit",
        ),
        ("rows = 16", "rows = 4294967296", "array.rows"),
    ] {
        let e = parse(&edited(from, to), "x.toml").unwrap_err().to_string();
        assert!(e.contains(&format!("`{key}`")), "{to}: {e}");
    }
    let t = builtin_text("zc706").unwrap();
    let slow = t.replacen("utilisation = 0.7846", "utilisation = 1e-300", 1);
    let e = parse(&slow, "z").unwrap_err().to_string();
    assert!(e.contains("zc706.utilisation"), "{e}");
    // each value in range, but the derived bandwidth per cycle is not
    let fast = t
        .replacen("clock_mhz = 200", "clock_mhz = 1e5", 1)
        .replacen("peak_gb_per_s = 12.8", "peak_gb_per_s = 1e-6", 1);
    let e = parse(&fast, "z").unwrap_err().to_string();
    assert!(e.contains("`dram`") && e.contains("bits per cycle"), "{e}");
}

/// Asserts that every key line of `section` in every built-in carries its source or the
/// word assumption (on the line or in the comment lines just above it).
fn every_constant_in_names_its_source(section: &str) {
    for (name, text) in BUILTINS {
        let mut comments = String::new();
        let mut inside = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                inside = t == section;
                comments.clear();
            } else if t.starts_with('#') {
                comments.push_str(t);
            } else if inside && t.contains('=') {
                let said = format!("{comments} {t}").to_lowercase();
                assert!(
                    said.contains("source") || said.contains("assumption"),
                    "{name}: `{t}` has neither a source nor the word assumption"
                );
            } else if t.is_empty() {
                comments.clear();
            }
        }
    }
}

#[test]
fn every_energy_constant_names_its_source_or_says_assumption() {
    every_constant_in_names_its_source("[energy]");
}

#[test]
fn a_row_stationary_config_names_the_key_it_lacks() {
    let t = builtin_text("eyeriss").unwrap();
    // the whole section
    let start = t.find("[row_stationary]").unwrap();
    let end = t.find("[dram]").unwrap();
    let without = format!("{}{}", &t[..start], &t[end..]);
    let e = parse(&without, "e.toml").unwrap_err().to_string();
    assert!(
        e.contains("missing field `row_stationary` (engine `eyeriss`)") && e.contains("e.toml"),
        "{e}"
    );
    // one key of it
    let e = parse(&t.replacen("psum_spad_words = 24", "", 1), "e.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("psum_spad_words") && !e.contains('\n'), "{e}");
    // values
    for (from, to, key) in [
        ("glb_kib = 108", "glb_kib = 0", "row_stationary.glb_kib"),
        (
            "glb_banks = 27",
            "glb_banks = 0",
            "row_stationary.glb_banks",
        ),
        (
            "glb_banks = 27",
            "glb_banks = 60000",
            "row_stationary.glb_banks",
        ),
        (
            "ifmap_spad_words = 12",
            "ifmap_spad_words = 0",
            "row_stationary.ifmap_spad_words",
        ),
        (
            "array_pj_per_bit = 0.4",
            "array_pj_per_bit = -1",
            "row_stationary.array_pj_per_bit",
        ),
    ] {
        let e = parse(&t.replacen(from, to, 1), "e.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("`{key}`")), "{to}: {e}");
    }
    // tiled buffers on eyeriss, the RS section on another engine, no buffers elsewhere
    let e = parse(
        &format!("{t}\n[buffers]\ninput_kib = 1\nweight_kib = 1\noutput_kib = 1\n"),
        "e",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("unknown field `buffers`")
            && e.contains("`row_stationary`")
            && e.contains("(engine `eyeriss`)")
            && e.contains(&format!("line {}, column 2", t.lines().count() + 2)),
        "{e}"
    );
    let section = &t[start..end];
    let bf = builtin_text("bitfusion").unwrap();
    let e = parse(&format!("{bf}\n{section}"), "b")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `row_stationary`"), "{e}");
    let bs = bf.find("[buffers]").unwrap();
    let be = bf.find("[dram]").unwrap();
    let e = parse(&format!("{}{}", &bf[..bs], &bf[be..]), "b")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("missing field `buffers` (engine `bitfusion`)"),
        "{e}"
    );
}

#[test]
fn sections_of_other_engines_and_unknown_names_are_errors_with_their_place() {
    let bf = builtin_text("bitfusion").unwrap();
    let line_of =
        |text: &str, key: &str| text.lines().position(|l| l.starts_with(key)).unwrap() + 1;
    // channel lanes are the ZC706 engines' depthwise mode only
    let lanes = bf.replacen("depthwise = \"dense\"", "depthwise = \"channel-lanes\"", 1);
    let e = parse(&lanes, "b").unwrap_err().to_string();
    let line = line_of(&lanes, "depthwise");
    assert!(
        e.contains("unknown variant `channel-lanes`")
            && e.contains(&format!("line {line}, column 13")),
        "{e}"
    );
    // an unknown engine is named with its line
    let nope = bf.replacen("engine = \"bitfusion\"", "engine = \"tpu\"", 1);
    let e = parse(&nope, "b").unwrap_err().to_string();
    let line = line_of(&nope, "engine");
    assert!(
        e.contains("unknown variant `tpu`")
            && e.contains("zc706-bit-linear")
            && e.contains(&format!("line {line}, column 10")),
        "{e}"
    );
    // no engine at all, or not a name
    let start = bf.find("engine = ").unwrap();
    let end = start + bf[start..].find('\n').unwrap();
    let none = format!("{}{}", &bf[..start], &bf[end..]);
    let e = parse(&none, "b").unwrap_err().to_string();
    assert!(e.contains("missing field `engine`"), "{e}");
    let number = format!("{}engine = 3{}", &bf[..start], &bf[end..]);
    let e = parse(&number, "b").unwrap_err().to_string();
    let line = line_of(&number, "engine");
    assert!(
        e.contains("key `engine` must be a string")
            && e.contains(&format!("line {line}, column 10")),
        "{e}"
    );
    // a [zc706] section on a tiled engine
    let z = builtin_text("zc706").unwrap();
    let zs = z.find("[zc706]").unwrap();
    let ze = zs + z[zs..].find("[energy]").unwrap();
    let e = parse(&format!("{bf}\n{}", &z[zs..ze]), "b")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown field `zc706`") && e.contains("(engine `bitfusion`)"),
        "{e}"
    );
}

#[test]
fn a_wrong_type_inside_an_engine_section_keeps_its_line() {
    let z = builtin_text("zc706").unwrap();
    let bad = z.replacen("utilisation = 0.7846", "utilisation = \"high\"", 1);
    let line = bad
        .lines()
        .position(|l| l.starts_with("utilisation"))
        .unwrap()
        + 1;
    let e = parse(&bad, "z").unwrap_err().to_string();
    assert!(
        e.contains(&format!("line {line}, column 15")) && e.contains("invalid type"),
        "{e}"
    );
}

#[test]
fn every_row_stationary_constant_names_its_source_or_says_assumption() {
    every_constant_in_names_its_source("[row_stationary]");
}

#[test]
fn missing_file_lists_builtins() {
    let e = load("/no/such/accel.toml").unwrap_err().to_string();
    assert!(
        e.contains("/no/such/accel.toml") && e.contains("bitfusion-stripes-iso"),
        "{e}"
    );
}

#[test]
fn every_builtin_states_its_accumulator_width_with_a_source_and_bad_ones_are_named() {
    for (name, text) in BUILTINS {
        let c = parse(text, name).unwrap();
        assert!(c.accumulator_bits.is_some(), "{name}: no accumulator_bits");
        let above = text.split("\naccumulator_bits").next().unwrap_or("");
        let comment = above.lines().rev().take_while(|l| l.starts_with('#'));
        let said = comment.collect::<String>().to_lowercase();
        assert!(
            said.contains("source") || said.contains("assumption"),
            "{name}: accumulator_bits has neither a source nor the word assumption"
        );
    }
    let t = builtin_text("zc706").unwrap();
    for bad in ["1", "65"] {
        let text = t.replacen(
            "accumulator_bits = 32",
            &format!("accumulator_bits = {bad}"),
            1,
        );
        let e = parse(&text, "x.toml").unwrap_err().to_string();
        assert!(
            e.contains("accumulator_bits") && e.contains("2..=64"),
            "{e}"
        );
    }
}
