//! The node agent's namespace: the status-writer keeps its Pod Security labels at `privileged`
//! (docs/design/node-agent.md#admission). The agent needs hostPID, hostPath mounts and kernel
//! capabilities, which the `baseline` and `restricted` levels refuse; a label changed or removed
//! by hand comes back at the next sync (at start, then every resync interval).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams};
use pacto_runtime::CancellationToken;

/// The Pod Security labels the agent namespace carries, all `privileged`.
pub const POD_SECURITY_LABELS: [&str; 3] = [
    "pod-security.kubernetes.io/enforce",
    "pod-security.kubernetes.io/audit",
    "pod-security.kubernetes.io/warn",
];

/// The level every label is set to.
pub const PRIVILEGED: &str = "privileged";

/// Default time between two syncs.
pub const DEFAULT_RESYNC: Duration = Duration::from_mins(1);

/// Whether `labels` already carry the three labels at `privileged`.
pub fn is_privileged(labels: Option<&BTreeMap<String, String>>) -> bool {
    POD_SECURITY_LABELS.iter().all(|key| {
        labels
            .and_then(|labels| labels.get(*key))
            .is_some_and(|value| value == PRIVILEGED)
    })
}

/// What one sync did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synced {
    /// The labels were already right.
    Unchanged,
    /// The labels were (re)set.
    Patched,
    /// The namespace does not exist (the agent's release creates it).
    Missing,
}

/// Sets the Pod Security labels of `namespace` to privileged unless they are already.
pub async fn sync(client: &kube::Client, namespace: &str) -> Result<Synced, kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let Some(current) = api.get_opt(namespace).await? else {
        return Ok(Synced::Missing);
    };
    if is_privileged(current.metadata.labels.as_ref()) {
        return Ok(Synced::Unchanged);
    }
    let labels: serde_json::Map<String, serde_json::Value> = POD_SECURITY_LABELS
        .iter()
        .map(|key| ((*key).to_owned(), PRIVILEGED.into()))
        .collect();
    api.patch(
        namespace,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "metadata": { "labels": labels } })),
    )
    .await?;
    Ok(Synced::Patched)
}

/// Syncs `namespace` at once and then every `resync` until `token` is cancelled, logging what
/// changed (every line names the node-agent namespace).
pub async fn keep_privileged(
    client: kube::Client,
    namespace: String,
    resync: Duration,
    token: CancellationToken,
) {
    let mut last = None;
    let labels = POD_SECURITY_LABELS
        .iter()
        .map(|key| format!("{key}={PRIVILEGED}"))
        .collect::<Vec<_>>()
        .join(", ");
    loop {
        let result = sync(&client, &namespace).await;
        match &result {
            // docs/design/node-agent.md#operator-log: every replica says once that the labels
            // hold, then only when it changed them.
            Ok(Synced::Patched) => tracing::info!(
                namespace = %namespace,
                "node-agent: Pod Security labels set on namespace {namespace} ({labels})"
            ),
            Ok(Synced::Unchanged) if last.is_none() => tracing::info!(
                namespace = %namespace,
                "node-agent: Pod Security labels already set on namespace {namespace} ({labels})"
            ),
            Ok(Synced::Missing) if last != Some(Synced::Missing) => tracing::warn!(
                namespace = %namespace,
                "node-agent namespace does not exist yet; its Pod Security labels are set once it does"
            ),
            Ok(_) => {}
            Err(error) => tracing::warn!(
                namespace = %namespace,
                %error,
                "node-agent namespace: cannot set its Pod Security labels (the status-writer needs get and patch on that Namespace)"
            ),
        }
        last = result.ok();
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(resync) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileged_needs_all_three_labels() {
        let mut labels: BTreeMap<String, String> = POD_SECURITY_LABELS
            .iter()
            .map(|k| ((*k).to_owned(), PRIVILEGED.to_owned()))
            .collect();
        assert!(is_privileged(Some(&labels)));
        labels.insert(POD_SECURITY_LABELS[1].to_owned(), "baseline".to_owned());
        assert!(!is_privileged(Some(&labels)));
        labels.remove(POD_SECURITY_LABELS[1]);
        assert!(!is_privileged(Some(&labels)));
        assert!(!is_privileged(None));
    }
}
