//! The real `pacto-evaluator` binary with `--metrics-secure` (docs/design/architecture.md#secure-metrics):
//! the runtime creates the Kubernetes client the evaluator otherwise has none of (from the
//! kubeconfig of a ServiceAccount holding only the two review rights), serves `/metrics` over
//! HTTPS with the evaluator's certificate, and a real kube-apiserver (pacto-testenv) reviews each
//! scrape's token. Binaries: `scripts/k8s-binaries.sh`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed step should fail the test"
)]

mod common;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use common::STATUS_WRITER;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use pacto_runtime::testing::{
    JsonLog, TestCa, addr_field, admin_get, eventually, service_command, sigterm, wait_exit,
    write_tls_files,
};
use pacto_testenv::{ControlPlane, ControlPlaneOptions, controlplane::unique_name};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const DEADLINE: Duration = Duration::from_secs(30);

/// A ClusterRole with `rules`, bound to ServiceAccount `namespace/account`.
async fn grant(cp: &ControlPlane, namespace: &str, account: &str, rules: Vec<PolicyRule>) {
    let client = cp.client().unwrap();
    let name = unique_name(account);
    let meta = ObjectMeta {
        name: Some(name.clone()),
        ..ObjectMeta::default()
    };
    let role = ClusterRole {
        metadata: meta.clone(),
        rules: Some(rules),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: meta,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(namespace.into()),
            ..Subject::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// `GET /metrics` over TLS trusting `ca_pem` alone, with a bearer token: (status, body).
async fn scrape(addr: SocketAddr, ca_pem: &str, token: &str) -> (u16, String) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .expect("a TLS handshake with the evaluator's certificate");
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tls.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_metrics_over_https_to_allowed_scrapers_only() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)");
    let namespace = cp.create_namespace("evaluator-metrics").await.unwrap();
    grant(
        cp,
        &namespace,
        "pacto-evaluator",
        vec![
            PolicyRule {
                api_groups: Some(vec!["authentication.k8s.io".into()]),
                resources: Some(vec!["tokenreviews".into()]),
                verbs: vec!["create".into()],
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec!["authorization.k8s.io".into()]),
                resources: Some(vec!["subjectaccessreviews".into()]),
                verbs: vec!["create".into()],
                ..PolicyRule::default()
            },
        ],
    )
    .await;
    grant(
        cp,
        &namespace,
        "scraper",
        vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }],
    )
    .await;
    let kubeconfig = cp
        .write_kubeconfig(
            &format!("{namespace}-evaluator.kubeconfig"),
            &cp.service_account_kubeconfig(&namespace, "pacto-evaluator")
                .await
                .unwrap(),
        )
        .unwrap();
    let scraper = cp
        .service_account_token(&namespace, "scraper", None, &[])
        .await
        .unwrap();
    let stranger = cp
        .service_account_token(&namespace, "stranger", None, &[])
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto secure metrics process test CA").unwrap();
    let cert = ca.issue(&[common::SERVER_NAME, "127.0.0.1"]).unwrap();
    let files = write_tls_files(dir.path(), "server", &ca.pem(), &cert).unwrap();
    let mut child = service_command(
        env!("CARGO_BIN_EXE_pacto-evaluator"),
        "EVALUATOR",
        &files,
        STATUS_WRITER,
    )
    .env("KUBECONFIG", &kubeconfig)
    .env("PACTO_METRICS_SECURE", "true")
    .env("PACTO_METRICS_ADDR", "127.0.0.1:0")
    .spawn()
    .unwrap();
    let mut log = JsonLog::follow(child.stderr.take().unwrap(), DEADLINE);
    let admin = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving Evaluator")
            .then(|| addr_field(v, "admin_addr"))
            .flatten()
    });
    let metrics = log.wait_for("the secure metrics log line", |v| {
        (v.get("message")?.as_str()? == "serving /metrics over HTTPS (--metrics-secure)")
            .then(|| addr_field(v, "metrics_addr"))
            .flatten()
    });

    let ca_pem = ca.pem();
    // 200 (before its first call the evaluator has recorded nothing, so the body may be empty;
    // services/runtime/tests/secure_metrics.rs checks the body)
    eventually("the scraper's token to be allowed", DEADLINE, || async {
        match scrape(metrics, &ca_pem, &scraper).await {
            (200, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (status, body) = scrape(metrics, &ca_pem, &stranger).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = admin_get(admin, "/metrics").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(admin_get(admin, "/readyz").await.0, 200);

    sigterm(&child);
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(exit.success(), "{exit}; logs:\n{}", log.text());
}
