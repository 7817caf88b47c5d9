//! The evidence store against real registries (docs/design/evidence-store.md), in both
//! referrer modes: go-containerregistry's registry with the Referrers API
//! ([`ReferrersMode::Api`]) and Debian's docker-registry 2.8 without it
//! ([`ReferrersMode::TagSchema`]). Records the store writes must be listed by an independent
//! client (`oras discover`).
//!
//! Needs `scripts/registry-tools.sh` (ggcr registry, oras) and the `docker-registry` package.

use std::fmt::Write as _;
use std::process::Command;

use ed25519_dalek::SigningKey;
use pacto_engine::{Coverage, SubjectRef, Timestamp};
use pacto_evidence::store::{
    CommitError, EMPTY_CONFIG_BLOB, HealthStatus, Malformed, RECORD_ARTIFACT_TYPE, Record,
    ReferrersMode, Store, StoreOptions, Subject, Subjects,
};
use pacto_evidence::{Envelope, ErrorCode, Producer, ReplayError, SignedEvidenceSet, sign};
use pacto_oci::{
    ArtifactClient, ClientOptions, Credentials, Keychain, OCI_INDEX_MEDIA_TYPE,
    OCI_MANIFEST_MEDIA_TYPE, Repository, referrers_tag, sha256_digest,
};
use pacto_testenv::ggcr::{GgcrRegistry, oras};
use pacto_testenv::registry::Registry;

/// A running registry of either kind.
enum Reg {
    Api(GgcrRegistry),
    Tag(Box<Registry>),
}

impl Reg {
    fn start(mode: ReferrersMode) -> Self {
        match mode {
            ReferrersMode::Api => Reg::Api(GgcrRegistry::start().expect("ggcr registry starts")),
            ReferrersMode::TagSchema => {
                Reg::Tag(Box::new(Registry::start().expect("docker-registry starts")))
            }
        }
    }

    fn host(&self) -> String {
        match self {
            Reg::Api(r) => r.host(),
            Reg::Tag(r) => r.host(),
        }
    }
}

fn client_options(host: &str) -> ClientOptions {
    ClientOptions {
        insecure_registries: vec![host.to_owned()],
        ..ClientOptions::default()
    }
}

fn client(host: &str) -> ArtifactClient {
    ArtifactClient::new(client_options(host), &Credentials::Anonymous).expect("client")
}

/// Pushes a small contract-like manifest (tagged `1.0.0`) and returns its subject reference.
async fn push_subject(host: &str, repo: &str) -> Subject {
    let c = client(host);
    let repository = Repository::new(host, repo);
    c.push_blob(&repository, EMPTY_CONFIG_BLOB, true)
        .await
        .expect("config");
    let layer = format!("contract of {repo}").into_bytes();
    c.push_blob(&repository, &layer, true).await.expect("layer");
    let manifest = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"{OCI_MANIFEST_MEDIA_TYPE}\",\"config\":{{\"mediaType\":\"application/vnd.oci.empty.v1+json\",\"digest\":\"{}\",\"size\":2}},\"layers\":[{{\"mediaType\":\"application/octet-stream\",\"digest\":\"{}\",\"size\":{}}}]}}",
        sha256_digest(EMPTY_CONFIG_BLOB),
        sha256_digest(&layer),
        layer.len()
    );
    let digest = c
        .put_manifest(
            &repository,
            "1.0.0",
            OCI_MANIFEST_MEDIA_TYPE,
            manifest.as_bytes(),
        )
        .await
        .expect("subject manifest");
    Subject::parse(&format!("oci://{host}/{repo}@{digest}")).expect("subject")
}

fn store(host: &str, subjects: &[&Subject]) -> Store {
    let list: Vec<String> = subjects.iter().map(|s| s.reference()).collect();
    Store::new(
        Subjects::parse(&list).expect("subjects"),
        StoreOptions {
            client: client_options(host),
            ..StoreOptions::default()
        },
        &Keychain::new(),
    )
    .expect("store")
}

fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("timestamp")
}

