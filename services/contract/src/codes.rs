//! The one finding registry (docs/design/contract.md#finding-codes): every finding code with its category, its default
//! severity and whether the optional-assertion axis applies, plus the CLI-level codes (docs/design/contract.md#cli-level-codes)
//! (which are not registered). The validator uses the `&str` constants, the engine the typed
//! [`FindingCode`]; both come from the single table below.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Severity of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The contract is wrong, or a required assertion is violated.
    Error,
    /// Worth attention (a structural warning or a violated optional assertion); never stops a
    /// pipeline.
    Warning,
    /// Informational; ignored by status derivation.
    Info,
    /// Runtime uncertainty: the assertion could not be evaluated.
    Unknown,
}

impl Severity {
    /// All severities.
    pub const ALL: [Self; 4] = [Self::Error, Self::Warning, Self::Info, Self::Unknown];

    /// The wire spelling (`error`, `warning`, `info`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Info => "info",
            Self::Unknown => "unknown",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Category of a finding. `Unregistered` is the empty category `""` that the validator gives
/// to unknown codes; the engine spells the same thing `Option::<Category>::None`, so
/// [`category_for`] never returns it and [`Category::ALL`] does not list it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// Interface declaration problems (only deprecated codes map to it).
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
    /// The category `""` of a code that is not in the registry.
    Unregistered,
}

impl Category {
    /// Every registered category (all but [`Category::Unregistered`]).
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

    /// The wire spelling, identical to the variant name (`""` for
    /// [`Category::Unregistered`]).
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

    /// Parses a registered category's wire spelling (`""` is no category: `None`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
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

impl<'de> Deserialize<'de> for Category {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown category {text:?}")))
    }
}

/// A registry entry: category and severity for a required assertion, and whether the optional
/// axis (`RuntimeDrift`/`warning` when `required=false`) applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryEntry {
    /// Category (for `required=true`).
    pub category: Category,
    /// Severity (for `required=true`).
    pub severity: Severity,
    /// Whether `required=false` turns it into `RuntimeDrift`/`warning`.
    pub optional_axis: bool,
}

