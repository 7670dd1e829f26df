//! A user schedule read from a CSV file with rows `iteration,fw_bits,bw_bits` (an optional header
//! line whose first field is not a number is skipped). Each row sets the precision from its
//! iteration until the next row; the first row must be iteration 0 and iterations must increase.

use std::path::Path;

use super::error::ScheduleError;
use super::steps::Steps;
use super::{check_bits, Precision};

/// Reads and validates a schedule file for a run of `iterations` iterations.
pub fn read(path: &Path, iterations: u64) -> Result<Steps, ScheduleError> {
    let text = std::fs::read_to_string(path).map_err(|error| ScheduleError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let line_error = |line: usize, message: String| ScheduleError::FileLine {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut steps: Vec<(u64, Precision)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let first_is_number = fields.first().is_some_and(|f| f.parse::<u64>().is_ok());
        if !first_is_number && steps.is_empty() && i == 0 {
            continue; // header
        }
        let [it, fw, bw] = fields.as_slice() else {
            return Err(line_error(
                i + 1,
                format!(
                    "expected 3 fields iteration,fw_bits,bw_bits, found {}",
                    fields.len()
                ),
            ));
        };
        let number = |what: &str, s: &str| {
            s.parse::<u64>()
                .map_err(|_| line_error(i + 1, format!("{what} '{s}' is not a whole number")))
        };
        let iteration = number("iteration", it)?;
        let bits = |what: &str, s: &str| -> Result<u8, ScheduleError> {
            let v = number(what, s)?;
            check_bits(v).map_err(|m| line_error(i + 1, format!("{what}: {m}")))
        };
        let p = Precision {
            fw: bits("fw_bits", fw)?,
            bw: bits("bw_bits", bw)?,
        };
        match steps.last() {
            None if iteration != 0 => {
                return Err(line_error(
                    i + 1,
                    format!("first iteration must be 0, found {iteration}"),
                ))
            }
            Some(&(prev, _)) if iteration <= prev => {
                return Err(line_error(
                    i + 1,
                    format!("iteration {iteration} does not increase (previous {prev})"),
                ))
            }
            _ if iteration >= iterations => {
                return Err(line_error(
                    i + 1,
                    format!("iteration {iteration} lies beyond the run (--iters {iterations})"),
                ))
            }
            _ => steps.push((iteration, p)),
        }
    }
    Steps::new(steps).ok_or_else(|| line_error(1, "no schedule rows".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn reads_rows_with_or_without_header() {
        for text in [
            "iteration,fw_bits,bw_bits\n0,4,8\n10,6,8\n",
            "0,4,8\n10, 6, 8\n\n",
        ] {
            let f = write(text);
            let s = read(f.path(), 100).unwrap();
            assert_eq!(s.at(9), Precision { fw: 4, bw: 8 });
            assert_eq!(s.at(99), Precision { fw: 6, bw: 8 });
        }
    }

    #[test]
    fn bad_rows_name_file_and_line() {
        let cases = [
            ("5,4,8\n", "line 1"),
            ("0,4,8\n0,5,8\n", "line 2"),
            ("0,4\n", "line 1"),
            ("0,4,40\n", "line 1"),
            ("0,4,8\n200,4,8\n", "line 2"),
            ("0,x,8\n", "line 1"),
            ("", "no schedule rows"),
        ];
        for (text, want) in cases {
            let f = write(text);
            let e = read(f.path(), 100).unwrap_err().to_string();
            assert!(
                e.contains(want) && e.contains("schedule file"),
                "{text:?}: {e}"
            );
        }
        let e = read(Path::new("/no/such/file.csv"), 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/no/such/file.csv"), "{e}");
    }
}
