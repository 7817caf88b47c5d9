//! The NodeAgentReports service: node agents stream their node's socket view, the observer keeps
//! the latest accepted report per node (docs/design/node-agent.md#report-stream).
//!
//! Two proofs guard every report. The caller's client certificate must carry an identity on the
//! node-agent allow-list (a tonic interceptor, separate from the Observe allow-list), and the
//! stream's `authorization: Bearer <token>` metadata must hold a ServiceAccount token that a
//! TokenReview accepts for the agent's ServiceAccount, bound to a pod on the node the report is
//! about (the `authentication.kubernetes.io/node-name` extra). The token is checked again for
//! every report (through a short, bounded cache keyed by the token's SHA-256, never the token), so
//! a report about another node is refused even on an accepted stream.
//!
//! The registry ([`NodeReports`]) is memory only: a restarted observer knows a node again from that
//! node's next report.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures::{Stream, StreamExt};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::PostParams;
use pacto_proto::observer::{NodeReport, ReportAck, node_agent_reports_server};
use prost::Message;
use sha2::{Digest, Sha256};
use tonic::{Request, Response, Status, Streaming};

use crate::metrics::{NODE_AGENTS_CONNECTED, NODE_REPORTS_TOTAL};

/// The gRPC service name (what the node-agent allow-list guards).
pub const NODE_REPORTS_SERVICE: &str = "pacto.observer.v1.NodeAgentReports";

/// The extra claim a pod-bound ServiceAccount token carries with its pod's node.
pub const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";

/// The bounds of a report, shared with the node agent (docs/design/node-agent.md#bounds): the
/// largest accepted report (encoded), and the most pods, listeners and connections per pod kept
/// — a report beyond the per-pod ones is cut, the pod marked Partial, not refused.
pub use pacto_proto::node_limits::{
    MAX_CONNECTIONS_PER_POD, MAX_LISTENERS_PER_POD, MAX_PODS, MAX_REPORT_BYTES,
};
/// Most nodes the registry holds; a report about one more new node is refused.
pub const MAX_NODES: usize = 10_000;
/// How long a TokenReview answer is reused.
pub const REVIEW_CACHE_TTL: Duration = Duration::from_secs(30);
/// Most cached TokenReview answers.
pub const REVIEW_CACHE_ENTRIES: usize = 4096;

/// A report that is not well formed (the field path and what is wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ReportError {
    /// Proto field path, e.g. `pods[3].uid`.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> ReportError {
    ReportError {
        field: field.into(),
        problem: problem.into(),
    }
}

fn required(field: impl Into<String>, value: &str) -> Result<(), ReportError> {
    if value.is_empty() {
        Err(bad(field, "required"))
    } else {
        Ok(())
    }
}

fn one_of(field: impl Into<String>, value: &str, allowed: &[&str]) -> Result<(), ReportError> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(bad(
            field,
            format!("{value:?} is not one of {}", allowed.join(", ")),
        ))
    }
}

