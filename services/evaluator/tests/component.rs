//! Component tests of the evaluator: the real server on 127.0.0.1:0 with mTLS certificates
//! generated here (rcgen), called by real tonic clients.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

mod common;

use std::{sync::Arc, time::Duration};

use common::{STATUS_WRITER, Server, client, client_files};
use pacto_proto::evaluator::{AssessReadinessRequest, ContractStatus};
use pacto_runtime::testing::{
    admin_get, eventually, handshake_failures, metric_value, promtool_check,
    wait_for_handshake_failure,
};
use pacto_runtime::{
    grpc::{self, ChannelSpec},
    testing::{TestCa, write_tls_files},
    tls::TlsStore,
};
use tonic::Code;

const DEADLINE: Duration = Duration::from_secs(15);

#[tokio::test]
async fn valid_call_succeeds_and_matches_in_process_evaluation() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let mut client = server.client("status-writer", &[STATUS_WRITER]);
    let request = pacto_evaluator::typical_request();
    let response = client.evaluate(request.clone()).await.unwrap().into_inner();
    let expected = pacto_evaluator::evaluate_request(&request, chrono::Utc::now()).unwrap();
    assert_eq!(response, expected);
    assert_eq!(response.contract_status(), ContractStatus::NonCompliant);

    let readiness = client
        .assess_readiness(AssessReadinessRequest {
            contract: request.contract.clone(),
            assessed_at: request.assessed_at,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(readiness.readiness, expected.readiness);
    server.stop().await;
}

#[tokio::test]
async fn unauthorised_identity_is_permission_denied() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let mut client = server.client(
        "observer",
        &["observer.pacto.svc", "spiffe://pacto/sa/observer"],
    );
    let status = client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("observer.pacto.svc"),
        "{}",
        status.message()
    );

    // A URI SAN allow-list entry with a prefix wildcard admits it.
    let server2 = Server::start(&["spiffe://pacto/sa/*"]).await;
    let mut client = server2.client(
        "observer",
        &["observer.pacto.svc", "spiffe://pacto/sa/observer"],
    );
    client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap();
    server.stop().await;
    server2.stop().await;
}

#[tokio::test]
async fn missing_client_certificate_is_refused() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let before = handshake_failures(server.admin, "no_client_certificate").await;
    // Trusts the server's CA but presents no certificate.
    let mut roots = rustls::RootCertStore::empty();
    let ca_der =
        rustls::pki_types::CertificateDer::from_pem_slice(server.ca.pem().as_bytes()).unwrap();
    roots.add(ca_der).unwrap();
    let mut config =
        rustls::ClientConfig::builder_with_provider(pacto_runtime::tls::crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let spec = ChannelSpec {
        address: server.grpc.to_string(),
        server_name: Some(common::SERVER_NAME.to_owned()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
    };
    let mut client = pacto_proto::evaluator::evaluator_client::EvaluatorClient::new(
        grpc::channel_with_tls_config(&spec, Arc::new(config)).unwrap(),
    );
    let status = client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap_err();
    assert_ne!(status.code(), Code::Ok);
    // The server refused the handshake for the right reason.
    wait_for_handshake_failure(server.admin, "no_client_certificate", before, DEADLINE).await;
    server.stop().await;
}

use rustls::pki_types::pem::PemObject;

// The metrics recorder is process-wide: every test of this binary writes to it. Each handshake
// test reads its own `reason` series, which no other test here produces (the rotation test's
// early client fails with `tls_error`: it rejects the server first), and requires it to grow
// past the value read before its own connection.
#[tokio::test]
async fn certificate_from_another_ca_is_refused() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let before = handshake_failures(server.admin, "untrusted_certificate").await;
    let rogue = TestCa::new("rogue CA").unwrap();
    // The client trusts the real CA (so it accepts the server) but its own certificate, with an
    // allowed identity, is signed by the rogue CA.
    let cert = rogue.issue(&[STATUS_WRITER]).unwrap();
    let files = write_tls_files(server.dir.path(), "rogue", &server.ca.pem(), &cert).unwrap();
    let mut client = client(server.grpc, files);
    let status = client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap_err();
    assert_ne!(status.code(), Code::Ok);
    assert_ne!(
        status.code(),
        Code::PermissionDenied,
        "must be refused at the handshake"
    );
    wait_for_handshake_failure(server.admin, "untrusted_certificate", before, DEADLINE).await;
    server.stop().await;
}

