//! The edges of the reconcile: a kube-runtime controller over `Pacto` (and owned
//! `PactoRevision`s), the gRPC calls to the three backends, the PactoRevision API calls, the
//! server-side apply of the status with one field manager, events and gauges.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use metrics::{counter, histogram};
use pacto_api::labels::{GROUP, VERSION};
use pacto_api::{MIN_CHECK_INTERVAL_SECONDS, Pacto, PactoRevision};
use pacto_proto::common;
use pacto_proto::evaluator::evaluator_client::EvaluatorClient;
use pacto_proto::evaluator::{AssessReadinessRequest, EvaluateRequest};
use pacto_proto::observer::observer_client::ObserverClient;
use pacto_proto::observer::{self, ObserveRequest, WatchTargetsRequest};
use pacto_proto::resolver::contract_resolver_client::ContractResolverClient;
use pacto_proto::resolver::{ConfigurationOverride, ContractRef, ResolveRequest};
use pacto_runtime::CancellationToken;
use pacto_runtime::grpc::{RetryPolicy, call_with_retries};
use tonic::transport::Channel;

use crate::compose::{Composed, EventKind, EventSpec, Pass, compose};
use crate::gauges::Gauges;
use crate::model::{
    Backend, BackendFailure, EnsuredRevision, Resolution, ResolvedContract, Runtime,
};
use crate::revision::{
    RevisionInput, needs_backfill, resolved_status, revision_name, revision_object,
    revision_version,
};
use crate::wire;

/// The single field manager of every status write.
pub const FIELD_MANAGER: &str = "pacto-status-writer";
/// The event recorder's component.
pub const EVENT_COMPONENT: &str = "pacto-controller";
/// Reconciles, by result (`ok`, `unknown_backend`, `error`).
pub const RECONCILES_TOTAL: &str = "pacto_status_writer_reconciles_total";
/// Reconcile errors, by step.
pub const RECONCILE_ERRORS_TOTAL: &str = "pacto_status_writer_reconcile_errors_total";
/// Reconcile duration.
pub const RECONCILE_SECONDS: &str = "pacto_status_writer_reconcile_seconds";
/// Status writes (server-side applies) made.
pub const STATUS_WRITES_TOTAL: &str = "pacto_status_writer_status_writes_total";
/// Backend calls that failed, by backend.
pub const BACKEND_FAILURES_TOTAL: &str = "pacto_status_writer_backend_failures_total";

/// First retry delay after a backend failure; doubled per consecutive failure, capped by the
/// Pacto's check interval.
const BACKOFF_BASE: Duration = Duration::from_secs(5);

/// Describes the process metrics of this crate (for `# HELP`).
pub fn describe_metrics() {
    use metrics::{Unit, describe_counter, describe_histogram};
    describe_counter!(
        RECONCILES_TOTAL,
        Unit::Count,
        "Reconciles of Pactos, by result."
    );
    describe_counter!(
        RECONCILE_ERRORS_TOTAL,
        Unit::Count,
        "Reconciles that failed with a Kubernetes API error, by step."
    );
    describe_histogram!(
        RECONCILE_SECONDS,
        Unit::Seconds,
        "Duration of one Pacto reconcile."
    );
    describe_counter!(
        STATUS_WRITES_TOTAL,
        Unit::Count,
        "Pacto status writes (server-side applies); 0 per steady-state reconcile."
    );
    describe_counter!(
        BACKEND_FAILURES_TOTAL,
        Unit::Count,
        "Backend gRPC calls that failed (recorded as Unknown), by backend."
    );
}

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

/// The gRPC clients of the three backends.
#[derive(Debug, Clone)]
pub struct Backends {
    /// contract-resolver.
    pub resolver: ContractResolverClient<Channel>,
    /// observer.
    pub observer: ObserverClient<Channel>,
    /// evaluator.
    pub evaluator: EvaluatorClient<Channel>,
    /// Retries of transient failures within one call.
    pub retry: RetryPolicy,
}

/// A status this controller wrote, and the object it was composed from.
#[derive(Debug)]
struct Written {
    uid: Option<String>,
    /// resourceVersion of the Pacto the written status was composed from.
    over: Option<String>,
    status: pacto_api::PactoStatus,
}

