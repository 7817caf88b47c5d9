//! Shared harness of the Evidence Server's tests: the real contract-resolver over mTLS, the
//! server in process over the real OCI store, Pacto bundles pushed to a real registry, signed
//! envelopes, and a raw HTTP/1.1 client.

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses a different subset"
)]
#![allow(
    clippy::unwrap_used,
    reason = "test harness: a failed setup step should fail the test"
)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use pacto_engine::Timestamp;
use pacto_evidence::{Envelope, TrustStore, sign};
use pacto_evidence_server::PREFIX;
use pacto_evidence_server::testing::ServerOptions;
use pacto_runtime::CancellationToken;
use pacto_runtime::grpc::RetryPolicy;
use pacto_runtime::testing::TestCa;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub use pacto_evidence_server::testing::{Payments, Server, start_resolver, trust};

/// One HTTP/1.1 exchange on a fresh connection: (status, headers in lower case, body).
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // an oversized body may be cut short by the server once it has refused it
    let _ = stream.write_all(body).await;
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    (status, head.to_lowercase(), body.to_owned())
}

pub fn error_body(code: &str, message: &str) -> String {
    format!("{{\"code\":\"{code}\",\"message\":\"{message}\"}}\n")
}

/// Pushes `yaml` as the only file of a Pacto bundle `<host>/<repo>:<tag>`; the manifest digest.
pub async fn push(host: &str, repo: &str, tag: &str, yaml: &str) -> String {
    pacto_evidence_server::testing::push_bundle(host, repo, tag, yaml).await
}

/// The evidence set JSON of `subject` against `contract_ref`.
pub fn evidence_set(subject: &str, contract_ref: &str, source: &str) -> String {
    format!(
        r#"{{"Subject":{{"kind":"service","name":"{subject}"}},"ContractRef":"{contract_ref}","Source":"{source}","ObservedAt":"2026-12-04T10:00:00Z","Observations":[{{"kind":"WorkloadObserved","subject":{{"kind":"service","name":"payments"}},"outcome":"Observed","value":{{"type":"job"}},"provenance":{{"collector":"ci","detectedAt":"2026-12-04T10:00:00Z"}}}}]}}"#
    )
}

/// A signed envelope (JSON bytes).
pub struct Draft<'a> {
    pub id: &'a str,
    pub producer: &'a str,
    pub key_id: &'a str,
    pub sequence: u64,
    pub expires_at: Timestamp,
    pub set: String,
}

impl Draft<'_> {
    pub fn signed(&self, key: &ed25519_dalek::SigningKey) -> Vec<u8> {
        let (now, _) = Timestamp::now().unix_parts();
        let issued = Timestamp::from_unix(now - 60, 0).unwrap();
        let text = format!(
            r#"{{"apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","id":"{}","producer":{{"id":"{}","keyId":"{}"}},"sequence":{},"issuedAt":"{}","expiresAt":"{}","evidenceSet":{}}}"#,
            self.id,
            self.producer,
            self.key_id,
            self.sequence,
            issued.to_rfc3339_nano(),
            self.expires_at.to_rfc3339_nano(),
            self.set
        );
        let mut envelope = Envelope::decode(text.as_bytes()).unwrap();
        sign(&mut envelope, key).unwrap();
        envelope.to_json().into_bytes()
    }
}

pub fn in_an_hour() -> Timestamp {
    let (now, _) = Timestamp::now().unix_parts();
    Timestamp::from_unix(now + 3600, 0).unwrap()
}

/// A signed envelope of producer `ci` (key id `ci-1`): the `payments-prod` evidence set against
/// `subject`, valid for an hour.
pub fn payments_envelope(
    key: &ed25519_dalek::SigningKey,
    subject: &str,
    id: &str,
    sequence: u64,
) -> Vec<u8> {
    Draft {
        id,
        producer: "ci",
        key_id: "ci-1",
        sequence,
        expires_at: in_an_hour(),
        set: evidence_set("payments-prod", subject, "ci"),
    }
    .signed(key)
}

/// `POST /envelopes` on a fresh connection: (status, body).
pub async fn post_envelope(api: SocketAddr, envelope: &[u8]) -> (u16, String) {
    let (status, _, body) = http(api, "POST", &format!("{PREFIX}/envelopes"), envelope).await;
    (status, body)
}

/// The servers' `--read-header-timeout` in the tests.
pub const HEADER_TIMEOUT: Duration = Duration::from_millis(500);
/// The servers' `--read-body-timeout` in the tests.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(1);

/// The options of the tests: producers `ci` and `another`, no resolver retries, a 1 s registry
/// connect timeout, the header and body timeouts above, the other limits at their defaults.
pub fn options(options: &mut ServerOptions) {
    options.producers = vec!["ci".to_owned(), "another".to_owned()];
    options.limits.header_timeout = HEADER_TIMEOUT;
    options.limits.body_timeout = BODY_TIMEOUT;
    options.retry = RetryPolicy {
        max_retries: 0,
        min_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(10),
    };
    options.registry_connect_timeout = Some(Duration::from_secs(1));
}

/// The `payments` subject on `registry_host` and a server over it with the test [`options`]
/// (`pacto_evidence_server::testing::start_payments`).
pub async fn start_payments(dir: &Path, registry_host: &str, stop: &CancellationToken) -> Payments {
    pacto_evidence_server::testing::start_payments(dir, registry_host, options, stop).await
}

/// Starts the evidence API for `subjects` on `registry_host` with the resolver at `resolver` and
/// the test [`options`].
pub async fn start_server(
    ca: &TestCa,
    dir: &Path,
    resolver: SocketAddr,
    registry_host: &str,
    subjects: &[String],
    trust: TrustStore,
    stop: &CancellationToken,
) -> Server {
    let mut server_options = ServerOptions::new(registry_host, subjects.to_vec(), trust, vec![]);
    options(&mut server_options);
    pacto_evidence_server::testing::start_server(ca, dir, resolver, server_options, stop).await
}
