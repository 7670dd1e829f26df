//! Text corpora for language models.
//!
//! - `ptb:DIR` (`ptb.train.txt`, `ptb.valid.txt`, `ptb.test.txt`) and `wikitext:DIR`
//!   (`wiki.train.tokens`, `wiki.valid.tokens`, `wiki.test.tokens`): words split on whitespace,
//!   one `<eos>` after every line, as PyTorch's word_language_model example reads them.
//! - `text:FILE`: characters (Unicode scalar values, newlines included); the file is cut into
//!   train / valid / test at 90 % and 95 % of its characters, in order, so the split is fixed by
//!   the file alone.
//!
//! The vocabulary is the training split's tokens in order of first appearance. A valid or test
//! token never seen in training becomes `<unk>` (appended to the vocabulary when training has none);
//! PyTorch's example instead adds such words to its dictionary, which gives the model outputs it
//! can never learn. PTB and WikiText already carry `<unk>`, so for them the two agree.
//!
//! Batching follows the example: a stream of `n` tokens becomes `batch` contiguous columns of
//! `⌊n / batch⌋` tokens (the tail is dropped), read in windows of `bptt` rows whose targets are the
//! same window shifted by one row.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Result, SimError};

/// The token `<eos>` closes every line of a word-level corpus.
pub const EOS: &str = "<eos>";
/// The token unknown valid / test tokens map to.
pub const UNK: &str = "<unk>";

/// How a corpus is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    /// Penn Treebank as the word_language_model example ships it.
    Ptb,
    /// WikiText-2 / WikiText-103 token files.
    WikiText,
    /// One plain-text file, character level.
    Chars,
}

/// Token ↔ id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vocab {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Vocab {
    /// Number of distinct tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True when there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The id of `token`, if known.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// The token of `id`.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    fn add(&mut self, token: &str) -> u32 {
        if let Some(&id) = self.ids.get(token) {
            return id;
        }
        let id = self.tokens.len() as u32;
        self.tokens.push(token.to_string());
        self.ids.insert(token.to_string(), id);
        id
    }
}

/// A tokenised corpus: the vocabulary and the three id streams.
#[derive(Clone, Debug, PartialEq)]
pub struct Corpus {
    /// Where it was read from (messages).
    pub source: String,
    /// The vocabulary (from the training split, plus `<unk>` if needed).
    pub vocab: Vocab,
    /// Training stream.
    pub train: Vec<u32>,
    /// Validation stream.
    pub valid: Vec<u32>,
    /// Test stream.
    pub test: Vec<u32>,
    /// Valid and test tokens that were mapped to `<unk>`.
    pub unknown: usize,
}

fn data_error(path: &Path, offset: u64, msg: impl Into<String>) -> SimError {
    SimError::Data {
        path: path.to_path_buf(),
        offset,
        msg: msg.into(),
    }
}

fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|source| SimError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes)
        .map_err(|e| data_error(path, e.utf8_error().valid_up_to() as u64, "not UTF-8 text"))
}

/// Word tokens with `<eos>` after every line.
fn words(text: &str) -> Vec<&str> {
    text.lines()
        .flat_map(|line| line.split_whitespace().chain(std::iter::once(EOS)))
        .collect()
}

/// Characters as one-character tokens.
fn chars(text: &str) -> Vec<String> {
    text.chars().map(String::from).collect()
}

/// The three split files of a word-level corpus in `dir`.
fn split_files(kind: TextKind, dir: &Path) -> [PathBuf; 3] {
    let (prefix, ext) = match kind {
        TextKind::WikiText => ("wiki", "tokens"),
        _ => ("ptb", "txt"),
    };
    ["train", "valid", "test"].map(|s| dir.join(format!("{prefix}.{s}.{ext}")))
}