#[tokio::test]
async fn malformed_request_is_invalid_argument_naming_the_field() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let mut client = server.client("status-writer", &[STATUS_WRITER]);
    let mut request = pacto_evaluator::typical_request();
    request.evidence.as_mut().unwrap().observations[3].outcome = 7;
    let status = client.evaluate(request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "evidence.observations[3].outcome: unknown value 7"
    );

    let mut request = pacto_evaluator::typical_request();
    request.contract = None;
    let status = client.evaluate(request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "contract: required");
    server.stop().await;
}

#[tokio::test]
async fn rotated_server_certificate_is_picked_up_without_restart() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let dir = server.dir.path();
    let old_client_files = client_files(dir, "old-client", &server.ca, &[STATUS_WRITER]);
    let mut old_client = client(server.grpc, old_client_files);
    old_client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap();

    // Rotate to a new CA: the server's new bundle trusts both CAs (a realistic overlap) and its
    // new certificate is issued by the new CA.
    let new_ca = TestCa::new("pacto test CA 2").unwrap();
    let new_client_files = client_files(dir, "new-client", &new_ca, &[STATUS_WRITER]);
    // Before the rotation a client of the new CA cannot connect.
    let mut early = client(server.grpc, new_client_files.clone());
    assert!(
        early
            .evaluate(pacto_evaluator::typical_request())
            .await
            .is_err()
    );

    let generation = server.store.generation();
    let new_cert = new_ca.issue(&[common::SERVER_NAME, "127.0.0.1"]).unwrap();
    let bundle = format!("{}{}", server.ca.pem(), new_ca.pem());
    // The endpoint's files are named after the server name: rewrite them (atomically).
    let rewritten = write_tls_files(dir, common::SERVER_NAME, &bundle, &new_cert).unwrap();
    assert_eq!(rewritten.cert, server.files.cert);

    eventually("the server to reload its certificate", DEADLINE, || async {
        (server.store.generation() > generation).then_some(())
    })
    .await;
    // The new leaf is what new connections are served.
    let served = served_leaf(&server, &new_client_files).await;
    let expected =
        rustls::pki_types::CertificateDer::from_pem_slice(new_cert.cert_pem.as_bytes()).unwrap();
    assert_eq!(served, expected);
    // A fresh client of the new CA is now accepted, without a restart.
    let mut new_client = client(server.grpc, new_client_files);
    let response = new_client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap();
    assert_eq!(
        response.into_inner().contract_status(),
        ContractStatus::NonCompliant
    );
    server.stop().await;
}

/// The leaf certificate the server presents on a new connection.
async fn served_leaf(
    server: &Server,
    files: &pacto_runtime::tls::TlsFiles,
) -> rustls::pki_types::CertificateDer<'static> {
    let store = TlsStore::load(files.clone()).unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(&store.current().client));
    let tcp = tokio::net::TcpStream::connect(server.grpc).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from(common::SERVER_NAME).unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

