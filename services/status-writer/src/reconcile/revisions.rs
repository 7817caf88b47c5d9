//! Step 2 of a reconcile: the PactoRevision of the resolved contract, created when missing
//! (and its status backfilled), and the tag overwrite this reconcile may be the first to see
//! (docs/design/status.md#tag-overwrites). [`list`], [`record_digest`] and [`create`] are shared
//! with the revision mirror. A `TagOverwritten` is published before the digest is recorded, a
//! `RevisionCreated` as soon as the revision is created, and again (as a no-op replay) by each
//! pass until a status write acknowledges the revision, each keyed by the change it reports, so
//! that a crash loses none and repeats none (docs/design/status.md#exactly-once-events).
//! Revision errors are logged only; they never fail a reconcile.

use std::sync::Arc;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use pacto_api::labels::event_reason;
use pacto_api::{Pacto, PactoRevision, PactoStatus};

use crate::compose::{EventKind, EventSpec};
use crate::context::Context;
use crate::model::{EnsuredRevision, ResolvedContract};
use crate::reconcile::apply::publish_events;
use crate::reconcile::now;
use crate::revision::{
    RevisionInput, TrackedTag, moved_tag, needs_backfill, resolved_status,
    revision_created_message, revision_name, revision_object, revision_selector, revision_version,
    tag_overwritten_message,
};

/// How often a digest is re-recorded after the revision changed for another reason.
const RECORD_ATTEMPTS: usize = 3;

/// What [`create`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creation {
    /// The revision was created (and its status written); its uid.
    Created(String),
    /// A revision of that name exists already.
    Existed,
    /// The API refused (logged).
    Failed,
}

/// What [`record_digest`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// This call recorded the new digest: its caller reports the TagOverwritten.
    Changed,
    /// The revision no longer holds the digest the caller saw: another pass recorded a change
    /// first (and reported it).
    Seen,
    /// The API failed (logged); nothing was recorded, a later pass retries.
    Failed,
}

/// The revisions of Pacto `pacto` (its label, then its exact name in `spec.pactoRef`).
pub async fn list(
    api: &Api<PactoRevision>,
    pacto: &str,
) -> Result<Vec<PactoRevision>, kube::Error> {
    let mut listed = api
        .list(&ListParams::default().labels(&revision_selector(pacto)))
        .await?
        .items;
    listed.retain(|r| r.spec.pacto_ref == pacto);
    Ok(listed)
}

/// Records `digest` as the last digest seen behind `tracked`'s tag (`status.observedDigest`),
/// on condition that the revision is still the version that was read: of two passes that see
/// the same change, exactly one gets [`Recorded::Changed`]. A conflict caused by an unrelated
/// write is retried.
pub async fn record_digest(
    api: &Api<PactoRevision>,
    tracked: &TrackedTag,
    digest: &str,
) -> Recorded {
    let mut resource_version = tracked.resource_version.clone();
    for _ in 0..RECORD_ATTEMPTS {
        let patch = Patch::Merge(serde_json::json!({
            "metadata": {"resourceVersion": resource_version},
            "status": {"observedDigest": digest},
        }));
        match api
            .patch_status(&tracked.revision, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => return Recorded::Changed,
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, revision = %tracked.revision, "cannot record the observed digest");
                return Recorded::Failed;
            }
        }
        // Changed since it was read: by another pass that recorded a digest, or by an
        // unrelated write (a status backfill), after which the same digest is still the last seen.
        let current = match api.get(&tracked.revision).await {
            Ok(current) => current,
            Err(error) => {
                tracing::warn!(%error, revision = %tracked.revision, "cannot read PactoRevision");
                return Recorded::Failed;
            }
        };
        match TrackedTag::of(&current) {
            Some((_, now)) if now.digest == tracked.digest => {
                resource_version = now.resource_version;
            }
            _ => return Recorded::Seen,
        }
    }
    tracing::warn!(revision = %tracked.revision, "the observed digest kept conflicting");
    Recorded::Failed
}

