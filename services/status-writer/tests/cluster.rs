//! Cluster tier: the status-writer controller against a real kube-apiserver + etcd (CRDs from
//! the chart), with the real evaluator and contract-resolver served in-process over mTLS with
//! certificates generated for the run, and a real docker-registry for the revision mirror. The
//! observer is not started here: targeted Pactos show how a down backend reads (Unknown naming
//! the service).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use pacto_api::conditions::{
    CONTRACT_VALID, READINESS_SATISFIED, RUNTIME_OBSERVED, find_condition,
};
use pacto_api::labels::{LABEL_PACTO, LABEL_VERSION};
use pacto_api::*;
use pacto_runtime::CancellationToken;
use pacto_runtime::testing::{admin_get, promtool_check};
use pacto_status_writer::Trigger;

#[tokio::test]
async fn inline_reference_only_pacto_is_reference_with_a_revision() {
    let h = start(true).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    // An hourly check: only the nudge below can reconcile it again within the test.
    let mut orders = pacto("orders", VALID, None);
    orders.spec.check_interval_seconds = Some(3600);
    api.create(&PostParams::default(), &orders).await.unwrap();
    let (p, s) = wait_status(&api, "orders", ContractStatus::Reference).await;

    let valid = find_condition(&s.conditions, CONTRACT_VALID).unwrap();
    assert_eq!(
        (
            valid.status.as_str(),
            valid.reason.as_str(),
            valid.message.as_str()
        ),
        (
            "True",
            "ReferenceOnly",
            "Reference contract orders v1.2.0 is valid"
        )
    );
    assert_eq!(valid.observed_generation, p.metadata.generation);
    assert!(find_condition(&s.conditions, RUNTIME_OBSERVED).is_none());
    assert!(find_condition(&s.conditions, READINESS_SATISFIED).is_none());
    assert_eq!(s.summary, Some(Summary::default()));
    assert_eq!(s.contract_version.as_deref(), Some("1.2.0"));
    assert_eq!(s.resolution_policy, None, "inline");
    assert_eq!(s.observed_generation, p.metadata.generation);

    // The PactoRevision: name, labels, owner, hash, inline source.
    let revision_name = s.current_revision.clone().expect("currentRevision");
    assert!(
        revision_name.starts_with("orders-1-2-0-"),
        "{revision_name}"
    );
    let revisions: Api<PactoRevision> = Api::namespaced(h.client.clone(), &h.namespace);
    let rev = revisions.get(&revision_name).await.unwrap();
    assert_eq!(rev.labels()[LABEL_PACTO], "orders");
    assert_eq!(rev.labels()[LABEL_VERSION], "1.2.0");
    let owner = &rev.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Pacto", p.uid().unwrap().as_str())
    );
    assert_eq!(rev.spec.source.inline, Some(true));
    let rs = rev.status.clone().unwrap();
    assert!(rs.resolved);
    let hash = rs.contract_hash.unwrap();
    assert_eq!(hash.len(), 64);
    assert!(revision_name.ends_with(&hash[..7]));

    let (kind, message) = wait_event(&h.client, &h.namespace, "orders", "RevisionCreated").await;
    assert_eq!(kind, "Normal");
    assert_eq!(
        message,
        format!("Created revision {revision_name} for contract v1.2.0")
    );

    // Gauges: one-hot Reference.
    let text = h.gauges.render();
    assert!(text.contains(&format!(
        "pacto_contract_status{{name=\"orders\",namespace=\"{}\",status=\"Reference\"}} 1",
        h.namespace
    )));

    // The admin port serves the gauges next to the process metrics, promtool-clean.
    let (code, metrics) = admin_get(h.admin, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        metrics.contains("pacto_status_writer_reconciles_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pacto_contract_status{name=\"orders\""),
        "{metrics}"
    );
    promtool_check(&metrics);
    assert_eq!(admin_get(h.admin, "/readyz").await.0, 200);

    // The annotate nudge re-reconciles (a reconcile the Pacto watch starts); nothing changed,
    // so the status is not rewritten.
    let before = api.get("orders").await.unwrap();
    let (nudges, writes) = (
        h.ctx.triggers.started(Trigger::Pacto),
        h.ctx.status_writes(),
    );
    let nudged = api
        .patch(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"annotations": {"reconcile-requested-at": "now"}}}),
            ),
        )
        .await
        .unwrap();
    eventually(
        "the nudge to be reconciled",
        Duration::from_secs(20),
        || async {
            (h.ctx.triggers.started(Trigger::Pacto) > nudges
                && h.ctx.reconciles() == h.ctx.triggers.started_total())
            .then_some(())
        },
    )
    .await;
    assert_eq!(
        h.ctx.status_writes(),
        writes,
        "no status write when nothing changed"
    );
    let after = api.get("orders").await.unwrap();
    assert_eq!(
        after.resource_version(),
        nudged.resource_version(),
        "no status write"
    );
    assert_eq!(after.status, before.status);

    // Deleting the Pacto removes its series.
    api.delete("orders", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "gauges of the deleted Pacto removed",
        Duration::from_secs(20),
        || async { (!h.gauges.render().contains("name=\"orders\"")).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn invalid_inline_contract_is_invalid_with_contract_invalid_event() {
    let h = start(true).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let bad = "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: not-a-version\n";
    api.create(
        &PostParams::default(),
        &pacto("broken", bad, Some("orders")),
    )
    .await
    .unwrap();
    let (_, s) = wait_status(&api, "broken", ContractStatus::Invalid).await;
    let valid = find_condition(&s.conditions, CONTRACT_VALID).unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "Invalid")
    );
    assert!(find_condition(&s.conditions, RUNTIME_OBSERVED).is_none());
    assert_eq!(s.summary.unwrap().error_count, 1);
    let (kind, message) = wait_event(&h.client, &h.namespace, "broken", "ContractInvalid").await;
    assert_eq!(kind, "Warning");
    assert_eq!(message, valid.message);
}

