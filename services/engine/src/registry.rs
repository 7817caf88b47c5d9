//! The finding code registry (evidence.md §4, operator.md §1.3): every code with its category
//! and severity, the optional-assertion axis, and the lookups `category_for` / `severity_for`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Finding severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A confirmed violation of a required assertion, or a structural error.
    Error,
    /// A violation of an optional assertion, or a structural warning.
    Warning,
    /// Informational; ignored by status derivation.
    Info,
    /// The assertion could not be evaluated.
    Unknown,
}

impl Severity {
    /// All severities.
    pub const ALL: [Self; 4] = [Self::Error, Self::Warning, Self::Info, Self::Unknown];

    /// The wire name (`error`, `warning`, `info`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Info => "info",
            Self::Unknown => "unknown",
        }
    }

    /// Parses the wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Finding category. An unregistered code has no category (the wire shows `""`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Category {
    /// Deprecated: no registered code maps to it.
    InterfaceMismatch,
    /// State declaration conflict.
    StateMismatch,
    /// Policy layer result.
    PolicyViolation,
    /// Configuration values do not validate.
    ConfigurationViolation,
    /// Values without a schema.
    MissingConfiguration,
    /// A malformed reference.
    InvalidReference,
    /// A policy reference that could not be resolved or enforced.
    UnresolvedReference,
    /// A policy reference cycle.
    ReferenceCycle,
    /// A duplicated name or key.
    DuplicateName,
    /// An invalid version.
    InvalidVersion,
    /// An invalid readiness declaration.
    InvalidReadiness,
    /// Missing readiness evidence or description.
    MissingEvidence,
    /// A referenced bundle file is missing or malformed.
    InvalidFile,
    /// Structural schema violation.
    SchemaViolation,
    /// Runtime contradicts the contract.
    RuntimeDrift,
    /// An invalid dependency declaration.
    InvalidDependency,
    /// An invalid capability declaration.
    InvalidCapability,
    /// An assertion could not be evaluated.
    Inconclusive,
}

impl Category {
    /// All categories.
    pub const ALL: [Self; 18] = [
        Self::InterfaceMismatch,
        Self::StateMismatch,
        Self::PolicyViolation,
        Self::ConfigurationViolation,
        Self::MissingConfiguration,
        Self::InvalidReference,
        Self::UnresolvedReference,
        Self::ReferenceCycle,
        Self::DuplicateName,
        Self::InvalidVersion,
        Self::InvalidReadiness,
        Self::MissingEvidence,
        Self::InvalidFile,
        Self::SchemaViolation,
        Self::RuntimeDrift,
        Self::InvalidDependency,
        Self::InvalidCapability,
        Self::Inconclusive,
    ];

    /// The wire name (identical to the variant name).
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
        }
    }

    /// Parses the wire name (`""` is not a category: use `Option<Category>`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal ),* $(,)?) => {
        /// Every finding code known to Pacto, including the five deprecated ones.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum FindingCode {
            $( $(#[$doc])* $variant, )*
        }

        impl FindingCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [FindingCode] = &[ $( FindingCode::$variant, )* ];

            /// The wire name, e.g. `INTERFACE_ABSENT`.
            pub fn as_str(self) -> &'static str {
                match self { $( FindingCode::$variant => $name, )* }
            }
        }
    };
}

