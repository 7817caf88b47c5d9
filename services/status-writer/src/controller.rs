//! The kube-runtime controller over `Pacto` (and owned `PactoRevision`s): its shared
//! [`Context`], its triggers ([`crate::triggers`]) and its error policy. One pass is
//! [`crate::reconcile::reconcile`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use metrics::counter;
use pacto_api::{Pacto, PactoRevision};
use pacto_runtime::CancellationToken;

use crate::gauges::Gauges;
use crate::metrics::{RECONCILE_ERRORS_TOTAL, RECONCILES_TOTAL};
pub use crate::reconcile::backends::Backends;
use crate::reconcile::memo::WriteMemo;
use crate::reconcile::requeue::{BACKOFF_BASE, Backoff};
use crate::reconcile::{ReconcileError, reconcile};
use crate::triggers;

/// Pactos reconciled at the same time unless `--max-concurrent-reconciles` says otherwise.
pub const DEFAULT_CONCURRENT_RECONCILES: u16 = 16;

/// Shared state of the controller.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// Backend clients.
    pub backends: Backends,
    /// The contract gauges.
    pub gauges: Gauges,
    /// The stabilization window passed to Observe (`None`: the observer's default).
    pub stabilization_window: Option<Duration>,
    /// The event reporter instance (pod name), if known.
    pub instance: Option<String>,
    /// Pactos reconciled at the same time.
    pub concurrency: u16,
    /// Consecutive backend failures per Pacto.
    pub(crate) backoff: Backoff,
    /// The status last written per Pacto, until the Pacto cache shows that write.
    pub(crate) written: WriteMemo,
    /// Reconciles finished by this context.
    reconciles: AtomicU64,
    /// Status writes made by this context.
    writes: AtomicU64,
    /// Revision-mirror passes finished.
    mirror_passes: AtomicU64,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("stabilization_window", &self.stabilization_window)
            .field("instance", &self.instance)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context.
    pub fn new(
        client: Client,
        backends: Backends,
        gauges: Gauges,
        stabilization_window: Option<Duration>,
        instance: Option<String>,
    ) -> Self {
        Self {
            client,
            backends,
            gauges,
            stabilization_window,
            instance,
            concurrency: DEFAULT_CONCURRENT_RECONCILES,
            backoff: Backoff::default(),
            written: WriteMemo::default(),
            reconciles: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            mirror_passes: AtomicU64::new(0),
        }
    }

    /// The same context reconciling at most `concurrency` Pactos at once (at least one).
    #[must_use]
    pub fn with_concurrency(mut self, concurrency: u16) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Revision-mirror passes finished so far.
    pub fn mirror_passes(&self) -> u64 {
        self.mirror_passes.load(Ordering::SeqCst)
    }

    /// Counts a finished mirror pass.
    pub fn count_mirror_pass(&self) {
        self.mirror_passes.fetch_add(1, Ordering::SeqCst);
    }

    /// Reconciles finished so far (successful or not).
    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::SeqCst)
    }

    /// Counts a finished reconcile.
    pub(crate) fn count_reconcile(&self) {
        self.reconciles.fetch_add(1, Ordering::SeqCst);
    }

    /// Status writes made so far.
    pub fn status_writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Counts a status write.
    pub(crate) fn count_status_write(&self) {
        self.writes.fetch_add(1, Ordering::SeqCst);
    }
}

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
    let (reader, stream) = triggers::pactos(pactos);
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