/// The last status write per Pacto (namespace, name), kept until the Pacto cache shows it.
///
/// A reconcile triggered right after a status write (e.g. by the PactoRevision it created) can
/// read the Pacto from a cache that is still exactly the object the write was composed from
/// (same uid and resourceVersion); that write's status is then the real previous one. Without
/// it, such a pass would write the same status again and could repeat its transition events.
#[derive(Debug, Default)]
struct WriteMemo(Mutex<HashMap<(String, String), Written>>);

impl WriteMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Written>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Our last write for `pacto` if the cached object has not seen it yet; a write the cache
    /// has caught up with (or that belongs to an older object of the same name) is dropped.
    fn unseen(&self, key: &(String, String), pacto: &Pacto) -> Option<pacto_api::PactoStatus> {
        let mut written = self.lock();
        let w = written.get(key)?;
        if w.uid == pacto.metadata.uid && w.over == pacto.metadata.resource_version {
            return Some(w.status.clone());
        }
        written.remove(key);
        None
    }

    /// Remembers `status`, just written over the cached `pacto`.
    fn remember(&self, key: (String, String), pacto: &Pacto, status: &pacto_api::PactoStatus) {
        self.lock().insert(
            key,
            Written {
                uid: pacto.metadata.uid.clone(),
                over: pacto.metadata.resource_version.clone(),
                status: status.clone(),
            },
        );
    }

    /// Forgets the write of a deleted Pacto.
    fn forget(&self, key: &(String, String)) {
        self.lock().remove(key);
    }

    /// Forgets the writes of Pactos for which `exists` is false (deleted while not watched).
    fn retain(&self, exists: impl Fn(&(String, String)) -> bool) {
        self.lock().retain(|key, _| exists(key));
    }
}

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
    /// Consecutive backend failures per Pacto (backoff).
    failures: Mutex<HashMap<(String, String), u32>>,
    /// The status last written per Pacto, until the Pacto cache shows that write.
    written: WriteMemo,
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
            failures: Mutex::new(HashMap::new()),
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

    /// Status writes made so far.
    pub fn status_writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
}

/// Now, truncated to whole seconds (status time granularity).
pub fn now_time() -> Time {
    now()
}

