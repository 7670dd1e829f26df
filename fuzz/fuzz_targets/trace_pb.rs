//! Fuzz target `trace_pb`: see `cptsim_e2e::fuzz::trace_pb`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cptsim_e2e::fuzz::trace_pb(data);
});
