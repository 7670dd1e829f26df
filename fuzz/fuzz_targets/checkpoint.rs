//! Fuzz target `checkpoint`: see `cptsim_e2e::fuzz::checkpoint`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::checkpoint(data);
});
