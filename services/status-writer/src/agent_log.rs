//! The node agents, as the operator's log tells them (docs/design/node-agent.md#operator-log):
//! every replica of the status-writer — leader or not, so that whichever pod
//! `kubectl logs deploy/pacto-operator` picks prints the same lines — watches the
//! NodeRuntimeObservations and Leases of the agent namespace and logs, per node, at INFO and
//! only when the node's state changes, one line that contains `node-agent` and the node's name:
//!
//! - `node-agent: node <n> heard (agent <version>, last published <time>)`;
//! - `node-agent: node <n> stale since <time> (…)`: the observer's rule, one function for both
//!   ([`pacto_api::agent_freshness`], docs/design/observation.md#node-evidence): either object
//!   missing, or the newer of the Lease's renewTime and the observation's lastPublished older
//!   than stale-after (strictly);
//! - `node-agent: node <n> collection failed (<reason>: <message>)`: a fresh observation whose
//!   `status.collection.state` is Failed;
//! - `node-agent: node <n> reports refused by the observer (<reason>: <message>)` while the
//!   observation's `status.reportStream.state` is Refused, and
//!   `node-agent: node <n> reports accepted by the observer again` when it no longer is;
//! - `node-agent: node <n> observation deleted` when both objects are gone.
//!
//! Time passes without watch events: a node is judged again when it turns stale (its stale
//! instant), and at least every check interval (at most a third of stale-after).
//!
//! [`NodeAgentLog`] is the pure state machine (objects in, lines out); [`follow`] feeds it from
//! the watches (`pacto_runtime::index` indexes) and a timer.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use pacto_api::{AgentFreshness, NodeRuntimeObservation, Staleness, agent_freshness, fresh_until};
use pacto_runtime::CancellationToken;
use pacto_runtime::index::{Index, run_index};
use pacto_runtime::watch::watch;

/// Default of `--node-evidence-stale-after` (the observer's default, so both read a node alike).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(90);

/// The longest time between two checks of the nodes when nothing else wakes the task.
pub const CHECK_INTERVAL_MAX: Duration = Duration::from_secs(30);

/// How often the nodes are judged again without watch events: a third of `stale_after`, at
/// most [`CHECK_INTERVAL_MAX`], at least one second.
pub fn check_interval(stale_after: Duration) -> Duration {
    (stale_after / 3)
        .min(CHECK_INTERVAL_MAX)
        .max(Duration::from_secs(1))
}

/// What the log needs of one NodeRuntimeObservation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservationFacts {
    /// `status.lastPublished`.
    pub last_published: Option<Timestamp>,
    /// `status.agentVersion`.
    pub agent_version: Option<String>,
    /// `status.collection` when Failed: (reason, message).
    pub collection_failed: Option<(String, String)>,
    /// `status.reportStream` when Refused: (reason, message).
    pub refused: Option<(String, String)>,
}

impl ObservationFacts {
    /// The facts of `observation`.
    pub fn of(observation: &NodeRuntimeObservation) -> Self {
        let Some(status) = &observation.status else {
            return Self::default();
        };
        Self {
            last_published: status.last_published.as_ref().map(|t| t.0),
            agent_version: status.agent_version.clone(),
            collection_failed: status.collection_failure(),
            refused: status.stream_refusal(),
        }
    }
}

/// What a node reads as, its timestamps aside (a change of this is a line).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Health {
    /// Fresh and collecting.
    Heard,
    /// Stale (why).
    Stale(Staleness),
    /// Fresh, collection failed (reason, message).
    Failed(String, String),
}

/// What was last logged of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Logged {
    health: Health,
    refused: Option<(String, String)>,
}

/// The node agents' objects and what was last logged of each node.
#[derive(Debug)]
pub struct NodeAgentLog {
    stale_after: Duration,
    observations: BTreeMap<String, ObservationFacts>,
    /// Lease name (the node) → renewTime (`None`: never renewed).
    leases: BTreeMap<String, Option<Timestamp>>,
    logged: BTreeMap<String, Logged>,
}

fn seconds(t: &Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(*t)
}

