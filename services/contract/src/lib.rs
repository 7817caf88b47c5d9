//! The `pacto.yaml` 2.0 contract format: typed model, parsing, the three validation layers,
//! readiness assessment, overrides, deterministic bundles, OCI references and semver ranges.
//!
//! This crate performs no network I/O and depends on no Kubernetes or gRPC crates.
//!
//! Parsing, validation, overrides and policy resolution are re-exported flat
//! ([`parse_contract`], [`validate_bundle`], [`Finding`], ...). The modules that stay public are
//! namespaces: [`model`] (the typed contract), [`codes`] (the finding code registry), [`bundle`],
//! [`reference`](mod@reference), [`version`], [`schema`] and [`readiness`].

pub mod bundle;
pub mod codes;
pub mod diff;
mod finding;
pub mod model;
mod overrides;
mod parse;
mod policy;
pub mod readiness;
pub mod reference;
mod rules;
pub mod schema;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod validate;
pub mod version;

pub use finding::{DetailedFinding, Finding, Layer};
/// An error and its causes on one line, `outer: inner: …`: each error's own message says what
/// failed, never why, so the causes are printed here, each once
/// (docs/design/architecture.md#failure-handling). The one printer: `pacto_runtime::tls::error_chain`
/// is this function, re-exported for the services.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut parent = text.clone();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !prints_its_cause(&parent, &line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        parent = line;
        source = cause.source();
    }
    text
}

/// Whether an error's text already ends a `…: <cause>` part with its cause's text: a foreign
/// error that prints its own source (oci-client's `Digest error: {0}`, kube's
/// `ApiError: {0} ({0:?})`), whose cause a chain printer does not repeat.
pub fn prints_its_cause(text: &str, cause: &str) -> bool {
    text.contains(&format!(": {cause}"))
}

pub use overrides::{
    CliOverrides, ConfigurationOverride, OverrideError, ValuesFile, apply_cli_overrides,
};
pub use parse::{
    PEAK_BYTES_PER_NODE, PEAK_BYTES_PER_TOKEN, ParseError, YamlLimits, count_tokens,
    parse_contract, parse_contract_yaml, parse_json_with, parse_yaml, parse_yaml_with,
};
pub use policy::{
    FALLBACK_POLICY_SCHEMA, MAX_POLICY_DEPTH, PolicyResolveError, PolicyResolver, resolve_policies,
};
pub use validate::{
    JsonOutput, ValidateOptions, ValidationOutcome, ValidationReport, validate_bundle,
    validate_bundle_with_overrides, validate_document,
};