/// Builds the vocabulary on `train` and maps all three splits; `paths` name them in messages.
fn tokenise<S: AsRef<str>>(
    source: String,
    splits: [Vec<S>; 3],
    paths: [&Path; 3],
) -> Result<Corpus> {
    let [train, valid, test] = splits;
    let mut vocab = Vocab::default();
    let train: Vec<u32> = train.iter().map(|t| vocab.add(t.as_ref())).collect();
    if vocab.is_empty() {
        return Err(data_error(
            paths[0],
            0,
            "empty vocabulary: no tokens in the training split",
        ));
    }
    let mut unknown = 0;
    let mut map = |tokens: &[S]| -> Vec<u32> {
        tokens
            .iter()
            .map(|t| {
                vocab.id(t.as_ref()).unwrap_or_else(|| {
                    unknown += 1;
                    vocab.add(UNK)
                })
            })
            .collect()
    };
    let valid = map(&valid);
    let test = map(&test);
    for (stream, path, what) in [(&valid, paths[1], "validation"), (&test, paths[2], "test")] {
        if stream.is_empty() {
            return Err(data_error(
                path,
                0,
                format!("zero-length {what} stream: no tokens"),
            ));
        }
    }
    Ok(Corpus {
        source,
        vocab,
        train,
        valid,
        test,
        unknown,
    })
}

/// Reads a word-level corpus (`Ptb` or `WikiText`) from `dir`.
pub fn load_words(kind: TextKind, dir: &Path) -> Result<Corpus> {
    let paths = split_files(kind, dir);
    let texts = [
        read_text(&paths[0])?,
        read_text(&paths[1])?,
        read_text(&paths[2])?,
    ];
    let [a, b, c] = &texts;
    tokenise(
        dir.display().to_string(),
        [words(a), words(b), words(c)],
        [&paths[0], &paths[1], &paths[2]],
    )
}

/// Reads `file` as a character-level corpus split 90 / 5 / 5 in order.
pub fn load_chars(file: &Path) -> Result<Corpus> {
    let all = chars(&read_text(file)?);
    let n = all.len();
    let (a, b) = (n * 90 / 100, n * 95 / 100);
    if a == 0 || b == a || b == n {
        return Err(data_error(
            file,
            0,
            format!("{n} characters: too short to split into train / valid / test (90/5/5 %)"),
        ));
    }
    tokenise(
        file.display().to_string(),
        [all[..a].to_vec(), all[a..b].to_vec(), all[b..].to_vec()],
        [file, file, file],
    )
}

/// A stream laid out as `batch` contiguous columns (row-major `[rows, batch]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Streams {
    /// Token ids, `rows × batch`, row-major.
    pub ids: Vec<u32>,
    /// Tokens per column.
    pub rows: usize,
    /// Columns.
    pub batch: usize,
}

impl Streams {
    /// Cuts `stream` into `batch` columns, dropping the tail; `what` names it in errors.
    pub fn new(stream: &[u32], batch: usize, what: &str) -> Result<Self> {
        if batch == 0 {
            return Err(SimError::invalid("batch", "must be positive"));
        }
        let rows = stream.len() / batch;
        if rows < 2 {
            return Err(SimError::invalid(
                what,
                format!(
                    "{} tokens make {rows} row(s) at batch {batch}; a window needs at least 2 \
                     (an input and its next-token target)",
                    stream.len()
                ),
            ));
        }
        let mut ids = vec![0; rows * batch];
        for (b, column) in stream.chunks_exact(rows).take(batch).enumerate() {
            for (r, &id) in column.iter().enumerate() {
                ids[r * batch + b] = id;
            }
        }
        Ok(Self { ids, rows, batch })
    }

    /// Start rows of the `bptt`-long windows (`0, bptt, 2·bptt, …` while a target row follows).
    pub fn window_starts(&self, bptt: usize) -> impl Iterator<Item = usize> {
        (0..self.rows - 1).step_by(bptt.max(1))
    }

    /// The window at row `start`: (inputs, targets), each `len × batch` row-major with
    /// `len = min(bptt, rows − 1 − start)`.
    pub fn window(&self, start: usize, bptt: usize) -> (&[u32], &[u32]) {
        let len = bptt.max(1).min(self.rows.saturating_sub(1 + start));
        let b = self.batch;
        (
            &self.ids[start * b..(start + len) * b],
            &self.ids[(start + 1) * b..(start + 1 + len) * b],
        )
    }
}

/// Which axis of a language model's token input is time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TokenLayout {
    /// `[B, T]` (Transformer LMs).
    BatchFirst,
    /// `[T, B]` (PyTorch's word_language_model RNNs).
    SeqFirst,
}

