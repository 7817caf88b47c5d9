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

use std::time::Duration;

use common::STATUS_WRITER;
use pacto_runtime::testing::{
    JsonLog, TestCa, addr_field, admin_get, eventually, service_command, sigterm, wait_exit,
    write_tls_files,
};
use pacto_testenv::{
    ControlPlaneOptions,
    metrics_auth::{Scraper, grant, metrics_reader, review_rights},
};

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_metrics_over_https_to_allowed_scrapers_only() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let cp = pacto_testenv::shared(ControlPlaneOptions::default)
        .await
        .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)");
    let namespace = cp.create_namespace("evaluator-metrics").await.unwrap();
    grant(cp, &namespace, "pacto-evaluator", review_rights())
        .await
        .unwrap();
    grant(cp, &namespace, "scraper", metrics_reader())
        .await
        .unwrap();
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

    let scraper_client = Scraper::trusting(&ca.pem()).unwrap();
    // 200 (before its first call the evaluator has recorded nothing, so the body may be empty;
    // services/runtime/tests/secure_metrics.rs checks the body)
    eventually("the scraper's token to be allowed", DEADLINE, || async {
        match scraper_client.get(metrics, Some(&scraper)).await {
            Ok(answer) if answer.status == 200 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let refused = scraper_client.get(metrics, Some(&stranger)).await.unwrap();
    assert_eq!(refused.status, 403, "{refused:?}");
    let (status, body) = admin_get(admin, "/metrics").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(admin_get(admin, "/readyz").await.0, 200);

    sigterm(&child);
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(exit.success(), "{exit}; logs:\n{}", log.text());
}
