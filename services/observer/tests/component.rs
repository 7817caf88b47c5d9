//! Component tests of the observer's gRPC edge: the real server on 127.0.0.1:0 with real mTLS
//! (certificates from `pacto-runtime`'s test PKI), called by real tonic clients. The Kubernetes
//! client points at a closed local port, so an accepted Observe exercises the honest-unknown
//! path (every API query fails → Failed observations and `api_errors`) without a cluster.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pacto_observer::KubeCluster;
use pacto_observer::Prober;
use pacto_observer::watch::TargetHub;
use pacto_observer::{Observer, ObserverService, Options};
use pacto_proto::observer as pb;
use pacto_proto::observer::observer_client::ObserverClient;
use pacto_runtime::CancellationToken;
use pacto_runtime::grpc::{self, ChannelSpec};
use pacto_runtime::testing::{TestCa, TestEndpoint, mtls_channel, write_tls_files};
use pacto_runtime::testing::{
    admin_get, handshake_failures, metric_value, promtool_check, wait_for_handshake_failure,
};
use pacto_runtime::tls::TlsFiles;
use rustls::pki_types::pem::PemObject;
use tonic::Code;
use tonic::transport::Channel;

const SERVER_NAME: &str = "observer.pacto.svc";
const STATUS_WRITER: &str = "status-writer.pacto.svc";
const DEADLINE: Duration = Duration::from_secs(15);

const CONTRACT: &str = r#"
pactoVersion: "2.0"
service:
  name: web
  version: 1.0.0
workload: service
interfaces:
  - name: api
    type: openapi
    ref: interfaces/openapi.yaml
"#;

/// A port that was just free: nothing listens there any more.
async fn closed_port() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

/// A running in-process observer.
struct Server {
    dir: tempfile::TempDir,
    ca: TestCa,
    grpc: SocketAddr,
    admin: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), pacto_observer::ObserverError>>,
}

impl Server {
    async fn start(allowed: &[&str]) -> Self {
        Self::start_with(allowed, false).await
    }

    /// `cached`: read through reflector caches (as the binary does) instead of direct GETs.
    async fn start_with(allowed: &[&str], cached: bool) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("observer test CA").unwrap();
        let (endpoint, config) = TestEndpoint::bind(&ca, dir.path(), SERVER_NAME, allowed).await;
        let (grpc, admin) = (endpoint.grpc, endpoint.admin);
        let shutdown = CancellationToken::new();
        let api_url = format!("http://{}", closed_port().await);
        let kube_config = kube::Config::new(api_url.parse().unwrap());
        let client = kube::Client::try_from(kube_config).unwrap();
        let cluster = if cached {
            KubeCluster::cached(client, None, &shutdown)
        } else {
            KubeCluster::new(client, None)
        };
        let observer = Observer::new(cluster, Prober::new().unwrap(), Options::default());
        let service = ObserverService::new(observer, TargetHub::new(), shutdown.clone());
        let task = tokio::spawn(pacto_observer::serve(config, service, shutdown.clone()));
        Self {
            dir,
            ca,
            grpc,
            admin,
            shutdown,
            task,
        }
    }

    /// A client with a certificate from the server's CA carrying `identity`.
    fn client(&self, name: &str, identity: &[&str]) -> ObserverClient<Channel> {
        ObserverClient::new(self.ca.channel(
            self.dir.path(),
            name,
            identity,
            self.grpc,
            SERVER_NAME,
        ))
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("server drains within 10 s")
            .unwrap()
            .unwrap();
    }
}

