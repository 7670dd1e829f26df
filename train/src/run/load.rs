//! What a run loads before its first iteration: the model (a zoo or ONNX graph, its head fitted
//! to the data's classes, or a language model over a corpus's vocabulary) and the data
//! (MNIST/Fashion-MNIST, CIFAR, synthetic images, synthetic token sequences for a sequence
//! classifier, or a text corpus), with `subset`, `test_subset`, `val_split` and `classes` applied. Errors name the key as its flag (`--data mnist:/x: …`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use cptsim_models::head::{fit_head, load_graph_for, HeadFit};
use cptsim_models::{Graph, LayerRole, ModelSummary};
use cptsim_nn::data::file::find_file;
use cptsim_nn::data::text::{self, Corpus, TextData, TextKind, TokenLayout};
use cptsim_nn::data::tokens::synthetic_tokens;
use cptsim_nn::data::{load_cifar, load_mnist, synthetic_parts, CifarKind, Dataset, Split};
use cptsim_traces::Bits;

use super::observer::Notice;
use crate::feed::TokenData;
use crate::plan::{Length, PolicyKind, TrainPlan};
use crate::{TrainData, TrainNet};

/// Images of the synthetic dataset (training + test).
const SYNTHETIC_TRAIN: usize = 4096;
const SYNTHETIC_TEST: usize = 1024;
/// Sequences of the synthetic token data (training; test, rounded down to whole batches).
const SYNTHETIC_SEQUENCES: usize = 4096;
const SYNTHETIC_SEQUENCES_TEST: usize = 512;

pub use crate::plan::DATA_KINDS;

/// Reads the corpus a text `data` names (`None` for image data).
pub(crate) fn load_corpus(plan: &TrainPlan) -> anyhow::Result<Option<Corpus>> {
    let spec = plan.data.as_str();
    let Some((kind, path)) = spec.split_once(':').filter(|_| plan.is_text()) else {
        return Ok(None);
    };
    let path = Path::new(path);
    let corpus = match kind {
        "text" => text::load_chars(path),
        "ptb" => text::load_words(TextKind::Ptb, path),
        _ => text::load_words(TextKind::WikiText, path),
    }
    .with_context(|| format!("--data {spec}"))?;
    if plan.subset.is_some()
        || plan.test_subset.is_some()
        || plan.val_split > 0.0
        || plan.classes.is_some()
    {
        bail!(
            "--data {spec}: --subset, --test-subset, --val-split and --classes apply to image \
             data (a corpus brings its own splits and vocabulary)"
        );
    }
    Ok(Some(corpus))
}

/// The corpus cut into `batch` streams read in windows of the model's sequence length.
pub(crate) fn text_data(
    plan: &TrainPlan,
    corpus: Corpus,
    net: &TrainNet,
) -> anyhow::Result<TextData> {
    let Some((layout, shape)) = net.tokens.clone() else {
        bail!(
            "--data {}: --model {} does not take token ids (a corpus trains a language model: \
             zoo:lstm-lm, zoo:transformer-lm or an ONNX LM)",
            plan.data,
            plan.model
        );
    };
    let bptt = match (layout, shape.as_slice()) {
        (TokenLayout::BatchFirst, [_, t]) | (TokenLayout::SeqFirst, [t, _]) => *t,
        _ => bail!(
            "--model {}: token input {shape:?} is not [B, T] or [T, B]",
            plan.model
        ),
    };
    TextData::new(corpus, plan.batch, bptt, layout).with_context(|| format!("--data {}", plan.data))
}

/// Loads `model` as a language model over `corpus`'s vocabulary at `batch` streams of
/// `seq_len` tokens.
pub(crate) fn load_lm(plan: &TrainPlan, corpus: &Corpus) -> anyhow::Result<Graph> {
    let (spec, batch) = (plan.model.as_str(), plan.batch.max(1));
    cptsim_models::load_lm_graph(spec, batch, plan.seq_len, corpus.vocab.len()).with_context(|| {
        format!(
            "--model {spec} at --batch {batch} for --data {} ({} tokens of vocabulary)",
            plan.data,
            corpus.vocab.len()
        )
    })
}

