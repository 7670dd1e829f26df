//! Fuzz target `trace_csv`: see `cptsim_e2e::fuzz::trace_csv`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::trace_csv(data);
});