fn spec(addr: SocketAddr) -> ChannelSpec {
    ChannelSpec {
        address: addr.to_string(),
        server_name: Some(SERVER_NAME.to_owned()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(20),
    }
}

fn client(addr: SocketAddr, files: TlsFiles) -> ObserverClient<Channel> {
    ObserverClient::new(mtls_channel(addr, SERVER_NAME, files))
}

fn request() -> pb::ObserveRequest {
    pb::ObserveRequest {
        target: Some(pb::Target {
            namespace: "team".into(),
            pacto_name: "web".into(),
            service_name: "web".into(),
            workload_ref: None,
            interface_bindings: vec![],
            config_bindings: vec![],
        }),
        contract: Some(pacto_proto::convert::contract_document(CONTRACT)),
        configuration_schemas: std::collections::HashMap::default(),
        contract_ref: "oci://registry.example/acme/web:1.0.0".into(),
        windows: vec![],
        stabilization_window: None,
    }
}

/// Breaks one field of a valid request.
type Corrupt = fn(&mut pb::ObserveRequest);

// The metrics recorder is process-wide: every test of this binary writes to it. Each handshake
// test reads its own `reason` series, which no other test here produces, and requires it to grow
// past the value read before its own connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_client_certificate_is_refused_at_the_handshake() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let before = handshake_failures(server.admin, "no_client_certificate").await;
    // Trusts the server's CA but presents no certificate.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(server.ca.pem().as_bytes()).unwrap())
        .unwrap();
    let mut config =
        rustls::ClientConfig::builder_with_provider(pacto_runtime::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let mut client = ObserverClient::new(
        grpc::channel_with_tls_config(&spec(server.grpc), Arc::new(config)).unwrap(),
    );
    let status = client.observe(request()).await.unwrap_err();
    assert_ne!(status.code(), Code::Ok);
    assert_ne!(
        status.code(),
        Code::PermissionDenied,
        "must be refused at the handshake, not by the allow-list"
    );
    wait_for_handshake_failure(server.admin, "no_client_certificate", before, DEADLINE).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_from_another_ca_is_refused_at_the_handshake() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let before = handshake_failures(server.admin, "untrusted_certificate").await;
    // The client trusts the real CA (so it accepts the server), but its own certificate, with an
    // allowed identity, is signed by a rogue CA.
    let rogue = TestCa::new("rogue CA").unwrap();
    let cert = rogue.issue(&[STATUS_WRITER]).unwrap();
    let files = write_tls_files(server.dir.path(), "rogue", &server.ca.pem(), &cert).unwrap();
    let mut client = client(server.grpc, files);
    let status = client.observe(request()).await.unwrap_err();
    assert_ne!(status.code(), Code::Ok);
    assert_ne!(
        status.code(),
        Code::PermissionDenied,
        "must be refused at the handshake, not by the allow-list"
    );
    wait_for_handshake_failure(server.admin, "untrusted_certificate", before, DEADLINE).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorised_identity_is_permission_denied_on_both_methods() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let mut intruder = server.client("node-agent", &["node-agent.pacto.svc"]);
    let status = intruder.observe(request()).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("node-agent.pacto.svc"),
        "the message names the refused identity: {}",
        status.message()
    );
    let status = intruder
        .watch_targets(pb::WatchTargetsRequest {
            namespace: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_invalid_argument_naming_the_field() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let mut client = server.client("status-writer", &[STATUS_WRITER]);
    let cases: [(&str, Corrupt); 5] = [
        ("target: required", |r| r.target = None),
        ("target.namespace: required", |r| {
            r.target.as_mut().unwrap().namespace.clear();
        }),
        ("target.pacto_name: required", |r| {
            r.target.as_mut().unwrap().pacto_name.clear();
        }),
        ("contract: required", |r| r.contract = None),
        ("stabilization_window: -5s is negative", |r| {
            r.stabilization_window = Some(pacto_proto::prost_types::Duration {
                seconds: -5,
                nanos: 0,
            });
        }),
    ];
    for (expected, corrupt) in cases {
        let mut bad = request();
        corrupt(&mut bad);
        let status = client.observe(bad).await.unwrap_err();
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{expected}: {status:?}"
        );
        assert_eq!(status.message(), expected);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_api_is_honest_unknown_and_metrics_pass_promtool() {
    let server = Server::start(&[STATUS_WRITER]).await;
    // The recorder is process-wide; only this test gets an `OK` Observe in this binary (the others
    // are refused or malformed), and its count must grow by exactly this one call.
    let observe_ok = ["method=\"Observe\"", "code=\"OK\""];
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let before = metric_value(&metrics, "pacto_grpc_server_requests_total", &observe_ok);
    let mut client = server.client("status-writer", &[STATUS_WRITER]);
    let response = client.observe(request()).await.unwrap().into_inner();
    // Every Kubernetes read failed: reported for RuntimeObserved, never judged as a violation.
    assert!(!response.api_errors.is_empty(), "{response:?}");
    let evidence = response.evidence.unwrap();
    assert!(!evidence.observations.is_empty());
    for observation in &evidence.observations {
        assert_ne!(
            observation.outcome(),
            pacto_proto::common::Outcome::Observed,
            "an unreachable API cannot confirm anything: {observation:?}"
        );
    }
    assert!(
        response.windows.is_empty(),
        "failures start no absence streak"
    );
    let mut bad = request();
    bad.contract = None;
    client.observe(bad).await.unwrap_err();
    let mut intruder = server.client("intruder", &["intruder.pacto.svc"]);
    intruder.observe(request()).await.unwrap_err();

    assert_eq!(admin_get(server.admin, "/healthz").await.0, 200);
    assert_eq!(admin_get(server.admin, "/readyz").await.0, 200);
    let (code, metrics) = admin_get(server.admin, "/metrics").await;
    assert_eq!(code, 200);
    for name in [
        "pacto_observer_observations_total",
        "pacto_observer_api_errors_total",
        "pacto_observer_observe_duration_seconds_bucket",
        "pacto_grpc_server_requests_total",
        "pacto_grpc_server_unauthorized_total",
    ] {
        assert!(metrics.contains(name), "{name} missing from:\n{metrics}");
    }
    let added = metric_value(&metrics, "pacto_grpc_server_requests_total", &observe_ok) - before;
    // Counts are whole numbers: within 0.5 of 1 means exactly one.
    assert!((added - 1.0).abs() < 0.5, "{added} added:\n{metrics}");
    promtool_check(&metrics);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_until_the_caches_have_listed() {
    // The caches can never list (the API is unreachable): the process is live but not ready.
    let server = Server::start_with(&[STATUS_WRITER], true).await;
    assert_eq!(admin_get(server.admin, "/healthz").await.0, 200);
    // Give the reflectors time to fail (they retry with backoff); readiness must stay false.
    let mut client = server.client("status-writer", &[STATUS_WRITER]);
    let mut bad = request();
    bad.target = None;
    client.observe(bad).await.unwrap_err();
    assert_eq!(admin_get(server.admin, "/readyz").await.0, 503);
    server.stop().await;
}