fn now() -> Time {
    // Status times have one-second granularity; truncating keeps repeated passes identical.
    let seconds = Timestamp::now().as_second();
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn failure(backend: Backend, status: &tonic::Status) -> BackendFailure {
    counter!(BACKEND_FAILURES_TOTAL, "backend" => backend.as_str()).increment(1);
    let message = if status.message().is_empty() {
        format!("{:?}", status.code())
    } else {
        status.message().to_owned()
    };
    BackendFailure::new(backend, message)
}

fn malformed(backend: Backend, error: &wire::WireError) -> BackendFailure {
    counter!(BACKEND_FAILURES_TOTAL, "backend" => backend.as_str()).increment(1);
    BackendFailure::new(backend, error.to_string())
}

/// Step 1 of DESIGN.md §1: Resolve.
pub async fn resolve(backends: &Backends, pacto: &Pacto, namespace: &str) -> Resolution {
    let spec = &pacto.spec;
    let request = ResolveRequest {
        namespace: namespace.to_owned(),
        pacto_name: pacto.name_any(),
        contract_ref: Some(ContractRef {
            oci: spec.contract_ref.oci.clone().unwrap_or_default(),
            inline: spec.contract_ref.inline.clone().unwrap_or_default(),
            pull_secret_ref: spec
                .contract_ref
                .pull_secret_ref
                .clone()
                .unwrap_or_default(),
        }),
        overrides: spec
            .overrides
            .iter()
            .flat_map(|o| &o.configurations)
            .map(|c| ConfigurationOverride {
                name: c.name.clone(),
                values: c.values.clone().into_iter().collect(),
            })
            .collect(),
    };
    let answer = call_with_retries(&backends.retry, || {
        let mut client = backends.resolver.clone();
        let request = request.clone();
        async move { client.resolve(request).await }
    })
    .await;
    match answer {
        Ok(response) => wire::resolution_from_proto(response.get_ref())
            .unwrap_or_else(|e| Resolution::Failed(malformed(Backend::ContractResolver, &e))),
        Err(status) => Resolution::Failed(failure(Backend::ContractResolver, &status)),
    }
}

fn target_to_proto(pacto: &Pacto, namespace: &str) -> observer::Target {
    let target = pacto.spec.target.clone().unwrap_or_default();
    observer::Target {
        namespace: namespace.to_owned(),
        pacto_name: pacto.name_any(),
        service_name: target.service_name.unwrap_or_default(),
        workload_ref: target.workload_ref.map(|w| observer::WorkloadRef {
            name: w.name,
            kind: w.kind.map(|k| k.as_str().to_owned()).unwrap_or_default(),
        }),
        interface_bindings: target
            .interface_bindings
            .into_iter()
            .map(|b| observer::InterfaceBinding {
                interface: b.interface,
                service_port: Some(match b.service_port {
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => {
                        observer::interface_binding::ServicePort::PortNumber(n)
                    }
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => {
                        observer::interface_binding::ServicePort::PortName(s)
                    }
                }),
            })
            .collect(),
        config_bindings: target
            .config_bindings
            .into_iter()
            .map(|b| observer::ConfigBinding {
                configuration: b.configuration,
                kind: match b.kind {
                    pacto_api::ConfigBindingKind::ConfigMap => "ConfigMap".to_owned(),
                    pacto_api::ConfigBindingKind::Secret => "Secret".to_owned(),
                },
                name: b.name,
                key: b.key.unwrap_or_default(),
                format: match b.format {
                    Some(pacto_api::ConfigFormat::Yaml) => "yaml".to_owned(),
                    Some(pacto_api::ConfigFormat::Json) => "json".to_owned(),
                    None => String::new(),
                },
            })
            .collect(),
    }
}

fn now_proto() -> pacto_proto::prost_types::Timestamp {
    let now = Timestamp::now();
    pacto_proto::prost_types::Timestamp {
        seconds: now.as_second(),
        nanos: now.subsec_nanosecond(),
    }
}

/// Steps 2–4 of DESIGN.md §1: reference-only readiness, or Observe + Evaluate.
pub async fn runtime(
    ctx: &Context,
    pacto: &Pacto,
    namespace: &str,
    resolved: &ResolvedContract,
) -> Runtime {
    let backends = &ctx.backends;
    let document = common::ContractDocument {
        yaml: resolved.effective_yaml.clone(),
    };
    if pacto.spec.is_reference() {
        if resolved.contract.readiness.is_none() {
            return Runtime::Reference(Ok(None));
        }
        let request = AssessReadinessRequest {
            contract: Some(document),
            assessed_at: Some(now_proto()),
        };
        let answer = call_with_retries(&backends.retry, || {
            let mut client = backends.evaluator.clone();
            let request = request.clone();
            async move { client.assess_readiness(request).await }
        })
        .await;
        return Runtime::Reference(
            answer
                .map(|r| {
                    r.get_ref()
                        .readiness
                        .as_ref()
                        .map(wire::readiness_from_proto)
                })
                .map_err(|status| failure(Backend::Evaluator, &status)),
        );
    }

    let previous_windows = pacto
        .status
        .as_ref()
        .map(|s| wire::windows_to_proto(&s.observation_windows))
        .unwrap_or_default();
    let request = ObserveRequest {
        target: Some(target_to_proto(pacto, namespace)),
        contract: Some(document.clone()),
        configuration_schemas: resolved
            .configuration_schemas
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        // The EvidenceSet needs a non-empty contractRef; inline contracts have no resolved
        // reference, so they are named after their Pacto.
        contract_ref: resolved
            .resolved_ref
            .clone()
            .unwrap_or_else(|| format!("inline://{namespace}/{}", pacto.name_any())),
        windows: previous_windows,
        stabilization_window: ctx.stabilization_window.map(|d| {
            pacto_proto::prost_types::Duration {
                seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
            }
        }),
    };
    let answer = call_with_retries(&backends.retry, || {
        let mut client = backends.observer.clone();
        let request = request.clone();
        async move { client.observe(request).await }
    })
    .await;
    let response = match answer {
        Ok(response) => response.into_inner(),
        Err(status) => return Runtime::ObserveFailed(failure(Backend::Observer, &status)),
    };
    let observed = match wire::observed_from_proto(&response) {
        Ok(observed) => observed,
        Err(error) => return Runtime::ObserveFailed(malformed(Backend::Observer, &error)),
    };
    let Some(evidence) = response.evidence else {
        return Runtime::ObserveFailed(malformed(
            Backend::Observer,
            &wire::WireError {
                field: "evidence".to_owned(),
                message: "required".to_owned(),
            },
        ));
    };
    let request = EvaluateRequest {
        contract: Some(document),
        evidence: Some(evidence),
        structural_warnings: resolved
            .validation
            .warnings
            .iter()
            .map(|w| common::ValidationIssue {
                code: w.code.clone().unwrap_or_default(),
                path: w.path.clone().unwrap_or_default(),
                message: w.message.clone(),
            })
            .collect(),
        assessed_at: Some(now_proto()),
    };
    let answer = call_with_retries(&backends.retry, || {
        let mut client = backends.evaluator.clone();
        let request = request.clone();
        async move { client.evaluate(request).await }
    })
    .await;
    let evaluated = match answer {
        Ok(response) => wire::evaluated_from_proto(response.get_ref())
            .map_err(|e| malformed(Backend::Evaluator, &e)),
        Err(status) => Err(failure(Backend::Evaluator, &status)),
    };
    Runtime::Observed {
        observed: Box::new(observed),
        evaluated,
    }
}

/// `ensureRevision`: creates the revision of the resolved contract if missing (and backfills
/// its status). Errors are logged only (operator.md §2.1 step 11).
pub async fn ensure_revision(
    client: &Client,
    pacto: &Pacto,
    namespace: &str,
    resolved: &ResolvedContract,
) -> Option<EnsuredRevision> {
    let api: Api<PactoRevision> = Api::namespaced(client.clone(), namespace);
    let pacto_name = pacto.name_any();
    let version = revision_version(&resolved.contract.service.version).to_owned();
    let name = revision_name(&pacto_name, &version, &resolved.content_hash);
    let status = Patch::Merge(serde_json::json!({
        "status": resolved_status(&resolved.content_hash, &now())
    }));
    let existing = match api.get_opt(&name).await {
        Ok(existing) => existing,
        Err(error) => {
            tracing::warn!(%error, revision = %name, "cannot read PactoRevision");
            return None;
        }
    };
    let created = if let Some(existing) = existing {
        if needs_backfill(existing.status.as_ref())
            && let Err(error) = api
                .patch_status(&name, &PatchParams::default(), &status)
                .await
        {
            tracing::warn!(%error, revision = %name, "cannot backfill PactoRevision status");
        }
        false
    } else {
        let uid = pacto.uid().unwrap_or_default();
        let object = revision_object(&RevisionInput {
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
        });
        let created = match api.create(&PostParams::default(), &object).await {
            Ok(_) => true,
            Err(kube::Error::Api(status)) if status.code == 409 => false,
            Err(error) => {
                tracing::warn!(%error, revision = %name, "cannot create PactoRevision");
                return None;
            }
        };
        if let Err(error) = api
            .patch_status(&name, &PatchParams::default(), &status)
            .await
        {
            tracing::warn!(%error, revision = %name, "cannot write PactoRevision status");
        }
        created
    };
    Some(EnsuredRevision {
        name,
        created,
        version,
    })
}

/// Server-side applies `status` with [`FIELD_MANAGER`].
pub async fn apply_status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &pacto_api::PactoStatus,
) -> Result<(), ReconcileError> {
    let api: Api<Pacto> = Api::namespaced(client.clone(), namespace);
    let body = serde_json::json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "Pacto",
        "status": serde_json::to_value(status).map_err(|source| ReconcileError::Serialize {
            name: name.to_owned(),
            source,
        })?,
    });
    api.patch_status(
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
    Ok(())
}

