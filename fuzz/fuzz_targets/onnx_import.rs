//! Fuzz target `onnx_import`: see `cptsim_e2e::fuzz::onnx_import`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::onnx_import(data);
});
