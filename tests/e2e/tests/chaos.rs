//! Kill -9 at every step (issue 17 item 9): a backlog of Pactos with a mix of verdicts
//! (Compliant, NonCompliant, Unknown, Invalid, Reference) is reconciled while one randomly chosen
//! service (contract-resolver, observer, evaluator, status-writer) is SIGKILLed at a random delay
//! into the work and started again, over many iterations. Afterwards:
//!
//! - every Pacto reaches its own verdict (none stays Unknown that should not);
//! - exactly one PactoRevision per (Pacto, contract version), and one `RevisionCreated` per
//!   revision;
//! - each transition event (docs/design/status.md#events) is recorded exactly once per real
//!   transition of the persisted `contractStatus`, read from the API (Events with their `count`)
//!   and compared with the transitions a watch on the Pactos saw.
//!
//! The chaos schedule is random but reproducible: the seed is printed, and
//! `PACTO_CHAOS_SEED=<seed>` replays it. `PACTO_CHAOS_ITERATIONS` (default 10) and
//! `PACTO_CHAOS_SECONDS` (default 60, the chaos phase's time budget) bound the run. The random
//! delay before a kill is the fault's injection point, not a synchronisation: every wait for a
//! result is a poll with a deadline.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pacto_e2e::{Stack, deployment, inline_pacto, service_target, target_service, times_emitted};
use pacto_runtime::testing::within;
use serde_json::{Value, json};

const SERVICES: [&str; 4] = [
    "contract-resolver",
    "observer",
    "evaluator",
    "status-writer",
];

/// How long the backlog may take to settle after the last kill (backoff retries included).
const SETTLE_DEADLINE: Duration = Duration::from_mins(2);

/// A small deterministic generator (SplitMix64): the schedule replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.parse().unwrap_or_else(|e| panic!("{name}={v:?}: {e}"))
    })
}

/// One Pacto of the backlog and the verdict it must reach.
struct Case {
    name: String,
    verdict: &'static str,
    /// OCI contracts also get ungated mirror events (ContractInvalid/ContractUnavailable on a
    /// mirror failure), so only their gated reasons are compared exactly.
    oci: bool,
    /// A target-less inline Pacto the chaos loop breaks and fixes (Reference ↔ Invalid): real
    /// transitions, with their events, while services die.
    flips: bool,
}

impl Case {
    fn new(name: String, verdict: &'static str) -> Self {
        Self {
            name,
            verdict,
            oci: false,
            flips: verdict == "Reference" || verdict == "Invalid",
        }
    }

    /// The Pacto's manifest for its current verdict (flipping ones only).
    fn manifest(&self) -> String {
        let version = if self.verdict == "Invalid" {
            "not-a-version"
        } else {
            "1.0.0"
        };
        inline_pacto(&self.name, &contract(&self.name, version), None)
    }
}

fn contract(name: &str, version: &str) -> String {
    format!("pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: {version}\n")
}

/// One update of a Pacto as the watch saw it.
#[derive(Debug, Clone)]
struct Seen {
    status: String,
    contract_valid: String,
}

type Watched = Arc<Mutex<BTreeMap<String, Vec<Seen>>>>;

/// `kubectl get pactos -w`, one line per update: name, contractStatus, ContractValid status.
/// Every update of every Pacto arrives (the watch starts before the Pactos exist).
fn watch_pactos(stack: &Stack) -> (tokio::process::Child, Watched) {
    let watched: Watched = Arc::default();
    let sink = Arc::clone(&watched);
    let child = stack
        .watch_pactos(
            r#"{.metadata.name}{" "}{.status.contractStatus}{" "}{.status.conditions[?(@.type=="ContractValid")].status}{"\n"}"#,
            move |fields| {
                let name = fields.first().copied().unwrap_or_default().to_owned();
                let status = fields.get(1).copied().unwrap_or_default().to_owned();
                let contract_valid = fields.get(2).copied().unwrap_or_default().to_owned();
                if name.is_empty() || status.is_empty() {
                    return;
                }
                sink.lock().unwrap().entry(name).or_default().push(Seen {
                    status,
                    contract_valid,
                });
            },
        )
        .expect("starting kubectl get --watch");
    (child, watched)
}

