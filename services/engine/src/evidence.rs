//! The evidence model (docs/design/evaluation.md#evidence-model): `EvidenceSet`, `Observation`, `Outcome`, payloads,
//! provenance, strict JSON decoding and [`EvidenceSet::validate`].
//!
//! JSON names are exactly upstream's: the EvidenceSet's top-level keys are PascalCase
//! (`Subject`, `ContractRef`, `Source`, `ObservedAt`, `Observations`), everything below is
//! lower camel case. Decoding is strict (unknown keys are rejected everywhere).
//!
//! Deviation (documented, docs/design/evaluation.md#evidence-model): an Observed `value: null` or `value: {}`
//! decodes to the payload's zero values exactly like Go, but re-encoding writes the typed payload
//! (`{"present":false}`), not the original raw bytes. A signed-envelope layer that must reproduce
//! canonical bytes has to keep the raw value itself.

use std::collections::HashMap;
use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::time::Timestamp;

/// Maximum number of observations in one evidence set carried by an envelope (docs/design/evaluation.md#evidence-model).
pub const MAX_OBSERVATIONS: usize = 10_000;

/// A `{kind, name}` pair (JSON keys lower-case).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubjectRef {
    /// Subject kind, e.g. `interface`, `service`.
    #[serde(default)]
    pub kind: String,
    /// Subject name; for an observation, the assertion identity.
    #[serde(default)]
    pub name: String,
}

impl SubjectRef {
    /// Convenience constructor.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            name: name.into(),
        }
    }
}

/// One collection run: who was observed, against which contract, by whom and when.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSet {
    /// Runtime target identity (e.g. `{kind: "service", name: "ns/orders"}`). Not used for
    /// matching.
    #[serde(rename = "Subject", default)]
    pub subject: SubjectRef,
    /// The contract the evidence was collected for.
    #[serde(rename = "ContractRef", default)]
    pub contract_ref: String,
    /// The evidence source (`k8s` for the operator); becomes `source` in evidence refs.
    #[serde(rename = "Source", default)]
    pub source: String,
    /// The collection instant; becomes `observedAt` in evidence refs (seconds precision).
    #[serde(rename = "ObservedAt", default)]
    pub observed_at: Timestamp,
    /// The observations. `None` is JSON `null` (or a missing key), distinct from `Some(vec![])`.
    #[serde(rename = "Observations", default)]
    pub observations: Option<Vec<Observation>>,
    /// The collector looked for the subject's own object (the target Service, else its
    /// workload) and it does not exist: the engine reports `EVIDENCE_MISSING` for the subject
    /// (docs/design/evaluation.md#the-target). An extension of upstream's model: written to JSON
    /// only when true.
    #[serde(
        rename = "SubjectMissing",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub subject_missing: bool,
}

impl EvidenceSet {
    /// The observations as a slice (`null` reads as empty).
    pub fn observations(&self) -> &[Observation] {
        self.observations.as_deref().unwrap_or(&[])
    }

    /// Strictly decodes one JSON document (unknown keys and trailing data are rejected).
    pub fn from_json(bytes: &[u8]) -> Result<Self, DecodeError> {
        serde_json::from_slice(bytes).map_err(|source| DecodeError::Json { source })
    }

    /// Encodes as JSON with upstream key names.
    pub fn to_json(&self) -> Result<Vec<u8>, DecodeError> {
        serde_json::to_vec(self).map_err(|source| DecodeError::Encode { source })
    }

