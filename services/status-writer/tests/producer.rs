//! The producer mode (docs/design/status.md#evidence-producer) over real HTTP.
//!
//! - The verdict-change test runs the status-writer against a real API server, the real
//!   resolver (a real registry), observer and evaluator, and posts to the real Evidence Server
//!   (`pacto-evidence-server` in process, with its own contract-resolver over mTLS and the OCI
//!   store in the same docker-registry); the records are then read back from the registry.
//! - The delivery tests (queue full, server down, 5xx, 4xx, a server that holds requests) need a
//!   server that misbehaves on cue: an ingestion endpoint served in the test that checks every
//!   envelope with `pacto_evidence::admit` (decode, signature, producer binding, freshness,
//!   evidence validation, ContractRef policy) and the replay rules (`ReplayIndex`), and answers
//!   like the Evidence Server (202 / `{"code","message"}`), or fails as told.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pacto_api::{ContractRef, ContractStatus, Pacto};
use pacto_engine::{
    EvidenceSet, Observation, ObservationKind, Outcome, Provenance, SubjectRef, Timestamp, Value,
    WorkloadValue,
};
use pacto_evidence::{Envelope, ReplayIndex, SignedEvidenceSet, TrustEntry, TrustStore};
use pacto_runtime::CancellationToken;
use pacto_status_writer::producer::{Key, Producer, ProducerConfig, Record};
use tokio::sync::watch;

use common::{closed_port, create_orders_target, eventually, pacto, start_producing, wait_status};

const PRODUCER: &str = "sw-test";
const KEY_ID: &str = "sw-2026";

fn key() -> SigningKey {
    SigningKey::from_bytes(&[42; 32])
}

fn digest() -> String {
    format!("sha256:{}", "c0".repeat(32))
}

/// How the test server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Check the envelope and the replay rules: 202, or the protocol's error.
    Ingest,
    /// Answer this status with this code without looking at the body.
    Fail(u16, &'static str),
}

struct ServerState {
    trust: TrustStore,
    replay: Mutex<ReplayIndex>,
    received: Mutex<Vec<Envelope>>,
    requests: AtomicU64,
    /// Connections accepted and not yet closed (each carries one request: no keep-alive).
    connections: AtomicU64,
    mode: Mutex<Mode>,
    /// While false, requests wait (a server that accepted the connection but does not answer).
    open: watch::Receiver<bool>,
}

struct TestServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    gate: watch::Sender<bool>,
    stop: CancellationToken,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestServer {
    async fn start(addr: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut trust = TrustStore::new();
        trust.insert(KEY_ID, TrustEntry::new(key().verifying_key(), PRODUCER));
        let (gate, open) = watch::channel(true);
        let state = Arc::new(ServerState {
            trust,
            replay: Mutex::new(ReplayIndex::new()),
            received: Mutex::new(Vec::new()),
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            mode: Mutex::new(Mode::Ingest),
            open,
        });
        let stop = CancellationToken::new();
        let served = Arc::clone(&state);
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = tokio::select! {
                    () = token.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap(),
                };
                let state = Arc::clone(&served);
                let token = token.clone();
                state.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let counted = Arc::clone(&state);
                    let service = hyper::service::service_fn(move |request| {
                        handle(Arc::clone(&state), request)
                    });
                    // One request per connection, so a connection that is open is a request on
                    // its way or being answered ([`TestServer::quiet`]).
                    let connection = hyper::server::conn::http1::Builder::new()
                        .keep_alive(false)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                    tokio::select! {
                        () = token.cancelled() => {}
                        _ = connection => {}
                    }
                    counted.connections.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            addr,
            state,
            gate,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    fn set_mode(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    /// Requests wait (`false`) or are answered (`true`).
    fn answer(&self, open: bool) {
        self.gate.send_replace(open);
    }

    fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Waits (10 s at most) until no connection is open: every request that was on its way has
    /// arrived and been answered, or was abandoned by its client.
    async fn quiet(&self) {
        eventually("no request in flight", Duration::from_secs(10), || async {
            (self.state.connections.load(Ordering::SeqCst) == 0).then_some(())
        })
        .await;
    }

    fn received(&self) -> Vec<Envelope> {
        self.state.received.lock().unwrap().clone()
    }
}

fn json(status: u16, body: &serde_json::Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(format!("{body}\n"))))
        .unwrap()
}

