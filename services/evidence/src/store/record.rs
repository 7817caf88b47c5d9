//! The stored record (docs/design/evidence-store.md#records): the payload document
//! `pacto.dev/evidence-record/v1`, its strict read-side validation and the deterministic OCI
//! artifact that carries it.

use pacto_engine::{Coverage, RecordFinding, Timestamp};
use pacto_oci::{ArtifactDescriptor, OCI_MANIFEST_MEDIA_TYPE, sha256_digest};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::envelope::{Envelope, EnvelopeError, MAX_ENVELOPE_BYTES};
use crate::gojson::{self, Json};
use crate::store::subject::Subject;

/// The payload document's `schemaVersion`.
pub const RECORD_SCHEMA_VERSION: &str = "pacto.dev/evidence-record/v1";
/// The artifact type of a record manifest, and the media type of its one layer.
pub const RECORD_ARTIFACT_TYPE: &str = "application/vnd.pacto.evidence.record.v1+json";
/// The largest payload layer, in bytes (8 MiB).
pub const MAX_RECORD_BYTES: u64 = 8 << 20;
/// A listed descriptor over this size is never fetched (malformed when it claims the record
/// type, foreign otherwise).
pub const MAX_RECORD_MANIFEST_BYTES: u64 = 1 << 20;
/// The OCI empty config media type.
pub const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The digest of the empty config blob `{}`.
pub const EMPTY_CONFIG_DIGEST: &str =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
/// The empty config blob.
pub const EMPTY_CONFIG_BLOB: &[u8] = b"{}";
/// The canonical empty config descriptor, byte for byte.
pub const EMPTY_CONFIG_DESCRIPTOR: &str = "{\"mediaType\":\"application/vnd.oci.empty.v1+json\",\
     \"digest\":\"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a\",\
     \"size\":2,\"data\":\"e30=\"}";

/// One accepted record: the signed envelope and what the server derived from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The signed envelope, signature included.
    pub envelope: Envelope,
    /// `Compliant`, `NonCompliant`, `Unknown` or `Warning`.
    pub compliance: String,
    /// The findings (omitted from the payload when empty).
    pub findings: Vec<RecordFinding>,
    /// The coverage.
    pub coverage: Coverage,
    /// When the server accepted the envelope.
    pub accepted_at: Timestamp,
    /// The resolved contract's `service.name`.
    pub service: String,
    /// The subject's domain (omitted when empty).
    pub domain: String,
    /// The contract digest (omitted when empty).
    pub digest: String,
}

/// Why a stored artifact is malformed (docs/design/evidence-store.md#read-side-validation).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Malformed {
    /// The listing claims the record type but the manifest is over 1 MiB.
    #[error("manifest is {size} bytes, over the {MAX_RECORD_MANIFEST_BYTES}-byte limit")]
    ManifestTooLarge {
        /// The listed size.
        size: u64,
    },
    /// The manifest or the payload could not be fetched (or failed digest verification).
    #[error("fetching the {what}: {message}")]
    Fetch {
        /// `manifest` or `payload`.
        what: &'static str,
        /// The registry client's error.
        message: String,
    },
    /// The manifest breaks the record artifact shape.
    #[error("manifest: {field}: {message}")]
    Manifest {
        /// The offending field (`config`, `layers`, `subject.digest`, …).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The payload is over 8 MiB.
    #[error("payload is {size} bytes, over the {MAX_RECORD_BYTES}-byte limit")]
    PayloadTooLarge {
        /// The size.
        size: u64,
    },
    /// The payload is not a strictly decodable record document.
    #[error("payload: {path}: {message}")]
    Decode {
        /// The field path (`.` for the document).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// `schemaVersion` is not `pacto.dev/evidence-record/v1`.
    #[error("payload: schemaVersion: {found:?} (expected {RECORD_SCHEMA_VERSION:?})")]
    SchemaVersion {
        /// The value found.
        found: String,
    },
    /// A required record field is empty or zero.
    #[error("payload: record.{field}: required field is missing or empty")]
    Missing {
        /// `service`, `acceptedAt` or `envelope`.
        field: &'static str,
    },
    /// A field does not match the subject the artifact is attached to.
    #[error("payload: {field}: {found:?} does not match the subject ({expected:?})")]
    SubjectMismatch {
        /// `record.envelope.evidenceSet.ContractRef`, `record.digest` or `record.domain`.
        field: &'static str,
        /// The value found.
        found: String,
        /// The subject's value.
        expected: String,
    },
    /// The evidence set fails validation.
    #[error("payload: record.envelope.evidenceSet: {message}")]
    InvalidEvidence {
        /// The validation errors.
        message: String,
    },
    /// The re-encoded envelope fails the envelope decode (size, structure).
    #[error("payload: record.envelope: {0}")]
    Envelope(EnvelopeError),
}

/// The deterministic artifact of a record (docs/design/evidence-store.md#artifact).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The payload (the one layer).
    pub payload: Vec<u8>,
    /// Its digest.
    pub payload_digest: String,
    /// The manifest bytes.
    pub manifest: Vec<u8>,
    /// The manifest digest (the record's identity in the registry).
    pub digest: String,
}

