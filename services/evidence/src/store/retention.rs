//! Retention (docs/design/evidence-store.md#retention): which records of a subject the store
//! keeps, by age and by count, and the size arithmetic that bounds the tag-schema index.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::store::record::Record;
use crate::store::targets::target_key;

/// Records kept per subject unless configured otherwise.
pub const DEFAULT_MAX_RECORDS_PER_SUBJECT: usize = 1000;
/// The age limit unless configured otherwise: 30 days.
pub const DEFAULT_MAX_RECORD_AGE: Duration = Duration::from_hours(30 * 24);
/// The most records a subject may keep whatever is configured: their descriptors take at most
/// about 2.2 MB of a tag-schema index, well under [`MAX_TAG_INDEX_BYTES`].
pub const MAX_RECORDS_PER_SUBJECT: usize = 10_000;
/// The largest referrers tag-schema index the store writes: 4 MiB, the manifest size CNCF
/// distribution (docker-registry 2.8 and 3) accepts; a larger `PUT` is refused
/// ("http: request body too large"), which is how an unbounded index failed for good.
pub const MAX_TAG_INDEX_BYTES: u64 = 4 * 1024 * 1024;

/// What a subject keeps (docs/design/evidence-store.md#retention).
///
/// A record is kept when it is among the `max_records` first of its subject, ordered by: the
/// latest record of each target first (what `/targets` serves, and each producer's highest
/// sequence), then the newest; and when it was accepted at most `max_age` before the subject's
/// newest record, unless it is the latest record of its target. Age is measured against the
/// newest record, not a clock: a subject that receives nothing keeps what it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The age limit; `None` for none.
    pub max_age: Option<Duration>,
    /// Records kept per subject, clamped to `1..=MAX_RECORDS_PER_SUBJECT`.
    pub max_records: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_age: Some(DEFAULT_MAX_RECORD_AGE),
            max_records: DEFAULT_MAX_RECORDS_PER_SUBJECT,
        }
    }
}

impl Retention {
    /// The record count in force (`max_records` clamped to `1..=MAX_RECORDS_PER_SUBJECT`).
    pub fn max_records(&self) -> usize {
        self.max_records.clamp(1, MAX_RECORDS_PER_SUBJECT)
    }

