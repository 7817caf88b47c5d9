//! The report streams to the observer: one `NodeReport` per publish, the same content as the
//! observation's status, to every observer replica (one stream per address the observer's name
//! resolves to), over mTLS with the pod's service-account token as bearer metadata
//! (docs/design/node-agent.md#reports).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pacto_api::{CollectionState, Direction, NodeRuntimeObservationStatus, PodCoverage, Protocol};
use pacto_proto::observer::{self as wire, node_agent_reports_client::NodeAgentReportsClient};
use pacto_proto::prost_types;
use pacto_runtime::CancellationToken;
use pacto_runtime::backoff::{self, Backoff};
use pacto_runtime::balance::BalancedChannel;
use pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tonic::transport::Channel;
use tracing::Instrument as _;

use crate::publish::{RETRY_MIN, StreamStates, is_refusal};

/// The longest wait between two connection attempts.
const RECONNECT_MAX: Duration = Duration::from_secs(30);

fn timestamp(time: Option<&Time>) -> Option<prost_types::Timestamp> {
    time.map(|t| prost_types::Timestamp {
        seconds: t.0.as_second(),
        nanos: t.0.subsec_nanosecond(),
    })
}

fn protocol(p: Protocol) -> String {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
    }
    .to_owned()
}

/// The report of `node` carrying `status`.
pub fn to_report(node: &str, status: &NodeRuntimeObservationStatus) -> wire::NodeReport {
    wire::NodeReport {
        node_name: node.to_owned(),
        agent_version: status.agent_version.clone().unwrap_or_default(),
        published_at: timestamp(status.last_published.as_ref()),
        kernel: status.kernel.as_ref().map(|k| wire::KernelInfo {
            release: k.release.clone(),
            btf: k.btf,
        }),
        collection: status.collection.as_ref().map(|c| wire::CollectionState {
            state: match c.state {
                CollectionState::Running => "Running",
                CollectionState::Failed => "Failed",
            }
            .to_owned(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        }),
        pods: status
            .pods
            .iter()
            .map(|p| wire::PodSockets {
                uid: p.uid.clone(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                coverage: match p.coverage {
                    Some(PodCoverage::Partial) => "Partial",
                    Some(PodCoverage::Complete) | None => "Complete",
                }
                .to_owned(),
                partial_reason: p.partial_reason.clone().unwrap_or_default(),
                listener_coverage: match p.listener_coverage {
                    Some(PodCoverage::Partial) => "Partial",
                    Some(PodCoverage::Complete) => "Complete",
                    None => "",
                }
                .to_owned(),
                listener_partial_reason: p.listener_partial_reason.clone().unwrap_or_default(),
                host_network: p.host_network,
                listeners: p
                    .listeners
                    .iter()
                    .map(|l| wire::Listener {
                        protocol: protocol(l.protocol),
                        port: u32::try_from(l.port).unwrap_or_default(),
                        address: l.address.clone().unwrap_or_default(),
                    })
                    .collect(),
                connections: p
                    .connections
                    .iter()
                    .map(|c| wire::Connection {
                        direction: match c.direction {
                            Direction::Inbound => "inbound",
                            Direction::Outbound => "outbound",
                        }
                        .to_owned(),
                        protocol: protocol(c.protocol),
                        peer_ip: c.peer_ip.clone(),
                        peer_port: u32::try_from(c.peer_port).unwrap_or_default(),
                        first_seen: timestamp(c.first_seen.as_ref()),
                        last_seen: timestamp(c.last_seen.as_ref()),
                        count: u64::try_from(c.count).unwrap_or_default(),
                    })
                    .collect(),
            })
            .collect(),
        truncated: status.truncated,
    }
}

/// Where the reports go.
#[derive(Debug, Clone)]
pub struct ReportTarget {
    /// The observer's replicas: every address its name resolves to (the headless `-peers`
    /// Service), each dialled with the certificate name of the observer's Service (mTLS, or
    /// plaintext under `--insecure`). Re-resolved every few seconds.
    pub observer: BalancedChannel,
    /// The projected service-account token, re-read on every connect; `None` sends none.
    pub token_path: Option<PathBuf>,
}

fn bearer(
    token_path: Option<&std::path::Path>,
) -> Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>> {
    let path = token_path?;
    match std::fs::read_to_string(path) {
        Ok(token) => {
            let value = format!("Bearer {}", token.trim()).parse().ok();
            if value.is_none() {
                tracing::warn!(path = %path.display(), "node-agent token is not valid header text; reporting without it");
            }
            value
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "node-agent cannot read its token; reporting without it");
            None
        }
    }
}

/// Streams every report `reports` carries to every observer replica until `shutdown`: one
/// stream per resolved endpoint, started and stopped as the endpoints change
/// (docs/design/node-agent.md#reports), so that each replica has the node's view first-hand.
pub async fn stream_reports(
    target: ReportTarget,
    reports: watch::Receiver<Option<wire::NodeReport>>,
    shutdown: CancellationToken,
) {
    stream_reports_recording(target, reports, StreamStates::default(), shutdown).await;
}

/// [`stream_reports`], recording into `states` what each replica answers (accepted, or refused
/// and why), for the observation's `status.reportStream`.
pub async fn stream_reports_recording(
    target: ReportTarget,
    reports: watch::Receiver<Option<wire::NodeReport>>,
    states: StreamStates,
    shutdown: CancellationToken,
) {
    let open = Arc::new(AtomicUsize::new(0));
    pacto_runtime::balance::for_each_endpoint(
        target.observer.endpoints(),
        shutdown,
        "node-agent report stream",
        |addr, channel, token| {
            // One per endpoint while it resolves, stopped by `token` and joined by
            // for_each_endpoint (itself a runtime task): not a runtime task of its own
            // (docs/design/architecture.md#runtime).
            let span = tracing::info_span!("task", task = "report-stream", %addr);
            tokio::spawn(
                stream_to(
                    Endpoint {
                        addr,
                        channel,
                        token_path: target.token_path.clone(),
                        open: Arc::clone(&open),
                        states: states.clone(),
                    },
                    reports.clone(),
                    token,
                )
                .instrument(span),
            )
        },
        |count| metrics::gauge!(crate::metrics::REPORT_ENDPOINTS).set(count as f64),
    )
    .await;
}

/// One observer replica's stream.
struct Endpoint {
    addr: SocketAddr,
    channel: Channel,
    token_path: Option<PathBuf>,
    /// Streams open now, over all endpoints.
    open: Arc<AtomicUsize>,
    /// What each replica answered.
    states: StreamStates,
}

/// Counts one open stream while it lives.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(open: &Arc<AtomicUsize>) -> Self {
        let now = open.fetch_add(1, Ordering::SeqCst) + 1;
        metrics::gauge!(crate::metrics::REPORT_STREAMS_OPEN).set(now as f64);
        Self(Arc::clone(open))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let now = self.0.fetch_sub(1, Ordering::SeqCst).saturating_sub(1);
        metrics::gauge!(crate::metrics::REPORT_STREAMS_OPEN).set(now as f64);
    }
}

