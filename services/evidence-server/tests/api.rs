//! The Evidence Server's ingestion API end to end (docs/design/evidence-server.md#api): the real
//! server in process, the real contract-resolver over mTLS (it admits the evidence-server's
//! identity only), a real docker-registry 2.8 (no Referrers API: the tag-schema mode) holding
//! the contracts and the stored records. Every §6.2 code with its exact status and body, the
//! GET endpoints, 405/404/HEAD, and the ingest throughput (printed, not asserted).

#![allow(
    clippy::unwrap_used,
    clippy::float_cmp,
    reason = "tests; metric values are small integers"
)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
use pacto_contract::reference::Reference;
use pacto_engine::Timestamp;
use pacto_evidence::store::{Store, StoreOptions, Subjects};
use pacto_evidence::{Envelope, TrustStore, keys, sign};
use pacto_evidence_server::{Api, ContractResolver, PREFIX};
use pacto_oci::{BundleMeta, ClientOptions, Credentials, Keychain, RegistryClient};
use pacto_runtime::grpc::RetryPolicy;
use pacto_runtime::testing::{TestCa, TestEndpoint, admin_get, metric_value};
use pacto_runtime::{CancellationToken, spiffe_id};
use pacto_testenv::registry::Registry;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

const RESOLVER: &str = "contract-resolver.pacto.svc";

fn evidence_identity() -> String {
    spiffe_id("pacto", "pacto-system", "pacto-evidence-server")
}

