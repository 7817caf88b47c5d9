//! The real `pacto-contract-resolver` binary as a process, configured only through flags and
//! environment variables (KUBECONFIG for its own least-privilege identity): it resolves a private
//! contract with a pull Secret from the real API server over mTLS and stops on SIGTERM; and with
//! a resolve in flight (held at a registry proxy the test controls) SIGTERM refuses new
//! connections, lets the resolve finish and then exits 0, while a resolve that never finishes is
//! cut off by the drain timeout
//! (`docs/design/architecture.md#shutdown-and-drain`).

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use common::push_contract;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use pacto_proto::resolver::{
    ContractRef, ResolveRequest, contract_resolver_client::ContractResolverClient, resolve_response,
};
use pacto_runtime::grpc::{ChannelSpec, Transport, channel};
use pacto_runtime::testing::{
    JsonLog, TestCa, addr_field, service_command, sigterm, wait_exit, within, write_tls_files,
};
use pacto_runtime::tls::TlsStore;
use pacto_testenv::ControlPlaneOptions;
use pacto_testenv::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tonic::transport::Channel;

const RESOLVER_BIN: &str = env!("CARGO_BIN_EXE_pacto-contract-resolver");
const DEADLINE: Duration = Duration::from_secs(30);
const SERVER_NAME: &str = "contract-resolver.pacto.svc";
const STATUS_WRITER: &str = "status-writer.pacto.svc";
const USER: &str = "pacto-contract-resolver-process";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_resolves_with_a_pull_secret_and_stops_on_sigterm() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .unwrap();
    let admin = cp.client().unwrap();
    let ns = cp.create_namespace("resolver-process").await.unwrap();
    let registry = Registry::start_with_basic_auth("bob", "builder-s3cr3t-pw").unwrap();
    let host = registry.host();
    let (digest, _) = push_contract(&registry, "acme/svc", "2.1.0", "2.1.0", "process").await;

    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("pull".into()),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        string_data: Some(
            [
                ("registry", host.as_str()),
                ("username", "bob"),
                ("password", "builder-s3cr3t-pw"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        ),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pull-secret-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"] }]
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pull-secret-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pull-secret-reader" },
        "subjects": [{ "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": USER }]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin, &ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let kubeconfig = cp
        .write_kubeconfig(
            &format!("{ns}-resolver.kubeconfig"),
            &cp.user_kubeconfig(USER, &[]).unwrap(),
        )
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto process test CA").unwrap();
    let server_cert = ca.issue(&[SERVER_NAME, "127.0.0.1"]).unwrap();
    let files = write_tls_files(dir.path(), "server", &ca.pem(), &server_cert).unwrap();
    let mut child = service_command(RESOLVER_BIN, "RESOLVER", &files, STATUS_WRITER)
        .env("KUBECONFIG", &kubeconfig)
        .env("PACTO_RESOLVER_INSECURE_REGISTRIES", &host)
        .spawn()
        .unwrap();
    let mut log = JsonLog::follow(child.stderr.take().unwrap(), DEADLINE);
    let grpc_addr = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving ContractResolver")
            .then(|| addr_field(v, "grpc_addr"))
            .flatten()
    });

    let client = ContractResolverClient::new(ca.channel(
        dir.path(),
        "client",
        &[STATUS_WRITER],
        grpc_addr,
        SERVER_NAME,
    ));
    let request = ResolveRequest {
        namespace: ns.clone(),
        pacto_name: "svc".into(),
        contract_ref: Some(ContractRef {
            oci: format!("oci://{host}/acme/svc"),
            inline: String::new(),
            pull_secret_ref: "pull".into(),
        }),
        overrides: Vec::new(),
        max_age_seconds: 0,
    };
    // RBAC grants apply asynchronously: retry Unavailable (secret unreadable) with a deadline.
    let resolved = within("the pull secret to be readable", DEADLINE, || {
        let mut client = client.clone();
        let request = request.clone();
        let log = &log;
        async move {
            let response = client.resolve(request).await.unwrap().into_inner();
            match response.result {
                Some(resolve_response::Result::Resolved(r)) => Ok(r),
                Some(resolve_response::Result::Unavailable(u)) => {
                    assert!(u.reason.contains("pull secret"), "{}", u.reason);
                    Err(u.reason)
                }
                other => panic!("{other:?}; logs:\n{}", log.text()),
            }
        }
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}; logs:\n{}", log.text()));
    assert_eq!(resolved.digest, digest);
    assert_eq!(resolved.resolved_ref, format!("{host}/acme/svc:2.1.0"));

    sigterm(&child);
    log.wait_for("the stopped log line", |v| {
        (v.get("message")?.as_str()? == "contract resolver stopped").then_some(())
    });
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(exit.success(), "exit {exit:?}; logs:\n{}", log.text());
    assert!(
        !log.text().contains("s3cr3t"),
        "the password never appears in the logs"
    );
}