#[tokio::test]
async fn resolver_down_is_unknown_naming_the_service() {
    let h = start(false).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    api.create(
        &PostParams::default(),
        &pacto("orders", VALID, Some("orders")),
    )
    .await
    .unwrap();
    let (_, s) = wait_status(&api, "orders", ContractStatus::Unknown).await;
    let valid = find_condition(&s.conditions, CONTRACT_VALID).unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("Unknown", "Unavailable")
    );
    assert!(
        valid.message.starts_with("contract-resolver unavailable: "),
        "{}",
        valid.message
    );
    assert_eq!(s.validation, None);
    let (kind, message) =
        wait_event(&h.client, &h.namespace, "orders", "ContractUnavailable").await;
    assert_eq!(kind, "Warning");
    assert_eq!(message, valid.message);
}

#[tokio::test]
async fn observer_down_is_a_failed_observation_naming_the_service() {
    let h = start(true).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    api.create(
        &PostParams::default(),
        &pacto("orders", VALID, Some("orders")),
    )
    .await
    .unwrap();
    let (_, s) = wait_status(&api, "orders", ContractStatus::Unknown).await;
    let valid = find_condition(&s.conditions, CONTRACT_VALID).unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("True", "Parsed")
    );
    let observed = find_condition(&s.conditions, RUNTIME_OBSERVED).unwrap();
    assert_eq!(
        (observed.status.as_str(), observed.reason.as_str()),
        ("False", "ObservationFailed")
    );
    assert!(
        observed.message.starts_with("observer unavailable: "),
        "{}",
        observed.message
    );
    let (_, message) = wait_event(&h.client, &h.namespace, "orders", "ValidationFailed").await;
    assert_eq!(message, "ContractStatus: Unknown, 0 errors, 0 warnings");
}

