//! Domain inputs and outcomes of resolving, and the classification of failures into **Invalid**
//! (fail-closed: the contract is wrong) and **Unavailable** (the contract could not be obtained
//! right now: `ContractValid=Unknown`), docs/design/resolution.md#invalid-or-unavailable. Pure: no I/O.

use std::collections::BTreeMap;

use pacto_contract::ValidationReport;
use pacto_contract::reference::{Reference, ReferenceError};
use pacto_contract::version::Constraint;
use pacto_contract::{ConfigurationOverride, OverrideError};
use pacto_oci::ErrorClass;

use crate::registry::RegistryError;
use crate::secrets::{SecretError, SecretReadError};

/// Where the contract comes from (`spec.contractRef`; inline wins over OCI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractSource {
    /// Inline YAML.
    Inline(String),
    /// An OCI reference as written (optional `oci://`, possibly percent-encoded).
    Oci(String),
    /// Neither was given.
    None,
}

impl ContractSource {
    /// `spec.contractRef` → source: inline wins when both are set; empty strings count as unset.
    pub fn from_fields(oci: &str, inline: &str) -> Self {
        if !inline.trim().is_empty() {
            ContractSource::Inline(inline.to_owned())
        } else if !oci.trim().is_empty() {
            ContractSource::Oci(oci.trim().to_owned())
        } else {
            ContractSource::None
        }
    }

    /// Low-cardinality label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            ContractSource::Inline(_) => "inline",
            ContractSource::Oci(_) => "oci",
            ContractSource::None => "none",
        }
    }
}

/// One Resolve request, validated.
#[derive(Debug, Clone)]
pub struct ResolveInput {
    /// The Pacto's namespace (where the pull Secret is read).
    pub namespace: String,
    /// The Pacto's name (logs).
    pub pacto_name: String,
    /// The contract source.
    pub source: ContractSource,
    /// `spec.contractRef.pullSecretRef`.
    pub pull_secret: Option<String>,
    /// `spec.overrides.configurations`.
    pub overrides: Vec<ConfigurationOverride>,
    /// Optional version constraint for unversioned references (a dependency's `compatibility`);
    /// `None` for the operator's `Latest` policy, where pre-releases compete normally.
    pub constraint: Option<Constraint>,
}

/// One ListRevisions request, validated.
#[derive(Debug, Clone)]
pub struct ListInput {
    /// The Pacto's namespace.
    pub namespace: String,
    /// The Pacto's name (logs).
    pub pacto_name: String,
    /// The Pacto's OCI reference (its repository is listed).
    pub oci: String,
    /// `spec.contractRef.pullSecretRef`.
    pub pull_secret: Option<String>,
    /// Tags to re-resolve; empty = every semver tag.
    pub tags: Vec<String>,
}

/// How a reference pins its version (`status.resolutionPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolutionPolicy {
    /// Inline contracts, malformed references.
    None,
    /// Unversioned: the highest semver tag.
    Latest,
    /// An explicit tag.
    PinnedTag,
    /// An explicit digest.
    PinnedDigest,
}

impl ResolutionPolicy {
    /// The policy of a parsed reference.
    pub fn of(reference: &Reference) -> Self {
        if reference.digest().is_some() {
            ResolutionPolicy::PinnedDigest
        } else if reference.tag().is_some() {
            ResolutionPolicy::PinnedTag
        } else {
            ResolutionPolicy::Latest
        }
    }
}

/// A contract that was obtained and validated without errors.
#[derive(Debug, Clone)]
pub struct ResolvedContract {
    /// The effective contract YAML (overrides applied).
    pub effective_yaml: Vec<u8>,
    /// The original `pacto.yaml` bytes (before overrides).
    pub raw_yaml: Vec<u8>,
    /// SHA-256 hex of `raw_yaml`.
    pub content_hash: String,
    /// The resolved reference without scheme (empty for inline).
    pub resolved_ref: String,
    /// The manifest digest (empty for inline).
    pub digest: String,
    /// The resolution policy.
    pub policy: ResolutionPolicy,
    /// Validation result (valid; possibly with warnings).
    pub report: ValidationReport,
    /// JSON Schema documents of the configurations with a bundle-local schema, by name.
    pub configuration_schemas: BTreeMap<String, Vec<u8>>,
}