/// The drain timeout of every Pacto gRPC server (`pacto_runtime::grpc`): how long a
/// shutting-down process waits for in-flight calls before it stops anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// A TCP proxy in front of a registry that holds every connection it accepts (no byte is
/// forwarded) until the test releases it: a registry that is slow for as long as the test wants.
struct HeldProxy {
    addr: SocketAddr,
    /// One message per accepted connection.
    arrived: mpsc::UnboundedReceiver<()>,
    /// `true` lets held and later connections through; dropping it closes held connections.
    release: watch::Sender<bool>,
}

impl HeldProxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (arrived_tx, arrived) = mpsc::unbounded_channel();
        let (release, released) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let _ = arrived_tx.send(());
                let mut released = released.clone();
                tokio::spawn(async move {
                    if released.wait_for(|open| *open).await.is_err() {
                        return;
                    }
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            addr,
            arrived,
            release,
        }
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Waits until the resolver has opened a connection to the registry (the resolve is in
    /// flight, held here).
    async fn wait_arrival(&mut self) {
        tokio::time::timeout(DEADLINE, self.arrived.recv())
            .await
            .expect("the resolver reaches the registry proxy")
            .expect("the proxy is running");
    }
}

/// Starts the binary without Kubernetes (no pull secrets are involved), reaching `registry_host`
/// over plain HTTP with `env` added; returns it with its log and gRPC address.
fn spawn_resolver(
    dir: &Path,
    ca: &TestCa,
    registry_host: &str,
    env: &[(&str, &str)],
    log_deadline: Duration,
) -> (Child, JsonLog, SocketAddr) {
    let server_cert = ca.issue(&[SERVER_NAME, "127.0.0.1"]).unwrap();
    let files = write_tls_files(dir, "server", &ca.pem(), &server_cert).unwrap();
    let mut child = service_command(RESOLVER_BIN, "RESOLVER", &files, STATUS_WRITER)
        .env("PACTO_RESOLVER_NO_KUBERNETES", "true")
        .env("PACTO_RESOLVER_INSECURE_REGISTRIES", registry_host)
        .envs(env.iter().copied())
        .env_remove("KUBECONFIG")
        .spawn()
        .unwrap();
    let mut log = JsonLog::follow(child.stderr.take().unwrap(), log_deadline);
    let grpc_addr = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving ContractResolver")
            .then(|| addr_field(v, "grpc_addr"))
            .flatten()
    });
    (child, log, grpc_addr)
}

