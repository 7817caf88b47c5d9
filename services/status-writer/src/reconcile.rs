//! One reconcile of one Pacto, as the five steps of the design (`docs/design/`): resolve the
//! contract, ensure its revision, observe and evaluate the target, compose the status (pure,
//! [`crate::compose`]), apply it and report (events, gauges). Each effectful step is a module.

pub(crate) mod apply;
pub(crate) mod backends;
pub(crate) mod index;
pub(crate) mod memo;
pub(crate) mod requeue;
pub(crate) mod revisions;

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use metrics::{counter, histogram};
use pacto_api::Pacto;

use crate::compose::{Pass, compose};
use crate::context::Context;
use crate::metrics::{RECONCILE_SECONDS, RECONCILES_TOTAL};
use crate::model::Resolution;
use crate::reconcile::memo::PactoKey;

/// A reconcile failed on a Kubernetes API call (retried with backoff by the controller).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The Pacto has no namespace.
    #[error("Pacto {name} has no namespace")]
    NoNamespace {
        /// The Pacto.
        name: String,
    },
    /// Writing the status failed.
    #[error("cannot apply the status of Pacto {namespace}/{name}")]
    ApplyStatus {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Serialising the status failed.
    #[error("cannot serialise the status of Pacto {name}")]
    Serialize {
        /// Name.
        name: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

impl ReconcileError {
    /// A low-cardinality label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::NoNamespace { .. } => "no_namespace",
            Self::ApplyStatus { .. } => "apply_status",
            Self::Serialize { .. } => "serialize",
        }
    }
}

/// Now, truncated to whole seconds (status time granularity).
pub(crate) fn now() -> Time {
    // Status times have one-second granularity; truncating keeps repeated passes identical.
    let seconds = Timestamp::now().as_second();
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// The Pacto's (namespace, name).
fn key_of(pacto: &Pacto) -> Result<PactoKey, ReconcileError> {
    let name = pacto.name_any();
    match pacto.namespace() {
        Some(namespace) => Ok((namespace, name)),
        None => Err(ReconcileError::NoNamespace { name }),
    }
}

/// One reconcile of one Pacto.
pub async fn reconcile(pacto: Arc<Pacto>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let _running = ctx.enter();
    let key = key_of(&pacto)?;
    let trigger = ctx.triggers.take(&key);
    // The pass's stages are debug events in the `reconcile` span, which names the Pacto (the
    // pipeline bench traces a change through them, docs/testing.md#pipeline-bench).
    tracing::debug!(?trigger, in_flight = ctx.in_flight(), "reconcile started");
    let namespace = key.0.as_str();
    // Out of scope (docs/design/architecture.md#namespace-scope): no pass, no requeue; the
    // status stays as last written and the gauges go. The namespace entering the scope starts
    // a pass again.
    if !ctx.scope.admits(namespace) {
        ctx.gauges.remove(namespace, &key.1);
        ctx.count_reconcile();
        return Ok(Action::await_change());
    }

    // The previous status: our own last write while the cache has not seen it
    // (docs/design/status.md#the-write-memo), else the cached one. The windows sent to the
    // observer come from it too, so that a streak persisted by that write is continued.
    let unseen = ctx.written.unseen(&key, &pacto);
    let previous = unseen.as_ref().or(pacto.status.as_ref());

    // 1. Resolve: a change of the Pacto asks the registry again, other causes accept a shared
    // answer up to one check interval old (docs/design/resolution.md#shared-resolves).
    let max_age = trigger.resolve_max_age(requeue::check_interval(&pacto));
    let resolution = backends::resolve(&ctx.backends, &pacto, namespace, max_age).await;
    tracing::debug!("contract resolved");
    // 2. Revision, and 3. Observe + Evaluate, for a contract that resolved.
    let (revision, runtime) = match &resolution {
        Resolution::Resolved(resolved) => {
            let revision = revisions::ensure(&ctx, &pacto, previous, namespace, resolved).await;
            tracing::debug!("revision ensured");
            let runtime = backends::runtime(
                &ctx.backends,
                ctx.stabilization_window,
                &pacto,
                namespace,
                resolved,
                previous.map_or(&[], |s| s.observation_windows.as_slice()),
            )
            .await;
            tracing::debug!("evaluated");
            (revision, Some(runtime))
        }
        _ => (None, None),
    };
    // 4. Compose.
    let composed = compose(&Pass {
        spec: &pacto.spec,
        generation: pacto.metadata.generation,
        previous,
        now: now(),
        resolution: &resolution,
        runtime: runtime.as_ref(),
        revision: revision.as_ref(),
    });
    // The signed record of a verdict change is offered before the status is written, like the
    // events: a pass replayed after a failed write offers the same record id, which the
    // Evidence Server answers as a replay (docs/design/status.md#evidence-producer). Offering
    // never waits.
    if let Some(producer) = &ctx.producer
        && let Some(record) = crate::producer::verdict_record(
            producer.producer_id(),
            (namespace, key.1.as_str()),
            previous,
            &composed,
            &resolution,
            runtime.as_ref(),
        )
    {
        producer.offer(record);
    }
    // 5. Apply + report.
    if let Err(error) = apply::apply_and_report(&ctx, &pacto, &key, &composed).await {
        ctx.count_reconcile();
        return Err(error);
    }
    if composed.changed {
        ctx.triggers.wrote(key.clone(), trigger);
    }
    let (delay, failed) = ctx.backoff.next(&pacto, key, &resolution, runtime.as_ref());
    finished(&ctx, failed, started);
    Ok(Action::requeue(delay))
}

/// Counts a reconcile that wrote what it had to (`unknown_backend` when a backend failed).
fn finished(ctx: &Context, backend_failed: bool, started: Instant) {
    let result = if backend_failed {
        "unknown_backend"
    } else {
        "ok"
    };
    counter!(RECONCILES_TOTAL, "result" => result).increment(1);
    ctx.count_reconcile();
    histogram!(RECONCILE_SECONDS).record(started.elapsed().as_secs_f64());
}