/// One language-model batch: ids in the model's layout and the next-token targets in the
/// row order of its logits (`[B, T, V]` or `[T, B, V]` read as rows of `V`).
#[derive(Clone, Debug, PartialEq)]
pub struct TextBatch {
    /// Token ids as f32, `[B, T]` or `[T, B]`.
    pub ids: crate::layers::Tensor,
    /// Target id per logits row.
    pub targets: Vec<usize>,
}

/// A corpus cut for a language model of fixed geometry: `batch` streams read in windows of
/// `bptt` tokens. Only whole windows are read (the model's shapes are fixed), so each split
/// drops its last `< bptt` rows and, as [`Streams::new`], its last `< batch` tokens; every
/// window starts from a zero recurrent state.
#[derive(Clone, Debug, PartialEq)]
pub struct TextData {
    /// The corpus.
    pub corpus: Corpus,
    /// Training streams.
    pub train: Streams,
    /// Validation streams.
    pub valid: Streams,
    /// Test streams.
    pub test: Streams,
    /// Tokens per window.
    pub bptt: usize,
    /// The model's token layout.
    pub layout: TokenLayout,
}

impl TextData {
    /// Batchifies `corpus`; a split with no whole window is an error naming it and its source.
    pub fn new(corpus: Corpus, batch: usize, bptt: usize, layout: TokenLayout) -> Result<Self> {
        if bptt == 0 {
            return Err(SimError::invalid("sequence length", "must be positive"));
        }
        let cut = |stream: &[u32], split: &str| -> Result<Streams> {
            let what = format!("{split} split of {}", corpus.source);
            let s = Streams::new(stream, batch, &what)?;
            if s.rows <= bptt {
                return Err(SimError::invalid(
                    &what,
                    format!(
                        "{} tokens make {} rows at batch {batch}; one window of {bptt} tokens \
                         needs {} (lower --batch or --seq-len)",
                        stream.len(),
                        s.rows,
                        bptt + 1
                    ),
                ));
            }
            Ok(s)
        };
        let train = cut(&corpus.train, "training")?;
        let valid = cut(&corpus.valid, "validation")?;
        let test = cut(&corpus.test, "test")?;
        Ok(Self {
            corpus,
            train,
            valid,
            test,
            bptt,
            layout,
        })
    }

    /// Whole windows of `s`.
    pub fn windows(&self, s: &Streams) -> usize {
        (s.rows - 1) / self.bptt
    }

    /// Tokens the whole windows of `s` predict.
    pub fn tokens(&self, s: &Streams) -> usize {
        self.windows(s) * self.bptt * s.batch
    }

    /// Window `k` (modulo the whole windows) of `s` as a batch in the model's layout.
    pub fn batch(&self, s: &Streams, k: u64) -> Result<TextBatch> {
        let windows = self.windows(s).max(1) as u64;
        let start = (k % windows) as usize * self.bptt;
        let (x, y) = s.window(start, self.bptt);
        let (t, b) = (self.bptt, s.batch);
        let (shape, order): (Vec<usize>, Vec<usize>) = match self.layout {
            TokenLayout::SeqFirst => (vec![t, b], (0..t * b).collect()),
            // row b·T + t of the logits is window row t, column b
            TokenLayout::BatchFirst => (
                vec![b, t],
                (0..b)
                    .flat_map(|c| (0..t).map(move |r| r * b + c))
                    .collect(),
            ),
        };
        let ids = order.iter().map(|&i| x[i] as f32).collect();
        let targets = order.iter().map(|&i| y[i] as usize).collect();
        let ids = crate::layers::Tensor::from_shape_vec(shape, ids)
            .map_err(|e| SimError::invalid("text window", e.to_string()))?;
        Ok(TextBatch { ids, targets })
    }
}