/// A client over mTLS whose calls wait far longer than the drain timeout (the shared test
/// channel gives up after 30 s): only the server side can end a call here.
fn patient_client(
    dir: &Path,
    ca: &TestCa,
    grpc_addr: SocketAddr,
) -> ContractResolverClient<Channel> {
    let store = TlsStore::load(ca.client_files(dir, "client", &[STATUS_WRITER])).unwrap();
    let spec = ChannelSpec {
        address: grpc_addr.to_string(),
        server_name: Some(SERVER_NAME.to_owned()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_mins(10),
    };
    ContractResolverClient::new(channel(&spec, &Transport::Mtls(store)).unwrap())
}

/// An anonymous resolve of `oci://<host>/acme/svc`.
fn resolve_request(host: &str) -> ResolveRequest {
    ResolveRequest {
        namespace: "team".into(),
        pacto_name: "svc".into(),
        contract_ref: Some(ContractRef {
            oci: format!("oci://{host}/acme/svc:2.1.0"),
            inline: String::new(),
            pull_secret_ref: String::new(),
        }),
        overrides: Vec::new(),
        max_age_seconds: 0,
    }
}

/// After SIGTERM the gRPC port takes no new connections.
async fn wait_refused(grpc_addr: SocketAddr, log: &JsonLog) {
    within("the gRPC port to refuse connections", DEADLINE, || async {
        TcpStream::connect(grpc_addr).await.is_err()
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}; logs:\n{}", log.text()));
}

// Multi-threaded: the test thread blocks on log lines while the in-flight call, its connection
// and the proxy keep running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_lets_an_in_flight_resolve_finish_then_exits_0() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let registry = Registry::start().unwrap();
    let (digest, _) = push_contract(&registry, "acme/svc", "2.1.0", "2.1.0", "drain").await;
    let mut proxy = HeldProxy::start(registry.addr()).await;
    let host = proxy.host();

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto process test CA").unwrap();
    let (mut child, mut log, grpc_addr) = spawn_resolver(
        dir.path(),
        &ca,
        &host,
        &[("PACTO_RESOLVER_REGISTRY_MAX_RETRIES", "0")],
        DEADLINE,
    );
    let mut client = patient_client(dir.path(), &ca, grpc_addr);
    let in_flight = tokio::spawn({
        let request = resolve_request(&host);
        async move { client.resolve(request).await }
    });
    proxy.wait_arrival().await;

    // The resolve is held at the registry: SIGTERM now.
    sigterm(&child);
    log.wait_for_message("shutdown requested, draining");
    wait_refused(grpc_addr, &log).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process waits for the in-flight resolve; logs:\n{}",
        log.text()
    );

    // The registry answers: the resolve completes with the contract, then the process exits 0.
    proxy.release.send(true).unwrap();
    let response = tokio::time::timeout(DEADLINE, in_flight)
        .await
        .unwrap_or_else(|_| panic!("the in-flight resolve ends; logs:\n{}", log.text()))
        .unwrap()
        .unwrap_or_else(|status| {
            panic!(
                "the in-flight resolve completes, got {status:?}; logs:\n{}",
                log.text()
            )
        })
        .into_inner();
    match response.result {
        Some(resolve_response::Result::Resolved(resolved)) => {
            assert_eq!(resolved.digest, digest);
            assert_eq!(resolved.resolved_ref, format!("{host}/acme/svc:2.1.0"));
        }
        other => panic!("{other:?}; logs:\n{}", log.text()),
    }
    log.wait_for_message("contract resolver stopped");
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(exit.success(), "exit {exit:?}; logs:\n{}", log.text());
    assert!(
        !log.text().contains("after the drain timeout"),
        "the drain ended because the call finished, not by the timeout; logs:\n{}",
        log.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_with_a_stuck_resolve_exits_0_at_the_drain_timeout() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let registry = Registry::start().unwrap();
    let mut proxy = HeldProxy::start(registry.addr()).await;
    let host = proxy.host();

    // The registry never answers, and the resolver would wait for it far longer than the drain.
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto process test CA").unwrap();
    let (mut child, mut log, grpc_addr) = spawn_resolver(
        dir.path(),
        &ca,
        &host,
        &[
            ("PACTO_RESOLVER_REGISTRY_MAX_RETRIES", "0"),
            ("PACTO_RESOLVER_REGISTRY_TIMEOUT", "10m"),
        ],
        DRAIN_TIMEOUT + DEADLINE,
    );
    let mut client = patient_client(dir.path(), &ca, grpc_addr);
    let in_flight = tokio::spawn({
        let request = resolve_request(&host);
        async move { client.resolve(request).await }
    });
    proxy.wait_arrival().await;

    sigterm(&child);
    log.wait_for_message("shutdown requested, draining");
    wait_refused(grpc_addr, &log).await;
    // The drain timeout stops the process with the call still open; it exits 0.
    log.wait_for_message("connections still open after the drain timeout; stopping anyway");
    log.wait_for_message("contract resolver stopped");
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(exit.success(), "exit {exit:?}; logs:\n{}", log.text());

    // The caller gets an error, not a hang (the connection closed with the process).
    let result = tokio::time::timeout(DEADLINE, in_flight)
        .await
        .expect("the stuck call ends with the process")
        .unwrap();
    assert!(
        result.is_err(),
        "the stuck call fails: {result:?}; logs:\n{}",
        log.text()
    );
    // The held registry connection stayed open until now.
    drop(proxy.release);
}
