//! Shared resolves against a real docker-registry (docs/design/resolution.md#shared-resolves):
//! identical concurrent resolves share one registry round trip, a tag's digest answer serves the
//! requests whose max age allows it, failures are remembered briefly with their original error,
//! and requests with other credentials never share. Every count comes from the registry's own
//! log, not from the resolver's counters.

#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pacto_contract_resolver::{
    ListInput, Outcome, Resolver, ResolverConfig, SecretSource, TagRevision,
};
use pacto_runtime::testing::eventually;
use pacto_testenv::registry::Registry;

/// The max age status-writer sends for a requeue with the default check interval.
const INTERVAL: Duration = Duration::from_mins(5);

/// Resolves `reference` `n` times at once (each in its own task) with `max_age`.
async fn resolve_concurrently(
    resolver: &Arc<Resolver>,
    n: usize,
    reference: &str,
    pull_secret: Option<&str>,
    max_age: Duration,
) -> Vec<Outcome> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let resolver = Arc::clone(resolver);
        let mut input = oci_input(reference, pull_secret);
        input.max_age = max_age;
        tasks.spawn(async move { resolver.resolve(&input).await });
    }
    let mut outcomes = Vec::with_capacity(n);
    while let Some(outcome) = tasks.join_next().await {
        outcomes.push(outcome.unwrap());
    }
    outcomes
}

/// A settled snapshot of the registry's access log.
async fn snapshot(registry: &Registry) -> usize {
    access_log_settled(registry).await.len()
}

/// The requests the registry answered since `before` (a [`snapshot`]), as `METHOD path status`.
async fn new_requests(registry: &Registry, before: usize) -> Vec<String> {
    access_log_settled(registry).await[before..]
        .iter()
        .map(|e| format!("{} {} {}", e.method, e.path, e.status))
        .collect()
}

/// Manifest HEADs among `requests`.
fn heads(requests: &[String]) -> usize {
    requests
        .iter()
        .filter(|r| r.starts_with("HEAD ") && r.contains("/manifests/"))
        .count()
}

/// Every request of `requests` that is not a manifest HEAD belongs to one bundle pull: GETs of
/// distinct paths (the manifest by digest, the config and layer blobs), none twice.
fn assert_at_most_one_pull(requests: &[String]) {
    let pull: Vec<_> = requests
        .iter()
        .filter(|r| !r.starts_with("HEAD "))
        .collect();
    let distinct: BTreeSet<_> = pull.iter().collect();
    assert_eq!(distinct.len(), pull.len(), "a pull repeated: {requests:?}");
    assert!(pull.iter().all(|r| r.starts_with("GET ")), "{requests:?}");
    assert!(pull.len() <= 3, "more than one pull set: {requests:?}");
}