#[tokio::test]
async fn only_the_lease_holder_works_and_a_successor_takes_over() {
    use pacto_status_writer::{LeaseConfig, run_elected};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let namespace = cp.create_namespace("lease").await.unwrap();
    let active = Arc::new(AtomicUsize::new(0));
    let max_active = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let contender = |identity: &str| {
        let config = LeaseConfig {
            name: "pacto-status-writer".into(),
            namespace: namespace.clone(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(300),
        };
        let shutdown = CancellationToken::new();
        let (active, max_active, started) = (
            Arc::clone(&active),
            Arc::clone(&max_active),
            Arc::clone(&started),
        );
        let id = identity.to_owned();
        let task = tokio::spawn(run_elected(
            client.clone(),
            config,
            shutdown.clone(),
            move |token| {
                let (active, max_active, started, id) = (
                    Arc::clone(&active),
                    Arc::clone(&max_active),
                    Arc::clone(&started),
                    id.clone(),
                );
                async move {
                    let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                    max_active.fetch_max(now, Ordering::SeqCst);
                    started.lock().unwrap().push(id);
                    token.cancelled().await;
                    active.fetch_sub(1, Ordering::SeqCst);
                }
            },
        ));
        (shutdown, task)
    };
    let (stop_a, task_a) = contender("replica-a");
    let (stop_b, task_b) = contender("replica-b");
    let first = eventually("a leader", Duration::from_secs(10), || async {
        started.lock().unwrap().first().cloned()
    })
    .await;
    // Several renew periods with both contending: still one holder.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), &namespace);
    eventually("several renewals", Duration::from_secs(10), || async {
        let lease = leases.get("pacto-status-writer").await.ok()?;
        let spec = lease.spec?;
        let renewed = spec.renew_time?.0;
        let acquired = spec.acquire_time?.0;
        (renewed.duration_since(acquired).as_secs() >= 1).then_some(())
    })
    .await;
    assert_eq!(max_active.load(Ordering::SeqCst), 1);
    assert_eq!(started.lock().unwrap().len(), 1);

    // The holder stops (and releases): the other takes over.
    let (stop_first, task_first, stop_other, task_other) = if first == "replica-a" {
        (stop_a, task_a, stop_b, task_b)
    } else {
        (stop_b, task_b, stop_a, task_a)
    };
    stop_first.cancel();
    task_first.await.unwrap();
    let second = eventually("a successor", Duration::from_secs(10), || async {
        started.lock().unwrap().get(1).cloned()
    })
    .await;
    assert_ne!(second, first);
    assert_eq!(max_active.load(Ordering::SeqCst), 1);
    stop_other.cancel();
    task_other.await.unwrap();
}

/// The Lease of the skew tests: 3 s, renewed every 300 ms.
fn skew_lease_config(namespace: &str) -> pacto_status_writer::LeaseConfig {
    pacto_status_writer::LeaseConfig {
        name: "pacto-status-writer".into(),
        namespace: namespace.to_owned(),
        identity: "replica-a".into(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
    }
}

/// A replica on a node whose wall clock is `skew` off: it creates the Lease as
/// `skewed-holder` and, until `stop`, renews it every 300 ms with its own clock's time (a
/// read, then a replace with the resourceVersion read, as a real holder does). Returns the local
/// instant of its last renewal; panics if anyone else took the Lease meanwhile.
async fn skewed_holder(
    leases: Api<k8s_openapi::api::coordination::v1::Lease>,
    skew: k8s_openapi::jiff::SignedDuration,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<std::time::Instant> {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::Timestamp;
    let now = MicroTime(Timestamp::now() + skew);
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("pacto-status-writer".into()),
            ..kube::api::ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("skewed-holder".into()),
            lease_duration_seconds: Some(3),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(1),
            ..LeaseSpec::default()
        }),
    };
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let created = std::time::Instant::now();
    tokio::spawn(async move {
        let mut last = created;
        loop {
            tokio::select! {
                () = stop.cancelled() => return last,
                () = tokio::time::sleep(Duration::from_millis(300)) => {}
            }
            let mut lease = leases.get("pacto-status-writer").await.unwrap();
            let spec = lease.spec.get_or_insert_default();
            assert_eq!(
                spec.holder_identity.as_deref(),
                Some("skewed-holder"),
                "the Lease was taken while its holder kept renewing it"
            );
            spec.renew_time = Some(MicroTime(Timestamp::now() + skew));
            leases
                .replace("pacto-status-writer", &PostParams::default(), &lease)
                .await
                .expect("a renewal of the skewed holder (a 409: someone else wrote the Lease)");
            last = std::time::Instant::now();
        }
    })
}

/// Runs `replica-a` as a candidate for the Lease of [`skew_lease_config`]; the instant its
/// term started, once it has.
fn candidate(
    client: &kube::Client,
    namespace: &str,
    shutdown: &CancellationToken,
) -> (
    Arc<std::sync::Mutex<Option<std::time::Instant>>>,
    tokio::task::JoinHandle<()>,
) {
    let started = Arc::new(std::sync::Mutex::new(None));
    let record = Arc::clone(&started);
    let task = tokio::spawn(pacto_status_writer::run_elected(
        client.clone(),
        skew_lease_config(namespace),
        shutdown.clone(),
        move |token| {
            let record = Arc::clone(&record);
            async move {
                record
                    .lock()
                    .unwrap()
                    .get_or_insert_with(std::time::Instant::now);
                token.cancelled().await;
            }
        },
    ));
    (started, task)
}

