//! The `/targets` projection (docs/design/evidence-store.md#targets): the latest record per
//! target, as the strict v2 DTO `pacto.dev/evidence-source/v2`.

use std::collections::BTreeMap;

use pacto_engine::{Coverage, RecordFinding, Timestamp};

use crate::gojson::Json;
use crate::store::scan::{Health, Scan, StoredRecord};

/// The DTO's `schemaVersion`.
pub const TARGETS_SCHEMA_VERSION: &str = "pacto.dev/evidence-source/v2";
/// At most this many targets are listed (`truncated` beyond).
pub const MAX_TARGETS: usize = 1000;
/// At most this many findings per target are listed (`truncated` beyond).
pub const MAX_TARGET_FINDINGS: usize = 500;

/// One target: the latest record of a (producer, runtime subject) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// `EvidenceSet.Subject.name`.
    pub subject: String,
    /// The resolved contract's service name.
    pub service: String,
    /// The subject's domain (omitted when empty).
    pub domain: String,
    /// The contract digest (omitted when empty).
    pub digest: String,
    /// The producer id.
    pub producer: String,
    /// The key id (omitted when empty).
    pub producer_key_id: String,
    /// The derived compliance.
    pub compliance: String,
    /// The coverage.
    pub coverage: Coverage,
    /// The findings, at most [`MAX_TARGET_FINDINGS`] (omitted when empty).
    pub findings: Vec<RecordFinding>,
    /// The ContractRef (omitted when empty).
    pub contract_ref: String,
    /// `ObservedAt`.
    pub evidence_at: Timestamp,
    /// When the server accepted the record.
    pub accepted_at: Timestamp,
}

/// The `/targets` body.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetsDto {
    /// The generation time (written in UTC).
    pub generated_at: Timestamp,
    /// The scan's health (never `unavailable` in a 200 answer: see [`crate::store::HealthStatus`]).
    pub health: Health,
    /// Whether a bound cut targets or findings.
    pub truncated: bool,
    /// Ordered by target key.
    pub targets: Vec<Target>,
}

/// `%` → `%25`, then `/` → `%2F`.
fn escape(part: &str) -> String {
    part.replace('%', "%25").replace('/', "%2F")
}

/// The target key: `escape(producer) + "/external/" + escape(subject name)`.
pub fn target_key(producer: &str, subject_name: &str) -> String {
    format!("{}/external/{}", escape(producer), escape(subject_name))
}

fn instant(t: &Timestamp) -> (i64, u32) {
    t.unix_parts()
}

/// Whether `candidate` wins over `current`: the later `acceptedAt`, ties to the higher
/// sequence.
fn wins(candidate: &StoredRecord, current: &StoredRecord) -> bool {
    let (a, b) = (
        instant(&candidate.record.accepted_at),
        instant(&current.record.accepted_at),
    );
    a > b || (a == b && candidate.record.envelope.sequence > current.record.envelope.sequence)
}

impl Scan {
    /// The `/targets` projection at `now` ([`targets`]).
    pub fn targets(&self, now: Timestamp) -> TargetsDto {
        targets(self, now)
    }
}

/// The projection of a scan at `now` (docs/design/evidence-store.md#targets).
pub fn targets(scan: &Scan, now: Timestamp) -> TargetsDto {
    let mut latest: BTreeMap<String, &StoredRecord> = BTreeMap::new();
    for stored in &scan.records {
        let envelope = &stored.record.envelope;
        let key = target_key(&envelope.producer.id, &envelope.evidence_set.subject.name);
        match latest.get(&key) {
            Some(current) if !wins(stored, current) => {}
            _ => {
                latest.insert(key, stored);
            }
        }
    }
    let mut truncated = latest.len() > MAX_TARGETS;
    let targets = latest
        .into_values()
        .take(MAX_TARGETS)
        .map(|stored| {
            let r = &stored.record;
            let e = &r.envelope;
            if r.findings.len() > MAX_TARGET_FINDINGS {
                truncated = true;
            }
            Target {
                subject: e.evidence_set.subject.name.clone(),
                service: r.service.clone(),
                domain: r.domain.clone(),
                digest: r.digest.clone(),
                producer: e.producer.id.clone(),
                producer_key_id: e.producer.key_id.clone(),
                compliance: r.compliance.clone(),
                coverage: r.coverage,
                findings: r
                    .findings
                    .iter()
                    .take(MAX_TARGET_FINDINGS)
                    .cloned()
                    .collect(),
                contract_ref: e.evidence_set.contract_ref.clone(),
                evidence_at: e.evidence_set.observed_at,
                accepted_at: r.accepted_at,
            }
        })
        .collect();
    TargetsDto {
        generated_at: now,
        health: scan.health.clone(),
        truncated,
        targets,
    }
}

fn utc(t: &Timestamp) -> String {
    let (secs, nanos) = t.unix_parts();
    Timestamp::from_unix(secs, nanos)
        .unwrap_or(*t)
        .to_rfc3339_nano()
}

