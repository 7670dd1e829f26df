//! Fuzz target `accel_config`: see `cptsim_e2e::fuzz::accel_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::accel_config(data);
});
