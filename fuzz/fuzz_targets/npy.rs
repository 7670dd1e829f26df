//! Fuzz target `npy`: see `cptsim_e2e::fuzz::npy`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::npy(data);
});