#[tokio::test]
async fn a_live_holder_whose_clock_lags_by_more_than_the_lease_keeps_it() {
    // The holder's renewTime is an hour behind this replica's clock: compared with the local
    // wall clock, the Lease would always look expired, and both would write. Judged by when the
    // record last changed, as observed here, it is held as long as it is renewed.
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let namespace = cp.create_namespace("lease-lag").await.unwrap();
    let leases = Api::namespaced(client.clone(), &namespace);
    let stop_holder = CancellationToken::new();
    let holder = skewed_holder(
        leases.clone(),
        k8s_openapi::jiff::SignedDuration::from_hours(-1),
        stop_holder.clone(),
    )
    .await;
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let (started, task) = candidate(&client, &namespace, &shutdown);
    let lease = skew_lease_config(&namespace).lease_duration;
    // Three lease durations of renewals: the candidate never takes over.
    tokio::time::sleep(lease * 3).await;
    assert_eq!(
        *started.lock().unwrap(),
        None,
        "took a Lease its holder renewed every 300 ms (renewTime 1 h behind)"
    );
    // The holder stops: the candidate takes over once the record has not changed for the lease
    // duration by its own clock, and not before.
    stop_holder.cancel();
    let last_renewal = holder.await.unwrap();
    let took = eventually("the takeover", Duration::from_secs(10), || async {
        *started.lock().unwrap()
    })
    .await;
    let after = took.duration_since(last_renewal);
    assert!(
        after + Duration::from_millis(100) >= lease && after <= lease + Duration::from_secs(2),
        "took the Lease {after:?} after the holder's last renewal (lease {lease:?})"
    );
    let spec = leases
        .get("pacto-status-writer")
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-a"));
    assert_eq!(spec.lease_transitions, Some(2));
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_dead_holder_whose_clock_ran_ahead_is_replaced_after_one_lease_duration() {
    // The holder wrote a renewTime an hour ahead of this replica's clock, then died: compared
    // with the local wall clock, its Lease would look valid for an hour. Unchanged for the lease
    // duration as observed here, it has expired.
    let cp = cluster().await;
    let client = cp.client().unwrap();
    let namespace = cp.create_namespace("lease-ahead").await.unwrap();
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), &namespace);
    let stop_holder = CancellationToken::new();
    let holder = skewed_holder(
        leases.clone(),
        k8s_openapi::jiff::SignedDuration::from_hours(1),
        stop_holder.clone(),
    )
    .await;
    stop_holder.cancel();
    let last_renewal = holder.await.unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let first_look = std::time::Instant::now();
    let (started, task) = candidate(&client, &namespace, &shutdown);
    let lease = skew_lease_config(&namespace).lease_duration;
    let took = eventually("the takeover", Duration::from_secs(10), || async {
        *started.lock().unwrap()
    })
    .await;
    // A candidate that first sees a record waits the lease duration from that sight.
    assert!(
        took.duration_since(first_look) >= lease && took.duration_since(last_renewal) >= lease,
        "took the Lease {:?} after first seeing it (lease {lease:?})",
        took.duration_since(first_look)
    );
    let spec = leases
        .get("pacto-status-writer")
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-a"));
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn force_pushed_tag_raises_tag_overwritten_once() {
    use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
    use pacto_contract::reference::Reference;
    let registry = pacto_testenv::registry::Registry::start().expect("docker-registry");
    let push = |note: &'static str| {
        let registry_host = registry.host();
        async move {
            let yaml = format!(
                "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.0.0\nmetadata:\n  note: {note}\n"
            );
            let mut files = BundleFiles::new();
            files.insert(CONTRACT_FILE, yaml.into_bytes());
            let client = pacto_oci::RegistryClient::new(
                pacto_oci::ClientOptions {
                    insecure_registries: vec![registry_host.clone()],
                    ..pacto_oci::ClientOptions::default()
                },
                &pacto_oci::Credentials::Anonymous,
            )
            .unwrap();
            let reference = Reference::parse(&format!("{registry_host}/orders:1.0.0")).unwrap();
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
    };
    let first = push("a").await;
    let h = start_with(true, vec![registry.host()], Duration::from_millis(300)).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let mut p = pacto("orders", "", None);
    p.spec.contract_ref = ContractRef {
        oci: Some(format!("oci://{}/orders:1.0.0", registry.host())),
        ..ContractRef::default()
    };
    api.create(&PostParams::default(), &p).await.unwrap();
    let (_, s) = wait_status(&api, "orders", ContractStatus::Reference).await;
    assert_eq!(s.resolution_policy, Some(ResolutionPolicy::PinnedTag));
    let old_revision = s.current_revision.clone().unwrap();
    let revisions: Api<PactoRevision> = Api::namespaced(h.client.clone(), &h.namespace);
    let rev = revisions.get(&old_revision).await.unwrap();
    assert_eq!(rev.spec.source.digest.as_deref(), Some(first.as_str()));

    let second = push("b").await;
    assert_ne!(first, second);
    let (kind, message) = wait_event(&h.client, &h.namespace, "orders", "TagOverwritten").await;
    assert_eq!(kind, "Warning");
    assert_eq!(
        message,
        format!(
            "Tag 1.0.0 was force-pushed (digest changed from {} to {})",
            &first[..12],
            &second[..12]
        )
    );
    eventually(
        "observedDigest recorded",
        Duration::from_secs(10),
        || async {
            let rev = revisions.get(&old_revision).await.ok()?;
            (rev.status?.observed_digest.as_deref() == Some(second.as_str())).then_some(())
        },
    )
    .await;
    // A revision for the new content exists (created by the mirror or the reconcile).
    eventually(
        "a revision for the new content",
        Duration::from_secs(20),
        || async {
            let list = revisions.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|r| r.spec.source.digest.as_deref() == Some(second.as_str()))
                .then_some(())
        },
    )
    .await;
    // Once per change: further passes raise nothing new.
    let passes = h.ctx.mirror_passes();
    eventually(
        "three more mirror passes",
        Duration::from_secs(20),
        || async { (h.ctx.mirror_passes() >= passes + 3).then_some(()) },
    )
    .await;
    let overwritten = times_recorded(&h.client, &h.namespace, "orders", "TagOverwritten").await;
    assert_eq!(overwritten, 1);
}

