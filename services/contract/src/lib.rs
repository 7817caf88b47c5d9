//! The `pacto.yaml` 2.0 contract format: typed model, parsing, the three validation layers,
//! readiness assessment, overrides, deterministic bundles, OCI references and semver ranges.
//!
//! This crate performs no network I/O and depends on no Kubernetes or gRPC crates.

pub mod bundle;
pub mod codes;
pub mod finding;
pub mod model;
pub mod overrides;
pub mod parse;
pub mod policy;
pub mod readiness;
pub mod reference;
pub mod rules;
pub mod schema;
pub mod validate;
pub mod version;