/// The outcome of a Resolve.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Obtained and valid.
    Resolved(Box<ResolvedContract>),
    /// Malformed or failing validation.
    Invalid {
        /// The condition message.
        message: String,
        /// The validation result, when one exists.
        report: Option<ValidationReport>,
        /// The reference's policy.
        policy: ResolutionPolicy,
    },
    /// Not obtainable right now.
    Unavailable {
        /// The condition message.
        reason: String,
        /// The reference's policy.
        policy: ResolutionPolicy,
    },
}

impl Outcome {
    /// Low-cardinality label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Resolved(_) => "resolved",
            Outcome::Invalid { .. } => "invalid",
            Outcome::Unavailable { .. } => "unavailable",
        }
    }
}

/// The two failure classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `ContractValid=False/Invalid`.
    Invalid,
    /// `ContractValid=Unknown/Unavailable`.
    Unavailable,
}

/// Why a contract could not be resolved. The `Display` text is the condition message.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Neither `oci` nor `inline`.
    #[error("no contract source specified: set spec.contractRef.oci or spec.contractRef.inline")]
    NoSource,
    /// The inline YAML exceeds the size limit.
    #[error("inline contract is {size} bytes, over the {limit}-byte limit")]
    InlineTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The OCI reference is malformed.
    #[error("invalid OCI reference {input:?} in spec.contractRef.oci: {source}")]
    Reference {
        /// The reference as written.
        input: String,
        /// Why.
        #[source]
        source: ReferenceError,
    },
    /// The pull Secret could not be read.
    #[error("failed to read pull secret {name:?}: {source}")]
    SecretRead {
        /// The Secret's name.
        name: String,
        /// Why.
        #[source]
        source: SecretReadError,
    },
    /// The pull Secret's content is unusable for the registry.
    #[error("failed to read pull secret {name:?}: secret {name:?} {source}")]
    SecretContent {
        /// The Secret's name.
        name: String,
        /// Why.
        #[source]
        source: SecretError,
    },
    /// A registry operation failed; the message says what to do.
    #[error("{message}")]
    Registry {
        /// The actionable message.
        message: String,
        /// Its class.
        class: ErrorClass,
        /// The failure.
        #[source]
        source: Box<RegistryError>,
    },
    /// An unversioned reference names a repository without any semver tag: nothing to track,
    /// like a missing tag (Unavailable, troubleshooting "Contract not resolving").
    #[error(
        "no semver tags found in {repository} (tags seen: {tags}): an unversioned reference tracks the highest semver tag; push one, or pin a tag or digest in spec.contractRef.oci"
    )]
    NoSemverTags {
        /// `registry/repository`.
        repository: String,
        /// The tags seen (at most 20).
        tags: String,
    },
    /// Semver tags exist but none satisfies the requested range.
    #[error("no version of {repository} satisfies the request: {reason} (tags seen: {tags})")]
    NoVersion {
        /// `registry/repository`.
        repository: String,
        /// `no tags satisfy constraint …`.
        reason: String,
        /// The tags seen (at most 20).
        tags: String,
    },
    /// The bundle has no `pacto.yaml`.
    #[error("{reference}: not a valid Pacto bundle: pacto.yaml missing at the bundle root")]
    MissingContract {
        /// The resolved reference.
        reference: String,
    },
    /// An override names an unknown configuration or cannot be applied.
    #[error("override error: {source}")]
    Override {
        /// Why.
        #[source]
        source: OverrideError,
    },
    /// The contract does not parse (inline).
    #[error("failed to parse inline contract: {message}")]
    InlineParse {
        /// The parser's message.
        message: String,
        /// The validation result carrying the parse error.
        report: ValidationReport,
    },
    /// Validation found errors.
    #[error("Contract validation failed: {summary}")]
    Validation {
        /// `<path>: <msg>; …`
        summary: String,
        /// The full result.
        report: ValidationReport,
    },
}

