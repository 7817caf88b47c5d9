//! Issue 17 item 8: the API server restarts and every watch expires (`410 Gone`). Nothing a user
//! can see may change because of it: no verdict flips, no event is emitted again, no revision is
//! duplicated; changes made while it was down (a new contract version in the registry) and right
//! after (the missing target created) are picked up. The four services run as processes (see
//! the `pacto-e2e` library).
//!
//! This file holds one test on purpose: the control plane is shared by the tests of one binary,
//! and this test stops it.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pacto_e2e::{
    STATUS_DEADLINE, Stack, StackOptions, deployment, inline_pacto, oci_pacto, target_service,
    times_emitted,
};
use pacto_runtime::testing::eventually;
use serde_json::Value;

const COMPLIANT: &str = "pactoVersion: \"2.0\"\nservice:\n  name: steady\n  version: 1.0.0\n";
const REFERENCE: &str = "pactoVersion: \"2.0\"\nservice:\n  name: reference\n  version: 1.0.0\n";
const BROKEN: &str = "pactoVersion: \"2.0\"\nservice:\n  name: broken\n  version: not-a-version\n";
const LATE: &str = "pactoVersion: \"2.0\"\nservice:\n  name: late\n  version: 1.0.0\n";

fn tracked(version: &str) -> String {
    format!("pactoVersion: \"2.0\"\nservice:\n  name: tracked\n  version: {version}\n")
}

/// Each Pacto's `contractStatus` (missing ones as `-`).
async fn verdicts(stack: &Stack) -> anyhow::Result<BTreeMap<String, String>> {
    let list: Value = serde_json::from_str(
        &stack
            .kubectl(
                &["get", "pactos", "-n", &stack.namespace, "-o", "json"],
                None,
            )
            .await?,
    )?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["status"]["contractStatus"]
                    .as_str()
                    .unwrap_or("-")
                    .to_owned(),
            )
        })
        .collect())
}

/// Every event reason on the Pacto `name` with the number of times it was emitted.
async fn emitted(stack: &Stack, name: &str) -> BTreeMap<String, u64> {
    let events = stack.pacto_events(name, &[]).await.unwrap();
    let mut reasons: Vec<String> = events
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
        .collect();
    reasons.dedup();
    reasons
        .into_iter()
        .map(|r| {
            let n = times_emitted(&events, &r).unwrap();
            (r, n)
        })
        .collect()
}

/// The PactoRevision names of the namespace.
async fn revisions(stack: &Stack) -> Vec<String> {
    let text = stack
        .kubectl(
            &[
                "get",
                "pactorevisions",
                "-n",
                &stack.namespace,
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
            ],
            None,
        )
        .await
        .unwrap();
    let mut names: Vec<String> = text.lines().map(str::to_owned).collect();
    names.sort();
    names
}

