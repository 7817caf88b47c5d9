//! Leader election with a `coordination.k8s.io/v1` Lease: only the holder reconciles (status
//! writes, events, revisions, the revision mirror). The decision is a pure function
//! ([`decide`]); [`run_elected`] performs the Lease reads/writes with optimistic concurrency.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};
use pacto_runtime::CancellationToken;

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews (and candidates retry).
    pub renew_interval: Duration,
}

/// What a replica should do with the lease it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds a valid lease: take it (a transition).
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a valid lease: wait.
    Wait,
}

/// Decides from the current lease spec (`None`: no lease object yet).
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    match renewed {
        Some(at) if at + duration > now => Decision::Wait,
        _ => Decision::Acquire,
    }
}

/// The lease spec after `decision` by `identity` at `now`.
pub fn next_spec(
    current: Option<&LeaseSpec>,
    decision: Decision,
    config: &LeaseConfig,
    now: Timestamp,
) -> LeaseSpec {
    let mut spec = current.cloned().unwrap_or_default();
    spec.holder_identity = Some(config.identity.clone());
    spec.lease_duration_seconds =
        Some(i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX));
    spec.renew_time = Some(MicroTime(now));
    if decision == Decision::Acquire {
        spec.acquire_time = Some(MicroTime(now));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec
}

/// One attempt to acquire or renew. Returns whether we hold the lease afterwards.
pub async fn try_hold(api: &Api<Lease>, config: &LeaseConfig) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let existing = api.get_opt(&config.name).await?;
    let decision = decide(
        existing.as_ref().and_then(|l| l.spec.as_ref()),
        &config.identity,
        now,
    );
    if decision == Decision::Wait {
        return Ok(false);
    }
    let spec = next_spec(
        existing.as_ref().and_then(|l| l.spec.as_ref()),
        decision,
        config,
        now,
    );
    let result = match existing {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(config.name.clone()),
                    namespace: Some(config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await.map(|_| ())
        }
        Some(mut lease) => {
            // Replace carries resourceVersion: a concurrent writer makes this a 409.
            lease.spec = Some(spec);
            api.replace(&config.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Runs `work` only while holding the lease, until `shutdown`. `work` gets a token that is
/// cancelled when the lease is lost; it is restarted when the lease is regained.
pub async fn run_elected<F, Fut>(
    client: Client,
    config: LeaseConfig,
    shutdown: CancellationToken,
    mut work: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut running: Option<(CancellationToken, tokio::task::JoinHandle<()>)> = None;
    loop {
        let held = match try_hold(&api, &config).await {
            Ok(held) => held,
            Err(error) => {
                tracing::warn!(%error, lease = %config.name, "lease update failed");
                false
            }
        };
        match (held, running.is_some()) {
            (true, false) => {
                tracing::info!(lease = %config.name, identity = %config.identity, "became leader");
                let token = shutdown.child_token();
                let task = tokio::spawn(work(token.clone()));
                running = Some((token, task));
            }
            (false, true) => {
                tracing::warn!(lease = %config.name, "lost the lease; stopping work");
                if let Some((token, task)) = running.take() {
                    token.cancel();
                    let _ = task.await;
                }
            }
            _ => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(config.renew_interval) => {}
        }
    }
    if let Some((token, task)) = running.take() {
        token.cancel();
        let _ = task.await;
        // Release so a successor need not wait for expiry.
        if let Ok(Some(mut lease)) = api.get_opt(&config.name).await
            && lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(config.identity.as_str())
        {
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
            }
            if let Err(error) = api
                .replace(&config.name, &PostParams::default(), &lease)
                .await
            {
                tracing::debug!(%error, "could not release the lease");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_787_000_000 + s).unwrap()
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(at(renewed))),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decide(None, "a", at(0)), Decision::Acquire);
        assert_eq!(
            decide(Some(&held_by("a", 0)), "a", at(100)),
            Decision::Renew
        );
        assert_eq!(decide(Some(&held_by("b", 0)), "a", at(10)), Decision::Wait);
        assert_eq!(
            decide(Some(&held_by("b", 0)), "a", at(15)),
            Decision::Acquire
        );
        assert_eq!(decide(Some(&held_by("", 0)), "a", at(1)), Decision::Acquire);
    }

    #[test]
    fn transitions_are_counted() {
        let config = LeaseConfig {
            name: "l".into(),
            namespace: "n".into(),
            identity: "a".into(),
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(5),
        };
        let spec = next_spec(Some(&held_by("b", 0)), Decision::Acquire, &config, at(20));
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(1));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(20))));
        let renewed = next_spec(Some(&spec), Decision::Renew, &config, at(25));
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(20))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(25))));
    }
}
