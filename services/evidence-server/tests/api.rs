//! The Evidence Server's ingestion API end to end (docs/design/evidence-server.md#api): the real
//! server in process, the real contract-resolver over mTLS (it admits the evidence-server's
//! identity only), a real docker-registry 2.8 (no Referrers API: the tag-schema mode) holding
//! the contracts and the stored records. Every pipeline code
//! (docs/design/evidence-server.md#pipeline) with its exact status and body, the GET endpoints,
//! 405/404/HEAD, the metrics, and the ingest throughput (printed, not asserted).

#![allow(
    clippy::unwrap_used,
    clippy::float_cmp,
    reason = "tests; metric values are small integers"
)]

mod common;

use std::time::Instant;

use common::*;
use pacto_engine::Timestamp;
use pacto_evidence::keys;
use pacto_evidence_server::PREFIX;
use pacto_runtime::CancellationToken;
use pacto_runtime::testing::{TestCa, admin_get, metric_value};
use pacto_testenv::registry::Registry;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_code_of_the_ingestion_api_with_its_status_and_body() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("pacto-test-ca").unwrap();
    let registry = Registry::start().unwrap();
    let stop = CancellationToken::new();
    let host = registry.host();

    let payments = push(
        &host,
        "team/payments",
        "1.0.0",
        "pactoVersion: \"2.0\"\nservice:\n  name: payments\n  version: 1.0.0\nworkload: service\n",
    )
    .await;
    let broken = push(
        &host,
        "team/broken",
        "1.0.0",
        "pactoVersion: \"9.9\"\nservice: {}\n",
    )
    .await;
    let payments_ref = format!("oci://{host}/team/payments@{payments}");
    let broken_ref = format!("oci://{host}/team/broken@{broken}");

    let key = keys::generate().unwrap();
    let resolver = start_resolver(&ca, dir.path(), &host, &stop).await;
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

    // store not ready: a server whose registry is down refuses a verified envelope with
    // store_not_ready, and garbage for what it is (the body is checked before the registry)
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
    let (status, _, body) = http(
        down.api,
        "POST",
        &format!("{PREFIX}/envelopes"),
        b"not an envelope",
    )
    .await;
    assert_eq!(
        (status, body),
        (
            400,
            error_body("invalid_envelope", "envelope could not be decoded")
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

    // a client that never finishes its request headers is disconnected after the header timeout
    // (the deadline below only bounds the wait; the server must close first)
    let mut slow = tokio::net::TcpStream::connect(server.api).await.unwrap();
    slow.write_all(b"GET /api/evidence/v1/health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(
        HEADER_TIMEOUT * 20,
        tokio::io::AsyncReadExt::read_to_end(&mut slow, &mut rest),
    )
    .await;
    assert!(
        closed.is_ok(),
        "the connection was still open {:?} after the headers began",
        HEADER_TIMEOUT * 20
    );
    assert!(
        !String::from_utf8_lossy(&rest).contains("200 OK"),
        "{}",
        String::from_utf8_lossy(&rest)
    );

    stop.cancel();
}