impl ResolveError {
    /// Invalid or Unavailable (fail-closed: anything not known to be transient is Invalid).
    pub fn class(&self) -> Class {
        match self {
            ResolveError::SecretRead { .. }
            | ResolveError::SecretContent { .. }
            | ResolveError::NoSemverTags { .. } => Class::Unavailable,
            ResolveError::Registry { class, .. }
                if class.is_unavailable() || *class == ErrorClass::Client =>
            {
                Class::Unavailable
            }
            _ => Class::Invalid,
        }
    }

    /// The validation result to report with an Invalid outcome.
    pub fn report(&self) -> Option<ValidationReport> {
        match self {
            ResolveError::InlineParse { report, .. } | ResolveError::Validation { report, .. } => {
                Some(report.clone())
            }
            ResolveError::Override { source } => {
                let mut report = ValidationReport::default();
                report.push(pacto_contract::Finding::new(
                    "",
                    "spec.overrides",
                    source.to_string(),
                    pacto_contract::Layer::Load,
                ));
                Some(report)
            }
            _ => None,
        }
    }

    /// Wraps a registry failure with a message a user can act on.
    pub fn registry(
        source: RegistryError,
        reference: &Reference,
        pull_secret: Option<&str>,
    ) -> Self {
        let class = source.class();
        let host = reference.registry();
        let message = match class {
            ErrorClass::Unreachable => format!(
                "registry {host:?} is unreachable while resolving {reference}: {source}; it \
                 will be retried on the next reconcile"
            ),
            ErrorClass::AuthRejected => match pull_secret {
                Some(name) => format!(
                    "registry {host:?} rejected the credentials of pull secret {name:?} for \
                     {reference}: {source}; check the Secret's username/password or token"
                ),
                None => format!(
                    "registry {host:?} requires authentication for {reference}: {source}; set \
                     spec.contractRef.pullSecretRef to a Secret with credentials for {host:?}"
                ),
            },
            ErrorClass::NotFound => format!(
                "artifact {reference} not found in registry {host:?}: {source}; check the \
                 repository name and that the tag or digest was pushed"
            ),
            ErrorClass::TooLarge => {
                format!("bundle {reference} exceeds a size limit: {source}")
            }
            ErrorClass::Corrupt => format!(
                "bundle {reference} is corrupt or not a valid Pacto bundle: {source}; re-push it \
                 with `pacto push`"
            ),
            _ => format!("resolving {reference}: {source}"),
        };
        ResolveError::Registry {
            message,
            class,
            source: Box::new(source),
        }
    }

