//! Trace files by name: `.csv` is the CSV format ([`crate::csv_format`]), `.pb` the binary one
//! ([`crate::binary`]). Both write atomically and check what they read against the model.

use std::path::Path;

use cptsim_models::ModelSummary;

use crate::error::TraceError;
use crate::meta::TraceMeta;
use crate::{binary, csv_format, TraceRow};

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// Header plus one text line per row.
    Csv,
    /// Length-delimited protobuf messages.
    Binary,
}

impl TraceFormat {
    /// The format a file name asks for (`.csv` or `.pb`, case-insensitive).
    pub fn from_path(path: &Path) -> Result<TraceFormat, TraceError> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("csv") => Ok(TraceFormat::Csv),
            Some("pb") => Ok(TraceFormat::Binary),
            _ => Err(TraceError::UnknownFormat {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// Writes a trace to `path` in the format its name asks for; returns the number of rows.
pub fn write_trace(
    path: &Path,
    meta: &TraceMeta,
    rows: impl IntoIterator<Item = TraceRow>,
) -> Result<u64, TraceError> {
    match TraceFormat::from_path(path)? {
        TraceFormat::Csv => csv_format::write(path, meta, rows),
        TraceFormat::Binary => binary::write(path, meta, rows),
    }
}

/// Reads a trace of `model` from `path`, streaming each checked row into `visit` (which may
/// reject a row with a message); returns the run metadata.
pub fn read_trace(
    path: &Path,
    model: &ModelSummary,
    mut visit: impl FnMut(&TraceRow) -> Result<(), String>,
) -> Result<TraceMeta, TraceError> {
    match TraceFormat::from_path(path)? {
        TraceFormat::Csv => csv_format::read(path, model, &mut visit),
        TraceFormat::Binary => binary::read(path, model, &mut visit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::ScheduleArgs;
    use crate::scope::QuantScope;
    use crate::synth::synthesize;
    use crate::test_model::model;
    use crate::Bits;
    use cptsim_models::LayerRole;

    fn roles() -> Vec<LayerRole> {
        let mut r = vec![LayerRole::First];
        r.extend([LayerRole::Body; 6]);
        r.extend([LayerRole::Shortcut, LayerRole::Last]);
        r
    }

    fn read_all(path: &Path, m: &ModelSummary) -> Result<(TraceMeta, Vec<TraceRow>), TraceError> {
        let mut rows = Vec::new();
        let meta = read_trace(path, m, |r| {
            rows.push(*r);
            Ok(())
        })?;
        Ok((meta, rows))
    }

    /// Iterations of [`sample_rows`]' run.
    const ITERS: u64 = 4_001;

    /// A synthesised 4 000-iteration CPT trace plus one more iteration in which layer 3 runs a
    /// DFQ-style histogram of two precisions.
    fn sample_rows(m: &ModelSummary) -> Vec<TraceRow> {
        let s = ScheduleArgs::new("cosine", ITERS - 1)
            .cycles(2)
            .build()
            .unwrap();
        let mut rows: Vec<TraceRow> = synthesize(&s, m, &QuantScope::CPT_IMAGENET, 128).collect();
        let last = |layer, bits, samples| TraceRow {
            iter_start: ITERS - 1,
            iter_end: ITERS,
            layer,
            bits,
            samples,
        };
        for layer in 0..m.layers.len() as u32 {
            if layer == 3 {
                rows.push(last(layer, Bits { w: 4, a: 3, g: 6 }, 100));
                rows.push(last(layer, Bits { w: 4, a: 6, g: 12 }, 28));
            } else {
                rows.push(last(layer, Bits::forward_backward(8, 8), 128));
            }
        }
        rows
    }

    /// Both formats write through the project's atomic writer: a failed write (a row the meta
    /// does not allow, a missing directory) leaves no file, and errors name the user's path.
    #[test]
    fn failed_writes_leave_no_file_and_name_the_path() {
        let m = model(&roles());
        let meta = TraceMeta::for_model(&m, 128, ITERS);
        let dir = tempfile::tempdir().unwrap();
        let bad = TraceRow {
            layer: 99,
            ..sample_rows(&m)[0]
        };
        for name in ["t.csv", "t.pb"] {
            let path = dir.path().join(name);
            assert!(write_trace(&path, &meta, [bad]).is_err(), "{name}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{name}");
            let path = Path::new("/no/such/dir").join(name);
            let e = write_trace(&path, &meta, []).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{}: ", path.display())), "{e}");
            assert!(!e.contains(".tmp"), "{e}");
        }
    }

    #[test]
    fn both_formats_round_trip() {
        let m = model(&roles());
        let rows = sample_rows(&m);
        let meta = TraceMeta::for_model(&m, 128, ITERS);
        let dir = tempfile::tempdir().unwrap();
        for name in ["t.csv", "t.pb", "T.PB"] {
            let path = dir.path().join(name);
            assert_eq!(
                write_trace(&path, &meta, rows.iter().copied()).unwrap(),
                rows.len() as u64
            );
            let (back_meta, back) = read_all(&path, &m).unwrap();
            assert_eq!(back, rows, "{name}");
            assert_eq!(back_meta, meta, "{name}");
        }
    }

    #[test]
    fn binary_is_compact() {
        let m = model(&roles());
        let rows = sample_rows(&m);
        let meta = TraceMeta::for_model(&m, 128, ITERS);
        let dir = tempfile::tempdir().unwrap();
        let (pb, csv) = (dir.path().join("t.pb"), dir.path().join("t.csv"));
        write_trace(&pb, &meta, rows.iter().copied()).unwrap();
        write_trace(&csv, &meta, rows.iter().copied()).unwrap();
        let size = |p: &Path| std::fs::metadata(p).unwrap().len();
        assert!(
            size(&pb) * 5 < size(&csv) * 3,
            "{} vs {}",
            size(&pb),
            size(&csv)
        );
        assert!(size(&pb) < 18 * rows.len() as u64 + 200);
    }

    #[test]
    fn every_truncation_of_a_binary_trace_is_rejected() {
        let m = model(&roles());
        let rows = sample_rows(&m);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pb");
        write_trace(&path, &TraceMeta::for_model(&m, 128, ITERS), rows).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for len in 0..bytes.len() {
            // A fresh file per cut: rewriting one file makes ext4 flush on every truncation.
            let cut = dir.path().join(format!("cut{len}.pb"));
            std::fs::write(&cut, &bytes[..len]).unwrap();
            let e = read_all(&cut, &m).unwrap_err().to_string();
            assert!(
                e.contains(&format!("cut{len}.pb")) && e.contains("byte"),
                "cut at {len}: {e}"
            );
        }
        let cut = dir.path().join("cut.pb");
        let mut longer = bytes.clone();
        longer.push(7);
        std::fs::write(&cut, &longer).unwrap();
        assert!(read_all(&cut, &m)
            .unwrap_err()
            .to_string()
            .contains("after the footer"));
    }

    #[test]
    fn corrupt_binary_rows_are_rejected_with_position() {
        let m = model(&roles());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pb");
        let row = TraceRow {
            iter_start: 0,
            iter_end: 5,
            layer: 0,
            bits: Bits::forward_backward(4, 8),
            samples: 128,
        };
        write_trace(&path, &TraceMeta::for_model(&m, 128, 5), [row]).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        // The row is the 2+len bytes before the 3-byte tail (marker, footer length, footer).
        let tail = bytes.len() - 4;
        bytes[tail] = 0xff; // samples varint now continues into the marker
        std::fs::write(&path, &bytes).unwrap();
        let e = read_all(&path, &m).unwrap_err().to_string();
        assert!(e.contains("t.pb: byte") && e.contains("row"), "{e}");
        std::fs::write(&path, b"NOTATRACEFILE").unwrap();
        assert!(read_all(&path, &m)
            .unwrap_err()
            .to_string()
            .contains("magic"));
    }

    #[test]
    fn traces_of_another_model_are_rejected() {
        let m = model(&roles());
        let other = model(&[LayerRole::First, LayerRole::Last]);
        let rows = sample_rows(&m);
        let dir = tempfile::tempdir().unwrap();
        for name in ["t.csv", "t.pb"] {
            let path = dir.path().join(name);
            write_trace(
                &path,
                &TraceMeta::for_model(&m, 128, ITERS),
                rows.iter().copied(),
            )
            .unwrap();
            let e = read_all(&path, &other).unwrap_err().to_string();
            assert!(
                e.contains(name) && (e.contains("layers") || e.contains("model")),
                "{e}"
            );
        }
    }

    #[test]
    fn traces_cut_short_or_with_gaps_overlaps_or_duplicates_are_rejected() {
        let m = model(&roles());
        let rows = sample_rows(&m);
        let meta = TraceMeta::for_model(&m, 128, ITERS);
        let dir = tempfile::tempdir().unwrap();
        let overlap = {
            let mut r = rows.clone();
            r[4].iter_end += 1;
            r
        };
        let gap = {
            let mut r = rows.clone();
            r.remove(m.layers.len() + 1);
            r
        };
        let duplicate = {
            let mut r = rows.clone();
            r.insert(m.layers.len(), rows[m.layers.len()]);
            r
        };
        let cases = [
            (
                rows[..rows.len() - 3].to_vec(),
                "has no rows for iterations",
            ),
            (
                rows[..m.layers.len() + 1].to_vec(),
                "has no rows for iterations",
            ),
            (overlap, "overlaps"),
            (gap, "has no rows for iterations"),
            (duplicate, "duplicated row"),
        ];
        // A trace that lists only some layers (the rest ran fp32) is fine.
        let some: Vec<TraceRow> = rows.iter().copied().filter(|r| r.layer != 2).collect();
        for name in ["t.csv", "t.pb"] {
            let path = dir.path().join(name);
            write_trace(&path, &meta, some.iter().copied()).unwrap();
            assert_eq!(read_all(&path, &m).unwrap().1, some, "{name}");
        }
        for (bad, want) in cases {
            for name in ["t.csv", "t.pb"] {
                let path = dir.path().join(name);
                write_trace(&path, &meta, bad.iter().copied()).unwrap();
                let e = read_all(&path, &m).unwrap_err().to_string();
                assert!(e.contains(name) && e.contains(want), "{name}: {e}");
            }
        }
    }

    #[test]
    fn malformed_csv_lines_are_named() {
        let m = model(&[LayerRole::First, LayerRole::Last]);
        let header = "iter_start,iter_end,layer,layer_name,b_w,b_a,b_g,samples\n";
        let cases = [
            ("a,b\n".to_string(), "line 1"),
            (
                format!("{header}0,5,0,layer0,4,4,8,128\n0,5,1,wrong,4,4,8,128\n"),
                "line 3",
            ),
            (format!("{header}0,5,0,layer0,4,4,8\n"), "line 2"),
            (format!("{header}0,5,7,layer7,4,4,8,128\n"), "out of range"),
            (format!("{header}5,5,0,layer0,4,4,8,128\n"), "empty span"),
            (format!("{header}0,5,0,layer0,40,4,8,128\n"), "bit-width 40"),
            (format!("{header}0,5,0,layer0,4,4,x,128\n"), "b_g 'x'"),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.csv");
        for (text, want) in cases {
            std::fs::write(&path, &text).unwrap();
            let e = read_all(&path, &m).unwrap_err().to_string();
            assert!(e.contains("bad.csv") && e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn rows_are_checked_before_writing_and_names_pick_formats() {
        let m = model(&[LayerRole::Body]);
        let dir = tempfile::tempdir().unwrap();
        let bad = TraceRow {
            iter_start: 0,
            iter_end: 1,
            layer: 0,
            bits: Bits::FP32,
            samples: 0,
        };
        for name in ["t.csv", "t.pb"] {
            let path = dir.path().join(name);
            let e = write_trace(&path, &TraceMeta::for_model(&m, 1, 1), [bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains("refusing") && !path.exists(), "{e}");
        }
        let e = write_trace(
            &dir.path().join("t.txt"),
            &TraceMeta::for_model(&m, 1, 1),
            [],
        )
        .unwrap_err();
        assert!(e.to_string().contains(".csv or .pb"));
    }

    #[test]
    fn visitor_rejection_names_the_row() {
        let m = model(&[LayerRole::Body]);
        let dir = tempfile::tempdir().unwrap();
        let row = TraceRow {
            iter_start: 0,
            iter_end: 1,
            layer: 0,
            bits: Bits::forward_backward(4, 8),
            samples: 1,
        };
        for name in ["t.csv", "t.pb"] {
            let path = dir.path().join(name);
            write_trace(&path, &TraceMeta::for_model(&m, 1, 1), [row]).unwrap();
            let e = read_trace(&path, &m, |_| Err("no thanks".into()))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("no thanks") && (e.contains("line 2") || e.contains("row 0")),
                "{e}"
            );
        }
    }
}
