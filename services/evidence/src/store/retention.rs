//! Retention (docs/design/evidence-store.md#retention): which records of a subject the store
//! keeps, by age and by count, and the size arithmetic that bounds the tag-schema index.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::store::record::Record;

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
        // the latest record of each target: later acceptedAt, ties to the higher sequence
        // (the /targets rule). The target key escapes both parts so that neither holds a `/`:
        // the pair is the key, without building its text for every record on every commit.
        let mut latest: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, (_, r)) in records.iter().enumerate() {
            let e = &r.envelope;
            let key = (e.producer.id.as_str(), e.evidence_set.subject.name.as_str());
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
        let mut current = vec![false; records.len()];
        for i in latest.into_values() {
            current[i] = true;
        }
        let newest = records.iter().map(|(_, r)| instant(r)).max();
        let limit = self.max_age.as_ref().map(Duration::as_nanos);
        let young = |r: &Record| match (newest, limit) {
            (Some(newest), Some(limit)) => {
                u128::try_from(newest - instant(r)).unwrap_or(0) <= limit
            }
            _ => true,
        };
        let mut candidates: Vec<usize> = (0..records.len())
            .filter(|&i| current[i] || young(records[i].1))
            .collect();
        candidates.sort_by_key(|&i| {
            let (digest, r) = records[i];
            (
                Reverse(current[i]),
                Reverse(instant(r)),
                Reverse(r.envelope.sequence),
                digest,
            )
        });
        let mut kept = vec![false; records.len()];
        for i in candidates.into_iter().take(self.max_records()) {
            kept[i] = true;
        }
        records
            .iter()
            .enumerate()
            .filter(|(i, _)| !kept[*i])
            .map(|(_, (digest, _))| (*digest).to_owned())
            .collect()
    }
}

/// A record's place in the retention order: the latest of its target first, then the newest
/// (later `acceptedAt`, then higher sequence), ties by digest. Ascending in a `BTreeSet`.
type OrderKey = (Reverse<bool>, Reverse<i128>, Reverse<u64>, String);

fn instant(r: &Record) -> i128 {
    let (seconds, nanos) = r.accepted_at.unix_parts();
    i128::from(seconds) * 1_000_000_000 + i128::from(nanos)
}

/// The records a subject holds, kept in retention order, so that a commit finds what its new
/// record pushes out in O(log n) instead of ordering every record again
/// (docs/design/evidence-store.md#retention). Built from a held set (what [`Retention::expired`]
/// kept); [`Kept::add`] gives the same answer as [`Retention::expired`] over the held records
/// plus the new one (test `kept_matches_the_full_computation`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Kept {
    order: std::collections::BTreeSet<OrderKey>,
    /// Per digest: its key and target.
    keys: HashMap<String, (OrderKey, (String, String))>,
    /// Per target (producer id, subject name): its latest record's digest.
    latest: HashMap<(String, String), String>,
    /// The newest `acceptedAt` (the newest record is the first latest: never dropped).
    newest: Option<i128>,
}

impl Kept {
    /// The index of `records` (a held set: one retention's kept records).
    pub fn build(records: &[(&str, &Record)]) -> Self {
        let mut kept = Self::default();
        for (digest, r) in records {
            kept.insert(digest, r);
        }
        kept
    }

    fn target(r: &Record) -> (String, String) {
        let e = &r.envelope;
        (e.producer.id.clone(), e.evidence_set.subject.name.clone())
    }

    /// Adds one record, keeping each target's latest flag right; drops nothing.
    fn insert(&mut self, digest: &str, r: &Record) {
        let target = Self::target(r);
        let (at, sequence) = (instant(r), r.envelope.sequence);
        let wins = match self.latest.get(&target).and_then(|d| self.keys.get(d)) {
            Some(((_, Reverse(i), Reverse(s), _), _)) => (at, sequence) > (*i, *s),
            None => true,
        };
        if wins && let Some(old) = self.latest.insert(target.clone(), digest.to_owned()) {
            // the previous latest of the target is an ordinary record now
            if let Some((key, t)) = self.keys.remove(&old) {
                self.order.remove(&key);
                let demoted = (Reverse(false), key.1, key.2, key.3);
                self.order.insert(demoted.clone());
                self.keys.insert(old, (demoted, t));
            }
        }
        let key = (
            Reverse(wins),
            Reverse(at),
            Reverse(sequence),
            digest.to_owned(),
        );
        self.order.insert(key.clone());
        self.keys.insert(digest.to_owned(), (key, target));
        self.newest = Some(self.newest.map_or(at, |n| n.max(at)));
    }