fn newer(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// `d` as the flags write it (`90s`, `2m`, `1500ms`).
fn shown(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 {
        format!("{}ms", d.as_millis())
    } else if secs >= 60 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

fn detail(reason: &str, message: &str) -> String {
    match (reason.is_empty(), message.is_empty()) {
        (false, false) => format!("{reason}: {message}"),
        (false, true) => reason.to_owned(),
        (true, false) => message.to_owned(),
        (true, true) => "no reason given".to_owned(),
    }
}

impl NodeAgentLog {
    /// Nothing known yet; nodes read stale beyond `stale_after`.
    pub fn new(stale_after: Duration) -> Self {
        Self {
            stale_after,
            observations: BTreeMap::new(),
            leases: BTreeMap::new(),
            logged: BTreeMap::new(),
        }
    }

    /// The observation of `node` is now `facts`.
    pub fn set_observation(&mut self, node: &str, facts: ObservationFacts) {
        self.observations.insert(node.to_owned(), facts);
    }

    /// The observation of `node` is gone.
    pub fn remove_observation(&mut self, node: &str) {
        self.observations.remove(node);
    }

    /// Replaces every observation (a watch listed again: objects deleted meanwhile go).
    pub fn replace_observations(&mut self, all: BTreeMap<String, ObservationFacts>) {
        self.observations = all;
    }

    /// The Lease of `node` was renewed at `renewed` (`None`: never).
    pub fn set_lease(&mut self, node: &str, renewed: Option<Timestamp>) {
        self.leases.insert(node.to_owned(), renewed);
    }

    /// The Lease of `node` is gone.
    pub fn remove_lease(&mut self, node: &str) {
        self.leases.remove(node);
    }

    /// Replaces every Lease (a watch listed again).
    pub fn replace_leases(&mut self, all: BTreeMap<String, Option<Timestamp>>) {
        self.leases = all;
    }

    /// When `node` was last heard from: the newer of its Lease's renewTime and its
    /// observation's lastPublished.
    fn heard(&self, node: &str) -> Option<Timestamp> {
        newer(
            self.leases.get(node).copied().flatten(),
            self.observations
                .get(node)
                .and_then(|facts| facts.last_published),
        )
    }

    fn stale_instant(&self, heard: Timestamp) -> Option<Timestamp> {
        fresh_until(heard, self.stale_after)
    }

    /// `node` judged at `now` by the observer's stale rule ([`pacto_api::agent_freshness`]).
    fn health(&self, node: &str, now: Timestamp) -> Health {
        let facts = self.observations.get(node);
        let freshness = agent_freshness(
            facts.map(|facts| facts.last_published),
            self.leases.get(node).copied().flatten(),
            now,
            self.stale_after,
        );
        match (freshness, facts.and_then(|f| f.collection_failed.as_ref())) {
            (AgentFreshness::Stale { why, .. }, _) => Health::Stale(why),
            (AgentFreshness::Fresh { .. }, Some((reason, message))) => {
                Health::Failed(reason.clone(), message.clone())
            }
            (AgentFreshness::Fresh { .. }, None) => Health::Heard,
        }
    }

    fn health_line(&self, node: &str, health: &Health, now: Timestamp) -> String {
        let heard = self.heard(node);
        let facts = self.observations.get(node);
        match health {
            Health::Heard => {
                let facts = facts.cloned().unwrap_or_default();
                format!(
                    "node-agent: node {node} heard (agent {}, last published {})",
                    facts.agent_version.as_deref().unwrap_or("unknown"),
                    facts
                        .last_published
                        .map_or_else(|| "never".to_owned(), |t| seconds(&t).to_string()),
                )
            }
            Health::Failed(reason, message) => format!(
                "node-agent: node {node} collection failed ({})",
                detail(reason, message)
            ),
            Health::Stale(why) => {
                let since = match why {
                    Staleness::Old => heard.and_then(|h| self.stale_instant(h)).unwrap_or(now),
                    Staleness::NoObservation | Staleness::NoLease => now,
                };
                let last = |what: &str, t: Option<Timestamp>| {
                    t.map_or_else(
                        || format!("{what} never"),
                        |t| format!("{what} {}", seconds(&t)),
                    )
                };
                let why = match why {
                    Staleness::Old => format!(
                        "nothing heard for more than {}; {}",
                        shown(self.stale_after),
                        last("last heard", heard)
                    ),
                    Staleness::NoObservation => format!(
                        "no NodeRuntimeObservation; {}",
                        last("Lease last renewed", heard)
                    ),
                    Staleness::NoLease => {
                        format!("no renewed Lease; {}", last("last published", heard))
                    }
                };
                format!(
                    "node-agent: node {node} stale since {} ({why})",
                    seconds(&since)
                )
            }
        }
    }

    /// Judges every node at `now` and returns the lines of the nodes whose state changed since
    /// the last call (in node order); unchanged nodes give none.
    pub fn check(&mut self, now: Timestamp) -> Vec<String> {
        let nodes: BTreeSet<String> = self
            .observations
            .keys()
            .chain(self.leases.keys())
            .chain(self.logged.keys())
            .cloned()
            .collect();
        let mut lines = Vec::new();
        for node in nodes {
            if !self.observations.contains_key(&node) && !self.leases.contains_key(&node) {
                if self.logged.remove(&node).is_some() {
                    lines.push(format!("node-agent: node {node} observation deleted"));
                }
                continue;
            }
            let health = self.health(&node, now);
            let before = self.logged.get(&node);
            // Without its observation nothing is known of the stream: what was logged stands.
            let refused = match self.observations.get(&node) {
                Some(facts) => facts.refused.clone(),
                None => before.and_then(|l| l.refused.clone()),
            };
            if before.map(|l| &l.health) != Some(&health) {
                lines.push(self.health_line(&node, &health, now));
            }
            let refused_before = before.and_then(|l| l.refused.as_ref());
            if refused_before != refused.as_ref() {
                match &refused {
                    Some((reason, message)) => lines.push(format!(
                        "node-agent: node {node} reports refused by the observer ({})",
                        detail(reason, message)
                    )),
                    None => lines.push(format!(
                        "node-agent: node {node} reports accepted by the observer again"
                    )),
                }
            }
            self.logged.insert(node, Logged { health, refused });
        }
        lines
    }

    /// The first instant after `now` at which a node that reads fresh turns stale (judge again
    /// then); `None` when no node is fresh.
    pub fn next_stale(&self, now: Timestamp) -> Option<Timestamp> {
        self.logged
            .iter()
            .filter(|(_, logged)| !matches!(logged.health, Health::Stale(_)))
            .filter_map(|(node, _)| self.heard(node))
            .filter_map(|heard| self.stale_instant(heard))
            .map(|at| {
                // Strictly older than stale-after: one millisecond past the instant.
                Timestamp::from_nanosecond(at.as_nanosecond() + 1_000_000).unwrap_or(at)
            })
            .filter(|at| *at > now)
            .min()
    }
}

fn renewed(lease: &Lease) -> Option<Timestamp> {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.renew_time.as_ref())
        .map(|t| t.0)
}

/// What [`follow`]'s two indexes and its timer share: the log, whether each watch has listed
/// once, and where the lines go.
struct Shared<E> {
    log: NodeAgentLog,
    observations_listed: bool,
    leases_listed: bool,
    emit: E,
}

impl<E: FnMut(String)> Shared<E> {
    /// Judges the nodes now, once both watches have listed their objects.
    fn check(&mut self) {
        if self.observations_listed && self.leases_listed {
            for line in self.log.check(Timestamp::now()) {
                (self.emit)(line);
            }
        }
    }
}

/// One of [`follow`]'s indexes: `Observations` or `Leases` over the shared log.
struct Fed<'a, E, What> {
    shared: &'a std::sync::Mutex<Shared<E>>,
    /// Wakes the timer, so that it waits for the new next stale instant.
    changed: &'a tokio::sync::Notify,
    what: std::marker::PhantomData<What>,
}

