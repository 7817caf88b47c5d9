//! The revision mirror (docs/design/status.md#revisions-and-the-mirror): a periodic, leader-only pass that
//! re-checks the digest of every tag that already has a PactoRevision and raises
//! `TagOverwritten` once per change of digest (recorded in the revision's
//! `status.observedDigest`); a new revision is created when the content hash changed. A failure
//! becomes one Warning event per Pacto per pass (`ContractUnavailable` when transient, else
//! `ContractInvalid`). The mirror never touches Pacto status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use pacto_api::labels::{LABEL_PACTO, event_reason};
use pacto_api::{Pacto, PactoRevision};
use pacto_proto::resolver::ListRevisionsRequest;
use pacto_runtime::CancellationToken;

use crate::compose::{EventKind, EventSpec};
use crate::context::Context;
use crate::reconcile::apply::publish_events;
use crate::reconcile::revisions::{Creation, create};
use crate::revision::{
    RevisionInput, mirror_failure_message, revision_created_message, revision_name,
    revision_version, tag_overwritten_message,
};

/// A tag that has a revision with a known digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedTag {
    /// The revision recording it (the newest for its `spec.source.oci`).
    pub revision: String,
    /// The digest the mirror last saw (`status.observedDigest`, else `spec.source.digest`).
    pub digest: String,
    /// The revision's content hash, if recorded.
    pub content_hash: Option<String>,
}

/// The OCI reference of `spec.contractRef` the mirror applies to: set, not inline, and not
/// pinned by digest. Returned without `oci://`.
pub fn mirrored_ref(pacto: &Pacto) -> Option<String> {
    let reference = &pacto.spec.contract_ref;
    if reference.inline.as_deref().is_some_and(|i| !i.is_empty()) {
        return None;
    }
    let oci = reference.oci.as_deref()?.trim_start_matches("oci://");
    (!oci.is_empty() && !oci.contains('@')).then(|| oci.to_owned())
}

/// The tag of a resolved reference (`repo:tag`; a `:` before the last `/` is a port).
pub fn tag_of(reference: &str) -> Option<&str> {
    let reference = reference.split('@').next()?;
    let last = reference.rsplit('/').next()?;
    last.split_once(':')
        .map(|(_, tag)| tag)
        .filter(|t| !t.is_empty())
}

/// Indexes `revisions` by tag: per `spec.source.oci` the newest revision wins; revisions
/// without a digest are skipped.
pub fn tracked_tags(revisions: &[PactoRevision]) -> BTreeMap<String, TrackedTag> {
    let mut newest: BTreeMap<String, &PactoRevision> = BTreeMap::new();
    for revision in revisions {
        let Some(oci) = revision.spec.source.oci.as_deref() else {
            continue;
        };
        let replace = newest.get(oci).is_none_or(|current| {
            revision.metadata.creation_timestamp.as_ref().map(|t| t.0)
                > current.metadata.creation_timestamp.as_ref().map(|t| t.0)
        });
        if replace {
            newest.insert(oci.to_owned(), revision);
        }
    }
    newest
        .into_iter()
        .filter_map(|(oci, revision)| {
            let tag = tag_of(&oci)?;
            let status = revision.status.as_ref();
            let digest = status
                .and_then(|s| s.observed_digest.clone())
                .or_else(|| revision.spec.source.digest.clone())
                .filter(|d| !d.is_empty())?;
            Some((
                tag.to_owned(),
                TrackedTag {
                    revision: revision.name_any(),
                    digest,
                    content_hash: status.and_then(|s| s.contract_hash.clone()),
                },
            ))
        })
        .collect()
}

/// One mirror pass over every Pacto visible to `ctx` (all namespaces or `namespace`).
pub async fn pass(ctx: &Context, namespace: Option<&str>) -> Result<(), kube::Error> {
    let api: Api<Pacto> = match namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    for pacto in api.list(&ListParams::default()).await?.items {
        mirror_one(ctx, &pacto).await;
    }
    Ok(())
}

