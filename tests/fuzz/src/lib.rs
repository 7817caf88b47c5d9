//! The properties every fuzz target checks, one module per target of `fuzz/` (fuzz/README.md).
//! They live in the workspace, not in the nightly-only fuzz project, so that `cargo test` replays
//! the committed corpus and every input that ever broke a property (`fuzz/regressions/<target>/`)
//! on the stable toolchain: a crash found once stays a test.

pub mod evidence_envelope;
pub mod evidence_record;
pub mod extract_bundle;
pub mod grpc_requests;
pub mod parse_validate;
pub mod registry_layer;
pub mod registry_manifest;
pub mod registry_tag_list;

/// One target's check: panics when the input breaks a property.
pub type Check = fn(&[u8]);

/// Every fuzz target with its check, by target name (the directory names under `fuzz/seeds/`).
pub const TARGETS: &[(&str, Check)] = &[
    ("evidence_envelope", evidence_envelope::check),
    ("evidence_record", evidence_record::check),
    ("extract_bundle", extract_bundle::check),
    ("grpc_requests", grpc_requests::check),
    ("parse_validate", parse_validate::check),
    ("registry_layer", registry_layer::check),
    ("registry_manifest", registry_manifest::check),
    ("registry_tag_list", registry_tag_list::check),
];
