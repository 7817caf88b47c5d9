//! WatchTargets: which Pactos must be re-observed because something they target changed.
//!
//! The [`ReferenceIndex`] maps watched objects to the Pactos that reference them: the target
//! Service and its EndpointSlices (label `kubernetes.io/service-name`), the workload (name **and** kind), the
//! ConfigMaps and Secrets of `configBindings`, and — learned from Observe calls — dependency
//! siblings (their Pacto, Service and EndpointSlices). [`affected`] is the pure mapping; the
//! [`TargetHub`] holds the index, is fed by the watch streams ([`crate::watch`]) and coalesces
//! notifications per subscriber.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::Stream;
use pacto_api::{ConfigBindingKind, Pacto, WorkloadKind};
use pacto_runtime::CancellationToken;
use tokio::sync::broadcast;

use crate::dependency::reference_base;
use crate::k8s::SERVICE_NAME_LABEL;

/// How long a subscriber gathers the changes that follow a batch before sending them
/// (coalescing; docs/design/observation.md#change-notifications).
pub const COALESCE: Duration = Duration::from_millis(150);

pub use pacto_api::PactoKey;

/// The kinds WatchTargets reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchedKind {
    /// core/v1 Service.
    Service,
    /// discovery/v1 EndpointSlice.
    EndpointSlice,
    /// A workload kind.
    Workload(WorkloadKind),
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Secret.
    Secret,
}

impl WatchedKind {
    /// The kind's name (in logs and notification reasons).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Service => "Service",
            Self::EndpointSlice => "EndpointSlice",
            Self::Workload(kind) => kind.as_str(),
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
        }
    }
}

/// A change of a watched object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectChange {
    /// Its kind.
    pub kind: WatchedKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its labels (EndpointSlices: the service-name label).
    pub labels: BTreeMap<String, String>,
    /// `applied` or `deleted`.
    pub verb: &'static str,
}

/// What one Pacto references (from its spec).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PactoRefs {
    /// `spec.target.serviceName`.
    pub service: Option<String>,
    /// The resolved workload.
    pub workload: Option<(String, WorkloadKind)>,
    /// Bound ConfigMaps.
    pub config_maps: BTreeSet<String>,
    /// Bound Secrets.
    pub secrets: BTreeSet<String>,
    /// `(resolvedRef base, version)` from its status (what dependents match against).
    pub contract: Option<(String, String)>,
}

impl PactoRefs {
    /// The references of a Pacto object.
    pub fn of(pacto: &Pacto) -> Self {
        let target = pacto.spec.target.as_ref();
        let mut refs = Self {
            service: target
                .and_then(|t| t.service_name.clone())
                .filter(|s| !s.is_empty()),
            workload: pacto.spec.resolved_workload(),
            contract: pacto
                .status
                .as_ref()
                .and_then(|s| s.contract.as_ref())
                .and_then(|c| {
                    c.resolved_ref
                        .as_deref()
                        .filter(|r| !r.is_empty())
                        .map(|r| (reference_base(r), c.version.clone()))
                }),
            ..Self::default()
        };
        for binding in target
            .map(|t| t.config_bindings.as_slice())
            .unwrap_or_default()
        {
            match binding.kind {
                ConfigBindingKind::ConfigMap => refs.config_maps.insert(binding.name.clone()),
                ConfigBindingKind::Secret => refs.secrets.insert(binding.name.clone()),
            };
        }
        refs
    }
}

/// What an Observe call learned about a Pacto's dependencies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyEdges {
    /// Normalised bases of the declared dependency refs.
    pub bases: BTreeSet<String>,
    /// Sibling Services `(namespace, name)` the dependencies resolved to.
    pub services: BTreeSet<(String, String)>,
    /// Nodes whose node-agent evidence the call read (docs/design/observation.md#node-evidence).
    pub nodes: BTreeSet<String>,
}

/// The index behind WatchTargets: what each Pacto references, and the dependency edges its
/// last Observe resolved.
#[derive(Debug, Clone, Default)]
pub struct ReferenceIndex {
    pactos: HashMap<PactoKey, PactoRefs>,
    dependencies: HashMap<PactoKey, DependencyEdges>,
}