/// Perplexity of `eval` under the add-one-smoothed unigram distribution of `train` over a
/// vocabulary of `vocab` tokens: the baseline a language model has to beat.
pub fn unigram_perplexity(train: &[u32], eval: &[u32], vocab: usize) -> f64 {
    let mut counts = vec![1.0f64; vocab.max(1)];
    for &t in train {
        if let Some(c) = counts.get_mut(t as usize) {
            *c += 1.0;
        }
    }
    let total: f64 = counts.iter().sum();
    let nll: f64 = eval
        .iter()
        .map(|&t| -(counts.get(t as usize).copied().unwrap_or(1.0) / total).ln())
        .sum();
    (nll / eval.len().max(1) as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptb(dir: &Path, train: &str, valid: &str, test: &str) {
        for (s, text) in [("train", train), ("valid", valid), ("test", test)] {
            std::fs::write(dir.join(format!("ptb.{s}.txt")), text).unwrap();
        }
    }

    #[test]
    fn words_get_eos_per_line_and_unknown_tokens_map_to_unk() {
        let dir = tempfile::tempdir().unwrap();
        ptb(
            dir.path(),
            " the cat \n sat on the mat \n",
            "the dog\n",
            "a cat\n",
        );
        let c = load_words(TextKind::Ptb, dir.path()).unwrap();
        // the cat <eos> sat on mat
        assert_eq!(c.train, vec![0, 1, 2, 3, 4, 0, 5, 2]);
        assert_eq!(c.vocab.token(2), Some(EOS));
        let unk = c.vocab.id(UNK).unwrap();
        assert_eq!(c.valid, vec![0, unk, 2]);
        assert_eq!(c.test, vec![unk, 1, 2]);
        assert_eq!((c.unknown, c.vocab.len()), (2, 7));
    }

    #[test]
    fn bad_corpora_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_words(TextKind::WikiText, dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("wiki.train.tokens"), "{err}");
        ptb(dir.path(), "", "a\n", "b\n");
        let err = load_words(TextKind::Ptb, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ptb.train.txt") && err.contains("empty vocabulary"),
            "{err}"
        );
        ptb(dir.path(), "a b\n", "a\n", "");
        let err = load_words(TextKind::Ptb, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ptb.test.txt") && err.contains("zero-length test"),
            "{err}"
        );
        std::fs::write(dir.path().join("ptb.valid.txt"), [b'a', 0xff, b'\n']).unwrap();
        let err = load_words(TextKind::Ptb, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ptb.valid.txt") && err.contains("at byte 1"),
            "{err}"
        );
        let short = dir.path().join("short.txt");
        std::fs::write(&short, "abc").unwrap();
        let err = load_chars(&short).unwrap_err().to_string();
        assert!(
            err.contains("short.txt") && err.contains("too short"),
            "{err}"
        );
    }

    #[test]
    fn characters_split_90_5_5_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.txt");
        std::fs::write(&f, "ab".repeat(50)).unwrap();
        let c = load_chars(&f).unwrap();
        assert_eq!((c.train.len(), c.valid.len(), c.test.len()), (90, 5, 5));
        assert_eq!(c.vocab.len(), 2);
        assert_eq!(&c.train[..4], &[0, 1, 0, 1]);
    }

    #[test]
    fn batchify_makes_contiguous_columns_and_shifted_targets() {
        let stream: Vec<u32> = (0..11).collect();
        let s = Streams::new(&stream, 2, "train").unwrap();
        // columns 0..5 and 5..10; token 10 dropped
        assert_eq!((s.rows, s.batch), (5, 2));
        assert_eq!(&s.ids[..4], &[0, 5, 1, 6]);
        let starts: Vec<usize> = s.window_starts(3).collect();
        assert_eq!(starts, vec![0, 3]);
        let (x, y) = s.window(0, 3);
        assert_eq!((x, y), (&[0, 5, 1, 6, 2, 7][..], &[1, 6, 2, 7, 3, 8][..]));
        let (x, y) = s.window(3, 3);
        assert_eq!((x, y), (&[3, 8][..], &[4, 9][..]));
        let err = Streams::new(&stream, 8, "valid").unwrap_err().to_string();
        assert!(err.contains("valid") && err.contains("at least 2"), "{err}");
        assert!(Streams::new(&stream, 0, "train").is_err());
    }

    #[test]
    fn unigram_baseline() {
        // uniform over 4 tokens → perplexity 4; a skewed train makes its frequent token cheap
        assert!((unigram_perplexity(&[0, 1, 2, 3], &[0, 1, 2, 3], 4) - 4.0).abs() < 1e-9);
        let skewed = unigram_perplexity(&[0; 96], &[0, 0, 0, 0], 4);
        assert!(skewed < 1.1, "{skewed}");
    }
}
