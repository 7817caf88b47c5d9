//! Step 2 of a reconcile: the PactoRevision of the resolved contract, created when missing
//! (and its status backfilled), and the tag overwrite this reconcile may be the first to see
//! (docs/design/status.md#tag-overwrites). [`list`], [`record_digest`] and [`create`] are shared
//! with the revision mirror. Events are published as soon as what they report happened, before
//! and independently of the status write. Revision errors are logged only; they never fail a
//! reconcile.

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use pacto_api::labels::event_reason;
use pacto_api::{Pacto, PactoRevision};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creation {
    /// The revision was created (and its status written).
    Created,
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
        Ok(_) => {
            if let Err(error) = write_resolved_status(api, &name, input.hash).await {
                tracing::warn!(%error, revision = %name, "cannot write PactoRevision status");
            }
            Creation::Created
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Creation::Existed,
        Err(error) => {
            tracing::warn!(%error, revision = %name, "cannot create PactoRevision");
            Creation::Failed
        }
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

/// Step 2: reports a tag overwrite this reconcile sees first, then ensures the revision of the
/// resolved contract: created if missing (reporting `RevisionCreated` at once), an existing
/// revision whose status lacks what a new one records backfilled. `None` when the API failed
/// (logged).
pub async fn ensure(
    ctx: &Context,
    pacto: &Pacto,
    namespace: &str,
    resolved: &ResolvedContract,
) -> Option<EnsuredRevision> {
    let api: Api<PactoRevision> = Api::namespaced(ctx.client.clone(), namespace);
    let pacto_name = pacto.name_any();
    let version = revision_version(&resolved.contract.service.version).to_owned();
    let name = revision_name(&pacto_name, &version, &resolved.content_hash);
    let listed = match list(&api, &pacto_name).await {
        Ok(listed) => listed,
        Err(error) => {
            tracing::warn!(%error, pacto = %pacto_name, "cannot list PactoRevisions");
            return None;
        }
    };
    let mut events = Vec::new();
    if let (Some((tag, tracked)), Some(digest)) = (
        moved_tag(
            pacto,
            &listed,
            resolved.resolved_ref.as_deref(),
            resolved.digest.as_deref(),
        ),
        resolved.digest.as_deref(),
    ) && record_digest(&api, &tracked, digest).await == Recorded::Changed
    {
        tracing::info!(pacto = %pacto_name, tag, old = %tracked.digest, new = %digest, "tag force-pushed (seen by a reconcile)");
        events.push(tag_overwritten(tag, &tracked.digest, digest));
    }
    let existing = listed
        .iter()
        .find(|r| r.meta().name.as_deref() == Some(&name));
    let ensured = if let Some(existing) = existing {
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
            Creation::Created => {
                events.push(revision_created(&name, &version));
                true
            }
            // Created by a concurrent pass (which reported it): its status is written (again)
            // all the same.
            Creation::Existed => {
                if let Err(error) = write_resolved_status(&api, &name, &resolved.content_hash).await
                {
                    tracing::warn!(%error, revision = %name, "cannot write PactoRevision status");
                }
                true
            }
            Creation::Failed => false,
        }
    };
    publish_events(ctx, pacto, &events).await;
    ensured.then_some(EnsuredRevision { name })
}