    /// Validation (docs/design/evaluation.md#evidence-validation): checks the top-level fields, then each observation, and
    /// collects every error in that order.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errors = Vec::new();
        if self.subject.kind.is_empty() {
            errors.push(ValidationError::Empty {
                field: "Subject.kind".into(),
            });
        }
        if self.subject.name.is_empty() {
            errors.push(ValidationError::Empty {
                field: "Subject.name".into(),
            });
        }
        if self.contract_ref.is_empty() {
            errors.push(ValidationError::Empty {
                field: "ContractRef".into(),
            });
        }
        if self.source.is_empty() {
            errors.push(ValidationError::Empty {
                field: "Source".into(),
            });
        }
        if self.observed_at.is_zero() {
            errors.push(ValidationError::ZeroTime {
                field: "ObservedAt".into(),
            });
        }
        let mut seen: HashMap<(ObservationKind, &str, &str), usize> = HashMap::new();
        for (index, obs) in self.observations().iter().enumerate() {
            let at = |leaf: &str| format!("Observations[{index}].{leaf}");
            if obs.subject.kind.is_empty() {
                errors.push(ValidationError::Empty {
                    field: at("subject.kind"),
                });
            }
            if obs.subject.name.is_empty() {
                errors.push(ValidationError::Empty {
                    field: at("subject.name"),
                });
            }
            let key = (
                obs.kind,
                obs.subject.kind.as_str(),
                obs.subject.name.as_str(),
            );
            if let Some(first) = seen.get(&key) {
                errors.push(ValidationError::DuplicateAssertion {
                    field: at("subject"),
                    kind: obs.kind,
                    name: obs.subject.name.clone(),
                    first_index: *first,
                });
            } else {
                seen.insert(key, index);
            }
            if obs.provenance.collector.is_empty() {
                errors.push(ValidationError::Empty {
                    field: at("provenance.collector"),
                });
            }
            if obs.provenance.detected_at.is_zero() {
                errors.push(ValidationError::ZeroTime {
                    field: at("provenance.detectedAt"),
                });
            }
            if let Err(error) = obs.check_structure(&format!("Observations[{index}]")) {
                errors.push(error);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors(errors))
        }
    }
}

/// The six observation kinds (docs/design/evaluation.md#evidence-model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObservationKind {
    /// A capability (`health`, `metrics`, or an extension ref); subject kind `capability`.
    CapabilityObserved,
    /// A declared interface; subject kind `interface`.
    InterfaceObserved,
    /// A declared dependency; subject kind `dependency`.
    DependencyReachable,
    /// A declared configuration; subject kind `configuration`.
    ConfigurationPresent,
    /// The workload type of `service.name`; subject kind `service`.
    WorkloadObserved,
    /// The persistence of `service.name`; subject kind `service`.
    PersistenceObserved,
}

impl ObservationKind {
    /// All kinds, in evaluation order of their assertions.
    pub const ALL: [Self; 6] = [
        Self::InterfaceObserved,
        Self::CapabilityObserved,
        Self::DependencyReachable,
        Self::ConfigurationPresent,
        Self::WorkloadObserved,
        Self::PersistenceObserved,
    ];

    /// The JSON name, e.g. `InterfaceObserved`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CapabilityObserved => "CapabilityObserved",
            Self::InterfaceObserved => "InterfaceObserved",
            Self::DependencyReachable => "DependencyReachable",
            Self::ConfigurationPresent => "ConfigurationPresent",
            Self::WorkloadObserved => "WorkloadObserved",
            Self::PersistenceObserved => "PersistenceObserved",
        }
    }

    /// The subject kind this observation kind pairs with (INV-1c).
    pub fn subject_kind(self) -> &'static str {
        match self {
            Self::CapabilityObserved => "capability",
            Self::InterfaceObserved => "interface",
            Self::DependencyReachable => "dependency",
            Self::ConfigurationPresent => "configuration",
            Self::WorkloadObserved | Self::PersistenceObserved => "service",
        }
    }

    /// The zero-valued payload of this kind (what `value: null` / `value: {}` decode to).
    pub fn zero_value(self) -> Value {
        match self {
            Self::CapabilityObserved => Value::Capability(CapabilityValue::default()),
            Self::InterfaceObserved => Value::Interface(InterfaceValue::default()),
            Self::DependencyReachable => Value::Dependency(DependencyValue::default()),
            Self::ConfigurationPresent => Value::Configuration(ConfigurationValue::default()),
            Self::WorkloadObserved => Value::Workload(WorkloadValue::default()),
            Self::PersistenceObserved => Value::Persistence(PersistenceValue::default()),
        }
    }

    /// Parses the JSON name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for ObservationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome label alone (for metrics, wire enums and messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OutcomeKind {
    /// Collected, with a value.
    Observed,
    /// The collector cannot observe this dimension.
    Unsupported,
    /// Collection was attempted and errored.
    Failed,
    /// The last data is too old to trust.
    Stale,
    /// Partial, ambiguous or inconclusive (including in-window negatives).
    Insufficient,
}

impl OutcomeKind {
    /// All outcome labels.
    pub const ALL: [Self; 5] = [
        Self::Observed,
        Self::Unsupported,
        Self::Failed,
        Self::Stale,
        Self::Insufficient,
    ];

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observed => "Observed",
            Self::Unsupported => "Unsupported",
            Self::Failed => "Failed",
            Self::Stale => "Stale",
            Self::Insufficient => "Insufficient",
        }
    }
}

