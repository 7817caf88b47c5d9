//! The signed envelope `pacto.dev/evidence/v1` (docs/design/envelopes.md#envelope): its types,
//! the strict decoder, the structure checks and the canonical bytes that are signed.

use pacto_engine::{EvidenceSet, MAX_OBSERVATIONS, Observation, Outcome, SubjectRef, Timestamp};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

use crate::codes::ErrorCode;
use crate::gojson::{self, Json};

/// The protocol version (`apiVersion`).
pub const API_VERSION: &str = "pacto.dev/evidence/v1";
/// The envelope `kind`.
pub const KIND: &str = "EvidenceEnvelope";
/// The only signature algorithm.
pub const ALGORITHM: &str = "Ed25519";
/// The largest envelope accepted, in bytes (1 MiB).
pub const MAX_ENVELOPE_BYTES: usize = 1 << 20;
/// The most observations one envelope may carry.
pub const MAX_ENVELOPE_OBSERVATIONS: usize = MAX_OBSERVATIONS;

/// Who produced an envelope and which key signed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a producer object")]
pub struct Producer {
    /// The producer id (bound to the key in the trust configuration).
    #[serde(default)]
    pub id: String,
    /// The producer's software version; omitted from JSON when empty.
    #[serde(default)]
    pub version: String,
    /// Selects the public key in the verifier's trust store.
    #[serde(rename = "keyId", default)]
    pub key_id: String,
}

/// The detached signature over the canonical bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a signature object")]
pub struct Signature {
    /// Always `Ed25519`.
    #[serde(default)]
    pub algorithm: String,
    /// The 64-byte signature, padded standard base64.
    #[serde(default)]
    pub value: String,
}

/// One observation as carried by an envelope: the typed observation the engine evaluates, and
/// the payload text as received (compacted), which the canonical bytes are made of.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedObservation {
    observation: Observation,
    /// Compacted Go JSON text of `value`; `Some` exactly when the outcome is Observed.
    raw_value: Option<String>,
}

impl SignedObservation {
    /// The typed observation.
    pub fn observation(&self) -> &Observation {
        &self.observation
    }

    /// The payload text the canonical bytes carry (`None` unless Observed).
    pub fn raw_value(&self) -> Option<&str> {
        self.raw_value.as_deref()
    }

    /// Wraps a typed observation; the payload text is the typed payload's JSON. Fails on the
    /// operator's extensions of the model (`detail`), which the wire format cannot carry.
    pub fn from_observation(observation: Observation) -> Result<Self, EnvelopeError> {
        if observation.detail.is_some() {
            return Err(EnvelopeError::Extension { field: "detail" });
        }
        let raw_value = match &observation.outcome {
            Outcome::Observed(value) => {
                let text = serde_json::to_string(value).map_err(|e| EnvelopeError::Field {
                    path: "value".into(),
                    message: e.to_string(),
                })?;
                Some(gojson::compact(&text))
            }
            _ => None,
        };
        Ok(Self {
            observation,
            raw_value,
        })
    }

    fn tree(&self) -> Json {
        let o = &self.observation;
        let mut fields = vec![
            ("kind".to_owned(), Json::str(o.kind.as_str())),
            ("subject".to_owned(), subject_tree(&o.subject)),
            ("outcome".to_owned(), Json::str(o.outcome.kind().as_str())),
        ];
        if let Some(raw) = &self.raw_value {
            fields.push(("value".to_owned(), Json::Raw(raw.clone())));
        }
        fields.push((
            "provenance".to_owned(),
            Json::Object(vec![
                (
                    "collector".to_owned(),
                    Json::str(o.provenance.collector.clone()),
                ),
                (
                    "detectedAt".to_owned(),
                    Json::str(o.provenance.detected_at.to_rfc3339_nano()),
                ),
            ]),
        ));
        Json::Object(fields)
    }
}

fn subject_tree(subject: &SubjectRef) -> Json {
    Json::Object(vec![
        ("kind".to_owned(), Json::str(subject.kind.clone())),
        ("name".to_owned(), Json::str(subject.name.clone())),
    ])
}

/// The evidence set as carried by an envelope (upstream's five keys, no extensions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignedEvidenceSet {
    /// The runtime target (`Subject`).
    pub subject: SubjectRef,
    /// `ContractRef`.
    pub contract_ref: String,
    /// `Source`.
    pub source: String,
    /// `ObservedAt`.
    pub observed_at: Timestamp,
    /// `Observations`; `None` is JSON `null` (or a missing key), distinct from an empty list.
    pub observations: Option<Vec<SignedObservation>>,
}

