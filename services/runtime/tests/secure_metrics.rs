//! Secure metrics against a real API server (docs/design/architecture.md#secure-metrics): a
//! `Runtime` serving `/metrics` over HTTPS with a certificate of a test CA, each scrape's token
//! reviewed by a real kube-apiserver (pacto-testenv: RBAC, TokenRequest API) with the client of
//! a ServiceAccount that holds only the two review rights the charts grant. The scraper trusts
//! that CA alone. Binaries: `scripts/k8s-binaries.sh`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed setup step should fail the test"
)]

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use pacto_runtime::{
    CancellationToken, Runtime,
    service::ServiceNames,
    testing::{TestCa, TestEndpoint, admin_get, eventually, service_names},
};
use pacto_testenv::{
    ControlPlane, ControlPlaneOptions,
    metrics_auth::{Scraper, grant, metrics_reader, review_rights},
};
use tokio::net::{TcpListener, TcpStream};

/// RBAC changes reach the API server's authorizer within a moment; this bounds the wait.
const WAIT: Duration = Duration::from_mins(1);
/// A series only this test's runtime appends (the service-specific extra text).
const EXTRA: &str = "pacto_secure_metrics_test_extra 1\n";

fn names() -> ServiceNames {
    service_names("", "secure-metrics-test")
}

async fn cluster() -> &'static ControlPlane {
    pacto_testenv::controlplane::ensure_crypto_provider();
    pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)")
}

