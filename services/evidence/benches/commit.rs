//! Commit latency of the evidence store with N records already stored, in both referrer modes
//! (docs/design/evidence-store.md#verification), printed, not asserted: per size, commit p50
//! and p99 over `PACTO_BENCH_COMMITS` commits through one store whose index is warm (built by
//! one scan, whose time is printed, and one untimed first commit, which in tag-schema mode
//! pages an index written in the flat layout: docs/design/evidence-store.md#paged-tag-index);
//! at the end, each mode's p50 and p99 at the largest size as a ratio of those at the
//! smallest, from the same run (issue 36 item 5: goal p50 within 2x).
//!
//! Registries: go-containerregistry's (Referrers API) and Debian's docker-registry 2.8 (tag
//! schema), both on loopback. The N records are seeded by pushing their artifacts directly
//! (not through commit), 16 at a time; in tag-schema mode the referrers index is written once,
//! every record listed directly (the layout before pages).
//!
//! `cargo bench -p pacto-evidence --bench commit` (needs `scripts/registry-tools.sh` and
//! `docker-registry`). `PACTO_BENCH_RECORDS` (default `10,10000`) sets the sizes,
//! `PACTO_BENCH_COMMITS` (default 50) the commits timed per size. The stores keep
//! `MAX_RECORDS_PER_SUBJECT` (10,000) records with no age limit (the default retention keeps
//! 1000): sizes at or above it measure a store at its cap, where each commit also drops the
//! oldest record (docs/design/evidence-store.md#retention).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use pacto_engine::{Coverage, SubjectRef, Timestamp};
use pacto_evidence::store::{
    EMPTY_CONFIG_BLOB, MAX_RECORDS_PER_SUBJECT, Record, ReferrersMode, Retention, Store,
    StoreOptions, Subject, Subjects,
};
use pacto_evidence::{Envelope, Producer, SignedEvidenceSet, sign};
use pacto_oci::{
    ArtifactClient, ClientOptions, Credentials, Keychain, OCI_INDEX_MEDIA_TYPE,
    OCI_MANIFEST_MEDIA_TYPE, Repository, referrers_tag, sha256_digest,
};
use pacto_testenv::ggcr::GgcrRegistry;
use pacto_testenv::registry::Registry;

fn options(host: &str) -> ClientOptions {
    ClientOptions {
        insecure_registries: vec![host.to_owned()],
        operation_timeout: Duration::from_mins(10),
        max_manifest_bytes: 16 << 20,
        ..ClientOptions::default()
    }
}

fn ts(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("timestamp")
}

fn record(key: &SigningKey, subject: &Subject, i: u64) -> Record {
    let set = SignedEvidenceSet {
        subject: SubjectRef::new("service", format!("shop/t{}", i % 50)),
        contract_ref: subject.reference(),
        source: "edge".into(),
        observed_at: ts("2026-12-04T09:59:30Z"),
        observations: Some(Vec::new()),
    };
    let mut envelope = Envelope::new(
        format!("id-{i}"),
        Producer {
            id: "edge".into(),
            version: "1.0.0".into(),
            key_id: "k1".into(),
        },
        i,
        ts("2026-12-04T10:00:00Z"),
        ts("2026-12-05T10:00:00Z"),
        set,
    );
    sign(&mut envelope, key).expect("sign");
    Record {
        envelope,
        compliance: "Compliant".into(),
        findings: Vec::new(),
        coverage: Coverage::default(),
        accepted_at: ts("2026-12-04T10:00:01Z"),
        service: "orders".into(),
        domain: subject.domain(),
        digest: subject.digest().to_owned(),
    }
}

async fn push_subject(client: &ArtifactClient, host: &str) -> Subject {
    let repo = Repository::new(host, "acme/orders");
    client
        .push_blob(&repo, EMPTY_CONFIG_BLOB, true)
        .await
        .expect("config");
    let manifest = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"{OCI_MANIFEST_MEDIA_TYPE}\",\"config\":{{\"mediaType\":\"application/vnd.oci.empty.v1+json\",\"digest\":\"{}\",\"size\":2}},\"layers\":[]}}",
        sha256_digest(EMPTY_CONFIG_BLOB)
    );
    let digest = client
        .put_manifest(&repo, "1.0.0", OCI_MANIFEST_MEDIA_TYPE, manifest.as_bytes())
        .await
        .expect("subject");
    Subject::parse(&format!("oci://{host}/acme/orders@{digest}")).expect("subject")
}

/// Pushes records `from..to` directly, 16 at a time; in tag-schema mode rewrites the referrers
/// index once with all of them.
async fn seed(
    client: &Arc<ArtifactClient>,
    subject: &Subject,
    mode: ReferrersMode,
    key: &SigningKey,
    from: u64,
    to: u64,
) {
    let repo = subject.oci_repository();
    let descriptor = client
        .head_manifest(&repo, subject.digest())
        .await
        .expect("subject descriptor");
    let mut tasks = tokio::task::JoinSet::new();
    let mut descriptors = Vec::new();
    for i in from..to {
        let artifact = record(key, subject, i).artifact(&descriptor);
        descriptors.push(artifact.descriptor());
        let (client, repo) = (Arc::clone(client), repo.clone());
        tasks.spawn(async move {
            client
                .push_blob(&repo, &artifact.payload, false)
                .await
                .expect("payload");
            client
                .put_manifest(
                    &repo,
                    &artifact.digest,
                    OCI_MANIFEST_MEDIA_TYPE,
                    &artifact.manifest,
                )
                .await
                .expect("manifest");
        });
        if tasks.len() >= 16 {
            tasks.join_next().await;
        }
    }
    while tasks.join_next().await.is_some() {}
    if mode == ReferrersMode::TagSchema {
        let mut list = client
            .referrers_tag_index(&repo, subject.digest())
            .await
            .expect("index")
            .map(|(l, _)| l)
            .unwrap_or_default();
        list.extend(descriptors);
        client
            .put_manifest(
                &repo,
                &referrers_tag(subject.digest()),
                OCI_INDEX_MEDIA_TYPE,
                &ArtifactClient::referrers_index_bytes(&list),
            )
            .await
            .expect("index");
    }
}

