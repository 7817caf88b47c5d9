//! Shared harness of the evaluator component tests: a test PKI, an in-process server on
//! 127.0.0.1:0 with real mTLS, and clients.

#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(
    clippy::unwrap_used,
    reason = "test harness: a failed setup step should fail the test"
)]

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use pacto_evaluator::EvaluatorService;
use pacto_proto::evaluator::evaluator_client::EvaluatorClient;
use pacto_runtime::{
    CancellationToken,
    testing::{TestCa, TestEndpoint, mtls_channel},
    tls::{TlsFiles, TlsStore},
};
use tonic::transport::Channel;

pub const SERVER_NAME: &str = "evaluator.pacto.svc";
pub const STATUS_WRITER: &str = "status-writer.pacto.svc";

/// Writes a client identity's files signed by `ca`.
pub fn client_files(dir: &Path, name: &str, ca: &TestCa, identity: &[&str]) -> TlsFiles {
    ca.client_files(dir, name, identity)
}

/// A channel to `addr` with the material of `files`.
pub fn client(addr: SocketAddr, files: TlsFiles) -> EvaluatorClient<Channel> {
    EvaluatorClient::new(mtls_channel(addr, SERVER_NAME, files))
}

/// A running in-process evaluator.
pub struct Server {
    pub dir: tempfile::TempDir,
    pub ca: TestCa,
    pub files: TlsFiles,
    pub store: Arc<TlsStore>,
    pub grpc: SocketAddr,
    pub admin: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), pacto_evaluator::EvaluatorError>>,
}

impl Server {
    /// Starts a server whose certificate comes from a fresh CA, allowing `allowed`, reloading
    /// the TLS files every 100 ms.
    pub async fn start(allowed: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("pacto test CA").unwrap();
        let (endpoint, config) = TestEndpoint::bind(&ca, dir.path(), SERVER_NAME, allowed).await;
        let shutdown = CancellationToken::new();
        endpoint
            .store
            .spawn_reloader(Duration::from_millis(100), shutdown.clone());
        let TestEndpoint {
            grpc,
            admin,
            files,
            store,
        } = endpoint;
        let task = tokio::spawn(pacto_evaluator::serve(
            config,
            EvaluatorService::default(),
            shutdown.clone(),
        ));
        Self {
            dir,
            ca,
            files,
            store,
            grpc,
            admin,
            shutdown,
            task,
        }
    }

    /// A client with a certificate from the server's CA carrying `identity`.
    pub fn client(&self, name: &str, identity: &[&str]) -> EvaluatorClient<Channel> {
        client(
            self.grpc,
            client_files(self.dir.path(), name, &self.ca, identity),
        )
    }

    /// Stops the server and waits for it to drain.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("server drains within 10 s")
            .unwrap()
            .unwrap();
    }
}
