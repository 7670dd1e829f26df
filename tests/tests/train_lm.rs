//! Language models train on real English text, the `fortunes` corpus (Debian's package, installed
//! by `.ci/run`): the zoo's small 2-layer LSTM and Transformer LMs, character level, under CPT
//! 4-8/8 and static 8/8, end well below the unigram baseline's perplexity, and their recorded
//! traces cost on the ZC706 model. Plus the clear errors of text data.

use std::path::{Path, PathBuf};

use cptsim_e2e::{fortunes_corpus, run, stderr, stdout};

/// The first `chars` characters of the fortunes corpus as a file in `dir` (the test's corpus:
/// 90 / 5 / 5 % train / valid / test), or `None` (a printed skip) without the package.
fn corpus(dir: &Path, chars: usize) -> Option<PathBuf> {
    let all = fortunes_corpus(dir)
        .unwrap_or_else(|e| panic!("building the fortunes corpus in {}: {e}", dir.display()))?;
    let text = std::fs::read_to_string(&all).unwrap();
    let cut: String = text.chars().take(chars).collect();
    let path = dir.join("fortunes-cut.txt");
    std::fs::write(&path, cut).unwrap();
    Some(path)
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// Trains `model` on `data` under `schedule_flags`; returns summary.json's values and the
/// output directory.
fn train(
    dir: &Path,
    name: &str,
    model: &str,
    data: &Path,
    extra: &[&str],
) -> (serde_json::Value, PathBuf) {
    let out = dir.join(name);
    let data = format!("text:{}", data.display());
    let o = out.display().to_string();
    let mut args = vec![
        "train", "--model", model, "--data", &data, "--out", &o, "--format", "json",
    ];
    args.extend_from_slice(extra);
    (json(&run(&args)), out)
}

fn f(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no `{key}` in {v}"))
}

/// The trace of `out` costed on ZC706 (`run --trace`, the model at the run's vocabulary and
/// window, which summary.json records).
fn zc706(model: &str, summary: &serde_json::Value, out: &Path) -> serde_json::Value {
    let trace = out.join("trace.csv").display().to_string();
    let vocab = summary["vocab"].as_u64().unwrap().to_string();
    let seq = summary["seq_len"].as_u64().unwrap().to_string();
    json(&run(&[
        "run",
        "--model",
        model,
        "--vocab",
        &vocab,
        "--seq-len",
        &seq,
        "--trace",
        &trace,
        "--accel",
        "zc706",
        "--format",
        "json",
    ]))
}

/// Static 8/8 and CPT 4-8/8 runs of `model`: both beat the unigram model by far, CPT costs
/// fewer BitOPs, and both traces cost on ZC706.
fn static_and_cpt(model: &str, flags: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let Some(data) = corpus(tmp.path(), 400_000) else {
        return;
    };
    let mut fixed = flags.to_vec();
    fixed.extend_from_slice(&["--schedule", "static", "--bits", "8", "--grad-bits", "8"]);
    let mut cyclic = flags.to_vec();
    cyclic.extend_from_slice(&[
        "--schedule",
        "cosine",
        "--bits",
        "4:8",
        "--grad-bits",
        "8",
        "--cycles",
        "4",
    ]);
    let mut gbitops = Vec::new();
    for (name, extra) in [("static", &fixed), ("cpt", &cyclic)] {
        let (s, out) = train(tmp.path(), name, model, &data, extra);
        let (ppl, unigram) = (f(&s, "final_test_ppl"), f(&s, "unigram_test_ppl"));
        eprintln!("{model} {name}: test perplexity {ppl:.2}, unigram {unigram:.2}");
        assert!(
            ppl < 0.6 * unigram,
            "{model} {name}: perplexity {ppl} is not well below the unigram model's {unigram}"
        );
        let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
        assert!(
            metrics
                .lines()
                .next()
                .unwrap()
                .ends_with(",test_ppl,val_ppl"),
            "{metrics}"
        );
        let last = metrics.lines().last().unwrap();
        let val_ppl: f64 = last.rsplit(',').next().unwrap().parse().unwrap();
        assert!(
            val_ppl < 0.6 * unigram,
            "{model} {name}: validation perplexity {val_ppl} is not well below {unigram}"
        );
        let cost = zc706(model, &s, &out);
        let bitops = f(&cost, "gbitops");
        assert!(
            (bitops - f(&s, "gbitops")).abs() <= 1e-9 * bitops,
            "run --trace costs {bitops} GBitOPs, train reported {}",
            f(&s, "gbitops")
        );
        let acc = &cost["accelerators"][0];
        assert_eq!(acc["name"], "zc706");
        for key in ["latency_s", "energy_j"] {
            assert!(
                acc[key].as_f64().unwrap_or(0.0) > 0.0,
                "no ZC706 {key} for {model} {name}: {acc}"
            );
        }
        gbitops.push(f(&s, "gbitops"));
    }
    assert!(gbitops[1] < gbitops[0], "CPT {gbitops:?} vs static");
}

#[test]
fn an_lstm_lm_learns_fortunes_under_cpt_and_static_precision() {
    static_and_cpt(
        "zoo:lstm-lm",
        &[
            "--batch",
            "16",
            "--iters",
            "300",
            "--eval-every",
            "150",
            "--lr",
            "3",
        ],
    );
}

#[test]
fn a_transformer_lm_learns_fortunes_under_cpt_and_static_precision() {
    static_and_cpt(
        "zoo:transformer-lm",
        &[
            "--batch",
            "8",
            "--seq-len",
            "32",
            "--iters",
            "400",
            "--eval-every",
            "200",
            "--lr",
            "0.05",
        ],
    );
}

#[test]
fn text_data_errors_name_the_file_or_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let short = tmp.path().join("short.txt");
    std::fs::write(&short, "abcdefghijklmnopqrstuvwxyz".repeat(4)).unwrap();
    let text = |p: &Path| format!("text:{}", p.display());
    for (model, data, want) in [
        ("zoo:lstm-lm", text(&empty), "empty.txt"),
        ("zoo:lstm-lm", text(&short), "short.txt"),
        ("zoo:resnet20", text(&short), "not a language model"),
    ] {
        let out = run(&["train", "--model", model, "--data", &data, "--iters", "2"]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{model} {data}: succeeded");
        assert!(err.contains(want), "{model} {data}: {err}");
        cptsim_e2e::assert_one_clear_line(&err);
    }
}

/// A language-model run stopped half-way and resumed writes the same metrics and trace as one
/// run straight through (the window cursor, dropout's mask stream and the quantizers' noise
/// resume exactly). Needs no corpus: the text is generated.
#[test]
fn an_lm_run_resumes_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let words = [
        "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far",
    ];
    let text: String = (0..6000usize)
        .map(|i| words[(i * 7 + i / 3) % words.len()])
        .collect::<Vec<_>>()
        .join(" ");
    let data = tmp.path().join("words.txt");
    std::fs::write(&data, text).unwrap();
    let data = format!("text:{}", data.display());
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let base = [
        "train",
        "--model",
        "zoo:lstm-lm",
        "--data",
        &data,
        "--batch",
        "4",
        "--iters",
        "24",
        "--eval-every",
        "8",
        "--schedule",
        "cosine",
        "--bits",
        "4:8",
        "--cycles",
        "2",
    ];
    let straight = run(&[&base[..], &["--out", &a]].concat());
    assert!(straight.status.success(), "{}", stderr(&straight));
    let half = run(&[&base[..], &["--out", &b, "--stop-at", "12"]].concat());
    assert!(half.status.success(), "{}", stderr(&half));
    let rest = run(&["train", "--resume", &b]);
    assert!(rest.status.success(), "{}", stderr(&rest));
    for file in ["metrics.csv", "trace.csv"] {
        let read = |d: &str| std::fs::read(Path::new(d).join(file)).unwrap();
        assert_eq!(read(&a), read(&b), "{file} differs after resuming");
    }
}
