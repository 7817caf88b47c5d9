//! One Observe call: fetch what the declared assertions need, evaluate each dimension with the
//! pure functions, apply stabilization, stamp provenance, and assemble the EvidenceSet, the
//! updated windows, the failed API queries and the legacy snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use pacto_api::{ConfigBinding, ConfigBindingKind};
use pacto_contract::model::{Binding, Contract};
use pacto_engine::{
    EvidenceSet, Observation, ObservationKind, Outcome, Provenance, SubjectRef, Timestamp,
};

use crate::addresses;
use crate::configuration::{BoundObject, configuration_verdict};
use crate::dependency::{SiblingMatch, dependency_verdict, match_sibling, reference_base};
use crate::fetch::KubeCluster;
use crate::health::{active_verdict, capability_target, passive_verdict, probe_refusal};
use crate::interfaces::{InterfaceInput, interface_verdict};
use crate::metrics_capability::{self, MetricsInput};
use crate::node_evidence::{
    Decided, Need, NodeEvidence, NodeState, NodeStates, PodRef, dependency_rule, interface_check,
    interface_rule, nodes_of, target_pods,
};
use crate::peers::{self, Peer, SYSTEM_SERVICES};
use crate::probe::{Prober, service_url};
use crate::target::Target;
use crate::targets::DependencyEdges;
use crate::verdict::{ApiFailure, Fetched, Verdict};
use crate::window::{Stabilized, Window, WindowKey, WindowKind, Windows};
use crate::workload::{
    ObservedRuntime, WorkloadObject, observed_runtime, persistence_verdict, workload_verdict,
};

pub use crate::verdict::COLLECTOR;
/// The EvidenceSet source.
pub const SOURCE: &str = "k8s";

/// One Observe request in domain types.
#[derive(Debug, Clone)]
pub struct ObserveInput {
    /// What to observe.
    pub target: Target,
    /// The effective contract, as parsed once per distinct document
    /// (docs/design/crates.md#parse-memo).
    pub contract: Arc<Contract>,
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

/// The legacy snapshot (docs/design/observation.md#runtimeobserved-and-the-legacy-snapshot).
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
    pub dependency_edges: DependencyEdges,
    /// The outbound peers the contract does not declare; `None` when node evidence says
    /// nothing (off, or not fresh and complete for every pod of the target).
    pub undeclared_peers: Option<Vec<Peer>>,
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
    /// `--observe-secrets`: read the metadata of bound Secrets and watch Secrets. Off, Secret
    /// bindings are `Unsupported` and no Secret is ever requested
    /// (docs/design/observation.md#configurations).
    pub observe_secrets: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            name_match_discovery: false,
            enable_probing: false,
            enable_metrics: false,
            observe_secrets: false,
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
    node_evidence: Option<NodeEvidence>,
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
    now: Timestamp,
    provenance: Provenance,
    observations: Vec<Observation>,
    /// The windowed assertions the contract declares (what the windows are pruned to).
    declared: BTreeSet<WindowKey>,
}

impl Assembler {
    fn new(windows: Windows, now: Timestamp) -> Self {
        Self {
            windows,
            provenance: Provenance::new(COLLECTOR, now),
            now,
            observations: Vec::new(),
            declared: BTreeSet::new(),
        }
    }

    fn declare(&mut self, kind: WindowKind, name: &str) {
        self.declared.insert(WindowKey::new(kind, name));
    }

    fn push(
        &mut self,
        kind: ObservationKind,
        name: &str,
        window: Option<WindowKind>,
        verdict: Verdict,
    ) {
        self.push_decided(kind, name, window, Decided::kubernetes(verdict));
    }