/// One line per code: `Variant = CODE => Category, Severity[, optional];` gives the `CODE`
/// string constant, the [`FindingCode`] variant and the registry entry.
macro_rules! codes {
    (@axis) => { false };
    (@axis optional) => { true };
    ($( $(#[$doc:meta])* $variant:ident = $name:ident => $category:ident, $severity:ident
        $(, $axis:ident)?; )*) => {
        $( $(#[$doc])* pub const $name: &str = stringify!($name); )*

        /// Every registered code with its category and default severity, in registry order.
        pub const REGISTRY: &[(&str, Category, Severity)] = &[
            $( ($name, Category::$category, Severity::$severity), )*
        ];

        /// Every registered finding code, including the five deprecated ones.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum FindingCode {
            $( $(#[$doc])* $variant, )*
        }

        impl FindingCode {
            /// Every code, in registry order.
            pub const ALL: &'static [FindingCode] = &[ $( FindingCode::$variant, )* ];

            /// The wire name, e.g. `INTERFACE_ABSENT`.
            pub fn as_str(self) -> &'static str {
                match self { $( FindingCode::$variant => $name, )* }
            }

            /// The registry entry of this code (every [`FindingCode`] is registered).
            pub fn entry(self) -> RegistryEntry {
                match self {
                    $( FindingCode::$variant => RegistryEntry {
                        category: Category::$category,
                        severity: Severity::$severity,
                        optional_axis: codes!(@axis $($axis)?),
                    }, )*
                }
            }
        }
    };
}

codes! {
    /// `pactoVersion` is missing, not a string, or not `"2.0"`.
    UnsupportedPactoVersion = UNSUPPORTED_PACTO_VERSION => InvalidVersion, Error;
    /// The structural validator itself failed.
    SchemaError = SCHEMA_ERROR => SchemaViolation, Error;
    /// A leaf cause of a layer-1 JSON Schema failure.
    SchemaViolation = SCHEMA_VIOLATION => SchemaViolation, Error;
    /// `pacto.yaml` is not parseable YAML.
    YamlParseError = YAML_PARSE_ERROR => SchemaViolation, Error;
    /// `service.version` is not a (lenient) semver.
    InvalidSemver = INVALID_SEMVER => InvalidVersion, Error;
    /// An `oci://` configuration ref is malformed.
    InvalidConfigRef = INVALID_CONFIG_REF => InvalidReference, Error;
    /// An `oci://` policy ref is malformed.
    InvalidPolicyRef = INVALID_POLICY_REF => InvalidReference, Error;
    /// An `oci://` dependency ref is malformed.
    InvalidOciRef = INVALID_OCI_REF => InvalidReference, Error;
    /// An OCI dependency is pinned by tag but not by digest.
    TagNotDigest = TAG_NOT_DIGEST => InvalidReference, Warning;
    /// Two interfaces share a name.
    DuplicateInterfaceName = DUPLICATE_INTERFACE_NAME => DuplicateName, Error;
    /// Two configurations share a name.
    DuplicateConfigurationName = DUPLICATE_CONFIGURATION_NAME => DuplicateName, Error;
    /// Two policies share a name.
    DuplicatePolicyName = DUPLICATE_POLICY_NAME => DuplicateName, Error;
    /// Two dependencies share a name.
    DuplicateDependencyName = DUPLICATE_DEPENDENCY_NAME => DuplicateName, Error;
    /// Two readiness claims share an id.
    DuplicateReadinessId = DUPLICATE_READINESS_ID => DuplicateName, Error;
    /// Two capabilities share an assertion key.
    DuplicateCapability = DUPLICATE_CAPABILITY => DuplicateName, Error;
    /// A dependency has an empty `compatibility`.
    EmptyCompatibility = EMPTY_COMPATIBILITY => InvalidDependency, Error;
    /// A dependency `compatibility` is not a constraint.
    InvalidCompatibility = INVALID_COMPATIBILITY => InvalidDependency, Error;
    /// A configuration has values but neither schema nor ref.
    ValuesWithoutSchema = VALUES_WITHOUT_SCHEMA => MissingConfiguration, Error;
    /// Configuration values do not validate against their schema.
    ConfigValuesValidationFailed = CONFIG_VALUES_VALIDATION_FAILED => ConfigurationViolation, Error;
    /// An interface file does not parse.
    InvalidInterfaceSpec = INVALID_INTERFACE_SPEC => InvalidFile, Error;
    /// A configuration schema file is not JSON.
    InvalidConfigJson = INVALID_CONFIG_JSON => InvalidFile, Error;
    /// A policy schema file is not JSON.
    InvalidPolicyJson = INVALID_POLICY_JSON => InvalidFile, Error;
    /// A referenced bundle file does not exist.
    FileNotFound = FILE_NOT_FOUND => InvalidFile, Error;
    /// A configuration schema does not compile.
    InvalidConfigSchema = INVALID_CONFIG_SCHEMA => SchemaViolation, Error;
    /// A policy schema does not compile.
    InvalidPolicySchema = INVALID_POLICY_SCHEMA => SchemaViolation, Error;
    /// `state.type: stateless` with persistent durability.
    StatelessPersistentConflict = STATELESS_PERSISTENT_CONFLICT => StateMismatch, Error;
    /// `readiness.expires` is not a canonical date.
    InvalidReadinessExpires = INVALID_READINESS_EXPIRES => InvalidReadiness, Error;
    /// A readiness history entry is malformed.
    InvalidReadinessRevision = INVALID_READINESS_REVISION => InvalidReadiness, Error;
    /// A claim's evidence is whitespace-only.
    EmptyReadinessEvidence = EMPTY_READINESS_EVIDENCE => MissingEvidence, Error;
    /// A claim's description is whitespace-only.
    EmptyReadinessDescription = EMPTY_READINESS_DESCRIPTION => MissingEvidence, Error;
    /// The raw document could not be re-read for policy enforcement.
    PolicyEnforcementError = POLICY_ENFORCEMENT_ERROR => PolicyViolation, Error;
    /// A policy schema rejects the contract.
    PolicyViolation = POLICY_VIOLATION => PolicyViolation, Error;
    /// A policy `target` other than `contract` (deprecated; layer 2 only).
    UnsupportedPolicyTarget = UNSUPPORTED_POLICY_TARGET => PolicyViolation, Error;
    /// A `ref` policy was skipped because no resolver was available.
    PolicyRefNotEnforced = POLICY_REF_NOT_ENFORCED => UnresolvedReference, Warning;
    /// A policy could not be resolved.
    PolicyRefUnresolved = POLICY_REF_UNRESOLVED => UnresolvedReference, Error;
    /// A policy ref reappears in its own resolution chain.
    PolicyRefCycle = POLICY_REF_CYCLE => ReferenceCycle, Error;
    /// Interface type outside the enum (deprecated; layer 2 only).
    InvalidInterfaceType = INVALID_INTERFACE_TYPE => InterfaceMismatch, Error;
    /// Interface without a ref (deprecated; layer 2 only).
    InterfaceRefRequired = INTERFACE_REF_REQUIRED => InterfaceMismatch, Error;
    /// Capability type outside the enum (deprecated; layer 2 only).
    InvalidCapabilityType = INVALID_CAPABILITY_TYPE => InvalidCapability, Error;
    /// Extension capability without a ref (deprecated; layer 2 only).
    CapabilityRefRequired = CAPABILITY_REF_REQUIRED => InvalidCapability, Error;
    /// Extension capability ref not namespaced.
    CapabilityRefInvalid = CAPABILITY_REF_INVALID => InvalidCapability, Error;
    /// `binding.interface` names no declared interface.
    CapabilityInterfaceUnknown = CAPABILITY_INTERFACE_UNKNOWN => InvalidCapability, Error;
    /// `binding.path` is not a safe absolute path.
    CapabilityPathInvalid = CAPABILITY_PATH_INVALID => InvalidCapability, Error;
    /// Runtime workload kind differs from the contract.
    WorkloadMismatch = WORKLOAD_MISMATCH => RuntimeDrift, Error;
    /// Runtime persistence differs from the contract.
    PersistenceMismatch = PERSISTENCE_MISMATCH => RuntimeDrift, Error;
    /// A declared dependency is unreachable.
    DependencyUnreachable = DEPENDENCY_UNREACHABLE => RuntimeDrift, Error, optional;
    /// A declared capability is absent at runtime.
    CapabilityAbsent = CAPABILITY_ABSENT => RuntimeDrift, Error;
    /// A declared interface is absent at runtime.
    InterfaceAbsent = INTERFACE_ABSENT => RuntimeDrift, Error;
    /// A required configuration is absent at runtime.
    ConfigurationAbsent = CONFIGURATION_ABSENT => RuntimeDrift, Error, optional;
    /// A configuration differs at runtime.
    ConfigurationMismatch = CONFIGURATION_MISMATCH => RuntimeDrift, Error, optional;
    /// No evidence for an assertion.
    EvidenceMissing = EVIDENCE_MISSING => Inconclusive, Unknown;
    /// The assertion cannot be observed.
    ObservationUnsupported = OBSERVATION_UNSUPPORTED => Inconclusive, Unknown;
    /// Evidence collection failed.
    CollectionFailed = COLLECTION_FAILED => Inconclusive, Unknown;
    /// Evidence is too old.
    EvidenceStale = EVIDENCE_STALE => Inconclusive, Unknown;
    /// Evidence is insufficient.
    EvidenceInsufficient = EVIDENCE_INSUFFICIENT => Inconclusive, Unknown;
    /// No evaluator for an extension capability.
    ExtensionEvaluatorUnavailable = EXTENSION_EVALUATOR_UNAVAILABLE => Inconclusive, Unknown;
}

/// CLI-level code (docs/design/contract.md#cli-level-codes, not registered): the contract could not be loaded, overridden or parsed.
pub const PARSE_ERROR: &str = "PARSE_ERROR";
/// CLI-level code (docs/design/contract.md#cli-level-codes, not registered): generic lock verification failure.
pub const LOCK_ERROR: &str = "LOCK_ERROR";
/// CLI-level code (docs/design/contract.md#cli-level-codes, not registered): `validate --readiness` gate unmet.
pub const READINESS_GATE_UNMET: &str = "READINESS_GATE_UNMET";

impl FindingCode {
    /// The category of this code. Always `Some` for a registered code; the `Option` matches
    /// [`category_for`], where `None` (wire `""`) means unregistered.
    pub fn category(self, required: bool) -> Option<Category> {
        let e = self.entry();
        Some(if e.optional_axis && !required {
            Category::RuntimeDrift
        } else {
            e.category
        })
    }

    /// The default severity of this code (see [`severity_for`]).
    pub fn severity(self, required: bool) -> Severity {
        let e = self.entry();
        if e.optional_axis && !required {
            Severity::Warning
        } else {
            e.severity
        }
    }
}

/// Error parsing a finding code that is not in the registry.
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
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FindingCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The category of any code string: `None` (wire `""`) when unregistered.
pub fn category_for(code: &str, required: bool) -> Option<Category> {
    code.parse::<FindingCode>()
        .ok()
        .and_then(|c| c.category(required))
}

/// `category_of(code)` = `category_for(code, true)`.
pub fn category_of(code: &str) -> Option<Category> {
    category_for(code, true)
}

/// The default severity of any code string: `error` when unregistered.
pub fn severity_for(code: &str, required: bool) -> Severity {
    code.parse::<FindingCode>()
        .map_or(Severity::Error, |c| c.severity(required))
}

/// The validator's view: category and default severity of `code`; an unknown code gets
/// `("", error)`.
pub fn lookup(code: &str) -> (Category, Severity) {
    code.parse::<FindingCode>()
        .map_or((Category::Unregistered, Severity::Error), |c| {
            let e = c.entry();
            (e.category, e.severity)
        })
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

    /// The table of docs/design/evaluation.md#finding-registry, transcribed independently of the registry above.
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
        // deprecated codes, categories per docs/design/contract.md#finding-codes
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