/// Every log line of the process, for the check that no token is ever logged.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A runtime with secure metrics on a fresh loopback port (certificate `name`), its reviews sent
/// with `client`,
/// running until `stop`: (metrics address, admin address, the run's handle).
async fn start(
    ca: &TestCa,
    dir: &std::path::Path,
    name: &str,
    client: kube::Client,
    stop: &CancellationToken,
) -> (
    SocketAddr,
    SocketAddr,
    tokio::task::JoinHandle<Result<(), pacto_runtime::RuntimeError>>,
) {
    let (endpoint, config) = TestEndpoint::bind(ca, dir, name, &[]).await;
    let mut rt = Runtime::serving(config, names(), stop.clone()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = listener.local_addr().unwrap();
    rt.serve_metrics_securely(listener, client).unwrap();
    assert_eq!(rt.secure_metrics_addr(), Some(metrics_addr));
    rt.metrics_extra(|| EXTRA.to_owned());
    rt.ready_when(std::future::ready(true));
    (metrics_addr, endpoint.admin, tokio::spawn(rt.run()))
}

/// The scenarios of docs/design/architecture.md#secure-metrics, in one process (the log check
/// needs the one global subscriber).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_are_reviewed_by_the_api_server_and_the_admin_port_keeps_the_probes() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter("pacto_runtime=trace,kube=debug,info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let cp = cluster().await;
    let namespace = cp.create_namespace("metrics").await.unwrap();
    grant(cp, &namespace, "pacto-service", review_rights())
        .await
        .unwrap();
    grant(cp, &namespace, "scraper", metrics_reader())
        .await
        .unwrap();
    let service = cp
        .service_account_client(&namespace, "pacto-service")
        .await
        .unwrap();
    let scraper_token = cp
        .service_account_token(&namespace, "scraper", None, &[])
        .await
        .unwrap();
    let stranger_token = cp
        .service_account_token(&namespace, "stranger", None, &[])
        .await
        .unwrap();
    let garbage = "not-a-token-0123456789";

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("secure metrics test CA").unwrap();
    let stop = CancellationToken::new();
    let (metrics, admin, running) =
        start(&ca, dir.path(), "metrics.pacto.svc", service, &stop).await;
    let scraper = Scraper::trusting(&ca.pem()).unwrap();

    // allowed: the scraper's binding, and the service's own rights, take effect within a moment
    let allowed = eventually("the scraper's token to be allowed", WAIT, || async {
        let answer = scraper.get(metrics, Some(&scraper_token)).await.unwrap();
        if answer.status == 200 {
            Ok(answer)
        } else {
            Err(format!("{answer:?}"))
        }
    })
    .await;
    assert!(allowed.body.ends_with(EXTRA), "{}", allowed.body);
    assert!(
        allowed
            .head
            .contains("content-type: text/plain; version=0.0.4"),
        "{}",
        allowed.head
    );

    // no token, a garbage token, another scheme: 401 asking for a bearer token
    for answer in [
        scraper.get(metrics, None).await.unwrap(),
        scraper.get(metrics, Some(garbage)).await.unwrap(),
        scraper
            .request(metrics, "GET", "/metrics", Some("Basic dXNlcjpwYXNz"))
            .await
            .unwrap(),
    ] {
        assert_eq!(answer.status, 401, "{answer:?}");
        assert!(
            answer.head.contains("www-authenticate: bearer"),
            "{answer:?}"
        );
        assert!(!answer.body.contains("pacto_"), "{answer:?}");
    }

    // a valid token whose user may not get /metrics: 403 naming the user
    let refused = scraper.get(metrics, Some(&stranger_token)).await.unwrap();
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused
            .body
            .contains(&format!("system:serviceaccount:{namespace}:stranger")),
        "{refused:?}"
    );

    // only GET /metrics
    let bearer = format!("Bearer {scraper_token}");
    let other = scraper
        .request(metrics, "GET", "/healthz", Some(&bearer))
        .await
        .unwrap();
    assert_eq!(other.status, 404, "{other:?}");
    let post = scraper
        .request(metrics, "POST", "/metrics", Some(&bearer))
        .await
        .unwrap();
    assert_eq!(post.status, 405, "{post:?}");

    // the admin port keeps the probes; its /metrics says where the metrics went
    assert_eq!(admin_get(admin, "/readyz").await.0, 200);
    assert_eq!(admin_get(admin, "/healthz").await.0, 200);
    let (status, body) = admin_get(admin, "/metrics").await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains(&metrics.to_string()) && body.contains("--metrics-secure"),
        "{body}"
    );

    // the certificate is verified: a client trusting another CA does not get through
    let other_ca = TestCa::new("another CA").unwrap();
    let refused_tls = Scraper::trusting(&other_ca.pem())
        .unwrap()
        .request(metrics, "GET", "/metrics", Some(&bearer))
        .await
        .expect_err("a certificate of an untrusted CA was accepted");
    assert!(
        refused_tls.to_string().contains("UnknownIssuer")
            || refused_tls.to_string().contains("unknown issuer"),
        "{refused_tls}"
    );

    // a service whose reviews the API server refuses (no rights) answers 500, never 200
    let powerless = cp
        .service_account_client(&namespace, "powerless")
        .await
        .unwrap();
    let stop_powerless = CancellationToken::new();
    let (powerless_metrics, _, powerless_run) = start(
        &ca,
        dir.path(),
        "powerless.pacto.svc",
        powerless,
        &stop_powerless,
    )
    .await;
    let failed = scraper
        .get(powerless_metrics, Some(&scraper_token))
        .await
        .unwrap();
    assert_eq!(failed.status, 500, "{failed:?}");
    assert!(!failed.body.contains("pacto_"), "{failed:?}");

    // both drain; the metrics port closes with the admin port
    stop.cancel();
    stop_powerless.cancel();
    tokio::time::timeout(WAIT, running)
        .await
        .expect("run returns")
        .unwrap()
        .unwrap();
    tokio::time::timeout(WAIT, powerless_run)
        .await
        .expect("run returns")
        .unwrap()
        .unwrap();
    assert!(TcpStream::connect(metrics).await.is_err());
    assert!(TcpStream::connect(admin).await.is_err());

    // no token was logged, the review failure was
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    for token in [scraper_token.as_str(), stranger_token.as_str(), garbage] {
        assert!(!text.contains(token), "a token was logged:\n{text}");
    }
    assert!(
        text.contains("cannot review a metrics scrape"),
        "the failed review was not logged:\n{text}"
    );
}
