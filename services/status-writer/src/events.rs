//! Events on a Pacto, written as core/v1 Events with the aggregation rules of Kubernetes' own
//! recorders (docs/design/status.md#events): one Event object per identity (the Pacto, type,
//! reason, message and reporting component), whose `count` and `lastTimestamp` move when that
//! identity recurs. The object's name is derived from the identity, so a restarted or newly
//! elected status-writer finds the same object instead of starting a second one.
//!
//! An emission may carry an **occurrence key** naming the one change it reports (for example the
//! persisted status it moves away from). The key is kept on the Event as an annotation, and an
//! emission whose key is the one the Event already records is a replay (a pass repeated after a
//! crash or a failed write), not a recurrence: the Event is left as it is. That is what lets a
//! pass publish its events *before* the write that makes them stop recurring, and so lose none
//! to a crash in between (docs/design/status.md#exactly-once-events).
//!
//! The pure part (identity, name, the new object, the recurrence patch) is unit tested here; the
//! write ([`record`]) is create, and on `AlreadyExists` get + a merge patch guarded by the
//! object's resourceVersion (a concurrent recurrence retries instead of losing a count).

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use pacto_api::Pacto;
use sha2::{Digest, Sha256};

use crate::compose::{EVENT_MESSAGE_LIMIT, EventKind, EventSpec, truncate_message};

/// The component that reports every event (`source.component`, `reportingComponent`, and the
/// `From` column of `kubectl describe`).
pub const EVENT_COMPONENT: &str = "pacto-controller";
/// The action of every event (what the status-writer was doing).
pub const EVENT_ACTION: &str = "Reconcile";
/// The longest object name Kubernetes accepts (a DNS subdomain).
const NAME_LIMIT: usize = 253;
/// The annotation holding the occurrence key of the last occurrence an Event counted.
pub const OCCURRENCE_ANNOTATION: &str = "pacto.trianalab.io/occurrence";
/// Hex digits of the identity hash in an event's name.
const HASH_LEN: usize = 16;
/// Create/get/patch rounds before a recurrence gives up (each lost round is a concurrent write
/// of the same event, or the event expiring in between).
const ATTEMPTS: usize = 4;