#[tokio::test]
async fn targeted_pacto_unknown_until_its_target_exists_then_compliant() {
    let h = start_with_observer().await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let contract =
        "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.2.0\nworkload: service\n";
    // A check interval far beyond the test: no timer requeue can produce the Compliant below.
    let mut orders = pacto("orders", contract, Some("orders"));
    orders.spec.check_interval_seconds = Some(3600);
    api.create(&PostParams::default(), &orders).await.unwrap();
    // The target does not exist yet: Unknown (never NotEvaluated), observation itself fine.
    let (_, s) = wait_status(&api, "orders", ContractStatus::Unknown).await;
    let observed = find_condition(&s.conditions, RUNTIME_OBSERVED).unwrap();
    assert_eq!(
        (
            observed.status.as_str(),
            observed.reason.as_str(),
            observed.message.as_str()
        ),
        ("True", "Found", "Runtime evidence collected successfully")
    );
    assert_eq!(
        find_condition(&s.conditions, CONTRACT_VALID)
            .unwrap()
            .reason,
        "Parsed"
    );
    assert!(s.evaluation_coverage.is_some());
    assert!(!s.findings.is_empty(), "{s:?}");
    assert!(
        s.findings.iter().all(|f| f.severity == Severity::Unknown),
        "{:?}",
        s.findings
    );
    let (_, message) = wait_event(&h.client, &h.namespace, "orders", "ValidationFailed").await;
    assert!(
        message.starts_with("ContractStatus: Unknown, 0 errors"),
        "{message}"
    );

    // The Deployment appears: the observer's WatchTargets notification re-observes at once
    // (the next check is an hour away).
    // Before the target appears, the reconcile that the revision's creation triggers has run
    // and no reconcile is in flight: otherwise that one could observe the new target first
    // and write Compliant before the notification's reconcile (a race, not a cause).
    wait_revision_reconciled_and_idle(&h).await;
    let notified = h.ctx.triggers.started(Trigger::WatchTargets);
    create_orders_target(&h.client, &h.namespace).await;
    let (_, s) = wait_status(&api, "orders", ContractStatus::Compliant).await;
    // The cause, not the timing: reconciles started by WatchTargets notifications, and the
    // one that wrote Compliant was one of them.
    assert!(
        h.ctx.triggers.started(Trigger::WatchTargets) > notified,
        "no reconcile was triggered by WatchTargets"
    );
    assert_eq!(
        h.ctx.triggers.last_write(&h.namespace, "orders"),
        Some(Trigger::WatchTargets),
        "the Compliant status was written by a reconcile WatchTargets did not trigger"
    );
    assert!(s.findings.is_empty(), "{:?}", s.findings);
    assert_eq!(
        s.observed_runtime
            .as_ref()
            .and_then(|r| r.workload_kind.as_deref()),
        Some("Deployment")
    );
    let (kind, message) = wait_event(&h.client, &h.namespace, "orders", "ContractRecovered").await;
    assert_eq!(kind, "Normal");
    assert_eq!(message, "ContractStatus: Compliant, 0 errors, 0 warnings");
}

#[tokio::test]
async fn workload_mismatch_is_non_compliant_at_once_with_counts() {
    let h = start_with_observer().await;
    create_batch_deployment(&h.client, &h.namespace).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let contract =
        "pactoVersion: \"2.0\"\nservice:\n  name: batch\n  version: 2.0.0\nworkload: job\n";
    let mut p = pacto("batch", contract, None);
    p.spec.target = Some(TargetRef {
        workload_ref: Some(WorkloadRef {
            name: "batch".into(),
            kind: Some(WorkloadKind::Deployment),
        }),
        ..TargetRef::default()
    });
    api.create(&PostParams::default(), &p).await.unwrap();
    let (_, s) = wait_status(&api, "batch", ContractStatus::NonCompliant).await;
    assert_eq!(s.findings.len(), 1, "{:?}", s.findings);
    assert_eq!(s.findings[0].code, "WORKLOAD_MISMATCH");
    assert_eq!(s.findings[0].severity, Severity::Error);
    assert_eq!(s.summary.unwrap().error_count, 1);
    let (kind, message) = wait_event(&h.client, &h.namespace, "batch", "ValidationFailed").await;
    assert_eq!(kind, "Warning");
    assert_eq!(
        message,
        "ContractStatus: NonCompliant, 1 errors, 0 warnings"
    );
}

#[tokio::test]
async fn max_concurrent_reconciles_bounds_the_reconciles_running_at_once() {
    // One at a time: a backlog of Pactos waits in the queue instead of running together.
    let h = start_concurrent(true, Vec::new(), Duration::from_mins(5), false, Some(1)).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let names: Vec<String> = (0..12).map(|i| format!("orders-{i}")).collect();
    futures::future::join_all(names.iter().map(|name| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &pacto(name, VALID, None))
                .await
                .unwrap();
        }
    }))
    .await;
    for name in &names {
        wait_status(&api, name, ContractStatus::Reference).await;
    }
    assert!(h.ctx.reconciles() >= 12);
    assert_eq!(h.ctx.most_in_flight(), 1);
}