impl SignedEvidenceSet {
    /// Strictly decodes an evidence set document (what `pacto evidence sign` reads): unknown
    /// keys, trailing data and the observation-level structural errors are refused with the
    /// path of the field.
    pub fn from_json(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let set: EvidenceSetIn = strict_decode(bytes, &["Observations"])?;
        Ok(set.into_set())
    }

    /// Wraps an engine evidence set (the operator as a producer). Fails on the operator's
    /// extensions (`SubjectMissing`, an observation's `detail`), which the wire format cannot
    /// carry.
    pub fn from_engine(set: &EvidenceSet) -> Result<Self, EnvelopeError> {
        if set.subject_missing {
            return Err(EnvelopeError::Extension {
                field: "SubjectMissing",
            });
        }
        let observations = match &set.observations {
            None => None,
            Some(list) => Some(
                list.iter()
                    .cloned()
                    .map(SignedObservation::from_observation)
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Self {
            subject: set.subject.clone(),
            contract_ref: set.contract_ref.clone(),
            source: set.source.clone(),
            observed_at: set.observed_at,
            observations,
        })
    }

    /// The engine's evidence set (for validation and evaluation).
    pub fn to_engine(&self) -> EvidenceSet {
        EvidenceSet {
            subject: self.subject.clone(),
            contract_ref: self.contract_ref.clone(),
            source: self.source.clone(),
            observed_at: self.observed_at,
            observations: self
                .observations
                .as_ref()
                .map(|list| list.iter().map(|o| o.observation.clone()).collect()),
            subject_missing: false,
        }
    }

    /// The number of observations (`null` counts as none).
    pub fn observation_count(&self) -> usize {
        self.observations.as_ref().map_or(0, Vec::len)
    }

    /// Go struct order: `Subject, ContractRef, Source, ObservedAt, Observations`.
    fn tree(&self) -> Json {
        Json::Object(vec![
            ("Subject".to_owned(), subject_tree(&self.subject)),
            (
                "ContractRef".to_owned(),
                Json::str(self.contract_ref.clone()),
            ),
            ("Source".to_owned(), Json::str(self.source.clone())),
            (
                "ObservedAt".to_owned(),
                Json::str(self.observed_at.to_rfc3339_nano()),
            ),
            (
                "Observations".to_owned(),
                match &self.observations {
                    None => Json::Null,
                    Some(list) => Json::Array(list.iter().map(SignedObservation::tree).collect()),
                },
            ),
        ])
    }

    /// The content id `sha256:<hex>` of the set: SHA-256 of its Go struct-order JSON
    /// (docs/design/envelopes.md#default-id).
    pub fn content_id(&self) -> String {
        let text = self.tree().to_text();
        format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
    }
}

/// A signed evidence envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// `pacto.dev/evidence/v1`.
    pub api_version: String,
    /// `EvidenceEnvelope`.
    pub kind: String,
    /// Globally unique envelope id.
    pub id: String,
    /// Producer and key.
    pub producer: Producer,
    /// Per producer, strictly increasing.
    pub sequence: u64,
    /// The zero time skips the not-yet-valid check.
    pub issued_at: Timestamp,
    /// The zero time disables expiry.
    pub expires_at: Timestamp,
    /// The evidence.
    pub evidence_set: SignedEvidenceSet,
    /// The signature, `None` before signing.
    pub signature: Option<Signature>,
}

impl Envelope {
    /// An unsigned envelope with the protocol's apiVersion and kind.
    pub fn new(
        id: impl Into<String>,
        producer: Producer,
        sequence: u64,
        issued_at: Timestamp,
        expires_at: Timestamp,
        evidence_set: SignedEvidenceSet,
    ) -> Self {
        Self {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            id: id.into(),
            producer,
            sequence,
            issued_at,
            expires_at,
            evidence_set,
            signature: None,
        }
    }

    /// Strict decode (docs/design/envelopes.md#decode): the size bound, one JSON value with no
    /// unknown keys and no trailing data, then [`Envelope::validate_structure`]. The signature
    /// is not verified.
    pub fn decode(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        if bytes.len() > MAX_ENVELOPE_BYTES {
            return Err(EnvelopeError::TooLarge { size: bytes.len() });
        }
        let raw: EnvelopeIn = strict_decode(bytes, &["evidenceSet", "Observations"])?;
        let envelope = raw.into_envelope();
        envelope.validate_structure()?;
        Ok(envelope)
    }

