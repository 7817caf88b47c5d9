//! One Observe call: fetch what the declared assertions need, evaluate each dimension with the
//! pure functions, apply stabilization, stamp provenance, and assemble the EvidenceSet, the
//! updated windows, the failed API queries and the legacy snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use pacto_api::{ConfigBindingKind, TargetRef, WorkloadKind};
use pacto_contract::model::Contract;
use pacto_engine::{
    EvidenceSet, Observation, ObservationKind, Outcome, Provenance, SubjectRef, Timestamp,
};

use crate::configuration::{BoundObject, configuration_verdict};
use crate::dependency::{dependency_verdict, match_sibling};
use crate::fetch::KubeCluster;
use crate::health::{active_verdict, capability_target, passive_verdict};
use crate::interfaces::{InterfaceInput, interface_verdict};
use crate::metrics_capability::MetricsObserver;
use crate::probe::{Prober, service_url};
use crate::verdict::{ApiFailure, Fetched, Verdict};
use crate::window::{Stabilized, Window, WindowKey, WindowKind, Windows};
use crate::workload::{
    ObservedRuntime, WorkloadObject, observed_runtime, persistence_verdict, workload_verdict,
};

/// The provenance collector of every Kubernetes observation.
pub const COLLECTOR: &str = "k8s-observer";
/// The EvidenceSet source.
pub const SOURCE: &str = "k8s";

/// What to observe (the wire `Target`, validated).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Namespace of the Pacto and its target.
    pub namespace: String,
    /// Name of the Pacto.
    pub pacto_name: String,
    /// `spec.target`.
    pub spec: TargetRef,
}

impl Target {
    /// The Service name, if set and non-empty.
    pub fn service_name(&self) -> Option<&str> {
        self.spec.service_name.as_deref().filter(|s| !s.is_empty())
    }

    /// `ResolvedWorkload()`: the workloadRef (empty kind ⇒ Deployment), else the Service name
    /// as a Deployment.
    pub fn resolved_workload(&self) -> Option<(String, WorkloadKind)> {
        if let Some(w) = &self.spec.workload_ref {
            return Some((w.name.clone(), w.kind.unwrap_or(WorkloadKind::Deployment)))
                .filter(|(n, _)| !n.is_empty());
        }
        self.service_name()
            .map(|s| (s.to_owned(), WorkloadKind::Deployment))
    }

    /// `WorkloadExplicit`: a workloadRef with a name and an explicit kind.
    pub fn workload_explicit(&self) -> bool {
        self.spec
            .workload_ref
            .as_ref()
            .is_some_and(|w| !w.name.is_empty() && w.kind.is_some())
    }
}

/// One Observe request in domain types.
#[derive(Debug, Clone)]
pub struct ObserveInput {
    /// What to observe.
    pub target: Target,
    /// The effective contract.
    pub contract: Contract,
    /// JSON Schemas of the locally resolvable configurations, by configuration name.
    pub schemas: BTreeMap<String, Vec<u8>>,
    /// Copied into `EvidenceSet.contract_ref`.
    pub contract_ref: String,
    /// The persisted windows.
    pub windows: Vec<Window>,
    /// The stabilization window; `None` = the observer's default.
    pub stabilization_window: Option<Duration>,
}

/// Whether a named resource exists (legacy snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceExistence {
    /// Its name.
    pub name: String,
    /// Its kind (workloads).
    pub kind: String,
    /// Whether it exists.
    pub exists: bool,
}

/// The legacy snapshot (operator.md §2.11).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The Service, when serviceName is set.
    pub service: Option<ResourceExistence>,
    /// The workload, when a name resolved.
    pub workload: Option<ResourceExistence>,
    /// Facts of an existing workload.
    pub observed_runtime: Option<ObservedRuntime>,
}

/// The result of one Observe call.
#[derive(Debug, Clone)]
pub struct ObserveOutput {
    /// One observation per declared (and collected) assertion.
    pub evidence: EvidenceSet,
    /// The windows to persist, pruned and sorted.
    pub windows: Vec<Window>,
    /// When the earliest pending streak spans the window (observe again then to confirm it).
    pub window_due_at: Option<pacto_engine::Timestamp>,
    /// Failed Kubernetes API queries, first one first.
    pub api_errors: Vec<String>,
    /// The legacy snapshot.
    pub snapshot: Snapshot,
    /// What the dependencies resolved to (for the WatchTargets index).
    pub dependency_edges: crate::watch::DependencyEdges,
}

