//! The `evidence_envelope` fuzz target: `pacto_fuzz_checks::evidence_envelope::check` (tests/fuzz/src/evidence_envelope.rs, where its
//! properties are described and where `cargo test -p pacto-fuzz-checks` replays its corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pacto_fuzz_checks::evidence_envelope::check(data));
