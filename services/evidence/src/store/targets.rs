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
    use super::*;

    #[test]
    fn keys_escape_percent_then_slash() {
        assert_eq!(target_key("a/b%", "x/%2F"), "a%2Fb%25/external/x%2F%252F");
    }
}
