//! Writing the node's two objects in the agent namespace: `NodeRuntimeObservation/<node>`
//! (created if missing, then its status by server-side apply) and the heartbeat `Lease/<node>`
//! (docs/design/node-agent.md#publishing).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use pacto_api::{
    NodeRuntimeObservation, NodeRuntimeObservationSpec, NodeRuntimeObservationStatus,
    ReportStreamState, ReportStreamStatus, bounded_message,
};
use pacto_runtime::CancellationToken;
use pacto_runtime::backoff::{self, Backoff};
use serde_json::json;
use tracing::Instrument as _;

/// Field manager of every write of the agent.
pub const FIELD_MANAGER: &str = "pacto-node-agent";

/// The first wait after a failed write or a broken report stream; it doubles per failure up to
/// the retry's cap (docs/design/architecture.md#backoff).
pub const RETRY_MIN: Duration = Duration::from_secs(1);

/// The observation API of the agent namespace.
#[derive(Clone)]
pub struct Observations {
    api: Api<NodeRuntimeObservation>,
    node: String,
    exists: bool,
}

impl Observations {
    /// Writes `NodeRuntimeObservation/<node>` in `namespace`.
    pub fn new(client: Client, namespace: &str, node: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            node: node.to_owned(),
            exists: false,
        }
    }

    /// Creates the object (`spec.nodeName`) unless it exists, then applies `status`.
    pub async fn publish(
        &mut self,
        status: &NodeRuntimeObservationStatus,
    ) -> Result<(), kube::Error> {
        if !self.exists {
            self.ensure().await?;
        }
        let patch = json!({
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "NodeRuntimeObservation",
            "metadata": {"name": self.node},
            "status": status,
        });
        let applied = self
            .api
            .patch_status(
                &self.node,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await;
        if let Err(kube::Error::Api(status)) = &applied
            && status.code == 404
        {
            // Deleted by someone: create it again on the next attempt.
            self.exists = false;
        }
        applied.map(|_| ())
    }

    async fn ensure(&mut self) -> Result<(), kube::Error> {
        if self.api.get_opt(&self.node).await?.is_none() {
            let object = NodeRuntimeObservation::new(
                &self.node,
                NodeRuntimeObservationSpec {
                    node_name: self.node.clone(),
                },
            );
            match self.api.create(&PostParams::default(), &object).await {
                Ok(_) => tracing::info!(node = %self.node, "created NodeRuntimeObservation"),
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => return Err(error),
            }
        }
        self.exists = true;
        Ok(())
    }
}

/// What the observer replicas answered the report streams, per replica address: the agent puts
/// it into its observation's `status.reportStream` at the next write, so that a refusal shows
/// in the object (and the operator's log), not only in the agent's own log
/// (docs/design/node-agent.md#operator-log).
#[derive(Debug, Clone, Default)]
pub struct StreamStates {
    inner: Arc<Mutex<BTreeMap<SocketAddr, ReportStreamStatus>>>,
}

impl StreamStates {
    fn update(
        &self,
        addr: SocketAddr,
        state: ReportStreamState,
        refusal: Option<(String, String)>,
    ) {
        let mut states = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (reason, message) = refusal.map_or((None, None), |(reason, message)| {
            (Some(reason), Some(bounded_message(&message)))
        });
        if let Some(current) = states.get(&addr)
            && current.state == state
            && current.reason == reason
            && current.message == message
        {
            return;
        }
        states.insert(
            addr,
            ReportStreamStatus {
                state,
                reason,
                message,
                since: Some(Time(Timestamp::now())),
            },
        );
    }

    /// The replica at `addr` acknowledged a report.
    pub fn accepted(&self, addr: SocketAddr) {
        self.update(addr, ReportStreamState::Open, None);
    }

    /// The replica at `addr` refused the stream: `reason` is the gRPC code's name, `message`
    /// the observer's text (cut to [`pacto_api::REPORT_STREAM_MESSAGE_MAX`] characters).
    pub fn refused(&self, addr: SocketAddr, reason: &str, message: &str) {
        self.update(
            addr,
            ReportStreamState::Refused,
            Some((reason.to_owned(), message.to_owned())),
        );
    }

