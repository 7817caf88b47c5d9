//! Domain inputs and outcomes of resolving, and the classification of failures into **Invalid**
//! (fail-closed: the contract is wrong) and **Unavailable** (the contract could not be obtained
//! right now: `ContractValid=Unknown`), docs/design/resolution.md#invalid-or-unavailable. Pure: no I/O.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use pacto_contract::bundle::{BundleError, CONTRACT_FILE};
use pacto_contract::codes;
use pacto_contract::reference::{Reference, ReferenceError};
use pacto_contract::version::Constraint;
use pacto_contract::{ConfigurationOverride, OverrideError};
use pacto_contract::{Finding, Layer, ValidationReport};
use pacto_oci::ErrorClass;

use crate::registry::RegistryError;
use crate::secrets::{SecretError, SecretReadError};

/// `status.validation` path of a Pacto without any contract source.
pub const SPEC_CONTRACT_REF: &str = "spec.contractRef";
/// `status.validation` path of a failure of the OCI reference or of what it points at.
pub const SPEC_OCI: &str = "spec.contractRef.oci";
/// `status.validation` path of a failure of the inline contract as a whole.
pub const SPEC_INLINE: &str = "spec.contractRef.inline";
/// `status.validation` path of an unusable pull Secret (Unavailable: never reported).
pub const SPEC_PULL_SECRET: &str = "spec.contractRef.pullSecretRef";
/// `status.validation` path of an override error.
pub const SPEC_OVERRIDES: &str = "spec.overrides";

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
    /// The oldest shared registry answer this request accepts (a tag's digest, a remembered
    /// failure); zero asks the registry again, joining an identical request in flight
    /// (docs/design/resolution.md#shared-resolves).
    pub max_age: Duration,
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
    /// The oldest shared answer accepted (docs/design/resolution.md#shared-resolves); zero asks
    /// the registry again.
    pub max_age: Duration,
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
        /// The validation report: always at least one error with a code and a path
        /// (docs/design/resolution.md#every-invalid-carries-a-validation-report).
        report: ValidationReport,
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
    #[error("invalid OCI reference {input:?} in spec.contractRef.oci")]
    Reference {
        /// The reference as written.
        input: String,
        /// Why.
        #[source]
        source: ReferenceError,
    },
    /// The pull Secret could not be read.
    #[error("failed to read pull secret {name:?}")]
    SecretRead {
        /// The Secret's name.
        name: String,
        /// Why.
        #[source]
        source: SecretReadError,
    },
    /// The pull Secret's content is unusable for the registry.
    #[error("failed to read pull secret {name:?}")]
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
        /// The failure (shared: one registry answer may serve many requests,
        /// docs/design/resolution.md#shared-resolves).
        #[source]
        source: Arc<RegistryError>,
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
    #[error("override error")]
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

    /// The validation report an Invalid outcome carries: every Invalid has one
    /// (docs/design/resolution.md#every-invalid-carries-a-validation-report). A validation or
    /// parse failure carries the validator's own report; any other failure is one error with a
    /// code of the finding registry, a path and this error's message ([`ResolveError::issue`]).
    pub fn report(&self) -> ValidationReport {
        match self {
            ResolveError::InlineParse { report, .. } | ResolveError::Validation { report, .. } => {
                report.clone()
            }
            other => {
                let mut report = ValidationReport::default();
                if let Some((code, path, message)) = other.issue() {
                    report.push(Finding::new(code, path, message, Layer::Load));
                }
                report
            }
        }
    }

    /// The condition message: what failed and every cause once
    /// (docs/design/architecture.md#failure-handling). A registry failure's message already
    /// carries its causes, inside the text that says what to do; any other error is printed
    /// with its chain.
    pub fn message(&self) -> String {
        match self {
            ResolveError::Registry { message, .. } => message.clone(),
            other => pacto_contract::error_chain(other),
        }
    }

    /// The code, path and message of a failure that is not a validation result (`None` for
    /// those, which carry the validator's report): the path is the Pacto field at fault
    /// (`spec.contractRef`, `spec.contractRef.oci`, `spec.contractRef.inline`, `spec.overrides`)
    /// or, when a bundle is at fault and names an entry, that bundle entry.
    pub fn issue(&self) -> Option<(&'static str, String, String)> {
        let message = self.message();
        Some(match self {
            ResolveError::NoSource => (codes::PARSE_ERROR, SPEC_CONTRACT_REF.into(), message),
            ResolveError::InlineTooLarge { .. } => {
                (codes::PARSE_ERROR, SPEC_INLINE.into(), message)
            }
            ResolveError::Reference { source, .. } => {
                (codes::INVALID_OCI_REF, SPEC_OCI.into(), source.to_string())
            }
            ResolveError::SecretRead { .. } | ResolveError::SecretContent { .. } => {
                (codes::PARSE_ERROR, SPEC_PULL_SECRET.into(), message)
            }
            ResolveError::Registry { class, source, .. } => match source.bundle_error() {
                Some(BundleError::MissingContract) => {
                    (codes::FILE_NOT_FOUND, CONTRACT_FILE.into(), message)
                }
                Some(bundle) => (
                    codes::PARSE_ERROR,
                    bundle.entry().unwrap_or(SPEC_OCI).to_owned(),
                    message,
                ),
                None if *class == ErrorClass::InvalidReference => {
                    (codes::INVALID_OCI_REF, SPEC_OCI.into(), message)
                }
                None => (codes::PARSE_ERROR, SPEC_OCI.into(), message),
            },
            ResolveError::NoSemverTags { .. } | ResolveError::NoVersion { .. } => {
                (codes::PARSE_ERROR, SPEC_OCI.into(), message)
            }
            ResolveError::MissingContract { .. } => {
                (codes::FILE_NOT_FOUND, CONTRACT_FILE.into(), message)
            }
            ResolveError::Override { source } => (
                codes::PARSE_ERROR,
                SPEC_OVERRIDES.into(),
                pacto_contract::error_chain(source),
            ),
            ResolveError::InlineParse { .. } | ResolveError::Validation { .. } => return None,
        })
    }

    /// Gives the errors of a validation report that concern the whole document (contract path
    /// `""`, e.g. `YAML_PARSE_ERROR`) the document's location, `spec.contractRef.inline` or
    /// `pacto.yaml`, so that every reported error names where to look. The condition message
    /// keeps the contract paths.
    #[must_use]
    pub fn locate_document(mut self, inline: bool) -> Self {
        if let ResolveError::InlineParse { report, .. } | ResolveError::Validation { report, .. } =
            &mut self
        {
            let location = if inline { SPEC_INLINE } else { CONTRACT_FILE };
            for finding in report.errors.iter_mut().filter(|f| f.path.is_empty()) {
                location.clone_into(&mut finding.path);
            }
        }
        self
    }

    /// Wraps a registry failure with a message a user can act on.
    pub fn registry(
        source: impl Into<Arc<RegistryError>>,
        reference: &Reference,
        pull_secret: Option<&str>,
    ) -> Self {
        let source = source.into();
        let class = source.class();
        let host = reference.registry();
        // The registry's failure and its causes, inside the actionable text.
        let cause = pacto_contract::error_chain(&*source);
        let message = match class {
            ErrorClass::Unreachable => format!(
                "registry {host:?} is unreachable while resolving {reference}: {cause}; it \
                 will be retried on the next reconcile"
            ),
            ErrorClass::AuthRejected => match pull_secret {
                Some(name) => format!(
                    "registry {host:?} rejected the credentials of pull secret {name:?} for \
                     {reference}: {cause}; check the Secret's username/password or token"
                ),
                None => format!(
                    "registry {host:?} requires authentication for {reference}: {cause}; set \
                     spec.contractRef.pullSecretRef to a Secret with credentials for {host:?}"
                ),
            },
            ErrorClass::NotFound => format!(
                "artifact {reference} not found in registry {host:?}: {cause}; check the \
                 repository name and that the tag or digest was pushed"
            ),
            ErrorClass::TooLarge => {
                format!("bundle {reference} exceeds a size limit: {cause}")
            }
            ErrorClass::Corrupt => format!(
                "bundle {reference} is corrupt or not a valid Pacto bundle: {cause}; re-push it \
                 with `pacto push`"
            ),
            _ => format!("resolving {reference}: {cause}"),
        };
        ResolveError::Registry {
            message,
            class,
            source,
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
                reason: self.message(),
                policy,
            },
            Class::Invalid => Outcome::Invalid {
                message: self.message(),
                report: self.report(),
                policy,
            },
        }
    }
}

