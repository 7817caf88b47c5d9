//! The Evidence Server in the Referrers API mode (go-containerregistry's registry with the
//! Referrers API on): `/ready` names the mode, every accepted record is listed by an independent
//! client (`oras discover`), a tampered record artifact makes `/targets` partial and refuses
//! writes with `registry_incomplete`, and the ingest throughput (printed, not asserted). Needs
//! `scripts/registry-tools.sh`.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::time::Instant;

use common::*;
use pacto_evidence::store::{EMPTY_CONFIG_BLOB, EMPTY_CONFIG_DESCRIPTOR, RECORD_ARTIFACT_TYPE};
use pacto_evidence_server::PREFIX;
use pacto_oci::{
    ArtifactClient, ClientOptions, Credentials, OCI_MANIFEST_MEDIA_TYPE, Repository, sha256_digest,
};
use pacto_runtime::CancellationToken;
use pacto_testenv::ggcr::{GgcrRegistry, oras};

/// The Referrers API mode (go-containerregistry's registry): `/ready` names it, each accepted
/// record is listed by an independent client (`oras discover`), and the ingest throughput.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referrers_api_mode_records_are_listed_by_oras() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let registry = GgcrRegistry::start().unwrap();
    let stop = CancellationToken::new();
    let host = registry.host();
    let Payments {
        server,
        subject,
        digest,
        key,
    } = start_payments(dir.path(), &host, &stop).await;
    let (status, head, body) = http(server.api, "GET", &format!("{PREFIX}/ready"), b"").await;
    assert_eq!((status, body.as_str()), (200, "{\"status\":\"ready\"}\n"));
    assert!(head.contains("pacto-referrers-mode: api"), "{head}");

    let count = 20u64;
    let started = Instant::now();
    for n in 0..count {
        let envelope = payments_envelope(&key, &subject, &format!("api-{n}"), n);
        let (status, body) = post_envelope(server.api, &envelope).await;
        assert_eq!(status, 202, "{body}");
        // workload declared and observed `job`: compliant
        assert!(
            body.contains("\"compliance\":\"Compliant\",\"findings\":0"),
            "{body}"
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "ingest throughput (Referrers API mode, ggcr registry, debug build, {count} envelopes one at a time, 0 to {} records stored): {:.1} envelopes/s",
        count - 1,
        count as f64 / seconds
    );

    let target = format!("{host}/team/payments@{digest}");
    let out = std::process::Command::new(oras().unwrap())
        .args(["discover", "--plain-http", "--format", "json", &target])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = listed["referrers"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .count();
    // every accepted record, and nothing else (ggcr lists the config media type as the
    // artifactType, so the records are counted, not matched by type)
    assert_eq!(records, count as usize, "{listed}");

    // A record artifact that does not hold a valid record (someone with push rights wrote it):
    // /ready still lists fine, /targets reports it as partial, and writes are refused
    // (fail-closed) with registry_incomplete until it is removed.
    let client = ArtifactClient::new(
        ClientOptions {
            insecure_registries: vec![host.clone()],
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )
    .unwrap();
    let repository = Repository::new(&host, "team/payments");
    let contract = client.head_manifest(&repository, &digest).await.unwrap();
    let payload = b"{\"schemaVersion\":\"pacto.dev/evidence-record/v1\",\"record\":{}}";
    client
        .push_blob(&repository, EMPTY_CONFIG_BLOB, true)
        .await
        .unwrap();
    client.push_blob(&repository, payload, true).await.unwrap();
    let manifest = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"{OCI_MANIFEST_MEDIA_TYPE}\",\"artifactType\":\"{RECORD_ARTIFACT_TYPE}\",\"config\":{EMPTY_CONFIG_DESCRIPTOR},\"layers\":[{{\"mediaType\":\"{RECORD_ARTIFACT_TYPE}\",\"digest\":\"{}\",\"size\":{}}}],\"subject\":{{\"mediaType\":\"{}\",\"digest\":\"{}\",\"size\":{}}}}}",
        sha256_digest(payload),
        payload.len(),
        contract.media_type,
        contract.digest,
        contract.size
    );
    let bad = sha256_digest(manifest.as_bytes());
    client
        .put_manifest(
            &repository,
            &bad,
            OCI_MANIFEST_MEDIA_TYPE,
            manifest.as_bytes(),
        )
        .await
        .unwrap();
    let (status, _, _) = http(server.api, "GET", &format!("{PREFIX}/ready"), b"").await;
    assert_eq!(status, 200);
    let (status, _, body) = http(server.api, "GET", &format!("{PREFIX}/targets"), b"").await;
    assert_eq!(status, 200, "{body}");
    let dto: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(dto["health"]["status"], "partial", "{body}");
    assert_eq!(dto["health"]["invalidArtifacts"], 1, "{body}");
    assert_eq!(dto["targets"].as_array().map(Vec::len), Some(1), "{body}");
    let envelope = payments_envelope(&key, &subject, "after-tamper", 1000);
    let (status, body) = post_envelope(server.api, &envelope).await;
    assert_eq!(
        (status, body.as_str()),
        (
            503,
            "{\"code\":\"registry_incomplete\",\"message\":\"registry holds invalid evidence artifacts\"}\n"
        )
    );
    stop.cancel();
}
