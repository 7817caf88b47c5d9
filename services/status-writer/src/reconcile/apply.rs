//! Step 5 of a reconcile: the transition events, then the server-side apply of the composed
//! status with one field manager (only when it changed), then the contract gauges. Events go
//! first, keyed by the status they move away from, so a crash between the two repeats the
//! pass without repeating or losing an event (docs/design/status.md#exactly-once-events).

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use metrics::counter;
use pacto_api::labels::{GROUP, VERSION};
use pacto_api::{Pacto, PactoStatus};

use crate::compose::{Composed, EventSpec};
use crate::context::Context;
use crate::events;
use crate::metrics::{EVENT_FAILURES_TOTAL, EVENTS_TOTAL, STATUS_WRITES_TOTAL};
use crate::reconcile::ReconcileError;
use crate::reconcile::memo::PactoKey;

/// The single field manager of every status write.
pub const FIELD_MANAGER: &str = "pacto-status-writer";

/// Publishes the events of `composed` (keyed by [`Composed::occurrence`]), applies its status
/// when it changed (remembering the write), and sets the Pacto's gauges. A failed write skips
/// the gauges; its events were published, and the pass that retries it replays them as no-ops.
pub async fn apply_and_report(
    ctx: &Context,
    pacto: &Pacto,
    key: &PactoKey,
    composed: &Composed,
) -> Result<(), ReconcileError> {
    let (namespace, name) = key;
    let status = &composed.status;
    publish_events(ctx, pacto, &composed.events, Some(&composed.occurrence)).await;
    if composed.changed {
        tracing::debug!("status apply sent");
        let wrote = apply_status(&ctx.client, namespace, name, status).await?;
        tracing::debug!(resource_version = wrote.as_deref(), "status applied");
        ctx.count_status_write();
        ctx.written
            .remember(key.clone(), pacto, wrote.as_deref(), status);
    }
    // The PolicyReport, when on: written only when its content changed, never failing the
    // pass (docs/design/status.md#policyreports).
    if let Some(reports) = &ctx.policy_reports {
        let write = crate::policy_report::ReportWrite {
            client: &ctx.client,
            field_manager: FIELD_MANAGER,
            now: crate::reconcile::now(),
        };
        reports.export(&write, pacto, key, status).await;
    }
    if let Some(verdict) = status.contract_status {
        ctx.gauges.set(
            namespace,
            name,
            verdict,
            status.readiness.as_ref(),
            crate::compose::undeclared_peer_count(status),
        );
    }
    Ok(())
}

/// Server-side applies `status` with [`FIELD_MANAGER`]; returns the resourceVersion the API
/// server answered with (for the write memo, docs/design/status.md#the-write-memo).
pub async fn apply_status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &PactoStatus,
) -> Result<Option<String>, ReconcileError> {
    let api: Api<Pacto> = Api::namespaced(client.clone(), namespace);
    let body = serde_json::json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Pacto",
        "status": serde_json::to_value(status).map_err(|source| ReconcileError::Serialize {
            name: name.to_owned(),
            source,
        })?,
    });
    let written = api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|source| ReconcileError::ApplyStatus {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    counter!(STATUS_WRITES_TOTAL).increment(1);
    Ok(written.metadata.resource_version)
}

/// Publishes `events` on `pacto` as aggregated core/v1 Events: a recurrence of the same type,
/// reason and message counts on the existing Event, unless it carries the `occurrence` key that
/// Event already counted (docs/design/status.md#events). Failures are logged and counted:
/// events are best effort and never fail a reconcile.
pub async fn publish_events(
    ctx: &Context,
    pacto: &Pacto,
    events: &[EventSpec],
    occurrence: Option<&str>,
) {
    for event in events {
        match events::record(
            &ctx.client,
            pacto,
            event,
            occurrence,
            ctx.instance.as_deref(),
        )
        .await
        {
            Ok(recorded) => {
                if recorded != events::Recorded::Replayed {
                    let namespace = pacto.metadata.namespace.clone().unwrap_or_default();
                    counter!(EVENTS_TOTAL, "namespace" => namespace, "reason" => event.reason)
                        .increment(1);
                }
                tracing::debug!(reason = %event.reason, ?recorded, "event recorded");
            }
            Err(error) => {
                counter!(EVENT_FAILURES_TOTAL).increment(1);
                let error = pacto_runtime::tls::error_chain(&error);
                tracing::warn!(%error, reason = %event.reason, "cannot publish event");
            }
        }
    }
}
