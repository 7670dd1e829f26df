//! Sizing a batch against the machine's memory before allocating it, so an impossible `--batch`
//! is an error naming the flag rather than an allocation abort.

use cptsim_models::ModelSummary;

use crate::error::{Result, SimError};

/// Copies of every conv / linear layer's input and output a training step holds at once (the
/// activation, its saved input, its gradient and a quantized copy): a lower bound, so a batch
/// refused here cannot fit.
const TRAIN_COPIES: u64 = 4;

/// Bytes of memory a training step of `model` needs per sample at least, or `None` when the
/// count overflows.
pub fn train_bytes_per_sample(model: &ModelSummary) -> Option<u64> {
    let input: u64 = model.input.iter().skip(1).map(|&d| d as u64).product();
    let mut floats = input;
    for l in &model.layers {
        let (i, o) = (
            l.in_shape
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d as u64))?,
            l.out_shape
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d as u64))?,
        );
        floats = floats.checked_add(i.checked_add(o)?.checked_mul(TRAIN_COPIES)?)?;
    }
    floats.checked_mul(std::mem::size_of::<f32>() as u64)
}

/// Bytes of memory an evaluation forward pass of `model` needs per sample at least (the input and
/// the largest layer's input and output, held at once), or `None` when the count overflows.
pub fn eval_bytes_per_sample(model: &ModelSummary) -> Option<u64> {
    let size = |s: &[usize]| s.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
    let input: u64 = model.input.iter().skip(1).map(|&d| d as u64).product();
    let mut widest = 0u64;
    for l in &model.layers {
        widest = widest.max(size(&l.in_shape)?.checked_add(size(&l.out_shape)?)?);
    }
    input
        .checked_add(widest)?
        .checked_mul(std::mem::size_of::<f32>() as u64)
}

/// Memory the system can give this process now (`MemAvailable` of `/proc/meminfo`), or `None`
/// where that is unknown.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

/// `MemAvailable` in bytes from `/proc/meminfo` text.
fn parse_mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Which pass a batch is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// A training step ([`train_bytes_per_sample`]).
    Train,
    /// An evaluation forward pass ([`eval_bytes_per_sample`]).
    Eval,
}

/// An error naming `flag` when a training step of `model` at `batch` samples cannot fit in
/// `available` bytes (or its size overflows); `available: None` checks only the overflow.
pub fn check_train_batch(
    model: &ModelSummary,
    batch: usize,
    flag: &str,
    available: Option<u64>,
) -> Result<()> {
    check_batch(model, batch, flag, available, Pass::Train)
}

/// As [`check_train_batch`] for either pass.
pub fn check_batch(
    model: &ModelSummary,
    batch: usize,
    flag: &str,
    available: Option<u64>,
    pass: Pass,
) -> Result<()> {
    let (per_sample, what) = match pass {
        Pass::Train => (train_bytes_per_sample(model), "one training step"),
        Pass::Eval => (eval_bytes_per_sample(model), "one forward pass"),
    };
    let need = per_sample.and_then(|b| b.checked_mul(batch as u64));
    let too_big = |need: String, have: String| {
        SimError::invalid(
            flag,
            format!(
                "{batch} samples of model '{}' need {need} for {what}, \
                 but {have} of memory is available",
                model.name
            ),
        )
    };
    match (need, available) {
        (None, _) => Err(too_big("more than 2^64 bytes".into(), gib(available))),
        (Some(n), Some(a)) if n > a => Err(too_big(
            format!("at least {}", gib(Some(n))),
            gib(available),
        )),
        _ => Ok(()),
    }
}

fn gib(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        None => "an unknown amount".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lenet() -> ModelSummary {
        cptsim_models::load_summary("zoo:lenet5", 1).unwrap()
    }

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:  16000 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(parse_mem_available(text), Some(2 << 20));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn a_batch_beyond_memory_is_an_error_naming_the_flag() {
        let m = lenet();
        let per = train_bytes_per_sample(&m).unwrap();
        assert!(per > 28 * 28 * 4, "{per}");
        assert!(check_train_batch(&m, 128, "--batch", Some(1 << 30)).is_ok());
        let e = check_train_batch(&m, 100_000_000, "--batch", Some(8 << 30)).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("--batch") && e.contains("100000000") && e.contains("8.0 GiB"),
            "{e}"
        );
        let e = check_train_batch(&m, usize::MAX, "--batch", None).unwrap_err();
        assert!(e.to_string().contains("2^64"), "{e}");
        assert!(check_train_batch(&m, 100_000, "--batch", None).is_ok());
    }
}
