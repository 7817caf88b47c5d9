//! Replicas of every backend (issue 19, "Replicas and load";
//! docs/design/scaling.md#replicas-and-client-side-balancing): two processes each of the
//! contract-resolver, the observer and the evaluator, on 127.0.0.2 and 127.0.0.3 (one port), and
//! a status-writer whose private `/etc/hosts` maps each backend's peers name to both, as cluster
//! DNS maps a headless Service to every ready pod. A backlog of targeted Pactos is created while
//! the status-writer is stopped; it is started, and one replica of each backend is SIGKILLed in
//! the middle of the backlog. Then every Pacto reaches its verdict with its one revision, and no
//! Pacto's status was ever Unknown (every update is watched from before the start): a killed
//! replica costs a call one immediate resend on the other replica, never a verdict.
//!
//! Needs root (`unshare --mount` for the status-writer's `/etc/hosts`): without it the test prints
//! one skip line and passes, except under CI, where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pacto_e2e::{
    Stack, StackOptions, deployment, inline_pacto, replica_name, service_target, target_service,
};
use pacto_runtime::testing::within;
use serde_json::Value;

const BACKENDS: [&str; 3] = ["contract-resolver", "observer", "evaluator"];
/// Pactos in the backlog, spread over [`TARGETS`] target workloads.
const PACTOS: usize = 200;
const TARGETS: usize = 10;
/// Pactos with a verdict when the replicas are killed: well into the backlog, well before its end.
const KILL_AFTER: usize = 20;
/// How long the backlog may take after the kill.
const SETTLE_DEADLINE: Duration = Duration::from_mins(3);

type Watched = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

/// `kubectl get pactos -w`: every update of every Pacto, as its `contractStatus` ("" before the
/// first status).
fn watch_pactos(stack: &Stack) -> (tokio::process::Child, Watched) {
    let watched: Watched = Arc::default();
    let sink = Arc::clone(&watched);
    let child = stack
        .watch_pactos(
            r#"{.metadata.name}{" "}{.status.contractStatus}{"\n"}"#,
            move |fields| {
                let name = fields.first().copied().unwrap_or_default().to_owned();
                let status = fields.get(1).copied().unwrap_or_default().to_owned();
                if !name.is_empty() {
                    sink.lock().unwrap().entry(name).or_default().push(status);
                }
            },
        )
        .expect("starting kubectl get --watch");
    (child, watched)
}