impl<E: FnMut(String), What> Fed<'_, E, What> {
    fn update(&self, f: impl FnOnce(&mut Shared<E>)) {
        let mut shared = self
            .shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut shared);
        shared.check();
        self.changed.notify_one();
    }
}

impl<E: FnMut(String)> Index<NodeRuntimeObservation> for Fed<'_, E, NodeRuntimeObservation> {
    fn apply(&mut self, o: NodeRuntimeObservation) {
        self.update(|s| {
            s.log
                .set_observation(&o.name_any(), ObservationFacts::of(&o));
        });
    }

    fn delete(&mut self, o: NodeRuntimeObservation) {
        self.update(|s| s.log.remove_observation(&o.name_any()));
    }

    fn reset(&mut self, listing: Vec<NodeRuntimeObservation>) {
        self.update(|s| {
            s.log.replace_observations(
                listing
                    .iter()
                    .map(|o| (o.name_any(), ObservationFacts::of(o)))
                    .collect(),
            );
            s.observations_listed = true;
        });
    }
}

impl<E: FnMut(String)> Index<Lease> for Fed<'_, E, Lease> {
    fn apply(&mut self, l: Lease) {
        self.update(|s| s.log.set_lease(&l.name_any(), renewed(&l)));
    }

    fn delete(&mut self, l: Lease) {
        self.update(|s| s.log.remove_lease(&l.name_any()));
    }

    fn reset(&mut self, listing: Vec<Lease>) {
        self.update(|s| {
            s.log
                .replace_leases(listing.iter().map(|l| (l.name_any(), renewed(l))).collect());
            s.leases_listed = true;
        });
    }
}