/// Feature flags and defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--interface-name-match-discovery`.
    pub name_match_discovery: bool,
    /// `--enable-probing`.
    pub enable_probing: bool,
    /// `--enable-metrics-observation`.
    pub enable_metrics: bool,
    /// `--stabilization-window`.
    pub stabilization_window: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            name_match_discovery: false,
            enable_probing: false,
            enable_metrics: false,
            stabilization_window: crate::window::DEFAULT_STABILIZATION_WINDOW,
        }
    }
}

/// Collects evidence from a cluster.
#[derive(Debug, Clone)]
pub struct Observer {
    cluster: KubeCluster,
    prober: Prober,
    options: Options,
}

/// Records failed queries in order, each once.
#[derive(Debug, Default)]
struct Errors(Vec<String>);

impl Errors {
    fn note<T>(&mut self, fetched: &Fetched<T>) {
        if let Err(ApiFailure { message }) = fetched
            && !self.0.contains(message)
        {
            self.0.push(message.clone());
        }
    }
}

fn dimension_of(kind: ObservationKind) -> &'static str {
    match kind {
        ObservationKind::CapabilityObserved => "capability",
        ObservationKind::InterfaceObserved => "interface",
        ObservationKind::DependencyReachable => "dependency",
        ObservationKind::ConfigurationPresent => "configuration",
        ObservationKind::WorkloadObserved => "workload",
        ObservationKind::PersistenceObserved => "persistence",
    }
}

/// Turns verdicts into observations, applying the windows.
struct Assembler {
    windows: Windows,
    provenance: Provenance,
    observations: Vec<Observation>,
}

impl Assembler {
    fn push(
        &mut self,
        kind: ObservationKind,
        name: &str,
        window: Option<WindowKind>,
        verdict: Verdict,
    ) {
        let key = window.map(|k| WindowKey::new(k, name));
        let outcome = match verdict {
            Verdict::Skip => return,
            Verdict::Report(outcome) => outcome,
            Verdict::Clear(outcome) => {
                if let Some(key) = &key {
                    self.windows.apply(key, false);
                }
                outcome
            }
            Verdict::Negative(value) => match &key {
                Some(key) => match self.windows.apply(key, true) {
                    Stabilized::Confirmed => Outcome::Observed(value),
                    Stabilized::InWindow | Stabilized::Positive => Outcome::Insufficient,
                },
                // a negative of an unwindowed dimension is immediate
                None => Outcome::Observed(value),
            },
        };
        metrics::counter!(
            crate::metrics::OBSERVATIONS_TOTAL,
            "dimension" => dimension_of(kind),
            "outcome" => outcome.kind().as_str()
        )
        .increment(1);
        self.observations.push(Observation::new(
            kind,
            name,
            outcome,
            self.provenance.clone(),
        ));
    }
}