/// The transition events the persisted statuses `seen` call for, by reason
/// (docs/design/status.md#events).
fn expected_events(seen: &[Seen]) -> BTreeMap<&'static str, u64> {
    let mut expected = BTreeMap::new();
    let mut previous: Option<&str> = None;
    for s in seen {
        let next = s.status.as_str();
        if previous == Some(next) {
            continue;
        }
        let healthy = |st: &str| matches!(st, "Compliant" | "Reference");
        let reason = match next {
            "Invalid" => Some("ContractInvalid"),
            "Unknown" if s.contract_valid == "True" => Some("ValidationFailed"),
            "Unknown" => Some("ContractUnavailable"),
            "Warning" | "NonCompliant" => Some("ValidationFailed"),
            st if healthy(st) && previous.is_some_and(|p| !healthy(p)) => Some("ContractRecovered"),
            _ => None,
        };
        if let Some(reason) = reason {
            *expected.entry(reason).or_default() += 1;
        }
        previous = Some(next);
    }
    expected
}

async fn list(stack: &Stack, kind: &str) -> Vec<Value> {
    let json = stack
        .kubectl(&["get", kind, "-n", &stack.namespace, "-o", "json"], None)
        .await
        .unwrap();
    let list: Value = serde_json::from_str(&json).unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// Everything wrong with the backlog now, one line each (empty: settled and consistent).
async fn problems(stack: &Stack, cases: &[Case], watched: &Watched) -> Vec<String> {
    let mut wrong = Vec::new();
    let pactos = list(stack, "pactos").await;
    let status_of: BTreeMap<String, String> = pactos
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                p["status"]["contractStatus"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let revisions = list(stack, "pactorevisions").await;
    let events = list(stack, "events").await;
    let watched = watched.lock().unwrap().clone();
    for case in cases {
        let name = case.name.as_str();
        let got = status_of.get(name).map_or("", String::as_str);
        if got != case.verdict {
            wrong.push(format!("{name}: {got:?}, want {}", case.verdict));
        }
        // One revision per (Pacto, version); none for a contract that never loaded.
        let mine: Vec<&Value> = revisions
            .iter()
            .filter(|r| r["spec"]["pactoRef"] == name)
            .collect();
        let versions: BTreeSet<&str> = mine
            .iter()
            .map(|r| r["spec"]["version"].as_str().unwrap_or_default())
            .collect();
        if versions.len() != mine.len() {
            let named: Vec<String> = mine
                .iter()
                .map(|r| format!("{}={}", r["metadata"]["name"], r["spec"]["version"]))
                .collect();
            wrong.push(format!(
                "{name}: {} revisions for {} versions, e.g. {:?}",
                mine.len(),
                versions.len(),
                &named[..named.len().min(4)]
            ));
        }
        // A flipping Pacto has its one revision once its contract loaded (maybe only broken
        // again before a status showed it); the others have one unless they are Invalid.
        let want_revisions = usize::from(case.verdict != "Invalid");
        if mine.len() != want_revisions && !(case.flips && mine.len() == 1) {
            wrong.push(format!(
                "{name}: {} revisions, want {want_revisions}",
                mine.len()
            ));
        }
        let on_me: Vec<Value> = events
            .iter()
            .filter(|e| {
                e["involvedObject"]["kind"] == "Pacto" && e["involvedObject"]["name"] == name
            })
            .cloned()
            .collect();
        let created = times_emitted(&on_me, "RevisionCreated").unwrap();
        if created != mine.len() as u64 {
            wrong.push(format!(
                "{name}: RevisionCreated emitted {created} times for {} revisions",
                mine.len()
            ));
        }
        let overwritten = times_emitted(&on_me, "TagOverwritten").unwrap();
        if overwritten != 0 {
            wrong.push(format!(
                "{name}: TagOverwritten emitted {overwritten} times"
            ));
        }
        // Transition events: once per real transition of the persisted status.
        let seen = watched.get(name).cloned().unwrap_or_default();
        let expected = expected_events(&seen);
        for reason in [
            "ContractInvalid",
            "ContractUnavailable",
            "ValidationFailed",
            "ContractRecovered",
        ] {
            let want = expected.get(reason).copied().unwrap_or(0);
            let got = times_emitted(&on_me, reason).unwrap();
            let ungated = case.oci && matches!(reason, "ContractInvalid" | "ContractUnavailable");
            if got != want && !(ungated && got > want) {
                let path: Vec<String> = seen
                    .iter()
                    .map(|s| format!("{}({})", s.status, s.contract_valid))
                    .collect();
                wrong.push(format!(
                    "{name}: {reason} emitted {got} times, want {want} (statuses seen: {})",
                    dedup(&path).join(" → ")
                ));
            }
        }
    }
    wrong
}

fn dedup(items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if out.last() != Some(item) {
            out.push(item.clone());
        }
    }
    out
}

/// Pushes the `settings` bundle (a required configuration `app` whose schema wants an integer
/// `port`) and returns its reference.
async fn push_settings_bundle(stack: &Stack) -> String {
    let bundle = stack.dir.path().join("settings");
    std::fs::create_dir_all(bundle.join("configuration")).unwrap();
    std::fs::write(
        bundle.join("pacto.yaml"),
        "pactoVersion: \"2.0\"\nservice:\n  name: settings\n  version: 1.0.0\nconfigurations:\n  - name: app\n    required: true\n    schema: configuration/schema.json\n",
    )
    .unwrap();
    std::fs::write(
        bundle.join("configuration/schema.json"),
        r#"{"type":"object","required":["port"],"properties":{"port":{"type":"integer"}}}"#,
    )
    .unwrap();
    let reference = format!("oci://{}/pacto/settings:1.0.0", stack.registry.host());
    stack
        .pacto_cli(&["push", bundle.to_str().unwrap(), &reference])
        .await
        .unwrap();
    reference
}

/// Creates the backlog: `per_kind` Pactos of each inline verdict and a few NonCompliant ones.
async fn backlog(stack: &Stack, per_kind: usize) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut yaml = String::new();
    for i in 0..per_kind {
        let name = format!("ok-{i}");
        yaml.push_str(&deployment(&name));
        yaml.push_str("---\n");
        yaml.push_str(&target_service(&name));
        yaml.push_str("---\n");
        yaml.push_str(&inline_pacto(
            &name,
            &contract(&name, "1.0.0"),
            Some(&service_target(&name)),
        ));
        yaml.push_str("---\n");
        cases.push(Case::new(name, "Compliant"));
        let name = format!("lost-{i}");
        yaml.push_str(&inline_pacto(
            &name,
            &contract(&name, "1.0.0"),
            Some(&service_target(&name)),
        ));
        yaml.push_str("---\n");
        cases.push(Case::new(name, "Unknown"));
        let name = format!("ref-{i}");
        yaml.push_str(&inline_pacto(&name, &contract(&name, "1.0.0"), None));
        yaml.push_str("---\n");
        cases.push(Case::new(name, "Reference"));
        let name = format!("broken-{i}");
        yaml.push_str(&inline_pacto(
            &name,
            &contract(&name, "not-a-version"),
            None,
        ));
        yaml.push_str("---\n");
        cases.push(Case::new(name, "Invalid"));
    }
    let reference = push_settings_bundle(stack).await;
    yaml.push_str(&deployment("settings"));
    yaml.push_str("---\n");
    yaml.push_str(
        &serde_norway::to_string(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "bad-config" },
            "data": { "config.yaml": "port: eighty\n" },
        }))
        .unwrap(),
    );
    for i in 0..per_kind / 2 {
        let name = format!("mismatch-{i}");
        yaml.push_str("---\n");
        yaml.push_str(
            &pacto_api::testing::PactoBuilder::oci(&name, &reference)
                .target(
                    serde_json::from_value(json!({
                        "workloadRef": { "name": "settings", "kind": "Deployment" },
                        "configBindings": [{
                            "configuration": "app", "kind": "ConfigMap", "name": "bad-config",
                            "key": "config.yaml", "format": "yaml",
                        }],
                    }))
                    .unwrap(),
                )
                .check_interval(30)
                .manifest(),
        );
        cases.push(Case {
            name,
            verdict: "NonCompliant",
            oci: true,
            flips: false,
        });
    }
    stack.apply(&yaml).await.unwrap();
    cases
}