impl fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An observation's outcome; only `Observed` carries a payload (so "a value iff Observed" holds
/// by construction).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Collected, with the kind's payload.
    Observed(Value),
    /// The collector cannot observe this dimension here.
    Unsupported,
    /// Collection was attempted and errored.
    Failed,
    /// The last data is too old to trust.
    Stale,
    /// Partial, ambiguous or inconclusive.
    Insufficient,
}

impl Outcome {
    /// The label of this outcome.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Self::Observed(_) => OutcomeKind::Observed,
            Self::Unsupported => OutcomeKind::Unsupported,
            Self::Failed => OutcomeKind::Failed,
            Self::Stale => OutcomeKind::Stale,
            Self::Insufficient => OutcomeKind::Insufficient,
        }
    }

    /// The outcome for a label that carries no payload; `None` for `Observed`.
    pub fn without_value(kind: OutcomeKind) -> Option<Self> {
        match kind {
            OutcomeKind::Observed => None,
            OutcomeKind::Unsupported => Some(Self::Unsupported),
            OutcomeKind::Failed => Some(Self::Failed),
            OutcomeKind::Stale => Some(Self::Stale),
            OutcomeKind::Insufficient => Some(Self::Insufficient),
        }
    }
}

/// A kind-specific payload (docs/design/evaluation.md#evidence-model). Payload keys are lower camel case; missing keys are zero.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `CapabilityObserved` payload.
    Capability(CapabilityValue),
    /// `InterfaceObserved` payload.
    Interface(InterfaceValue),
    /// `DependencyReachable` payload.
    Dependency(DependencyValue),
    /// `ConfigurationPresent` payload.
    Configuration(ConfigurationValue),
    /// `WorkloadObserved` payload.
    Workload(WorkloadValue),
    /// `PersistenceObserved` payload.
    Persistence(PersistenceValue),
}

impl Value {
    /// The observation kind this payload belongs to.
    pub fn kind(&self) -> ObservationKind {
        match self {
            Self::Capability(_) => ObservationKind::CapabilityObserved,
            Self::Interface(_) => ObservationKind::InterfaceObserved,
            Self::Dependency(_) => ObservationKind::DependencyReachable,
            Self::Configuration(_) => ObservationKind::ConfigurationPresent,
            Self::Workload(_) => ObservationKind::WorkloadObserved,
            Self::Persistence(_) => ObservationKind::PersistenceObserved,
        }
    }

    fn decode(kind: ObservationKind, raw: serde_json::Value) -> Result<Self, serde_json::Error> {
        if raw.is_null() {
            return Ok(kind.zero_value());
        }
        if !raw.is_object() {
            // serde would accept a sequence for a struct; Go's decoder does not
            return Err(serde_json::Error::invalid_type(
                unexpected(&raw),
                &"a JSON object",
            ));
        }
        Ok(match kind {
            ObservationKind::CapabilityObserved => Self::Capability(serde_json::from_value(raw)?),
            ObservationKind::InterfaceObserved => Self::Interface(serde_json::from_value(raw)?),
            ObservationKind::DependencyReachable => Self::Dependency(serde_json::from_value(raw)?),
            ObservationKind::ConfigurationPresent => {
                Self::Configuration(serde_json::from_value(raw)?)
            }
            ObservationKind::WorkloadObserved => Self::Workload(serde_json::from_value(raw)?),
            ObservationKind::PersistenceObserved => Self::Persistence(serde_json::from_value(raw)?),
        })
    }
}

fn unexpected(raw: &serde_json::Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match raw {
        serde_json::Value::Null => Unexpected::Unit,
        serde_json::Value::Bool(b) => Unexpected::Bool(*b),
        serde_json::Value::Number(_) => Unexpected::Other("number"),
        serde_json::Value::String(s) => Unexpected::Str(s),
        serde_json::Value::Array(_) => Unexpected::Seq,
        serde_json::Value::Object(_) => Unexpected::Map,
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Capability(v) => v.serialize(serializer),
            Self::Interface(v) => v.serialize(serializer),
            Self::Dependency(v) => v.serialize(serializer),
            Self::Configuration(v) => v.serialize(serializer),
            Self::Workload(v) => v.serialize(serializer),
            Self::Persistence(v) => v.serialize(serializer),
        }
    }
}