impl ReferenceIndex {
    /// Records (or replaces) a Pacto; returns the Pactos to notify because a sibling they
    /// depend on changed its contract (the Pacto's own status writes otherwise notify nobody).
    pub fn upsert_pacto(&mut self, key: &PactoKey, refs: &PactoRefs) -> BTreeSet<PactoKey> {
        let previous = self.pactos.insert(key.clone(), refs.clone());
        let key = key.clone();
        let mut out = BTreeSet::new();
        if previous.as_ref().map(|p| &p.contract) != Some(&refs.contract) {
            let bases: Vec<&String> = previous
                .as_ref()
                .and_then(|p| p.contract.as_ref())
                .into_iter()
                .chain(refs.contract.as_ref())
                .map(|(base, _)| base)
                .collect();
            out.extend(self.dependents_of_bases(&bases, &key));
        }
        if previous.as_ref().map(|p| &p.service) != Some(&refs.service) {
            let services: Vec<(String, String)> = previous
                .as_ref()
                .and_then(|p| p.service.clone())
                .into_iter()
                .chain(refs.service.clone())
                .map(|s| (key.0.clone(), s))
                .collect();
            for (dependent, edges) in &self.dependencies {
                if *dependent != key && services.iter().any(|s| edges.services.contains(s)) {
                    out.insert(dependent.clone());
                }
            }
        }
        out
    }

    /// Forgets a deleted Pacto; returns its dependents.
    pub fn remove_pacto(&mut self, key: &PactoKey) -> BTreeSet<PactoKey> {
        self.dependencies.remove(key);
        match self.pactos.remove(key) {
            Some(refs) => {
                let bases: Vec<&String> =
                    refs.contract.as_ref().map(|(b, _)| b).into_iter().collect();
                self.dependents_of_bases(&bases, key)
            }
            None => BTreeSet::new(),
        }
    }

    fn dependents_of_bases(&self, bases: &[&String], except: &PactoKey) -> BTreeSet<PactoKey> {
        self.dependencies
            .iter()
            .filter(|(k, edges)| *k != except && bases.iter().any(|b| edges.bases.contains(*b)))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Records what an Observe call resolved for a Pacto's dependencies.
    pub fn set_dependencies(&mut self, key: PactoKey, edges: DependencyEdges) {
        if edges == DependencyEdges::default() {
            self.dependencies.remove(&key);
        } else {
            self.dependencies.insert(key, edges);
        }
    }

    /// The Pactos whose last Observe read node-agent evidence of `node`.
    pub fn pactos_on_node(&self, node: &str) -> BTreeSet<PactoKey> {
        self.dependencies
            .iter()
            .filter(|(_, edges)| edges.nodes.contains(node))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Pactos and dependency edges known, for the cache-size gauge.
    pub fn sizes(&self) -> (usize, usize) {
        (self.pactos.len(), self.dependencies.len())
    }
}

/// The Pactos a change concerns.
pub fn affected(index: &ReferenceIndex, change: &ObjectChange) -> BTreeSet<PactoKey> {
    let ns = change.namespace.as_str();
    let service_of_slice = change.labels.get(SERVICE_NAME_LABEL).map(String::as_str);
    let service_name = match change.kind {
        WatchedKind::Service => Some(change.name.as_str()),
        WatchedKind::EndpointSlice => service_of_slice,
        _ => None,
    };
    let mut out = BTreeSet::new();
    for ((pacto_ns, pacto_name), refs) in &index.pactos {
        if pacto_ns != ns {
            continue;
        }
        let hit = match change.kind {
            WatchedKind::Service | WatchedKind::EndpointSlice => {
                service_name.is_some() && refs.service.as_deref() == service_name
            }
            WatchedKind::Workload(kind) => refs
                .workload
                .as_ref()
                .is_some_and(|(name, k)| *k == kind && *name == change.name),
            WatchedKind::ConfigMap => refs.config_maps.contains(&change.name),
            WatchedKind::Secret => refs.secrets.contains(&change.name),
        };
        if hit {
            out.insert((pacto_ns.clone(), pacto_name.clone()));
        }
    }
    if let Some(service) = service_name {
        let sibling = (ns.to_owned(), service.to_owned());
        for (dependent, edges) in &index.dependencies {
            if edges.services.contains(&sibling) {
                out.insert(dependent.clone());
            }
        }
    }
    out
}

/// One notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetChange {
    /// The Pacto.
    pub pacto: PactoKey,
    /// What changed, for logs.
    pub reason: String,
}

/// The shared index and the notification fan-out.
#[derive(Debug, Clone)]
pub struct TargetHub {
    index: Arc<Mutex<ReferenceIndex>>,
    tx: broadcast::Sender<TargetChange>,
}

impl Default for TargetHub {
    fn default() -> Self {
        Self::new()
    }
}

impl TargetHub {
    /// An empty hub.
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(4096);
        Self {
            index: Arc::new(Mutex::new(ReferenceIndex::default())),
            tx,
        }
    }