codes! {
    /// Unsupported `pactoVersion`.
    UnsupportedPactoVersion = "UNSUPPORTED_PACTO_VERSION",
    /// JSON Schema could not be applied.
    SchemaError = "SCHEMA_ERROR",
    /// JSON Schema violation.
    SchemaViolation = "SCHEMA_VIOLATION",
    /// The YAML does not parse.
    YamlParseError = "YAML_PARSE_ERROR",
    /// `service.version` is not semver.
    InvalidSemver = "INVALID_SEMVER",
    /// Bad configuration ref.
    InvalidConfigRef = "INVALID_CONFIG_REF",
    /// Bad policy ref.
    InvalidPolicyRef = "INVALID_POLICY_REF",
    /// Bad OCI ref.
    InvalidOciRef = "INVALID_OCI_REF",
    /// A dependency ref uses a tag instead of a digest (warning).
    TagNotDigest = "TAG_NOT_DIGEST",
    /// Duplicate interface name.
    DuplicateInterfaceName = "DUPLICATE_INTERFACE_NAME",
    /// Duplicate configuration name.
    DuplicateConfigurationName = "DUPLICATE_CONFIGURATION_NAME",
    /// Duplicate policy name.
    DuplicatePolicyName = "DUPLICATE_POLICY_NAME",
    /// Duplicate dependency name.
    DuplicateDependencyName = "DUPLICATE_DEPENDENCY_NAME",
    /// Empty compatibility range.
    EmptyCompatibility = "EMPTY_COMPATIBILITY",
    /// Unparseable compatibility range.
    InvalidCompatibility = "INVALID_COMPATIBILITY",
    /// Configuration values without a schema.
    ValuesWithoutSchema = "VALUES_WITHOUT_SCHEMA",
    /// Configuration values fail their schema.
    ConfigValuesValidationFailed = "CONFIG_VALUES_VALIDATION_FAILED",
    /// An interface spec file is invalid.
    InvalidInterfaceSpec = "INVALID_INTERFACE_SPEC",
    /// A configuration JSON file is invalid.
    InvalidConfigJson = "INVALID_CONFIG_JSON",
    /// A configuration schema is invalid.
    InvalidConfigSchema = "INVALID_CONFIG_SCHEMA",
    /// A policy JSON file is invalid.
    InvalidPolicyJson = "INVALID_POLICY_JSON",
    /// A policy schema is invalid.
    InvalidPolicySchema = "INVALID_POLICY_SCHEMA",
    /// A referenced bundle file is missing.
    FileNotFound = "FILE_NOT_FOUND",
    /// `stateless` with `persistent` durability.
    StatelessPersistentConflict = "STATELESS_PERSISTENT_CONFLICT",
    /// Invalid readiness `expires`.
    InvalidReadinessExpires = "INVALID_READINESS_EXPIRES",
    /// Invalid readiness revision.
    InvalidReadinessRevision = "INVALID_READINESS_REVISION",
    /// Duplicate readiness claim id.
    DuplicateReadinessId = "DUPLICATE_READINESS_ID",
    /// A readiness claim without evidence.
    EmptyReadinessEvidence = "EMPTY_READINESS_EVIDENCE",
    /// A readiness claim without description.
    EmptyReadinessDescription = "EMPTY_READINESS_DESCRIPTION",
    /// A policy could not be enforced.
    PolicyEnforcementError = "POLICY_ENFORCEMENT_ERROR",
    /// A policy is violated.
    PolicyViolation = "POLICY_VIOLATION",
    /// A policy ref is not enforced (warning).
    PolicyRefNotEnforced = "POLICY_REF_NOT_ENFORCED",
    /// A policy ref is unresolved.
    PolicyRefUnresolved = "POLICY_REF_UNRESOLVED",
    /// A policy ref cycle.
    PolicyRefCycle = "POLICY_REF_CYCLE",
    /// An extension capability ref is not namespaced.
    CapabilityRefInvalid = "CAPABILITY_REF_INVALID",
    /// Duplicate capability assertion key.
    DuplicateCapability = "DUPLICATE_CAPABILITY",
    /// A capability binding names an undeclared interface.
    CapabilityInterfaceUnknown = "CAPABILITY_INTERFACE_UNKNOWN",
    /// A capability binding path is unsafe.
    CapabilityPathInvalid = "CAPABILITY_PATH_INVALID",
    /// Observed workload type differs from the contract.
    WorkloadMismatch = "WORKLOAD_MISMATCH",
    /// Persistent durability declared, no durable storage observed.
    PersistenceMismatch = "PERSISTENCE_MISMATCH",
    /// A dependency is unreachable (optional axis).
    DependencyUnreachable = "DEPENDENCY_UNREACHABLE",
    /// A capability is absent at runtime.
    CapabilityAbsent = "CAPABILITY_ABSENT",
    /// An interface has no Ready endpoint beyond the window.
    InterfaceAbsent = "INTERFACE_ABSENT",
    /// A configuration is absent at runtime (optional axis).
    ConfigurationAbsent = "CONFIGURATION_ABSENT",
    /// A configuration does not conform to its schema (optional axis).
    ConfigurationMismatch = "CONFIGURATION_MISMATCH",
    /// No observation for a required assertion.
    EvidenceMissing = "EVIDENCE_MISSING",
    /// The dimension cannot be observed here.
    ObservationUnsupported = "OBSERVATION_UNSUPPORTED",
    /// Collection errored.
    CollectionFailed = "COLLECTION_FAILED",
    /// Evidence too old.
    EvidenceStale = "EVIDENCE_STALE",
    /// Evidence partial or ambiguous.
    EvidenceInsufficient = "EVIDENCE_INSUFFICIENT",
    /// No evaluator for an extension capability.
    ExtensionEvaluatorUnavailable = "EXTENSION_EVALUATOR_UNAVAILABLE",
    /// Deprecated (InterfaceMismatch; upstream leaves it unregistered).
    InvalidInterfaceType = "INVALID_INTERFACE_TYPE",
    /// Deprecated (InterfaceMismatch).
    InterfaceRefRequired = "INTERFACE_REF_REQUIRED",
    /// Deprecated (InvalidCapability).
    InvalidCapabilityType = "INVALID_CAPABILITY_TYPE",
    /// Deprecated (InvalidCapability).
    CapabilityRefRequired = "CAPABILITY_REF_REQUIRED",
    /// Deprecated (PolicyViolation).
    UnsupportedPolicyTarget = "UNSUPPORTED_POLICY_TARGET",
}