fn record(subject: &Subject, id: &str, producer: &str, sequence: u64, target: &str) -> Record {
    let set = SignedEvidenceSet {
        subject: SubjectRef::new("service", target),
        contract_ref: subject.reference(),
        source: "edge".into(),
        observed_at: ts("2026-12-04T09:59:30Z"),
        observations: Some(Vec::new()),
    };
    let mut envelope = Envelope::new(
        id,
        Producer {
            id: producer.into(),
            version: "1.0.0".into(),
            key_id: "k1".into(),
        },
        sequence,
        ts("2026-12-04T10:00:00Z"),
        ts("2026-12-05T10:00:00Z"),
        set,
    );
    sign(&mut envelope, &SigningKey::from_bytes(&[7u8; 32])).expect("sign");
    Record {
        envelope,
        compliance: "Compliant".into(),
        findings: Vec::new(),
        coverage: Coverage::default(),
        accepted_at: ts("2026-12-04T10:00:01.5Z"),
        service: "orders".into(),
        domain: subject.domain(),
        digest: subject.digest().to_owned(),
    }
}

/// `oras discover` of the subject (an independent client; it falls back to the tag schema by
/// itself when the registry has no Referrers API).
fn oras_discover(subject: &Subject) -> String {
    let oras = oras().expect("oras (scripts/registry-tools.sh)");
    let target = format!(
        "{}/{}@{}",
        subject.registry(),
        subject.repository(),
        subject.digest()
    );
    let out = Command::new(oras)
        .args(["discover", "--plain-http", "--format", "json", &target])
        .output()
        .expect("oras runs");
    assert!(
        out.status.success(),
        "oras discover {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pushes an artifact attached to `subject` made from `record` but with its payload changed
/// by `tamper` (bypassing the store), and lists it in the tag-schema index when `mode` says
/// so. Returns its digest.
async fn push_tampered(
    subject: &Subject,
    mode: ReferrersMode,
    record: &Record,
    tamper: impl FnOnce(&mut Record),
) -> String {
    let host = subject.registry();
    let c = client(host);
    let repo = subject.oci_repository();
    let descriptor = c
        .head_manifest(&repo, subject.digest())
        .await
        .expect("subject descriptor");
    let mut bad = record.clone();
    tamper(&mut bad);
    let artifact = bad.artifact(&descriptor);
    c.push_blob(&repo, EMPTY_CONFIG_BLOB, true)
        .await
        .expect("config");
    c.push_blob(&repo, &artifact.payload, true)
        .await
        .expect("payload");
    c.put_manifest(
        &repo,
        &artifact.digest,
        OCI_MANIFEST_MEDIA_TYPE,
        &artifact.manifest,
    )
    .await
    .expect("manifest");
    if mode == ReferrersMode::TagSchema {
        let mut list = c
            .referrers_tag_index(&repo, subject.digest())
            .await
            .expect("index")
            .map(|(l, _)| l)
            .unwrap_or_default();
        list.push(artifact.descriptor());
        c.put_manifest(
            &repo,
            &referrers_tag(subject.digest()),
            OCI_INDEX_MEDIA_TYPE,
            &ArtifactClient::referrers_index_bytes(&list),
        )
        .await
        .expect("index update");
    }
    artifact.digest
}

/// Removes a referrer: deletes its manifest and, in tag-schema mode, its index entry.
async fn remove_referrer(subject: &Subject, mode: ReferrersMode, digest: &str) {
    let c = client(subject.registry());
    let repo = subject.oci_repository();
    if mode == ReferrersMode::TagSchema {
        let list: Vec<_> = c
            .referrers_tag_index(&repo, subject.digest())
            .await
            .expect("index")
            .map(|(l, _)| l)
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.digest != digest)
            .collect();
        c.put_manifest(
            &repo,
            &referrers_tag(subject.digest()),
            OCI_INDEX_MEDIA_TYPE,
            &ArtifactClient::referrers_index_bytes(&list),
        )
        .await
        .expect("index update");
    }
    c.delete_manifest(&repo, digest).await.expect("delete");
}

const MODES: [ReferrersMode; 2] = [ReferrersMode::Api, ReferrersMode::TagSchema];

#[tokio::test]
async fn commit_is_scanned_and_discovered_by_oras_in_both_modes() {
    for mode in MODES {
        let reg = Reg::start(mode);
        let subject = push_subject(&reg.host(), "acme/orders").await;
        let store = store(&reg.host(), &[&subject]);
        let ready = store.preflight().await.expect("preflight");
        assert_eq!(ready.subjects[0].mode, mode, "{mode:?}");
        assert_eq!(store.mode(&subject), Some(mode));

        let r = record(&subject, "id-1", "edge", 1, "shop/orders");
        let committed = store.commit(&r).await.expect("commit");
        assert_eq!(committed.mode, mode);
        assert_eq!(
            committed.digest,
            r.artifact(
                &client(&reg.host())
                    .head_manifest(&subject.oci_repository(), subject.digest())
                    .await
                    .unwrap()
            )
            .digest,
            "deterministic artifact"
        );

        let scan = store.scan().await;
        assert_eq!(scan.health.status, HealthStatus::Ready, "{mode:?}");
        assert_eq!(scan.records.len(), 1);
        assert_eq!(
            *scan.records[0].record, r,
            "{mode:?}: the record reads back"
        );
        let fresh = store_for(&reg, &subject).scan().await;
        assert_eq!(fresh.records.len(), 1, "{mode:?}: a new store reads it too");

        let discovered = oras_discover(&subject);
        assert!(
            discovered.contains(&committed.digest),
            "{mode:?}: oras discover lists {}:\n{discovered}",
            committed.digest
        );
        if mode == ReferrersMode::TagSchema {
            // go-containerregistry lists the config media type as artifactType; the tag index
            // carries ours
            assert!(discovered.contains(RECORD_ARTIFACT_TYPE), "{discovered}");
        }
    }
}

fn store_for(reg: &Reg, subject: &Subject) -> Store {
    store(&reg.host(), &[subject])
}

#[tokio::test]
async fn replay_by_id_and_by_sequence_is_refused_across_subjects() {
    for mode in MODES {
        let reg = Reg::start(mode);
        let a = push_subject(&reg.host(), "acme/orders").await;
        let b = push_subject(&reg.host(), "acme/billing").await;
        let store = store(&reg.host(), &[&a, &b]);
        store
            .commit(&record(&a, "id-1", "edge", 5, "t1"))
            .await
            .expect("first");
        let err = store
            .commit(&record(&b, "id-1", "edge", 6, "t2"))
            .await
            .expect_err("same id on another subject");
        assert!(
            matches!(err, CommitError::Replay(ReplayError::DuplicateId { .. })),
            "{mode:?}: {err}"
        );
        assert_eq!(err.code(), ErrorCode::Replay);
        let err = store
            .commit(&record(&b, "id-2", "edge", 5, "t2"))
            .await
            .expect_err("same sequence on another subject");
        assert!(
            matches!(
                err,
                CommitError::Replay(ReplayError::StaleSequence { max: 5, .. })
            ),
            "{mode:?}: {err}"
        );
        store
            .commit(&record(&b, "id-2", "edge", 6, "t2"))
            .await
            .expect("a higher sequence");
        store
            .commit(&record(&b, "id-3", "other", 0, "t2"))
            .await
            .expect("another producer's first sequence may be 0");

        // a restart rebuilds the replay state from the registry
        let restarted = store_for_all(&reg, &[&a, &b]);
        let err = restarted
            .commit(&record(&a, "id-2", "edge", 9, "t1"))
            .await
            .expect_err("replay after restart");
        assert!(
            matches!(err, CommitError::Replay(ReplayError::DuplicateId { .. })),
            "{mode:?}: {err}"
        );
        let err = restarted
            .commit(&record(&a, "id-9", "edge", 6, "t1"))
            .await
            .expect_err("stale sequence after restart");
        assert!(
            matches!(err, CommitError::Replay(ReplayError::StaleSequence { .. })),
            "{mode:?}: {err}"
        );
    }
}

fn store_for_all(reg: &Reg, subjects: &[&Subject]) -> Store {
    store(&reg.host(), subjects)
}

#[tokio::test]
async fn tampered_record_is_partial_refuses_writes_until_removed() {
    for mode in MODES {
        let reg = Reg::start(mode);
        let subject = push_subject(&reg.host(), "acme/orders").await;
        let store = store_for(&reg, &subject);
        let good = record(&subject, "id-1", "edge", 1, "t1");
        store.commit(&good).await.expect("commit");
        let bad = push_tampered(&subject, mode, &good, |r| {
            r.digest = "sha256:feed".into();
        })
        .await;

        let scan = store.scan().await;
        assert_eq!(scan.health.status, HealthStatus::Partial, "{mode:?}");
        assert_eq!(scan.health.invalid_artifacts, 1);
        assert_eq!(scan.invalid[0].digest, bad);
        assert!(
            matches!(
                &scan.invalid[0].reason,
                Malformed::SubjectMismatch {
                    field: "record.digest",
                    ..
                }
            ),
            "{mode:?}: {}",
            scan.invalid[0].reason
        );
        assert_eq!(scan.records.len(), 1, "the good record is still listed");
        let dto = scan.targets(ts("2026-12-04T11:00:00Z"));
        assert!(
            dto.to_json()
                .contains("\"health\":{\"status\":\"partial\",\"subjects\":1,\"failedSubjects\":0,\"invalidArtifacts\":1}"),
            "{}",
            dto.to_json()
        );

        let err = store
            .commit(&record(&subject, "id-2", "edge", 2, "t1"))
            .await
            .expect_err("fail-closed");
        assert_eq!(err.code(), ErrorCode::RegistryIncomplete, "{mode:?}: {err}");
        assert!(err.to_string().contains(&bad), "{err}");

        remove_referrer(&subject, mode, &bad).await;
        let scan = store.scan().await;
        assert_eq!(scan.health.status, HealthStatus::Ready, "{mode:?}");
        store
            .commit(&record(&subject, "id-2", "edge", 2, "t1"))
            .await
            .expect("writes resume once the artifact is gone");
    }
}

#[tokio::test]
async fn corrupted_blob_is_reported_by_a_new_store_and_a_rescan() {
    let reg = Registry::start().expect("docker-registry");
    let host = reg.host();
    let subject = push_subject(&host, "acme/orders").await;
    let store = store(&host, &[&subject]);
    let good = record(&subject, "id-1", "edge", 1, "t1");
    store.commit(&good).await.expect("commit");
    let payload_digest = sha256_digest(&good.to_payload());
    let hex = &payload_digest["sha256:".len()..];
    let data = reg
        .storage_dir()
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    let mut bytes = std::fs::read(&data).expect("blob file");
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&data, &bytes).expect("corrupt");

    for scan in [
        store.rescan().await,
        self::store(&host, &[&subject]).scan().await,
    ] {
        assert_eq!(scan.health.status, HealthStatus::Partial);
        assert!(
            matches!(
                &scan.invalid[0].reason,
                Malformed::Fetch {
                    what: "payload",
                    ..
                }
            ),
            "{}",
            scan.invalid[0].reason
        );
        assert!(scan.records.is_empty());
    }
}

