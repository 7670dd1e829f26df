//! Fuzz target `plot_csv`: see `cptsim_e2e::fuzz::plot_csv`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::plot_csv(data);
});
