//! The real `pacto-evaluator` binary as a process: it serves mTLS gRPC to a real client and shuts
//! down gracefully on SIGTERM.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

mod common;

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use common::{STATUS_WRITER, client, client_files};
use pacto_proto::evaluator::ContractStatus;
use pacto_runtime::testing::{
    JsonLog, TestCa, addr_field, metric_value, wait_exit, write_tls_files,
};

const DEADLINE: Duration = Duration::from_secs(20);

// Multi-threaded: the test thread blocks on log lines while the client's connection task must
// keep running (it answers the server's GOAWAY during the drain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_mtls_and_drains_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto process test CA").unwrap();
    let server_cert = ca.issue(&[common::SERVER_NAME, "127.0.0.1"]).unwrap();
    let files = write_tls_files(dir.path(), "server", &ca.pem(), &server_cert).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_pacto-evaluator"))
        .args([
            "--listen-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .arg("--tls-ca")
        .arg(&files.ca)
        .arg("--tls-cert")
        .arg(&files.cert)
        .arg("--tls-key")
        .arg(&files.key)
        .args([
            "--allowed-identities",
            STATUS_WRITER,
            "--log-format",
            "json",
        ])
        .env_remove("PACTO_INSECURE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = JsonLog::follow(child.stderr.take().unwrap(), DEADLINE);
    let (grpc, admin) = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving Evaluator")
            .then(|| Some((addr_field(v, "grpc_addr")?, addr_field(v, "admin_addr")?)))
            .flatten()
    });

    // A real client over mTLS.
    let mut evaluator = client(
        grpc,
        client_files(dir.path(), "client", &ca, &[STATUS_WRITER]),
    );
    let response = evaluator
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.contract_status(), ContractStatus::NonCompliant);
    assert_eq!(
        pacto_runtime::testing::admin_get(admin, "/readyz").await.0,
        200
    );
    // The same contract again: parsed once, then served from the parsed-contract cache. This
    // process owns its metrics recorder, so the counts are exact.
    evaluator
        .evaluate(pacto_evaluator::typical_request())
        .await
        .unwrap();
    let (code, metrics) = pacto_runtime::testing::admin_get(admin, "/metrics").await;
    assert_eq!(code, 200);
    for result in ["miss", "hit"] {
        let label = format!("result=\"{result}\"");
        let count = metric_value(
            &metrics,
            "pacto_evaluator_contract_cache_total",
            &[label.as_str()],
        );
        // Counts are whole numbers: within 0.5 of 1 means exactly one.
        assert!((count - 1.0).abs() < 0.5, "{result} {count}:\n{metrics}");
    }

    // SIGTERM: the process logs the request, drains and exits 0.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    log.wait_for("the shutdown log line", |v| {
        (v.get("message")?.as_str()? == "shutdown requested, draining").then_some(())
    });
    log.wait_for("the stopped log line", |v| {
        (v.get("message")?.as_str()? == "evaluator stopped").then_some(())
    });
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(
        exit.success(),
        "exit status {exit:?}; logs:\n{}",
        log.text()
    );
    assert!(
        tokio::net::TcpStream::connect(grpc).await.is_err(),
        "the gRPC port is closed after shutdown"
    );
}