impl Target {
    fn tree(&self) -> Json {
        let mut fields = vec![
            ("subject".to_owned(), Json::str(self.subject.clone())),
            ("service".to_owned(), Json::str(self.service.clone())),
        ];
        let optional = |fields: &mut Vec<(String, Json)>, key: &str, value: &str| {
            if !value.is_empty() {
                fields.push((key.to_owned(), Json::str(value)));
            }
        };
        optional(&mut fields, "domain", &self.domain);
        optional(&mut fields, "digest", &self.digest);
        fields.push(("producer".to_owned(), Json::str(self.producer.clone())));
        optional(&mut fields, "producerKeyId", &self.producer_key_id);
        fields.push(("compliance".to_owned(), Json::str(self.compliance.clone())));
        fields.push((
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
        if !self.findings.is_empty() {
            fields.push((
                "findings".to_owned(),
                Json::Raw(crate::gojson::compact(
                    &serde_json::to_string(&self.findings).unwrap_or_else(|_| "[]".to_owned()),
                )),
            ));
        }
        optional(&mut fields, "contractRef", &self.contract_ref);
        fields.push((
            "evidenceAt".to_owned(),
            Json::str(self.evidence_at.to_rfc3339_nano()),
        ));
        fields.push((
            "acceptedAt".to_owned(),
            Json::str(self.accepted_at.to_rfc3339_nano()),
        ));
        Json::Object(fields)
    }
}

impl TargetsDto {
    /// The body as Go's `json.Marshal` writes the struct (exact keys, struct order, omitempty,
    /// HTML escaping, `generatedAt` in UTC). Go's `json.Encoder` adds a trailing newline; that
    /// is the HTTP layer's.
    pub fn to_json(&self) -> String {
        let health = Json::Object(vec![
            ("status".to_owned(), Json::str(self.health.status.as_str())),
            (
                "subjects".to_owned(),
                Json::Number(self.health.subjects.to_string()),
            ),
            (
                "failedSubjects".to_owned(),
                Json::Number(self.health.failed_subjects.to_string()),
            ),
            (
                "invalidArtifacts".to_owned(),
                Json::Number(self.health.invalid_artifacts.to_string()),
            ),
        ]);
        Json::Object(vec![
            (
                "schemaVersion".to_owned(),
                Json::str(TARGETS_SCHEMA_VERSION),
            ),
            ("generatedAt".to_owned(), Json::str(utc(&self.generated_at))),
            ("health".to_owned(), health),
            ("truncated".to_owned(), Json::Bool(self.truncated)),
            (
                "targets".to_owned(),
                Json::Array(self.targets.iter().map(Target::tree).collect()),
            ),
        ])
        .to_text()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::envelope::{Envelope, Producer, SignedEvidenceSet};
    use crate::store::record::Record;
    use crate::store::scan::HealthStatus;
    use crate::store::subject::Subject;
    use pacto_engine::{RecordSubject, Severity, SubjectRef};

    const SUBJECT: &str = "oci://r.example/acme/orders@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn ts(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    fn stored(
        producer: &str,
        target: &str,
        seq: u64,
        accepted: &str,
        findings: usize,
    ) -> StoredRecord {
        let subject = Subject::parse(SUBJECT).unwrap();
        let envelope = Envelope::new(
            format!("{producer}-{seq}"),
            Producer {
                id: producer.into(),
                version: String::new(),
                key_id: if producer == "nokey" {
                    String::new()
                } else {
                    "k1".into()
                },
            },
            seq,
            ts("2026-12-04T10:00:00Z"),
            Timestamp::zero(),
            SignedEvidenceSet {
                subject: SubjectRef::new("service", target),
                contract_ref: subject.reference(),
                source: "edge".into(),
                observed_at: ts("2026-12-04T09:59:30.5+02:00"),
                observations: None,
            },
        );
        let finding = RecordFinding {
            code: "EVIDENCE_MISSING".into(),
            severity: Severity::Unknown,
            category: "Inconclusive".into(),
            subject: RecordSubject {
                kind: "interface".into(),
                name: "api".into(),
            },
            contract_path: "interfaces[name=api]".into(),
            message: "m".into(),
            evidence_refs: None,
        };
        StoredRecord {
            digest: format!("sha256:{seq}"),
            record: Arc::new(Record {
                envelope,
                compliance: "Unknown".into(),
                findings: vec![finding; findings],
                coverage: Coverage {
                    evaluated: 0,
                    required: 1,
                },
                accepted_at: ts(accepted),
                service: "orders".into(),
                domain: subject.domain(),
                digest: subject.digest().into(),
            }),
            subject,
        }
    }

    fn scan(records: Vec<StoredRecord>) -> Scan {
        Scan {
            health: Health {
                status: HealthStatus::Ready,
                subjects: 1,
                failed_subjects: 0,
                invalid_artifacts: 0,
            },
            records,
            invalid: Vec::new(),
            failed: Vec::new(),
            foreign: 0,
            expired: 0,
            modes: Vec::new(),
            requests: 0,
            drift: Vec::new(),
        }
    }

    #[test]
    fn dto_has_exactly_the_v2_keys_in_struct_order() {
        let dto = targets(
            &scan(vec![stored(
                "edge",
                "shop/orders",
                1,
                "2026-12-04T10:00:01Z",
                1,
            )]),
            ts("2026-12-04T12:00:00.25+01:00"),
        );
        assert_eq!(
            dto.to_json(),
            concat!(
                r#"{"schemaVersion":"pacto.dev/evidence-source/v2","generatedAt":"2026-12-04T11:00:00.25Z","#,
                r#""health":{"status":"ready","subjects":1,"failedSubjects":0,"invalidArtifacts":0},"#,
                r#""truncated":false,"targets":[{"subject":"shop/orders","service":"orders","#,
                r#""domain":"r.example/acme","digest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","#,
                r#""producer":"edge","producerKeyId":"k1","compliance":"Unknown","coverage":{"evaluated":0,"required":1},"#,
                r#""findings":[{"Code":"EVIDENCE_MISSING","Severity":"unknown","Category":"Inconclusive","Subject":{"Kind":"interface","Name":"api"},"ContractPath":"interfaces[name=api]","Message":"m","EvidenceRefs":null}],"#,
                r#""contractRef":"oci://r.example/acme/orders@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","#,
                r#""evidenceAt":"2026-12-04T09:59:30.5+02:00","acceptedAt":"2026-12-04T10:00:01Z"}]}"#
            )
        );
        let empty = targets(&scan(Vec::new()), ts("2026-12-04T12:00:00Z"));
        assert!(
            empty
                .to_json()
                .ends_with(r#""truncated":false,"targets":[]}"#)
        );
    }

    #[test]
    fn empty_optional_fields_are_omitted() {
        let mut r = stored("nokey", "t", 1, "2026-12-04T10:00:01Z", 0);
        let record = Arc::make_mut(&mut r.record);
        record.domain.clear();
        record.digest.clear();
        record.envelope.evidence_set.contract_ref.clear();
        let text = targets(&scan(vec![r]), ts("2026-12-04T12:00:00Z")).to_json();
        for key in [
            "domain",
            "digest",
            "producerKeyId",
            "findings",
            "contractRef",
        ] {
            assert!(!text.contains(&format!("\"{key}\"")), "{key} in {text}");
        }
    }

    #[test]
    fn latest_wins_by_accepted_at_then_sequence_sorted_by_key() {
        let dto = targets(
            &scan(vec![
                stored("edge", "b", 1, "2026-12-04T10:00:05Z", 0),
                stored("edge", "b", 2, "2026-12-04T10:00:04Z", 0),
                stored("edge", "a", 3, "2026-12-04T10:00:00Z", 0),
                stored("edge", "a", 4, "2026-12-04T11:00:00+01:00", 0),
                stored("a/x", "z", 5, "2026-12-04T10:00:00Z", 0),
            ]),
            ts("2026-12-04T12:00:00Z"),
        );
        let got: Vec<(String, u64)> = dto
            .targets
            .iter()
            .map(|t| (t.subject.clone(), t.accepted_at.unix_parts().0 as u64 % 100))
            .collect();
        assert_eq!(got.len(), 3);
        let order: Vec<&str> = dto.targets.iter().map(|t| t.producer.as_str()).collect();
        assert_eq!(order, ["a/x", "edge", "edge"], "a%2Fx sorts before edge");
        assert_eq!(dto.targets[1].subject, "a");
        assert_eq!(dto.targets[2].subject, "b");
        // the same instant: the higher sequence (4) wins
        let winners: Vec<String> = dto
            .targets
            .iter()
            .map(|t| t.accepted_at.to_rfc3339_nano())
            .collect();
        assert_eq!(
            winners,
            [
                "2026-12-04T10:00:00Z",
                "2026-12-04T11:00:00+01:00",
                "2026-12-04T10:00:05Z"
            ]
        );
    }

    #[test]
    fn bounds_truncate() {
        let many: Vec<StoredRecord> = (0..=MAX_TARGETS as u64)
            .map(|i| stored("edge", &format!("t{i:05}"), i, "2026-12-04T10:00:00Z", 0))
            .collect();
        let dto = targets(&scan(many), ts("2026-12-04T12:00:00Z"));
        assert!(dto.truncated);
        assert_eq!(dto.targets.len(), MAX_TARGETS);
        let dto = targets(
            &scan(vec![stored(
                "edge",
                "t",
                1,
                "2026-12-04T10:00:00Z",
                MAX_TARGET_FINDINGS + 1,
            )]),
            ts("2026-12-04T12:00:00Z"),
        );
        assert!(dto.truncated);
        assert_eq!(dto.targets[0].findings.len(), MAX_TARGET_FINDINGS);
        let dto = targets(
            &scan(vec![stored(
                "edge",
                "t",
                1,
                "2026-12-04T10:00:00Z",
                MAX_TARGET_FINDINGS,
            )]),
            ts("2026-12-04T12:00:00Z"),
        );
        assert!(!dto.truncated);
    }

    #[test]
    fn keys_escape_percent_then_slash() {
        assert_eq!(target_key("a/b%", "x/%2F"), "a%2Fb%25/external/x%2F%252F");
    }
}