/// A target change made while the status-writer is not subscribed to WatchTargets (the observer
/// not Ready yet, or restarting) was announced to nobody: after it subscribes again, every Pacto
/// is reconciled once, so the change is seen at once and not at the next check an hour away.
#[tokio::test]
async fn a_change_made_while_the_observer_was_down_is_seen_when_it_is_back() {
    let h = start_with_observer().await;
    let observer = h.observer.as_ref().unwrap();
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let contract =
        "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.2.0\nworkload: service\n";
    let mut orders = pacto("orders", contract, Some("orders"));
    orders.spec.check_interval_seconds = Some(3600);
    api.create(&PostParams::default(), &orders).await.unwrap();
    // No target yet: Unknown, observed (the observer answered).
    let (_, s) = wait_status(&api, "orders", ContractStatus::Unknown).await;
    assert_eq!(
        find_condition(&s.conditions, RUNTIME_OBSERVED)
            .unwrap()
            .reason,
        "Found"
    );
    wait_revision_reconciled_and_idle(&h).await;

    // The observer goes away; the target appears meanwhile (nobody is told).
    observer.stop().await;
    let reconciles = h.ctx.triggers.started_total();
    create_orders_target(&h.client, &h.namespace).await;
    assert_eq!(
        h.ctx.triggers.started_total(),
        reconciles,
        "nothing reconciles while the observer is down"
    );

    // The observer is back: the status-writer subscribes again and re-reconciles.
    observer.start(&h.shutdown).await;
    let (_, s) = wait_status(&api, "orders", ContractStatus::Compliant).await;
    assert!(s.findings.is_empty(), "{:?}", s.findings);
    assert_eq!(
        h.ctx.triggers.last_write(&h.namespace, "orders"),
        Some(Trigger::WatchTargets),
        "the Compliant status was written by a reconcile the resubscription did not trigger"
    );
}

/// Waits until the reconcile that the revision's creation triggers has run and no reconcile is
/// in flight, so that what the test changes next is seen by a reconcile it causes.
async fn wait_revision_reconciled_and_idle(h: &Harness) {
    eventually(
        "the revision's reconcile to finish and none to be in flight",
        Duration::from_secs(30),
        || async {
            let started = h.ctx.triggers.started_total();
            if h.ctx.triggers.started(Trigger::Revision) >= 1 && h.ctx.reconciles() == started {
                Ok(())
            } else {
                Err(format!(
                    "started {started} (revision {}), finished {}",
                    h.ctx.triggers.started(Trigger::Revision),
                    h.ctx.reconciles()
                ))
            }
        },
    )
    .await;
}

// ---- The crash windows of a pass (docs/design/status.md#exactly-once-events) ----
//
// A status-writer killed between publishing an event and writing the status must not make the
// next pass publish it again; one killed between creating a revision and reporting it must not
// lose the report. The windows are held open with real admission: ValidatingAdmissionPolicies
// that refuse the Pacto's status writes (while it carries a label) or the RevisionCreated
// events of the namespace, so each pass in between is a replay of the pass that "crashed".

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Event as CoreEvent;
use kube::api::DeleteParams;

/// The label that makes the API server refuse a Pacto's status writes (its value names the
/// test, so that two tests' policies do not meet).
const BLOCK_STATUS: &str = "pacto-test/block-status";

/// A policy `name` refusing what `resources`/`operations` match when `expression` is false,
/// bound (Deny) to every namespace, optionally only to objects labelled `label` (key, value).
async fn refuse(
    client: &kube::Client,
    name: &str,
    resources: serde_json::Value,
    expression: &str,
    label: Option<(&str, &str)>,
) {
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [resources]},
            "validations": [{"expression": expression, "message": format!("refused by test policy {name}")}],
        },
    }))
    .unwrap();
    let mut binding = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    });
    if let Some((key, value)) = label {
        binding["spec"]["matchResources"] =
            serde_json::json!({"objectSelector": {"matchLabels": {key: value}}});
    }
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(binding).unwrap();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    policies
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

async fn unrefuse(client: &kube::Client, name: &str) {
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    bindings
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    policies
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// Refuses status writes of Pactos labelled [`BLOCK_STATUS`] = `value`, and waits (deadline)
/// until the API server enforces it, probing with a dry-run status write of such a Pacto in a
/// namespace no status-writer watches.
async fn refuse_labelled_status_writes(client: &kube::Client, policy: &str, value: &str) {
    refuse(
        client,
        policy,
        serde_json::json!({"apiGroups": ["pacto.trianalab.io"], "apiVersions": ["*"],
            "operations": ["UPDATE"], "resources": ["pactos/status"]}),
        "false",
        Some((BLOCK_STATUS, value)),
    )
    .await;
    let probe_ns = cluster().await.create_namespace("probe").await.unwrap();
    let probes: Api<Pacto> = Api::namespaced(client.clone(), &probe_ns);
    let mut probe = pacto("probe", VALID, None);
    probe
        .labels_mut()
        .insert(BLOCK_STATUS.to_owned(), value.to_owned());
    probes.create(&PostParams::default(), &probe).await.unwrap();
    eventually(
        "the status-write refusal to be enforced",
        Duration::from_secs(30),
        || async {
            let patch = Patch::Merge(serde_json::json!({"status": {"contractStatus": "Unknown"}}));
            let params = PatchParams {
                dry_run: true,
                ..PatchParams::default()
            };
            match probes.patch_status("probe", &params, &patch).await {
                Err(kube::Error::Api(status)) if status.message.contains(policy) => Ok(()),
                other => Err(format!("probe write: {other:?}")),
            }
        },
    )
    .await;
}

/// Whether a dry-run `RevisionCreated` event in `ns` is refused by policy `policy`.
async fn revision_events_refused(client: &kube::Client, ns: &str, policy: &str) -> bool {
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), ns);
    let probe: CoreEvent = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "probe.0", "namespace": ns},
        "involvedObject": {"kind": "Pacto", "name": "probe", "namespace": ns},
        "reason": "RevisionCreated", "message": "probe", "type": "Normal",
        "source": {"component": "test"},
    }))
    .unwrap();
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match events.create(&params, &probe).await {
        Err(kube::Error::Api(status)) => status.message.contains(policy),
        _ => false,
    }
}