/// A store keeping up to [`MAX_RECORDS_PER_SUBJECT`] records with no age limit, so that the N
/// seeded records are all held (the default retention keeps 1000).
fn store(host: &str, subject: &Subject) -> Store {
    Store::new(
        Subjects::parse(&[subject.reference()]).expect("subjects"),
        StoreOptions {
            client: options(host),
            retention: Retention {
                max_age: None,
                max_records: MAX_RECORDS_PER_SUBJECT,
            },
            ..StoreOptions::default()
        },
        &Keychain::new(),
    )
    .expect("store")
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Times `commits` commits (sequences from `next`); returns each latency, sorted, and the
/// mean requests per commit.
async fn time_commits(
    store: &Store,
    key: &SigningKey,
    subject: &Subject,
    next: &mut u64,
    commits: u64,
) -> (Vec<Duration>, f64) {
    let mut times = Vec::new();
    let mut requests = 0;
    for _ in 0..commits {
        let r = record(key, subject, *next);
        *next += 1;
        let started = Instant::now();
        let committed = store.commit(&r).await.expect("commit");
        times.push(started.elapsed());
        requests += committed.requests;
    }
    times.sort();
    (times, requests as f64 / commits as f64)
}

/// The `q` quantile of sorted `times` (nearest rank).
fn quantile(times: &[Duration], q: f64) -> Duration {
    let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

/// The referrers tag index's size in bytes (tag-schema mode), 0 when there is none.
async fn index_bytes(client: &ArtifactClient, subject: &Subject) -> usize {
    client
        .manifest(&subject.oci_repository(), &referrers_tag(subject.digest()))
        .await
        .map_or(0, |m| m.bytes.len())
}

/// One mode over `sizes`; returns (size, p50, p99) per size.
async fn run(mode: ReferrersMode, sizes: &[u64], commits: u64) -> Vec<(u64, Duration, Duration)> {
    // keep the registry alive for the whole run
    let (host, _ggcr, _docker) = match mode {
        ReferrersMode::Api => {
            let r = GgcrRegistry::start().expect("ggcr registry (scripts/registry-tools.sh)");
            (r.host(), Some(r), None)
        }
        ReferrersMode::TagSchema => {
            let r = Registry::start().expect("docker-registry");
            (r.host(), None, Some(r))
        }
    };
    let key = SigningKey::from_bytes(&[5u8; 32]);
    let client =
        Arc::new(ArtifactClient::new(options(&host), &Credentials::Anonymous).expect("client"));
    let subject = push_subject(&client, &host).await;
    let mut stored = 0u64;
    let mut next = 1_000_000u64;
    let mut rows = Vec::new();
    for &n in sizes {
        let started = Instant::now();
        seed(&client, &subject, mode, &key, stored, n).await;
        let seeded = started.elapsed();
        stored = n;

        let store = store(&host, &subject);
        let started = Instant::now();
        let scan = store.scan().await;
        let index_build = started.elapsed();
        assert_eq!(
            scan.records.len() as u64,
            stored.min(MAX_RECORDS_PER_SUBJECT as u64),
            "all seeded records read"
        );
        let (first, _) = time_commits(&store, &key, &subject, &mut next, 1).await;
        let (times, requests) = time_commits(&store, &key, &subject, &mut next, commits).await;
        stored += 1 + commits;
        let (p50, p99) = (quantile(&times, 0.5), quantile(&times, 0.99));
        let index = if mode == ReferrersMode::TagSchema {
            format!(", tag index {} bytes", index_bytes(&client, &subject).await)
        } else {
            String::new()
        };
        println!(
            "commit, {:<10} {n:>6} records: p50 {} p99 {} ({requests:.1} requests/commit, {commits} commits){index}; first commit {}; index build {} ({} requests); seeding {}",
            mode.as_str(),
            ms(p50),
            ms(p99),
            ms(first[0]),
            ms(index_build),
            scan.requests,
            ms(seeded),
        );
        rows.push((n, p50, p99));
    }
    rows
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter
    let sizes: Vec<u64> = std::env::var("PACTO_BENCH_RECORDS")
        .unwrap_or_else(|_| "10,10000".to_owned())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("PACTO_BENCH_RECORDS: comma-separated counts")
        })
        .collect();
    let commits: u64 = std::env::var("PACTO_BENCH_COMMITS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for mode in [ReferrersMode::Api, ReferrersMode::TagSchema] {
        let rows = runtime.block_on(run(mode, &sizes, commits));
        if let (Some(small), Some(large)) = (rows.first(), rows.last()) {
            println!(
                "commit, {:<10} {} vs {} records: p50 ratio {:.2}x, p99 ratio {:.2}x",
                mode.as_str(),
                large.0,
                small.0,
                large.1.as_secs_f64() / small.1.as_secs_f64(),
                large.2.as_secs_f64() / small.2.as_secs_f64(),
            );
        }
    }
}