    /// Drops the last record in retention order; returns its digest.
    fn pop(&mut self) -> Option<String> {
        let key = self.order.pop_last()?;
        let digest = key.3;
        if let Some((_, target)) = self.keys.remove(&digest)
            && self.latest.get(&target) == Some(&digest)
        {
            self.latest.remove(&target);
        }
        Some(digest)
    }

    /// Adds the new record `digest` and applies `retention`: returns the digests that leave.
    pub fn add(&mut self, digest: &str, r: &Record, retention: &Retention) -> HashSet<String> {
        self.insert(digest, r);
        let mut gone = HashSet::new();
        if let (Some(limit), Some(newest)) = (retention.max_age, self.newest) {
            let limit = limit.as_nanos();
            // ordinary records come last, oldest last: pop while the last one is too old
            while let Some((Reverse(false), Reverse(at), _, _)) = self.order.last() {
                if u128::try_from(newest - at).unwrap_or(0) <= limit {
                    break;
                }
                gone.extend(self.pop());
            }
        }
        while self.order.len() > retention.max_records() {
            gone.extend(self.pop());
        }
        gone
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

    /// The commit's incremental retention against the full computation, record by record, over
    /// a history with several producers and targets, times out of order, equal times and
    /// out-of-order sequences.
    #[test]
    fn kept_matches_the_full_computation() {
        let base = Timestamp::parse("2026-12-04T10:00:00Z")
            .unwrap()
            .unix_parts()
            .0;
        for retention in [
            Retention {
                max_age: Some(Duration::from_secs(100)),
                max_records: 5,
            },
            Retention {
                max_age: None,
                max_records: 3,
            },
            Retention {
                max_age: Some(Duration::from_secs(30)),
                max_records: 50,
            },
        ] {
            let mut held: Vec<(String, Record)> = Vec::new();
            let mut kept = Kept::default();
            // a small linear congruential sequence: deterministic, irregular
            let mut x = 7u64;
            for i in 0..300u64 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let producer = ["a", "b"][(x >> 60) as usize % 2];
                let target = format!("t{}", (x >> 50) % 7);
                let seconds =
                    i64::try_from(i * 10).unwrap() - i64::try_from((x >> 40) % 40).unwrap();
                let accepted = Timestamp::from_unix(base + seconds, 0)
                    .unwrap()
                    .to_rfc3339_nano();
                let sequence = (x >> 20) % 1000;
                let r = record(producer, &target, sequence, &accepted);
                let digest = format!("sha256:{i:04}");
                let mut all: Vec<(&str, &Record)> =
                    held.iter().map(|(d, r)| (d.as_str(), r)).collect();
                all.push((&digest, &r));
                let want = retention.expired(&all);
                let got = kept.add(&digest, &r, &retention);
                assert_eq!(got, want, "{retention:?}, record {i}");
                held.push((digest, r));
                held.retain(|(d, _)| !want.contains(d));
            }
            // and an index built from the held set answers the same
            let mut rebuilt = Kept::build(
                &held
                    .iter()
                    .map(|(d, r)| (d.as_str(), r))
                    .collect::<Vec<_>>(),
            );
            let r = record("a", "t1", 5000, "2026-12-04T11:00:00Z");
            let mut all: Vec<(&str, &Record)> = held.iter().map(|(d, r)| (d.as_str(), r)).collect();
            all.push(("sha256:new", &r));
            assert_eq!(
                rebuilt.add("sha256:new", &r, &retention),
                retention.expired(&all)
            );
        }
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