/// `CapabilityObserved` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CapabilityValue {
    /// The capability answered at runtime.
    pub present: bool,
}

/// `InterfaceObserved` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InterfaceValue {
    /// The observed interface type (informational).
    #[serde(rename = "type")]
    pub interface_type: String,
    /// Availability (≥1 Ready endpoint).
    pub present: bool,
}

/// `DependencyReachable` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DependencyValue {
    /// The dependency had a Ready endpoint.
    pub reachable: bool,
}

/// `ConfigurationPresent` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigurationValue {
    /// The bound ConfigMap/Secret exists.
    pub present: bool,
    /// The content validates against the declared schema (meaningful only when present).
    pub conformant: bool,
}

/// `WorkloadObserved` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadValue {
    /// Observed workload type: `service`, `job` or `scheduled`.
    #[serde(rename = "type")]
    pub workload_type: String,
}

/// `PersistenceObserved` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PersistenceValue {
    /// Durable storage (a PVC) was observed.
    pub durable: bool,
}

/// Who produced an observation and when.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// `k8s-observer`, `k8s-observer+ebpf`, `ebpf`, or upstream's
    /// `k8s-observer/metrics:<method>`.
    #[serde(default)]
    pub collector: String,
    /// When the collector detected the reading.
    #[serde(rename = "detectedAt", default)]
    pub detected_at: Timestamp,
}

impl Provenance {
    /// Convenience constructor.
    pub fn new(collector: impl Into<String>, detected_at: Timestamp) -> Self {
        Self {
            collector: collector.into(),
            detected_at,
        }
    }
}

/// One observation per declared assertion (docs/design/evaluation.md#evidence-model).
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The observation kind.
    pub kind: ObservationKind,
    /// `subject.kind` must pair with `kind`; `subject.name` is the assertion identity.
    pub subject: SubjectRef,
    /// The outcome (with its payload when Observed).
    pub outcome: Outcome,
    /// Collector and detection time.
    pub provenance: Provenance,
    /// Why the assertion could not be decided, in the collector's words (e.g. the setting that
    /// would let it observe); appended to the message of the assertion's unknown finding. An
    /// extension of upstream's model: JSON key `detail`, written only when set.
    pub detail: Option<String>,
}

impl Observation {
    /// Builds an observation with the paired subject kind for `kind`.
    pub fn new(
        kind: ObservationKind,
        name: impl Into<String>,
        outcome: Outcome,
        provenance: Provenance,
    ) -> Self {
        Self {
            kind,
            subject: SubjectRef::new(kind.subject_kind(), name),
            outcome,
            provenance,
            detail: None,
        }
    }

    /// The same observation with `detail` (see [`Observation::detail`]).
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// An Observed observation whose kind follows from the payload.
    pub fn observed(name: impl Into<String>, value: Value, provenance: Provenance) -> Self {
        Self::new(value.kind(), name, Outcome::Observed(value), provenance)
    }

