//! The `parse_validate` fuzz target: `pacto_fuzz_checks::parse_validate::check` (tests/fuzz/src/parse_validate.rs, where its
//! properties are described and where `cargo test -p pacto-fuzz-checks` replays its corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pacto_fuzz_checks::parse_validate::check(data));