fn resolver_with(
    registry: &Registry,
    failure_ttl: Duration,
    secrets: Option<Secrets>,
) -> Arc<Resolver> {
    let config = ResolverConfig {
        failure_ttl,
        ..config(&[registry.host()])
    };
    let secrets = secrets.map(|s| Arc::new(s) as Arc<dyn SecretSource>);
    Arc::new(Resolver::new(config, secrets).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_resolves_of_one_tag_cost_one_manifest_request() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let (digest, _) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "shared").await;
    let resolver = resolver_with(&registry, Duration::from_secs(10), None);
    let reference = format!("{host}/acme/svc:1.0.0");

    // 1,000 Pactos requeued at once: one HEAD and one pull serve them all.
    let before = snapshot(&registry).await;
    let outcomes = resolve_concurrently(&resolver, 1000, &reference, None, INTERVAL).await;
    for outcome in outcomes {
        assert_eq!(expect_resolved(outcome).digest, digest);
    }
    let first = new_requests(&registry, before).await;
    println!(
        "1000 concurrent resolves of one tag (max age {}s): {} registry requests, {} manifest \
         HEAD: {first:?}",
        INTERVAL.as_secs(),
        first.len(),
        heads(&first)
    );
    assert_eq!(heads(&first), 1, "{first:?}");
    assert_at_most_one_pull(&first);

    // Again within the max age: the shared answer, no request at all.
    let before = snapshot(&registry).await;
    let outcomes = resolve_concurrently(&resolver, 1000, &reference, None, INTERVAL).await;
    for outcome in outcomes {
        assert_eq!(expect_resolved(outcome).digest, digest);
    }
    let again = new_requests(&registry, before).await;
    println!(
        "1000 more within the max age: {} registry requests",
        again.len()
    );
    assert_eq!(again, Vec::<String>::new());

    // A fresh resolve (a changed Pacto, max age 0) asks the registry: one HEAD, the bundle is
    // cached.
    let before = snapshot(&registry).await;
    let fresh = resolve_concurrently(&resolver, 1, &reference, None, Duration::ZERO).await;
    assert_eq!(
        expect_resolved(fresh.into_iter().next().unwrap()).digest,
        digest
    );
    let fresh = new_requests(&registry, before).await;
    println!("1 fresh resolve: {} registry requests", fresh.len());
    assert_eq!(
        fresh,
        ["HEAD /v2/acme/svc/manifests/1.0.0 200".to_owned()],
        "a fresh resolve asks again"
    );

    // A force-pushed tag is seen by the next fresh resolve, and from then on by every request
    // that shares the answer.
    let (pushed, _) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "pushed").await;
    let fresh = resolve_concurrently(&resolver, 1, &reference, None, Duration::ZERO).await;
    assert_eq!(
        expect_resolved(fresh.into_iter().next().unwrap()).digest,
        pushed
    );
    let shared = resolve_concurrently(&resolver, 10, &reference, None, INTERVAL).await;
    for outcome in shared {
        assert_eq!(expect_resolved(outcome).digest, pushed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_shared_with_its_error_until_the_failure_ttl() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "x").await;
    // A TTL longer than the test, so that "within the TTL" holds however slow the machine.
    let resolver = resolver_with(&registry, Duration::from_mins(10), None);
    let missing = format!("{host}/acme/svc:9.9.9");

    let before = snapshot(&registry).await;
    let outcomes = resolve_concurrently(&resolver, 100, &missing, None, INTERVAL).await;
    let reasons: BTreeSet<String> = outcomes.into_iter().map(expect_unavailable).collect();
    let first = new_requests(&registry, before).await;
    println!(
        "100 concurrent resolves of a missing tag: {} registry requests {first:?}, {} distinct \
         answers",
        first.len(),
        reasons.len()
    );
    assert_eq!(first, ["HEAD /v2/acme/svc/manifests/9.9.9 404".to_owned()]);
    assert_eq!(
        reasons.len(),
        1,
        "every answer carries the same error: {reasons:?}"
    );
    let reason = reasons.into_iter().next().unwrap();
    assert!(
        reason.contains("artifact") && reason.contains("not found in registry"),
        "{reason}"
    );

    // Within the TTL: the same error again, from memory, even once the tag exists.
    push_contract(&registry, "acme/svc", "9.9.9", "9.9.9", "late").await;
    let before = snapshot(&registry).await;
    let outcomes = resolve_concurrently(&resolver, 100, &missing, None, INTERVAL).await;
    for outcome in outcomes {
        assert_eq!(expect_unavailable(outcome), reason);
    }
    let remembered = new_requests(&registry, before).await;
    println!(
        "100 more within the failure TTL: {} registry requests",
        remembered.len()
    );
    assert_eq!(remembered, Vec::<String>::new());
    // A request with a max age below the failure's age does not take it: 0 asks again.
    let before = snapshot(&registry).await;
    let fresh = resolve_concurrently(&resolver, 1, &missing, None, Duration::ZERO).await;
    expect_resolved(fresh.into_iter().next().unwrap());
    assert_eq!(heads(&new_requests(&registry, before).await), 1);

    // Once the failure is older than the TTL, the next request asks the registry again.
    let failure_ttl = Duration::from_secs(1);
    let short = resolver_with(&registry, failure_ttl, None);
    let gone = format!("{host}/acme/svc:7.7.7");
    let met = Instant::now();
    let reason = expect_unavailable(
        resolve_concurrently(&short, 1, &gone, None, INTERVAL)
            .await
            .pop()
            .unwrap(),
    );
    let (digest, _) = push_contract(&registry, "acme/svc", "7.7.7", "7.7.7", "later").await;
    let before = snapshot(&registry).await;
    let resolved = eventually(
        "a resolve that asks the registry after the failure TTL",
        Duration::from_secs(30),
        || {
            let (short, gone, reason) = (&short, &gone, &reason);
            async move {
                match resolve_concurrently(short, 1, gone, None, INTERVAL)
                    .await
                    .pop()
                    .unwrap()
                {
                    Outcome::Resolved(r) => Some(r),
                    Outcome::Unavailable { reason: r, .. } => {
                        assert_eq!(&r, reason, "the remembered error");
                        None
                    }
                    other @ Outcome::Invalid { .. } => panic!("{other:?}"),
                }
            }
        },
    )
    .await;
    assert!(met.elapsed() >= failure_ttl, "remembered for the whole TTL");
    assert_eq!(resolved.digest, digest);
    let after = new_requests(&registry, before).await;
    println!(
        "after the failure TTL: {} registry requests {after:?}",
        after.len()
    );
    assert_eq!(heads(&after), 1, "{after:?}");
    assert_at_most_one_pull(&after);

    // A failure TTL of zero remembers nothing.
    let off = resolver_with(&registry, Duration::ZERO, None);
    let other = format!("{host}/acme/svc:8.8.8");
    let before = snapshot(&registry).await;
    for _ in 0..3 {
        expect_unavailable(
            resolve_concurrently(&off, 1, &other, None, INTERVAL)
                .await
                .pop()
                .unwrap(),
        );
    }
    assert_eq!(heads(&new_requests(&registry, before).await), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_pass_over_a_thousand_pactos_of_one_tag_costs_one_manifest_request() {
    let registry = Registry::start().unwrap();
    let host = registry.host();
    let (digest, _) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "mirrored").await;
    let resolver = resolver_with(&registry, Duration::from_secs(10), None);
    let list = |max_age: Duration| ListInput {
        namespace: "team-a".into(),
        pacto_name: "svc".into(),
        oci: format!("{host}/acme/svc"),
        pull_secret: None,
        tags: vec!["1.0.0".into()],
        max_age,
    };
    let digest_of = |revisions: Vec<TagRevision>| {
        assert_eq!(revisions.len(), 1, "{revisions:?}");
        assert_eq!(revisions[0].error, "", "{revisions:?}");
        revisions[0].digest.clone()
    };

    // One pass of the mirror: 1,000 Pactos track the tag, asked one after the other with the
    // pass's age (whole seconds, at least 1) as max age. The first asks, the rest share.
    let before = snapshot(&registry).await;
    let started = Instant::now();
    for _ in 0..1000 {
        let age = Duration::from_secs(started.elapsed().as_secs() + 1);
        let revisions = resolver.list_revisions(&list(age)).await.unwrap();
        assert_eq!(digest_of(revisions), digest);
    }
    let pass = new_requests(&registry, before).await;
    println!(
        "a mirror pass over 1000 Pactos of one tag: {} registry requests, {} manifest HEAD",
        pass.len(),
        heads(&pass)
    );
    assert_eq!(heads(&pass), 1, "{pass:?}");
    assert_at_most_one_pull(&pass);

    // A force-push: an answer younger than the max age still stands in, a fresh ask sees it,
    // and every later request within the max age shares the new digest.
    let (pushed, _) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "pushed").await;
    let shared = resolver.list_revisions(&list(INTERVAL)).await.unwrap();
    assert_eq!(digest_of(shared), digest);
    let fresh = resolver
        .list_revisions(&list(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(digest_of(fresh), pushed);
    let shared = resolver.list_revisions(&list(INTERVAL)).await.unwrap();
    assert_eq!(digest_of(shared), pushed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_with_other_credentials_are_not_merged() {
    let registry = Registry::start_with_basic_auth("alice", "wonderland").unwrap();
    let host = registry.host();
    let (digest, _) = push_contract(&registry, "acme/svc", "1.0.0", "1.0.0", "private").await;
    let basic = |password: &str| {
        vec![
            ("registry", host.clone()),
            ("username", "alice".to_owned()),
            ("password", password.to_owned()),
        ]
    };
    // Two Secrets with the same credentials, and one with a wrong password.
    let secrets = Secrets(vec![
        ("pull-a", "Opaque", basic("wonderland")),
        ("pull-b", "Opaque", basic("wonderland")),
        ("pull-wrong", "Opaque", basic("looking-glass")),
    ]);
    let resolver = resolver_with(&registry, Duration::from_secs(10), Some(secrets));
    let reference = format!("{host}/acme/svc:1.0.0");

    let before = snapshot(&registry).await;
    let (a, b, wrong) = tokio::join!(
        resolve_concurrently(&resolver, 50, &reference, Some("pull-a"), INTERVAL),
        resolve_concurrently(&resolver, 50, &reference, Some("pull-b"), INTERVAL),
        resolve_concurrently(&resolver, 50, &reference, Some("pull-wrong"), INTERVAL),
    );
    for outcome in a.into_iter().chain(b) {
        assert_eq!(expect_resolved(outcome).digest, digest);
    }
    let rejected: BTreeSet<String> = wrong.into_iter().map(expect_unavailable).collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(
        rejected
            .iter()
            .all(|r| r.contains("rejected the credentials of pull secret \"pull-wrong\"")),
        "{rejected:?}"
    );
    let requests = new_requests(&registry, before).await;
    println!(
        "3 pull Secrets x 50 concurrent resolves: {} registry requests, {} manifest HEADs",
        requests.len(),
        heads(&requests)
    );
    assert_eq!(
        heads(&requests),
        3,
        "one HEAD per Secret, none shared between them: {requests:?}"
    );
    let mut statuses: Vec<&str> = requests
        .iter()
        .filter(|r| r.starts_with("HEAD "))
        .filter_map(|r| r.rsplit(' ').next())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["200", "200", "401"], "{requests:?}");
    // The bundle is not shared either: each Secret pulled it with its own credentials.
    let manifest_gets = requests
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/manifests/sha256:"))
        .count();
    assert_eq!(manifest_gets, 2, "{requests:?}");
}