#[tokio::test]
async fn admin_endpoints_and_promtool_clean_metrics() {
    let server = Server::start(&[STATUS_WRITER]).await;
    let mut client = server.client("status-writer", &[STATUS_WRITER]);
    client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap();
    let mut bad = pacto_evaluator::typical_request();
    bad.evidence = None;
    client.evaluate(bad).await.unwrap_err();
    let mut denied = server.client("observer", &["observer.pacto.svc"]);
    denied
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap_err();
    let invalid_readiness = ["method=\"AssessReadiness\"", "code=\"INVALID_ARGUMENT\""];
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let before = metric_value(
        &metrics,
        "pacto_grpc_server_requests_total",
        &invalid_readiness,
    );
    client
        .assess_readiness(AssessReadinessRequest {
            contract: None,
            assessed_at: None,
        })
        .await
        .unwrap_err();

    assert_eq!(admin_get(server.admin, "/healthz").await.0, 200);
    assert_eq!(admin_get(server.admin, "/readyz").await.0, 200);
    assert_eq!(admin_get(server.admin, "/nope").await.0, 404);
    // `/version`: the evaluator crate's version and the build script's commit and time.
    let (code, version) = admin_get(server.admin, "/version").await;
    assert_eq!(code, 200);
    assert_eq!(
        version,
        format!(
            "{{\"name\":\"pacto-evaluator\",\"version\":\"{}\",\"commit\":\"{}\",\"buildTime\":\"{}\"}}\n",
            env!("CARGO_PKG_VERSION"),
            env!("PACTO_BUILD_COMMIT"),
            env!("PACTO_BUILD_TIME")
        )
    );
    let (code, metrics) = admin_get(server.admin, "/metrics").await;
    assert_eq!(code, 200);
    for name in [
        "pacto_grpc_server_requests_total",
        "pacto_grpc_server_errors_total",
        "pacto_grpc_server_handling_seconds_bucket",
        "pacto_evaluator_evaluations_total",
        "pacto_evaluator_findings_total",
        "pacto_grpc_server_unauthorized_total",
        "pacto_evaluator_contract_cache_total",
    ] {
        assert!(metrics.contains(name), "{name} missing from:\n{metrics}");
    }
    // The recorder is process-wide; `AssessReadiness` answered `INVALID_ARGUMENT` only here in
    // this binary, and exactly once (the contract-cache hit is counted in `process.rs`, where the
    // evaluator process owns its recorder).
    let added = metric_value(
        &metrics,
        "pacto_grpc_server_requests_total",
        &invalid_readiness,
    ) - before;
    // Counts are whole numbers: within 0.5 of 1 means exactly one.
    assert!((added - 1.0).abs() < 0.5, "{added} added:\n{metrics}");
    promtool_check(&metrics);
    server.stop().await;
}

#[tokio::test]
async fn unreachable_server_is_unavailable_after_retries() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca").unwrap();
    // A port that was just free: nothing listens there any more.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = client(
        addr,
        client_files(dir.path(), "client", &ca, &[STATUS_WRITER]),
    );
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let policy = grpc::RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
    };
    let status = grpc::call_with_retries(&policy, || {
        attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut client = client.clone();
        async move { client.evaluate(pacto_evaluator::typical_request()).await }
    })
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn insecure_dev_mode_serves_plaintext_without_authorisation() {
    let shutdown = pacto_runtime::CancellationToken::new();
    let grpc_listener = grpc::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = grpc_listener.local_addr().unwrap();
    let config = pacto_evaluator::ServeConfig {
        grpc: grpc_listener,
        admin: pacto_runtime::admin::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap(),
        transport: grpc::Transport::Insecure,
        allowed: pacto_runtime::AllowList::new([STATUS_WRITER]),
    };
    let task = tokio::spawn(pacto_evaluator::serve(
        config,
        pacto_evaluator::EvaluatorService::default(),
        shutdown.clone(),
    ));
    let spec = ChannelSpec {
        address: addr.to_string(),
        server_name: None,
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
    };
    let mut client = pacto_proto::evaluator::evaluator_client::EvaluatorClient::new(
        grpc::channel(&spec, &grpc::Transport::Insecure).unwrap(),
    );
    client
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap();
    shutdown.cancel();
    task.await.unwrap().unwrap();
}
