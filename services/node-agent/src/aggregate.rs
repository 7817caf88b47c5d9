//! Turning socket events into per-pod views: attribution through the [`HostView`], listeners and
//! aggregated connections per pod, coverage, and the size bounds of the published status
//! (docs/design/node-agent.md#aggregation). Pure: time comes in as an argument, nothing here does
//! I/O, and no event can make it panic.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use pacto_api::{Connection, Direction, Listener, PodCoverage, PodObservation, Protocol};
use pacto_proto::node_limits::{
    MAX_CONNECTIONS_PER_POD, MAX_LISTENERS_PER_POD, MAX_PODS, TOO_MANY_LISTENERS,
};

use crate::facts::{HostView, SocketEvent, SocketEventKind};

/// Partial reason: the pod was already running when collection started.
pub const STARTED_AFTER_POD: &str = "started after pod";
/// Partial reason: the kernel dropped events since the previous publish.
pub const RING_BUFFER_OVERFLOW: &str = "ring buffer overflow";
/// Partial reason: the pod shares the host's network namespace.
pub const HOST_NETWORK: &str = "hostNetwork";
/// Listener Partial reason: the last host scan found no process of the pod, so its network
/// namespace (and with it its listener set) is unknown.
pub const NETNS_NOT_FOUND: &str = "network namespace not found";
/// Listener Partial reason: collection runs but no socket snapshot succeeded yet, so listeners
/// opened before collection started may be missing.
pub const SNAPSHOT_FAILED: &str = "socket snapshot failed";
/// Listener Partial reason: the pod opened more listeners than a report carries
/// ([`MAX_LISTENERS_PER_POD`], shared with the observer); the ones beyond it are not kept.
pub const LISTENERS_BEYOND_BOUND: &str = TOO_MANY_LISTENERS;
/// Listener Partial reason: the pod has more listening sockets than the agent tracks
/// ([`MAX_LISTENING_SOCKETS_PER_POD`]), so a listener with an untracked socket cannot tell when
/// its last socket closes.
pub const SOCKETS_BEYOND_BOUND: &str = "more than 4096 listening sockets";
/// Listening sockets (the socket sets of all its listeners together; SO_REUSEPORT puts several
/// on one address and port) tracked per pod (docs/design/node-agent.md#bounds).
pub const MAX_LISTENING_SOCKETS_PER_POD: usize = 4096;

/// Events whose namespace is not (yet) known to belong to a pod are kept this long, waiting for
/// the next host scan, and at most [`PENDING_CAP`] of them.
const PENDING_TTL: SignedDuration = SignedDuration::from_mins(1);
const PENDING_CAP: usize = 4096;

/// What the agent knows about one pod of its node (from the pod watch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodMeta {
    /// Pod uid (lowercase, with dashes).
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub host_network: bool,
    /// `status.startTime`, once the kubelet set it.
    pub start_time: Option<Timestamp>,
}