    /// The strict decode without the size bound and the structure checks (a stored record's
    /// embedded envelope, which is checked after it is re-encoded).
    pub(crate) fn decode_fields(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let raw: EnvelopeIn = strict_decode(bytes, &["evidenceSet", "Observations"])?;
        Ok(raw.into_envelope())
    }

    /// The envelope as a Go struct-order tree, signature included.
    pub(crate) fn json_tree(&self) -> Json {
        self.tree(true)
    }

    /// apiVersion, kind, the required identity fields, then the observation bound, in that
    /// order.
    pub fn validate_structure(&self) -> Result<(), EnvelopeError> {
        if self.api_version != API_VERSION {
            return Err(EnvelopeError::UnsupportedVersion {
                found: self.api_version.clone(),
            });
        }
        if self.kind != KIND {
            return Err(EnvelopeError::UnsupportedKind {
                found: self.kind.clone(),
            });
        }
        for (field, value) in [
            ("id", &self.id),
            ("producer.id", &self.producer.id),
            ("producer.keyId", &self.producer.key_id),
        ] {
            if value.is_empty() {
                return Err(EnvelopeError::MissingField { field });
            }
        }
        let count = self.evidence_set.observation_count();
        if count > MAX_ENVELOPE_OBSERVATIONS {
            return Err(EnvelopeError::TooManyObservations { count });
        }
        Ok(())
    }

    /// Go struct order: `apiVersion, kind, id, producer, sequence, issuedAt, expiresAt,
    /// evidenceSet, signature`.
    fn tree(&self, with_signature: bool) -> Json {
        let mut producer = vec![("id".to_owned(), Json::str(self.producer.id.clone()))];
        if !self.producer.version.is_empty() {
            producer.push((
                "version".to_owned(),
                Json::str(self.producer.version.clone()),
            ));
        }
        producer.push(("keyId".to_owned(), Json::str(self.producer.key_id.clone())));
        let mut fields = vec![
            ("apiVersion".to_owned(), Json::str(self.api_version.clone())),
            ("kind".to_owned(), Json::str(self.kind.clone())),
            ("id".to_owned(), Json::str(self.id.clone())),
            ("producer".to_owned(), Json::Object(producer)),
            (
                "sequence".to_owned(),
                Json::Number(self.sequence.to_string()),
            ),
            (
                "issuedAt".to_owned(),
                Json::str(self.issued_at.to_rfc3339_nano()),
            ),
            (
                "expiresAt".to_owned(),
                Json::str(self.expires_at.to_rfc3339_nano()),
            ),
            ("evidenceSet".to_owned(), self.evidence_set.tree()),
        ];
        if with_signature && let Some(signature) = &self.signature {
            fields.push((
                "signature".to_owned(),
                Json::Object(vec![
                    (
                        "algorithm".to_owned(),
                        Json::str(signature.algorithm.clone()),
                    ),
                    ("value".to_owned(), Json::str(signature.value.clone())),
                ]),
            ));
        }
        Json::Object(fields)
    }

    /// The bytes that are signed and verified (docs/design/envelopes.md#canonical-bytes): the
    /// typed envelope without its signature, with every key sorted byte-wise at every depth,
    /// no whitespace and Go's string escaping.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, EnvelopeError> {
        let tree = self
            .tree(false)
            .sorted()
            .map_err(|e| EnvelopeError::Canonical {
                message: e.to_string(),
            })?;
        Ok(tree.to_text().into_bytes())
    }

    /// The envelope as Go's `json.Marshal` writes it (struct order, HTML escaping, compact),
    /// signature included.
    pub fn to_json(&self) -> String {
        self.tree(true).to_text()
    }

    /// The default envelope id of the CLI (docs/design/envelopes.md#default-id):
    /// `sha256:<hex>` over the length-prefixed apiVersion and producer id, the sequence
    /// (8 bytes big-endian) and the length-prefixed content id of the evidence set.
    pub fn default_id(producer_id: &str, sequence: u64, set: &SignedEvidenceSet) -> String {
        let mut hasher = Sha256::new();
        let mut prefixed = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_be_bytes());
            hasher.update(bytes);
        };
        prefixed(API_VERSION.as_bytes());
        prefixed(producer_id.as_bytes());
        let content = set.content_id();
        hasher.update(sequence.to_be_bytes());
        hasher.update((content.len() as u64).to_be_bytes());
        hasher.update(content.as_bytes());
        format!("sha256:{}", hex::encode(hasher.finalize()))
    }
}