    /// Pushes a verdict with its collector, detail and detectedAt
    /// (docs/design/observation.md#node-evidence).
    fn push_decided(
        &mut self,
        kind: ObservationKind,
        name: &str,
        window: Option<WindowKind>,
        decided: Decided,
    ) {
        let Decided {
            verdict,
            collector,
            detail: node_detail,
            detected_at,
        } = decided;
        let key = window.map(|k| WindowKey::new(k, name));
        let mut detail = node_detail;
        let outcome = match verdict {
            Verdict::Skip => return,
            Verdict::Report(outcome) => outcome,
            Verdict::Explained(outcome, why) => {
                detail = Some(why.to_owned());
                outcome
            }
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
        let provenance = if collector == COLLECTOR && detected_at.is_none() {
            self.provenance.clone()
        } else {
            Provenance::new(collector, detected_at.unwrap_or(self.now))
        };
        let observation = Observation::new(kind, name, outcome, provenance);
        self.observations.push(match detail {
            Some(why) => observation.with_detail(why),
            None => observation,
        });
    }
}

impl Observer {
    /// An observer reading through `cluster` and probing with `prober`.
    pub fn new(cluster: KubeCluster, prober: Prober, options: Options) -> Self {
        Self {
            cluster,
            prober,
            options,
            node_evidence: None,
        }
    }