#[tokio::test]
async fn foreign_referrers_are_ignored() {
    for mode in MODES {
        let reg = Reg::start(mode);
        let subject = push_subject(&reg.host(), "acme/orders").await;
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("sbom.json"), b"{}").expect("file");
        let target = format!(
            "{}/{}@{}",
            subject.registry(),
            subject.repository(),
            subject.digest()
        );
        let out = Command::new(oras().expect("oras"))
            .current_dir(dir.path())
            .args([
                "attach",
                "--plain-http",
                "--artifact-type",
                "application/vnd.example.sbom+json",
                &target,
                "sbom.json",
            ])
            .output()
            .expect("oras attach");
        assert!(
            out.status.success(),
            "oras attach: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let store = store_for(&reg, &subject);
        store
            .commit(&record(&subject, "id-1", "edge", 1, "t1"))
            .await
            .expect("commit with a foreign referrer present");
        let scan = store.scan().await;
        assert_eq!(scan.health.status, HealthStatus::Ready, "{mode:?}");
        assert_eq!(scan.foreign, 1, "{mode:?}");
        assert_eq!(scan.records.len(), 1);
    }
}

#[tokio::test]
async fn a_deleted_referrer_rebuilds_the_index() {
    for mode in MODES {
        let reg = Reg::start(mode);
        let subject = push_subject(&reg.host(), "acme/orders").await;
        let store = store_for(&reg, &subject);
        let first = store
            .commit(&record(&subject, "id-1", "edge", 1, "t1"))
            .await
            .expect("first");
        store
            .commit(&record(&subject, "id-2", "edge", 2, "t2"))
            .await
            .expect("second");
        remove_referrer(&subject, mode, &first.digest).await;
        let scan = store.scan().await;
        assert_eq!(scan.health.status, HealthStatus::Ready, "{mode:?}");
        let ids: Vec<&str> = scan
            .records
            .iter()
            .map(|r| r.record.envelope.id.as_str())
            .collect();
        assert_eq!(ids, ["id-2"], "{mode:?}");
        // the deleted record's id is history no more (docs/design/evidence-store.md#retention)
        store
            .commit(&record(&subject, "id-1", "edge", 3, "t1"))
            .await
            .expect("the deleted id is accepted again");
    }
}