/// Whether `name` is a valid Kubernetes node name (a DNS subdomain).
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Checks a report's required fields, vocabularies and encoded size. The pod, listener and
/// connection counts are not refused here: [`pacto_proto::node_limits::bound`] brings them
/// within the shared bounds first, one pod at a time (docs/design/node-agent.md#bounds).
pub fn validate(report: &NodeReport) -> Result<(), ReportError> {
    if !is_dns_subdomain(&report.node_name) {
        return Err(bad("node_name", "required, a DNS subdomain"));
    }
    if report.published_at.is_none() {
        return Err(bad("published_at", "required"));
    }
    let size = report.encoded_len();
    if size > MAX_REPORT_BYTES {
        return Err(bad(
            "report",
            format!("{size} bytes, more than {MAX_REPORT_BYTES}"),
        ));
    }
    let Some(collection) = &report.collection else {
        return Err(bad("collection", "required"));
    };
    one_of(
        "collection.state",
        &collection.state,
        &["Running", "Failed"],
    )?;
    if collection.state == "Failed" {
        required("collection.reason", &collection.reason)?;
    }
    for (i, pod) in report.pods.iter().enumerate() {
        let at = |field: &str| format!("pods[{i}].{field}");
        required(at("uid"), &pod.uid)?;
        required(at("namespace"), &pod.namespace)?;
        required(at("name"), &pod.name)?;
        one_of(at("coverage"), &pod.coverage, &["Complete", "Partial"])?;
        if pod.coverage == "Partial" {
            required(at("partial_reason"), &pod.partial_reason)?;
        }
        // Empty: an older agent, whose `coverage` stands for the listeners too.
        one_of(
            at("listener_coverage"),
            &pod.listener_coverage,
            &["", "Complete", "Partial"],
        )?;
        if pod.listener_coverage == "Partial" {
            required(at("listener_partial_reason"), &pod.listener_partial_reason)?;
        }
        for (j, listener) in pod.listeners.iter().enumerate() {
            one_of(
                format!("pods[{i}].listeners[{j}].protocol"),
                &listener.protocol,
                &["TCP"],
            )?;
            if listener.port == 0 || listener.port > 65535 {
                return Err(bad(format!("pods[{i}].listeners[{j}].port"), "not 1-65535"));
            }
        }
        for (j, connection) in pod.connections.iter().enumerate() {
            let at = |field: &str| format!("pods[{i}].connections[{j}].{field}");
            one_of(
                at("direction"),
                &connection.direction,
                &["inbound", "outbound"],
            )?;
            one_of(at("protocol"), &connection.protocol, &["TCP"])?;
            if connection.peer_ip.parse::<std::net::IpAddr>().is_err() {
                return Err(bad(at("peer_ip"), "not an IP address"));
            }
            if connection.peer_port > 65535 {
                return Err(bad(at("peer_port"), "not 0-65535"));
            }
        }
    }
    Ok(())
}

/// The latest accepted report of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReport {
    /// The report as received.
    pub report: NodeReport,
    /// When the observer accepted it.
    pub received_at: SystemTime,
}

/// Told the name of a node whose node-agent evidence changed.
pub type NodeNotifier = Arc<dyn Fn(&str) + Send + Sync>;

/// The latest accepted report per node, in memory, bounded by [`MAX_NODES`] (or the limit given to
/// [`NodeReports::with_limit`]). Cloning shares the registry.
#[derive(Clone)]
pub struct NodeReports {
    inner: Arc<Mutex<HashMap<String, StoredReport>>>,
    /// Open report streams per node (a node's report is "live" while one is open).
    streams: Arc<Mutex<HashMap<String, usize>>>,
    /// Told the node of every stored report and closed stream (change notifications).
    on_change: Arc<Mutex<Option<NodeNotifier>>>,
    limit: usize,
}

impl std::fmt::Debug for NodeReports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeReports")
            .field("nodes", &self.len())
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Default for NodeReports {
    fn default() -> Self {
        Self::with_limit(MAX_NODES)
    }
}

impl NodeReports {
    /// An empty registry holding at most [`MAX_NODES`] nodes.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry holding at most `limit` nodes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(HashMap::new())),
            streams: Arc::new(Mutex::new(HashMap::new())),
            on_change: Arc::new(Mutex::new(None)),
            limit,
        }
    }

    /// Calls `notify` with the node of every report stored and every stream closed from now on.
    pub fn on_change(&self, notify: NodeNotifier) {
        *self
            .on_change
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(notify);
    }

    fn changed(&self, node: &str) {
        let notify = self
            .on_change
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(notify) = notify {
            notify(node);
        }
    }

    /// Counts an open report stream of `node` until the guard is dropped.
    pub fn stream_opened(&self, node: &str) -> StreamGuard {
        *self
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(node.to_owned())
            .or_default() += 1;
        StreamGuard {
            registry: self.clone(),
            node: node.to_owned(),
        }
    }

    /// The latest report about `node` while a stream of that node is open (otherwise the
    /// observer reads the node's NodeRuntimeObservation).
    pub fn live(&self, node: &str) -> Option<StoredReport> {
        let open = self
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(node)
            .is_some_and(|n| *n > 0);
        if open { self.get(node) } else { None }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, StoredReport>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `report` as its node's latest; `false` (nothing stored) when the registry is full
    /// and the node is new.
    pub fn store(&self, report: NodeReport, received_at: SystemTime) -> bool {
        let mut map = self.lock();
        if map.len() >= self.limit && !map.contains_key(&report.node_name) {
            return false;
        }
        let node = report.node_name.clone();
        map.insert(
            node.clone(),
            StoredReport {
                report,
                received_at,
            },
        );
        drop(map);
        self.changed(&node);
        true
    }

    /// The latest accepted report about `node`.
    pub fn get(&self, node: &str) -> Option<StoredReport> {
        self.lock().get(node).cloned()
    }

    /// The nodes with a report, sorted.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self.lock().keys().cloned().collect();
        nodes.sort();
        nodes
    }

    /// How many nodes have a report.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no node has a report.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// An open report stream of one node (see [`NodeReports::stream_opened`]).
