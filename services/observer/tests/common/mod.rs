//! Shared harness of the observer's cluster tests: one real kube-apiserver + etcd +
//! kube-controller-manager (pacto-testenv) with the CRDs, and the workload simulator making Pods
//! Ready. Binaries: `scripts/k8s-binaries.sh`.

#![allow(clippy::unwrap_used, reason = "test harness")]
#![allow(dead_code, reason = "each user needs a different subset")]

use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pacto_api::Pacto;
use pacto_api::testing::PactoBuilder;
use pacto_engine::Timestamp;
use pacto_testenv::{ControlPlane, ControlPlaneOptions, Simulator, SimulatorOptions};
use serde_json::json;

/// The shared control plane, with the simulator started once.
pub async fn cluster() -> &'static ControlPlane {
    // The simulator outlives every test's runtime: it runs on its own thread and runtime.
    static SIM: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(|| {
        ControlPlaneOptions::default()
            .with_controller_manager()
            .with_crds(pacto_api::crdgen::checked_in_paths())
    })
    .await
    .expect("start etcd + kube-apiserver + kube-controller-manager (scripts/k8s-binaries.sh)");
    SIM.get_or_init(|| {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let client = cp.client().unwrap();
                if let Err(error) = Simulator::run(client, SimulatorOptions::default()).await {
                    eprintln!("simulator stopped: {error}");
                }
            });
        });
    });
    cp
}

/// Creates the namespaced object `value` in `ns`.
pub async fn apply<K>(client: &Client, ns: &str, value: serde_json::Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(value).unwrap();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// `at` moved by `seconds`.
pub fn later(at: Timestamp, seconds: i64) -> Timestamp {
    let (s, n) = at.unix_parts();
    Timestamp::from_unix(s + seconds, n).unwrap()
}

/// A sibling Pacto `name` (targeting Service `service`, if any) whose contract resolved to
/// `resolved`, its status written as the status-writer would.
pub async fn sibling(client: &Client, ns: &str, name: &str, service: Option<&str>, resolved: &str) {
    let pactos: Api<Pacto> = Api::namespaced(client.clone(), ns);
    let builder = PactoBuilder::oci(name, resolved);
    let pacto = match service {
        Some(s) => builder.service(s),
        None => builder,
    }
    .build();
    pactos.create(&PostParams::default(), &pacto).await.unwrap();
    let version = resolved.rsplit(':').next().unwrap();
    pactos
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"contract": {
                "serviceName": name, "version": version, "resolvedRef": resolved}}})),
        )
        .await
        .unwrap();
}