#[tokio::test]
async fn unknown_subjects_and_unreachable_registries_are_refused() {
    let reg = GgcrRegistry::start().expect("ggcr");
    let subject = push_subject(&reg.host(), "acme/orders").await;
    let other = Subject::parse(&format!(
        "oci://{}/acme/other@{}",
        reg.host(),
        subject.digest()
    ))
    .unwrap();
    let store = store(&reg.host(), &[&subject]);
    let err = store
        .commit(&record(&other, "id-1", "edge", 1, "t1"))
        .await
        .expect_err("not configured");
    assert_eq!(err.code(), ErrorCode::ContractRefRejected, "{err}");

    // nothing listens on the port any more
    let host = reg.host();
    drop(reg);
    let gone = self::store(&host, &[&subject]);
    let err = gone.preflight().await.expect_err("preflight fails");
    assert!(err.to_string().contains(&subject.reference()), "{err}");
    let scan = gone.scan().await;
    assert_eq!(scan.health.status, HealthStatus::Unavailable);
    assert_eq!(scan.health.failed_subjects, 1);
    let err = gone
        .commit(&record(&subject, "id-1", "edge", 1, "t1"))
        .await
        .expect_err("unavailable");
    assert_eq!(err.code(), ErrorCode::RegistryUnavailable, "{err}");
}

