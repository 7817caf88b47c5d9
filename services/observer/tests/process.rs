//! The real `pacto-observer` binary as a process: a WatchTargets stream open when SIGTERM
//! arrives ends with OK, new connections are refused, and the process exits 0 without waiting
//! for the drain timeout (`docs/design/architecture.md#shutdown-and-drain`).

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use pacto_proto::observer::{WatchTargetsRequest, observer_client::ObserverClient};
use pacto_runtime::grpc::{ChannelSpec, Transport, channel};
use pacto_runtime::testing::{
    JsonLog, TestCa, addr_field, service_command, sigterm, wait_exit, within, write_tls_files,
};
use pacto_runtime::tls::TlsStore;

const DEADLINE: Duration = Duration::from_secs(20);
/// The drain timeout of every Pacto gRPC server (`pacto_runtime::grpc`).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
const SERVER_NAME: &str = "observer.pacto.svc";
const STATUS_WRITER: &str = "status-writer.pacto.svc";

/// A loopback port nothing listens on.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

// Multi-threaded: the test thread blocks on log lines while the stream's connection runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_an_open_watch_targets_stream_with_ok_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    // The stream needs no API server: the observer's watches fail and retry against a closed
    // port, while WatchTargets is served from its in-process hub.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: none\n\
             clusters: [{{name: none, cluster: {{server: \"https://{}\", insecure-skip-tls-verify: true}}}}]\n\
             users: [{{name: none, user: {{}}}}]\n\
             contexts: [{{name: none, context: {{cluster: none, user: none}}}}]\n",
            closed_port()
        ),
    )
    .unwrap();
    let ca = TestCa::new("pacto process test CA").unwrap();
    let server_cert = ca.issue(&[SERVER_NAME, "127.0.0.1"]).unwrap();
    let files = write_tls_files(dir.path(), "server", &ca.pem(), &server_cert).unwrap();
    let mut child = service_command(
        env!("CARGO_BIN_EXE_pacto-observer"),
        "OBSERVER",
        &files,
        STATUS_WRITER,
    )
    .env("KUBECONFIG", &kubeconfig)
    .spawn()
    .unwrap();
    let mut log = JsonLog::follow(child.stderr.take().unwrap(), DRAIN_TIMEOUT + DEADLINE);
    let grpc = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving Observer")
            .then(|| addr_field(v, "grpc_addr"))
            .flatten()
    });

    // A client whose calls outlast the drain timeout: only the server can end the stream.
    let store = TlsStore::load(ca.client_files(dir.path(), "client", &[STATUS_WRITER])).unwrap();
    let spec = ChannelSpec {
        address: grpc.to_string(),
        server_name: Some(SERVER_NAME.to_owned()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_mins(10),
    };
    let mut observer = ObserverClient::new(channel(&spec, &Transport::Mtls(store)).unwrap());
    // The response headers have arrived: the server holds the stream open.
    let mut stream = observer
        .watch_targets(WatchTargetsRequest {
            namespace: String::new(),
        })
        .await
        .unwrap_or_else(|status| panic!("{status:?}; logs:\n{}", log.text()))
        .into_inner();
    let end = tokio::spawn(async move { stream.next().await });
    assert!(
        !end.is_finished(),
        "the stream stays open while the observer runs; logs:\n{}",
        log.text()
    );

    sigterm(&child);
    log.wait_for_message("shutdown requested, draining");
    within("the gRPC port to refuse connections", DEADLINE, || async {
        tokio::net::TcpStream::connect(grpc).await.is_err()
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}; logs:\n{}", log.text()));

    // The stream ends with OK (no item, no error); a stream cut by the drain timeout would end
    // with a transport error instead.
    let end = tokio::time::timeout(DRAIN_TIMEOUT + DEADLINE, end)
        .await
        .unwrap_or_else(|_| panic!("the stream ends; logs:\n{}", log.text()))
        .unwrap();
    assert!(
        end.is_none(),
        "the stream ends with OK at shutdown: {end:?}; logs:\n{}",
        log.text()
    );
    log.wait_for_message("observer stopped");
    let exit = wait_exit(&mut child, DEADLINE, &log).await;
    assert!(exit.success(), "exit {exit:?}; logs:\n{}", log.text());
    assert!(
        !log.text().contains("after the drain timeout"),
        "the drain ended because the stream ended, not by the timeout; logs:\n{}",
        log.text()
    );
}