/// Removes label [`BLOCK_STATUS`] from Pacto `name` (which also starts a pass).
async fn unblock_status(api: &Api<Pacto>, name: &str) {
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {BLOCK_STATUS: null}}}));
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_transition_event_is_published_before_the_status_and_never_twice() {
    let h = start(true).await;
    let policy = format!("block-status-{}", h.namespace);
    refuse_labelled_status_writes(&h.client, &policy, &h.namespace).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let bad = "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: not-a-version\n";
    let mut broken = pacto("broken", bad, Some("orders"));
    broken
        .labels_mut()
        .insert(BLOCK_STATUS.to_owned(), h.namespace.clone());
    api.create(&PostParams::default(), &broken).await.unwrap();

    // The event is out although no status could be written: what a pass killed right before
    // its status write leaves behind.
    wait_event(&h.client, &h.namespace, "broken", "ContractInvalid").await;
    // Every later pass (the backoff retries of the refused write; after a crash, the restarted
    // writer's first pass) starts from the same persisted status: a replay, not a recurrence.
    let passes = h.ctx.reconciles();
    eventually(
        "two more passes over the refused write",
        Duration::from_secs(40),
        || async { (h.ctx.reconciles() >= passes + 2).then_some(()) },
    )
    .await;
    assert!(api.get("broken").await.unwrap().status.is_none());
    assert_eq!(
        times_recorded(&h.client, &h.namespace, "broken", "ContractInvalid").await,
        1
    );

    // The write lands: still one event.
    unblock_status(&api, "broken").await;
    wait_status(&api, "broken", ContractStatus::Invalid).await;
    let writes = h.ctx.status_writes();
    api.patch(
        "broken",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"nudge": "1"}}})),
    )
    .await
    .unwrap();
    eventually(
        "the nudge to be reconciled",
        Duration::from_secs(20),
        || async { (h.ctx.reconciles() > passes + 3).then_some(()) },
    )
    .await;
    assert_eq!(h.ctx.status_writes(), writes, "nothing changed");
    assert_eq!(
        times_recorded(&h.client, &h.namespace, "broken", "ContractInvalid").await,
        1
    );
    // The events counter counted the one occurrence, not the replays.
    let (_, metrics) = admin_get(h.admin, "/metrics").await;
    let counted: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("pacto_status_writer_events_total{")
                && l.contains(&format!("namespace=\"{}\"", h.namespace))
                && l.contains("reason=\"ContractInvalid\"")
        })
        .collect();
    assert_eq!(counted.len(), 1, "{metrics}");
    assert!(counted[0].ends_with(" 1"), "{}", counted[0]);
    unrefuse(&h.client, &policy).await;
}