/// Asks for a reconcile of `names` (the guide's nudge annotation), without waiting for it.
async fn nudge_all(stack: &Stack, names: &[&str], value: &str) {
    let mut args = vec!["annotate", "-n", &stack.namespace, "--overwrite"];
    let targets: Vec<String> = names.iter().map(|n| format!("pacto/{n}")).collect();
    args.extend(targets.iter().map(String::as_str));
    let annotation = format!("reconcile-requested-at={value}");
    args.push(&annotation);
    stack.kubectl(&args, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_points_of_a_reconcile_backlog() {
    let seed = std::env::var("PACTO_CHAOS_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        },
        |v| v.parse().expect("PACTO_CHAOS_SEED is a u64"),
    );
    let iterations = env_u64("PACTO_CHAOS_ITERATIONS", 10);
    let budget = Duration::from_secs(env_u64("PACTO_CHAOS_SECONDS", 60));
    println!(
        "chaos: seed {seed} (replay with PACTO_CHAOS_SEED={seed}), up to {iterations} iterations in {budget:?}"
    );
    let mut rng = Rng(seed);

    let mut stack = Stack::start().await.unwrap();
    let (_watch, watched) = watch_pactos(&stack);
    let mut cases = backlog(&stack, 10).await;
    let names: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
    println!("chaos: backlog of {} Pactos", names.len());

    let started = Instant::now();
    let mut kills: BTreeMap<&str, u64> = BTreeMap::new();
    let mut done = 0;
    while done < iterations && started.elapsed() < budget {
        // New reconcile work: real transitions for a third of the flipping Pactos (Reference ↔
        // Invalid) and a nudge for a random half of the rest, then a kill somewhere in it.
        let mut flipped = String::new();
        let mut flips = 0;
        for case in cases.iter_mut().filter(|c| c.flips) {
            if rng.below(3) == 0 {
                case.verdict = if case.verdict == "Invalid" {
                    "Reference"
                } else {
                    "Invalid"
                };
                flipped.push_str(&case.manifest());
                flipped.push_str("---\n");
                flips += 1;
            }
        }
        if !flipped.is_empty() {
            stack.apply(&flipped).await.unwrap();
        }
        let some: Vec<&str> = cases
            .iter()
            .filter(|c| !c.flips)
            .map(|c| c.name.as_str())
            .filter(|_| rng.below(2) == 0)
            .collect();
        if !some.is_empty() {
            nudge_all(&stack, &some, &format!("chaos-{done}")).await;
        }
        let victim = SERVICES[usize::try_from(rng.below(4)).unwrap()];
        let delay = Duration::from_millis(rng.below(1000));
        // The fault's injection point (random by design), not a synchronisation.
        tokio::time::sleep(delay).await;
        stack.stop_service(victim).unwrap();
        *kills.entry(victim).or_default() += 1;
        println!(
            "chaos: iteration {done}: SIGKILL {victim} after {delay:?} ({flips} flipped, {} nudged)",
            some.len()
        );
        stack.restart_service(victim).await.unwrap();
        done += 1;
    }
    let last_kill = Instant::now();

    let settled = within(
        "the backlog to settle, consistent",
        SETTLE_DEADLINE,
        || async {
            let wrong = problems(&stack, &cases, &watched).await;
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(wrong.join("\n"))
            }
        },
    )
    .await;
    let settle = last_kill.elapsed();
    println!(
        "chaos: {done} iterations in {:?}; kills per service {kills:?}",
        last_kill - started
    );
    println!("chaos: settled {settle:?} after the last kill (seed {seed})");
    if let Err(timeout) = settled {
        panic!("seed {seed}: {timeout}\n{}", stack.logs());
    }
}