/// Bounds of the aggregation and of the published view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections published per pod (the most frequent, then the most recent).
    pub top_connections: usize,
    /// Size cap of the serialized `pods` list.
    pub max_bytes: usize,
    /// Connection entries kept in memory per pod; beyond it the least used one is forgotten.
    pub tracked_per_pod: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            top_connections: 50,
            max_bytes: 1024 * 1024,
            tracked_per_pod: 4096,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct ListenerKey {
    address: IpAddr,
    port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ConnKey {
    outbound: bool,
    peer_ip: IpAddr,
    peer_port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ConnStats {
    first_seen: Timestamp,
    last_seen: Timestamp,
    count: u64,
}

#[derive(Clone, Debug, Default)]
struct PodState {
    /// Listening sockets and the cookies of the sockets behind each (0: from the snapshot); at
    /// most [`MAX_LISTENERS_PER_POD`] listeners and [`MAX_LISTENING_SOCKETS_PER_POD`] cookies
    /// in all (docs/design/node-agent.md#bounds).
    listeners: BTreeMap<ListenerKey, BTreeSet<u64>>,
    /// A listener was not kept because the pod had [`MAX_LISTENERS_PER_POD`] already: its
    /// listener set is incomplete until a socket snapshot within the bound replaces it.
    listeners_beyond: bool,
    /// Listeners with a socket that was not tracked (the pod had
    /// [`MAX_LISTENING_SOCKETS_PER_POD`] already): closes never remove them, only a snapshot
    /// that no longer lists them.
    untracked: BTreeSet<ListenerKey>,
    connections: HashMap<ConnKey, ConnStats>,
}

impl PodState {
    /// Listening sockets tracked.
    fn sockets(&self) -> usize {
        self.listeners.values().map(BTreeSet::len).sum()
    }

    /// Whether a bound left its listener set incomplete.
    fn beyond_bounds(&self) -> bool {
        self.listeners_beyond || !self.untracked.is_empty()
    }
}

/// A pod, its state and its connections in publishing order.
type Ranked<'a> = (&'a PodMeta, &'a PodState, Vec<(ConnKey, ConnStats)>);

/// Who an event belongs to.
#[derive(Debug, PartialEq, Eq)]
enum Owner {
    Pods(Vec<String>),
    /// The host itself (or a host-netns process outside any pod of this node): not reported.
    Host,
    /// A namespace the last scan did not know: wait for the next one.
    Unknown,
}

/// The per-pod socket views of one node.
#[derive(Debug)]
pub struct Aggregator {
    limits: Limits,
    warm_up: Duration,
    view: HostView,
    pods: BTreeMap<String, PodMeta>,
    state: HashMap<String, PodState>,
    cookies: HashMap<u64, Vec<(String, ListenerKey)>>,
    pending: Vec<(SocketEvent, Timestamp)>,
    collection_start: Option<Timestamp>,
    drops_seen: u64,
    overflow: bool,
    evicted: bool,
    wants_scan: bool,
    events: u64,
    listeners_changed: bool,
    /// Uids of the pods the current host view found a process of (their network namespace is
    /// known).
    found: BTreeSet<String>,
    /// Why every pod's listeners are Partial until a socket snapshot succeeds (ring-buffer
    /// overflow, or a failed start-up snapshot); `None` when they are repaired.
    stale_listeners: Option<&'static str>,
    /// A snapshot attempt failed while listeners were stale (said once, not every retry).
    snapshot_failing: bool,
}

impl Aggregator {
    /// An empty aggregator. Pods that were running before collection started read their
    /// connection history Partial "started after pod" for `warm_up` after it started (their
    /// listeners come complete from the snapshot).
    pub fn new(limits: Limits, warm_up: Duration) -> Self {
        Self {
            limits,
            warm_up,
            view: HostView::default(),
            pods: BTreeMap::new(),
            state: HashMap::new(),
            cookies: HashMap::new(),
            pending: Vec::new(),
            collection_start: None,
            drops_seen: 0,
            overflow: false,
            evicted: false,
            wants_scan: false,
            events: 0,
            listeners_changed: false,
            found: BTreeSet::new(),
            stale_listeners: None,
            snapshot_failing: false,
        }
    }

    /// Replaces the pods of this node; the views of pods no longer listed are forgotten.
    pub fn set_pods(&mut self, pods: impl IntoIterator<Item = PodMeta>) {
        let pods: BTreeMap<String, PodMeta> =
            pods.into_iter().map(|p| (p.uid.clone(), p)).collect();
        self.listeners_changed |= !pods.keys().eq(self.pods.keys());
        self.pods = pods;
        let known = &self.pods;
        self.state.retain(|uid, _| known.contains_key(uid));
        self.cookies.retain(|_, owners| {
            owners.retain(|(uid, _)| known.contains_key(uid));
            !owners.is_empty()
        });
    }

    /// Number of pods of this node the agent knows.
    pub fn pods_tracked(&self) -> usize {
        self.pods.len()
    }

    /// Events applied so far (snapshot entries included).
    pub fn events_applied(&self) -> u64 {
        self.events
    }

    /// Replaces the host view (its `snapshot` is ignored here: see [`Aggregator::start`]) and
    /// retries the events that waited for it.
    pub fn set_view(&mut self, mut view: HostView, now: Timestamp) {
        view.snapshot.clear();
        let found: BTreeSet<String> = view.netns_pods.values().flatten().cloned().collect();
        // A pod whose namespace was found or lost changes its listener coverage: as worth an
        // early report as a listener (docs/design/node-agent.md#aggregation).
        let ours = |set: &BTreeSet<String>| -> Vec<bool> {
            self.pods.keys().map(|uid| set.contains(uid)).collect()
        };
        self.listeners_changed |= ours(&found) != ours(&self.found);
        self.found = found;
        self.view = view;
        self.wants_scan = false;
        let pending = std::mem::take(&mut self.pending);
        for (event, seen) in pending {
            if now.duration_since(seen) <= PENDING_TTL {
                self.apply_at(event, seen, false);
            }
        }
    }

    /// Collection started at `now` with this host view: its snapshot entries are applied as
    /// events seen now.
    pub fn start(&mut self, view: HostView, now: Timestamp) {
        self.collection_start = Some(now);
        let snapshot = view.snapshot.clone();
        self.set_view(view, now);
        for event in snapshot {
            self.apply(event, now);
        }
    }

    /// Whether an event named a network namespace the last scan did not know.
    pub fn wants_scan(&self) -> bool {
        self.wants_scan
    }

    /// Collection started at `now` but its socket snapshot failed: the view is empty, and every
    /// pod's listeners read Partial "socket snapshot failed" until
    /// [`Aggregator::resync_listeners`] succeeds (docs/design/node-agent.md#aggregation).
    pub fn start_without_snapshot(&mut self, now: Timestamp) {
        self.collection_start = Some(now);
        self.set_view(HostView::default(), now);
        self.stale_listeners = Some(SNAPSHOT_FAILED);
        self.snapshot_failing = true;
        self.listeners_changed = true;
    }

    /// The source's drop counter: growth since the previous publish marks every pod's
    /// connections Partial "ring buffer overflow" in the next one, and every pod's listeners
    /// Partial until a socket snapshot repairs them ([`Aggregator::wants_snapshot`],
    /// docs/design/node-agent.md#aggregation).
    pub fn note_drops(&mut self, total: u64) {
        if total > self.drops_seen {
            self.overflow = true;
            self.stale_listeners = Some(RING_BUFFER_OVERFLOW);
        }
        self.drops_seen = self.drops_seen.max(total);
    }

    /// Whether the listeners need a socket snapshot (`HostScanner::scan(true)`) to be complete
    /// again: events were dropped, or the start-up snapshot failed.
    pub fn wants_snapshot(&self) -> bool {
        self.stale_listeners.is_some()
    }

    /// A snapshot asked for by [`Aggregator::wants_snapshot`] failed: the listeners stay Partial
    /// (and the next report says so at once, the first time).
    pub fn snapshot_failed(&mut self) {
        if self.stale_listeners.is_some() && !self.snapshot_failing {
            self.snapshot_failing = true;
            self.listeners_changed = true;
        }
    }

    /// A socket snapshot taken after the drops (or the failed start-up snapshot): the host view
    /// is replaced, and the listener set of every non-hostNetwork pod whose network namespace
    /// the view knows becomes the snapshot's — listeners still present keep their cookies,
    /// absent ones are dropped, new ones are added with cookie 0. Connections are left alone
    /// (a snapshot connection was already counted, or was missed: they stay Partial for this
    /// publish). Events drained after the scan apply on top
    /// (docs/design/node-agent.md#aggregation).
    pub fn resync_listeners(&mut self, mut view: HostView, now: Timestamp) {
        let snapshot = std::mem::take(&mut view.snapshot);
        self.set_view(view, now);
        let mut wanted: HashMap<String, BTreeSet<ListenerKey>> = HashMap::new();
        for event in snapshot
            .iter()
            .filter(|e| e.kind == SocketEventKind::Listen)
        {
            if let Owner::Pods(uids) = self.owner(event) {
                let key = ListenerKey {
                    address: event.local.ip(),
                    port: event.local.port(),
                };
                for uid in uids {
                    wanted.entry(uid).or_default().insert(key);
                }
            }
        }
        let mut changed = false;
        for meta in self.pods.values() {
            // A hostNetwork pod's snapshot sockets cannot be split from the host's; a pod whose
            // namespace the scan did not find is not in the snapshot at all.
            if meta.host_network || !self.found.contains(&meta.uid) {
                continue;
            }
            let mut want = wanted.remove(&meta.uid).unwrap_or_default();
            let state = self.state.entry(meta.uid.clone()).or_default();
            let was_beyond = state.beyond_bounds();
            // Beyond the bound the lowest listeners are kept, still Partial
            // (docs/design/node-agent.md#bounds).
            state.listeners_beyond = want.len() > MAX_LISTENERS_PER_POD;
            want = want.into_iter().take(MAX_LISTENERS_PER_POD).collect();
            state.untracked.retain(|key| want.contains(key));
            changed |= state.beyond_bounds() != was_beyond;
            let gone: Vec<ListenerKey> = state
                .listeners
                .keys()
                .filter(|key| !want.contains(key))
                .copied()
                .collect();
            for key in gone {
                changed = true;
                for cookie in state.listeners.remove(&key).unwrap_or_default() {
                    if let Some(owners) = self.cookies.get_mut(&cookie) {
                        owners.retain(|(uid, k)| !(uid == &meta.uid && *k == key));
                        if owners.is_empty() {
                            self.cookies.remove(&cookie);
                        }
                    }
                }
            }
            for key in want {
                if state.listeners.contains_key(&key) {
                    continue;
                }
                changed = true;
                if state.sockets() >= MAX_LISTENING_SOCKETS_PER_POD {
                    state.listeners.insert(key, BTreeSet::new());
                    state.untracked.insert(key);
                } else {
                    state.listeners.insert(key, BTreeSet::from([0]));
                }
            }
        }
        self.listeners_changed |= changed || self.snapshot_failing;
        self.stale_listeners = None;
        self.snapshot_failing = false;
    }

    /// Whether a pod's listener set is incomplete because a bound was hit (more listeners or
    /// listening sockets than it keeps): only a socket snapshot ([`Aggregator::resync_listeners`])
    /// can make it complete again, so the drain loop takes one now and then while this holds
    /// (docs/design/node-agent.md#bounds). HostNetwork pods do not count: a snapshot cannot split
    /// their sockets from the host's.
    pub fn wants_listener_resync(&self) -> bool {
        self.pods.values().any(|meta| {
            !meta.host_network
                && self
                    .state
                    .get(&meta.uid)
                    .is_some_and(PodState::beyond_bounds)
        })
    }

    /// Applies one event seen at `now`.
    pub fn apply(&mut self, event: SocketEvent, now: Timestamp) {
        self.apply_at(event, now, true);
    }

    fn apply_at(&mut self, event: SocketEvent, now: Timestamp, first_time: bool) {
        if first_time {
            self.events += 1;
        }
        let uids = match self.owner(&event) {
            Owner::Pods(uids) => uids,
            Owner::Host => return,
            Owner::Unknown => {
                self.wants_scan = true;
                if self.pending.len() >= PENDING_CAP {
                    self.pending.remove(0);
                }
                self.pending.push((event, now));
                return;
            }
        };
        match event.kind {
            SocketEventKind::Listen => {
                let key = ListenerKey {
                    address: event.local.ip(),
                    port: event.local.port(),
                };
                for uid in uids {
                    self.add_listener(uid, key, event.cookie);
                }
            }
            SocketEventKind::ListenClosed => self.close_listener(&event, &uids),
            SocketEventKind::Outbound | SocketEventKind::Inbound => {
                let outbound = event.kind == SocketEventKind::Outbound;
                let key = ConnKey {
                    outbound,
                    peer_ip: event.peer.ip(),
                    // An inbound peer's port is ephemeral: inbound connections aggregate by
                    // peer IP alone.
                    peer_port: if outbound { event.peer.port() } else { 0 },
                };
                for uid in uids {
                    self.count_connection(&uid, key, now);
                }
            }
        }
    }

    fn close_listener(&mut self, event: &SocketEvent, uids: &[String]) {
        if let Some(owners) = self
            .cookies
            .remove(&event.cookie)
            .filter(|_| event.cookie != 0)
        {
            for (uid, key) in owners {
                self.listeners_changed |=
                    remove_cookie(self.state.get_mut(&uid), key, event.cookie);
            }
            return;
        }
        // A listener known only from the snapshot (cookie 0): pair by address and port when the
        // event carries them.
        if event.local.port() == 0 {
            return;
        }
        let key = ListenerKey {
            address: event.local.ip(),
            port: event.local.port(),
        };
        for uid in uids {
            self.listeners_changed |= remove_cookie(self.state.get_mut(uid), key, 0);
        }
    }

    /// One socket listening on `key` in pod `uid`, within the pod's bounds
    /// (docs/design/node-agent.md#bounds): a listener beyond [`MAX_LISTENERS_PER_POD`] is not
    /// kept, a socket beyond [`MAX_LISTENING_SOCKETS_PER_POD`] is not tracked (its listener is
    /// kept, marked untracked); either turns the pod's listeners Partial.
    fn add_listener(&mut self, uid: String, key: ListenerKey, cookie: u64) {
        let state = self.state.entry(uid.clone()).or_default();
        let was_beyond = state.beyond_bounds();
        let known = state.listeners.get(&key);
        if known.is_some_and(|cookies| cookies.contains(&cookie)) {
            return;
        }
        if known.is_none() && state.listeners.len() >= MAX_LISTENERS_PER_POD {
            state.listeners_beyond = true;
        } else if state.sockets() >= MAX_LISTENING_SOCKETS_PER_POD {
            let cookies = state.listeners.entry(key).or_default();
            self.listeners_changed |= cookies.is_empty();
            state.untracked.insert(key);
        } else {
            let cookies = state.listeners.entry(key).or_default();
            self.listeners_changed |= cookies.is_empty();
            cookies.insert(cookie);
            if cookie != 0 {
                self.cookies.entry(cookie).or_default().push((uid, key));
            }
        }
        // Turning Partial is a listener-coverage change: worth an early report.
        self.listeners_changed |= state.beyond_bounds() != was_beyond;
    }

    fn count_connection(&mut self, uid: &str, key: ConnKey, now: Timestamp) {
        let cap = self.limits.tracked_per_pod.max(1);
        let state = self.state.entry(uid.to_owned()).or_default();
        if let Some(stats) = state.connections.get_mut(&key) {
            stats.count = stats.count.saturating_add(1);
            stats.last_seen = stats.last_seen.max(now);
            return;
        }
        if state.connections.len() >= cap {
            let least = state
                .connections
                .iter()
                .min_by_key(|(_, s)| (s.count, s.last_seen))
                .map(|(k, _)| *k);
            if let Some(least) = least {
                state.connections.remove(&least);
                self.evicted = true;
            }
        }
        state.connections.insert(
            key,
            ConnStats {
                first_seen: now,
                last_seen: now,
                count: 1,
            },
        );
    }

    fn owner(&self, event: &SocketEvent) -> Owner {
        let known = |uid: &String| self.pods.contains_key(uid);
        if event.netns_ino == self.view.host_netns {
            return match self.view.cgroup_pods.get(&event.cgroup_id) {
                Some(uid) if self.pods.get(uid).is_some_and(|p| p.host_network) => {
                    Owner::Pods(vec![uid.clone()])
                }
                Some(uid) if !known(uid) => Owner::Unknown,
                _ => Owner::Host,
            };
        }
        match self.view.netns_pods.get(&event.netns_ino) {
            Some(uids) => {
                let owners: Vec<String> = uids.iter().filter(|u| known(u)).cloned().collect();
                if owners.is_empty() {
                    Owner::Unknown
                } else {
                    Owner::Pods(owners)
                }
            }
            None => Owner::Unknown,
        }
    }

    /// The published view at `now`: one entry per pod of this node (sorted by namespace and
    /// name), bounded by [`Limits`], and whether a bound dropped anything. Clears the
    /// per-publish marks (overflow, evictions).
    pub fn publish(&mut self, now: Timestamp) -> (Vec<PodObservation>, bool) {
        let view = self.render(now);
        self.evicted = false;
        self.overflow = false;
        self.listeners_changed = false;
        view
    }

    /// Whether a pod's listeners (or the set of pods) changed since the last [`publish`] or
    /// [`take_listeners_changed`]: what an early report is for
    /// (docs/design/node-agent.md#report-stream).
    ///
    /// [`publish`]: Aggregator::publish
    /// [`take_listeners_changed`]: Aggregator::take_listeners_changed
    pub fn listeners_changed(&self) -> bool {
        self.listeners_changed
    }

    /// The view at `now` for an early report: [`Aggregator::publish`]'s view without clearing its
    /// per-publish marks, so the next publish still carries them; clears the listener mark.
    pub fn take_listeners_changed(&mut self, now: Timestamp) -> (Vec<PodObservation>, bool) {
        self.listeners_changed = false;
        self.render(now)
    }

    fn render(&self, now: Timestamp) -> (Vec<PodObservation>, bool) {
        let mut truncated = self.evicted;
        let overflow = self.overflow;
        let mut order: Vec<&PodMeta> = self.pods.values().collect();
        order.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        // No more pods than a report carries (docs/design/node-agent.md#bounds).
        if order.len() > MAX_PODS {
            order.truncate(MAX_PODS);
            truncated = true;
        }
        let empty = PodState::default();
        let ranked: Vec<Ranked<'_>> = order
            .into_iter()
            .map(|meta| {
                let state = self.state.get(&meta.uid).unwrap_or(&empty);
                let mut conns: Vec<(ConnKey, ConnStats)> =
                    state.connections.iter().map(|(k, s)| (*k, *s)).collect();
                conns.sort_by(|a, b| {
                    (b.1.count, b.1.last_seen)
                        .cmp(&(a.1.count, a.1.last_seen))
                        .then_with(|| conn_order(&a.0).cmp(&conn_order(&b.0)))
                });
                (meta, state, conns)
            })
            .collect();
        let mut limit = self.limits.top_connections.min(MAX_CONNECTIONS_PER_POD);
        loop {
            let mut pods = Vec::with_capacity(ranked.len());
            let mut cut = false;
            for (meta, state, conns) in &ranked {
                cut |= conns.len() > limit;
                let shown = &conns[..conns.len().min(limit)];
                pods.push(self.pod_view(meta, state, shown, overflow, now));
            }
            if fits(&pods, self.limits.max_bytes) {
                return (pods, truncated || cut);
            }
            if limit == 0 {
                // Even without connections the list is too large: drop whole pods from the end.
                truncated = true;
                while !pods.is_empty() && !fits(&pods, self.limits.max_bytes) {
                    pods.pop();
                }
                return (pods, truncated);
            }
            limit /= 2;
            truncated = true;
        }
    }

    fn pod_view(
        &self,
        meta: &PodMeta,
        state: &PodState,
        conns: &[(ConnKey, ConnStats)],
        overflow: bool,
        now: Timestamp,
    ) -> PodObservation {
        // Two dimensions (docs/design/node-agent.md#aggregation): the connection history since
        // the pod started, and the listeners it has now.
        let mut reasons = Vec::new();
        let mut listener_reasons = Vec::new();
        if meta.host_network {
            reasons.push(HOST_NETWORK);
            listener_reasons.push(HOST_NETWORK);
        } else if !self.found.contains(&meta.uid) {
            listener_reasons.push(NETNS_NOT_FOUND);
        }
        // The snapshot gave the listeners of a pod that ran before the agent; only its earlier
        // connections are unknown.
        if self.started_before_collection(meta, now) {
            reasons.push(STARTED_AFTER_POD);
        }
        if overflow {
            reasons.push(RING_BUFFER_OVERFLOW);
        }
        if let Some(reason) = self.stale_listeners {
            listener_reasons.push(reason);
        }
        if state.listeners_beyond {
            listener_reasons.push(LISTENERS_BEYOND_BOUND);
        }
        if !state.untracked.is_empty() {
            listener_reasons.push(SOCKETS_BEYOND_BOUND);
        }
        let (coverage, partial_reason) = coverage_of(&reasons);
        let (listener_coverage, listener_partial_reason) = coverage_of(&listener_reasons);
        PodObservation {
            uid: meta.uid.clone(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            coverage: Some(coverage),
            partial_reason,
            listener_coverage: Some(listener_coverage),
            listener_partial_reason,
            host_network: meta.host_network,
            listeners: state
                .listeners
                .keys()
                .map(|key| Listener {
                    protocol: Protocol::Tcp,
                    port: i32::from(key.port),
                    address: Some(key.address.to_string()),
                })
                .collect(),
            connections: conns
                .iter()
                .map(|(key, stats)| Connection {
                    direction: if key.outbound {
                        Direction::Outbound
                    } else {
                        Direction::Inbound
                    },
                    protocol: Protocol::Tcp,
                    peer_ip: key.peer_ip.to_string(),
                    peer_port: i32::from(key.peer_port),
                    first_seen: Some(Time(stats.first_seen)),
                    last_seen: Some(Time(stats.last_seen)),
                    count: i64::try_from(stats.count).unwrap_or(i64::MAX),
                })
                .collect(),
        }
    }

    /// The agent started after the pod, and the warm-up since collection started is not over
    /// (docs/design/node-agent.md#aggregation).
    fn started_before_collection(&self, meta: &PodMeta, now: Timestamp) -> bool {
        let Some(start) = self.collection_start else {
            return false;
        };
        let Some(pod_start) = meta.start_time else {
            return false;
        };
        let warm = SignedDuration::try_from(self.warm_up).unwrap_or(SignedDuration::MAX);
        pod_start < start && now.duration_since(start) < warm
    }
}

/// Removes one socket of a listener; returns whether the listener is gone (its last socket; a
/// listener with an untracked socket stays, docs/design/node-agent.md#bounds).
fn remove_cookie(state: Option<&mut PodState>, key: ListenerKey, cookie: u64) -> bool {
    let Some(state) = state else { return false };
    if let Some(cookies) = state.listeners.get_mut(&key) {
        cookies.remove(&cookie);
        if cookies.is_empty() && !state.untracked.contains(&key) {
            state.listeners.remove(&key);
            return true;
        }
    }
    false
}

/// Complete without reasons, else Partial with the reasons joined by ", ".
fn coverage_of(reasons: &[&str]) -> (PodCoverage, Option<String>) {
    if reasons.is_empty() {
        (PodCoverage::Complete, None)
    } else {
        (PodCoverage::Partial, Some(reasons.join(", ")))
    }
}

fn conn_order(key: &ConnKey) -> (bool, IpAddr, u16) {
    (key.outbound, key.peer_ip, key.peer_port)
}

fn fits(pods: &[PodObservation], max_bytes: usize) -> bool {
    serde_json::to_vec(pods).is_ok_and(|bytes| bytes.len() <= max_bytes)
}

#[cfg(test)]
#[path = "aggregate_tests.rs"]
mod tests;