    /// The summary of a failed validation: `<path>: <msg>; …` (path omitted when empty).
    pub fn validation(report: ValidationReport) -> Self {
        let summary = report
            .errors
            .iter()
            .map(|f| {
                if f.path.is_empty() {
                    f.message.clone()
                } else {
                    format!("{}: {}", f.path, f.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        ResolveError::Validation { summary, report }
    }

    /// The outcome for this failure.
    pub fn into_outcome(self, policy: ResolutionPolicy) -> Outcome {
        match self.class() {
            Class::Unavailable => Outcome::Unavailable {
                reason: self.to_string(),
                policy,
            },
            Class::Invalid => Outcome::Invalid {
                message: self.to_string(),
                report: self.report(),
                policy,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use pacto_contract::{Finding, Layer};

    use super::*;

    fn reference() -> Reference {
        Reference::parse("ghcr.io/acme/svc:1.0.0").unwrap()
    }

    #[test]
    fn source_precedence() {
        assert_eq!(
            ContractSource::from_fields("ghcr.io/a/b", "pactoVersion: '2.0'"),
            ContractSource::Inline("pactoVersion: '2.0'".into())
        );
        assert_eq!(
            ContractSource::from_fields(" ghcr.io/a/b ", ""),
            ContractSource::Oci("ghcr.io/a/b".into())
        );
        assert_eq!(ContractSource::from_fields("", "  "), ContractSource::None);
    }

    #[test]
    fn policies_follow_the_reference_shape() {
        let p = |s: &str| ResolutionPolicy::of(&Reference::parse(s).unwrap());
        assert_eq!(p("ghcr.io/a/b"), ResolutionPolicy::Latest);
        assert_eq!(p("oci://ghcr.io/a/b:1.2.3"), ResolutionPolicy::PinnedTag);
        assert_eq!(
            p(&format!("ghcr.io/a/b@sha256:{}", "a".repeat(64))),
            ResolutionPolicy::PinnedDigest
        );
        assert_eq!(
            p(&format!("localhost:5000/a/b:1@sha256:{}", "a".repeat(64))),
            ResolutionPolicy::PinnedDigest
        );
    }

    fn registry_error(class: ErrorClass) -> RegistryError {
        RegistryError::Status {
            reference: "ghcr.io/acme/svc:1.0.0".into(),
            status: 0,
            class,
        }
    }

    #[test]
    fn classification_is_fail_closed() {
        let r = reference();
        for class in [
            ErrorClass::Unreachable,
            ErrorClass::AuthRejected,
            ErrorClass::NotFound,
            ErrorClass::Client,
        ] {
            let e = ResolveError::registry(registry_error(class), &r, None);
            assert_eq!(e.class(), Class::Unavailable, "{class:?}");
        }
        for class in [
            ErrorClass::Corrupt,
            ErrorClass::TooLarge,
            ErrorClass::InvalidReference,
            ErrorClass::NoMatchingVersion,
        ] {
            let e = ResolveError::registry(registry_error(class), &r, None);
            assert_eq!(e.class(), Class::Invalid, "{class:?}");
        }
        assert_eq!(ResolveError::NoSource.class(), Class::Invalid);
        let secret = ResolveError::SecretContent {
            name: "pull".into(),
            source: SecretError::WrongRegistry {
                scoped: "a.io".into(),
                requested: "b.io".into(),
            },
        };
        assert_eq!(secret.class(), Class::Unavailable);
        assert_eq!(
            secret.to_string(),
            "failed to read pull secret \"pull\": secret \"pull\" is scoped to registry \"a.io\" \
             but credentials were requested for \"b.io\""
        );
        let missing = ResolveError::SecretRead {
            name: "pull".into(),
            source: SecretReadError::NotFound {
                namespace: "ns".into(),
                name: "pull".into(),
            },
        };
        assert_eq!(missing.class(), Class::Unavailable);
        assert_eq!(
            missing.to_string(),
            "failed to read pull secret \"pull\": secret \"pull\" not found in namespace \"ns\""
        );
    }

    #[test]
    fn messages_are_actionable() {
        let r = reference();
        let auth = ResolveError::registry(registry_error(ErrorClass::AuthRejected), &r, None);
        assert!(
            auth.to_string().contains("spec.contractRef.pullSecretRef"),
            "{auth}"
        );
        let auth =
            ResolveError::registry(registry_error(ErrorClass::AuthRejected), &r, Some("creds"));
        assert!(auth.to_string().contains("pull secret \"creds\""), "{auth}");
        let nf = ResolveError::registry(registry_error(ErrorClass::NotFound), &r, None);
        assert!(
            nf.to_string()
                .starts_with("artifact ghcr.io/acme/svc:1.0.0 not found"),
            "{nf}"
        );
    }

    #[test]
    fn validation_summary_and_outcomes() {
        let mut report = ValidationReport::default();
        report.push(Finding::new(
            "SCHEMA_VIOLATION",
            "service.name",
            "is required",
            Layer::Structural,
        ));
        report.push(Finding::new("X", "", "top-level", Layer::Structural));
        let e = ResolveError::validation(report);
        assert_eq!(
            e.to_string(),
            "Contract validation failed: service.name: is required; top-level"
        );
        match e.into_outcome(ResolutionPolicy::PinnedTag) {
            Outcome::Invalid {
                report: Some(r),
                policy,
                ..
            } => {
                assert_eq!(r.errors.len(), 2);
                assert_eq!(policy, ResolutionPolicy::PinnedTag);
            }
            other => panic!("{other:?}"),
        }
        let o = ResolveError::Override {
            source: OverrideError::UnknownConfiguration { name: "db".into() },
        };
        assert_eq!(
            o.to_string(),
            "override error: configuration \"db\" not found in contract"
        );
        let report = o.report().unwrap();
        assert_eq!(report.errors[0].path, "spec.overrides");
    }
}
