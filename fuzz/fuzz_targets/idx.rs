//! Fuzz target `idx`: see `cptsim_e2e::fuzz::idx`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::idx(data);
});