/// Publishes `events` on `pacto` (failures are logged: events are best effort).
pub async fn publish_events(ctx: &Context, pacto: &Pacto, events: &[EventSpec]) {
    if events.is_empty() {
        return;
    }
    // A fresh recorder per pass: kube's recorder folds events with the same reason into one
    // series keeping the first message, which would hide e.g. a second RevisionCreated name.
    let recorder = Recorder::new(
        ctx.client.clone(),
        Reporter {
            controller: EVENT_COMPONENT.to_owned(),
            instance: ctx.instance.clone(),
        },
    );
    let reference = pacto.object_ref(&());
    for event in events {
        let event = Event {
            type_: match event.kind {
                EventKind::Normal => EventType::Normal,
                EventKind::Warning => EventType::Warning,
            },
            reason: event.reason.to_owned(),
            note: Some(event.message.clone()),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::warn!(%error, reason = %event.reason, "cannot publish event");
        }
    }
}

fn check_interval(pacto: &Pacto) -> Duration {
    let seconds = pacto
        .spec
        .check_interval_seconds()
        .max(MIN_CHECK_INTERVAL_SECONDS);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(300))
}

/// Whether a pass met a backend failure (retried with backoff rather than at the interval).
fn backend_failed(resolution: &Resolution, runtime: Option<&Runtime>) -> bool {
    matches!(resolution, Resolution::Failed(_))
        || matches!(
            runtime,
            Some(
                Runtime::ObserveFailed(_)
                    | Runtime::Reference(Err(_))
                    | Runtime::Observed {
                        evaluated: Err(_),
                        ..
                    }
            )
        )
}

