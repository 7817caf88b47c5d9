//! The state shared by every reconcile, the revision mirror and the triggers: the Kubernetes
//! client, the backend clients, the gauges, the per-Pacto backoff and last-write memo, and the
//! counters the tests and benches read. A leaf beside the steps that use it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::Client;
use pacto_runtime::scope::NamespaceScope;

use crate::cause::Triggers;
use crate::gauges::Gauges;
use crate::reconcile::backends::Backends;
use crate::reconcile::index::RevisionIndex;
use crate::reconcile::memo::WriteMemo;
use crate::reconcile::requeue::FailureStreaks;

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
    /// The namespaces whose Pactos are reconciled (docs/design/architecture.md#namespace-scope).
    pub scope: NamespaceScope,
    /// Consecutive backend failures per Pacto.
    pub(crate) backoff: FailureStreaks,
    /// The status last written per Pacto, until the Pacto cache shows that write.
    pub(crate) written: WriteMemo,
    /// Each Pacto's revisions as the PactoRevision watch delivered them
    /// (docs/design/status.md#the-revision-index).
    pub(crate) revisions: RevisionIndex,
    /// The evidence producer (`--evidence-url`), if on (docs/design/status.md#evidence-producer).
    pub producer: Option<crate::producer::Producer>,
    /// What started each reconcile (counted per trigger).
    pub triggers: Triggers,
    /// The PolicyReport exporter (`--policy-reports`), if on
    /// (docs/design/status.md#policyreports).
    pub policy_reports: Option<crate::policy_report::PolicyReports>,
    /// Reconciles finished by this context.
    reconciles: AtomicU64,
    /// Status writes made by this context.
    writes: AtomicU64,
    /// Revision-mirror passes finished.
    mirror_passes: AtomicU64,
    /// Reconciles running now, and the most that ever ran at once.
    in_flight: AtomicU64,
    most_in_flight: AtomicU64,
}

/// One running reconcile, counted in [`Context::most_in_flight`] until dropped.
pub(crate) struct InFlight<'a>(&'a Context);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
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
            scope: NamespaceScope::all(),
            backoff: FailureStreaks::default(),
            written: WriteMemo::default(),
            revisions: RevisionIndex::default(),
            producer: None,
            policy_reports: None,
            triggers: Triggers::default(),
            reconciles: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            mirror_passes: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            most_in_flight: AtomicU64::new(0),
        }
    }

    /// The same context reconciling only Pactos of namespaces in `scope`.
    #[must_use]
    pub fn with_scope(mut self, scope: NamespaceScope) -> Self {
        self.scope = scope;
        self
    }

    /// The same context posting a signed record of each verdict change to `producer`.
    #[must_use]
    pub fn with_producer(mut self, producer: crate::producer::Producer) -> Self {
        self.producer = Some(producer);
        self
    }

    /// The same context writing a PolicyReport per Pacto (docs/design/status.md#policyreports).
    #[must_use]
    pub fn with_policy_reports(mut self) -> Self {
        self.policy_reports = Some(crate::policy_report::PolicyReports::default());
        self
    }

    /// PolicyReports written so far (0 when the exporter is off).
    pub fn policy_report_writes(&self) -> u64 {
        self.policy_reports
            .as_ref()
            .map_or(0, crate::policy_report::PolicyReports::writes)
    }

    /// The same context reconciling at most `concurrency` Pactos at once (at least one).
    #[must_use]
    pub fn with_concurrency(mut self, concurrency: u16) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Counts a reconcile as running until the returned guard drops.
    pub(crate) fn enter(&self) -> InFlight<'_> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(self)
    }

    /// Reconciles running now.
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The most reconciles that ran at the same time so far (bounded by the concurrency).
    pub fn most_in_flight(&self) -> u64 {
        self.most_in_flight.load(Ordering::SeqCst)
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