fn error(status: u16, code: &str) -> hyper::Response<Full<Bytes>> {
    json(
        status,
        &serde_json::json!({"code": code, "message": format!("test server: {code}")}),
    )
}

async fn handle(
    state: Arc<ServerState>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, std::convert::Infallible> {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let mut open = state.open.clone();
    let _ = open.wait_for(|open| *open).await;
    if request.uri().path() != "/api/evidence/v1/envelopes" || request.method() != "POST" {
        return Ok(error(404, "not_found"));
    }
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let mode = *state.mode.lock().unwrap();
    if let Mode::Fail(status, code) = mode {
        return Ok(error(status, code));
    }
    let admitted = match pacto_evidence::admit(&body, &state.trust, Timestamp::now()) {
        Ok(admitted) => admitted,
        Err(refusal) => {
            let code = refusal.code();
            return Ok(error(code.http_status(), code.as_str()));
        }
    };
    let envelope = admitted.envelope;
    if let Err(replay) =
        state
            .replay
            .lock()
            .unwrap()
            .accept(&envelope.id, &envelope.producer.id, envelope.sequence)
    {
        return Ok(error(409, replay.code().as_str()));
    }
    let id = envelope.id.clone();
    state.received.lock().unwrap().push(envelope);
    Ok(json(
        202,
        &serde_json::json!({
            "acceptedAt": Timestamp::now().to_rfc3339_nano(),
            "compliance": "Compliant",
            "findings": 0,
            "id": id,
        }),
    ))
}

fn config(url: &str, queue: usize) -> ProducerConfig {
    let mut config = ProducerConfig::new(url, Key::from_signing_key(key()), KEY_ID);
    PRODUCER.clone_into(&mut config.producer_id);
    config.queue_size = queue;
    config.min_backoff = Duration::from_millis(20);
    config.max_backoff = Duration::from_millis(200);
    config.request_timeout = Duration::from_secs(30);
    config
}

/// A valid evidence set of a workload, about the contract pinned by [`digest`].
fn record(n: u32) -> Record {
    let now = Timestamp::now();
    let set = EvidenceSet {
        subject: SubjectRef::new("service", "shop/orders"),
        contract_ref: format!("oci://registry.local/acme/orders@{}", digest()),
        source: "k8s-observer".into(),
        observed_at: now,
        observations: Some(vec![Observation::new(
            ObservationKind::WorkloadObserved,
            "orders",
            Outcome::Observed(Value::Workload(WorkloadValue {
                workload_type: "service".into(),
            })),
            Provenance::new("k8s-observer", now),
        )]),
        subject_missing: false,
    };
    Record {
        id: format!("sha256:{n:064x}"),
        set: SignedEvidenceSet::from_engine(&set).unwrap(),
        pacto: format!("shop/orders-{n}"),
    }
}

async fn settled(producer: &Producer, want: u64) {
    eventually(
        &format!("{want} records settled"),
        Duration::from_secs(30),
        || async {
            let d = producer.delivery();
            if d.settled() >= want {
                Ok(())
            } else {
                Err(format!("{d:?}"))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn records_are_signed_verifiable_and_sequences_increase_across_restarts() {
    let server = TestServer::start("127.0.0.1:0".parse().unwrap()).await;
    let shutdown = CancellationToken::new();
    let producer = Producer::start(config(&server.url(), 10), shutdown.clone()).unwrap();
    for n in 0..3 {
        producer.offer(record(n));
    }
    settled(&producer, 3).await;
    let d = producer.delivery();
    assert_eq!((d.accepted, d.failed, d.dropped), (3, 0, 0), "{d:?}");
    let received = server.received();
    assert_eq!(
        received.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        (0..3).map(|n| record(n).id).collect::<Vec<_>>(),
        "sent in the order offered"
    );
    let sequences: Vec<u64> = received.iter().map(|e| e.sequence).collect();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    let first = &received[0];
    assert_eq!(
        (first.producer.id.as_str(), first.producer.key_id.as_str()),
        (PRODUCER, KEY_ID)
    );
    assert!(!first.expires_at.is_zero() && !first.issued_at.is_zero());

    // A new process (nothing carried over but the key): its first sequence is above the last
    // one the server accepted, so the server takes it (202, not a replay).
    shutdown.cancel();
    let restarted = Producer::start(config(&server.url(), 10), CancellationToken::new()).unwrap();
    restarted.offer(record(3));
    settled(&restarted, 1).await;
    assert_eq!(
        restarted.delivery().accepted,
        1,
        "{:?}",
        restarted.delivery()
    );
    let after = server.received();
    assert!(after[3].sequence > sequences[2], "{after:?}");

    // The same record again (a pass replayed after a failed status write): the server has it,
    // 409 replay, which counts as delivered.
    restarted.offer(record(3));
    settled(&restarted, 2).await;
    let d = restarted.delivery();
    assert_eq!((d.accepted, d.replayed, d.failed), (1, 1, 0), "{d:?}");
}

#[tokio::test]
async fn a_full_queue_drops_new_records_and_counts_them() {
    let handle = pacto_runtime::metrics::install_recorder().unwrap();
    let server = TestServer::start("127.0.0.1:0".parse().unwrap()).await;
    server.answer(false);
    let producer = Producer::start(config(&server.url(), 2), CancellationToken::new()).unwrap();
    producer.offer(record(10));
    // The first record is in flight (the server holds it): the queue is empty again.
    eventually(
        "the first record in flight",
        Duration::from_secs(10),
        || async { (server.requests() == 1 && producer.queued() == 0).then_some(()) },
    )
    .await;
    for n in 11..15 {
        producer.offer(record(n));
    }
    let d = producer.delivery();
    assert_eq!((d.offered, d.dropped), (5, 2), "{d:?}");
    assert_eq!(producer.queued(), 2);
    let metrics = handle.render();
    assert!(
        metrics.contains("pacto_status_writer_evidence_dropped_total{reason=\"queue_full\"} 2"),
        "{metrics}"
    );
    server.answer(true);
    settled(&producer, 5).await;
    let d = producer.delivery();
    assert_eq!((d.accepted, d.dropped), (3, 2), "{d:?}");
    assert_eq!(
        server
            .received()
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>(),
        [10, 11, 12].map(|n| record(n).id).to_vec()
    );
}

#[tokio::test]
async fn a_down_server_is_retried_and_a_refusal_is_not() {
    // Nothing listens: transport errors are retried, with backoff, until the server is there.
    let addr = closed_port().await;
    let producer = Producer::start(
        config(&format!("http://{addr}"), 10),
        CancellationToken::new(),
    )
    .unwrap();
    producer.offer(record(20));
    eventually("retries", Duration::from_secs(10), || async {
        (producer.delivery().retries >= 2).then_some(())
    })
    .await;
    assert_eq!(producer.delivery().settled(), 0);
    let server = TestServer::start(addr).await;
    settled(&producer, 1).await;
    assert_eq!(producer.delivery().accepted, 1);

    // A 5xx is retried too; the record goes through once the server recovers.
    server.set_mode(Mode::Fail(503, "registry_unavailable"));
    let retries = producer.delivery().retries;
    producer.offer(record(21));
    eventually("5xx retried", Duration::from_secs(10), || async {
        (producer.delivery().retries >= retries + 2).then_some(())
    })
    .await;
    server.set_mode(Mode::Ingest);
    settled(&producer, 2).await;
    assert_eq!(producer.delivery().accepted, 2);

    // A 4xx other than replay is final: counted as failed, not retried.
    server.set_mode(Mode::Fail(422, "contract_ref_rejected"));
    let retries = producer.delivery().retries;
    producer.offer(record(22));
    settled(&producer, 3).await;
    let d = producer.delivery();
    assert_eq!((d.accepted, d.failed, d.retries), (2, 1, retries), "{d:?}");

    // So is a 503 that stays until an operator acts (an invalid artifact on the record's
    // subject): counted as failed, not retried, and the next record goes through.
    server.set_mode(Mode::Fail(503, "registry_incomplete"));
    producer.offer(record(24));
    settled(&producer, 4).await;
    let d = producer.delivery();
    assert_eq!((d.accepted, d.failed, d.retries), (2, 2, retries), "{d:?}");
    server.set_mode(Mode::Ingest);
    producer.offer(record(25));
    settled(&producer, 5).await;
    assert_eq!(producer.delivery().accepted, 3);

    // The real checks refuse a record signed with a key the server does not trust.
    server.set_mode(Mode::Ingest);
    let mut other = config(&server.url(), 10);
    other.key = Key::from_signing_key(SigningKey::from_bytes(&[9; 32]));
    let stranger = Producer::start(other, CancellationToken::new()).unwrap();
    stranger.offer(record(23));
    settled(&stranger, 1).await;
    assert_eq!(stranger.delivery().failed, 1, "{:?}", stranger.delivery());
}

// ---- Only the Lease holder posts ----
#[tokio::test]
async fn nothing_is_posted_outside_a_term_and_kept_records_go_out_in_the_next() {
    let server = TestServer::start("127.0.0.1:0".parse().unwrap()).await;
    let shutdown = CancellationToken::new();
    let producer = Producer::start(config(&server.url(), 10), shutdown.clone()).unwrap();
    let term = CancellationToken::new();
    producer.post_during(&term);
    // A record retried against a failing server (every 20 to 200 ms).
    server.set_mode(Mode::Fail(503, "registry_unavailable"));
    producer.offer(record(40));
    eventually("5xx retried", Duration::from_secs(10), || async {
        (producer.delivery().retries >= 2).then_some(())
    })
    .await;
    // The term ends: not one more request, the retried record and a new one are kept.
    term.cancel();
    // A request already on its way when the term ended arrives (or is abandoned) first.
    server.quiet().await;
    let requests = server.requests();
    server.set_mode(Mode::Ingest);
    producer.offer(record(41));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(server.requests(), requests, "{:?}", producer.delivery());
    assert_eq!(producer.delivery().settled(), 0);
    // The next term sends both, in order.
    let next = CancellationToken::new();
    producer.post_during(&next);
    settled(&producer, 2).await;
    assert_eq!(
        server
            .received()
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>(),
        [40, 41].map(|n| record(n).id).to_vec()
    );
    // Paused (a replica between terms), then shut down: what was kept is counted as dropped.
    producer.pause();
    assert!(!next.is_cancelled(), "pausing ends no one else's term");
    producer.offer(record(42));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.received().len(), 2);
    shutdown.cancel();
    eventually(
        "the kept record dropped at shutdown",
        Duration::from_secs(10),
        || async { (producer.delivery().dropped == 1).then_some(()) },
    )
    .await;
    let d = producer.delivery();
    assert_eq!((d.accepted, d.failed, d.dropped), (2, 0, 1), "{d:?}");
}

/// A status-writer context whose backends refuse connections (nothing is reconciled in these
/// tests: their namespace has no Pacto), producing to `producer`.
async fn context_without_backends(
    client: kube::Client,
    producer: Producer,
) -> Arc<pacto_status_writer::Context> {
    use pacto_runtime::balance::BalanceConfig;
    use pacto_runtime::grpc::{self, ChannelSpec, RetryPolicy, Transport};
    let addr = closed_port().await;
    let channel = || {
        let spec = ChannelSpec {
            address: format!("http://{addr}"),
            server_name: None,
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
        };
        grpc::balanced_channel(&spec, &Transport::Insecure, BalanceConfig::new("test")).unwrap()
    };
    let backends = pacto_status_writer::Backends::new(
        channel(),
        channel(),
        channel(),
        RetryPolicy {
            max_retries: 0,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        },
    );
    Arc::new(
        pacto_status_writer::Context::new(
            client,
            backends,
            pacto_status_writer::Gauges::new(),
            None,
            None,
        )
        .with_producer(producer),
    )
}

/// Writes `holder` into the Lease `pacto-status-writer` now (a replica that took it over).
/// The replica under test renews the same Lease meanwhile, so a write that lost that race
/// (409 Conflict) is read and written again.
async fn hold_lease(leases: &Api<k8s_openapi::api::coordination::v1::Lease>, holder: Option<&str>) {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    eventually("the Lease written", Duration::from_secs(10), || async {
        let mut lease = leases.get("pacto-status-writer").await.unwrap();
        let spec = lease.spec.get_or_insert_default();
        spec.holder_identity = holder.map(str::to_owned);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        spec.lease_duration_seconds = Some(3);
        match leases
            .replace("pacto-status-writer", &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Err(e.message),
            Err(e) => panic!("writing the Lease: {e}"),
        }
    })
    .await;
}

#[tokio::test]
async fn posting_stops_when_the_lease_is_lost_and_resumes_when_it_is_held_again() {
    use pacto_runtime::testing::{admin_get, metric_value};
    let server = TestServer::start("127.0.0.1:0".parse().unwrap()).await;
    let cp = common::cluster().await;
    let client = cp.client().unwrap();
    let namespace = cp.create_namespace("producer-lease").await.unwrap();
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), &namespace);
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let producer = Producer::start(config(&server.url(), 10), shutdown.clone()).unwrap();
    let ctx = context_without_backends(client.clone(), producer.clone()).await;
    let lease = pacto_status_writer::LeaseConfig {
        name: "pacto-status-writer".into(),
        namespace: namespace.clone(),
        identity: "writer-a".into(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
    };
    let admin_listener = pacto_runtime::admin::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let admin = admin_listener.local_addr().unwrap();
    let serving = tokio::spawn(pacto_status_writer::serve_elected(
        ctx,
        Some(namespace.clone()),
        Some(lease),
        Duration::from_mins(5),
        admin_listener,
        shutdown.clone(),
    ));
    let leading = |want: bool| async move {
        let (_, text) = admin_get(admin, "/metrics").await;
        let leader = metric_value(&text, "pacto_status_writer_leader", &[]) > 0.5;
        (leader == want).then_some(())
    };
    eventually("writer-a to lead", Duration::from_secs(20), || {
        leading(true)
    })
    .await;

    // Leading: a record goes out at once; the next one meets a failing server and is retried.
    producer.offer(record(30));
    settled(&producer, 1).await;
    server.set_mode(Mode::Fail(503, "registry_unavailable"));
    producer.offer(record(31));
    eventually("5xx retried", Duration::from_secs(10), || async {
        (producer.delivery().retries >= 2).then_some(())
    })
    .await;

    // Another replica takes the Lease (and keeps renewing it): writer-a stops leading, and its
    // producer stops posting at once, the retried record included, even once the server is
    // back; a record offered meanwhile is kept, not sent.
    hold_lease(&leases, Some("writer-b")).await;
    let renew = CancellationToken::new();
    let renewing = tokio::spawn({
        let (leases, renew) = (leases.clone(), renew.clone());
        async move {
            loop {
                tokio::select! {
                    () = renew.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(300)) => {}
                }
                hold_lease(&leases, Some("writer-b")).await;
            }
        }
    });
    eventually("writer-a to step down", Duration::from_secs(10), || {
        leading(false)
    })
    .await;
    server.set_mode(Mode::Ingest);
    // A request already on its way when the term ended arrives (or is abandoned) first.
    server.quiet().await;
    let requests = server.requests();
    producer.offer(record(32));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        server.requests(),
        requests,
        "posted without the Lease: {:?}",
        producer.delivery()
    );
    let d = producer.delivery();
    assert_eq!((d.accepted, d.dropped, d.settled()), (1, 0, 1), "{d:?}");

    // writer-b lets go: writer-a leads again and sends what it kept, in order.
    renew.cancel();
    renewing.await.unwrap();
    hold_lease(&leases, None).await;
    eventually("writer-a to lead again", Duration::from_secs(20), || {
        leading(true)
    })
    .await;
    settled(&producer, 3).await;
    let d = producer.delivery();
    assert_eq!((d.accepted, d.failed, d.dropped), (3, 0, 0), "{d:?}");
    let received = server.received();
    assert_eq!(
        received.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        [30, 31, 32].map(|n| record(n).id).to_vec()
    );
    assert!(received.windows(2).all(|w| w[0].sequence < w[1].sequence));
    shutdown.cancel();
    serving.await.unwrap().unwrap();
}

// ---- The status-writer as a producer, against a real cluster ----

/// Pushes the orders contract (a service workload) to `registry`; returns its digest.
async fn push_contract(registry: &pacto_testenv::registry::Registry) -> String {
    use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
    use pacto_contract::reference::Reference;
    let yaml =
        "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.0.0\nworkload: service\n";
    let mut files = BundleFiles::new();
    files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
    let client = pacto_oci::RegistryClient::new(
        pacto_oci::ClientOptions {
            insecure_registries: vec![registry.host()],
            ..pacto_oci::ClientOptions::default()
        },
        &pacto_oci::Credentials::Anonymous,
    )
    .unwrap();
    let reference = Reference::parse(&format!("{}/acme/orders:1.0.0", registry.host())).unwrap();
    let meta = pacto_oci::BundleMeta {
        name: "orders".into(),
        version: "1.0.0".into(),
        pacto_version: "2.0".into(),
    };
    client
        .push(&reference, &files, &meta, true, &|_| {})
        .await
        .unwrap()
        .digest
}

fn orders(registry: &pacto_testenv::registry::Registry) -> Pacto {
    let mut p = pacto("orders", "", Some("orders"));
    p.spec.contract_ref = ContractRef {
        oci: Some(format!("oci://{}/acme/orders:1.0.0", registry.host())),
        ..ContractRef::default()
    };
    // An hour: no timer requeue during the test; reconciles come from changes.
    p.spec.check_interval_seconds = Some(3600);
    p
}

/// Touches an annotation `times` times and waits until each touch was reconciled: passes that
/// change nothing (steady reconciles).
async fn steady_reconciles(h: &common::Harness, api: &Api<Pacto>, times: u32) {
    for n in 0..times {
        let before = h.ctx.reconciles();
        api.patch(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"annotations": {"test/touch": n.to_string()}}}),
            ),
        )
        .await
        .unwrap();
        eventually("a steady reconcile", Duration::from_secs(20), || async {
            (h.ctx.reconciles() > before).then_some(())
        })
        .await;
    }
}

