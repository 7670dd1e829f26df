//! Fuzz target `sweep_cells`: see `cptsim_e2e::fuzz::sweep_cells`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::sweep_cells(data);
});