impl Observer {
    /// An observer reading through `cluster` and probing with `prober`.
    pub fn new(cluster: KubeCluster, prober: Prober, options: Options) -> Self {
        Self {
            cluster,
            prober,
            options,
        }
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Waits until the cluster caches (if any) completed their initial lists; `false` if a
    /// cache's watch stopped.
    pub async fn wait_ready(&self) -> bool {
        self.cluster.wait_ready().await
    }

    /// Observes one target at `now`.
    pub async fn observe(&self, input: ObserveInput, now: Timestamp) -> ObserveOutput {
        let ObserveInput {
            target,
            contract,
            schemas,
            contract_ref,
            windows,
            stabilization_window,
        } = input;
        let ns = target.namespace.as_str();
        let mut errors = Errors::default();
        let service_name = target.service_name();
        let workload_ref = target.resolved_workload();

        // The target's Service, its slices and the workload, fetched once, concurrently.
        let (service, slices, workload): (
            Fetched<Service>,
            Fetched<Vec<EndpointSlice>>,
            Fetched<WorkloadObject>,
        ) = tokio::join!(
            async {
                match service_name {
                    Some(s) => self.cluster.service(ns, s).await,
                    None => Ok(None),
                }
            },
            async {
                match service_name {
                    Some(s) => self.cluster.endpoint_slices(ns, s).await,
                    None => Ok(None),
                }
            },
            async {
                match &workload_ref {
                    Some((name, kind)) => self.cluster.workload(ns, name, *kind).await,
                    None => Ok(None),
                }
            }
        );
        errors.note(&service);
        errors.note(&workload);
        // Slices are read only when a Service exists (a missing Service has none).
        let slices = if matches!(service, Ok(Some(_))) {
            slices
        } else {
            Ok(None)
        };
        errors.note(&slices);

        let mut out = Assembler {
            windows: Windows::new(
                windows,
                now,
                stabilization_window.unwrap_or(self.options.stabilization_window),
            ),
            provenance: Provenance::new(COLLECTOR, now),
            observations: Vec::new(),
        };
        let mut declared: BTreeSet<WindowKey> = BTreeSet::new();
        let mut edges = crate::watch::DependencyEdges::default();

        // Interfaces (always required).
        for interface in &contract.interfaces {
            declared.insert(WindowKey::new(WindowKind::Interface, &interface.name));
            let binding = target
                .spec
                .interface_bindings
                .iter()
                .find(|b| b.interface == interface.name)
                .map(|b| &b.service_port);
            let verdict = interface_verdict(
                InterfaceInput {
                    name: &interface.name,
                    interface_type: &interface.kind,
                    binding,
                    name_match_discovery: self.options.name_match_discovery,
                },
                &service,
                &slices,
            );
            out.push(
                ObservationKind::InterfaceObserved,
                &interface.name,
                Some(WindowKind::Interface),
                verdict,
            );
        }

        // Capabilities: health and metrics (extensions are not collected).
        let mut seen_keys = BTreeSet::new();
        for capability in &contract.capabilities {
            let key = capability.assertion_key().to_owned();
            declared.insert(WindowKey::new(WindowKind::Capability, &key));
            if !seen_keys.insert(key.clone()) {
                continue;
            }
            match capability.kind.as_str() {
                "health" => {
                    let verdict = self
                        .health(
                            &target,
                            capability.binding.as_ref(),
                            &service,
                            &workload,
                            &slices,
                        )
                        .await;
                    out.push(
                        ObservationKind::CapabilityObserved,
                        &key,
                        Some(WindowKind::Capability),
                        verdict,
                    );
                }
                "metrics" => {
                    let verdict = if self.options.enable_metrics {
                        MetricsObserver {
                            cluster: &self.cluster,
                            prober: &self.prober,
                        }
                        .observe(
                            &target,
                            capability.binding.as_ref(),
                            &service,
                            &slices,
                            &workload,
                        )
                        .await
                    } else {
                        Verdict::unsupported()
                    };
                    out.push(ObservationKind::CapabilityObserved, &key, None, verdict);
                }
                _ => {}
            }
        }

        // Dependencies.
        if !contract.dependencies.is_empty() {
            let pactos = self.cluster.pactos().await;
            if let Err(e) = &pactos {
                errors.0.push(e.message.clone());
            }
            for dependency in &contract.dependencies {
                declared.insert(WindowKey::new(WindowKind::Dependency, &dependency.name));
                edges
                    .bases
                    .insert(crate::dependency::reference_base(&dependency.reference));
                let sibling = pactos.as_ref().map_err(Clone::clone).map(|pactos| {
                    match_sibling(
                        &dependency.reference,
                        &dependency.compatibility,
                        pactos,
                        (ns, target.pacto_name.as_str()),
                    )
                });
                let (svc, sl) = match &sibling {
                    Ok(crate::dependency::SiblingMatch::Service { namespace, name }) => {
                        edges.services.insert((namespace.clone(), name.clone()));
                        let svc = self.cluster.service(namespace, name).await;
                        errors.note(&svc);
                        let sl = if matches!(svc, Ok(Some(_))) {
                            let sl = self.cluster.endpoint_slices(namespace, name).await;
                            errors.note(&sl);
                            sl
                        } else {
                            Ok(None)
                        };
                        (svc, sl)
                    }
                    _ => (Ok(None), Ok(None)),
                };
                let verdict = dependency_verdict(&sibling, &svc, &sl);
                out.push(
                    ObservationKind::DependencyReachable,
                    &dependency.name,
                    Some(WindowKind::Dependency),
                    verdict,
                );
            }
        }

        // Configurations.
        for configuration in &contract.configurations {
            declared.insert(WindowKey::new(
                WindowKind::Configuration,
                &configuration.name,
            ));
            let binding = target
                .spec
                .config_bindings
                .iter()
                .find(|b| b.configuration == configuration.name);
            let object = match binding {
                None => None,
                Some(b) => Some(match b.kind {
                    ConfigBindingKind::Secret => {
                        let f = self.cluster.secret_exists(ns, &b.name).await;
                        errors.note(&f);
                        BoundObject::Secret(f)
                    }
                    ConfigBindingKind::ConfigMap => {
                        let f = self.cluster.config_map_data(ns, &b.name).await;
                        errors.note(&f);
                        BoundObject::ConfigMap(f)
                    }
                }),
            };
            let verdict = configuration_verdict(
                configuration.required,
                binding,
                object.as_ref(),
                schemas.get(&configuration.name).map(Vec::as_slice),
            );
            out.push(
                ObservationKind::ConfigurationPresent,
                &configuration.name,
                Some(WindowKind::Configuration),
                verdict,
            );
        }

        // Workload and persistence (subject: the contract's service name).
        if workload_ref.is_some() {
            if let Some(declared_type) = contract.workload.as_deref().filter(|w| !w.is_empty()) {
                let verdict =
                    workload_verdict(declared_type, target.workload_explicit(), &workload);
                out.push(
                    ObservationKind::WorkloadObserved,
                    &contract.service.name,
                    None,
                    verdict,
                );
            }
            if contract
                .state
                .as_ref()
                .is_some_and(|s| s.persistence.durability == "persistent")
            {
                out.push(
                    ObservationKind::PersistenceObserved,
                    &contract.service.name,
                    None,
                    persistence_verdict(&workload),
                );
            }
        }

        let snapshot = Snapshot {
            service: service_name.map(|name| ResourceExistence {
                name: name.to_owned(),
                kind: String::new(),
                exists: matches!(service, Ok(Some(_))),
            }),
            workload: workload_ref.as_ref().map(|(name, kind)| ResourceExistence {
                name: name.clone(),
                kind: kind.as_str().to_owned(),
                exists: matches!(workload, Ok(Some(_))),
            }),
            observed_runtime: workload
                .as_ref()
                .ok()
                .and_then(Option::as_ref)
                .map(observed_runtime),
        };
        let subject = match (service_name, &workload_ref) {
            (Some(s), _) => SubjectRef::new("service", format!("{ns}/{s}")),
            (None, Some((w, _))) => SubjectRef::new("workload", format!("{ns}/{w}")),
            (None, None) => SubjectRef::new("pacto", format!("{ns}/{}", target.pacto_name)),
        };
        for e in &errors.0 {
            tracing::warn!(namespace = ns, pacto = %target.pacto_name, error = %e, "kubernetes query failed");
        }
        metrics::counter!(crate::metrics::API_ERRORS_TOTAL).increment(errors.0.len() as u64);
        ObserveOutput {
            evidence: EvidenceSet {
                subject,
                contract_ref,
                source: SOURCE.to_owned(),
                observed_at: now,
                observations: Some(out.observations),
            },
            window_due_at: out.windows.next_due(&declared),
            windows: out.windows.finish(&declared),
            api_errors: errors.0,
            snapshot,
            dependency_edges: edges,
        }
    }

    async fn health(
        &self,
        target: &Target,
        binding: Option<&pacto_contract::model::Binding>,
        service: &Fetched<Service>,
        workload: &Fetched<WorkloadObject>,
        slices: &Fetched<Vec<EndpointSlice>>,
    ) -> Verdict {
        let resolved = match capability_target(binding, &target.spec.interface_bindings, service) {
            Ok(t) => t,
            Err(verdict) => return verdict,
        };
        if self.options.enable_probing
            && let Some(service_name) = target.service_name()
        {
            let path = resolved.path.as_deref().unwrap_or("/");
            match service_url(service_name, &target.namespace, resolved.port.port, path) {
                Ok(url) => {
                    let result = self.prober.probe(url).await;
                    if let Some(verdict) = active_verdict(&result) {
                        return verdict;
                    }
                    tracing::debug!(?result, "health probe transport error; passive fallback");
                }
                Err(error) => tracing::warn!(%error, "health probe URL refused; passive fallback"),
            }
        }
        passive_verdict(&resolved, workload, slices)
    }
}