/// The real Evidence Server for `subject` (in `registry`), trusting [`key`] for [`PRODUCER`],
/// with its own contract-resolver over mTLS; its base URL.
async fn evidence_server(
    registry: &pacto_testenv::registry::Registry,
    subject: &str,
    dir: &std::path::Path,
    stop: &CancellationToken,
) -> String {
    use pacto_evidence_server::testing::{ServerOptions, start};
    let mut trust = TrustStore::new();
    trust.insert(KEY_ID, TrustEntry::new(key().verifying_key(), PRODUCER));
    let options = ServerOptions::new(
        &registry.host(),
        vec![subject.to_owned()],
        trust,
        vec![PRODUCER.to_owned()],
    );
    start(dir, options, stop).await.url()
}

/// The records stored in the registry for `subject`, read back with the evidence store.
async fn stored_records(
    registry: &pacto_testenv::registry::Registry,
    subject: &str,
) -> Vec<pacto_evidence::store::Record> {
    use pacto_evidence::store::{HealthStatus, Store, StoreOptions, Subjects};
    let reader = Store::new(
        Subjects::parse(&[subject]).unwrap(),
        StoreOptions {
            client: pacto_oci::ClientOptions {
                insecure_registries: vec![registry.host()],
                ..pacto_oci::ClientOptions::default()
            },
            ..StoreOptions::default()
        },
        &pacto_oci::Keychain::new(),
    )
    .unwrap();
    let scan = reader.scan().await;
    assert_eq!(scan.health.status, HealthStatus::Ready, "{scan:?}");
    let mut records: Vec<_> = scan.records.iter().map(|r| (*r.record).clone()).collect();
    records.sort_by_key(|r| r.envelope.sequence);
    records
}

