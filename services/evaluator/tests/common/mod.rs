//! Shared harness of the evaluator component tests: a test PKI, an in-process server on
//! 127.0.0.1:0 with real mTLS, and clients.

#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(
    clippy::unwrap_used,
    reason = "test harness: a failed setup step should fail the test"
)]

use std::{future::Future, net::SocketAddr, path::Path, sync::Arc, time::Duration};

use pacto_evaluator::{EvaluatorService, ServeConfig};
use pacto_proto::evaluator::evaluator_client::EvaluatorClient;
use pacto_runtime::{
    CancellationToken,
    grpc::{self, ChannelSpec, Transport},
    identity::AllowList,
    testing::{TestCa, write_tls_files},
    tls::{TlsFiles, TlsStore},
};
use tonic::transport::Channel;

pub const SERVER_NAME: &str = "evaluator.pacto.svc";
pub const STATUS_WRITER: &str = "status-writer.pacto.svc";

/// Polls `check` until it returns `Some`, or fails after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = tokio::time::Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes a client identity's files signed by `ca`.
pub fn client_files(dir: &Path, name: &str, ca: &TestCa, identity: &[&str]) -> TlsFiles {
    let cert = ca.issue(identity).unwrap();
    write_tls_files(dir, name, &ca.pem(), &cert).unwrap()
}

/// A channel to `addr` with the material of `files`.
pub fn client(addr: SocketAddr, files: TlsFiles) -> EvaluatorClient<Channel> {
    let store = TlsStore::load(files).unwrap();
    let spec = ChannelSpec {
        address: addr.to_string(),
        server_name: Some(SERVER_NAME.to_owned()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
    };
    EvaluatorClient::new(grpc::channel(&spec, &Transport::Mtls(store)).unwrap())
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
        let cert = ca.issue(&[SERVER_NAME, "127.0.0.1"]).unwrap();
        let files = write_tls_files(dir.path(), "server", &ca.pem(), &cert).unwrap();
        let store = TlsStore::load(files.clone()).unwrap();
        let shutdown = CancellationToken::new();
        store.spawn_reloader(Duration::from_millis(100), shutdown.clone());
        let grpc_listener = grpc::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let admin_listener = pacto_runtime::admin::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let grpc = grpc_listener.local_addr().unwrap();
        let admin = admin_listener.local_addr().unwrap();
        let config = ServeConfig {
            grpc: grpc_listener,
            admin: admin_listener,
            transport: Transport::Mtls(Arc::clone(&store)),
            allowed: AllowList::new(allowed),
        };
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
