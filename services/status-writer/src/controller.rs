//! The kube-runtime controller over `Pacto` (and owned `PactoRevision`s): its triggers
//! ([`crate::triggers`]) and its error policy over the shared [`Context`]. One pass is
//! [`crate::reconcile::reconcile`].

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use metrics::counter;
use pacto_api::{Pacto, PactoRevision};
use pacto_runtime::CancellationToken;

pub use crate::context::{Context, DEFAULT_CONCURRENT_RECONCILES};
use crate::metrics::{RECONCILE_ERRORS_TOTAL, RECONCILES_TOTAL};
pub use crate::reconcile::backends::Backends;
use crate::reconcile::requeue::BACKOFF_BASE;
use crate::reconcile::{ReconcileError, reconcile};
use crate::triggers;

/// Requeue policy for API errors (the controller's retry).
pub fn error_policy(_pacto: Arc<Pacto>, error: &ReconcileError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %pacto_runtime::tls::error_chain(error), "reconcile failed");
    counter!(RECONCILES_TOTAL, "result" => "error").increment(1);
    counter!(RECONCILE_ERRORS_TOTAL, "step" => error.label()).increment(1);
    Action::requeue(BACKOFF_BASE)
}

/// Runs the controller until `shutdown`: Pactos (all namespaces, or `namespace`), owned
/// PactoRevisions and the observer's target notifications; removes the gauges of deleted Pactos.
pub async fn run(ctx: Arc<Context>, namespace: Option<String>, shutdown: CancellationToken) {
    let client = ctx.client.clone();
    let namespace = namespace.as_deref();
    let (pactos, revisions, metadata): (
        Api<Pacto>,
        Api<PactoRevision>,
        Api<PartialObjectMeta<Pacto>>,
    ) = match namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client, ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client),
        ),
    };
    tokio::spawn(triggers::watch_deletions(
        metadata,
        ctx.clone(),
        shutdown.clone(),
    ));
    let mut targets = triggers::watch_targets(&ctx, shutdown.clone());
    let target_stream = futures::stream::poll_fn(move |cx| targets.poll_recv(cx));
    let stop = shutdown.clone();
    let (reader, stream) = triggers::pactos(pactos, Arc::clone(&ctx));
    Controller::for_stream(stream, reader)
        .with_config(kube::runtime::controller::Config::default().concurrency(ctx.concurrency))
        .owns(revisions, watcher::Config::default())
        .reconcile_on(target_stream)
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            match result {
                Ok((object, _)) => tracing::debug!(pacto = %object.name, "reconciled"),
                Err(error) => tracing::debug!(%error, "controller event"),
            }
            futures::future::ready(())
        })
        .await;
}