#[tokio::test]
async fn one_signed_record_per_verdict_change_and_none_for_steady_reconciles() {
    let registry = pacto_testenv::registry::Registry::start().expect("docker-registry");
    let digest = push_contract(&registry).await;
    let subject = format!("oci://{}/acme/orders@{digest}", registry.host());
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let url = evidence_server(&registry, &subject, dir.path(), &stop).await;
    let producer = Producer::start(config(&url, 100), stop.clone()).unwrap();
    let h = start_producing(vec![registry.host()], producer.clone()).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    api.create(&PostParams::default(), &orders(&registry))
        .await
        .unwrap();

    // No workload yet: Unknown, one record.
    wait_status(&api, "orders", ContractStatus::Unknown).await;
    settled(&producer, 1).await;
    steady_reconciles(&h, &api, 3).await;
    assert_eq!(producer.delivery().offered, 1, "{:?}", producer.delivery());

    // The workload appears: Compliant, a second record.
    create_orders_target(&h.client, &h.namespace).await;
    wait_status(&api, "orders", ContractStatus::Compliant).await;
    settled(&producer, 2).await;
    steady_reconciles(&h, &api, 3).await;
    let d = producer.delivery();
    assert_eq!(
        (d.offered, d.accepted, d.failed, d.dropped),
        (2, 2, 0, 0),
        "{d:?}"
    );

    // The server stored both as referrers of the contract, and evaluated them as the
    // status-writer did.
    let records = stored_records(&registry, &subject).await;
    assert_eq!(
        records
            .iter()
            .map(|r| r.compliance.as_str())
            .collect::<Vec<_>>(),
        ["Unknown", "Compliant"]
    );
    for record in &records {
        let envelope = &record.envelope;
        assert_eq!(envelope.evidence_set.contract_ref, subject);
        assert_eq!(
            envelope.evidence_set.subject.name,
            format!("{}/orders", h.namespace)
        );
        assert_eq!(
            (
                envelope.producer.id.as_str(),
                envelope.producer.key_id.as_str()
            ),
            (PRODUCER, KEY_ID)
        );
        assert_eq!(record.service, "orders");
    }
    // Unknown rests on nothing observed (the Service is missing); Compliant on the workload
    // observed as a service.
    assert_eq!(records[0].envelope.evidence_set.observation_count(), 0);
    let observed = records[1]
        .envelope
        .evidence_set
        .observations
        .as_ref()
        .unwrap()
        .iter()
        .map(|o| o.observation().kind)
        .collect::<Vec<_>>();
    assert_eq!(observed, [ObservationKind::WorkloadObserved]);
    assert_ne!(records[0].envelope.id, records[1].envelope.id);

    // A restarted status-writer (a new producer: nothing carried over but the key) signs above
    // every sequence the server has stored (its replay state is rebuilt from the registry), so
    // its next record is stored, not refused as a replay.
    let restarted = Producer::start(config(&url, 10), stop.clone()).unwrap();
    restarted.offer(Record {
        id: format!("sha256:{:064x}", 7),
        set: records[1].envelope.evidence_set.clone(),
        pacto: format!("{}/orders", h.namespace),
    });
    settled(&restarted, 1).await;
    assert_eq!(
        restarted.delivery().accepted,
        1,
        "{:?}",
        restarted.delivery()
    );
    let after = stored_records(&registry, &subject).await;
    assert_eq!(after.len(), 3);
    assert!(after[2].envelope.sequence > records[1].envelope.sequence);
}