/// Why bytes are not a well-formed envelope (all map to `invalid_envelope`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// Over [`MAX_ENVELOPE_BYTES`].
    #[error("envelope is {size} bytes, over the limit of {MAX_ENVELOPE_BYTES} bytes")]
    TooLarge {
        /// The size received.
        size: usize,
    },
    /// A field is malformed, unknown or of the wrong type; or the text is not JSON.
    #[error("{path}: {message}")]
    Field {
        /// The field path (`evidenceSet.Observations[2].outcome`; `.` for the document).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Something follows the JSON value.
    #[error("unexpected trailing data after the envelope ({message})")]
    TrailingData {
        /// The decoder's position.
        message: String,
    },
    /// `apiVersion` is not `pacto.dev/evidence/v1`.
    #[error("apiVersion: unsupported {found:?} (expected {API_VERSION:?})")]
    UnsupportedVersion {
        /// The value found.
        found: String,
    },
    /// `kind` is not `EvidenceEnvelope`.
    #[error("kind: unsupported {found:?} (expected {KIND:?})")]
    UnsupportedKind {
        /// The value found.
        found: String,
    },
    /// A required identity field is empty or missing.
    #[error("{field}: required field is missing or empty")]
    MissingField {
        /// `id`, `producer.id` or `producer.keyId`.
        field: &'static str,
    },
    /// Over [`MAX_ENVELOPE_OBSERVATIONS`] observations.
    #[error(
        "evidenceSet.Observations: {count} observations, over the limit of {MAX_ENVELOPE_OBSERVATIONS}"
    )]
    TooManyObservations {
        /// The count received.
        count: usize,
    },
    /// An operator-only extension of the evidence model cannot be carried by an envelope.
    #[error("{field}: the envelope format has no such field (an operator extension)")]
    Extension {
        /// `SubjectMissing` or `detail`.
        field: &'static str,
    },
    /// The canonical form could not be built (only for envelopes not obtained by decoding).
    #[error("building the canonical bytes: {message}")]
    Canonical {
        /// What failed.
        message: String,
    },
}

impl EnvelopeError {
    /// The stable code: always `invalid_envelope`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::InvalidEnvelope
    }
}

// ---- decoding -------------------------------------------------------------------------------

/// Separates an observation's own field path from its message inside a custom serde error (the
/// decoder below turns it back into one path).
const PATH_MARK: char = '\u{1}';