/// Streams the reports to one endpoint until `stop`. Each connection starts with the latest
/// report, so a replica that restarted gets the current view at once; a broken stream is reopened
/// with its own backoff (1 s doubling to 30 s, reset by an acknowledgement): a session under
/// [`backoff::retrying`] (docs/design/architecture.md#backoff).
async fn stream_to(
    endpoint: Endpoint,
    reports: watch::Receiver<Option<wire::NodeReport>>,
    stop: CancellationToken,
) {
    let addr = endpoint.addr;
    // An endpoint no longer resolved no longer counts in `status.reportStream`.
    let _forget = Forget {
        states: endpoint.states.clone(),
        addr,
    };
    let client = NodeAgentReportsClient::new(endpoint.channel.clone())
        .max_decoding_message_size(GRPC_MAX_MESSAGE_BYTES)
        .max_encoding_message_size(GRPC_MAX_MESSAGE_BYTES);
    let backoff = Backoff::new(RETRY_MIN, RECONNECT_MAX)
        .on_failure("node-agent report stream failed; reconnecting with backoff")
        .on_recovery("node-agent reports acknowledged by the observer again");
    let span = tracing::info_span!("node-agent report stream", endpoint = %addr);
    let (endpoint, reports, stop_all) = (&endpoint, &reports, &stop);
    let session = move |session: backoff::Session| {
        let mut client = client.clone();
        async move {
            // The request stream ends with its session (or when the endpoint goes): the replica
            // sees the stream close instead of a sender that lingers behind a dropped response.
            let session_stop = stop_all.child_token();
            let _session_stop = session_stop.clone().drop_guard();
            let outbound = WatchStream::new(reports.clone())
                .filter_map(std::future::ready)
                .take_until(session_stop.cancelled_owned());
            let mut request = tonic::Request::new(outbound);
            if let Some(value) = bearer(endpoint.token_path.as_deref()) {
                request.metadata_mut().insert("authorization", value);
            }
            let ended = async {
                let mut acks = client.report(request).await?.into_inner();
                let _open = Open::new(&endpoint.open);
                while let Some(ack) = acks.message().await? {
                    metrics::counter!(crate::metrics::REPORTS_ACKED_TOTAL).increment(1);
                    endpoint.states.accepted(addr);
                    session.healthy();
                    tracing::debug!(endpoint = %addr, node = %ack.node_name, "report acknowledged");
                }
                Ok::<(), tonic::Status>(())
            }
            .await;
            match ended {
                Ok(()) => Err(StreamEnd::Closed),
                Err(status) => {
                    // A refusal (its token, identity or report) goes into the observation's
                    // status.reportStream; a transport failure keeps what the replica last
                    // answered.
                    if is_refusal(status.code()) {
                        endpoint.states.refused(
                            addr,
                            &format!("{:?}", status.code()),
                            status.message(),
                        );
                    }
                    Err(StreamEnd::Failed(status))
                }
            }
        }
    };
    backoff::retrying("node-agent report stream", backoff, stop.clone(), session)
        .instrument(span)
        .await;
}

/// How a report stream ended: every end is retried with backoff.
#[derive(Debug)]
enum StreamEnd {
    /// The observer closed the stream (a replica shutting down).
    Closed,
    /// The stream failed or was refused.
    Failed(tonic::Status),
}

impl std::fmt::Display for StreamEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => f.write_str("the observer closed the node-agent report stream"),
            Self::Failed(status) => write!(f, "{:?}: {}", status.code(), status.message()),
        }
    }
}

/// Forgets `addr` in `states` when dropped.
struct Forget {
    states: StreamStates,
    addr: SocketAddr,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.states.forget(self.addr);
    }
}