#[tokio::test]
async fn a_server_that_does_not_answer_changes_no_verdict_and_holds_no_reconcile() {
    let registry = pacto_testenv::registry::Registry::start().expect("docker-registry");
    push_contract(&registry).await;
    // The server accepts connections and never answers.
    let server = TestServer::start("127.0.0.1:0".parse().unwrap()).await;
    server.answer(false);
    let mut patient = config(&server.url(), 100);
    // Longer than the test: the held request does not time out into a retry.
    patient.request_timeout = Duration::from_mins(10);
    let producer = Producer::start(patient, CancellationToken::new()).unwrap();
    let h = start_producing(vec![registry.host()], producer.clone()).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    api.create(&PostParams::default(), &orders(&registry))
        .await
        .unwrap();
    wait_status(&api, "orders", ContractStatus::Unknown).await;
    create_orders_target(&h.client, &h.namespace).await;
    let (_, status) = wait_status(&api, "orders", ContractStatus::Compliant).await;
    assert!(status.findings.is_empty(), "{:?}", status.findings);
    steady_reconciles(&h, &api, 2).await;
    // Both verdicts were written while the first record was still unanswered: the reconciles
    // did not wait for the server.
    let d = producer.delivery();
    assert_eq!((d.offered, d.settled()), (2, 0), "{d:?}");
    assert_eq!(server.requests(), 1);
    assert_eq!(producer.queued(), 1);
    let (_, again) = wait_status(&api, "orders", ContractStatus::Compliant).await;
    assert_eq!(
        again.last_reconciled_at, status.last_reconciled_at,
        "no status change"
    );
    // Once it answers, both records go through.
    server.answer(true);
    settled(&producer, 2).await;
    assert_eq!(producer.delivery().accepted, 2);
}