/// One HTTP/1.1 exchange on a fresh connection: (status, headers in lower case, body).
async fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String, String) {
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

fn error_body(code: &str, message: &str) -> String {
    format!("{{\"code\":\"{code}\",\"message\":\"{message}\"}}\n")
}

/// Pushes `yaml` as the only file of a bundle `<host>/<repo>:<tag>`; the manifest digest.
async fn push(registry: &Registry, repo: &str, tag: &str, yaml: &str) -> String {
    let mut files = BundleFiles::new();
    files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
    let reference = Reference::parse(&format!("{}/{repo}:{tag}", registry.host())).unwrap();
    let meta = BundleMeta {
        name: repo.to_owned(),
        version: tag.to_owned(),
        pacto_version: "2.0".to_owned(),
    };
    let client = RegistryClient::new(
        ClientOptions {
            insecure_registries: vec![registry.host()],
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )
    .unwrap();
    client
        .push(&reference, &files, &meta, true, &|_| {})
        .await
        .unwrap()
        .digest
}

/// The evidence set JSON of `subject` against `contract_ref`.
fn evidence_set(subject: &str, contract_ref: &str, source: &str) -> String {
    format!(
        r#"{{"Subject":{{"kind":"service","name":"{subject}"}},"ContractRef":"{contract_ref}","Source":"{source}","ObservedAt":"2026-12-04T10:00:00Z","Observations":[{{"kind":"WorkloadObserved","subject":{{"kind":"service","name":"payments"}},"outcome":"Observed","value":{{"type":"job"}},"provenance":{{"collector":"ci","detectedAt":"2026-12-04T10:00:00Z"}}}}]}}"#
    )
}

/// A signed envelope (JSON bytes).
struct Draft<'a> {
    id: &'a str,
    producer: &'a str,
    key_id: &'a str,
    sequence: u64,
    expires_at: Timestamp,
    set: String,
}

impl Draft<'_> {
    fn signed(&self, key: &ed25519_dalek::SigningKey) -> Vec<u8> {
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

fn in_an_hour() -> Timestamp {
    let (now, _) = Timestamp::now().unix_parts();
    Timestamp::from_unix(now + 3600, 0).unwrap()
}

/// The structured trust configuration: key `ci-1` of producer `ci`, subjects `payments*`.
fn trust(dir: &Path, key: &ed25519_dalek::SigningKey) -> TrustStore {
    std::fs::write(
        dir.join("ci__ci-1.pub"),
        keys::verifying_key_text(&key.verifying_key()),
    )
    .unwrap();
    let config = "apiVersion: pacto.dev/evidence-trust/v1\nkeys:\n  - keyId: ci-1\n    producerId: ci\n    publicKeyFile: ci__ci-1.pub\n    allowedSubjects: [\"payments*\"]\n    allowedContractRepos: []\n";
    let path = dir.join("trust.yaml");
    std::fs::write(&path, config).unwrap();
    TrustStore::load(&path).unwrap()
}

struct Server {
    api: SocketAddr,
    admin: SocketAddr,
}

/// Starts the evidence API for `subjects` on `registry_host` with the resolver at `resolver`.
async fn start_server(
    ca: &TestCa,
    dir: &Path,
    resolver: SocketAddr,
    registry_host: &str,
    subjects: &[String],
    trust: TrustStore,
    stop: &CancellationToken,
) -> Server {
    let subjects = Subjects::parse(subjects).unwrap();
    let options = StoreOptions {
        client: ClientOptions {
            insecure_registries: vec![registry_host.to_owned()],
            connect_timeout: Duration::from_secs(1),
            ..ClientOptions::default()
        },
        ..StoreOptions::default()
    };
    let storage = Store::new(subjects, options, &Keychain::new()).unwrap();
    let client = ca.channel(
        dir,
        "evidence-server",
        &[&evidence_identity()],
        resolver,
        RESOLVER,
    );
    let api = Api {
        trust,
        producers: vec!["ci".to_owned(), "another".to_owned()],
        storage,
        resolver: ContractResolver::new(
            client,
            RetryPolicy {
                max_retries: 0,
                min_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(10),
            },
            "pacto-system",
        ),
        ready_timeout: Duration::from_secs(3),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server {
        api: listener.local_addr().unwrap(),
        admin: admin.local_addr().unwrap(),
    };
    tokio::spawn(pacto_evidence_server::serve(
        api,
        listener,
        admin,
        Duration::from_secs(10),
        stop.clone(),
    ));
    server
}

/// The real contract-resolver over mTLS, admitting only the evidence-server's identity.
async fn start_resolver(
    ca: &TestCa,
    dir: &Path,
    registry: &Registry,
    stop: &CancellationToken,
) -> SocketAddr {
    let identity = evidence_identity();
    let (endpoint, config) = TestEndpoint::bind(ca, dir, RESOLVER, &[identity.as_str()]).await;
    let mut resolver_config = pacto_contract_resolver::ResolverConfig::default();
    resolver_config.registry.client.insecure_registries = vec![registry.host()];
    resolver_config.registry.max_retries = 0;
    let resolver = pacto_contract_resolver::Resolver::new(resolver_config, None).unwrap();
    tokio::spawn(pacto_contract_resolver::serve(
        config,
        pacto_contract_resolver::ResolverService::new(Arc::new(resolver)),
        stop.clone(),
    ));
    endpoint.grpc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_code_of_the_ingestion_api_with_its_status_and_body() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto-test-ca").unwrap();
    let registry = Registry::start().unwrap();
    let stop = CancellationToken::new();
    let host = registry.host();

    let payments = push(
        &registry,
        "team/payments",
        "1.0.0",
        "pactoVersion: \"2.0\"\nservice:\n  name: payments\n  version: 1.0.0\nworkload: service\n",
    )
    .await;
    let broken = push(
        &registry,
        "team/broken",
        "1.0.0",
        "pactoVersion: \"9.9\"\nservice: {}\n",
    )
    .await;
    let payments_ref = format!("oci://{host}/team/payments@{payments}");
    let broken_ref = format!("oci://{host}/team/broken@{broken}");

    let key = keys::generate().unwrap();
    let resolver = start_resolver(&ca, dir.path(), &registry, &stop).await;
    let server = start_server(
        &ca,
        dir.path(),
        resolver,
        &host,
        &[payments_ref.clone(), broken_ref.clone()],
        trust(dir.path(), &key),
        &stop,
    )
    .await;
    let post = |body: Vec<u8>| {
        let addr = server.api;
        async move { http(addr, "POST", &format!("{PREFIX}/envelopes"), &body).await }
    };
    let draft = |id: &'static str, sequence: u64, set: String| Draft {
        id,
        producer: "ci",
        key_id: "ci-1",
        sequence,
        expires_at: in_an_hour(),
        set,
    };
    let good_set = || evidence_set("payments-prod", &payments_ref, "ci");

    // GET endpoints, HEAD, 405, 404
    let (status, _, body) = http(server.api, "GET", &format!("{PREFIX}/health"), b"").await;
    assert_eq!((status, body.as_str()), (200, "{\"status\":\"ok\"}\n"));
    let (status, head, body) = http(server.api, "GET", &format!("{PREFIX}/ready"), b"").await;
    assert_eq!((status, body.as_str()), (200, "{\"status\":\"ready\"}\n"));
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(head.contains("pacto-referrers-mode: tag-schema"), "{head}");
    let (status, _, body) = http(server.api, "GET", &format!("{PREFIX}/producers"), b"").await;
    assert_eq!(
        (status, body.as_str()),
        (200, "{\"producers\":[\"another\",\"ci\"]}\n")
    );
    let (status, head, body) = http(server.api, "HEAD", &format!("{PREFIX}/health"), b"").await;
    assert_eq!((status, body.as_str()), (200, ""));
    assert!(head.contains("content-type: application/json"), "{head}");
    let (status, head, body) = http(server.api, "DELETE", &format!("{PREFIX}/health"), b"").await;
    assert_eq!((status, body.as_str()), (405, "Method Not Allowed\n"));
    assert!(head.contains("allow: get, head"), "{head}");
    let (status, head, _) = http(server.api, "GET", &format!("{PREFIX}/envelopes"), b"").await;
    assert_eq!(status, 405);
    assert!(head.contains("allow: post"), "{head}");
    let (status, _, body) = http(server.api, "GET", &format!("{PREFIX}/nope"), b"").await;
    assert_eq!((status, body.as_str()), (404, "404 page not found\n"));
    let (status, _, body) = http(server.api, "GET", "/", b"").await;
    assert_eq!((status, body.as_str()), (404, "404 page not found\n"));

    // 202, then the same envelope again: replay (409)
    let first = draft("env-1", 1, good_set()).signed(&key);
    let (status, _, body) = post(first.clone()).await;
    assert_eq!(status, 202, "{body}");
    let accepted: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(accepted["id"], "env-1");
    // workload declared `service`, observed `job`: one WORKLOAD_MISMATCH error
    assert_eq!(accepted["compliance"], "NonCompliant");
    assert_eq!(accepted["findings"], 1);
    assert!(
        body.starts_with("{\"acceptedAt\":\"") && body.ends_with("\"id\":\"env-1\"}\n"),
        "{body}"
    );
    let (status, _, body) = post(first).await;
    assert_eq!(
        (status, body),
        (409, error_body("replay", "envelope was already accepted"))
    );
    // a new id with a sequence not above the accepted one: replay
    let (status, _, body) = post(draft("env-2", 1, good_set()).signed(&key)).await;
    assert_eq!(
        (status, body),
        (409, error_body("replay", "envelope was already accepted"))
    );

    let unauthorized = error_body("unauthorized_producer", "producer is not authorized");
    // wrong key: signed by another key under the trusted key id
    let other = keys::generate().unwrap();
    let (status, _, body) = post(draft("env-3", 3, good_set()).signed(&other)).await;
    assert_eq!((status, body), (401, unauthorized.clone()));
    // unknown producer: the key is bound to `ci`
    let mut foreign = draft("env-4", 4, good_set());
    foreign.producer = "intruder";
    let (status, _, body) = post(foreign.signed(&key)).await;
    assert_eq!((status, body), (401, unauthorized.clone()));
    // unknown key id
    let mut unknown_key = draft("env-5", 5, good_set());
    unknown_key.key_id = "nobody";
    let (status, _, body) = post(unknown_key.signed(&key)).await;
    assert_eq!((status, body), (401, unauthorized.clone()));
    // expired
    let mut expired = draft("env-6", 6, good_set());
    expired.expires_at = Timestamp::parse("2020-01-01T00:00:00Z").unwrap();
    let (status, _, body) = post(expired.signed(&key)).await;
    assert_eq!((status, body), (401, unauthorized.clone()));
    // subject outside the key's allowedSubjects
    let (status, _, body) =
        post(draft("env-7", 7, evidence_set("orders", &payments_ref, "ci")).signed(&key)).await;
    assert_eq!((status, body), (401, unauthorized));

    let invalid_envelope = error_body("invalid_envelope", "envelope could not be decoded");
    // oversized body (over 1 MiB)
    let (status, _, body) = post(vec![b' '; (1 << 20) + 100]).await;
    assert_eq!((status, body), (400, invalid_envelope.clone()));
    // malformed JSON
    let (status, _, body) = post(b"{\"apiVersion\":".to_vec()).await;
    assert_eq!((status, body), (400, invalid_envelope.clone()));
    // an unknown key
    let (status, _, body) =
        post(b"{\"apiVersion\":\"pacto.dev/evidence/v1\",\"extra\":1}".to_vec()).await;
    assert_eq!((status, body), (400, invalid_envelope));

    // invalid evidence: an empty Source passes decoding, fails validation
    let (status, _, body) =
        post(draft("env-8", 8, evidence_set("payments-prod", &payments_ref, "")).signed(&key))
            .await;
    assert_eq!(
        (status, body),
        (
            422,
            error_body("invalid_evidence", "evidence set is invalid")
        )
    );

    let rejected = error_body(
        "contract_ref_rejected",
        "contract reference is not accepted",
    );
    // a tag is not immutable
    let tagged = format!("oci://{host}/team/payments:1.0.0");
    let (status, _, body) =
        post(draft("env-9", 9, evidence_set("payments-prod", &tagged, "ci")).signed(&key)).await;
    assert_eq!((status, body), (422, rejected.clone()));
    // a well-formed digest ref that is not a configured subject
    let elsewhere = format!("oci://{host}/team/other@sha256:{}", "c".repeat(64));
    let (status, _, body) = post(
        draft(
            "env-10",
            10,
            evidence_set("payments-prod", &elsewhere, "ci"),
        )
        .signed(&key),
    )
    .await;
    assert_eq!((status, body), (422, rejected));

    // the subject's artifact is not a valid contract: the resolver refuses it (502)
    let (status, _, body) = post(
        draft(
            "env-11",
            11,
            evidence_set("payments-prod", &broken_ref, "ci"),
        )
        .signed(&key),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            502,
            error_body(
                "contract_resolution_failed",
                "contract could not be resolved"
            )
        )
    );

    // the record is listed by /targets
    let (status, _, body) = http(server.api, "GET", &format!("{PREFIX}/targets"), b"").await;
    assert_eq!(status, 200, "{body}");
    let dto: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(dto["schemaVersion"], "pacto.dev/evidence-source/v2");
    assert_eq!(dto["targets"][0]["subject"], "payments-prod");
    assert_eq!(dto["targets"][0]["compliance"], "NonCompliant");
    assert!(body.ends_with("}\n"));

    // metrics: the refusals by code, the commit histogram, the mode
    let metrics = admin_get(server.admin, "/metrics").await.1;
    assert_eq!(
        metric_value(&metrics, "pacto_evidence_envelopes_accepted_total", &[]),
        1.0
    );
    for (code, count) in [
        ("replay", 2.0),
        ("unauthorized_producer", 5.0),
        ("invalid_envelope", 3.0),
        ("invalid_evidence", 1.0),
        ("contract_ref_rejected", 2.0),
        ("contract_resolution_failed", 1.0),
        ("store_not_ready", 0.0),
    ] {
        assert_eq!(
            metric_value(
                &metrics,
                "pacto_evidence_envelopes_refused_total",
                &[&format!("code=\"{code}\"")]
            ),
            count,
            "{code}"
        );
    }
    assert!(
        metrics.contains("pacto_evidence_commit_duration_seconds"),
        "{metrics}"
    );
    // docker-registry 2.8 has no Referrers API: both subjects use the tag schema
    let subject_label = format!("subject=\"{payments_ref}\"");
    for (mode, value) in [("tag-schema", 1.0), ("api", 0.0)] {
        assert_eq!(
            metric_value(
                &metrics,
                "pacto_evidence_referrers_mode",
                &[&subject_label, &format!("mode=\"{mode}\"")]
            ),
            value,
            "{mode}"
        );
    }

    // ingest throughput: accepted envelopes per second, one at a time (printed)
    let count = 20u64;
    let started = Instant::now();
    for n in 0..count {
        let id = format!("bench-{n}");
        let mut d = draft("x", 100 + n, good_set());
        d.id = &id;
        let (status, _, body) = post(d.signed(&key)).await;
        assert_eq!(status, 202, "{body}");
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "ingest throughput (tag-schema mode, docker-registry 2.8, debug build, {count} envelopes one at a time, 1 to {} records stored): {:.1} envelopes/s",
        count + 1,
        count as f64 / seconds
    );

    // store not ready: a server whose registry is down refuses before reading the body
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_host = dead.local_addr().unwrap().to_string();
    drop(dead);
    let down_ref = format!("oci://{dead_host}/team/payments@{payments}");
    let down = start_server(
        &ca,
        dir.path(),
        resolver,
        &dead_host,
        std::slice::from_ref(&down_ref),
        trust(dir.path(), &key),
        &stop,
    )
    .await;
    let (status, _, body) = http(down.api, "GET", &format!("{PREFIX}/ready"), b"").await;
    assert_eq!(
        (status, body.as_str()),
        (503, "{\"status\":\"not ready\"}\n")
    );
    let (status, _, body) = http(
        down.api,
        "POST",
        &format!("{PREFIX}/envelopes"),
        &draft("env-12", 12, evidence_set("payments-prod", &down_ref, "ci")).signed(&key),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            503,
            error_body("store_not_ready", "evidence store is not ready")
        )
    );
    let (status, _, body) = http(down.api, "GET", &format!("{PREFIX}/targets"), b"").await;
    assert_eq!(
        (status, body),
        (
            503,
            error_body("registry_unavailable", "registry is unavailable")
        )
    );
    let (status, _, body) = http(down.api, "GET", &format!("{PREFIX}/health"), b"").await;
    assert_eq!((status, body.as_str()), (200, "{\"status\":\"ok\"}\n"));

    stop.cancel();
}
