//! The `extract_bundle` fuzz target: `pacto_fuzz_checks::extract_bundle::check` (tests/fuzz/src/extract_bundle.rs, where its
//! properties are described and where `cargo test -p pacto-fuzz-checks` replays its corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pacto_fuzz_checks::extract_bundle::check(data));
