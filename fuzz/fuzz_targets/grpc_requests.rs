//! The `grpc_requests` fuzz target: `pacto_fuzz_checks::grpc_requests::check` (tests/fuzz/src/grpc_requests.rs, where its
//! properties are described and where `cargo test -p pacto-fuzz-checks` replays its corpus).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pacto_fuzz_checks::grpc_requests::check(data));
