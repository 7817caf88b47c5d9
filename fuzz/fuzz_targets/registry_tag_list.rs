//! The `registry_tag_list` fuzz target: `pacto_fuzz_checks::registry_tag_list::check` (tests/fuzz/src/registry_tag_list.rs, where its
//! properties are described and where `cargo test -p pacto-fuzz-checks` replays its corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pacto_fuzz_checks::registry_tag_list::check(data));