impl Artifact {
    /// The descriptor a referrers listing (or the tag-schema index) holds for it.
    pub fn descriptor(&self) -> ArtifactDescriptor {
        ArtifactDescriptor {
            media_type: OCI_MANIFEST_MEDIA_TYPE.to_owned(),
            digest: self.digest.clone(),
            size: self.manifest.len() as u64,
            artifact_type: Some(RECORD_ARTIFACT_TYPE.to_owned()),
        }
    }
}

fn descriptor_tree(media_type: &str, digest: &str, size: u64) -> Json {
    Json::Object(vec![
        ("mediaType".to_owned(), Json::str(media_type)),
        ("digest".to_owned(), Json::str(digest)),
        ("size".to_owned(), Json::Number(size.to_string())),
    ])
}

/// Go text of a serde-serialisable value with HTML escaping (serde_json escapes control
/// characters as Go does; `compact` adds `<`, `>`, `&`, U+2028 and U+2029).
fn go_raw<T: serde::Serialize>(value: &T) -> Json {
    Json::Raw(gojson::compact(
        &serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned()),
    ))
}

/// JSON text with Go's HTML escapes (`\u003c`, `\u003e`, `\u0026`) turned back into the
/// characters: what an encoder with `SetEscapeHTML(false)` writes.
fn without_html_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let replaced = match tail.get(..6) {
            Some("\\u003c") => Some('<'),
            Some("\\u003e") => Some('>'),
            Some("\\u0026") => Some('&'),
            _ => None,
        };
        if let Some(c) = replaced {
            out.push(c);
            rest = &tail[6..];
        } else {
            // any other escape is two characters or \uXXXX; copy the pair and go on
            let mut chars = tail.chars();
            out.extend(chars.next());
            out.extend(chars.next());
            rest = chars.as_str();
        }
    }
    out.push_str(rest);
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a record document")]
struct PayloadIn {
    #[serde(rename = "schemaVersion", default)]
    schema_version: String,
    #[serde(default)]
    record: RecordIn,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a record object")]
struct RecordIn {
    #[serde(default)]
    envelope: Option<Box<RawValue>>,
    #[serde(default)]
    compliance: String,
    #[serde(default)]
    findings: Option<Vec<RecordFinding>>,
    #[serde(default)]
    coverage: Coverage,
    #[serde(rename = "acceptedAt", default)]
    accepted_at: Timestamp,
    #[serde(default)]
    service: String,
    #[serde(default)]
    domain: String,
    #[serde(default)]
    digest: String,
}

impl Record {
    /// The payload document as Go's `json.Marshal` writes it: struct order, HTML escaping,
    /// `findings`, `domain` and `digest` omitted when empty.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut record = vec![
            ("envelope".to_owned(), self.envelope.json_tree()),
            ("compliance".to_owned(), Json::str(self.compliance.clone())),
        ];
        if !self.findings.is_empty() {
            record.push(("findings".to_owned(), go_raw(&self.findings)));
        }
        record.push((
            "coverage".to_owned(),
            Json::Object(vec![
                (
                    "evaluated".to_owned(),
                    Json::Number(self.coverage.evaluated.to_string()),
                ),
                (
                    "required".to_owned(),
                    Json::Number(self.coverage.required.to_string()),
                ),
            ]),
        ));
        record.push((
            "acceptedAt".to_owned(),
            Json::str(self.accepted_at.to_rfc3339_nano()),
        ));
        record.push(("service".to_owned(), Json::str(self.service.clone())));
        if !self.domain.is_empty() {
            record.push(("domain".to_owned(), Json::str(self.domain.clone())));
        }
        if !self.digest.is_empty() {
            record.push(("digest".to_owned(), Json::str(self.digest.clone())));
        }
        Json::Object(vec![
            ("schemaVersion".to_owned(), Json::str(RECORD_SCHEMA_VERSION)),
            ("record".to_owned(), Json::Object(record)),
        ])
        .to_text()
        .into_bytes()
    }

    /// Strictly decodes a payload document without the subject checks: the size bound, one
    /// JSON value with no unknown keys and no trailing data, the schemaVersion, `service` and
    /// `acceptedAt` set, the evidence set valid, and the embedded envelope (re-encoded without
    /// HTML escaping) passing the full envelope decode.
    pub fn decode_payload(bytes: &[u8]) -> Result<Self, Malformed> {
        if bytes.len() as u64 > MAX_RECORD_BYTES {
            return Err(Malformed::PayloadTooLarge {
                size: bytes.len() as u64,
            });
        }
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let payload: PayloadIn = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            Malformed::Decode {
                path: if path.is_empty() {
                    ".".to_owned()
                } else {
                    path
                },
                message: e.inner().to_string(),
            }
        })?;
        de.end().map_err(|e| Malformed::Decode {
            path: ".".to_owned(),
            message: format!("unexpected trailing data ({e})"),
        })?;
        let record = payload.record;
        let raw = record
            .envelope
            .ok_or(Malformed::Missing { field: "envelope" })?;
        let envelope = Envelope::decode_fields(raw.get().as_bytes()).map_err(|e| match e {
            EnvelopeError::Field { path, message } => Malformed::Decode {
                path: if path == "." {
                    "record.envelope".to_owned()
                } else {
                    format!("record.envelope.{path}")
                },
                message,
            },
            other => Malformed::Envelope(other),
        })?;
        if payload.schema_version != RECORD_SCHEMA_VERSION {
            return Err(Malformed::SchemaVersion {
                found: payload.schema_version,
            });
        }
        if record.service.is_empty() {
            return Err(Malformed::Missing { field: "service" });
        }
        if record.accepted_at.is_zero() {
            return Err(Malformed::Missing {
                field: "acceptedAt",
            });
        }
        let decoded = Self {
            envelope,
            compliance: record.compliance,
            findings: record.findings.unwrap_or_default(),
            coverage: record.coverage,
            accepted_at: record.accepted_at,
            service: record.service,
            domain: record.domain,
            digest: record.digest,
        };
        decoded.check_evidence()?;
        Ok(decoded)
    }

    fn check_evidence(&self) -> Result<(), Malformed> {
        self.envelope
            .evidence_set
            .to_engine()
            .validate()
            .map_err(|e| Malformed::InvalidEvidence {
                message: e.to_string(),
            })?;
        let reencoded = without_html_escapes(&self.envelope.to_json());
        if reencoded.len() > MAX_ENVELOPE_BYTES {
            return Err(Malformed::Envelope(EnvelopeError::TooLarge {
                size: reencoded.len(),
            }));
        }
        self.envelope
            .validate_structure()
            .map_err(Malformed::Envelope)
    }

    /// [`Record::decode_payload`] plus the subject checks: the ContractRef, digest and domain
    /// must be the subject's.
    pub fn from_payload(bytes: &[u8], subject: &Subject) -> Result<Self, Malformed> {
        let record = Self::decode_payload(bytes)?;
        record.check_subject(subject)?;
        Ok(record)
    }

    fn check_subject(&self, subject: &Subject) -> Result<(), Malformed> {
        let checks = [
            (
                "record.envelope.evidenceSet.ContractRef",
                self.envelope.evidence_set.contract_ref.clone(),
                subject.reference(),
            ),
            (
                "record.digest",
                self.digest.clone(),
                subject.digest().to_owned(),
            ),
            ("record.domain", self.domain.clone(), subject.domain()),
        ];
        for (field, found, expected) in checks {
            if found != expected {
                return Err(Malformed::SubjectMismatch {
                    field,
                    found,
                    expected,
                });
            }
        }
        Ok(())
    }

    /// The deterministic artifact: the canonical empty config (with `data`), the payload as
    /// the one layer, `artifactType`, the subject descriptor as resolved, no annotations.
    pub fn artifact(&self, subject: &ArtifactDescriptor) -> Artifact {
        let payload = self.to_payload();
        let payload_digest = sha256_digest(&payload);
        let manifest = Json::Object(vec![
            ("schemaVersion".to_owned(), Json::Number("2".to_owned())),
            ("mediaType".to_owned(), Json::str(OCI_MANIFEST_MEDIA_TYPE)),
            ("artifactType".to_owned(), Json::str(RECORD_ARTIFACT_TYPE)),
            (
                "config".to_owned(),
                Json::Raw(EMPTY_CONFIG_DESCRIPTOR.to_owned()),
            ),
            (
                "layers".to_owned(),
                Json::Array(vec![descriptor_tree(
                    RECORD_ARTIFACT_TYPE,
                    &payload_digest,
                    payload.len() as u64,
                )]),
            ),
            (
                "subject".to_owned(),
                descriptor_tree(&subject.media_type, &subject.digest, subject.size),
            ),
        ])
        .to_text()
        .into_bytes();
        let digest = sha256_digest(&manifest);
        Artifact {
            payload,
            payload_digest,
            manifest,
            digest,
        }
    }
}