/// A registry entry: category and severity for a required assertion, and whether the optional
/// axis (`RuntimeDrift`/`warning` when `required=false`) applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryEntry {
    /// Category (for `required=true`).
    pub category: Category,
    /// Severity (for `required=true`).
    pub severity: Severity,
    /// Whether `required=false` turns it into `RuntimeDrift`/`warning` (the † codes).
    pub optional_axis: bool,
}

impl FindingCode {
    /// The registry entry. Every [`FindingCode`] is registered; `Option` is kept so callers
    /// treat "no entry" uniformly with unknown code strings.
    pub fn entry(self) -> Option<RegistryEntry> {
        use Category as C;
        use Severity as S;
        let (category, severity, optional_axis) = match self {
            Self::UnsupportedPactoVersion | Self::InvalidSemver => {
                (C::InvalidVersion, S::Error, false)
            }
            Self::SchemaError
            | Self::SchemaViolation
            | Self::YamlParseError
            | Self::InvalidConfigSchema
            | Self::InvalidPolicySchema => (C::SchemaViolation, S::Error, false),
            Self::InvalidConfigRef | Self::InvalidPolicyRef | Self::InvalidOciRef => {
                (C::InvalidReference, S::Error, false)
            }
            Self::TagNotDigest => (C::InvalidReference, S::Warning, false),
            Self::DuplicateInterfaceName
            | Self::DuplicateConfigurationName
            | Self::DuplicatePolicyName
            | Self::DuplicateDependencyName
            | Self::DuplicateReadinessId
            | Self::DuplicateCapability => (C::DuplicateName, S::Error, false),
            Self::EmptyCompatibility | Self::InvalidCompatibility => {
                (C::InvalidDependency, S::Error, false)
            }
            Self::ValuesWithoutSchema => (C::MissingConfiguration, S::Error, false),
            Self::ConfigValuesValidationFailed => (C::ConfigurationViolation, S::Error, false),
            Self::InvalidInterfaceSpec
            | Self::InvalidConfigJson
            | Self::InvalidPolicyJson
            | Self::FileNotFound => (C::InvalidFile, S::Error, false),
            Self::StatelessPersistentConflict => (C::StateMismatch, S::Error, false),
            Self::InvalidReadinessExpires | Self::InvalidReadinessRevision => {
                (C::InvalidReadiness, S::Error, false)
            }
            Self::EmptyReadinessEvidence | Self::EmptyReadinessDescription => {
                (C::MissingEvidence, S::Error, false)
            }
            Self::PolicyEnforcementError | Self::PolicyViolation => {
                (C::PolicyViolation, S::Error, false)
            }
            Self::PolicyRefNotEnforced => (C::UnresolvedReference, S::Warning, false),
            Self::PolicyRefUnresolved => (C::UnresolvedReference, S::Error, false),
            Self::PolicyRefCycle => (C::ReferenceCycle, S::Error, false),
            Self::CapabilityRefInvalid
            | Self::CapabilityInterfaceUnknown
            | Self::CapabilityPathInvalid => (C::InvalidCapability, S::Error, false),
            Self::WorkloadMismatch
            | Self::PersistenceMismatch
            | Self::CapabilityAbsent
            | Self::InterfaceAbsent => (C::RuntimeDrift, S::Error, false),
            Self::DependencyUnreachable
            | Self::ConfigurationAbsent
            | Self::ConfigurationMismatch => (C::RuntimeDrift, S::Error, true),
            Self::EvidenceMissing
            | Self::ObservationUnsupported
            | Self::CollectionFailed
            | Self::EvidenceStale
            | Self::EvidenceInsufficient
            | Self::ExtensionEvaluatorUnavailable => (C::Inconclusive, S::Unknown, false),
            // Deprecated codes: registered with the categories of contract.md §3.6 (decision
            // contract.md §9 item 10; upstream leaves them unregistered, category "").
            Self::InvalidInterfaceType | Self::InterfaceRefRequired => {
                (C::InterfaceMismatch, S::Error, false)
            }
            Self::InvalidCapabilityType | Self::CapabilityRefRequired => {
                (C::InvalidCapability, S::Error, false)
            }
            Self::UnsupportedPolicyTarget => (C::PolicyViolation, S::Error, false),
        };
        Some(RegistryEntry {
            category,
            severity,
            optional_axis,
        })
    }