/// Follows the node agents of `namespace` until `token`, handing every line to `emit` (see
/// the module documentation): the NodeRuntimeObservations and the Leases, each watched into an
/// index over one [`NodeAgentLog`], and a timer that judges the nodes again when one turns
/// stale or the check interval passed. Lines start once both watches listed their objects.
pub async fn follow(
    client: kube::Client,
    namespace: String,
    stale_after: Duration,
    token: CancellationToken,
    emit: impl FnMut(String) + Send,
) {
    let shared = std::sync::Mutex::new(Shared {
        log: NodeAgentLog::new(stale_after),
        observations_listed: false,
        leases_listed: false,
        emit,
    });
    let changed = tokio::sync::Notify::new();
    let observations = run_index(
        watch(
            Api::<NodeRuntimeObservation>::namespaced(client.clone(), &namespace),
            watcher::Config::default(),
        ),
        Fed::<_, NodeRuntimeObservation> {
            shared: &shared,
            changed: &changed,
            what: std::marker::PhantomData,
        },
        token.clone(),
    );
    let leases = run_index(
        watch(
            Api::<Lease>::namespaced(client, &namespace),
            watcher::Config::default(),
        ),
        Fed::<_, Lease> {
            shared: &shared,
            changed: &changed,
            what: std::marker::PhantomData,
        },
        token.clone(),
    );
    let interval = check_interval(stale_after);
    let timer = async {
        loop {
            let now = Timestamp::now();
            let wait = shared
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .log
                .next_stale(now)
                .and_then(|at| u64::try_from(at.as_nanosecond() - now.as_nanosecond()).ok())
                .map_or(interval, |nanos| Duration::from_nanos(nanos).min(interval));
            tokio::select! {
                () = token.cancelled() => return,
                // Something changed (and was judged): wait for the new next stale instant.
                () = changed.notified() => continue,
                () = tokio::time::sleep(wait) => {}
            }
            shared
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .check();
        }
    };
    tokio::select! {
        () = observations => {}
        () = leases => {}
        () = timer => {}
    }
}

