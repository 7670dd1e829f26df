//! Fuzz target `cifar`: see `cptsim_e2e::fuzz::cifar`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::cifar(data);
});