/// An event could not be written (events are best effort: the caller logs it).
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The Pacto has no name, namespace or uid (not read from the API server).
    #[error("the Pacto has no {0}")]
    Incomplete(&'static str),
    /// The API server refused a create, get or patch.
    #[error("{step} of event {name}")]
    Api {
        /// `create`, `get` or `patch`.
        step: &'static str,
        /// The event's name.
        name: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// An object of that name exists but records something else (a hash collision, or not ours).
    #[error("event {0} exists with another identity; left alone")]
    Foreign(String),
    /// Every attempt met a concurrent write or an expiry.
    #[error("event {0} kept changing under {ATTEMPTS} attempts")]
    Contended(String),
}

/// What makes two emissions the same event: the same involved object (by uid, so a Pacto
/// deleted and created again starts afresh), type, reason, message and reporting component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The involved object's uid.
    pub uid: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace (also the event's).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// The reason.
    pub reason: String,
    /// The message.
    pub message: String,
    /// The reporting component.
    pub component: String,
}

impl Identity {
    /// The identity of `spec` on `pacto`, reported by [`EVENT_COMPONENT`].
    pub fn of(pacto: &Pacto, spec: &EventSpec) -> Result<Self, EventError> {
        let meta = pacto.meta();
        Ok(Self {
            uid: meta.uid.clone().ok_or(EventError::Incomplete("uid"))?,
            kind: Pacto::kind(&()).into_owned(),
            namespace: meta
                .namespace
                .clone()
                .ok_or(EventError::Incomplete("namespace"))?,
            name: meta.name.clone().ok_or(EventError::Incomplete("name"))?,
            type_: match spec.kind {
                EventKind::Normal => "Normal",
                EventKind::Warning => "Warning",
            },
            reason: spec.reason.to_owned(),
            // The API server rejects a longer message (docs/design/status.md#size-limits).
            message: truncate_message(spec.message.clone(), EVENT_MESSAGE_LIMIT),
            component: EVENT_COMPONENT.to_owned(),
        })
    }

    /// SHA-256 over the fields (each length-prefixed, so no two identities share an input),
    /// as [`HASH_LEN`] hex digits.
    pub fn hash(&self) -> String {
        let mut hasher = Sha256::new();
        for field in [
            self.uid.as_str(),
            &self.kind,
            &self.namespace,
            &self.name,
            self.type_,
            &self.reason,
            &self.message,
            &self.component,
        ] {
            hasher.update((field.len() as u64).to_be_bytes());
            hasher.update(field.as_bytes());
        }
        let mut hex = hex::encode(hasher.finalize());
        hex.truncate(HASH_LEN);
        hex
    }

    /// The event's object name: `<object name>.<hash>`. The object name is a DNS subdomain;
    /// when the whole would pass [`NAME_LIMIT`] the object name is cut (and stripped of a
    /// trailing `-` or `.`, which may not end a label), never the hash.
    pub fn event_name(&self) -> String {
        let hash = self.hash();
        let room = NAME_LIMIT - hash.len() - 1;
        let prefix = if self.name.len() > room {
            // DNS subdomains are ASCII: any byte index is a char boundary.
            self.name[..room].trim_end_matches(['-', '.'])
        } else {
            self.name.as_str()
        };
        format!("{prefix}.{hash}")
    }

    /// True when `event` records this identity.
    pub fn matches(&self, event: &Event) -> bool {
        let object = &event.involved_object;
        object.uid.as_deref() == Some(self.uid.as_str())
            && object.kind.as_deref() == Some(self.kind.as_str())
            && object.name.as_deref() == Some(self.name.as_str())
            && object.namespace.as_deref() == Some(self.namespace.as_str())
            && event.type_.as_deref() == Some(self.type_)
            && event.reason.as_deref() == Some(self.reason.as_str())
            && event.message.as_deref() == Some(self.message.as_str())
            && event.reporting_component.as_deref() == Some(self.component.as_str())
    }
}

/// The first occurrence of `identity` about `involved` (the Pacto's reference with its
/// resourceVersion), reported by `instance`, at `now`: count 1, first = last = now, and the
/// occurrence key when there is one.
pub fn first_occurrence(
    identity: &Identity,
    involved: ObjectReference,
    instance: Option<&str>,
    occurrence: Option<&str>,
    now: Timestamp,
) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(identity.event_name()),
            namespace: Some(identity.namespace.clone()),
            annotations: occurrence.map(|key| {
                std::iter::once((OCCURRENCE_ANNOTATION.to_owned(), key.to_owned())).collect()
            }),
            ..ObjectMeta::default()
        },
        involved_object: involved,
        type_: Some(identity.type_.to_owned()),
        reason: Some(identity.reason.clone()),
        message: Some(identity.message.clone()),
        action: Some(EVENT_ACTION.to_owned()),
        source: Some(EventSource {
            component: Some(identity.component.clone()),
            host: None,
        }),
        reporting_component: Some(identity.component.clone()),
        reporting_instance: instance.map(str::to_owned),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        ..Event::default()
    }
}

/// The occurrence key `event` last counted.
pub fn recorded_occurrence(event: &Event) -> Option<&str> {
    event
        .metadata
        .annotations
        .as_ref()?
        .get(OCCURRENCE_ANNOTATION)
        .map(String::as_str)
}

/// True when an emission with key `occurrence` is a replay of what `existing` already counted.
/// An emission without a key is never a replay.
pub fn is_replay(existing: &Event, occurrence: Option<&str>) -> bool {
    occurrence.is_some() && recorded_occurrence(existing) == occurrence
}

/// The merge patch that records one more occurrence of `existing` at `now`: count + 1 (an
/// object without a count has been seen once), lastTimestamp = now, the occurrence key when
/// there is one (an emission without a key leaves the recorded key alone), and the
/// resourceVersion read, so that a concurrent recurrence makes this patch fail with a conflict
/// instead of being overwritten.
pub fn recurrence(existing: &Event, occurrence: Option<&str>, now: Timestamp) -> serde_json::Value {
    let count = existing.count.unwrap_or(1).max(1).saturating_add(1);
    let mut metadata = serde_json::json!({ "resourceVersion": existing.metadata.resource_version });
    if let Some(key) = occurrence {
        metadata["annotations"] = serde_json::json!({ OCCURRENCE_ANNOTATION: key });
    }
    serde_json::json!({
        "metadata": metadata,
        "count": count,
        "lastTimestamp": Time(now),
    })
}