/// Slack after a window's due instant, so the next Observe judges it at or after the instant.
const WINDOW_DUE_SLACK: Duration = Duration::from_millis(200);

/// How long until the earliest pending absence spans its stabilization window (plus a little
/// slack), when the observer reported one: observing again then confirms the absence at once
/// instead of one `checkIntervalSeconds` later (operator.md §2.10 "Effective latency").
fn window_due(runtime: Option<&Runtime>) -> Option<Duration> {
    let Some(Runtime::Observed { observed, .. }) = runtime else {
        return None;
    };
    let due = observed.window_due_at.as_ref()?;
    let wait = due
        .0
        .as_millisecond()
        .saturating_sub(Timestamp::now().as_millisecond());
    Some(Duration::from_millis(u64::try_from(wait).unwrap_or(0)) + WINDOW_DUE_SLACK)
}

/// One reconcile of one Pacto (DESIGN.md §1 steps 1–5).
pub async fn reconcile(pacto: Arc<Pacto>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let name = pacto.name_any();
    let namespace = pacto
        .namespace()
        .ok_or_else(|| ReconcileError::NoNamespace { name: name.clone() })?;

    let resolution = resolve(&ctx.backends, &pacto, &namespace).await;
    let (runtime, revision) = match &resolution {
        Resolution::Resolved(resolved) => {
            let revision = ensure_revision(&ctx.client, &pacto, &namespace, resolved).await;
            (
                Some(runtime(&ctx, &pacto, &namespace, resolved).await),
                revision,
            )
        }
        _ => (None, None),
    };
    let key = (namespace.clone(), name.clone());
    let unseen = ctx.written.unseen(&key, &pacto);
    let Composed {
        status,
        changed,
        events,
    } = compose(&Pass {
        spec: &pacto.spec,
        generation: pacto.metadata.generation,
        previous: unseen.as_ref().or(pacto.status.as_ref()),
        now: now(),
        resolution: &resolution,
        runtime: runtime.as_ref(),
        revision: revision.as_ref(),
    });
    if changed {
        let applied = apply_status(&ctx.client, &namespace, &name, &status).await;
        if applied.is_ok() {
            ctx.writes.fetch_add(1, Ordering::SeqCst);
            ctx.written.remember(key.clone(), &pacto, &status);
        }
        if let Err(error) = applied {
            ctx.reconciles.fetch_add(1, Ordering::SeqCst);
            return Err(error);
        }
    }
    publish_events(&ctx, &pacto, &events).await;
    if let Some(verdict) = status.contract_status {
        ctx.gauges
            .set(&namespace, &name, verdict, status.readiness.as_ref());
    }

    let interval = check_interval(&pacto);
    let failed = backend_failed(&resolution, runtime.as_ref());
    let delay = {
        let mut failures = ctx.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if failed {
            let n = failures.entry(key).or_insert(0);
            let delay = BACKOFF_BASE
                .saturating_mul(1u32 << (*n).min(10))
                .min(interval);
            *n = n.saturating_add(1);
            delay
        } else {
            failures.remove(&key);
            window_due(runtime.as_ref()).map_or(interval, |due| due.min(interval))
        }
    };
    let result = if failed { "unknown_backend" } else { "ok" };
    counter!(RECONCILES_TOTAL, "result" => result).increment(1);
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    histogram!(RECONCILE_SECONDS).record(started.elapsed().as_secs_f64());
    Ok(Action::requeue(delay))
}