#[derive(Debug)]
pub struct StreamGuard {
    registry: NodeReports,
    node: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut streams = self
            .registry
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = streams.get_mut(&self.node) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                streams.remove(&self.node);
            }
        }
        drop(streams);
        tracing::info!(node = %self.node, "node-agent report stream closed");
        self.registry.changed(&self.node);
    }
}

/// What a TokenReview said about a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    /// The API server accepted the token for the audience.
    Authenticated {
        /// `status.user.username`.
        username: String,
        /// The node-name extra, when the token is bound to a pod on a node.
        node_name: Option<String>,
    },
    /// The API server refused it (`status.error`, possibly empty).
    Refused(String),
}

/// A TokenReview could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The API call failed.
    #[error("TokenReview failed")]
    Api(#[source] kube::Error),
}

/// Something that reviews tokens: the API server in production, a fake in unit tests.
#[tonic::async_trait]
pub trait TokenReviewer: Send + Sync + 'static {
    /// Reviews `token` for the configured audience.
    async fn review(&self, token: &str) -> Result<Review, ReviewError>;
}

/// Reviews tokens with the Kubernetes TokenReview API for one audience.
#[derive(Clone)]
pub struct KubeTokenReviewer {
    client: kube::Client,
    audience: String,
}

impl std::fmt::Debug for KubeTokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTokenReviewer")
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl KubeTokenReviewer {
    /// Reviews with `client` for `audience`.
    pub fn new(client: kube::Client, audience: impl Into<String>) -> Self {
        Self {
            client,
            audience: audience.into(),
        }
    }
}

#[tonic::async_trait]
impl TokenReviewer for KubeTokenReviewer {
    async fn review(&self, token: &str) -> Result<Review, ReviewError> {
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let request = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..TokenReview::default()
        };
        let answer = api
            .create(&PostParams::default(), &request)
            .await
            .map_err(ReviewError::Api)?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(Review::Refused(status.error.unwrap_or_default()));
        }
        let user = status.user.unwrap_or_default();
        let node_name = user
            .extra
            .as_ref()
            .and_then(|extra| extra.get(NODE_NAME_EXTRA))
            .and_then(|values| values.first())
            .filter(|name| !name.is_empty())
            .cloned();
        Ok(Review::Authenticated {
            username: user.username.unwrap_or_default(),
            node_name,
        })
    }
}

/// Who the node agents are: the username their tokens must review as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentAccount {
    /// The agent's namespace.
    pub namespace: String,
    /// The agent's ServiceAccount.
    pub service_account: String,
}

impl AgentAccount {
    /// `system:serviceaccount:<namespace>:<name>`.
    pub fn username(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        )
    }
}

type TokenHash = [u8; 32];

/// Reviews tokens through a short, bounded cache keyed by the token's SHA-256.
struct Reviews {
    reviewer: Arc<dyn TokenReviewer>,
    cache: Mutex<HashMap<TokenHash, (Instant, Review)>>,
    ttl: Duration,
}