/// How [`record`] wrote the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// A new Event object (the first occurrence, or the previous one expired).
    Created,
    /// An existing Event's count, now this value.
    Counted(i32),
    /// The Event already counted this occurrence (same key): left as it was.
    Replayed,
}

/// The Pacto's reference with its uid and resourceVersion.
pub fn involved_object(pacto: &Pacto) -> ObjectReference {
    let mut reference = pacto.object_ref(&());
    reference
        .resource_version
        .clone_from(&pacto.meta().resource_version);
    reference
}

fn api_error(step: &'static str, name: &str, source: kube::Error) -> EventError {
    EventError::Api {
        step,
        name: name.to_owned(),
        source: Box::new(source),
    }
}

/// Records one occurrence of `spec` on `pacto`: creates the Event, or counts one more
/// occurrence of the Event that already records the same identity, unless that Event already
/// counted this very occurrence (`occurrence`, see the module documentation).
pub async fn record(
    client: &Client,
    pacto: &Pacto,
    spec: &EventSpec,
    occurrence: Option<&str>,
    instance: Option<&str>,
) -> Result<Recorded, EventError> {
    let identity = Identity::of(pacto, spec)?;
    let name = identity.event_name();
    let api: Api<Event> = Api::namespaced(client.clone(), &identity.namespace);
    for _ in 0..ATTEMPTS {
        let now = Timestamp::now();
        let event = first_occurrence(&identity, involved_object(pacto), instance, occurrence, now);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => return Ok(Recorded::Created),
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(error) => return Err(api_error("create", &name, error)),
        }
        let existing = match api.get(&name).await {
            Ok(existing) => existing,
            // Expired since the create: create it again.
            Err(kube::Error::Api(status)) if status.is_not_found() => continue,
            Err(error) => return Err(api_error("get", &name, error)),
        };
        if !identity.matches(&existing) {
            return Err(EventError::Foreign(name));
        }
        if is_replay(&existing, occurrence) {
            return Ok(Recorded::Replayed);
        }
        let patch = recurrence(&existing, occurrence, now);
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => return Ok(Recorded::Counted(patched.count.unwrap_or_default())),
            // A concurrent recurrence (conflict) or an expiry (not found): start over.
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_not_found() => {}
            Err(error) => return Err(api_error("patch", &name, error)),
        }
    }
    Err(EventError::Contended(name))
}

#[cfg(test)]
mod tests {
    use pacto_api::testing::PactoBuilder;

    use super::*;

    fn pacto(name: &str) -> Pacto {
        let mut pacto = PactoBuilder::inline(name, "pactoVersion: \"2.0\"\n").build();
        pacto.metadata.namespace = Some("team".into());
        pacto.metadata.uid = Some("uid-1".into());
        pacto.metadata.resource_version = Some("42".into());
        pacto
    }

    fn spec(kind: EventKind, reason: &'static str, message: &str) -> EventSpec {
        EventSpec {
            kind,
            reason,
            message: message.into(),
        }
    }

    fn invalid() -> EventSpec {
        spec(
            EventKind::Warning,
            "ContractInvalid",
            "Contract validation failed: x",
        )
    }