    fn with_index<T>(&self, f: impl FnOnce(&mut ReferenceIndex) -> T) -> T {
        let mut guard = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        let out = f(&mut guard);
        let (pactos, edges) = guard.sizes();
        metrics::gauge!(crate::metrics::WATCH_INDEX_OBJECTS, "kind" => "pacto").set(pactos as f64);
        metrics::gauge!(crate::metrics::WATCH_INDEX_OBJECTS, "kind" => "dependency_edges")
            .set(edges as f64);
        out
    }

    fn publish(&self, pactos: BTreeSet<PactoKey>, reason: &str) {
        for pacto in pactos {
            // no subscriber is fine
            let _ = self.tx.send(TargetChange {
                pacto,
                reason: reason.to_owned(),
            });
        }
    }

    /// Applies a Pacto event.
    pub fn pacto_applied(&self, pacto: &Pacto) {
        let key = pacto_key(pacto);
        let notify = self.with_index(|i| i.upsert_pacto(&key, &PactoRefs::of(pacto)));
        self.publish(
            notify,
            &format!("dependency Pacto {}/{} changed", key.0, key.1),
        );
    }

    /// Applies a Pacto deletion.
    pub fn pacto_deleted(&self, pacto: &Pacto) {
        let key = pacto_key(pacto);
        let notify = self.with_index(|i| i.remove_pacto(&key));
        self.publish(
            notify,
            &format!("dependency Pacto {}/{} deleted", key.0, key.1),
        );
    }

    /// Whether the index knows the Pacto `key`.
    pub fn knows(&self, key: &PactoKey) -> bool {
        self.with_index(|i| i.pactos.contains_key(key))
    }

    /// Records the dependency edges an Observe call resolved.
    pub fn set_dependencies(&self, key: PactoKey, edges: DependencyEdges) {
        self.with_index(|i| i.set_dependencies(key, edges));
    }

    /// Node-agent evidence of `node` changed what an Observe would read: wakes the Pactos whose
    /// last Observe read it.
    pub fn node_changed(&self, node: &str) {
        let notify = self.with_index(|i| i.pactos_on_node(node));
        if notify.is_empty() {
            return;
        }
        tracing::debug!(node, pactos = notify.len(), "node-agent evidence changed");
        self.publish(
            notify,
            &format!("node-agent evidence of node {node} changed"),
        );
    }

    /// Applies a change of a watched object.
    pub fn object_changed(&self, change: &ObjectChange) {
        let notify = self.with_index(|i| affected(i, change));
        if notify.is_empty() {
            return;
        }
        // A stage of a change's way to a status (docs/design/observation.md#change-notifications).
        tracing::debug!(
            kind = change.kind.as_str(),
            namespace = %change.namespace,
            name = %change.name,
            verb = change.verb,
            pactos = notify.len(),
            "watched object changed"
        );
        self.publish(
            notify,
            &format!(
                "{} {}/{} {}",
                change.kind.as_str(),
                change.namespace,
                change.name,
                change.verb
            ),
        );
    }