/// Writes the status of a recorded revision (resolved, content hash, creation time).
async fn write_resolved_status(
    api: &Api<PactoRevision>,
    name: &str,
    hash: &str,
) -> Result<(), kube::Error> {
    let status = Patch::Merge(serde_json::json!({ "status": resolved_status(hash, &now()) }));
    api.patch_status(name, &PatchParams::default(), &status)
        .await
        .map(drop)
}

/// Creates the revision described by `input` and, when new, writes its status.
pub async fn create(api: &Api<PactoRevision>, input: &RevisionInput<'_>) -> Creation {
    let object = revision_object(input);
    let name = object.name_any();
    match api.create(&PostParams::default(), &object).await {
        Ok(created) => {
            if let Err(error) = write_resolved_status(api, &name, input.hash).await {
                tracing::warn!(%error, revision = %name, "cannot write PactoRevision status");
            }
            Creation::Created(created.uid().unwrap_or_default())
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Creation::Existed,
        Err(error) => {
            tracing::warn!(%error, revision = %name, "cannot create PactoRevision");
            Creation::Failed
        }
    }
}

/// The occurrence key of a `RevisionCreated`: the revision's uid (a revision deleted and
/// created again is another creation).
pub fn revision_occurrence(uid: &str) -> String {
    format!("revision:{uid}")
}

/// The occurrence key of a `TagOverwritten`: the tracked revision as it was read (its
/// resourceVersion moves with each recorded change) and the new digest.
pub fn tag_occurrence(tracked: &TrackedTag, digest: &str) -> String {
    format!(
        "tag:{}:{}:{digest}",
        tracked.revision,
        tracked.resource_version.as_deref().unwrap_or_default()
    )
}

/// Publishes the `TagOverwritten` of `tracked`'s tag moving to `digest`, then records the digest
/// (docs/design/status.md#tag-overwrites). Publishing first means a crash in between repeats
/// the publish (a no-op replay, same key) instead of losing it; two passes that read the same
/// revision publish one event.
pub async fn report_and_record_digest(
    ctx: &Context,
    pacto: &Pacto,
    api: &Api<PactoRevision>,
    tag: &str,
    tracked: &TrackedTag,
    digest: &str,
) -> Recorded {
    let event = tag_overwritten(tag, &tracked.digest, digest);
    publish_events(ctx, pacto, &[event], Some(&tag_occurrence(tracked, digest))).await;
    record_digest(api, tracked, digest).await
}

/// Publishes the `RevisionCreated` of revision `name` (uid `uid`).
pub async fn report_created(ctx: &Context, pacto: &Pacto, name: &str, version: &str, uid: &str) {
    let event = revision_created(name, version);
    publish_events(ctx, pacto, &[event], Some(&revision_occurrence(uid))).await;
}

/// True when no status write has acknowledged `revision` yet: the persisted status does not
/// name it and was last written no later than the revision was created (both times have
/// one-second granularity, so the same second counts as not acknowledged; a needless publish is
/// a no-op replay). Such a revision's `RevisionCreated` may have been lost to a crash.
pub fn unacknowledged(revision: &PactoRevision, previous: Option<&PactoStatus>) -> bool {
    let name = revision.meta().name.as_deref();
    let Some(previous) = previous else {
        return true;
    };
    if previous.current_revision.as_deref() == name {
        return false;
    }
    match (
        &previous.last_reconciled_at,
        &revision.meta().creation_timestamp,
    ) {
        (Some(written), Some(created)) => created.0 >= written.0,
        _ => true,
    }
}

/// The `TagOverwritten` event of a recorded digest change.
pub fn tag_overwritten(tag: &str, old: &str, new: &str) -> EventSpec {
    EventSpec {
        kind: EventKind::Warning,
        reason: event_reason::TAG_OVERWRITTEN,
        message: tag_overwritten_message(tag, old, new),
    }
}

/// The `RevisionCreated` event of a created revision.
pub fn revision_created(name: &str, version: &str) -> EventSpec {
    EventSpec {
        kind: EventKind::Normal,
        reason: event_reason::REVISION_CREATED,
        message: revision_created_message(name, version),
    }
}

/// What the watched revision index tells a pass (docs/design/status.md#the-revision-index).
enum Indexed {
    /// The revision exists, owned by this Pacto, with its status complete and its creation
    /// acknowledged, and the tag it tracks has not moved: the live list would lead the pass to
    /// do nothing but name it.
    Settled,
    /// The revision does not exist yet and no tag moved: the pass creates it, and the Pacto's
    /// revisions as indexed stand for the live list.
    Missing(Arc<Vec<PactoRevision>>),
    /// Anything else (not synced yet, a status to backfill, a creation not yet acknowledged, a
    /// moved tag, another owner): the pass lists from the API server.
    Unsure,
}

/// What the index says of revision `name` of `pacto` in `namespace`.
fn indexed(
    ctx: &Context,
    pacto: &Pacto,
    previous: Option<&PactoStatus>,
    namespace: &str,
    resolved: &ResolvedContract,
    name: &str,
) -> Indexed {
    let Some(revisions) = ctx.revisions.revisions(namespace, &pacto.name_any()) else {
        return Indexed::Unsure;
    };
    let moved = moved_tag(
        pacto,
        revisions.as_slice(),
        resolved.resolved_ref.as_deref(),
        resolved.digest.as_deref(),
    )
    .is_some();
    if moved {
        return Indexed::Unsure;
    }
    let Some(existing) = revisions
        .iter()
        .find(|r| r.meta().name.as_deref() == Some(name))
    else {
        return Indexed::Missing(revisions);
    };
    // A revision left by a deleted Pacto of the same name is not this Pacto's.
    let owned = pacto.uid().is_some_and(|uid| {
        existing
            .owner_references()
            .iter()
            .any(|o| o.kind == "Pacto" && o.uid == uid)
    });
    if owned && !unacknowledged(existing, previous) && !needs_backfill(existing.status.as_ref()) {
        Indexed::Settled
    } else {
        Indexed::Unsure
    }
}

/// Step 2: reports a tag overwrite this reconcile sees first, then ensures the revision of the
/// resolved contract: created if missing (reporting `RevisionCreated` at once), an existing
/// revision whose status lacks what a new one records backfilled. `None` when the API failed
/// (logged).
pub async fn ensure(
    ctx: &Context,
    pacto: &Pacto,
    previous: Option<&PactoStatus>,
    namespace: &str,
    resolved: &ResolvedContract,
) -> Option<EnsuredRevision> {
    let pacto_name = pacto.name_any();
    let version = revision_version(&resolved.contract.service.version).to_owned();
    let name = revision_name(&pacto_name, &version, &resolved.content_hash);
    let api: Api<PactoRevision> = Api::namespaced(ctx.client.clone(), namespace);
    let listed = match indexed(ctx, pacto, previous, namespace, resolved, &name) {
        Indexed::Settled => return Some(EnsuredRevision { name }),
        Indexed::Missing(revisions) => revisions,
        Indexed::Unsure => match list(&api, &pacto_name).await {
            Ok(listed) => Arc::new(listed),
            Err(error) => {
                tracing::warn!(%error, pacto = %pacto_name, "cannot list PactoRevisions");
                return None;
            }
        },
    };
    if let (Some((tag, tracked)), Some(digest)) = (
        moved_tag(
            pacto,
            listed.as_slice(),
            resolved.resolved_ref.as_deref(),
            resolved.digest.as_deref(),
        ),
        resolved.digest.as_deref(),
    ) && report_and_record_digest(ctx, pacto, &api, tag, &tracked, digest).await
        == Recorded::Changed
    {
        tracing::info!(pacto = %pacto_name, tag, old = %tracked.digest, new = %digest, "tag force-pushed (seen by a reconcile)");
    }
    let existing = listed
        .iter()
        .find(|r| r.meta().name.as_deref() == Some(&name));
    let ensured = if let Some(existing) = existing {
        if unacknowledged(existing, previous) {
            let uid = existing.uid().unwrap_or_default();
            report_created(ctx, pacto, &name, &version, &uid).await;
        }
        if needs_backfill(existing.status.as_ref())
            && let Err(error) = write_resolved_status(&api, &name, &resolved.content_hash).await
        {
            tracing::warn!(%error, revision = %name, "cannot backfill PactoRevision status");
        }
        true
    } else {
        let uid = pacto.uid().unwrap_or_default();
        let input = RevisionInput {
            pacto_name: &pacto_name,
            namespace,
            pacto_uid: &uid,
            version: &version,
            service_name: &resolved.contract.service.name,
            hash: &resolved.content_hash,
            resolved_ref: resolved.resolved_ref.as_deref(),
            digest: resolved.digest.as_deref(),
            spec_oci: pacto.spec.contract_ref.oci.as_deref(),
            inline: pacto
                .spec
                .contract_ref
                .inline
                .as_deref()
                .is_some_and(|i| !i.is_empty()),
        };
        match create(&api, &input).await {
            Creation::Created(uid) => {
                report_created(ctx, pacto, &name, &version, &uid).await;
                true
            }
            // Created by a concurrent pass, which may have died before reporting it: reported
            // here too (a no-op replay when it did), and its status is written unless the
            // revision read shows it complete.
            Creation::Existed => {
                let complete = match api.get(&name).await {
                    Ok(existing) => {
                        let uid = existing.uid().unwrap_or_default();
                        report_created(ctx, pacto, &name, &version, &uid).await;
                        !needs_backfill(existing.status.as_ref())
                    }
                    Err(error) => {
                        tracing::warn!(%error, revision = %name, "cannot read PactoRevision");
                        false
                    }
                };
                if !complete
                    && let Err(error) =
                        write_resolved_status(&api, &name, &resolved.content_hash).await
                {
                    tracing::warn!(%error, revision = %name, "cannot write PactoRevision status");
                }
                true
            }
            Creation::Failed => false,
        }
    };
    ensured.then_some(EnsuredRevision { name })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn revision(name: &str, created: Option<i64>) -> PactoRevision {
        let mut revision: PactoRevision = serde_json::from_value(serde_json::json!({
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "PactoRevision",
            "metadata": {"name": name},
            "spec": {"pactoRef": "orders", "version": "1.0.0", "source": {}},
        }))
        .unwrap();
        revision.metadata.creation_timestamp =
            created.map(|s| Time(Timestamp::from_second(s).unwrap()));
        revision
    }

    fn status(written: Option<i64>, current: Option<&str>) -> PactoStatus {
        PactoStatus {
            last_reconciled_at: written.map(|s| Time(Timestamp::from_second(s).unwrap())),
            current_revision: current.map(str::to_owned),
            ..PactoStatus::default()
        }
    }

    #[test]
    fn a_revision_is_acknowledged_by_a_later_status_write_or_by_being_named() {
        let rev = revision("orders-1-0-0-abcdef0", Some(100));
        // Never written, or written without a time: not acknowledged.
        assert!(unacknowledged(&rev, None));
        assert!(unacknowledged(&rev, Some(&status(None, None))));
        // Written before the revision existed, or in the same second: not acknowledged.
        assert!(unacknowledged(&rev, Some(&status(Some(99), None))));
        assert!(unacknowledged(&rev, Some(&status(Some(100), None))));
        // Written after it was created, or naming it: acknowledged.
        assert!(!unacknowledged(&rev, Some(&status(Some(101), None))));
        assert!(!unacknowledged(
            &rev,
            Some(&status(Some(100), Some("orders-1-0-0-abcdef0")))
        ));
        // An old revision the Pacto comes back to is not reported again.
        let old = revision("orders-0-9-0-1234567", Some(10));
        assert!(!unacknowledged(
            &old,
            Some(&status(Some(100), Some("orders-1-0-0-abcdef0")))
        ));
    }

    #[test]
    fn occurrence_keys_name_the_change() {
        assert_eq!(revision_occurrence("u-1"), "revision:u-1");
        let tracked = TrackedTag {
            revision: "orders-1-0-0-abcdef0".into(),
            resource_version: Some("7".into()),
            digest: "sha256:old".into(),
            content_hash: None,
        };
        assert_eq!(
            tag_occurrence(&tracked, "sha256:new"),
            "tag:orders-1-0-0-abcdef0:7:sha256:new"
        );
    }
}