/// serde lets a derived struct decode from a JSON array (fields by position); Go does not.
/// In this format the only array is the observation list, so any other array is refused up
/// front with its path. `list` is the path of the observation list.
fn reject_arrays(
    value: &serde_json::Value,
    path: &mut Vec<String>,
    list: &[&str],
) -> Result<(), EnvelopeError> {
    match value {
        serde_json::Value::Array(items) => {
            if path.iter().map(String::as_str).ne(list.iter().copied()) {
                return Err(EnvelopeError::Field {
                    path: if path.is_empty() {
                        ".".to_owned()
                    } else {
                        path.join(".")
                    },
                    message: "invalid type: array, expected an object or a scalar".to_owned(),
                });
            }
            for (i, item) in items.iter().enumerate() {
                let last = path.pop().unwrap_or_default();
                path.push(format!("{last}[{i}]"));
                let result = reject_arrays(item, path, list);
                path.pop();
                path.push(last);
                result?;
            }
            Ok(())
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                path.push(key.clone());
                let result = reject_arrays(item, path, list);
                path.pop();
                result?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn strict_decode<T: for<'de> Deserialize<'de>>(
    bytes: &[u8],
    list: &[&str],
) -> Result<T, EnvelopeError> {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        reject_arrays(&value, &mut Vec::new(), list)?;
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let outer = e.path().to_string();
        let message = e.inner().to_string();
        field_error(&outer, &message)
    })?;
    de.end().map_err(|e| EnvelopeError::TrailingData {
        message: e.to_string(),
    })?;
    Ok(value)
}

fn join_path(outer: &str, inner: &str) -> String {
    match (outer, inner) {
        ("." | "", i) => i.to_owned(),
        (o, "." | "") => o.to_owned(),
        (o, i) if i.starts_with('[') => format!("{o}{i}"),
        (o, i) => format!("{o}.{i}"),
    }
}

fn field_error(outer: &str, message: &str) -> EnvelopeError {
    if let Some(rest) = message.strip_prefix(PATH_MARK)
        && let Some((inner, message)) = rest.split_once(PATH_MARK)
    {
        return EnvelopeError::Field {
            path: join_path(outer, inner),
            message: message.to_owned(),
        };
    }
    EnvelopeError::Field {
        path: if outer.is_empty() {
            ".".to_owned()
        } else {
            outer.to_owned()
        },
        message: message.to_owned(),
    }
}

/// serde_json appends the position inside the text it parsed; inside an observation that is a
/// position in the observation, not in the document, so it is dropped.
fn without_position(message: &str) -> &str {
    if let Some(at) = message.rfind(" at line ") {
        let tail = &message[at + " at line ".len()..];
        let mut parts = tail.splitn(3, ' ');
        if let (Some(line), Some("column"), Some(col)) = (parts.next(), parts.next(), parts.next())
            && line.bytes().all(|b| b.is_ascii_digit())
            && col.bytes().all(|b| b.is_ascii_digit())
        {
            return &message[..at];
        }
    }
    message
}

/// The engine's observation errors start with the field they concern (`outcome: …`).
fn split_leaf(message: &str) -> (&str, &str) {
    if let Some((head, rest)) = message.split_once(": ")
        && !head.is_empty()
        && head
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
    {
        return (head, rest);
    }
    ("", message)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an evidence envelope object")]
struct EnvelopeIn {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    producer: Producer,
    #[serde(default)]
    sequence: u64,
    #[serde(rename = "issuedAt", default)]
    issued_at: Timestamp,
    #[serde(rename = "expiresAt", default)]
    expires_at: Timestamp,
    #[serde(rename = "evidenceSet", default)]
    evidence_set: EvidenceSetIn,
    #[serde(default)]
    signature: Option<Signature>,
}

impl EnvelopeIn {
    fn into_envelope(self) -> Envelope {
        Envelope {
            api_version: self.api_version,
            kind: self.kind,
            id: self.id,
            producer: self.producer,
            sequence: self.sequence,
            issued_at: self.issued_at,
            expires_at: self.expires_at,
            evidence_set: self.evidence_set.into_set(),
            signature: self.signature,
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an evidence set object")]
struct EvidenceSetIn {
    #[serde(rename = "Subject", default)]
    subject: SubjectRef,
    #[serde(rename = "ContractRef", default)]
    contract_ref: String,
    #[serde(rename = "Source", default)]
    source: String,
    #[serde(rename = "ObservedAt", default)]
    observed_at: Timestamp,
    #[serde(rename = "Observations", default)]
    observations: Option<Vec<ObservationIn>>,
}

impl EvidenceSetIn {
    fn into_set(self) -> SignedEvidenceSet {
        SignedEvidenceSet {
            subject: self.subject,
            contract_ref: self.contract_ref,
            source: self.source,
            observed_at: self.observed_at,
            observations: self
                .observations
                .map(|list| list.into_iter().map(|o| o.0).collect()),
        }
    }
}

/// The keys of an observation on the wire, strictly (no `detail`: that is an operator
/// extension the envelope format does not have).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an observation object")]
struct ObservationFields {
    #[serde(default)]
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    #[allow(dead_code)]
    subject: SubjectRef,
    #[serde(default)]
    #[allow(dead_code)]
    outcome: String,
    /// `None`: key absent; `Some("null")`: an explicit null.
    #[serde(default, deserialize_with = "present_raw")]
    value: Option<Box<RawValue>>,
    #[serde(default)]
    #[allow(dead_code)]
    provenance: pacto_engine::Provenance,
}

fn present_raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

struct ObservationIn(SignedObservation);

impl<'de> Deserialize<'de> for ObservationIn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let text = raw.get();
        let marked = |path: &str, message: &str| {
            D::Error::custom(format!(
                "{PATH_MARK}{path}{PATH_MARK}{}",
                without_position(message)
            ))
        };
        // 1. the wire keys, strictly, with the path of a bad field
        let mut de = serde_json::Deserializer::from_str(text);
        let fields: ObservationFields = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| marked(&e.path().to_string(), &e.inner().to_string()))?;
        // 2. the engine's decode-time rules (kind, outcome, subject pairing, payload)
        let observation: Observation = serde_json::from_str(text).map_err(|e| {
            let message = e.to_string();
            let (leaf, rest) = split_leaf(without_position(&message));
            marked(leaf, rest)
        })?;
        let raw_value = match observation.outcome {
            Outcome::Observed(_) => fields.value.map(|v| gojson::compact(v.get())),
            _ => None,
        };
        Ok(Self(SignedObservation {
            observation,
            raw_value,
        }))
    }
}
