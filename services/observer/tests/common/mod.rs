//! Shared harness of the observer's cluster tests: one real kube-apiserver + etcd +
//! kube-controller-manager (pacto-testenv) with the CRDs, and the workload simulator making Pods
//! Ready. Binaries: `scripts/k8s-binaries.sh`.

#![allow(clippy::unwrap_used, reason = "test harness")]
#![allow(dead_code, reason = "each user needs a different subset")]

use kube::Client;
use kube::api::{Api, PostParams};
use pacto_engine::Timestamp;
use pacto_testenv::{ControlPlane, ControlPlaneOptions, Simulator, SimulatorOptions};

/// The shared control plane, with the simulator started once.
pub async fn cluster() -> &'static ControlPlane {
    // The simulator outlives every test's runtime: it runs on its own thread and runtime.
    static SIM: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(|| {
        let dir = pacto_api::crdgen::default_output_dir();
        let mut options = ControlPlaneOptions::default().with_controller_manager();
        for (file, _) in pacto_api::crdgen::render().unwrap() {
            options = options.with_crd(dir.join(file));
        }
        options
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