impl Reviews {
    async fn review(&self, token: &str) -> Result<Review, ReviewError> {
        let key: TokenHash = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, review)) = cache.get(&key)
                && now.duration_since(*at) < self.ttl
            {
                return Ok(review.clone());
            }
        }
        let review = self.reviewer.review(token).await?;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.retain(|_, (at, _)| now.duration_since(*at) < self.ttl);
        if cache.len() >= REVIEW_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, (now, review.clone()));
        Ok(review)
    }
}

/// The NodeAgentReports gRPC service.
#[derive(Clone)]
pub struct NodeReportsService {
    registry: NodeReports,
    reviews: Arc<Reviews>,
    account: AgentAccount,
}

impl std::fmt::Debug for NodeReportsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeReportsService")
            .field("account", &self.account)
            .field("nodes", &self.registry.len())
            .finish_non_exhaustive()
    }
}

impl NodeReportsService {
    /// A service storing into `registry`, reviewing tokens with `reviewer` and accepting only
    /// `account`'s tokens.
    pub fn new(
        registry: NodeReports,
        reviewer: Arc<dyn TokenReviewer>,
        account: AgentAccount,
    ) -> Self {
        Self::with_cache_ttl(registry, reviewer, account, REVIEW_CACHE_TTL)
    }

    /// As [`NodeReportsService::new`], keeping TokenReview answers for `ttl`.
    pub fn with_cache_ttl(
        registry: NodeReports,
        reviewer: Arc<dyn TokenReviewer>,
        account: AgentAccount,
        ttl: Duration,
    ) -> Self {
        Self {
            registry,
            reviews: Arc::new(Reviews {
                reviewer,
                cache: Mutex::new(HashMap::new()),
                ttl,
            }),
            account,
        }
    }

    /// The registry the service stores into.
    pub fn registry(&self) -> &NodeReports {
        &self.registry
    }

    /// The node the token proves its bearer runs on, or the refusal.
    async fn node_of(&self, token: Option<&str>) -> Result<String, Status> {
        let Some(token) = token else {
            return Err(Status::unauthenticated(
                "a node agent must send its ServiceAccount token as `authorization: Bearer <token>`",
            ));
        };
        let review = self.reviews.review(token).await.map_err(|error| {
            let error = pacto_runtime::tls::error_chain(&error);
            tracing::warn!(%error, "node-agent token review failed");
            Status::unavailable(format!("cannot review the node agent's token: {error}"))
        })?;
        match review {
            Review::Refused(reason) => Err(Status::unauthenticated(format!(
                "the node agent's token was not accepted: {reason}"
            ))),
            Review::Authenticated { username, .. } if username != self.account.username() => {
                Err(Status::permission_denied(format!(
                    "{username} is not the node agent's ServiceAccount {}",
                    self.account.username()
                )))
            }
            Review::Authenticated {
                node_name: None, ..
            } => Err(Status::permission_denied(
                "the node agent's token carries no node name (it must be a token bound to the agent's pod, Kubernetes 1.30 or later)",
            )),
            Review::Authenticated {
                node_name: Some(node),
                ..
            } => Ok(node),
        }
    }

    /// Checks and stores one report sent with `token`; the ack, or why it was refused.
    pub async fn accept(
        &self,
        token: Option<&str>,
        report: NodeReport,
    ) -> Result<ReportAck, Status> {
        let outcome = self.accept_inner(token, report).await;
        let result = if outcome.is_ok() {
            "accepted"
        } else {
            "refused"
        };
        metrics::counter!(NODE_REPORTS_TOTAL, "result" => result).increment(1);
        outcome
    }

