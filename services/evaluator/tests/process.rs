//! The real `pacto-evaluator` binary as a process: it serves mTLS gRPC to a real client and shuts
//! down gracefully on SIGTERM: with a call in flight it refuses new connections, answers that
//! call, and then exits 0 (`docs/design/architecture.md#shutdown-and-drain`).

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed step should fail the test"
)]

mod common;

use std::time::Duration;

use common::{STATUS_WRITER, client_files};
use pacto_proto::evaluator::{
    ContractStatus, EvaluateRequest, EvaluateResponse, evaluator_client::EvaluatorClient,
};
use pacto_runtime::testing::{
    JsonLog, TestCa, addr_field, metric_value, mtls_channel, service_command, sigterm, wait_exit,
    within, write_tls_files,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Response, Status, codegen::http::uri::PathAndQuery, transport::Channel};

const DEADLINE: Duration = Duration::from_secs(20);

// Multi-threaded: the test thread blocks on log lines while the client's connection task must
// keep running (it answers the server's GOAWAY during the drain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_mtls_and_drains_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto process test CA").unwrap();
    let server_cert = ca.issue(&[common::SERVER_NAME, "127.0.0.1"]).unwrap();
    let files = write_tls_files(dir.path(), "server", &ca.pem(), &server_cert).unwrap();

    // h2's frame log shows when the held call's request message has reached the server.
    let mut child = service_command(
        env!("CARGO_BIN_EXE_pacto-evaluator"),
        "EVALUATOR",
        &files,
        STATUS_WRITER,
    )
    .env("PACTO_LOG_LEVEL", "info,h2=debug")
    .spawn()
    .unwrap();
    let mut log = JsonLog::follow(child.stderr.take().unwrap(), DEADLINE);
    let (grpc, admin) = log.wait_for("the serving log line", |v| {
        (v.get("message")?.as_str()? == "serving Evaluator")
            .then(|| Some((addr_field(v, "grpc_addr")?, addr_field(v, "admin_addr")?)))
            .flatten()
    });

    // A real client over mTLS; one HTTP/2 connection for all its calls.
    let channel = mtls_channel(
        grpc,
        common::SERVER_NAME,
        client_files(dir.path(), "client", &ca, &[STATUS_WRITER]),
    );
    let mut evaluator = EvaluatorClient::new(channel.clone());
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

    // A call in flight: the third on the connection, so HTTP/2 stream 5 (client streams are
    // odd and in order). Its request message reaches the server, but its request stream stays
    // open until the test ends it, so the server cannot answer before that.
    let (end_request, held) = held_evaluate(channel);
    log.wait_for("the held call's request message at the server", |v| {
        let frame = v.get("frame")?.as_str()?;
        (v.get("message")?.as_str()? == "received"
            && frame.starts_with("Data { stream_id: StreamId(5)")
            && !frame.contains("END_STREAM"))
        .then_some(())
    });

    // SIGTERM: the process stops accepting connections but keeps serving the held call.
    sigterm(&child);
    log.wait_for("the shutdown log line", |v| {
        (v.get("message")?.as_str()? == "shutdown requested, draining").then_some(())
    });
    within("the gRPC port to refuse connections", DEADLINE, || async {
        tokio::net::TcpStream::connect(grpc).await.is_err()
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}; logs:\n{}", log.text()));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process waits for the call in flight; logs:\n{}",
        log.text()
    );

    // The request ends: the call is answered, then the process exits 0.
    drop(end_request);
    let answered = tokio::time::timeout(DEADLINE, held)
        .await
        .unwrap_or_else(|_| panic!("the held call ends; logs:\n{}", log.text()))
        .unwrap()
        .unwrap_or_else(|status| {
            panic!(
                "the held call is answered, got {status:?}; logs:\n{}",
                log.text()
            )
        })
        .into_inner();
    assert_eq!(answered.contract_status(), ContractStatus::NonCompliant);
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
        !log.text().contains("after the drain timeout"),
        "the drain ended because the call finished, not by the timeout; logs:\n{}",
        log.text()
    );
}

/// Starts an `Evaluate` call on `channel` whose request stream holds the typical request and
/// stays open until the returned sender is dropped (a slow client upload): the server has the
/// message but answers a unary call only once the request ends.
fn held_evaluate(
    channel: Channel,
) -> (
    mpsc::UnboundedSender<EvaluateRequest>,
    tokio::task::JoinHandle<Result<Response<EvaluateResponse>, Status>>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    sender.send(pacto_evaluator::typical_request()).unwrap();
    let call = tokio::spawn(async move {
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready()
            .await
            .map_err(|error| Status::unavailable(error.to_string()))?;
        grpc.client_streaming(
            tonic::Request::new(UnboundedReceiverStream::new(receiver)),
            PathAndQuery::from_static("/pacto.evaluator.v1.Evaluator/Evaluate"),
            tonic_prost::ProstCodec::<EvaluateRequest, EvaluateResponse>::default(),
        )
        .await
    });
    (sender, call)
}