/// What a stored manifest says, leniently read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ManifestIn {
    #[serde(default)]
    pub schema_version: Option<u32>,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub artifact_type: Option<String>,
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    #[serde(default)]
    pub layers: Option<Vec<ArtifactDescriptor>>,
    #[serde(default)]
    pub subject: Option<ArtifactDescriptor>,
}

impl ManifestIn {
    /// The manifest's own `artifactType`, read leniently (`None` when unreadable).
    pub(crate) fn artifact_type(bytes: &[u8]) -> Option<String> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Lenient {
            #[serde(default)]
            artifact_type: Option<serde_json::Value>,
        }
        serde_json::from_slice::<Lenient>(bytes)
            .ok()
            .and_then(|m| m.artifact_type)
            .and_then(|v| v.as_str().map(str::to_owned))
    }

    /// Validates a record manifest strictly and returns its payload layer descriptor.
    pub(crate) fn check(bytes: &[u8], subject: &Subject) -> Result<ArtifactDescriptor, Malformed> {
        let bad = |field: &'static str, message: String| Malformed::Manifest { field, message };
        let manifest: ManifestIn = serde_json::from_slice(bytes)
            .map_err(|e| bad(".", format!("not a manifest object ({e})")))?;
        if manifest.schema_version != Some(2) {
            return Err(bad(
                "schemaVersion",
                format!("{:?}, expected 2", manifest.schema_version),
            ));
        }
        if manifest.media_type.as_deref() != Some(OCI_MANIFEST_MEDIA_TYPE) {
            return Err(bad(
                "mediaType",
                format!(
                    "{:?}, expected {OCI_MANIFEST_MEDIA_TYPE:?}",
                    manifest.media_type
                ),
            ));
        }
        if manifest.artifact_type.as_deref() != Some(RECORD_ARTIFACT_TYPE) {
            return Err(bad(
                "artifactType",
                format!(
                    "{:?}, expected {RECORD_ARTIFACT_TYPE:?}",
                    manifest.artifact_type
                ),
            ));
        }
        let canonical: serde_json::Value =
            serde_json::from_str(EMPTY_CONFIG_DESCRIPTOR).unwrap_or_default();
        if manifest.config.as_ref() != Some(&canonical) {
            return Err(bad(
                "config",
                "not the canonical empty descriptor (with data \"e30=\", no other fields)"
                    .to_owned(),
            ));
        }
        let layers = manifest.layers.unwrap_or_default();
        let [layer] = layers.as_slice() else {
            return Err(bad(
                "layers",
                format!("{} layers, expected exactly one", layers.len()),
            ));
        };
        if layer.media_type != RECORD_ARTIFACT_TYPE {
            return Err(bad(
                "layers[0].mediaType",
                format!("{:?}, expected {RECORD_ARTIFACT_TYPE:?}", layer.media_type),
            ));
        }
        if layer.size > MAX_RECORD_BYTES {
            return Err(Malformed::PayloadTooLarge { size: layer.size });
        }
        let found = manifest.subject.map(|s| s.digest).unwrap_or_default();
        if found != subject.digest() {
            return Err(bad(
                "subject.digest",
                format!("{found:?}, expected {:?}", subject.digest()),
            ));
        }
        Ok(layer.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{Producer, Signature, SignedEvidenceSet};
    use pacto_engine::{RecordEvidenceRef, RecordSubject, Severity};

    const SUBJECT: &str = "oci://registry.example/acme/orders@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn ts(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn subject() -> Subject {
        Subject::parse(SUBJECT).unwrap()
    }

    fn golden() -> Record {
        let subject = subject();
        let set = SignedEvidenceSet::from_json(
            format!(
                r#"{{"Subject":{{"kind":"service","name":"shop/orders<&>"}},"ContractRef":"{SUBJECT}","Source":"edge","ObservedAt":"2026-12-04T09:59:30.25+01:00","Observations":[{{"kind":"CapabilityObserved","subject":{{"kind":"capability","name":"health"}},"outcome":"Observed","value":{{"present":false}},"provenance":{{"collector":"edge","detectedAt":"2026-12-04T09:59:00Z"}}}}]}}"#
            )
            .as_bytes(),
        )
        .unwrap();
        let mut envelope = Envelope::new(
            "id-1",
            Producer {
                id: "edge".into(),
                version: String::new(),
                key_id: "k1".into(),
            },
            7,
            ts("2026-12-04T10:00:00Z"),
            ts("2026-12-05T10:00:00Z"),
            set,
        );
        envelope.signature = Some(Signature {
            algorithm: "Ed25519".into(),
            value: "c2lnbmF0dXJl".into(),
        });
        Record {
            envelope,
            compliance: "NonCompliant".into(),
            findings: vec![RecordFinding {
                code: "CAPABILITY_ABSENT".into(),
                severity: Severity::Error,
                category: "RuntimeDrift".into(),
                subject: RecordSubject {
                    kind: "capability".into(),
                    name: "health".into(),
                },
                contract_path: "capabilities[type=health]".into(),
                message: "capability \"health\" is <absent> & required".into(),
                evidence_refs: Some(vec![RecordEvidenceRef {
                    source: "edge".into(),
                    observed_at: "2026-12-04T09:59:30+01:00".into(),
                }]),
            }],
            coverage: Coverage {
                evaluated: 1,
                required: 1,
            },
            accepted_at: ts("2026-12-04T10:00:01.5Z"),
            service: "orders".into(),
            domain: subject.domain(),
            digest: subject.digest().to_owned(),
        }
    }

    fn subject_descriptor() -> ArtifactDescriptor {
        ArtifactDescriptor {
            media_type: OCI_MANIFEST_MEDIA_TYPE.into(),
            digest: subject().digest().into(),
            size: 421,
            artifact_type: None,
        }
    }

    /// `tests/vectors/record.payload.json`, `record.manifest.json` and the manifest digest in
    /// `record.digest`: regenerate with `PACTO_REGENERATE_GOLDEN=1 cargo test -p pacto-evidence
    /// --lib golden_record` after an intended format change.
    #[test]
    fn golden_record_pins_payload_and_manifest_digest() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
        let record = golden();
        let payload = String::from_utf8(record.to_payload()).unwrap();
        let artifact = record.artifact(&subject_descriptor());
        let manifest = String::from_utf8(artifact.manifest.clone()).unwrap();
        if std::env::var_os("PACTO_REGENERATE_GOLDEN").is_some() {
            std::fs::write(dir.join("record.payload.json"), &payload).unwrap();
            std::fs::write(dir.join("record.manifest.json"), &manifest).unwrap();
            std::fs::write(dir.join("record.digest"), format!("{}\n", artifact.digest)).unwrap();
        }
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        let hint = "run with PACTO_REGENERATE_GOLDEN=1 after an intended change";
        assert_eq!(payload, read("record.payload.json"), "{hint}");
        assert_eq!(manifest, read("record.manifest.json"), "{hint}");
        assert_eq!(artifact.digest, read("record.digest").trim(), "{hint}");
        assert_eq!(artifact.payload_digest, sha256_digest(payload.as_bytes()));
        assert_eq!(
            artifact,
            record.artifact(&subject_descriptor()),
            "deterministic"
        );
        assert_eq!(
            Record::from_payload(payload.as_bytes(), &subject()).unwrap(),
            record
        );
    }

    #[test]
    fn empty_fields_are_omitted() {
        let mut record = golden();
        record.findings.clear();
        record.domain.clear();
        record.digest.clear();
        let payload = String::from_utf8(record.to_payload()).unwrap();
        assert!(payload.ends_with(
            r#""coverage":{"evaluated":1,"required":1},"acceptedAt":"2026-12-04T10:00:01.5Z","service":"orders"}}"#
        ), "{payload}");
        assert!(!payload.contains("findings"));
    }

    fn payload_with(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let mut value: serde_json::Value = serde_json::from_slice(&golden().to_payload()).unwrap();
        edit(&mut value);
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn read_side_validation_names_each_problem() {
        let s = subject();
        let check = |bytes: Vec<u8>, want: &str| {
            let err = Record::from_payload(&bytes, &s)
                .expect_err(want)
                .to_string();
            assert!(err.contains(want), "want {want:?} in {err:?}");
        };
        check(
            payload_with(|v| v["extra"] = 1.into()),
            "unknown field `extra`",
        );
        check(
            payload_with(|v| {
                v["record"]["envelope"]["evidenceSet"]["Observations"][0]["outcome"] =
                    "Nope".into();
            }),
            "record.envelope.evidenceSet.Observations[0]",
        );
        check(
            payload_with(|v| v["schemaVersion"] = "pacto.dev/evidence-record/v2".into()),
            "schemaVersion",
        );
        check(
            payload_with(|v| v["record"]["service"] = "".into()),
            "record.service",
        );
        check(
            payload_with(|v| v["record"]["acceptedAt"] = "0001-01-01T00:00:00Z".into()),
            "record.acceptedAt",
        );
        check(
            payload_with(|v| v["record"]["digest"] = "sha256:00".into()),
            "record.digest",
        );
        check(
            payload_with(|v| v["record"]["domain"] = "elsewhere".into()),
            "record.domain",
        );
        check(
            payload_with(|v| {
                v["record"]["envelope"]["evidenceSet"]["ContractRef"] =
                    "oci://x/y@sha256:00".into();
            }),
            "ContractRef",
        );
        check(
            payload_with(|v| v["record"]["envelope"]["evidenceSet"]["Source"] = "".into()),
            "Source",
        );
        check(
            payload_with(|v| v["record"]["envelope"]["apiVersion"] = "x".into()),
            "apiVersion",
        );
        check(
            payload_with(|v| {
                v["record"].as_object_mut().unwrap().remove("envelope");
            }),
            "record.envelope",
        );
        let mut trailing = golden().to_payload();
        trailing.push(b'}');
        check(trailing, "trailing data");
    }

    #[test]
    fn manifest_checks_name_the_field() {
        let s = subject();
        let manifest = golden().artifact(&subject_descriptor()).manifest;
        assert!(ManifestIn::check(&manifest, &s).is_ok());
        let edit = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
            f(&mut v);
            ManifestIn::check(&serde_json::to_vec(&v).unwrap(), &s)
        };
        let field = |r: Result<ArtifactDescriptor, Malformed>| match r {
            Err(Malformed::Manifest { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(edit(&|v| v["config"]["data"] = serde_json::Value::Null)),
            "config"
        );
        assert_eq!(
            field(edit(&|v| {
                v["config"].as_object_mut().unwrap().remove("data");
            })),
            "config"
        );
        assert_eq!(field(edit(&|v| v["config"]["x"] = 1.into())), "config");
        assert_eq!(
            field(edit(&|v| v["layers"] = serde_json::json!([]))),
            "layers"
        );
        assert_eq!(
            field(edit(&|v| v["layers"][0]["mediaType"] = "x".into())),
            "layers[0].mediaType"
        );
        assert_eq!(
            field(edit(&|v| v["subject"]["digest"] = "sha256:00".into())),
            "subject.digest"
        );
        assert_eq!(
            field(edit(&|v| v["artifactType"] = "x".into())),
            "artifactType"
        );
        // the subject's media type and size are not compared; annotations are tolerated
        assert!(edit(&|v| v["subject"]["size"] = 1.into()).is_ok());
        assert!(edit(&|v| v["annotations"] = serde_json::json!({"a": "b"})).is_ok());
        assert!(matches!(
            edit(&|v| v["layers"][0]["size"] = (MAX_RECORD_BYTES + 1).into()),
            Err(Malformed::PayloadTooLarge { .. })
        ));
    }

    #[test]
    fn html_escapes_are_undone_but_other_escapes_kept() {
        assert_eq!(
            without_html_escapes(r#""a\u003cb\u003e\u0026\\u003c\u2028\n""#),
            r#""a<b>&\\u003c\u2028\n""#
        );
    }

    #[test]
    fn empty_config_descriptor_matches_its_blob() {
        assert_eq!(sha256_digest(EMPTY_CONFIG_BLOB), EMPTY_CONFIG_DIGEST);
        assert!(EMPTY_CONFIG_DESCRIPTOR.contains("\"data\":\"e30=\""));
    }
}