    /// The decode-time structural checks (docs/design/evaluation.md#evidence-validation) that a programmatically built observation may
    /// violate: subject pairing and payload kind. `path` prefixes the field names in errors.
    pub fn check_structure(&self, path: &str) -> Result<(), ValidationError> {
        let expected = self.kind.subject_kind();
        if self.subject.kind != expected {
            return Err(ValidationError::SubjectKindMismatch {
                field: format!("{path}.subject.kind"),
                kind: self.kind,
                expected,
                found: self.subject.kind.clone(),
            });
        }
        if let Outcome::Observed(value) = &self.outcome
            && value.kind() != self.kind
        {
            return Err(ValidationError::ValueKindMismatch {
                field: format!("{path}.value"),
                kind: self.kind,
                value_kind: value.kind(),
            });
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct ObservationOut<'a> {
    kind: ObservationKind,
    subject: &'a SubjectRef,
    outcome: OutcomeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a Value>,
    provenance: &'a Provenance,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

impl Serialize for Observation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = match &self.outcome {
            Outcome::Observed(v) => Some(v),
            _ => None,
        };
        ObservationOut {
            kind: self.kind,
            subject: &self.subject,
            outcome: self.outcome.kind(),
            value,
            provenance: &self.provenance,
            detail: self.detail.as_deref(),
        }
        .serialize(serializer)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObservationIn {
    kind: String,
    #[serde(default)]
    subject: SubjectRef,
    outcome: String,
    /// `None` = key absent; `Some(Null)` = explicit `null`.
    #[serde(default, deserialize_with = "present")]
    value: Option<serde_json::Value>,
    #[serde(default)]
    provenance: Provenance,
    #[serde(default)]
    detail: Option<String>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

impl<'de> Deserialize<'de> for Observation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = ObservationIn::deserialize(deserializer)?;
        let kind = ObservationKind::parse(&raw.kind).ok_or_else(|| {
            D::Error::custom(format!("kind: unknown observation kind {:?}", raw.kind))
        })?;
        let outcome_kind = OutcomeKind::ALL
            .into_iter()
            .find(|o| o.as_str() == raw.outcome)
            .ok_or_else(|| {
                D::Error::custom(format!("outcome: unknown outcome {:?}", raw.outcome))
            })?;
        if raw.subject.kind != kind.subject_kind() {
            return Err(D::Error::custom(format!(
                "subject.kind: {:?} does not pair with kind {kind} (expected {:?})",
                raw.subject.kind,
                kind.subject_kind()
            )));
        }
        let outcome = match (outcome_kind, raw.value) {
            (OutcomeKind::Observed, None) => {
                return Err(D::Error::custom(
                    "value: an Observed outcome requires a value",
                ));
            }
            (OutcomeKind::Observed, Some(v)) => Outcome::Observed(
                Value::decode(kind, v)
                    .map_err(|e| D::Error::custom(format!("value: invalid {kind} payload: {e}")))?,
            ),
            (other, None) => Outcome::without_value(other)
                .ok_or_else(|| D::Error::custom("outcome: internal outcome mapping"))?,
            (other, Some(_)) => {
                return Err(D::Error::custom(format!(
                    "value: a {other} outcome must not carry a value"
                )));
            }
        };
        Ok(Self {
            kind,
            subject: raw.subject,
            outcome,
            provenance: raw.provenance,
            detail: raw.detail,
        })
    }
}

/// Errors of strict JSON decoding.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The document is not a valid evidence set (the message names the field and position).
    #[error("invalid evidence JSON")]
    Json {
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// Encoding failed.
    #[error("encoding evidence JSON failed")]
    Encode {
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
}

/// One [`EvidenceSet::validate`] failure, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A required string is empty.
    #[error("{field}: must not be empty")]
    Empty {
        /// Path of the field, e.g. `Observations[2].provenance.collector`.
        field: String,
    },
    /// A required time is Go's zero time.
    #[error("{field}: must not be the zero time")]
    ZeroTime {
        /// Path of the field.
        field: String,
    },
    /// The assertion identity `(kind, subject.kind, subject.name)` repeats (INV-3).
    #[error(
        "{field}: duplicate observation for {kind} {name:?} (first at Observations[{first_index}])"
    )]
    DuplicateAssertion {
        /// Path of the duplicate's subject.
        field: String,
        /// Observation kind.
        kind: ObservationKind,
        /// Assertion name.
        name: String,
        /// Index of the first occurrence.
        first_index: usize,
    },
    /// `subject.kind` does not pair with `kind` (INV-1c).
    #[error("{field}: {found:?} does not pair with kind {kind} (expected {expected:?})")]
    SubjectKindMismatch {
        /// Path of the field.
        field: String,
        /// Observation kind.
        kind: ObservationKind,
        /// The paired subject kind.
        expected: &'static str,
        /// The subject kind found.
        found: String,
    },
    /// An Observed payload belongs to another kind.
    #[error("{field}: a {value_kind} payload on a {kind} observation")]
    ValueKindMismatch {
        /// Path of the field.
        field: String,
        /// Observation kind.
        kind: ObservationKind,
        /// The payload's kind.
        value_kind: ObservationKind,
    },
}

impl ValidationError {
    /// The path of the offending field.
    pub fn field(&self) -> &str {
        match self {
            Self::Empty { field }
            | Self::ZeroTime { field }
            | Self::DuplicateAssertion { field, .. }
            | Self::SubjectKindMismatch { field, .. }
            | Self::ValueKindMismatch { field, .. } => field,
        }
    }
}

/// All errors [`EvidenceSet::validate`] found, in check order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid evidence set: {}", join(.0))]
pub struct ValidationErrors(pub Vec<ValidationError>);

fn join(errors: &[ValidationError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