#[cfg(test)]
mod tests {
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
            secret.message(),
            "failed to read pull secret \"pull\": the secret is scoped to registry \"a.io\" but \
             credentials were requested for \"b.io\""
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
            missing.message(),
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
                report: r, policy, ..
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
            o.message(),
            "override error: configuration \"db\" not found in contract"
        );
        let report = o.report();
        assert_eq!(
            (
                report.errors[0].code.as_str(),
                report.errors[0].path.as_str()
            ),
            ("PARSE_ERROR", "spec.overrides")
        );
    }

    fn first_issue(e: &ResolveError) -> (String, String, String) {
        let report = e.report();
        assert_eq!(report.errors.len(), 1, "{report:?}");
        let f = &report.errors[0];
        (f.code.clone(), f.path.clone(), f.message.clone())
    }

    #[test]
    fn every_invalid_carries_a_coded_located_report() {
        let r = reference();
        let issue = |e: ResolveError| {
            assert_eq!(e.class(), Class::Invalid, "{e}");
            let (code, path, message) = first_issue(&e);
            assert!(!message.is_empty(), "{e}");
            // The outcome carries the same report.
            match e.into_outcome(ResolutionPolicy::None) {
                Outcome::Invalid { report, .. } => assert_eq!(report.errors.len(), 1),
                other => panic!("{other:?}"),
            }
            (code, path)
        };
        let pair = |c: &str, p: &str| (c.to_owned(), p.to_owned());
        assert_eq!(
            issue(ResolveError::NoSource),
            pair("PARSE_ERROR", "spec.contractRef")
        );
        assert_eq!(
            issue(ResolveError::InlineTooLarge { size: 9, limit: 8 }),
            pair("PARSE_ERROR", "spec.contractRef.inline")
        );
        let malformed = Reference::parse_url_encoded("https://ghcr.io/a/b").unwrap_err();
        let e = ResolveError::Reference {
            input: "https://ghcr.io/a/b".into(),
            source: malformed.clone(),
        };
        assert_eq!(first_issue(&e).2, malformed.to_string());
        assert_eq!(issue(e), pair("INVALID_OCI_REF", "spec.contractRef.oci"));
        for (class, code) in [
            (ErrorClass::Corrupt, "PARSE_ERROR"),
            (ErrorClass::TooLarge, "PARSE_ERROR"),
            (ErrorClass::NoMatchingVersion, "PARSE_ERROR"),
            (ErrorClass::InvalidReference, "INVALID_OCI_REF"),
        ] {
            let e = ResolveError::registry(registry_error(class), &r, None);
            assert_eq!(first_issue(&e).2, e.to_string());
            assert_eq!(issue(e), pair(code, "spec.contractRef.oci"), "{class:?}");
        }
        let bundle = |source: BundleError| {
            ResolveError::registry(
                RegistryError::Oci(pacto_oci::OciError::Bundle {
                    reference: r.to_string(),
                    source,
                }),
                &r,
                None,
            )
        };
        assert_eq!(
            issue(bundle(BundleError::MissingContract)),
            pair("FILE_NOT_FOUND", "pacto.yaml")
        );
        assert_eq!(
            issue(bundle(BundleError::FileTooLarge {
                path: "interfaces/big.yaml".into(),
                limit: 10,
            })),
            pair("PARSE_ERROR", "interfaces/big.yaml")
        );
        assert_eq!(
            issue(bundle(BundleError::TotalTooLarge { limit: 10 })),
            pair("PARSE_ERROR", "spec.contractRef.oci")
        );
        assert_eq!(
            issue(bundle(BundleError::Corrupt {
                source: std::io::Error::other("bad gzip header"),
            })),
            pair("PARSE_ERROR", "spec.contractRef.oci")
        );
        assert_eq!(
            issue(ResolveError::MissingContract {
                reference: r.to_string()
            }),
            pair("FILE_NOT_FOUND", "pacto.yaml")
        );
        assert_eq!(
            issue(ResolveError::NoVersion {
                repository: "ghcr.io/acme/svc".into(),
                reason: "no tags satisfy constraint \">=4\"".into(),
                tags: "1.0.0".into(),
            }),
            pair("PARSE_ERROR", "spec.contractRef.oci")
        );
    }

    #[test]
    fn whole_document_errors_name_the_document() {
        let mut report = ValidationReport::default();
        report.push(Finding::new(
            "YAML_PARSE_ERROR",
            "",
            "did not find expected node content",
            Layer::Structural,
        ));
        report.push(Finding::new(
            "SCHEMA_VIOLATION",
            "service.name",
            "is required",
            Layer::Structural,
        ));
        let paths = |e: &ResolveError| {
            e.report()
                .errors
                .iter()
                .map(|f| f.path.clone())
                .collect::<Vec<_>>()
        };
        let e = ResolveError::validation(report.clone());
        let message = e.to_string();
        let e = e.locate_document(false);
        assert_eq!(paths(&e), ["pacto.yaml", "service.name"]);
        assert_eq!(
            e.to_string(),
            message,
            "the condition keeps the contract paths"
        );
        let e = ResolveError::InlineParse {
            message: "did not find expected node content".into(),
            report,
        }
        .locate_document(true);
        assert_eq!(paths(&e), ["spec.contractRef.inline", "service.name"]);
    }
}
