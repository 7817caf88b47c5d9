//! The `evidence_record` fuzz target: `pacto_fuzz_checks::evidence_record::check` (tests/fuzz/src/evidence_record.rs, where its
//! properties are described and where `cargo test -p pacto-fuzz-checks` replays its corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pacto_fuzz_checks::evidence_record::check(data));
