//! Writing the node's two objects in the agent namespace: `NodeRuntimeObservation/<node>`
//! (created if missing, then its status by server-side apply) and the heartbeat `Lease/<node>`
//! (docs/design/node-agent.md#publishing).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use pacto_api::{NodeRuntimeObservation, NodeRuntimeObservationSpec, NodeRuntimeObservationStatus};
use pacto_runtime::CancellationToken;
use serde_json::json;

/// Field manager of every write of the agent.
pub const FIELD_MANAGER: &str = "pacto-node-agent";

/// The backoff after a failed write: doubles from one second up to `cap`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    /// A fresh backoff that never waits longer than `cap`.
    pub fn new(cap: Duration) -> Self {
        Self {
            next: Duration::from_secs(1).min(cap),
            cap,
        }
    }

    /// The wait before the next attempt after a failure.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.cap);
        wait
    }

    /// A success: the next failure waits the shortest time again.
    pub fn reset(&mut self) {
        self.next = Duration::from_secs(1).min(self.cap);
    }
}

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
/// backoff (never longer than the renewal period), never fatal.
pub async fn heartbeat(client: Client, settings: LeaseSettings, shutdown: CancellationToken) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let mut backoff = Backoff::new(settings.renew_every);
    let mut failing = false;
    loop {
        let wait = match renew_lease(&api, &settings).await {
            Ok(()) => {
                if failing {
                    tracing::info!(node = %settings.node, "node-agent Lease renewed again");
                }
                failing = false;
                backoff.reset();
                settings.renew_every
            }
            Err(error) => {
                metrics::counter!(crate::metrics::WRITE_ERRORS_TOTAL, "object" => "Lease")
                    .increment(1);
                if !failing {
                    tracing::warn!(node = %settings.node, %error, "node-agent could not renew its Lease; retrying");
                }
                failing = true;
                backoff.failed()
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(5));
        let waits: Vec<u64> = (0..5).map(|_| b.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        b.reset();
        assert_eq!(b.failed(), Duration::from_secs(1));
    }
}