/// Requeue policy for API errors (the controller's retry).
pub fn error_policy(_pacto: Arc<Pacto>, error: &ReconcileError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %pacto_runtime::tls::error_chain(error), "reconcile failed");
    counter!(RECONCILES_TOTAL, "result" => "error").increment(1);
    counter!(RECONCILE_ERRORS_TOTAL, "step" => error.label()).increment(1);
    Action::requeue(BACKOFF_BASE)
}

/// Streams the observer's WatchTargets notifications as reconcile triggers, reconnecting with
/// backoff until `shutdown`.
fn watch_targets(
    ctx: &Arc<Context>,
    shutdown: CancellationToken,
) -> tokio::sync::mpsc::Receiver<ObjectRef<Pacto>> {
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    let mut client = ctx.backends.observer.clone();
    tokio::spawn(async move {
        let mut delay = Duration::from_millis(500);
        loop {
            let stream = tokio::select! {
                () = shutdown.cancelled() => return,
                s = client.watch_targets(WatchTargetsRequest::default()) => s,
            };
            match stream {
                Ok(stream) => {
                    delay = Duration::from_millis(500);
                    let mut stream = stream.into_inner();
                    loop {
                        let next = tokio::select! {
                            () = shutdown.cancelled() => return,
                            n = stream.message() => n,
                        };
                        match next {
                            Ok(Some(change)) => {
                                tracing::debug!(namespace = %change.namespace, pacto = %change.pacto_name, reason = %change.reason, "target changed");
                                let obj =
                                    ObjectRef::new(&change.pacto_name).within(&change.namespace);
                                if tx.send(obj).await.is_err() {
                                    return;
                                }
                            }
                            Ok(None) => break,
                            Err(status) => {
                                tracing::debug!(code = ?status.code(), "WatchTargets stream ended");
                                break;
                            }
                        }
                    }
                }
                Err(status) => {
                    tracing::debug!(code = ?status.code(), message = status.message(), "WatchTargets unavailable");
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    });
    rx
}

/// The predicate of the Pacto watch: generation (spec), labels and annotations.
#[allow(
    clippy::unnecessary_wraps,
    reason = "kube's Predicate is a Fn(&K) -> Option<u64>"
)]
fn spec_or_metadata(pacto: &Pacto) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    pacto.metadata.generation.hash(&mut hasher);
    pacto.metadata.labels.hash(&mut hasher);
    pacto.metadata.annotations.hash(&mut hasher);
    Some(hasher.finish())
}