#[tokio::test]
async fn commit_cost_does_not_grow_with_the_history() {
    for mode in MODES {
        let reg = Reg::start(mode);
        let subject = push_subject(&reg.host(), "acme/orders").await;
        let store = store_for(&reg, &subject);
        store.preflight().await.expect("preflight");
        let mut costs = Vec::new();
        for i in 0..12u64 {
            let committed = store
                .commit(&record(&subject, &format!("id-{i}"), "edge", i, "t"))
                .await
                .expect("commit");
            costs.push(committed.requests);
        }
        // the first commit pushes the empty config; after that every commit costs the same
        let steady = costs[1];
        assert!(
            costs[1..].iter().all(|&c| c == steady),
            "{mode:?}: requests per commit {costs:?}"
        );
        // and a scan of a warm index only lists
        let scan = store.scan().await;
        assert_eq!(scan.records.len(), 12);
        assert_eq!(scan.requests, 1, "{mode:?}: one listing request");
        // the baseline re-reads everything: two requests per record plus the listing
        let naive = Store::new(
            Subjects::parse(&[subject.reference()]).unwrap(),
            StoreOptions {
                client: client_options(&reg.host()),
                incremental: false,
                ..StoreOptions::default()
            },
            &Keychain::new(),
        )
        .unwrap();
        naive.scan().await;
        let scan = naive.scan().await;
        assert_eq!(scan.requests, 1 + 2 * 12, "{mode:?}");
    }
}

