//! The finding registry (spec §3.6): every finding code, its category and its default severity,
//! plus the CLI-level codes of §3.5 (which are not registered).

use std::fmt;

use serde::{Serialize, Serializer};

/// Severity of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The contract (or workload) is wrong.
    Error,
    /// Worth attention; never stops a pipeline.
    Warning,
    /// Informational.
    Info,
    /// Runtime uncertainty (the truth could not be established).
    Unknown,
}

impl Severity {
    /// The wire spelling (`error`, `warning`, `info`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Info => "info",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Severity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Category of a finding. `Unregistered` is the empty category `""` given to unknown codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    InterfaceMismatch,
    StateMismatch,
    PolicyViolation,
    ConfigurationViolation,
    MissingConfiguration,
    InvalidReference,
    UnresolvedReference,
    ReferenceCycle,
    DuplicateName,
    InvalidVersion,
    InvalidReadiness,
    MissingEvidence,
    InvalidFile,
    SchemaViolation,
    RuntimeDrift,
    InvalidDependency,
    InvalidCapability,
    Inconclusive,
    /// The category `""` of a code that is not in the registry.
    Unregistered,
}

impl Category {
    /// The wire spelling (e.g. `InvalidFile`; `""` for [`Category::Unregistered`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InterfaceMismatch => "InterfaceMismatch",
            Self::StateMismatch => "StateMismatch",
            Self::PolicyViolation => "PolicyViolation",
            Self::ConfigurationViolation => "ConfigurationViolation",
            Self::MissingConfiguration => "MissingConfiguration",
            Self::InvalidReference => "InvalidReference",
            Self::UnresolvedReference => "UnresolvedReference",
            Self::ReferenceCycle => "ReferenceCycle",
            Self::DuplicateName => "DuplicateName",
            Self::InvalidVersion => "InvalidVersion",
            Self::InvalidReadiness => "InvalidReadiness",
            Self::MissingEvidence => "MissingEvidence",
            Self::InvalidFile => "InvalidFile",
            Self::SchemaViolation => "SchemaViolation",
            Self::RuntimeDrift => "RuntimeDrift",
            Self::InvalidDependency => "InvalidDependency",
            Self::InvalidCapability => "InvalidCapability",
            Self::Inconclusive => "Inconclusive",
            Self::Unregistered => "",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Category {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident => $category:ident, $severity:ident;)*) => {
        $( $(#[$doc])* pub const $name: &str = stringify!($name); )*

        /// Every registered code with its category and default severity, in registry order.
        pub const REGISTRY: &[(&str, Category, Severity)] = &[
            $( ($name, Category::$category, Severity::$severity), )*
        ];
    };
}

codes! {
    /// `pactoVersion` is missing, not a string, or not `"2.0"`.
    UNSUPPORTED_PACTO_VERSION => InvalidVersion, Error;
    /// The structural validator itself failed.
    SCHEMA_ERROR => SchemaViolation, Error;
    /// A leaf cause of a layer-1 JSON Schema failure.
    SCHEMA_VIOLATION => SchemaViolation, Error;
    /// `pacto.yaml` is not parseable YAML.
    YAML_PARSE_ERROR => SchemaViolation, Error;
    /// `service.version` is not a (lenient) semver.
    INVALID_SEMVER => InvalidVersion, Error;
    /// An `oci://` configuration ref is malformed.
    INVALID_CONFIG_REF => InvalidReference, Error;
    /// An `oci://` policy ref is malformed.
    INVALID_POLICY_REF => InvalidReference, Error;
    /// An `oci://` dependency ref is malformed.
    INVALID_OCI_REF => InvalidReference, Error;
    /// An OCI dependency is pinned by tag but not by digest.
    TAG_NOT_DIGEST => InvalidReference, Warning;
    /// Two interfaces share a name.
    DUPLICATE_INTERFACE_NAME => DuplicateName, Error;
    /// Two configurations share a name.
    DUPLICATE_CONFIGURATION_NAME => DuplicateName, Error;
    /// Two policies share a name.
    DUPLICATE_POLICY_NAME => DuplicateName, Error;
    /// Two dependencies share a name.
    DUPLICATE_DEPENDENCY_NAME => DuplicateName, Error;
    /// Two readiness claims share an id.
    DUPLICATE_READINESS_ID => DuplicateName, Error;
    /// Two capabilities share an assertion key.
    DUPLICATE_CAPABILITY => DuplicateName, Error;
    /// A dependency has an empty `compatibility`.
    EMPTY_COMPATIBILITY => InvalidDependency, Error;
    /// A dependency `compatibility` is not a constraint.
    INVALID_COMPATIBILITY => InvalidDependency, Error;
    /// A configuration has values but neither schema nor ref.
    VALUES_WITHOUT_SCHEMA => MissingConfiguration, Error;
    /// Configuration values do not validate against their schema.
    CONFIG_VALUES_VALIDATION_FAILED => ConfigurationViolation, Error;
    /// An interface file does not parse.
    INVALID_INTERFACE_SPEC => InvalidFile, Error;
    /// A configuration schema file is not JSON.
    INVALID_CONFIG_JSON => InvalidFile, Error;
    /// A policy schema file is not JSON.
    INVALID_POLICY_JSON => InvalidFile, Error;
    /// A referenced bundle file does not exist.
    FILE_NOT_FOUND => InvalidFile, Error;
    /// A configuration schema does not compile.
    INVALID_CONFIG_SCHEMA => SchemaViolation, Error;
    /// A policy schema does not compile.
    INVALID_POLICY_SCHEMA => SchemaViolation, Error;
    /// `state.type: stateless` with persistent durability.
    STATELESS_PERSISTENT_CONFLICT => StateMismatch, Error;
    /// `readiness.expires` is not a canonical date.
    INVALID_READINESS_EXPIRES => InvalidReadiness, Error;
    /// A readiness history entry is malformed.
    INVALID_READINESS_REVISION => InvalidReadiness, Error;
    /// A claim's evidence is whitespace-only.
    EMPTY_READINESS_EVIDENCE => MissingEvidence, Error;
    /// A claim's description is whitespace-only.
    EMPTY_READINESS_DESCRIPTION => MissingEvidence, Error;
    /// The raw document could not be re-read for policy enforcement.
    POLICY_ENFORCEMENT_ERROR => PolicyViolation, Error;
    /// A policy schema rejects the contract.
    POLICY_VIOLATION => PolicyViolation, Error;
    /// A policy `target` other than `contract` (deprecated; layer 2 only).
    UNSUPPORTED_POLICY_TARGET => PolicyViolation, Error;
    /// A `ref` policy was skipped because no resolver was available.
    POLICY_REF_NOT_ENFORCED => UnresolvedReference, Warning;
    /// A policy could not be resolved.
    POLICY_REF_UNRESOLVED => UnresolvedReference, Error;
    /// A policy ref reappears in its own resolution chain.
    POLICY_REF_CYCLE => ReferenceCycle, Error;
    /// Interface type outside the enum (deprecated; layer 2 only).
    INVALID_INTERFACE_TYPE => InterfaceMismatch, Error;
    /// Interface without a ref (deprecated; layer 2 only).
    INTERFACE_REF_REQUIRED => InterfaceMismatch, Error;
    /// Capability type outside the enum (deprecated; layer 2 only).
    INVALID_CAPABILITY_TYPE => InvalidCapability, Error;
    /// Extension capability without a ref (deprecated; layer 2 only).
    CAPABILITY_REF_REQUIRED => InvalidCapability, Error;
    /// Extension capability ref not namespaced.
    CAPABILITY_REF_INVALID => InvalidCapability, Error;
    /// `binding.interface` names no declared interface.
    CAPABILITY_INTERFACE_UNKNOWN => InvalidCapability, Error;
    /// `binding.path` is not a safe absolute path.
    CAPABILITY_PATH_INVALID => InvalidCapability, Error;
    /// Runtime workload kind differs from the contract.
    WORKLOAD_MISMATCH => RuntimeDrift, Error;
    /// Runtime persistence differs from the contract.
    PERSISTENCE_MISMATCH => RuntimeDrift, Error;
    /// A declared dependency is unreachable.
    DEPENDENCY_UNREACHABLE => RuntimeDrift, Error;
    /// A declared capability is absent at runtime.
    CAPABILITY_ABSENT => RuntimeDrift, Error;
    /// A declared interface is absent at runtime.
    INTERFACE_ABSENT => RuntimeDrift, Error;
    /// A required configuration is absent at runtime.
    CONFIGURATION_ABSENT => RuntimeDrift, Error;
    /// A configuration differs at runtime.
    CONFIGURATION_MISMATCH => RuntimeDrift, Error;
    /// No evidence for an assertion.
    EVIDENCE_MISSING => Inconclusive, Unknown;
    /// The assertion cannot be observed.
    OBSERVATION_UNSUPPORTED => Inconclusive, Unknown;
    /// Evidence collection failed.
    COLLECTION_FAILED => Inconclusive, Unknown;
    /// Evidence is too old.
    EVIDENCE_STALE => Inconclusive, Unknown;
    /// Evidence is insufficient.
    EVIDENCE_INSUFFICIENT => Inconclusive, Unknown;
    /// No evaluator for an extension capability.
    EXTENSION_EVALUATOR_UNAVAILABLE => Inconclusive, Unknown;
}

/// CLI-level code (§3.5, not registered): the contract could not be loaded, overridden or parsed.
pub const PARSE_ERROR: &str = "PARSE_ERROR";
/// CLI-level code (§3.5, not registered): generic lock verification failure.
pub const LOCK_ERROR: &str = "LOCK_ERROR";
/// CLI-level code (§3.5, not registered): `validate --readiness` gate unmet.
pub const READINESS_GATE_UNMET: &str = "READINESS_GATE_UNMET";

/// Category and default severity of `code`; an unknown code gets `("", error)`.
pub fn lookup(code: &str) -> (Category, Severity) {
    REGISTRY.iter().find(|(c, _, _)| *c == code).map_or(
        (Category::Unregistered, Severity::Error),
        |(_, cat, sev)| (*cat, *sev),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lookups() {
        assert_eq!(
            lookup(TAG_NOT_DIGEST),
            (Category::InvalidReference, Severity::Warning)
        );
        assert_eq!(
            lookup(POLICY_REF_NOT_ENFORCED),
            (Category::UnresolvedReference, Severity::Warning)
        );
        assert_eq!(
            lookup(EVIDENCE_STALE),
            (Category::Inconclusive, Severity::Unknown)
        );
        assert_eq!(
            lookup(INVALID_CONFIG_SCHEMA),
            (Category::SchemaViolation, Severity::Error)
        );
        assert_eq!(lookup("NOPE"), (Category::Unregistered, Severity::Error));
        assert_eq!(lookup(PARSE_ERROR).0.as_str(), "");
    }

    #[test]
    fn registry_has_unique_codes() {
        let mut seen = std::collections::HashSet::new();
        for (code, _, _) in REGISTRY {
            assert!(seen.insert(*code), "duplicate {code}");
        }
        assert_eq!(REGISTRY.len(), 56);
    }
}
