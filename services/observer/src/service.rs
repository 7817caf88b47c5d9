//! The Observer gRPC service: Observe and WatchTargets (and, when configured, the
//! NodeAgentReports endpoint served beside it).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures::{Stream, StreamExt};
use pacto_contract::model::Contract;
use pacto_engine::Timestamp;
use pacto_proto::observer::{
    ObserveRequest, ObserveResponse, TargetChange, WatchTargetsRequest, observer_server,
};
use pacto_runtime::memo::{DEFAULT_MEMO_ENTRIES, ParseMemo};
use pacto_runtime::metrics::RpcTimer;
use pacto_runtime::scope::NamespaceScope;
use pacto_runtime::{AllowList, CancellationToken};
use tonic::{Request, Response, Status};

use crate::node_reports::NodeReportsService;
use crate::observe::Observer;
use crate::targets::TargetHub;
use crate::{SERVICE_NAME, wire};

/// The clock Observe judges windows with (injectable for tests).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The Observer gRPC service.
#[derive(Clone)]
pub struct ObserverService {
    observer: Arc<Observer>,
    hub: TargetHub,
    shutdown: CancellationToken,
    clock: Clock,
    node_agents: Option<NodeAgentEndpoint>,
    scope: NamespaceScope,
    /// The contracts of Observe requests, parsed once per distinct document.
    contracts: Arc<ParseMemo<Contract>>,
}

/// The NodeAgentReports service and the client identities allowed to call it (a list separate
/// from the Observe allow-list: docs/design/node-agent.md#report-stream).
#[derive(Debug, Clone)]
pub struct NodeAgentEndpoint {
    /// The service.
    pub service: NodeReportsService,
    /// Certificate identities of node agents.
    pub allowed: AllowList,
}

impl std::fmt::Debug for ObserverService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObserverService")
            .field("observer", &self.observer)
            .finish_non_exhaustive()
    }
}

impl ObserverService {
    /// A service using the system clock. WatchTargets streams end when `shutdown` is cancelled.
    pub fn new(observer: Observer, hub: TargetHub, shutdown: CancellationToken) -> Self {
        Self::with_clock(observer, hub, shutdown, Arc::new(Timestamp::now))
    }

    /// A service reading the time from `clock`.
    pub fn with_clock(
        observer: Observer,
        hub: TargetHub,
        shutdown: CancellationToken,
        clock: Clock,
    ) -> Self {
        Self {
            observer: Arc::new(observer),
            hub,
            shutdown,
            clock,
            node_agents: None,
            scope: NamespaceScope::all(),
            contracts: Arc::new(ParseMemo::new(
                DEFAULT_MEMO_ENTRIES,
                crate::metrics::CONTRACT_MEMO_TOTAL,
            )),
        }
    }

    /// Observes only targets of namespaces in `scope`
    /// (docs/design/architecture.md#namespace-scope).
    #[must_use]
    pub fn with_scope(mut self, scope: NamespaceScope) -> Self {
        self.scope = scope;
        self
    }

    /// Also serves NodeAgentReports, to callers on `endpoint.allowed`.
    #[must_use]
    pub fn with_node_agents(mut self, endpoint: NodeAgentEndpoint) -> Self {
        self.node_agents = Some(endpoint);
        self
    }

    /// The NodeAgentReports endpoint, when served.
    pub fn node_agents(&self) -> Option<&NodeAgentEndpoint> {
        self.node_agents.as_ref()
    }
}

impl ObserverService {
    /// Waits until the observer's caches completed their initial lists (`false` if one of
    /// their watches stopped).
    pub async fn wait_ready(&self) -> bool {
        self.observer.wait_ready().await
    }
}

type ChangeStream = Pin<Box<dyn Stream<Item = Result<TargetChange, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl observer_server::Observer for ObserverService {
    #[tracing::instrument(name = "Observe", skip_all, fields(
        namespace = request.get_ref().target.as_ref().map(|t| t.namespace.as_str()),
        pacto = request.get_ref().target.as_ref().map(|t| t.pacto_name.as_str()),
    ))]
    async fn observe(
        &self,
        request: Request<ObserveRequest>,
    ) -> Result<Response<ObserveResponse>, Status> {
        let timer = RpcTimer::start(SERVICE_NAME, "Observe");
        let input = match wire::observe_input_from_proto(request.get_ref(), &self.contracts) {
            Ok(input) => input,
            Err(error) => {
                tracing::info!(%error, "rejected Observe request");
                return timer.finish(Err(Status::from(error)));
            }
        };
        if !self.scope.admits(&input.target.namespace) {
            return timer.finish(Err(Status::failed_precondition(format!(
                "namespace {} is outside this observer's scope ({}; flags --namespace-selector, --exclude-namespaces)",
                input.target.namespace,
                self.scope.describe()
            ))));
        }
        let key = (
            input.target.namespace.clone(),
            input.target.pacto_name.clone(),
        );
        let started = Instant::now();
        let output = self.observer.observe(input, (self.clock)()).await;
        metrics::histogram!(crate::metrics::OBSERVE_SECONDS)
            .record(started.elapsed().as_secs_f64());
        self.hub
            .set_dependencies(key, output.dependency_edges.clone());
        timer
            .finish(Ok(wire::observe_output_to_proto(&output)))
            .map(Response::new)
    }

    type WatchTargetsStream = ChangeStream;

    #[tracing::instrument(name = "WatchTargets", skip_all, fields(
        namespace = %request.get_ref().namespace,
    ))]
    async fn watch_targets(
        &self,
        request: Request<WatchTargetsRequest>,
    ) -> Result<Response<Self::WatchTargetsStream>, Status> {
        let namespace = request.into_inner().namespace;
        let scope = self.scope.clone();
        let stream = self
            .hub
            .subscribe(namespace, self.shutdown.clone())
            .flat_map(move |batch| {
                let scope = scope.clone();
                let in_scope = batch
                    .into_iter()
                    .filter(move |change| scope.admits(&change.pacto.0));
                futures::stream::iter(in_scope.map(|change| {
                    metrics::counter!(crate::metrics::TARGET_CHANGES_TOTAL).increment(1);
                    tracing::debug!(
                        namespace = %change.pacto.0,
                        pacto = %change.pacto.1,
                        reason = %change.reason,
                        "target change sent"
                    );
                    Ok(TargetChange {
                        namespace: change.pacto.0,
                        pacto_name: change.pacto.1,
                        reason: change.reason,
                    })
                }))
            });
        Ok(Response::new(Box::pin(stream)))
    }
}