/// A pass-through HTTP/1.1 proxy in front of a real registry that serves the Referrers API in
/// pages (`?n=`, default 2, ordered by digest) with `Link` headers, since neither test registry
/// paginates. One request per connection.
struct PagingProxy {
    addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PagingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PagingProxy {
    async fn start(backend: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let http = reqwest::Client::new();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (http, backend) = (http.clone(), backend.clone());
                tokio::spawn(async move {
                    let _ = Box::pin(Self::serve(stream, &http, &backend)).await;
                });
            }
        });
        Self { addr, task }
    }

    async fn serve(
        mut stream: tokio::net::TcpStream,
        http: &reqwest::Client,
        backend: &str,
    ) -> std::io::Result<()> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut buf = Vec::new();
        let head_end = loop {
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.lines();
        let mut first = lines.next().unwrap_or_default().split(' ');
        let (method, target) = (
            first.next().unwrap_or_default().to_owned(),
            first.next().unwrap_or_default().to_owned(),
        );
        let mut headers = Vec::new();
        let mut length = 0usize;
        for line in lines {
            if let Some((k, v)) = line.split_once(':') {
                let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.parse().unwrap_or(0);
                }
                if !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("connection") {
                    headers.push((k, v));
                }
            }
        }
        let mut body = buf[head_end..].to_vec();
        while body.len() < length {
            let mut chunk = vec![0u8; 65536];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        let url = reqwest::Url::parse(&format!("http://{backend}{target}")).expect("url");
        let paging = method == "GET" && url.path().contains("/referrers/");
        let mut upstream = url.clone();
        upstream.set_query(None);
        let mut request = http.request(
            method.parse().expect("method"),
            if paging { upstream } else { url.clone() },
        );
        for (k, v) in &headers {
            request = request.header(k, v);
        }
        let response = request.body(body).send().await.expect("backend");
        let status = response.status();
        let mut out_headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(k, _)| *k != "connection" && *k != "transfer-encoding")
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
            .collect();
        let mut out = response.bytes().await.expect("body").to_vec();
        if paging && status.is_success() {
            let mut index: serde_json::Value = serde_json::from_slice(&out).expect("index");
            let mut all = index["manifests"].as_array().cloned().unwrap_or_default();
            all.sort_by(|a, b| a["digest"].as_str().cmp(&b["digest"].as_str()));
            let query: std::collections::HashMap<String, String> =
                url.query_pairs().into_owned().collect();
            let n: usize = query.get("n").and_then(|n| n.parse().ok()).unwrap_or(2);
            let start = query.get("last").map_or(0, |last| {
                all.iter()
                    .position(|d| d["digest"].as_str() == Some(last.as_str()))
                    .map_or(all.len(), |i| i + 1)
            });
            let page: Vec<_> = all.iter().skip(start).take(n).cloned().collect();
            if start + n < all.len()
                && let Some(last) = page.last().and_then(|d| d["digest"].as_str())
            {
                out_headers.push((
                    "Link".to_owned(),
                    format!("<{}?n={n}&last={last}>; rel=\"next\"", url.path()),
                ));
            }
            index["manifests"] = serde_json::Value::Array(page);
            out = serde_json::to_vec(&index).expect("json");
            out_headers.retain(|(k, _)| k != "content-length");
            out_headers.push(("content-length".to_owned(), out.len().to_string()));
        }
        let mut text = format!(
            "HTTP/1.1 {} {}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        for (k, v) in &out_headers {
            let _ = write!(text, "{k}: {v}\r\n");
        }
        text.push_str("connection: close\r\n\r\n");
        stream.write_all(text.as_bytes()).await?;
        if method != "HEAD" {
            stream.write_all(&out).await?;
        }
        stream.shutdown().await
    }
}

#[tokio::test]
async fn referrers_pages_are_followed_up_to_the_cap() {
    let reg = GgcrRegistry::start().expect("ggcr");
    let direct = push_subject(&reg.host(), "acme/orders").await;
    let proxy = PagingProxy::start(reg.host()).await;
    let host = proxy.addr.to_string();
    let subject = Subject::parse(&format!(
        "oci://{host}/{}@{}",
        direct.repository(),
        direct.digest()
    ))
    .unwrap();
    let paged = |max_pages: usize| {
        Store::new(
            Subjects::parse(&[subject.reference()]).unwrap(),
            StoreOptions {
                client: client_options(&host),
                page_size: Some(2),
                max_pages,
                ..StoreOptions::default()
            },
            &Keychain::new(),
        )
        .unwrap()
    };
    let store = paged(1000);
    for i in 0..5u64 {
        store
            .commit(&record(&subject, &format!("id-{i}"), "edge", i, "t"))
            .await
            .expect("commit through the paging proxy");
    }
    let fresh = paged(1000);
    let scan = fresh.scan().await;
    assert_eq!(scan.health.status, HealthStatus::Ready);
    assert_eq!(scan.records.len(), 5, "every page read");
    let again = fresh.scan().await;
    assert_eq!(again.requests, 3, "5 referrers in pages of 2");

    let capped = paged(2);
    let err = capped.preflight().await.expect_err("over the page cap");
    assert!(err.to_string().contains("more than 2 pages"), "{err}");
    let scan = capped.scan().await;
    assert_eq!(scan.health.status, HealthStatus::Unavailable);
    assert!(
        scan.failed[0].error.contains("more than 2 pages"),
        "{}",
        scan.failed[0].error
    );
}