    /// `CategoryFor(code, required)`: `None` (wire `""`) for unregistered codes.
    pub fn category(self, required: bool) -> Option<Category> {
        self.entry().map(|e| {
            if e.optional_axis && !required {
                Category::RuntimeDrift
            } else {
                e.category
            }
        })
    }

    /// `SeverityFor(code, required)`: `error` for unregistered codes.
    pub fn severity(self, required: bool) -> Severity {
        match self.entry() {
            None => Severity::Error,
            Some(e) if e.optional_axis && !required => Severity::Warning,
            Some(e) => e.severity,
        }
    }
}

/// Error parsing a finding code that Pacto does not know at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown finding code {0:?}")]
pub struct UnknownCode(pub String);

impl FromStr for FindingCode {
    type Err = UnknownCode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCode(s.to_owned()))
    }
}

impl fmt::Display for FindingCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FindingCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FindingCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `CategoryFor(code, required)` over any code string: `None` (wire `""`) when unregistered.
pub fn category_for(code: &str, required: bool) -> Option<Category> {
    code.parse::<FindingCode>()
        .ok()
        .and_then(|c| c.category(required))
}

/// `CategoryOf(code)` = `CategoryFor(code, true)`.
pub fn category_of(code: &str) -> Option<Category> {
    category_for(code, true)
}