    async fn accept_inner(
        &self,
        token: Option<&str>,
        mut report: NodeReport,
    ) -> Result<ReportAck, Status> {
        let node = self.node_of(token).await?;
        // A pod beyond the shared bounds is cut and reads Partial; the node's other pods are
        // not refused with it (docs/design/node-agent.md#bounds).
        if pacto_proto::node_limits::bound(&mut report) {
            tracing::debug!(
                node = %node,
                "node-agent report beyond the per-pod bounds: pods cut and marked Partial"
            );
        }
        validate(&report).map_err(|error| {
            tracing::warn!(node = %node, %error, "node-agent report refused: malformed");
            Status::invalid_argument(format!(
                "report from the node agent on node {node}: {error}"
            ))
        })?;
        if report.node_name != node {
            tracing::warn!(
                token_node = %node,
                report_node = %report.node_name,
                "refused a node-agent report about another node"
            );
            return Err(Status::permission_denied(format!(
                "the node agent on node {node} may only report about node {node}, not node {}",
                report.node_name
            )));
        }
        let ack = ReportAck {
            node_name: report.node_name.clone(),
            published_at: report.published_at,
        };
        if !self.registry.store(report, SystemTime::now()) {
            return Err(Status::resource_exhausted(format!(
                "the observer already holds reports of {} nodes; node {node} is refused",
                self.registry.len()
            )));
        }
        Ok(ack)
    }
}

/// Reads the bearer token of a request's metadata.
fn bearer(metadata: &tonic::metadata::MetadataMap) -> Option<String> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// Counts a connected agent stream while alive.
struct Connected;

static CONNECTED: AtomicI64 = AtomicI64::new(0);

impl Connected {
    fn new() -> Self {
        let now = CONNECTED.fetch_add(1, Ordering::Relaxed) + 1;
        #[allow(clippy::cast_precision_loss, reason = "a count of streams")]
        metrics::gauge!(NODE_AGENTS_CONNECTED).set(now as f64);
        Self
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        let now = CONNECTED.fetch_sub(1, Ordering::Relaxed) - 1;
        #[allow(clippy::cast_precision_loss, reason = "a count of streams")]
        metrics::gauge!(NODE_AGENTS_CONNECTED).set(now as f64);
    }
}

