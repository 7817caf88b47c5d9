//! The real `pacto-evaluator` binary as a process: it serves mTLS gRPC to a real client and shuts
//! down gracefully on SIGTERM.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

mod common;

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use common::{STATUS_WRITER, client, client_files};
use pacto_proto::evaluator::ContractStatus;
use pacto_runtime::testing::{TestCa, write_tls_files};

const DEADLINE: Duration = Duration::from_secs(20);

/// Reads log lines until one satisfies `pick`, or fails after the deadline.
fn wait_for_log<T>(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    what: &str,
    pick: impl Fn(&serde_json::Value) -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        let remaining = DEADLINE
            .checked_sub(start.elapsed())
            .unwrap_or_else(|| panic!("timed out waiting for {what}; logs:\n{}", seen.join("\n")));
        let line = lines
            .recv_timeout(remaining)
            .unwrap_or_else(|_| panic!("no {what}; logs:\n{}", seen.join("\n")));
        seen.push(line.clone());
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
            && let Some(found) = pick(&value)
        {
            return found;
        }
    }
}

fn addr_field(value: &serde_json::Value, field: &str) -> Option<SocketAddr> {
    // Logged with Debug formatting: `Some(127.0.0.1:1234)`.
    let text = value.get(field)?.as_str()?;
    text.strip_prefix("Some(")?.strip_suffix(')')?.parse().ok()
}

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
    let stderr = child.stderr.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let (grpc, admin) = wait_for_log(&lines, &mut seen, "the serving log line", |v| {
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

    // SIGTERM: the process logs the request, drains and exits 0.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for_log(&lines, &mut seen, "the shutdown log line", |v| {
        (v.get("message")?.as_str()? == "shutdown requested, draining").then_some(())
    });
    wait_for_log(&lines, &mut seen, "the stopped log line", |v| {
        (v.get("message")?.as_str()? == "evaluator stopped").then_some(())
    });
    let start = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "process did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        exit.success(),
        "exit status {exit:?}; logs:\n{}",
        seen.join("\n")
    );
    assert!(
        tokio::net::TcpStream::connect(grpc).await.is_err(),
        "the gRPC port is closed after shutdown"
    );
}
