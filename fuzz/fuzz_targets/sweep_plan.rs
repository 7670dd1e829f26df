//! Fuzz target `sweep_plan`: see `cptsim_e2e::fuzz::sweep_plan`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::sweep_plan(data);
});