/// `--data synthetic` for a model that reads token ids: a sequence classifier (output
/// `[B, classes]`) gets seeded sequences of its input's length, ids within its embedding's
/// vocabulary and one label per sequence over its outputs ([`synthetic_tokens`]), `subset`
/// applied. `None` for other data or a model that reads no token ids.
pub(crate) fn token_data(
    plan: &TrainPlan,
    graph: &Graph,
    net: &TrainNet,
) -> anyhow::Result<Option<TokenData>> {
    let Some((layout, shape)) = net.tokens.clone().filter(|_| plan.data == "synthetic") else {
        return Ok(None);
    };
    let spec = &plan.model;
    let out = graph.shape(graph.output);
    let (&[batch, classes], Some(vocab)) = (out, net.vocab) else {
        bail!(
            "--data synthetic: --model {spec} reads token ids {shape:?} and outputs {out:?}; \
             synthetic sequences train a classifier of one class per sequence (output \
             [B, classes]); a language model trains on a corpus (text:FILE, ptb:DIR or \
             wikitext:DIR)"
        );
    };
    let seq = match (layout, shape.as_slice()) {
        (TokenLayout::BatchFirst, [_, t]) | (TokenLayout::SeqFirst, [t, _]) => *t,
        _ => bail!("--model {spec}: token input {shape:?} is not [B, T] or [T, B]"),
    };
    if plan.val_split > 0.0 {
        bail!("--val-split applies to image data (synthetic sequences come with a test set)");
    }
    if plan.policy != PolicyKind::Schedule {
        bail!(
            "--policy {}: sequence models train under --policy schedule (its per-sample and \
             learned policies are written for image models)",
            plan.policy
        );
    }
    let test = (SYNTHETIC_SEQUENCES_TEST / batch).max(1) * batch;
    let mut train = synthetic_tokens(SYNTHETIC_SEQUENCES + test, seq, vocab, classes, plan.seed)
        .with_context(|| format!("--data synthetic for --model {spec}"))?;
    let mut test = train.split_off(SYNTHETIC_SEQUENCES);
    if let Some(n) = plan.subset {
        train.truncate(n);
    }
    if let Some(n) = plan.test_subset {
        if n < batch {
            bail!("--test-subset {n}: fewer sequences than one batch of {batch}");
        }
        test.truncate(n / batch * batch);
    }
    if train.batches(batch) == 0 {
        bail!(
            "--subset {}: fewer sequences than one batch of {batch}",
            train.len()
        );
    }
    Ok(Some(TokenData {
        train,
        test,
        layout,
        batch,
    }))
}