    /// The digests among `records` (digest, record) of one subject that this retention drops.
    pub(crate) fn expired(&self, records: &[(&str, &Record)]) -> HashSet<String> {
        let instant = |r: &Record| -> i128 {
            let (seconds, nanos) = r.accepted_at.unix_parts();
            i128::from(seconds) * 1_000_000_000 + i128::from(nanos)
        };
        // the latest record of each target: later acceptedAt, ties to the higher sequence
        // (the /targets rule)
        let mut latest: HashMap<String, usize> = HashMap::new();
        for (i, (_, r)) in records.iter().enumerate() {
            let e = &r.envelope;
            let key = target_key(&e.producer.id, &e.evidence_set.subject.name);
            match latest.get(&key) {
                Some(&j) => {
                    let current = records[j].1;
                    let wins =
                        (instant(r), e.sequence) > (instant(current), current.envelope.sequence);
                    if wins {
                        latest.insert(key, i);
                    }
                }
                None => {
                    latest.insert(key, i);
                }
            }
        }
        let current: HashSet<usize> = latest.into_values().collect();
        let newest = records.iter().map(|(_, r)| instant(r)).max();
        let limit = self.max_age.as_ref().map(Duration::as_nanos);
        let young = |r: &Record| match (newest, limit) {
            (Some(newest), Some(limit)) => {
                u128::try_from(newest - instant(r)).unwrap_or(0) <= limit
            }
            _ => true,
        };
        let mut candidates: Vec<usize> = (0..records.len())
            .filter(|i| current.contains(i) || young(records[*i].1))
            .collect();
        candidates.sort_by_key(|&i| {
            let (digest, r) = records[i];
            (
                Reverse(current.contains(&i)),
                Reverse(instant(r)),
                Reverse(r.envelope.sequence),
                digest,
            )
        });
        let kept: HashSet<usize> = candidates.into_iter().take(self.max_records()).collect();
        records
            .iter()
            .enumerate()
            .filter(|(i, _)| !kept.contains(i))
            .map(|(_, (digest, _))| (*digest).to_owned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::record::{MAX_RECORD_MANIFEST_BYTES, RECORD_ARTIFACT_TYPE};
    use crate::{Envelope, Producer, SignedEvidenceSet};
    use pacto_engine::{Coverage, SubjectRef, Timestamp};
    use pacto_oci::{ArtifactClient, ArtifactDescriptor, MAX_REFERRERS_PAGE_BYTES};

    fn record(producer: &str, target: &str, sequence: u64, accepted: &str) -> Record {
        let set = SignedEvidenceSet {
            subject: SubjectRef::new("service", target),
            contract_ref: String::new(),
            source: "edge".into(),
            observed_at: Timestamp::zero(),
            observations: Some(Vec::new()),
        };
        Record {
            envelope: Envelope::new(
                format!("id-{sequence}"),
                Producer {
                    id: producer.into(),
                    version: "1".into(),
                    key_id: "k".into(),
                },
                sequence,
                Timestamp::zero(),
                Timestamp::zero(),
                set,
            ),
            compliance: "Compliant".into(),
            findings: Vec::new(),
            coverage: Coverage::default(),
            accepted_at: Timestamp::parse(accepted).unwrap(),
            service: "s".into(),
            domain: String::new(),
            digest: String::new(),
        }
    }

    fn expired(retention: Retention, records: &[(&str, Record)]) -> Vec<String> {
        let refs: Vec<(&str, &Record)> = records.iter().map(|(d, r)| (*d, r)).collect();
        let mut out: Vec<String> = retention.expired(&refs).into_iter().collect();
        out.sort();
        out
    }

    #[test]
    fn count_keeps_the_latest_of_each_target_then_the_newest() {
        let records = [
            ("a1", record("p", "a", 1, "2026-12-01T00:00:01Z")),
            ("a2", record("p", "a", 2, "2026-12-01T00:00:02Z")),
            ("a3", record("p", "a", 3, "2026-12-01T00:00:03Z")),
            ("b0", record("p", "b", 0, "2026-11-01T00:00:00Z")),
        ];
        let three = Retention {
            max_age: None,
            max_records: 3,
        };
        // b0 is old but the latest of b; a1 is the oldest of a's history
        assert_eq!(expired(three, &records), ["a1"]);
        let two = Retention {
            max_records: 2,
            ..three
        };
        assert_eq!(expired(two, &records), ["a1", "a2"]);
        // a count of 0 keeps one record: the newest of the latest per target
        let zero = Retention {
            max_records: 0,
            ..three
        };
        assert_eq!(expired(zero, &records), ["a1", "a2", "b0"]);
        assert_eq!(expired(Retention::default(), &[]), Vec::<String>::new());
    }

    #[test]
    fn age_is_measured_from_the_newest_record_and_spares_the_latest_of_a_target() {
        let records = [
            ("old-a", record("p", "a", 1, "2026-09-01T00:00:00Z")),
            ("old-b", record("p", "b", 2, "2026-09-01T00:00:00Z")),
            ("edge-a", record("p", "a", 3, "2026-10-04T10:00:00Z")),
            ("new-a", record("p", "a", 4, "2026-11-03T10:00:00Z")),
        ];
        let thirty_days = Retention::default();
        // edge-a is exactly 30 days before new-a: kept; old-a is older and superseded
        assert_eq!(expired(thirty_days, &records), ["old-a"]);
        let none = Retention {
            max_age: None,
            ..thirty_days
        };
        assert!(expired(none, &records).is_empty());
        // targets are per producer
        let other = [
            ("p-a", record("p", "a", 1, "2026-09-01T00:00:00Z")),
            ("q-a", record("q", "a", 2, "2026-12-01T00:00:00Z")),
        ];
        assert!(expired(thirty_days, &other).is_empty());
    }

    #[test]
    fn ties_go_to_the_higher_sequence() {
        let records = [
            ("s1", record("p", "a", 1, "2026-12-01T00:00:00Z")),
            ("s2", record("p", "a", 2, "2026-12-01T00:00:00Z")),
        ];
        let one = Retention {
            max_age: None,
            max_records: 1,
        };
        assert_eq!(expired(one, &records), ["s1"]);
    }

    /// The size arithmetic behind the bound: one record descriptor in a referrers index is at
    /// most ~220 bytes, so an unbounded index crossed CNCF distribution's 4 MiB manifest limit
    /// near 19,000 records and our 16 MiB read limit near 76,000 (the "about 70,000" the old
    /// documentation gave). The most records a subject may keep fit in under 60% of 4 MiB,
    /// leaving the rest to other tools' referrers.
    #[test]
    fn the_largest_retained_history_fits_the_registry_manifest_limit() {
        let descriptor = |i: usize| ArtifactDescriptor {
            media_type: pacto_oci::OCI_MANIFEST_MEDIA_TYPE.to_owned(),
            digest: format!("sha256:{i:064x}"),
            // the largest manifest size a listed record may have
            size: MAX_RECORD_MANIFEST_BYTES,
            artifact_type: Some(RECORD_ARTIFACT_TYPE.to_owned()),
        };
        let one = ArtifactClient::referrers_index_bytes(&[descriptor(0)]).len();
        let empty = ArtifactClient::referrers_index_bytes(&[]).len();
        let per_record = (one - empty) as u64 + 1;
        assert!(per_record <= 220, "{per_record} bytes per descriptor");
        let list: Vec<ArtifactDescriptor> = (0..MAX_RECORDS_PER_SUBJECT).map(descriptor).collect();
        let bytes = ArtifactClient::referrers_index_bytes(&list).len() as u64;
        assert!(
            bytes * 10 < MAX_TAG_INDEX_BYTES * 6,
            "{bytes} bytes for {MAX_RECORDS_PER_SUBJECT} records"
        );
        // without a bound: where the write limit and the read limit were crossed
        let write_limit = MAX_TAG_INDEX_BYTES / per_record;
        let read_limit = MAX_REFERRERS_PAGE_BYTES / per_record;
        assert!((19_000..20_000).contains(&write_limit), "{write_limit}");
        assert!((76_000..78_000).contains(&read_limit), "{read_limit}");
        assert!(Retention::default().max_records() <= MAX_RECORDS_PER_SUBJECT);
        let huge = Retention {
            max_records: usize::MAX,
            ..Retention::default()
        };
        assert_eq!(huge.max_records(), MAX_RECORDS_PER_SUBJECT);
    }
}