/// Removes the gauges (and the remembered last write) of deleted Pactos: a metadata watch (the
/// controller itself only sees applied objects); after each (re)list, what belongs to Pactos that
/// no longer exist is dropped.
async fn watch_deletions(
    api: Api<PartialObjectMeta<Pacto>>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) {
    use kube::runtime::watcher::Event as WatchEvent;
    let gauges = &ctx.gauges;
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut listing = std::collections::BTreeSet::new();
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = stream.next() => event,
        };
        let key = |meta: &PartialObjectMeta<Pacto>| {
            (meta.namespace().unwrap_or_default(), meta.name_any())
        };
        match event {
            None => return,
            Some(Ok(WatchEvent::Delete(meta))) => {
                let (ns, name) = key(&meta);
                if gauges.remove(&ns, &name) {
                    tracing::info!(namespace = %ns, pacto = %name, "Pacto deleted; removed its metric series");
                }
                ctx.written.forget(&(ns, name));
            }
            Some(Ok(WatchEvent::Init)) => listing.clear(),
            Some(Ok(WatchEvent::InitApply(meta))) => {
                listing.insert(key(&meta));
            }
            Some(Ok(WatchEvent::InitDone)) => {
                gauges.retain(&listing);
                ctx.written.retain(|key| listing.contains(key));
            }
            Some(Ok(WatchEvent::Apply(_))) => {}
            Some(Err(error)) => tracing::debug!(%error, "Pacto metadata watch error"),
        }
    }
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
    tokio::spawn(watch_deletions(metadata, ctx.clone(), shutdown.clone()));
    let mut triggers = watch_targets(&ctx, shutdown.clone());
    let trigger_stream = futures::stream::poll_fn(move |cx| triggers.poll_recv(cx));
    let stop = shutdown.clone();
    // Drop the Pacto's own status-only updates (spec, labels and annotations still enqueue,
    // e.g. the `kubectl annotate` nudge); the store still sees every update.
    let (reader, writer) = kube::runtime::reflector::store();
    let stream =
        kube::runtime::reflector(writer, watcher::watcher(pactos, watcher::Config::default()))
            .default_backoff()
            .applied_objects()
            .predicate_filter(
                spec_or_metadata,
                kube::runtime::utils::PredicateConfig::default(),
            );
    Controller::for_stream(stream, reader)
        .with_config(kube::runtime::controller::Config::default().concurrency(ctx.concurrency))
        .owns(revisions, watcher::Config::default())
        .reconcile_on(trigger_stream)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_the_cache_has_not_seen_is_the_previous_status() {
        use pacto_api::{ContractRef, ContractStatus, PactoSpec, PactoStatus};
        let pacto = |uid: &str, rv: &str| {
            let mut p = Pacto::new(
                "p",
                PactoSpec {
                    contract_ref: ContractRef {
                        oci: None,
                        inline: Some("yaml".into()),
                        pull_secret_ref: None,
                    },
                    target: None,
                    overrides: None,
                    check_interval_seconds: None,
                },
            );
            p.metadata.uid = Some(uid.into());
            p.metadata.resource_version = Some(rv.into());
            p
        };
        let verdict = |s: Option<PactoStatus>| s.and_then(|s| s.contract_status);
        let key = ("ns".to_owned(), "p".to_owned());
        let compliant = PactoStatus {
            contract_status: Some(ContractStatus::Compliant),
            ..PactoStatus::default()
        };
        let memo = WriteMemo::default();
        // Nothing written.
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        // Written over rv 10; the cache still shows rv 10: the written status, as often as asked.
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        for _ in 0..2 {
            assert_eq!(
                verdict(memo.unseen(&key, &pacto("u1", "10"))),
                Some(ContractStatus::Compliant)
            );
        }
        // A Pacto of the same name re-created (another uid) never gets the old write; it is
        // dropped.
        assert_eq!(memo.unseen(&key, &pacto("u2", "10")), None);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        // The cache has moved on (our write or anyone's): the write is dropped.
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        assert_eq!(memo.unseen(&key, &pacto("u1", "11")), None);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        // Deleted Pactos, while watched or not, are forgotten.
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        memo.forget(&key);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
        memo.remember(key.clone(), &pacto("u1", "10"), &compliant);
        memo.retain(|k| k != &key);
        assert_eq!(memo.unseen(&key, &pacto("u1", "10")), None);
    }

    #[test]
    fn a_pending_window_shortens_the_requeue() {
        let runtime = |due: Option<Timestamp>| Runtime::Observed {
            observed: Box::new(crate::model::Observed {
                window_due_at: due.map(Time),
                ..crate::model::Observed::default()
            }),
            evaluated: Err(BackendFailure::new(Backend::Evaluator, "irrelevant here")),
        };
        assert_eq!(window_due(None), None);
        assert_eq!(window_due(Some(&runtime(None))), None);
        let soon = Timestamp::now() + std::time::Duration::from_secs(5);
        let wait = window_due(Some(&runtime(Some(soon)))).unwrap();
        assert!(wait > Duration::from_secs(4) && wait <= Duration::from_secs(5) + WINDOW_DUE_SLACK);
        // Already due (clock skew, a slow pass): observe again right away.
        let past = Timestamp::now() - std::time::Duration::from_secs(5);
        assert_eq!(
            window_due(Some(&runtime(Some(past)))),
            Some(WINDOW_DUE_SLACK)
        );
    }

    #[test]
    fn backend_failures_are_detected() {
        let fail = BackendFailure::new(Backend::Observer, "down");
        assert!(backend_failed(&Resolution::Failed(fail.clone()), None));
        assert!(backend_failed(
            &Resolution::Unavailable {
                message: String::new(),
                policy: None
            },
            Some(&Runtime::ObserveFailed(fail))
        ));
        assert!(!backend_failed(
            &Resolution::Unavailable {
                message: String::new(),
                policy: None
            },
            None
        ));
    }
}
