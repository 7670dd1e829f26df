//! Fuzz target `schedule`: see `cptsim_e2e::fuzz::schedule`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::schedule(data);
});