    /// The replica at `addr` is gone (no longer resolved) or its stream broke without a refusal:
    /// it no longer counts.
    pub fn forget(&self, addr: SocketAddr) {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&addr);
    }

    /// What the observation says: `Refused` (the longest-standing refusal) while any replica
    /// refuses, else `Open` (since the earliest acceptance) while any accepts, else nothing.
    pub fn status(&self) -> Option<ReportStreamStatus> {
        let states = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let earliest = |state: ReportStreamState| {
            states
                .values()
                .filter(|s| s.state == state)
                .min_by(|a, b| {
                    a.since
                        .as_ref()
                        .map(|t| t.0)
                        .cmp(&b.since.as_ref().map(|t| t.0))
                })
                .cloned()
        };
        earliest(ReportStreamState::Refused).or_else(|| earliest(ReportStreamState::Open))
    }
}

/// Whether a gRPC status ending a report stream is the observer refusing it (its token, its
/// identity, its report or the node count), not a transport failure.
pub fn is_refusal(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unauthenticated
            | tonic::Code::PermissionDenied
            | tonic::Code::InvalidArgument
            | tonic::Code::ResourceExhausted
    )
}

/// Heartbeat settings.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub node: String,
    /// `holderIdentity` (the agent's pod name).
    pub holder: String,
    pub duration_seconds: i32,
    pub renew_every: Duration,
}

/// Applies `Lease/<node>` with `renewTime` now (server-side apply creates it when missing).
pub async fn renew_lease(api: &Api<Lease>, settings: &LeaseSettings) -> Result<(), kube::Error> {
    let patch = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": settings.node},
        "spec": {
            "holderIdentity": settings.holder,
            "leaseDurationSeconds": settings.duration_seconds,
            "renewTime": MicroTime(Timestamp::now()),
        },
    });
    api.patch(
        &settings.node,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
}

/// Renews the Lease every `renew_every` until `shutdown`; a failure is logged and retried with
/// backoff (from [`RETRY_MIN`], never longer than the renewal period), never fatal: a session of
/// renewals under [`backoff::retrying`], reset by each renewal
/// (docs/design/architecture.md#backoff).
pub async fn heartbeat(client: Client, settings: LeaseSettings, shutdown: CancellationToken) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let backoff = Backoff::new(RETRY_MIN, settings.renew_every)
        .on_failure("node-agent could not renew its Lease; retrying")
        .on_recovery("node-agent Lease renewed again");
    let span = tracing::info_span!("node-agent Lease", node = %settings.node);
    let (api, settings) = (&api, &settings);
    backoff::retrying(
        "node-agent Lease",
        backoff,
        shutdown,
        move |session| async move {
            loop {
                if let Err(error) = renew_lease(api, settings).await {
                    metrics::counter!(crate::metrics::WRITE_ERRORS_TOTAL, "object" => "Lease")
                        .increment(1);
                    return Err(error);
                }
                session.healthy();
                tokio::time::sleep(settings.renew_every).await;
            }
        },
    )
    .instrument(span)
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_shows_until_the_replica_accepts_again() {
        let states = StreamStates::default();
        let a: SocketAddr = "10.0.0.1:8443".parse().expect("addr");
        let b: SocketAddr = "10.0.0.2:8443".parse().expect("addr");
        assert_eq!(states.status(), None, "nothing streamed yet");
        states.accepted(a);
        assert_eq!(
            states.status().map(|s| s.state),
            Some(ReportStreamState::Open)
        );
        states.refused(b, "Unauthenticated", &"x".repeat(2000));
        let refused = states.status().expect("a state");
        assert_eq!(refused.state, ReportStreamState::Refused);
        assert_eq!(refused.reason.as_deref(), Some("Unauthenticated"));
        assert!(
            refused
                .message
                .as_deref()
                .is_some_and(|m| m.chars().count() <= 513)
        );
        // The same refusal again keeps its first instant.
        let since = refused.since.clone();
        states.refused(b, "Unauthenticated", &"x".repeat(2000));
        assert_eq!(states.status().and_then(|s| s.since), since);
        states.accepted(b);
        assert_eq!(
            states.status().map(|s| s.state),
            Some(ReportStreamState::Open)
        );
        states.forget(a);
        states.forget(b);
        assert_eq!(states.status(), None);
    }

    #[test]
    fn only_the_observer_s_answers_are_refusals() {
        assert!(is_refusal(tonic::Code::Unauthenticated));
        assert!(is_refusal(tonic::Code::PermissionDenied));
        assert!(!is_refusal(tonic::Code::Unavailable));
        assert!(!is_refusal(tonic::Code::Cancelled));
    }
}
