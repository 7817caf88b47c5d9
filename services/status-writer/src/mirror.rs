//! The revision mirror (docs/design/status.md#revisions-and-the-mirror): a periodic, leader-only
//! pass that re-checks the digest of every tag that already has a PactoRevision and raises
//! `TagOverwritten` once per change of digest, unless a reconcile saw and recorded that change
//! first (docs/design/status.md#tag-overwrites); a new revision is created when the content hash
//! changed. A failure becomes one Warning event per Pacto per pass (`ContractUnavailable` when
//! transient, else `ContractInvalid`). The mirror never touches Pacto status.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use metrics::counter;
use pacto_api::labels::event_reason;
use pacto_api::{Pacto, PactoRevision};
use pacto_proto::resolver::ListRevisionsRequest;
use pacto_runtime::CancellationToken;

use crate::compose::{EventKind, EventSpec};
use crate::context::Context;
use crate::metrics::MIRROR_PASSES_TOTAL;
use crate::reconcile::apply::publish_events;
use crate::reconcile::revisions::{
    Creation, Recorded, create, list, report_and_record_digest, report_created,
};
use crate::revision::{
    RevisionInput, mirror_failure_message, mirrored_ref, revision_name, revision_version,
    tracked_tags,
};

/// Pactos per page of the mirror's list: a pass holds one page of whole objects at a time,
/// never the whole fleet (docs/design/status.md#what-the-caches-keep).
const LIST_PAGE: u32 = 500;

/// One mirror pass over every Pacto visible to `ctx` (all namespaces or `namespace`) whose
/// namespace is in scope.
pub async fn pass(ctx: &Context, namespace: Option<&str>) -> Result<(), kube::Error> {
    let api: Api<Pacto> = match namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let started = Instant::now();
    for pacto in mirrored(ctx, &api).await? {
        mirror_one(ctx, &pacto, pass_age(started)).await;
    }
    Ok(())
}

/// The Pactos in scope whose tag the mirror re-checks, listed page by page and kept trimmed
/// (no status, no managed fields): the list completes before the first slow resolver call, so
/// no continue token can expire during a pass.
async fn mirrored(ctx: &Context, api: &Api<Pacto>) -> Result<Vec<Pacto>, kube::Error> {
    let mut kept = Vec::new();
    let mut params = ListParams::default().limit(LIST_PAGE);
    loop {
        let page = api.list(&params).await?;
        kept.extend(page.items.into_iter().filter_map(|mut pacto| {
            let wanted = mirrored_ref(&pacto).is_some()
                && pacto.namespace().is_some_and(|ns| ctx.scope.admits(&ns));
            wanted.then(|| {
                crate::cached::trim_pacto_for_mirror(&mut pacto);
                pacto
            })
        }));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(kept),
        }
    }
}

/// The max age of the mirror's ListRevisions calls: the age of the pass, rounded up to whole
/// seconds. Every answer the resolver gave during this pass is young enough, so each tracked tag
/// costs one registry request per pass however many Pactos track it, and an answer from before
/// the pass (at most a second older than it) never stands in for this pass's check
/// (docs/design/status.md#revisions-and-the-mirror).
fn pass_age(started: Instant) -> u32 {
    let elapsed = started.elapsed();
    let whole = elapsed.as_secs() + u64::from(elapsed.subsec_nanos() > 0);
    u32::try_from(whole).unwrap_or(u32::MAX)
}

async fn mirror_one(ctx: &Context, pacto: &Pacto, max_age_seconds: u32) {
    let (Some(reference), Some(namespace)) = (mirrored_ref(pacto), pacto.namespace()) else {
        return;
    };
    let name = pacto.name_any();
    let revisions: Api<PactoRevision> = Api::namespaced(ctx.client.clone(), &namespace);
    let listed = match list(&revisions, &name).await {
        Ok(listed) => listed,
        Err(error) => {
            tracing::warn!(%error, pacto = %name, "revision mirror: cannot list revisions");
            return;
        }
    };
    let tracked = tracked_tags(&listed, &reference);
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
        max_age_seconds,
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
            publish_events(ctx, pacto, &[event], None).await;
            return;
        }
    };
    let mut failure = None;
    for tag in answer.revisions {
        if !tag.error.is_empty() {
            failure.get_or_insert_with(|| {
                failure_event(
                    tag.transient,
                    &mirror_failure_message(&spec_ref, &tag.error),
                )
            });
            continue;
        }
        let Some(known) = tracked.get(&tag.tag) else {
            continue;
        };
        if tag.digest.is_empty() || tag.digest == known.digest {
            continue;
        }
        // Reported and recorded once per change, by whichever of the mirror and a reconcile sees
        // it first (docs/design/status.md#tag-overwrites).
        if report_and_record_digest(ctx, pacto, &revisions, &tag.tag, known, &tag.digest).await
            != Recorded::Changed
        {
            continue;
        }
        tracing::info!(pacto = %name, tag = %tag.tag, old = %known.digest, new = %tag.digest, "tag force-pushed");
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
                service_name: &tag.service_name,
                hash: &tag.content_hash,
                resolved_ref: Some(&tag.resolved_ref),
                digest: Some(&tag.digest),
                spec_oci: None,
                inline: false,
            };
            if let Creation::Created(uid) = create(&revisions, &input).await {
                report_created(ctx, pacto, &new_name, &version, &uid).await;
            }
        }
    }
    if let Some(event) = failure {
        publish_events(ctx, pacto, &[event], None).await;
    }
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
/// is reported (logged). A pass in progress is dropped at once when `shutdown` fires (a lost
/// Lease, docs/design/status.md#leader-election): no write of it starts afterwards.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            result = pass(&ctx, namespace.as_deref()) => {
                if let Err(error) = result {
                    tracing::warn!(%error, "revision mirror: cannot list Pactos");
                }
            }
        }
        ctx.count_mirror_pass();
        counter!(MIRROR_PASSES_TOTAL).increment(1);
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pass_age_is_rounded_up_to_whole_seconds() {
        let now = Instant::now();
        assert!(pass_age(now) <= 1);
        let started = now
            .checked_sub(Duration::from_millis(2_500))
            .expect("clock");
        assert_eq!(pass_age(started), 3);
        let started = now.checked_sub(Duration::from_secs(7)).expect("clock");
        assert!((7..=8).contains(&pass_age(started)));
    }
}