    /// The same observer, also reading node-agent evidence
    /// (docs/design/observation.md#node-evidence).
    #[must_use]
    pub fn with_node_evidence(mut self, node_evidence: NodeEvidence) -> Self {
        self.node_evidence = Some(node_evidence);
        self
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

    /// Observes one target at `now`: the target's objects are fetched once, then each
    /// dimension is observed in the order the EvidenceSet lists them.
    pub async fn observe(&self, input: ObserveInput, now: Timestamp) -> ObserveOutput {
        // Boxed: the call's state lives on the heap, so callers' futures stay small
        // (clippy::large_futures).
        Box::pin(self.observe_call(input, now)).await
    }

    async fn observe_call(&self, input: ObserveInput, now: Timestamp) -> ObserveOutput {
        let ObserveInput {
            target,
            contract,
            schemas,
            contract_ref,
            windows,
            stabilization_window,
        } = input;
        let mut errors = Errors::default();
        let state = self.fetch_target(&target, &mut errors).await;
        let (pods, nodes, node_due) = self.node_states(&target, &state, &now, &mut errors);
        let window = stabilization_window.unwrap_or(self.options.stabilization_window);
        let mut call = Call {
            out: Assembler::new(Windows::new(windows, now, window), now),
            target,
            contract,
            state,
            errors,
            pods,
            nodes,
            node_due,
            declared_addresses: BTreeSet::new(),
        };
        self.interfaces(&mut call);
        self.capabilities(&mut call).await;
        let mut edges = self.dependencies(&mut call).await;
        edges.nodes = call
            .nodes
            .as_ref()
            .map(|nodes| nodes.keys().cloned().collect())
            .unwrap_or_default();
        self.configurations(&mut call, &schemas).await;
        call.workload_and_persistence();
        let undeclared_peers = self.undeclared_peers(&call).await;
        let mut output = call.finish(contract_ref, now, edges);
        output.undeclared_peers = undeclared_peers;
        output
    }

    /// The target's Service, its slices and the workload, fetched once, concurrently. Slices
    /// are read only when a Service exists (a missing Service has none).
    async fn fetch_target(&self, target: &Target, errors: &mut Errors) -> TargetState {
        let ns = target.namespace.as_str();
        let service_name = target.service_name();
        let workload_ref = target.spec.resolved_workload();
        let (service, slices, workload) = tokio::join!(
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
        let slices = if matches!(service, Ok(Some(_))) {
            slices
        } else {
            Ok(None)
        };
        errors.note(&slices);
        TargetState {
            service,
            slices,
            workload,
        }
    }

    /// With node evidence on: the target's pods (its Service's endpoints) and their nodes'
    /// states. `None` when node evidence is off or cannot be read (the Kubernetes verdicts then
    /// stand; the failure is recorded).
    fn node_states(
        &self,
        target: &Target,
        state: &TargetState,
        now: &Timestamp,
        errors: &mut Errors,
    ) -> (Vec<PodRef>, Option<NodeStates>, Option<Timestamp>) {
        let Some(node_evidence) = &self.node_evidence else {
            return (Vec::new(), None, None);
        };
        let pods = match &state.slices {
            Ok(Some(slices)) => target_pods(slices),
            _ => Vec::new(),
        };
        match node_evidence.states(&nodes_of(&pods), now) {
            Ok((states, due)) => {
                // A fresh node whose collection failed is a failed query too, so RuntimeObserved
                // says so (docs/design/observation.md#node-evidence).
                for state in states.values() {
                    if let NodeState::Failed(why) = state
                        && !errors.0.contains(why)
                    {
                        errors.0.push(why.clone());
                    }
                }
                (pods, Some(states), due)
            }
            Err(failure) => {
                tracing::warn!(
                    namespace = target.namespace.as_str(),
                    pacto = %target.pacto_name,
                    error = %failure.message,
                    "node-agent evidence unreadable; Kubernetes evidence alone decides"
                );
                if !errors.0.contains(&failure.message) {
                    errors.0.push(failure.message);
                }
                (pods, None, None)
            }
        }
    }

    /// Interfaces (always required).
    fn interfaces(&self, call: &mut Call) {
        for interface in &call.contract.interfaces {
            call.out.declare(WindowKind::Interface, &interface.name);
            let binding = call
                .target
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
                &call.state.service,
                &call.state.slices,
            );
            let decided = match &call.nodes {
                Some(nodes) => {
                    let check = interface_check(binding, &call.state.service, &call.state.slices);
                    interface_rule(verdict, &check, &interface.kind, nodes)
                }
                None => Decided::kubernetes(verdict),
            };
            call.out.push_decided(
                ObservationKind::InterfaceObserved,
                &interface.name,
                Some(WindowKind::Interface),
                decided,
            );
        }
    }

    /// Capabilities: health and metrics, each assertion key once (extensions are not
    /// collected).
    async fn capabilities(&self, call: &mut Call) {
        let mut seen_keys = BTreeSet::new();
        for capability in &call.contract.capabilities {
            let key = capability.assertion_key().to_owned();
            call.out.declare(WindowKind::Capability, &key);
            if !seen_keys.insert(key.clone()) {
                continue;
            }
            let binding = capability.binding.as_ref();
            match capability.kind.as_str() {
                "health" => {
                    let verdict = self.health(&call.target, binding, &call.state).await;
                    let window = Some(WindowKind::Capability);
                    call.out
                        .push(ObservationKind::CapabilityObserved, &key, window, verdict);
                }
                "metrics" => {
                    let verdict = self.metrics(&call.target, binding, &call.state).await;
                    call.out
                        .push(ObservationKind::CapabilityObserved, &key, None, verdict);
                }
                _ => {}
            }
        }
    }

    /// Dependencies: each declared ref matched against the sibling Pactos, then the sibling's
    /// Service and slices. Returns what they resolved to (for the WatchTargets index).
    async fn dependencies(&self, call: &mut Call) -> DependencyEdges {
        let mut edges = DependencyEdges::default();
        if call.contract.dependencies.is_empty() {
            return edges;
        }
        let pactos = self.cluster.pactos().await;
        if let Err(e) = &pactos {
            call.errors.0.push(e.message.clone());
        }
        for dependency in &call.contract.dependencies {
            call.out.declare(WindowKind::Dependency, &dependency.name);
            edges.bases.insert(reference_base(&dependency.reference));
            let sibling = pactos.as_ref().map_err(Clone::clone).map(|pactos| {
                match_sibling(
                    &dependency.reference,
                    &dependency.compatibility,
                    pactos,
                    (&call.target.namespace, call.target.pacto_name.as_str()),
                )
            });
            let (svc, sl) = match &sibling {
                Ok(SiblingMatch::Service { namespace, name }) => {
                    edges.services.insert((namespace.clone(), name.clone()));
                    self.sibling_service(namespace, name, &mut call.errors)
                        .await
                }
                _ => (Ok(None), Ok(None)),
            };
            if let Ok(Some(service)) = &svc {
                call.declared_addresses.extend(addresses::canonical_of(
                    Some(service),
                    sl.as_ref()
                        .ok()
                        .and_then(Option::as_deref)
                        .unwrap_or_default(),
                ));
            }
            let verdict = dependency_verdict(&sibling, &svc, &sl);
            let decided = match (&call.nodes, &sibling) {
                (Some(nodes), Ok(SiblingMatch::None)) => {
                    // No sibling Pacto: the Service named after the dependency, seen through the
                    // target's outbound connections (docs/design/observation.md#node-evidence).
                    let namespace = call.target.namespace.clone();
                    let (svc, sl) = self
                        .sibling_service(&namespace, &dependency.name, &mut call.errors)
                        .await;
                    let addresses = match (&svc, &sl) {
                        (Ok(Some(service)), Ok(slices))
                            if service.spec.as_ref().and_then(|s| s.type_.as_deref())
                                != Some("ExternalName") =>
                        {
                            edges
                                .services
                                .insert((namespace.clone(), dependency.name.clone()));
                            call.declared_addresses.extend(addresses::canonical_of(
                                Some(service),
                                slices.as_deref().unwrap_or_default(),
                            ));
                            Some(addresses::of(
                                Some(service),
                                slices.as_deref().unwrap_or_default(),
                            ))
                        }
                        _ => None,
                    };
                    dependency_rule(verdict, addresses.as_ref(), &call.pods, nodes)
                }
                _ => Decided::kubernetes(verdict),
            };
            call.out.push_decided(
                ObservationKind::DependencyReachable,
                &dependency.name,
                Some(WindowKind::Dependency),
                decided,
            );
        }
        edges
    }

    /// The target's outbound peers that the contract does not declare
    /// (docs/design/observation.md#undeclared-peers): only from fresh, complete views of every
    /// pod of the target; else `None`. Never a finding, and its reads never count as failed
    /// queries (a failed read says nothing, with a log line).
    async fn undeclared_peers(&self, call: &Call) -> Option<Vec<Peer>> {
        let nodes = call.nodes.as_ref()?;
        if call.pods.is_empty() {
            return None;
        }
        // Every pod's connection history must be complete: a pod left out (hostNetwork, a node
        // the agent does not cover) leaves the list incomplete too.
        let views = crate::node_evidence::views(&call.pods, nodes, Need::Connections).ok()?;
        let views: Vec<(&PodRef, &crate::node_evidence::PodView)> = views
            .into_iter()
            .map(|(pod, view)| view.map(|v| (pod, v)))
            .collect::<Option<_>>()?;
        let state = &call.state;
        let mut excluded = call.declared_addresses.clone();
        if let Ok(Some(service)) = &state.service {
            excluded.extend(addresses::canonical_of(
                Some(service),
                state
                    .slices
                    .as_ref()
                    .ok()
                    .and_then(Option::as_deref)
                    .unwrap_or_default(),
            ));
        }
        let said_nothing = |error: &str| {
            tracing::warn!(
                namespace = call.target.namespace.as_str(),
                pacto = %call.target.pacto_name,
                error,
                "node-agent evidence: undeclared peers not listed"
            );
        };
        for (namespace, name) in SYSTEM_SERVICES {
            let mut ignored = Errors::default();
            match self.sibling_service(namespace, name, &mut ignored).await {
                (Ok(service), Ok(slices)) => excluded.extend(addresses::canonical_of(
                    service.as_ref(),
                    slices.as_deref().unwrap_or_default(),
                )),
                (Err(e), _) | (_, Err(e)) => {
                    said_nothing(&e.message);
                    return None;
                }
            }
        }
        let candidates = peers::candidates(&views, &excluded);
        if candidates.is_empty() {
            return Some(Vec::new());
        }
        let wanted = candidates.keys().copied().collect();
        let services = match self.cluster.services_by_address(&wanted).await {
            Ok(services) => services,
            Err(e) => {
                said_nothing(&e.message);
                return None;
            }
        };
        let pactos = match self.cluster.pactos().await {
            Ok(pactos) => peers::pactos_by_service(&pactos),
            Err(e) => {
                said_nothing(&e.message);
                return None;
            }
        };
        Some(peers::resolve(&candidates, &services, &pactos))
    }

    /// A sibling's Service and, when it exists, its slices.
    async fn sibling_service(
        &self,
        namespace: &str,
        name: &str,
        errors: &mut Errors,
    ) -> (Fetched<Service>, Fetched<Vec<EndpointSlice>>) {
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

    /// Configurations: the bound ConfigMap (data) or Secret (metadata only), validated against
    /// the locally resolvable schema.
    async fn configurations(&self, call: &mut Call, schemas: &BTreeMap<String, Vec<u8>>) {
        for configuration in &call.contract.configurations {
            call.out
                .declare(WindowKind::Configuration, &configuration.name);
            let binding = call
                .target
                .spec
                .config_bindings
                .iter()
                .find(|b| b.configuration == configuration.name);
            let object = match binding {
                None => None,
                Some(b) => Some(
                    self.bound_object(&call.target.namespace, b, &mut call.errors)
                        .await,
                ),
            };
            let verdict = configuration_verdict(
                configuration.required,
                binding,
                object.as_ref(),
                schemas.get(&configuration.name).map(Vec::as_slice),
            );
            call.out.push(
                ObservationKind::ConfigurationPresent,
                &configuration.name,
                Some(WindowKind::Configuration),
                verdict,
            );
        }
    }

    async fn bound_object(
        &self,
        namespace: &str,
        binding: &ConfigBinding,
        errors: &mut Errors,
    ) -> BoundObject {
        match binding.kind {
            ConfigBindingKind::Secret if !self.options.observe_secrets => {
                BoundObject::SecretNotObserved
            }
            ConfigBindingKind::Secret => {
                let f = self.cluster.secret_exists(namespace, &binding.name).await;
                errors.note(&f);
                BoundObject::Secret(f)
            }
            ConfigBindingKind::ConfigMap => {
                let f = self.cluster.config_map_data(namespace, &binding.name).await;
                errors.note(&f);
                BoundObject::ConfigMap(f)
            }
        }
    }

    /// The metrics capability, only with `--enable-metrics-observation`: the binding checks,
    /// the namespace's monitors, then discovery and one scrape.
    async fn metrics(
        &self,
        target: &Target,
        binding: Option<&Binding>,
        state: &TargetState,
    ) -> Verdict {
        if !self.options.enable_metrics {
            return Verdict::unsupported();
        }
        let bound = match metrics_capability::bound_service(target, binding, &state.service) {
            Ok(bound) => bound,
            Err(verdict) => return verdict,
        };
        let monitors = self.cluster.monitors(&target.namespace).await;
        let input = MetricsInput {
            slices: &state.slices,
            workload: &state.workload,
            service_monitors: &monitors.service_monitors,
            pod_monitors: &monitors.pod_monitors,
        };
        metrics_capability::observe(&self.prober, target, bound, input).await
    }

    /// The health capability: a probe when enabled, else (or on a transport error) the
    /// passive verdict.
    async fn health(
        &self,
        target: &Target,
        binding: Option<&Binding>,
        state: &TargetState,
    ) -> Verdict {
        let service = &state.service;
        let resolved = match capability_target(binding, &target.spec.interface_bindings, service) {
            Ok(t) => t,
            Err(verdict) => return verdict,
        };
        let refusal = match service {
            Ok(Some(service)) => probe_refusal(service),
            _ => None,
        };
        if let Some(reason) = refusal.filter(|_| self.options.enable_probing) {
            tracing::debug!(reason, "health probe refused; passive verdict");
        } else if self.options.enable_probing
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
        passive_verdict(&resolved, &state.workload, &state.slices)
    }
}

/// The target's Service, its slices and its workload, as fetched once per call.
struct TargetState {
    service: Fetched<Service>,
    slices: Fetched<Vec<EndpointSlice>>,
    workload: Fetched<WorkloadObject>,
}

/// One Observe call in progress: its inputs, what was fetched, the failed queries and the
/// observations so far.
struct Call {
    target: Target,
    contract: Arc<Contract>,
    state: TargetState,
    errors: Errors,
    out: Assembler,
    /// The target's pods (node evidence on).
    pods: Vec<PodRef>,
    /// Their nodes' states (`None`: node evidence off or unreadable).
    nodes: Option<NodeStates>,
    /// When the first of those nodes turns stale unless heard from again.
    node_due: Option<Timestamp>,
    /// The addresses of the Services the declared dependencies matched (never undeclared peers).
    declared_addresses: BTreeSet<std::net::IpAddr>,
}

impl Call {
    /// Workload and persistence (subject: the contract's service name), when a workload name
    /// resolved.
    fn workload_and_persistence(&mut self) {
        if self.target.spec.resolved_workload().is_none() {
            return;
        }
        let subject = self.contract.service.name.as_str();
        let workload = &self.state.workload;
        if let Some(declared) = self.contract.workload.as_deref().filter(|w| !w.is_empty()) {
            let verdict =
                workload_verdict(declared, self.target.spec.workload_explicit(), workload);
            self.out
                .push(ObservationKind::WorkloadObserved, subject, None, verdict);
        }
        if self
            .contract
            .state
            .as_ref()
            .is_some_and(|s| s.persistence.durability == "persistent")
        {
            let verdict = persistence_verdict(workload);
            self.out
                .push(ObservationKind::PersistenceObserved, subject, None, verdict);
        }
    }

    /// The legacy snapshot of the target's objects.
    fn snapshot(&self) -> Snapshot {
        let state = &self.state;
        Snapshot {
            service: self.target.service_name().map(|name| ResourceExistence {
                name: name.to_owned(),
                kind: String::new(),
                exists: matches!(state.service, Ok(Some(_))),
            }),
            workload: self
                .target
                .spec
                .resolved_workload()
                .map(|(name, kind)| ResourceExistence {
                    name,
                    kind: kind.as_str().to_owned(),
                    exists: matches!(state.workload, Ok(Some(_))),
                }),
            observed_runtime: state
                .workload
                .as_ref()
                .ok()
                .and_then(Option::as_ref)
                .map(observed_runtime),
        }
    }

    /// Whether the subject's own object (the Service, else the workload) was looked for and
    /// is not there (docs/design/observation.md#target-resolution). A failed read is not an
    /// absence.
    fn subject_missing(&self) -> bool {
        if self.target.service_name().is_some() {
            matches!(self.state.service, Ok(None))
        } else if self.target.spec.resolved_workload().is_some() {
            matches!(self.state.workload, Ok(None))
        } else {
            false
        }
    }

    /// The EvidenceSet's subject: the Service, else the workload, else the Pacto.
    fn subject(&self) -> SubjectRef {
        let ns = &self.target.namespace;
        match (
            self.target.service_name(),
            self.target.spec.resolved_workload(),
        ) {
            (Some(s), _) => SubjectRef::new("service", format!("{ns}/{s}")),
            (None, Some((w, _))) => SubjectRef::new("workload", format!("{ns}/{w}")),
            (None, None) => SubjectRef::new("pacto", format!("{ns}/{}", self.target.pacto_name)),
        }
    }

    /// Logs and counts the failed queries and assembles the output.
    fn finish(self, contract_ref: String, now: Timestamp, edges: DependencyEdges) -> ObserveOutput {
        let snapshot = self.snapshot();
        let subject = self.subject();
        let subject_missing = self.subject_missing();
        let Self {
            target,
            errors,
            out,
            node_due,
            ..
        } = self;
        for e in &errors.0 {
            tracing::warn!(namespace = target.namespace.as_str(), pacto = %target.pacto_name, error = %e, "kubernetes query failed");
        }
        metrics::counter!(crate::metrics::API_ERRORS_TOTAL).increment(errors.0.len() as u64);
        ObserveOutput {
            evidence: EvidenceSet {
                subject,
                contract_ref,
                source: SOURCE.to_owned(),
                observed_at: now,
                observations: Some(out.observations),
                subject_missing,
            },
            // Observe again when a pending streak spans the window or when node evidence in use
            // turns stale (docs/design/observation.md#node-evidence).
            window_due_at: match (out.windows.next_due(&out.declared), node_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            windows: out.windows.finish(&out.declared),
            api_errors: errors.0,
            snapshot,
            dependency_edges: edges,
            undeclared_peers: None,
        }
    }
}
