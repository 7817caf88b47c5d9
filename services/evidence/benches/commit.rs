//! Commit latency of the evidence store with N records already stored, in both referrer modes
//! (docs/design/evidence-store.md#incremental-index), printed, not asserted:
//!
//! - `incremental`: the store's index is warm (built by one scan, whose time is printed too);
//!   each commit lists the referrers and validates only what is new;
//! - `full rescan`: `StoreOptions::incremental = false`, every commit re-reads and re-validates
//!   the whole history first, as upstream does.
//!
//! Registries: go-containerregistry's (Referrers API) and Debian's docker-registry 2.8 (tag
//! schema), both on loopback. The N records are seeded by pushing their artifacts directly
//! (not through commit), 16 at a time; in tag-schema mode the referrers index is written once.
//!
//! `cargo bench -p pacto-evidence --bench commit` (needs `scripts/registry-tools.sh` and
//! `docker-registry`). `PACTO_BENCH_RECORDS` (default `10,10000`) sets the sizes,
//! `PACTO_BENCH_COMMITS` (default 5) the commits timed per row. The stores keep
//! `MAX_RECORDS_PER_SUBJECT` (10,000) records with no age limit (the default retention keeps
//! 1000): sizes above it measure a store at its cap, where each commit also drops the oldest
//! record (docs/design/evidence-store.md#retention).

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
fn store(host: &str, subject: &Subject, incremental: bool) -> Store {
    Store::new(
        Subjects::parse(&[subject.reference()]).expect("subjects"),
        StoreOptions {
            client: options(host),
            incremental,
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

/// Times `commits` commits (sequences from `next`); returns the mean latency and requests.
async fn time_commits(
    store: &Store,
    key: &SigningKey,
    subject: &Subject,
    next: &mut u64,
    commits: u64,
) -> (Duration, f64) {
    let mut total = Duration::ZERO;
    let mut requests = 0;
    for _ in 0..commits {
        let r = record(key, subject, *next);
        *next += 1;
        let started = Instant::now();
        let committed = store.commit(&r).await.expect("commit");
        total += started.elapsed();
        requests += committed.requests;
    }
    (total / commits as u32, requests as f64 / commits as f64)
}

async fn run(mode: ReferrersMode, sizes: &[u64], commits: u64) {
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
    for &n in sizes {
        let started = Instant::now();
        seed(&client, &subject, mode, &key, stored, n).await;
        let seeded = started.elapsed();
        stored = n;

        let incremental = store(&host, &subject, true);
        let started = Instant::now();
        let scan = incremental.scan().await;
        let index_build = started.elapsed();
        assert_eq!(scan.records.len() as u64, stored, "all seeded records read");
        let (inc, inc_requests) =
            time_commits(&incremental, &key, &subject, &mut next, commits).await;
        stored += commits;

        let naive = store(&host, &subject, false);
        let naive_commits = if stored > 1000 { 1 } else { commits };
        let (full, full_requests) =
            time_commits(&naive, &key, &subject, &mut next, naive_commits).await;
        stored += naive_commits;
        println!(
            "commit, {:<10} {n:>6} records: incremental {} ({inc_requests:.0} requests), full rescan {} ({full_requests:.0} requests), ratio {:.0}x; index build {} ({} requests); seeding {}",
            mode.as_str(),
            ms(inc),
            ms(full),
            full.as_secs_f64() / inc.as_secs_f64(),
            ms(index_build),
            scan.requests,
            ms(seeded),
        );
    }
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
        .unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for mode in [ReferrersMode::Api, ReferrersMode::TagSchema] {
        runtime.block_on(run(mode, &sizes, commits));
    }
}