#[tokio::test]
async fn a_revision_whose_report_was_lost_is_reported_by_the_next_pass_once() {
    let h = start(true).await;
    let status_policy = format!("block-status-rev-{}", h.namespace);
    refuse_labelled_status_writes(&h.client, &status_policy, &h.namespace).await;
    let events_policy = format!("block-revision-events-{}", h.namespace);
    refuse(
        &h.client,
        &events_policy,
        serde_json::json!({"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["events"]}),
        &format!(
            "!(object.reason == 'RevisionCreated' && object.involvedObject.namespace == '{}')",
            h.namespace
        ),
        None,
    )
    .await;
    eventually(
        "the RevisionCreated refusal to be enforced",
        Duration::from_secs(30),
        || async {
            revision_events_refused(&h.client, &h.namespace, &events_policy)
                .await
                .then_some(())
        },
    )
    .await;

    // A pass creates the revision, its report is refused (lost, as if the writer died right
    // after the create), and so is its status write.
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let mut orders = pacto("orders", VALID, None);
    orders
        .labels_mut()
        .insert(BLOCK_STATUS.to_owned(), h.namespace.clone());
    // The refused status writes back off (5 s doubling) up to the check interval: the shortest
    // allowed keeps the passes this test waits for within a minute.
    orders.spec.check_interval_seconds = Some(pacto_api::MIN_CHECK_INTERVAL_SECONDS);
    api.create(&PostParams::default(), &orders).await.unwrap();
    let revisions: Api<PactoRevision> = Api::namespaced(h.client.clone(), &h.namespace);
    let revision = eventually("the revision", Duration::from_secs(30), || async {
        let listed = revisions.list(&ListParams::default()).await.unwrap().items;
        listed.into_iter().next().ok_or("no revision yet")
    })
    .await;
    assert_eq!(
        times_recorded(&h.client, &h.namespace, "orders", "RevisionCreated").await,
        0
    );

    // Events are accepted again; the passes that follow find a revision no status write has
    // acknowledged and report it, once, however many of them there are.
    unrefuse(&h.client, &events_policy).await;
    eventually(
        "the RevisionCreated refusal to be lifted",
        Duration::from_secs(30),
        || async {
            (!revision_events_refused(&h.client, &h.namespace, &events_policy).await).then_some(())
        },
    )
    .await;
    let (_, message) = wait_event(&h.client, &h.namespace, "orders", "RevisionCreated").await;
    assert!(message.contains(&revision.name_any()), "{message}");
    let passes = h.ctx.reconciles();
    // Two passes at most one check interval (30 s) apart each, plus slack.
    eventually(
        "two more passes over the refused status write",
        Duration::from_secs(90),
        || async { (h.ctx.reconciles() >= passes + 2).then_some(()) },
    )
    .await;
    unblock_status(&api, "orders").await;
    let (_, status) = wait_status(&api, "orders", ContractStatus::Reference).await;
    assert_eq!(status.current_revision, Some(revision.name_any()));
    assert_eq!(
        times_recorded(&h.client, &h.namespace, "orders", "RevisionCreated").await,
        1
    );
    unrefuse(&h.client, &status_policy).await;
}

// ---- Namespace scope (docs/design/architecture.md#namespace-scope) ----

/// Waits (deadline) for `passes` more reconciles than `since`, then checks that Pacto `name`
/// has no status and no events: it was seen and left alone.
async fn left_alone(h: &Harness, api: &Api<Pacto>, name: &str, since: u64) {
    eventually("the Pacto to be seen", Duration::from_secs(30), || async {
        (h.ctx.reconciles() > since).then_some(())
    })
    .await;
    assert!(api.get(name).await.unwrap().status.is_none());
    assert!(events_of(&h.client, &h.namespace, name).await.is_empty());
}

#[tokio::test]
async fn a_namespace_selector_decides_which_pactos_are_reconciled() {
    use k8s_openapi::api::core::v1::Namespace;
    use pacto_runtime::scope::NamespaceScope;

    let label = "pacto-test/audit";
    let h =
        start_scoped(|ns| NamespaceScope::new(Some(&format!("{label}={ns}")), []).unwrap()).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let before = h.ctx.reconciles();
    api.create(&PostParams::default(), &pacto("orders", VALID, None))
        .await
        .unwrap();
    left_alone(&h, &api, "orders", before).await;

    // The namespace gets the label: its Pactos are reconciled without being touched.
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    let label_it = |value: serde_json::Value| {
        Patch::Merge(serde_json::json!({"metadata": {"labels": {label: value}}}))
    };
    namespaces
        .patch(
            &h.namespace,
            &PatchParams::default(),
            &label_it(h.namespace.clone().into()),
        )
        .await
        .unwrap();
    let (_, written) = wait_status(&api, "orders", ContractStatus::Reference).await;
    eventually("its gauges", Duration::from_secs(20), || async {
        h.gauges.render().contains("name=\"orders\"").then_some(())
    })
    .await;

    // The label goes: the next pass leaves the Pacto as it was and drops its gauges.
    namespaces
        .patch(
            &h.namespace,
            &PatchParams::default(),
            &label_it(serde_json::Value::Null),
        )
        .await
        .unwrap();
    let writes = h.ctx.status_writes();
    eventually(
        "the Pacto to be dropped from the gauges",
        Duration::from_secs(30),
        || async {
            // A nudge starts a pass, which finds the namespace out of scope.
            api.patch(
                "orders",
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                    "nudge": h.ctx.reconciles().to_string()
                }}})),
            )
            .await
            .map_err(|e| e.to_string())?;
            (!h.gauges.render().contains("name=\"orders\""))
                .then_some(())
                .ok_or_else(|| "still in the gauges".to_owned())
        },
    )
    .await;
    assert_eq!(h.ctx.status_writes(), writes);
    assert_eq!(api.get("orders").await.unwrap().status, Some(written));
}

#[tokio::test]
async fn an_excluded_namespace_is_never_reconciled() {
    use pacto_runtime::scope::NamespaceScope;

    let h = start_scoped(|ns| NamespaceScope::new(None, [ns.to_owned()]).unwrap()).await;
    let api: Api<Pacto> = Api::namespaced(h.client.clone(), &h.namespace);
    let before = h.ctx.reconciles();
    api.create(&PostParams::default(), &pacto("orders", VALID, None))
        .await
        .unwrap();
    left_alone(&h, &api, "orders", before).await;
    assert_eq!(h.ctx.status_writes(), 0);
}