/// [`follow`], logging each line at INFO.
pub async fn log_node_agents(
    client: kube::Client,
    namespace: String,
    stale_after: Duration,
    token: CancellationToken,
) {
    tracing::info!(
        namespace = %namespace,
        stale_after = %shown(stale_after),
        "node-agent: following the node agents' NodeRuntimeObservations and Leases"
    );
    follow(client, namespace, stale_after, token, |line| {
        tracing::info!("{line}");
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).expect("valid")
    }

    fn fresh(published: i64) -> ObservationFacts {
        ObservationFacts {
            last_published: Some(at(published)),
            agent_version: Some("0.1.0".to_owned()),
            collection_failed: None,
            refused: None,
        }
    }

    #[test]
    fn check_interval_is_at_most_a_third_of_stale_after() {
        assert_eq!(
            check_interval(Duration::from_secs(90)),
            Duration::from_secs(30)
        );
        assert_eq!(
            check_interval(Duration::from_secs(20)),
            Duration::from_nanos(6_666_666_666)
        );
        assert_eq!(check_interval(Duration::from_mins(10)), CHECK_INTERVAL_MAX);
        assert_eq!(
            check_interval(Duration::from_millis(1)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_node_is_heard_once_then_stale_once_then_heard_again() {
        let mut log = NodeAgentLog::new(Duration::from_secs(90));
        log.set_lease("n1", Some(at(0)));
        log.set_observation("n1", fresh(0));
        assert_eq!(
            log.check(at(1)),
            [format!(
                "node-agent: node n1 heard (agent 0.1.0, last published {})",
                at(0)
            )]
        );
        // Renewals and publishes without a change of state log nothing.
        log.set_lease("n1", Some(at(10)));
        log.set_observation("n1", fresh(30));
        assert!(log.check(at(31)).is_empty());
        assert_eq!(
            log.next_stale(at(31)).map(Timestamp::as_second),
            Some(at(120).as_second())
        );
        // Exactly stale-after is still fresh.
        assert!(log.check(at(120)).is_empty());
        assert_eq!(
            log.check(at(121)),
            [format!(
                "node-agent: node n1 stale since {} (nothing heard for more than 90s; last heard {})",
                at(120),
                at(30)
            )]
        );
        assert!(log.check(at(500)).is_empty(), "stale is logged once");
        assert_eq!(log.next_stale(at(500)), None);
        log.set_lease("n1", Some(at(501)));
        assert_eq!(
            log.check(at(501)),
            [format!(
                "node-agent: node n1 heard (agent 0.1.0, last published {})",
                at(30)
            )]
        );
    }

    #[test]
    fn a_missing_object_reads_stale_and_both_gone_is_deleted() {
        let mut log = NodeAgentLog::new(Duration::from_secs(90));
        log.set_lease("n1", Some(at(0)));
        assert_eq!(
            log.check(at(1)),
            [format!(
                "node-agent: node n1 stale since {} (no NodeRuntimeObservation; Lease last renewed {})",
                at(1),
                at(0)
            )]
        );
        log.set_observation("n1", fresh(2));
        assert_eq!(log.check(at(2)).len(), 1);
        log.remove_lease("n1");
        assert_eq!(
            log.check(at(3)),
            [format!(
                "node-agent: node n1 stale since {} (no renewed Lease; last published {})",
                at(3),
                at(2)
            )]
        );
        log.set_observation(
            "n1",
            ObservationFacts {
                refused: Some(("PermissionDenied".to_owned(), String::new())),
                ..fresh(3)
            },
        );
        assert_eq!(
            log.check(at(3)),
            ["node-agent: node n1 reports refused by the observer (PermissionDenied)"]
        );
        log.set_lease("n1", Some(at(3)));
        log.remove_observation("n1");
        assert_eq!(
            log.check(at(3)),
            [format!(
                "node-agent: node n1 stale since {} (no NodeRuntimeObservation; Lease last renewed {})",
                at(3),
                at(3)
            )],
            "an observation gone says nothing of the stream (no `accepted again`)"
        );
        log.remove_lease("n1");
        assert_eq!(
            log.check(at(4)),
            ["node-agent: node n1 observation deleted"]
        );
        assert!(log.check(at(5)).is_empty(), "a deleted node is forgotten");
    }

    #[test]
    fn collection_failed_and_refused_reports_are_logged_on_change() {
        let mut log = NodeAgentLog::new(Duration::from_secs(90));
        log.set_lease("n1", Some(at(0)));
        log.set_observation(
            "n1",
            ObservationFacts {
                collection_failed: Some(("BTFUnavailable".to_owned(), "no BTF".to_owned())),
                ..fresh(0)
            },
        );
        assert_eq!(
            log.check(at(1)),
            ["node-agent: node n1 collection failed (BTFUnavailable: no BTF)"]
        );
        log.set_observation(
            "n1",
            ObservationFacts {
                collection_failed: Some(("BTFUnavailable".to_owned(), "no BTF".to_owned())),
                refused: Some(("Unauthenticated".to_owned(), "bad token".to_owned())),
                ..fresh(30)
            },
        );
        assert_eq!(
            log.check(at(31)),
            ["node-agent: node n1 reports refused by the observer (Unauthenticated: bad token)"]
        );
        assert!(log.check(at(32)).is_empty());
        log.set_observation("n1", fresh(60));
        assert_eq!(
            log.check(at(61)),
            [
                format!(
                    "node-agent: node n1 heard (agent 0.1.0, last published {})",
                    at(60)
                ),
                "node-agent: node n1 reports accepted by the observer again".to_owned(),
            ]
        );
        assert!(log.check(at(62)).is_empty());
    }

    #[test]
    fn a_relist_drops_objects_deleted_meanwhile() {
        let mut log = NodeAgentLog::new(Duration::from_secs(90));
        log.set_lease("n1", Some(at(0)));
        log.set_observation("n1", fresh(0));
        log.set_lease("n2", Some(at(0)));
        log.set_observation("n2", fresh(0));
        assert_eq!(log.check(at(1)).len(), 2);
        log.replace_leases(BTreeMap::from([("n1".to_owned(), Some(at(2)))]));
        log.replace_observations(BTreeMap::from([("n1".to_owned(), fresh(2))]));
        assert_eq!(
            log.check(at(3)),
            ["node-agent: node n2 observation deleted"]
        );
    }

    #[test]
    fn durations_read_as_the_flags_write_them() {
        assert_eq!(shown(Duration::from_secs(90)), "90s");
        assert_eq!(shown(Duration::from_mins(2)), "2m");
        assert_eq!(shown(Duration::from_millis(1500)), "1500ms");
    }
}
