//! The troubleshooting guide's "Reading the events" as Kubernetes event semantics, read with
//! `kubectl get events` and `kubectl describe pacto`: the same reason and message recurring on
//! a Pacto after a recovery is ONE event whose `count` grows (`(x2 over …)`), with
//! `firstTimestamp` and `lastTimestamp` set, also across a status-writer restart; a second
//! `RevisionCreated` for another revision is its own event; `--sort-by=.lastTimestamp` orders
//! them. The four services run as processes (see the `pacto-e2e` library).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use pacto_e2e::{STATUS_DEADLINE, Stack, inline_pacto};
use pacto_runtime::testing::eventually;
use serde_json::Value;

/// The Event objects with `reason`.
fn with_reason<'a>(events: &'a [Value], reason: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["reason"] == reason).collect()
}

/// A one-line summary of each event, for failure messages.
fn summary(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} count={} first={} last={} {:?}",
                e["type"],
                e["reason"],
                e["count"],
                e["firstTimestamp"],
                e["lastTimestamp"],
                e["message"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls the Pacto's events until `check` holds; returns them.
async fn wait_events(
    stack: &Stack,
    name: &str,
    what: &str,
    check: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    eventually(
        &format!("events of {name}: {what}"),
        STATUS_DEADLINE,
        || async {
            let events = stack.pacto_events(name, &[]).await.unwrap();
            if check(&events) {
                Ok(events)
            } else {
                Err(summary(&events))
            }
        },
    )
    .await
}

/// An RFC 3339 time field.
fn time(value: &Value) -> Timestamp {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a time: {value}"))
        .parse()
        .unwrap()
}

/// Waits until the wall clock is at least one second past `at` (event and condition times have
/// one-second granularity: only then does a later write carry a later time).
async fn wait_clock_past(at: Timestamp) {
    let target = at + SignedDuration::from_secs(1);
    eventually(
        &format!("the clock to pass the API server's {at} (it is far behind)"),
        Duration::from_secs(5),
        || std::future::ready(Timestamp::now() >= target),
    )
    .await;
}

/// The latest of the ContractValid condition's lastTransitionTime and the events'
/// lastTimestamp: what a later change must be one second past to sort after.
fn latest(pacto: &Value, events: &[Value]) -> Timestamp {
    let condition = pacto["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "ContractValid"))
        .cloned()
        .unwrap_or_else(|| panic!("no ContractValid: {pacto}"));
    events
        .iter()
        .filter(|e| e["lastTimestamp"].is_string())
        .map(|e| time(&e["lastTimestamp"]))
        .fold(time(&condition["lastTransitionTime"]), Timestamp::max)
}

const BROKEN: &str = "pactoVersion: \"2.0\"\nservice:\n  name: ledger\n  version: not-a-version\n";

fn valid(version: &str) -> String {
    format!("pactoVersion: \"2.0\"\nservice:\n  name: ledger\n  version: {version}\n")
}

/// Invalid → valid (v1.0.0) → status-writer restart → Invalid again the same way → valid
/// (v1.1.0): ContractInvalid and ContractRecovered are one event each with count 2 and both
/// timestamps, `kubectl describe` shows `(x2 over …)`, the two RevisionCreated are two events,
/// and `--sort-by=.lastTimestamp` lists them in the order they last happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_event_is_counted_and_a_new_revision_is_its_own_event() {
    let mut stack = Stack::start().await.unwrap();
    let name = "ledger";

    // 1. Invalid: one ContractInvalid with the condition's message.
    stack
        .apply(&inline_pacto(name, BROKEN, None))
        .await
        .unwrap();
    let invalid = stack
        .wait_contract_status(name, "Invalid", STATUS_DEADLINE)
        .await
        .unwrap();
    let condition = invalid["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "ContractValid"))
        .cloned()
        .unwrap();
    let message = condition["message"].as_str().unwrap().to_owned();
    let events = wait_events(&stack, name, "a ContractInvalid", |e| {
        !with_reason(e, "ContractInvalid").is_empty()
    })
    .await;
    let first = with_reason(&events, "ContractInvalid")[0].clone();
    assert_eq!(first["message"], message.as_str(), "{}", summary(&events));
    assert_eq!(first["type"], "Warning");
    assert_eq!(first["count"], 1, "{}", summary(&events));
    assert!(first["firstTimestamp"].is_string(), "{first}");
    assert_eq!(first["firstTimestamp"], first["lastTimestamp"], "{first}");
    // Who it is about and who wrote it.
    assert_eq!(first["involvedObject"]["uid"], invalid["metadata"]["uid"]);
    assert_eq!(
        first["involvedObject"]["namespace"],
        stack.namespace.as_str()
    );
    assert!(
        first["involvedObject"]["resourceVersion"].is_string(),
        "{first}"
    );
    assert_eq!(first["source"]["component"], "pacto-controller", "{first}");
    assert_eq!(first["reportingComponent"], "pacto-controller", "{first}");
    assert_eq!(first["action"], "Reconcile", "{first}");

    // 2. Fixed (v1.0.0): Reference, ContractRecovered and a RevisionCreated.
    wait_clock_past(latest(&invalid, &events)).await;
    stack
        .apply(&inline_pacto(name, &valid("1.0.0"), None))
        .await
        .unwrap();
    let fixed = stack
        .wait_contract_status(name, "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    let events = wait_events(
        &stack,
        name,
        "ContractRecovered and RevisionCreated v1.0.0",
        |e| {
            !with_reason(e, "ContractRecovered").is_empty()
                && with_reason(e, "RevisionCreated").iter().any(|r| {
                    r["message"]
                        .as_str()
                        .unwrap_or_default()
                        .ends_with("v1.0.0")
                })
        },
    )
    .await;

    // A restart of the status-writer in between: the counts live in the API, not in memory.
    stack.restart_service("status-writer").await.unwrap();

    // 3. Broken again, the same way: the same ContractInvalid object, count 2.
    wait_clock_past(latest(&fixed, &events)).await;
    stack
        .apply(&inline_pacto(name, BROKEN, None))
        .await
        .unwrap();
    let invalid_again = stack
        .wait_contract_status(name, "Invalid", STATUS_DEADLINE)
        .await
        .unwrap();
    let events = wait_events(&stack, name, "ContractInvalid recorded twice", |e| {
        with_reason(e, "ContractInvalid")
            .iter()
            .map(|e| e["count"].as_u64().unwrap_or(1))
            .sum::<u64>()
            >= 2
    })
    .await;
    let invalids = with_reason(&events, "ContractInvalid");
    assert_eq!(
        invalids.len(),
        1,
        "one event, not one object per emission:\n{}",
        summary(&events)
    );
    let again = invalids[0];
    assert_eq!(again["metadata"]["name"], first["metadata"]["name"]);
    assert_eq!(again["count"], 2, "{}", summary(&events));
    assert_eq!(again["message"], message.as_str());
    assert_eq!(again["firstTimestamp"], first["firstTimestamp"], "{again}");
    assert!(
        time(&again["firstTimestamp"]) < time(&again["lastTimestamp"]),
        "lastTimestamp moves on a recurrence: {again}"
    );
    let described = stack
        .wait_describe(name, &["(x2 over"], STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(
        described
            .lines()
            .any(|l| l.contains("ContractInvalid") && l.contains("(x2 over")),
        "{described}"
    );

    // 4. Fixed with another version: ContractRecovered counts 2, a second RevisionCreated of
    //    its own.
    wait_clock_past(latest(&invalid_again, &events)).await;
    stack
        .apply(&inline_pacto(name, &valid("1.1.0"), None))
        .await
        .unwrap();
    stack
        .wait_contract_status(name, "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    let events = wait_events(&stack, name, "RevisionCreated v1.1.0", |e| {
        with_reason(e, "RevisionCreated").iter().any(|r| {
            r["message"]
                .as_str()
                .unwrap_or_default()
                .ends_with("v1.1.0")
        }) && with_reason(e, "ContractRecovered")
            .iter()
            .map(|e| e["count"].as_u64().unwrap_or(1))
            .sum::<u64>()
            >= 2
    })
    .await;
    let recovered = with_reason(&events, "ContractRecovered");
    assert_eq!(recovered.len(), 1, "{}", summary(&events));
    assert_eq!(recovered[0]["count"], 2, "{}", summary(&events));
    let revisions = with_reason(&events, "RevisionCreated");
    assert_eq!(revisions.len(), 2, "{}", summary(&events));
    assert_ne!(revisions[0]["message"], revisions[1]["message"]);
    assert!(
        revisions.iter().all(|r| r["count"] == 1),
        "{}",
        summary(&events)
    );
    assert_eq!(
        with_reason(&events, "ContractInvalid")[0]["count"],
        2,
        "{}",
        summary(&events)
    );

    // `kubectl get events --sort-by=.lastTimestamp`: in the order they last happened.
    let sorted = stack
        .pacto_events(name, &["--sort-by=.lastTimestamp"])
        .await
        .unwrap();
    let times: Vec<Timestamp> = sorted.iter().map(|e| time(&e["lastTimestamp"])).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "{}",
        summary(&sorted)
    );
    let position = |reason: &str, suffix: &str| {
        sorted
            .iter()
            .position(|e| {
                e["reason"] == reason && e["message"].as_str().unwrap_or_default().ends_with(suffix)
            })
            .unwrap_or_else(|| panic!("no {reason} {suffix}: {}", summary(&sorted)))
    };
    let (revision_1, invalid_last, revision_2) = (
        position("RevisionCreated", "v1.0.0"),
        position("ContractInvalid", ""),
        position("RevisionCreated", "v1.1.0"),
    );
    assert!(
        revision_1 < invalid_last && invalid_last < revision_2,
        "{}",
        summary(&sorted)
    );
}