    /// A coalesced stream of notifications for `namespace` (empty = all), ending at `shutdown`
    /// (docs/design/observation.md#change-notifications). The first change after a quiet spell
    /// goes out at once, with whatever had already arrived behind it (the leading send); a
    /// window of [`COALESCE`] then follows every batch sent, and what arrives in it goes out as
    /// one batch when it closes. A window that closes empty ends the spell. So a change is sent
    /// without waiting, and the changes it sets off (a ReplicaSet, the Pods' endpoints) cost at
    /// most one more batch per window.
    pub fn subscribe(
        &self,
        namespace: String,
        shutdown: CancellationToken,
    ) -> impl Stream<Item = Vec<TargetChange>> + Send + 'static {
        self.subscribe_with_window(namespace, shutdown, || tokio::time::sleep(COALESCE))
    }

    /// [`Self::subscribe`] with the coalescing window as a parameter: `window()` is started
    /// after each batch sent, and completes the window (tests end it on cue).
    fn subscribe_with_window<W, F>(
        &self,
        namespace: String,
        shutdown: CancellationToken,
        window: W,
    ) -> impl Stream<Item = Vec<TargetChange>> + Send + 'static
    where
        W: Fn() -> F + Clone + Send + 'static,
        F: Future<Output = ()> + Send,
    {
        let rx = self.tx.subscribe();
        // `windowed`: a batch went out and its window has not yet closed empty.
        futures::stream::unfold(
            (rx, shutdown, false),
            move |(mut rx, shutdown, mut windowed)| {
                let namespace = namespace.clone();
                let window = window.clone();
                async move {
                    let mut batch = Batch::new(&namespace);
                    loop {
                        if windowed {
                            let closed = window();
                            tokio::pin!(closed);
                            loop {
                                tokio::select! {
                                    () = shutdown.cancelled() => return None,
                                    () = &mut closed => break,
                                    received = rx.recv() => if !batch.take(received) {
                                        break;
                                    },
                                }
                            }
                            if batch.is_empty() {
                                windowed = false;
                                continue;
                            }
                        } else {
                            // quiet: wait for the first relevant change
                            while batch.is_empty() {
                                tokio::select! {
                                    () = shutdown.cancelled() => return None,
                                    received = rx.recv() => if !batch.take(received) {
                                        return None;
                                    },
                                }
                            }
                            // and send it with what is already queued behind it
                            loop {
                                match rx.try_recv() {
                                    Ok(change) => {
                                        batch.take(Ok(change));
                                    }
                                    Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                                    Err(_) => break,
                                }
                            }
                            windowed = true;
                        }
                        return Some((batch.into_changes(), (rx, shutdown, windowed)));
                    }
                }
            },
        )
    }
}

/// The notifications gathered for one subscriber's next batch: one per Pacto, with the first
/// reason.
struct Batch<'a> {
    namespace: &'a str,
    changes: BTreeMap<PactoKey, String>,
}

impl<'a> Batch<'a> {
    fn new(namespace: &'a str) -> Self {
        Self {
            namespace,
            changes: BTreeMap::new(),
        }
    }

    /// Takes what the channel gave: a change (kept if of the subscriber's namespace) or a lag
    /// (nothing to keep); `false` when nothing more will come now (closed, or empty).
    fn take(&mut self, received: Result<TargetChange, broadcast::error::RecvError>) -> bool {
        match received {
            Ok(change) => {
                if self.namespace.is_empty() || change.pacto.0 == self.namespace {
                    self.changes.entry(change.pacto).or_insert(change.reason);
                }
                true
            }
            Err(broadcast::error::RecvError::Lagged(_)) => true,
            Err(broadcast::error::RecvError::Closed) => false,
        }
    }

    fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    fn into_changes(self) -> Vec<TargetChange> {
        self.changes
            .into_iter()
            .map(|(pacto, reason)| TargetChange { pacto, reason })
            .collect()
    }
}