/// Loads the training and test sets `data` names (synthetic ones shaped for the model), then
/// applies `subset`, `test_subset` and `val_split`.
pub(crate) fn load_data(
    plan: &TrainPlan,
    input: [usize; 3],
    classes: usize,
) -> anyhow::Result<TrainData> {
    let spec = plan.data.as_str();
    let (kind, dir) = match spec.split_once(':') {
        Some((k, d)) => (k, Some(PathBuf::from(d))),
        None => (spec, None),
    };
    let need_dir = |dir: &Option<PathBuf>| -> anyhow::Result<PathBuf> {
        let d = dir
            .clone()
            .with_context(|| format!("--data {kind}: needs a directory ({kind}:DIR)"))?;
        if !d.is_dir() {
            bail!("--data {spec}: directory {} not found", d.display());
        }
        Ok(d)
    };
    let load = |f: &dyn Fn(&Path, Split) -> cptsim_nn::Result<Dataset>, d: &Path| {
        let tr = f(d, Split::Train).with_context(|| format!("--data {spec}"))?;
        let te = f(d, Split::Test).with_context(|| format!("--data {spec}"))?;
        anyhow::Ok((tr, te))
    };
    let (mut train, mut test) = match kind {
        "mnist" | "fashion-mnist" => {
            let fashion = kind == "fashion-mnist";
            load(&|d, s| load_mnist(d, s, fashion), &need_dir(&dir)?)?
        }
        "cifar10" | "cifar100" => {
            let k = if kind == "cifar10" {
                CifarKind::Cifar10
            } else {
                CifarKind::Cifar100
            };
            load(&|d, s| load_cifar(d, s, k), &need_dir(&dir)?)?
        }
        "synthetic" => {
            if dir.is_some() {
                bail!("--data synthetic takes no directory");
            }
            // Only the images the run uses are kept: at 224 × 224 the whole set is 770 MB.
            let n_train = plan
                .subset
                .map_or(SYNTHETIC_TRAIN, |n| n.min(SYNTHETIC_TRAIN));
            let n_test = plan
                .test_subset
                .map_or(SYNTHETIC_TEST, |n| n.min(SYNTHETIC_TEST));
            let parts = [0..n_train, SYNTHETIC_TRAIN..SYNTHETIC_TRAIN + n_test];
            let total = SYNTHETIC_TRAIN + SYNTHETIC_TEST;
            let mut sets = synthetic_parts(total, &parts, input, classes, 60.0, plan.seed)?;
            let test = sets.pop().context("synthetic test set")?;
            let train = sets.pop().context("synthetic training set")?;
            (train, test)
        }
        _ => bail!("--data {spec}: unknown dataset kind `{kind}` (expected {DATA_KINDS})"),
    };
    if let Some(n) = plan.subset {
        train.truncate(n);
    }
    if let Some(n) = plan.test_subset {
        test.truncate(n);
    }
    let (train, val) = if plan.val_split > 0.0 {
        let (t, v) = train
            .split_validation(plan.val_split, plan.seed)
            .context("--val-split")?;
        if t.is_empty() || v.is_empty() {
            bail!(
                "--val-split {}: leaves {} training and {} validation images",
                plan.val_split,
                t.len(),
                v.len()
            );
        }
        (t, Some(v))
    } else {
        (train, None)
    };
    Ok(TrainData { train, test, val })
}

/// Classes of the `data` kind, known before anything is read (`None`: synthetic data, whose
/// classes follow the model's head).
fn data_classes(spec: &str) -> Option<usize> {
    match spec.split_once(':').map_or(spec, |(kind, _)| kind) {
        "mnist" | "fashion-mnist" => Some(10),
        "cifar10" => Some(CifarKind::Cifar10.classes()),
        "cifar100" => Some(CifarKind::Cifar100.classes()),
        _ => None,
    }
}

/// Loads `model` with a head of `classes` or the dataset's class count: a zoo model is built
/// with it; an ONNX file's head must agree unless `reinit_head` replaces it.
pub(crate) fn load_model(plan: &TrainPlan, notes: &mut Vec<Notice>) -> anyhow::Result<Graph> {
    let spec = plan.model.as_str();
    let batch = plan.batch.max(1);
    // The input's size is the batch's too: an oversized batch is reported by the model loader.
    let context = || format!("--model {spec} at --batch {batch}");
    let Some(classes) = plan.classes.or_else(|| data_classes(&plan.data)) else {
        return cptsim_models::load_graph_with(spec, batch, plan.seq_len).with_context(context);
    };
    let fit = HeadFit {
        classes,
        reinit: plan.reinit_head,
        seed: plan.seed,
    };
    let (graph, replaced) = match plan.seq_len {
        // A sequence model at its --seq-len: loaded as it is, then its head fitted.
        Some(_) => {
            let mut g =
                cptsim_models::load_graph_with(spec, batch, plan.seq_len).with_context(context)?;
            let replaced = fit_head(&mut g, fit).with_context(context)?;
            (g, replaced)
        }
        None => load_graph_for(spec, batch, fit).with_context(context)?,
    };
    if let Some(had) = replaced {
        notes.push(Notice::Note(format!(
            "note: --reinit-head: replaced the {had}-output head of {spec} by a {classes}-output \
             one initialised from --seed {}",
            plan.seed
        )));
    }
    Ok(graph)
}