async fn mirror_one(ctx: &Context, pacto: &Pacto) {
    let (Some(reference), Some(namespace)) = (mirrored_ref(pacto), pacto.namespace()) else {
        return;
    };
    let name = pacto.name_any();
    let revisions: Api<PactoRevision> = Api::namespaced(ctx.client.clone(), &namespace);
    let listed = match revisions
        .list(&ListParams::default().labels(&format!("{LABEL_PACTO}={name}")))
        .await
    {
        Ok(list) => list.items,
        Err(error) => {
            tracing::warn!(%error, pacto = %name, "revision mirror: cannot list revisions");
            return;
        }
    };
    let tracked = tracked_tags(&listed);
    if tracked.is_empty() {
        return;
    }
    let request = ListRevisionsRequest {
        namespace: namespace.clone(),
        pacto_name: name.clone(),
        oci: reference.clone(),
        pull_secret_ref: pacto
            .spec
            .contract_ref
            .pull_secret_ref
            .clone()
            .unwrap_or_default(),
        tags: tracked.keys().cloned().collect(),
    };
    let backends = &ctx.backends;
    let answer = backends
        .call(&backends.resolver, &request, |mut c, r| async move {
            c.list_revisions(r).await
        })
        .await;
    let spec_ref = pacto.spec.contract_ref.oci.clone().unwrap_or_default();
    let answer = match answer {
        Ok(answer) => answer,
        Err(status) => {
            let transient = pacto_runtime::grpc::is_transient(&status)
                || status.code() == tonic::Code::DeadlineExceeded;
            let detail = if transient {
                format!("contract-resolver unavailable: {}", status.message())
            } else {
                status.message().to_owned()
            };
            let event = failure_event(transient, &mirror_failure_message(&spec_ref, &detail));
            publish_events(ctx, pacto, &[event]).await;
            return;
        }
    };
    let mut events = Vec::new();
    let mut failed = false;
    for tag in answer.revisions {
        if !tag.error.is_empty() {
            if !failed {
                failed = true;
                events.push(failure_event(
                    tag.transient,
                    &mirror_failure_message(&spec_ref, &tag.error),
                ));
            }
            continue;
        }
        let Some(known) = tracked.get(&tag.tag) else {
            continue;
        };
        if tag.digest.is_empty() || tag.digest == known.digest {
            continue;
        }
        tracing::info!(pacto = %name, tag = %tag.tag, old = %known.digest, new = %tag.digest, "tag force-pushed");
        events.push(EventSpec {
            kind: EventKind::Warning,
            reason: event_reason::TAG_OVERWRITTEN,
            message: tag_overwritten_message(&tag.tag, &known.digest, &tag.digest),
        });
        let patch = Patch::Merge(serde_json::json!({"status": {"observedDigest": tag.digest}}));
        if let Err(error) = revisions
            .patch_status(&known.revision, &PatchParams::default(), &patch)
            .await
        {
            tracing::warn!(%error, revision = %known.revision, "cannot record the observed digest");
        }
        if !tag.content_hash.is_empty() && known.content_hash.as_deref() != Some(&tag.content_hash)
        {
            let version = revision_version(&tag.version).to_owned();
            let new_name = revision_name(&name, &version, &tag.content_hash);
            let uid = pacto.uid().unwrap_or_default();
            let input = RevisionInput {
                pacto_name: &name,
                namespace: &namespace,
                pacto_uid: &uid,
                version: &version,
                service_name: "",
                hash: &tag.content_hash,
                resolved_ref: Some(&tag.resolved_ref),
                digest: Some(&tag.digest),
                spec_oci: None,
                inline: false,
            };
            if create(&revisions, &input).await == Creation::Created {
                events.push(EventSpec {
                    kind: EventKind::Normal,
                    reason: event_reason::REVISION_CREATED,
                    message: revision_created_message(&new_name, &version),
                });
            }
        }
    }
    publish_events(ctx, pacto, &events).await;
}

fn failure_event(transient: bool, message: &str) -> EventSpec {
    EventSpec {
        kind: EventKind::Warning,
        reason: if transient {
            event_reason::CONTRACT_UNAVAILABLE
        } else {
            event_reason::CONTRACT_INVALID
        },
        message: message.to_owned(),
    }
}

/// Runs a pass now and then every `interval`, until `shutdown`. Only a failure to list Pactos
/// is reported (logged).
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        if let Err(error) = pass(&ctx, namespace.as_deref()).await {
            tracing::warn!(%error, "revision mirror: cannot list Pactos");
        }
        ctx.count_mirror_pass();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use pacto_api::{
        ContractRef, PactoRevisionSpec, PactoRevisionStatus, PactoSpec, RevisionSource,
    };

    use super::*;

    fn rev(
        name: &str,
        oci: &str,
        digest: Option<&str>,
        observed: Option<&str>,
        at: i64,
    ) -> PactoRevision {
        let mut r = PactoRevision::new(
            name,
            PactoRevisionSpec {
                version: "1.0.0".into(),
                source: RevisionSource {
                    oci: Some(oci.into()),
                    digest: digest.map(Into::into),
                    inline: None,
                },
                pacto_ref: "p".into(),
                service_name: None,
            },
        );
        r.metadata.creation_timestamp =
            Some(Time(Timestamp::from_second(1_787_000_000 + at).unwrap()));
        r.status = Some(PactoRevisionStatus {
            resolved: true,
            contract_hash: Some(format!("hash-{name}")),
            observed_digest: observed.map(Into::into),
            ..PactoRevisionStatus::default()
        });
        r
    }

    #[test]
    fn tags_and_refs() {
        assert_eq!(tag_of("reg.local:5000/acme/x:1.2.0"), Some("1.2.0"));
        assert_eq!(tag_of("reg.local:5000/acme/x"), None);
        assert_eq!(tag_of("reg/x:1.0@sha256:abc"), Some("1.0"));
        let pacto = |oci: Option<&str>, inline: Option<&str>| {
            Pacto::new(
                "p",
                PactoSpec {
                    contract_ref: ContractRef {
                        oci: oci.map(Into::into),
                        inline: inline.map(Into::into),
                        pull_secret_ref: None,
                    },
                    target: None,
                    overrides: None,
                    check_interval_seconds: None,
                },
            )
        };
        assert_eq!(
            mirrored_ref(&pacto(Some("oci://reg/x:1"), None)).as_deref(),
            Some("reg/x:1")
        );
        assert_eq!(mirrored_ref(&pacto(Some("reg/x@sha256:1"), None)), None);
        assert_eq!(mirrored_ref(&pacto(Some("reg/x"), Some("yaml"))), None);
        assert_eq!(mirrored_ref(&pacto(None, None)), None);
    }

    #[test]
    fn newest_revision_per_ref_wins_and_observed_digest_counts() {
        let tracked = tracked_tags(&[
            rev("old", "reg/x:1.0.0", Some("sha256:a"), None, 0),
            rev("new", "reg/x:1.0.0", Some("sha256:b"), Some("sha256:c"), 10),
            rev("nodigest", "reg/x:2.0.0", None, None, 0),
            rev("untagged", "reg/x", Some("sha256:d"), None, 0),
        ]);
        assert_eq!(tracked.len(), 1);
        let t = &tracked["1.0.0"];
        assert_eq!(t.revision, "new");
        assert_eq!(t.digest, "sha256:c");
        assert_eq!(t.content_hash.as_deref(), Some("hash-new"));
    }
}