/// `SeverityFor(code, required)` over any code string: `error` when unregistered.
pub fn severity_for(code: &str, required: bool) -> Severity {
    code.parse::<FindingCode>()
        .map_or(Severity::Error, |c| c.severity(required))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of evidence.md §4, transcribed independently of the match above.
    const TABLE: &[(&str, &str, &str)] = &[
        ("UNSUPPORTED_PACTO_VERSION", "InvalidVersion", "error"),
        ("SCHEMA_ERROR", "SchemaViolation", "error"),
        ("SCHEMA_VIOLATION", "SchemaViolation", "error"),
        ("YAML_PARSE_ERROR", "SchemaViolation", "error"),
        ("INVALID_SEMVER", "InvalidVersion", "error"),
        ("INVALID_CONFIG_REF", "InvalidReference", "error"),
        ("INVALID_POLICY_REF", "InvalidReference", "error"),
        ("INVALID_OCI_REF", "InvalidReference", "error"),
        ("TAG_NOT_DIGEST", "InvalidReference", "warning"),
        ("DUPLICATE_INTERFACE_NAME", "DuplicateName", "error"),
        ("DUPLICATE_CONFIGURATION_NAME", "DuplicateName", "error"),
        ("DUPLICATE_POLICY_NAME", "DuplicateName", "error"),
        ("DUPLICATE_DEPENDENCY_NAME", "DuplicateName", "error"),
        ("EMPTY_COMPATIBILITY", "InvalidDependency", "error"),
        ("INVALID_COMPATIBILITY", "InvalidDependency", "error"),
        ("VALUES_WITHOUT_SCHEMA", "MissingConfiguration", "error"),
        (
            "CONFIG_VALUES_VALIDATION_FAILED",
            "ConfigurationViolation",
            "error",
        ),
        ("INVALID_INTERFACE_SPEC", "InvalidFile", "error"),
        ("INVALID_CONFIG_JSON", "InvalidFile", "error"),
        ("INVALID_CONFIG_SCHEMA", "SchemaViolation", "error"),
        ("INVALID_POLICY_JSON", "InvalidFile", "error"),
        ("INVALID_POLICY_SCHEMA", "SchemaViolation", "error"),
        ("FILE_NOT_FOUND", "InvalidFile", "error"),
        ("STATELESS_PERSISTENT_CONFLICT", "StateMismatch", "error"),
        ("INVALID_READINESS_EXPIRES", "InvalidReadiness", "error"),
        ("INVALID_READINESS_REVISION", "InvalidReadiness", "error"),
        ("DUPLICATE_READINESS_ID", "DuplicateName", "error"),
        ("EMPTY_READINESS_EVIDENCE", "MissingEvidence", "error"),
        ("EMPTY_READINESS_DESCRIPTION", "MissingEvidence", "error"),
        ("POLICY_ENFORCEMENT_ERROR", "PolicyViolation", "error"),
        ("POLICY_VIOLATION", "PolicyViolation", "error"),
        ("POLICY_REF_NOT_ENFORCED", "UnresolvedReference", "warning"),
        ("POLICY_REF_UNRESOLVED", "UnresolvedReference", "error"),
        ("POLICY_REF_CYCLE", "ReferenceCycle", "error"),
        ("CAPABILITY_REF_INVALID", "InvalidCapability", "error"),
        ("DUPLICATE_CAPABILITY", "DuplicateName", "error"),
        ("CAPABILITY_INTERFACE_UNKNOWN", "InvalidCapability", "error"),
        ("CAPABILITY_PATH_INVALID", "InvalidCapability", "error"),
        ("WORKLOAD_MISMATCH", "RuntimeDrift", "error"),
        ("PERSISTENCE_MISMATCH", "RuntimeDrift", "error"),
        ("DEPENDENCY_UNREACHABLE", "RuntimeDrift", "error"),
        ("CAPABILITY_ABSENT", "RuntimeDrift", "error"),
        ("INTERFACE_ABSENT", "RuntimeDrift", "error"),
        ("CONFIGURATION_ABSENT", "RuntimeDrift", "error"),
        ("CONFIGURATION_MISMATCH", "RuntimeDrift", "error"),
        ("EVIDENCE_MISSING", "Inconclusive", "unknown"),
        ("OBSERVATION_UNSUPPORTED", "Inconclusive", "unknown"),
        ("COLLECTION_FAILED", "Inconclusive", "unknown"),
        ("EVIDENCE_STALE", "Inconclusive", "unknown"),
        ("EVIDENCE_INSUFFICIENT", "Inconclusive", "unknown"),
        ("EXTENSION_EVALUATOR_UNAVAILABLE", "Inconclusive", "unknown"),
        // deprecated codes, categories per contract.md §3.6 / §9 item 10
        ("INVALID_INTERFACE_TYPE", "InterfaceMismatch", "error"),
        ("INTERFACE_REF_REQUIRED", "InterfaceMismatch", "error"),
        ("INVALID_CAPABILITY_TYPE", "InvalidCapability", "error"),
        ("CAPABILITY_REF_REQUIRED", "InvalidCapability", "error"),
        ("UNSUPPORTED_POLICY_TARGET", "PolicyViolation", "error"),
    ];

    const OPTIONAL_AXIS: &[&str] = &[
        "DEPENDENCY_UNREACHABLE",
        "CONFIGURATION_ABSENT",
        "CONFIGURATION_MISMATCH",
    ];

    /// Retired and CLI-level codes: not in the registry.
    const UNREGISTERED: &[&str] = &[
        "PORT_NOT_OBSERVED",
        "CONFIG_NOT_OBSERVED",
        "PORT_REQUIRED",
        "PARSE_ERROR",
        "LOCK_ERROR",
    ];

    #[test]
    fn registry_matches_spec_table() {
        for (code, category, severity) in TABLE {
            assert_eq!(
                category_for(code, true).map(Category::as_str),
                Some(*category),
                "{code}"
            );
            assert_eq!(severity_for(code, true).as_str(), *severity, "{code}");
            assert_eq!(category_of(code), category_for(code, true));
            let optional = OPTIONAL_AXIS.contains(code);
            let (want_cat, want_sev) = if optional {
                ("RuntimeDrift", "warning")
            } else {
                (*category, *severity)
            };
            assert_eq!(
                category_for(code, false).map(Category::as_str),
                Some(want_cat),
                "{code}"
            );
            assert_eq!(severity_for(code, false).as_str(), want_sev, "{code}");
        }
        assert_eq!(TABLE.len(), FindingCode::ALL.len());
    }

    #[test]
    fn unregistered_and_unknown_codes_are_error_without_category() {
        for code in UNREGISTERED
            .iter()
            .copied()
            .chain(["PORT_NOT_OBSERVED", "", "whatever"])
        {
            for required in [true, false] {
                assert_eq!(category_for(code, required), None, "{code}");
                assert_eq!(severity_for(code, required), Severity::Error, "{code}");
            }
        }
    }

    #[test]
    fn codes_round_trip_through_strings() {
        for code in FindingCode::ALL {
            assert_eq!(code.as_str().parse::<FindingCode>().unwrap(), *code);
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(serde_json::from_str::<FindingCode>(&json).unwrap(), *code);
        }
        assert!(serde_json::from_str::<FindingCode>("\"NOPE\"").is_err());
        for c in Category::ALL {
            assert_eq!(Category::parse(c.as_str()), Some(c));
        }
        for s in Severity::ALL {
            assert_eq!(Severity::parse(s.as_str()), Some(s));
        }
    }
}