/// Checks the labels against `classes` (the loaders checked them against the dataset's own
/// count), naming the file of the first one at or above it, and gives the sets the head's count.
pub(crate) fn check_labels(
    plan: &TrainPlan,
    data: &mut TrainData,
    classes: usize,
) -> anyhow::Result<()> {
    let sets = [
        (Split::Train, Some(&mut data.train)),
        (Split::Test, Some(&mut data.test)),
        (Split::Train, data.val.as_mut()),
    ];
    for (split, set) in sets {
        let Some(set) = set else { continue };
        if let Some(i) = set.labels.iter().position(|&l| usize::from(l) >= classes) {
            let file = label_file(plan, split, i);
            bail!(
                "--classes {classes}: label {} of {} image {i} is not below it ({file}; --data {})",
                set.labels[i],
                match split {
                    Split::Train => "training",
                    Split::Test => "test",
                },
                plan.data
            );
        }
        set.classes = classes;
    }
    Ok(())
}

/// The file that holds the label of image `index` of `split` (as the loaders name them; a
/// validation split or subset names the training files).
fn label_file(plan: &TrainPlan, split: Split, index: usize) -> String {
    let Some((kind, dir)) = plan.data.split_once(':') else {
        return plan.data.clone();
    };
    let dir = Path::new(dir);
    let train = split == Split::Train;
    let names: Vec<String> = match kind {
        "mnist" | "fashion-mnist" => {
            let prefix = if train { "train" } else { "t10k" };
            let found = find_file(
                dir,
                &[
                    &format!("{prefix}-labels-idx1-ubyte"),
                    &format!("{prefix}-labels.idx1-ubyte"),
                ],
            );
            return found.map_or_else(|_| dir.display().to_string(), |p| p.display().to_string());
        }
        "cifar10" if train && plan.val_split == 0.0 => {
            vec![format!("data_batch_{}.bin", index / 10_000 + 1)]
        }
        "cifar10" if train => (1..=5).map(|k| format!("data_batch_{k}.bin")).collect(),
        "cifar10" => vec!["test_batch.bin".into()],
        "cifar100" if train => vec!["train.bin".into()],
        "cifar100" => vec!["test.bin".into()],
        _ => return plan.data.clone(),
    };
    format!("{} in {}", names.join(", "), dir.display())
}

/// Iterations of the run: the plan's, or its epochs over `train_len` images.
pub(crate) fn iterations(plan: &TrainPlan, train_len: usize) -> anyhow::Result<u64> {
    match plan.length() {
        Length::Iterations(n) => Ok(n),
        Length::Epochs(e) => (train_len as u64)
            .div_ceil(plan.batch.max(1) as u64)
            .checked_mul(e)
            .with_context(|| format!("--epochs {e}: too many iterations")),
    }
}

/// Applies `depthwise_bits FW/BW`: depthwise convs run at that fixed precision.
pub(crate) fn fix_depthwise(
    plan: &TrainPlan,
    summary: &ModelSummary,
    net: &mut TrainNet,
    notes: &mut Vec<Notice>,
) {
    let Some(d) = plan.depthwise_bits else {
        return;
    };
    let depthwise = |i: u32| {
        summary
            .layers
            .get(i as usize)
            .is_some_and(|l| l.role == LayerRole::Depthwise)
    };
    let n = net.fix_bits(depthwise, Bits::forward_backward(d.fw, d.bw));
    if n == 0 {
        notes.push(Notice::Note(format!(
            "note: --depthwise-bits has no effect: `{}` has no depthwise convs",
            summary.name
        )));
    }
}
