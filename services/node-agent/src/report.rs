//! The report stream to the observer: one `NodeReport` per publish, the same content as the
//! observation's status, over the mTLS channel with the pod's service-account token as bearer
//! metadata (docs/design/node-agent.md#reports).

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pacto_api::{CollectionState, Direction, NodeRuntimeObservationStatus, PodCoverage, Protocol};
use pacto_proto::observer::{self as wire, node_agent_reports_client::NodeAgentReportsClient};
use pacto_proto::prost_types;
use pacto_runtime::CancellationToken;
use pacto_runtime::grpc::GRPC_MAX_MESSAGE_BYTES;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tonic::transport::Channel;

use crate::publish::Backoff;

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
    /// Channel to the observer (mTLS, or plaintext under `--insecure`).
    pub channel: Channel,
    /// The projected service-account token, re-read on every connect; `None` sends none.
    pub token_path: Option<PathBuf>,
}

fn bearer(target: &ReportTarget) -> Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>> {
    let path = target.token_path.as_ref()?;
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

/// Streams every report `reports` carries to the observer until `shutdown`. Each connection
/// starts with the latest report, so an observer that restarted gets the current view at once;
/// a broken stream is reopened with backoff (1 s doubling to 30 s, reset by an acknowledgement).
pub async fn stream_reports(
    target: ReportTarget,
    reports: watch::Receiver<Option<wire::NodeReport>>,
    shutdown: CancellationToken,
) {
    let mut client = NodeAgentReportsClient::new(target.channel.clone())
        .max_decoding_message_size(GRPC_MAX_MESSAGE_BYTES)
        .max_encoding_message_size(GRPC_MAX_MESSAGE_BYTES);
    let mut backoff = Backoff::new(RECONNECT_MAX);
    let mut failing = false;
    loop {
        let outbound = WatchStream::new(reports.clone()).filter_map(std::future::ready);
        let mut request = tonic::Request::new(outbound);
        if let Some(value) = bearer(&target) {
            request.metadata_mut().insert("authorization", value);
        }
        let session = async {
            let mut acks = client.report(request).await?.into_inner();
            while let Some(ack) = acks.message().await? {
                metrics::counter!(crate::metrics::REPORTS_ACKED_TOTAL).increment(1);
                if failing {
                    tracing::info!("node-agent reports acknowledged by the observer again");
                    failing = false;
                }
                backoff.reset();
                tracing::debug!(node = %ack.node_name, "report acknowledged");
            }
            Ok::<(), tonic::Status>(())
        };
        let ended = tokio::select! {
            () = shutdown.cancelled() => return,
            ended = session => ended,
        };
        if !failing {
            match &ended {
                Ok(()) => {
                    tracing::warn!(
                        "the observer closed the node-agent report stream; reconnecting"
                    );
                }
                Err(status) => {
                    tracing::warn!(code = ?status.code(), message = status.message(), "node-agent report stream failed; reconnecting with backoff");
                }
            }
        }
        failing = true;
        let wait = backoff.failed();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}