type AckStream = Pin<Box<dyn Stream<Item = Result<ReportAck, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl node_agent_reports_server::NodeAgentReports for NodeReportsService {
    type ReportStream = AckStream;

    /// In a `ReportNode` span whose `node` is the caller's once its token was reviewed.
    #[tracing::instrument(name = "ReportNode", skip_all, fields(node = tracing::field::Empty))]
    async fn report(
        &self,
        request: Request<Streaming<NodeReport>>,
    ) -> Result<Response<Self::ReportStream>, Status> {
        let token = bearer(request.metadata());
        // Refuse a stream without a usable token at once, before any report.
        let node = self.node_of(token.as_deref()).await.inspect_err(|status| {
            metrics::counter!(NODE_REPORTS_TOTAL, "result" => "refused").increment(1);
            // docs/troubleshooting.md: refused reports show in the log (the token itself never).
            tracing::warn!(
                code = ?status.code(),
                reason = status.message(),
                "node-agent report stream refused"
            );
        })?;
        tracing::Span::current().record("node", node.as_str());
        tracing::info!(node = %node, "node-agent report stream opened");
        let service = self.clone();
        let guard = (Connected::new(), self.registry.stream_opened(&node));
        let reports = request.into_inner();
        let stream = futures::stream::unfold(
            (reports, service, token, guard, false),
            |(mut reports, service, token, guard, done)| async move {
                if done {
                    return None;
                }
                let item = match reports.next().await? {
                    Ok(report) => service.accept(token.as_deref(), report).await,
                    Err(status) => Err(status),
                };
                let done = item.is_err();
                Some((item, (reports, service, token, guard, done)))
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use pacto_proto::observer::{CollectionState, Connection, Listener, PodSockets};
    use pacto_proto::prost_types::Timestamp;

    use super::*;

    pub(crate) fn report(node: &str) -> NodeReport {
        NodeReport {
            node_name: node.to_owned(),
            agent_version: "0.1.0".into(),
            published_at: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            kernel: None,
            collection: Some(CollectionState {
                state: "Running".into(),
                ..CollectionState::default()
            }),
            pods: vec![PodSockets {
                uid: "u1".into(),
                namespace: "team".into(),
                name: "web-0".into(),
                coverage: "Complete".into(),
                partial_reason: String::new(),
                listeners: vec![Listener {
                    protocol: "TCP".into(),
                    port: 8080,
                    address: "0.0.0.0".into(),
                }],
                connections: vec![Connection {
                    direction: "outbound".into(),
                    protocol: "TCP".into(),
                    peer_ip: "10.96.0.10".into(),
                    peer_port: 53,
                    first_seen: None,
                    last_seen: None,
                    count: 3,
                }],
                ..PodSockets::default()
            }],
            truncated: false,
        }
    }

    #[test]
    fn validation_names_the_field() {
        assert_eq!(validate(&report("node-a")), Ok(()));
        let field = |edit: fn(&mut NodeReport)| {
            let mut r = report("node-a");
            edit(&mut r);
            validate(&r).unwrap_err().field
        };
        assert_eq!(field(|r| r.node_name.clear()), "node_name");
        assert_eq!(field(|r| r.node_name = "Node_A".into()), "node_name");
        assert_eq!(field(|r| r.published_at = None), "published_at");
        assert_eq!(field(|r| r.collection = None), "collection");
        assert_eq!(
            field(|r| r.collection.as_mut().unwrap().state = "Sleeping".into()),
            "collection.state"
        );
        assert_eq!(
            field(|r| r.collection.as_mut().unwrap().state = "Failed".into()),
            "collection.reason"
        );
        assert_eq!(field(|r| r.pods[0].uid.clear()), "pods[0].uid");
        assert_eq!(
            field(|r| r.pods[0].coverage = "Partial".into()),
            "pods[0].partial_reason"
        );
        assert_eq!(
            field(|r| r.pods[0].listener_coverage = "Unknown".into()),
            "pods[0].listener_coverage"
        );
        assert_eq!(
            field(|r| r.pods[0].listener_coverage = "Partial".into()),
            "pods[0].listener_partial_reason"
        );
        for coverage in ["", "Complete"] {
            let mut r = report("node-a");
            r.pods[0].listener_coverage = coverage.into();
            assert_eq!(validate(&r), Ok(()), "{coverage:?}");
        }
        assert_eq!(
            field(|r| r.pods[0].listeners[0].port = 0),
            "pods[0].listeners[0].port"
        );
        assert_eq!(
            field(|r| r.pods[0].connections[0].direction = "sideways".into()),
            "pods[0].connections[0].direction"
        );
        assert_eq!(
            field(|r| r.pods[0].connections[0].peer_ip = "example.com".into()),
            "pods[0].connections[0].peer_ip"
        );
        assert_eq!(
            field(|r| r.agent_version = "x".repeat(MAX_REPORT_BYTES + 1)),
            "report"
        );
    }

    #[test]
    fn registry_keeps_the_latest_per_node_and_is_bounded() {
        let registry = NodeReports::with_limit(2);
        let t0 = SystemTime::UNIX_EPOCH;
        assert!(registry.store(report("a"), t0));
        let mut newer = report("a");
        newer.truncated = true;
        assert!(registry.store(newer.clone(), t0 + Duration::from_secs(1)));
        assert!(registry.store(report("b"), t0));
        assert!(!registry.store(report("c"), t0), "a third node is refused");
        assert_eq!(registry.nodes(), ["a", "b"]);
        let stored = registry.get("a").unwrap();
        assert_eq!(stored.report, newer);
        assert_eq!(stored.received_at, t0 + Duration::from_secs(1));
        assert!(registry.get("c").is_none());
    }

    /// Answers from a fixed table and counts calls.
    struct Fake {
        answers: HashMap<String, Review>,
        calls: std::sync::atomic::AtomicUsize,
    }

    #[tonic::async_trait]
    impl TokenReviewer for Fake {
        async fn review(&self, token: &str) -> Result<Review, ReviewError> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            Ok(self
                .answers
                .get(token)
                .cloned()
                .unwrap_or_else(|| Review::Refused("unknown token".into())))
        }
    }

    fn service() -> (NodeReportsService, Arc<Fake>) {
        let agent = |node: Option<&str>| Review::Authenticated {
            username: "system:serviceaccount:pacto-node-agent:pacto-node-agent".into(),
            node_name: node.map(str::to_owned),
        };
        let fake = Arc::new(Fake {
            answers: HashMap::from([
                ("token-a".to_owned(), agent(Some("node-a"))),
                ("token-none".to_owned(), agent(None)),
                (
                    "token-other".to_owned(),
                    Review::Authenticated {
                        username: "system:serviceaccount:team:web".into(),
                        node_name: Some("node-a".into()),
                    },
                ),
            ]),
            calls: std::sync::atomic::AtomicUsize::new(0),
        });
        let service = NodeReportsService::new(
            NodeReports::new(),
            fake.clone(),
            AgentAccount {
                namespace: "pacto-node-agent".into(),
                service_account: "pacto-node-agent".into(),
            },
        );
        (service, fake)
    }

    #[tokio::test]
    async fn reports_are_accepted_only_about_the_tokens_node() {
        let (service, fake) = service();
        let ack = service
            .accept(Some("token-a"), report("node-a"))
            .await
            .unwrap();
        assert_eq!(ack.node_name, "node-a");
        assert!(service.registry().get("node-a").is_some());

        let refused = service
            .accept(Some("token-a"), report("node-b"))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(refused.message().contains("node-a") && refused.message().contains("node-b"));
        assert!(service.registry().get("node-b").is_none());

        let none = service.accept(None, report("node-a")).await.unwrap_err();
        assert_eq!(none.code(), tonic::Code::Unauthenticated);
        let unknown = service
            .accept(Some("forged"), report("node-a"))
            .await
            .unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::Unauthenticated);
        let other = service
            .accept(Some("token-other"), report("node-a"))
            .await
            .unwrap_err();
        assert_eq!(other.code(), tonic::Code::PermissionDenied);
        assert!(other.message().contains("system:serviceaccount:team:web"));
        let unbound = service
            .accept(Some("token-none"), report("node-a"))
            .await
            .unwrap_err();
        assert_eq!(unbound.code(), tonic::Code::PermissionDenied);
        assert!(unbound.message().contains("carries no node name"));
        let invalid = service
            .accept(
                Some("token-a"),
                NodeReport {
                    published_at: None,
                    ..report("node-a")
                },
            )
            .await
            .unwrap_err();
        assert_eq!(invalid.code(), tonic::Code::InvalidArgument);
        assert!(invalid.message().contains("published_at"));

        // token-a was reviewed once, then served from the cache.
        let calls = fake.calls.load(Ordering::Relaxed);
        assert_eq!(calls, 4, "one review per distinct token");
    }

    /// A pod beyond the shared bounds (docs/design/node-agent.md#bounds) is cut and reads
    /// Partial; the report is accepted, not refused for the whole node.
    #[tokio::test]
    async fn a_crowded_pod_is_cut_and_partial_not_a_refused_report() {
        let (service, _) = service();
        let mut crowded = report("node-a");
        let mut busy = crowded.pods[0].clone();
        busy.uid = "u2".into();
        busy.listeners = vec![busy.listeners[0].clone(); MAX_LISTENERS_PER_POD + 44];
        crowded.pods.push(busy);
        let quiet = crowded.pods[0].clone();
        crowded.pods.extend(vec![quiet.clone(); MAX_PODS]);
        service.accept(Some("token-a"), crowded).await.unwrap();
        let stored = service.registry().get("node-a").unwrap().report;
        assert!(stored.truncated);
        assert_eq!(stored.pods.len(), MAX_PODS);
        assert_eq!(stored.pods[0], quiet);
        assert_eq!(stored.pods[1].listeners.len(), MAX_LISTENERS_PER_POD);
        assert_eq!(
            (
                stored.pods[1].listener_coverage.as_str(),
                stored.pods[1].listener_partial_reason.as_str()
            ),
            ("Partial", "more than 256 listeners")
        );
    }

    #[test]
    fn bearer_tokens_are_read_from_the_metadata() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        assert_eq!(bearer(&metadata), None);
        metadata.insert("authorization", "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&metadata).as_deref(), Some("abc"));
        metadata.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(bearer(&metadata), None);
        metadata.insert("authorization", "bearer  ".parse().unwrap());
        assert_eq!(bearer(&metadata), None);
    }
}