/// The identity of a Pacto object.
pub fn pacto_key(pacto: &Pacto) -> PactoKey {
    (
        pacto.metadata.namespace.clone().unwrap_or_default(),
        pacto.metadata.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use pacto_api::testing::PactoBuilder;
    use pacto_api::{ConfigBinding, ContractRef, TargetRef, WorkloadRef};

    use super::*;

    fn key(ns: &str, name: &str) -> PactoKey {
        (ns.to_owned(), name.to_owned())
    }

    fn change(kind: WatchedKind, ns: &str, name: &str, labels: &[(&str, &str)]) -> ObjectChange {
        ObjectChange {
            kind,
            namespace: ns.into(),
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            verb: "applied",
        }
    }

    fn pacto(ns: &str, name: &str, service: &str, resolved: Option<&str>) -> Pacto {
        let builder = PactoBuilder::new(name, ContractRef::default())
            .namespace(ns)
            .target(TargetRef {
                service_name: Some(service.into()),
                workload_ref: Some(WorkloadRef {
                    name: format!("{service}-wl"),
                    kind: Some(WorkloadKind::StatefulSet),
                }),
                interface_bindings: vec![],
                config_bindings: vec![
                    ConfigBinding {
                        configuration: "c".into(),
                        kind: ConfigBindingKind::ConfigMap,
                        name: format!("{service}-cm"),
                        key: None,
                        format: None,
                    },
                    ConfigBinding {
                        configuration: "s".into(),
                        kind: ConfigBindingKind::Secret,
                        name: format!("{service}-secret"),
                        key: None,
                        format: None,
                    },
                ],
            });
        match resolved {
            Some(r) => builder.resolved(name, "1.0.0", r),
            None => builder,
        }
        .build()
    }

    #[test]
    fn affected_table() {
        let mut index = ReferenceIndex::default();
        index.upsert_pacto(
            &key("a", "orders"),
            &PactoRefs::of(&pacto("a", "orders", "orders", None)),
        );
        index.upsert_pacto(
            &key("b", "db"),
            &PactoRefs::of(&pacto("b", "db", "db", Some("ghcr.io/acme/db:1.0.0"))),
        );
        index.set_dependencies(
            key("a", "orders"),
            DependencyEdges {
                bases: BTreeSet::from(["ghcr.io/acme/db".to_owned()]),
                services: BTreeSet::from([("b".to_owned(), "db".to_owned())]),
                nodes: BTreeSet::from(["node-1".to_owned()]),
            },
        );
        let orders = BTreeSet::from([key("a", "orders")]);
        // Node-agent evidence of a node wakes the Pactos whose last Observe read it.
        assert_eq!(index.pactos_on_node("node-1"), orders);
        assert!(index.pactos_on_node("node-2").is_empty());
        let db_and_orders = BTreeSet::from([key("a", "orders"), key("b", "db")]);
        let none = BTreeSet::new();
        let cases = vec![
            (
                "target service",
                change(WatchedKind::Service, "a", "orders", &[]),
                orders.clone(),
            ),
            (
                "slice via label",
                change(
                    WatchedKind::EndpointSlice,
                    "a",
                    "orders-x1",
                    &[(SERVICE_NAME_LABEL, "orders")],
                ),
                orders.clone(),
            ),
            (
                "slice of another service",
                change(
                    WatchedKind::EndpointSlice,
                    "a",
                    "orders-x1",
                    &[(SERVICE_NAME_LABEL, "web")],
                ),
                none.clone(),
            ),
            (
                "same name other namespace",
                change(WatchedKind::Service, "c", "orders", &[]),
                none.clone(),
            ),
            (
                "workload name and kind",
                change(
                    WatchedKind::Workload(WorkloadKind::StatefulSet),
                    "a",
                    "orders-wl",
                    &[],
                ),
                orders.clone(),
            ),
            (
                "workload other kind",
                change(
                    WatchedKind::Workload(WorkloadKind::Deployment),
                    "a",
                    "orders-wl",
                    &[],
                ),
                none.clone(),
            ),
            (
                "bound configmap",
                change(WatchedKind::ConfigMap, "a", "orders-cm", &[]),
                orders.clone(),
            ),
            (
                "unbound configmap",
                change(WatchedKind::ConfigMap, "a", "other", &[]),
                none.clone(),
            ),
            (
                "bound secret",
                change(WatchedKind::Secret, "a", "orders-secret", &[]),
                orders.clone(),
            ),
            (
                "configmap named like the secret",
                change(WatchedKind::ConfigMap, "a", "orders-secret", &[]),
                none.clone(),
            ),
            (
                "sibling service slices notify dependents",
                change(
                    WatchedKind::EndpointSlice,
                    "b",
                    "db-1",
                    &[(SERVICE_NAME_LABEL, "db")],
                ),
                db_and_orders,
            ),
        ];
        for (name, c, want) in cases {
            assert_eq!(affected(&index, &c), want, "{name}");
        }
    }

    #[test]
    fn pacto_updates_notify_dependents_only_on_contract_change() {
        let mut index = ReferenceIndex::default();
        index.set_dependencies(
            key("a", "orders"),
            DependencyEdges {
                bases: BTreeSet::from(["ghcr.io/acme/db".to_owned()]),
                services: BTreeSet::new(),
                nodes: BTreeSet::new(),
            },
        );
        let db = pacto("b", "db", "db", Some("ghcr.io/acme/db:1.0.0"));
        assert_eq!(
            index.upsert_pacto(&key("b", "db"), &PactoRefs::of(&db)),
            BTreeSet::from([key("a", "orders")]),
            "a new sibling appears"
        );
        assert!(
            index
                .upsert_pacto(&key("b", "db"), &PactoRefs::of(&db))
                .is_empty(),
            "status-only rewrite is silent"
        );
        let unrelated = pacto("b", "cache", "cache", Some("ghcr.io/acme/cache:1.0.0"));
        assert!(
            index
                .upsert_pacto(&key("b", "cache"), &PactoRefs::of(&unrelated))
                .is_empty()
        );
        assert_eq!(
            index.remove_pacto(&key("b", "db")),
            BTreeSet::from([key("a", "orders")])
        );
    }

    /// The coalescing window is driven by the test (no clock). The first change after a quiet
    /// spell is sent at once, with what was already queued; what arrives while the window that
    /// follows is open is one batch, keyed by Pacto with the first reason kept, sent when it
    /// closes; other namespaces are filtered out; a window that closes empty ends the spell, and
    /// the next change is sent at once again.
    #[tokio::test]
    async fn a_change_goes_out_at_once_and_what_follows_in_the_window_as_one_batch() {
        use futures::{FutureExt, StreamExt};
        let hub = TargetHub::new();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let window = {
            let gate = Arc::clone(&gate);
            move || {
                let gate = Arc::clone(&gate);
                async move { gate.acquire().await.unwrap().forget() }
            }
        };
        let mut stream =
            Box::pin(hub.subscribe_with_window("team".into(), CancellationToken::new(), window));
        let send = |ns: &str, name: &str, reason: &str| {
            hub.tx
                .send(TargetChange {
                    pacto: key(ns, name),
                    reason: reason.into(),
                })
                .unwrap();
        };
        let change = |name: &str, reason: &str| TargetChange {
            pacto: key("team", name),
            reason: reason.into(),
        };
        send("other", "web", "Service web applied");
        send("team", "web", "Service web applied");
        send("team", "db", "Service db applied");
        assert_eq!(
            stream.next().now_or_never(),
            Some(Some(vec![
                change("db", "Service db applied"),
                change("web", "Service web applied")
            ])),
            "the leading send, with what was queued behind it"
        );

        send("team", "web", "ConfigMap web-cm applied");
        send("other", "web", "Service web applied");
        send("team", "api", "Secret api-secret applied");
        send("team", "web", "EndpointSlice web-x applied");
        assert!(stream.next().now_or_never().is_none(), "window still open");
        gate.add_permits(1);
        assert_eq!(
            stream.next().await.unwrap(),
            vec![
                change("api", "Secret api-secret applied"),
                change("web", "ConfigMap web-cm applied"),
            ]
        );

        // The next window closes empty: quiet again, so the next change goes out at once.
        assert!(stream.next().now_or_never().is_none(), "a window is open");
        gate.add_permits(1);
        assert!(stream.next().now_or_never().is_none(), "nothing pending");
        send("team", "web", "Service web deleted");
        assert_eq!(
            stream.next().now_or_never(),
            Some(Some(vec![change("web", "Service web deleted")]))
        );
    }
}