/// API server restart with etcd compacted while it was down: every service's watches resume
/// from a resourceVersion etcd no longer has, so each must list again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restart_with_expired_watches_changes_nothing_and_misses_nothing() {
    // New tags are seen within a second of the next check, not after the default 5 min.
    let stack = Stack::start_with(StackOptions {
        resolver_args: vec!["--tags-cache-ttl=1s".into()],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    stack.apply(&deployment("steady")).await.unwrap();
    stack.apply(&target_service("steady")).await.unwrap();
    stack
        .apply(&inline_pacto(
            "steady",
            COMPLIANT,
            Some("serviceName: steady"),
        ))
        .await
        .unwrap();
    stack
        .apply(&inline_pacto("reference", REFERENCE, None))
        .await
        .unwrap();
    stack
        .apply(&inline_pacto("broken", BROKEN, None))
        .await
        .unwrap();
    stack
        .apply(&inline_pacto("late", LATE, Some("serviceName: late")))
        .await
        .unwrap();
    let (repository, _) = stack
        .push_contract("tracked", &tracked("1.0.0"), ":1.0.0")
        .await
        .unwrap();
    stack
        .apply(&oci_pacto("tracked", &repository, None))
        .await
        .unwrap();

    let settled = BTreeMap::from([
        ("broken".to_owned(), "Invalid".to_owned()),
        ("late".to_owned(), "Unknown".to_owned()),
        ("reference".to_owned(), "Reference".to_owned()),
        ("steady".to_owned(), "Compliant".to_owned()),
        ("tracked".to_owned(), "Reference".to_owned()),
    ]);
    eventually("every Pacto at its verdict", STATUS_DEADLINE, || async {
        let now = verdicts(&stack).await.map_err(|e| e.to_string())?;
        if now == settled {
            Ok(())
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;
    // The first RevisionCreated of each resolved contract is recorded before the comparison.
    let names = ["steady", "reference", "broken", "late", "tracked"];
    let before_revisions = eventually("one revision per valid Pacto", STATUS_DEADLINE, || async {
        let r = revisions(&stack).await;
        if r.len() == 4 {
            Ok(r)
        } else {
            Err(format!("{r:?}"))
        }
    })
    .await;
    let mut before_events = BTreeMap::new();
    for name in names {
        before_events.insert(name, emitted(&stack, name).await);
    }

    // Watch the verdicts from the side for the rest of the test: no Pacto may ever read anything
    // but its settled verdict, except `late` (Unknown → Compliant once its target exists) and
    // `tracked` (stays Reference).
    let stop = Arc::new(AtomicBool::new(false));
    let seen = {
        let stop = stop.clone();
        let cp = stack.cp;
        let namespace = stack.namespace.clone();
        tokio::spawn(async move {
            let mut seen: Vec<(String, String)> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let out = tokio::process::Command::from(cp.kubectl().unwrap())
                    .args(["get", "pactos", "-n", &namespace, "--request-timeout=2s"])
                    .args(["-o", "jsonpath={range .items[*]}{.metadata.name}={.status.contractStatus}{\"\\n\"}{end}"])
                    .output()
                    .await;
                if let Ok(out) = out
                    && out.status.success()
                {
                    for line in String::from_utf8_lossy(&out.stdout).lines() {
                        if let Some((n, v)) = line.split_once('=') {
                            let pair = (n.to_owned(), v.to_owned());
                            if !seen.contains(&pair) {
                                seen.push(pair);
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            seen
        })
    };

    // Churn nobody watches moves etcd's revision past every service's last seen
    // resourceVersion; then etcd is compacted while the API server is down.
    for i in 0..20 {
        stack
            .apply(&format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: churn-{i}\n"
            ))
            .await
            .unwrap();
    }
    stack.cp.stop_apiserver();
    let compacted = stack.cp.compact_etcd().await.unwrap();
    // A change made while it is down: a new version in the registry.
    stack
        .push_contract("tracked", &tracked("1.1.0"), ":1.1.0")
        .await
        .unwrap();
    // Long enough for every client to notice (watch streams end, requests fail).
    tokio::time::sleep(Duration::from_secs(5)).await;
    stack
        .cp
        .restart_apiserver(Duration::from_mins(1))
        .await
        .unwrap();
    println!("API server restarted after etcd was compacted at revision {compacted}");

    // A change right after: the missing target appears and is noticed through the re-listed
    // watches (the check interval is 30 s; the deadline stays STATUS_DEADLINE).
    stack.apply(&deployment("late")).await.unwrap();
    stack.apply(&target_service("late")).await.unwrap();
    stack
        .wait_contract_status("late", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    // The new version is found at the next check (unversioned reference, highest tag; the check
    // interval is 30 s).
    let deadline = tokio::time::Instant::now() + Duration::from_mins(2);
    let after_revisions = loop {
        let r = revisions(&stack).await;
        if r.len() == 5 {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the revision of tracked 1.1.0: {r:?}\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    stop.store(true, Ordering::Relaxed);
    let seen = seen.await.unwrap();

    // No revision duplicated, none lost.
    for r in &before_revisions {
        assert!(after_revisions.contains(r), "{r} lost: {after_revisions:?}");
    }
    assert!(
        after_revisions
            .iter()
            .any(|r| r.starts_with("tracked-1-1-0")),
        "{after_revisions:?}"
    );
    // No verdict flipped.
    for (name, verdict) in &seen {
        let allowed = match name.as_str() {
            "late" => verdict == "Unknown" || verdict == "Compliant",
            _ => Some(verdict) == settled.get(name),
        };
        assert!(
            allowed,
            "{name} read {verdict} during the restart: {seen:?}"
        );
    }
    // No event emitted again on the Pactos whose state did not change; `tracked` gained exactly
    // one RevisionCreated (v1.1.0), `late` its recovery and revision.
    for name in ["steady", "reference", "broken"] {
        assert_eq!(
            emitted(&stack, name).await,
            before_events[name],
            "events of {name} changed across the restart"
        );
    }
    let tracked_events = emitted(&stack, "tracked").await;
    let mut want = before_events["tracked"].clone();
    *want.entry("RevisionCreated".into()).or_default() += 1;
    assert_eq!(tracked_events, want, "events of tracked");
    // Evidence that the watches really expired: the services' own logs.
    // (The status-writer usually lists afresh anyway: it loses its lease while the API server is
    // down and restarts its controller when it wins it back.)
    let mut expired = Vec::new();
    for service in &stack.services {
        let log = std::fs::read_to_string(service.process.log_path()).unwrap_or_default();
        let n = log.matches("watch expired (410 Gone)").count();
        expired.push((service.name, n));
    }
    println!("watch expiries (410 Gone) per service: {expired:?}");
    assert!(
        expired.iter().any(|(_, n)| *n > 0),
        "no watch expired: the test did not exercise a re-list ({expired:?})"
    );
}
