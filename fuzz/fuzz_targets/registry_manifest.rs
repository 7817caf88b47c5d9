//! The `registry_manifest` fuzz target: `pacto_fuzz_checks::registry_manifest::check` (tests/fuzz/src/registry_manifest.rs, where its
//! properties are described and where `cargo test -p pacto-fuzz-checks` replays its corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pacto_fuzz_checks::registry_manifest::check(data));