async fn list(stack: &Stack, kind: &str) -> Vec<Value> {
    let json = stack
        .kubectl(&["get", kind, "-n", &stack.namespace, "-o", "json"], None)
        .await
        .unwrap();
    let list: Value = serde_json::from_str(&json).unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The balanced client's endpoints per backend, from the status-writer's metrics.
async fn endpoints(stack: &Stack) -> BTreeMap<String, f64> {
    stack
        .metric_lines("status-writer", "pacto_grpc_client_endpoints")
        .await
        .unwrap()
        .iter()
        .filter_map(|line| {
            let backend = line.split("backend=\"").nth(1)?.split('"').next()?;
            let value = line.rsplit(' ').next()?.parse().ok()?;
            Some((backend.to_owned(), value))
        })
        .collect()
}

/// `text` without ANSI colour sequences (`ESC [ … m`), as a terminal shows it.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Pactos with a status now.
async fn with_verdict(stack: &Stack) -> usize {
    list(stack, "pactos")
        .await
        .iter()
        .filter(|p| p["status"]["contractStatus"].as_str().is_some())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_of_each_backend_killed_mid_backlog_costs_no_pacto_an_unknown() {
    if !pacto_e2e::privileged(
        "`unshare --mount` for the status-writer's /etc/hosts naming every backend replica",
    ) {
        return;
    }
    // No backoff retries of failed calls: only the balancer's immediate resend on the other
    // replica stands between a killed replica and an Unknown.
    let mut stack = Stack::start_with(StackOptions {
        backend_replicas: 2,
        status_writer_args: vec!["--grpc-max-retries=0".into()],
        ..StackOptions::default()
    })
    .await
    .unwrap();

    // The status-writer's system resolver returns both addresses of each peers name (glibc
    // returns every /etc/hosts line of a name since 2.26): two endpoints per backend.
    let want: BTreeMap<String, f64> = BACKENDS.iter().map(|b| ((*b).to_owned(), 2.0)).collect();
    let seen = within(
        "the status-writer to balance over 2 endpoints per backend",
        Duration::from_secs(30),
        || async {
            let got = endpoints(&stack).await;
            if got == want {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        },
    )
    .await;
    if let Err(timeout) = seen {
        panic!("{timeout}\n{}", stack.logs());
    }

    // The backlog, created while the status-writer is stopped and watched from before it starts.
    stack.stop_service("status-writer").unwrap();
    let (_watch, watched) = watch_pactos(&stack);
    let mut yaml = String::new();
    for t in 0..TARGETS {
        let app = format!("app-{t}");
        yaml.push_str(&deployment(&app));
        yaml.push_str("---\n");
        yaml.push_str(&target_service(&app));
        yaml.push_str("---\n");
    }
    let names: Vec<String> = (0..PACTOS).map(|i| format!("p-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let contract =
            format!("pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: 1.0.0\n");
        yaml.push_str(&inline_pacto(
            name,
            &contract,
            Some(&service_target(&format!("app-{}", i % TARGETS))),
        ));
        yaml.push_str("---\n");
    }
    stack.apply(&yaml).await.unwrap();
    for t in 0..TARGETS {
        stack.wait_available(&format!("app-{t}")).await.unwrap();
    }
    let all_watched = within(
        "the watch to list every Pacto",
        Duration::from_secs(30),
        || async {
            let n = watched.lock().unwrap().len();
            if n == PACTOS {
                Ok(())
            } else {
                Err(format!("{n} watched"))
            }
        },
    )
    .await;
    all_watched.unwrap();

    let started = Instant::now();
    stack.restart_service("status-writer").await.unwrap();
    let reached = within(
        &format!("{KILL_AFTER} Pactos to have a verdict"),
        Duration::from_mins(2),
        || async {
            let n = with_verdict(&stack).await;
            if n >= KILL_AFTER {
                Ok(n)
            } else {
                Err(format!("{n} with a verdict"))
            }
        },
    )
    .await;
    // WatchTargets is subscribed on every observer replica (a notification from either one
    // reconciles): the status-writer logs each subscription with its endpoint.
    let observers: Vec<String> = stack
        .services
        .iter()
        .filter(|s| s.name.starts_with("observer"))
        .filter_map(|s| s.grpc.map(|a| format!("endpoint={a}")))
        .collect();
    assert_eq!(observers.len(), 2, "two observer replicas");
    let log = stack.dir.path().join("status-writer.1.log");
    let subscribed = within(
        "a WatchTargets subscription on both observer replicas",
        Duration::from_secs(30),
        || async {
            let text = plain(&std::fs::read_to_string(&log).unwrap_or_default());
            let missing: Vec<&String> = observers
                .iter()
                .filter(|endpoint| {
                    !text.lines().any(|l| {
                        l.contains("subscribed to the observer's WatchTargets")
                            && l.contains(endpoint.as_str())
                    })
                })
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("not subscribed: {missing:?}"))
            }
        },
    )
    .await;
    if let Err(timeout) = subscribed {
        panic!("{timeout}\n{}", stack.logs());
    }
    let before_kill = match reached {
        Ok(n) => n,
        Err(timeout) => panic!("{timeout}\n{}", stack.logs()),
    };
    for backend in BACKENDS {
        stack.stop_service(replica_name(backend, 1)).unwrap();
    }
    let killed_at = started.elapsed();
    println!(
        "replicas: SIGKILLed {:?} {killed_at:?} after the start, with {before_kill}/{PACTOS} Pactos done",
        BACKENDS.map(|b| replica_name(b, 1))
    );
    assert!(
        before_kill < PACTOS,
        "the backlog was done before the kill: raise PACTOS"
    );

    // Every Pacto reaches Compliant with its one revision, and none ever read Unknown.
    let settled = within(
        "every Pacto Compliant with one revision",
        SETTLE_DEADLINE,
        || async {
            let pactos = list(&stack, "pactos").await;
            let revisions = list(&stack, "pactorevisions").await;
            let mut wrong = Vec::new();
            for name in &names {
                let status = pactos
                    .iter()
                    .find(|p| p["metadata"]["name"] == name.as_str())
                    .map(|p| p["status"]["contractStatus"].as_str().unwrap_or_default());
                if status != Some("Compliant") {
                    wrong.push(format!("{name}: {status:?}"));
                }
                let mine: Vec<&Value> = revisions
                    .iter()
                    .filter(|r| r["spec"]["pactoRef"] == name.as_str())
                    .collect();
                if mine.len() != 1 || mine[0]["spec"]["version"] != "1.0.0" {
                    wrong.push(format!("{name}: {} revisions", mine.len()));
                }
            }
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} wrong, e.g. {:?}",
                    wrong.len(),
                    &wrong[..wrong.len().min(5)]
                ))
            }
        },
    )
    .await;
    let settle = started.elapsed();
    if let Err(timeout) = settled {
        panic!("{timeout}\n{}", stack.logs());
    }
    let unknown: Vec<String> = watched
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, statuses)| statuses.iter().any(|s| s == "Unknown"))
        .map(|(name, statuses)| format!("{name}: {statuses:?}"))
        .collect();
    assert!(
        unknown.is_empty(),
        "{} Pactos read Unknown, e.g. {:?}\n{}",
        unknown.len(),
        &unknown[..unknown.len().min(5)],
        stack.logs()
    );
    // The killed replicas were met and ejected (the calls went to the other replica).
    let ejections = stack
        .metric_lines("status-writer", "pacto_grpc_client_ejections_total")
        .await
        .unwrap();
    println!(
        "replicas: {PACTOS} Pactos Compliant {settle:?} after the start, none Unknown; ejections {ejections:?}"
    );
    for backend in BACKENDS {
        assert!(
            ejections
                .iter()
                .any(|l| l.contains(&format!("backend=\"{backend}\""))),
            "no ejection of a {backend} replica: {ejections:?}"
        );
    }
}