    #[test]
    fn the_same_emission_has_the_same_identity_and_name() {
        let a = Identity::of(&pacto("orders"), &invalid()).unwrap();
        let b = Identity::of(&pacto("orders"), &invalid()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.event_name(), b.event_name());
        assert_eq!(a.kind, "Pacto");
        assert_eq!(a.component, EVENT_COMPONENT);
        let name = a.event_name();
        let (prefix, hash) = name.split_once('.').unwrap();
        assert_eq!(prefix, "orders");
        assert_eq!(hash.len(), HASH_LEN);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn a_message_over_the_api_servers_limit_is_cut_and_stays_one_identity() {
        let long = format!("Contract validation failed: {}", "é".repeat(3000));
        let event = spec(EventKind::Warning, "ContractInvalid", &long);
        let identity = Identity::of(&pacto("orders"), &event).unwrap();
        assert!(identity.message.len() <= EVENT_MESSAGE_LIMIT);
        assert!(identity.message.ends_with(crate::compose::TRUNCATED_MARKER));
        assert!(
            identity
                .message
                .starts_with("Contract validation failed: é")
        );
        let again = Identity::of(&pacto("orders"), &event).unwrap();
        assert_eq!(identity.event_name(), again.event_name());
        let written = first_occurrence(
            &identity,
            ObjectReference::default(),
            None,
            None,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(written.message.as_deref(), Some(identity.message.as_str()));
    }

    #[test]
    fn any_identity_field_makes_another_event() {
        let base = Identity::of(&pacto("orders"), &invalid()).unwrap();
        let mut other_uid = pacto("orders");
        other_uid.metadata.uid = Some("uid-2".into());
        let variants = [
            Identity::of(&other_uid, &invalid()).unwrap(),
            Identity::of(
                &pacto("orders"),
                &spec(
                    EventKind::Warning,
                    "ContractInvalid",
                    "Contract validation failed: y",
                ),
            )
            .unwrap(),
            Identity::of(
                &pacto("orders"),
                &spec(
                    EventKind::Warning,
                    "ContractUnavailable",
                    "Contract validation failed: x",
                ),
            )
            .unwrap(),
            Identity::of(
                &pacto("orders"),
                &spec(
                    EventKind::Normal,
                    "ContractInvalid",
                    "Contract validation failed: x",
                ),
            )
            .unwrap(),
        ];
        for variant in &variants {
            assert_ne!(variant.event_name(), base.event_name(), "{variant:?}");
        }
        // Two RevisionCreated for two revisions are two events.
        let revision = |name: &str| {
            Identity::of(
                &pacto("orders"),
                &spec(
                    EventKind::Normal,
                    "RevisionCreated",
                    &format!("Created revision {name} for contract v1"),
                ),
            )
            .unwrap()
            .event_name()
        };
        assert_ne!(
            revision("orders-1-0-0-aaaaaaa"),
            revision("orders-1-1-0-bbbbbbb")
        );
    }

    #[test]
    fn length_prefixes_keep_shifted_fields_apart() {
        let mut a = Identity::of(&pacto("orders"), &invalid()).unwrap();
        let mut b = a.clone();
        a.reason = "ab".into();
        a.message = "c".into();
        b.reason = "a".into();
        b.message = "bc".into();
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn a_long_name_is_cut_but_keeps_its_hash() {
        // 253 characters with a `-` as the 236th, the last that fits before `.<hash>`.
        let long = format!("{}-{}", "a".repeat(235), "b".repeat(17));
        assert_eq!(long.len(), NAME_LIMIT);
        let identity = Identity::of(&pacto(&long), &invalid()).unwrap();
        let name = identity.event_name();
        assert!(name.len() <= NAME_LIMIT, "{}", name.len());
        assert!(name.ends_with(&format!(".{}", identity.hash())), "{name}");
        // The cut fell right after the `-`: stripped, so no label ends with one.
        assert_eq!(name, format!("{}.{}", "a".repeat(235), identity.hash()));
        assert!(!name.contains("-."));
        // Two long names that differ only past the cut still get two events.
        let other = format!("{}-{}", "a".repeat(235), "c".repeat(17));
        let other = Identity::of(&pacto(&other), &invalid()).unwrap();
        assert_ne!(other.event_name(), name);
        // A name that fits is kept whole.
        let fits = "x".repeat(NAME_LIMIT - HASH_LEN - 1);
        let fits = Identity::of(&pacto(&fits), &invalid())
            .unwrap()
            .event_name();
        assert_eq!(fits.len(), NAME_LIMIT);
    }

    #[test]
    fn a_pacto_not_read_from_the_api_has_no_identity() {
        let mut bare = pacto("orders");
        bare.metadata.uid = None;
        assert!(matches!(
            Identity::of(&bare, &invalid()),
            Err(EventError::Incomplete("uid"))
        ));
    }

    #[test]
    fn the_first_occurrence_is_a_complete_core_event() {
        let pacto = pacto("orders");
        let identity = Identity::of(&pacto, &invalid()).unwrap();
        let now: Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let event = first_occurrence(&identity, involved_object(&pacto), Some("pod-0"), None, now);
        assert_eq!(event.metadata.name, Some(identity.event_name()));
        assert_eq!(event.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(event.count, Some(1));
        assert_eq!(event.first_timestamp, Some(Time(now)));
        assert_eq!(event.last_timestamp, Some(Time(now)));
        assert_eq!(event.event_time, None);
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("ContractInvalid"));
        assert_eq!(event.action.as_deref(), Some(EVENT_ACTION));
        assert_eq!(
            event.source.as_ref().and_then(|s| s.component.as_deref()),
            Some(EVENT_COMPONENT)
        );
        assert_eq!(event.reporting_component.as_deref(), Some(EVENT_COMPONENT));
        assert_eq!(event.reporting_instance.as_deref(), Some("pod-0"));
        let object = &event.involved_object;
        assert_eq!(object.kind.as_deref(), Some("Pacto"));
        assert_eq!(object.uid.as_deref(), Some("uid-1"));
        assert_eq!(object.resource_version.as_deref(), Some("42"));
        assert_eq!(object.namespace.as_deref(), Some("team"));
        assert!(object.api_version.is_some());
        assert!(identity.matches(&event));
    }

    #[test]
    fn another_identity_does_not_match() {
        let pacto = pacto("orders");
        let identity = Identity::of(&pacto, &invalid()).unwrap();
        let now = Timestamp::UNIX_EPOCH;
        let mut event = first_occurrence(&identity, involved_object(&pacto), None, None, now);
        event.message = Some("something else".into());
        assert!(!identity.matches(&event));
        let mut event = first_occurrence(&identity, involved_object(&pacto), None, None, now);
        event.involved_object.uid = Some("uid-2".into());
        assert!(!identity.matches(&event));
    }

    #[test]
    fn a_recurrence_counts_one_more_and_moves_last_timestamp_only() {
        let pacto = pacto("orders");
        let identity = Identity::of(&pacto, &invalid()).unwrap();
        let first: Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let later: Timestamp = "2026-12-03T10:05:00Z".parse().unwrap();
        let mut existing = first_occurrence(&identity, involved_object(&pacto), None, None, first);
        existing.metadata.resource_version = Some("7".into());
        let patch = recurrence(&existing, None, later);
        assert_eq!(
            patch,
            serde_json::json!({
                "metadata": { "resourceVersion": "7" },
                "count": 2,
                "lastTimestamp": "2026-12-03T10:05:00Z",
            })
        );
        existing.count = Some(5);
        assert_eq!(recurrence(&existing, None, later)["count"], 6);
        // An Event written without a count (by another recorder) has been seen once.
        existing.count = None;
        assert_eq!(recurrence(&existing, None, later)["count"], 2);
    }

    #[test]
    fn an_occurrence_key_makes_a_replay_a_no_op_and_a_new_key_a_recurrence() {
        let pacto = pacto("orders");
        let identity = Identity::of(&pacto, &invalid()).unwrap();
        let now = Timestamp::UNIX_EPOCH;
        let mut existing = first_occurrence(
            &identity,
            involved_object(&pacto),
            None,
            Some("status:a"),
            now,
        );
        assert_eq!(recorded_occurrence(&existing), Some("status:a"));
        // The same change again (a pass repeated after a crash): a replay.
        assert!(is_replay(&existing, Some("status:a")));
        // Another change with the same identity: a recurrence, which records its key.
        assert!(!is_replay(&existing, Some("status:b")));
        existing.metadata.resource_version = Some("3".into());
        let patch = recurrence(&existing, Some("status:b"), now);
        assert_eq!(
            patch["metadata"]["annotations"][OCCURRENCE_ANNOTATION],
            "status:b"
        );
        // Without a key nothing is a replay, and the recorded key stays.
        assert!(!is_replay(&existing, None));
        assert!(
            recurrence(&existing, None, now)["metadata"]
                .get("annotations")
                .is_none()
        );
        // An Event written without a key is never replayed into.
        let bare = first_occurrence(&identity, involved_object(&pacto), None, None, now);
        assert!(!is_replay(&bare, Some("status:a")));
    }
}
