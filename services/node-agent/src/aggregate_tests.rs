#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;

use super::*;

const HOST_NS: u32 = 4_026_531_840;
const WEB_NS: u32 = 4_026_532_100;
const DB_NS: u32 = 4_026_532_200;
const AGENT_CG: u64 = 900;
const NEW_NS: u32 = 4_026_532_300;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn pod(uid: &str, name: &str, host_network: bool, started: i64) -> PodMeta {
    PodMeta {
        uid: uid.to_owned(),
        namespace: "shop".to_owned(),
        name: name.to_owned(),
        host_network,
        start_time: Some(at(started)),
    }
}

fn view() -> HostView {
    HostView {
        host_netns: HOST_NS,
        netns_pods: HashMap::from([
            (WEB_NS, BTreeSet::from(["uid-web".to_owned()])),
            (DB_NS, BTreeSet::from(["uid-db".to_owned()])),
        ]),
        cgroup_pods: HashMap::from([(AGENT_CG, "uid-agent".to_owned())]),
        snapshot: Vec::new(),
    }
}

fn ev(kind: SocketEventKind, netns: u32, local: &str, peer: &str, cookie: u64) -> SocketEvent {
    SocketEvent {
        kind,
        cgroup_id: 1,
        netns_ino: netns,
        local: local.parse::<SocketAddr>().unwrap(),
        peer: peer.parse::<SocketAddr>().unwrap(),
        cookie,
    }
}

fn started(limits: Limits) -> Aggregator {
    let mut agg = Aggregator::new(limits, Duration::from_mins(5));
    agg.set_pods([
        pod("uid-web", "web", false, 10),
        pod("uid-db", "db", false, 10),
        pod("uid-agent", "agent", true, 10),
    ]);
    agg.start(view(), at(0));
    agg
}

fn find<'a>(pods: &'a [PodObservation], name: &str) -> &'a PodObservation {
    pods.iter().find(|p| p.name == name).unwrap()
}

#[test]
fn listeners_and_connections_are_credited_by_network_namespace() {
    let mut agg = started(Limits::default());
    agg.apply(
        ev(
            SocketEventKind::Listen,
            WEB_NS,
            "0.0.0.0:8080",
            "0.0.0.0:0",
            7,
        ),
        at(20),
    );
    for t in [21, 25, 30] {
        agg.apply(
            ev(
                SocketEventKind::Outbound,
                WEB_NS,
                "10.244.0.5:40000",
                "10.96.0.12:5432",
                0,
            ),
            at(t),
        );
    }
    agg.apply(
        ev(
            SocketEventKind::Inbound,
            DB_NS,
            "10.244.0.6:5432",
            "10.244.0.5:40000",
            0,
        ),
        at(21),
    );
    agg.apply(
        ev(
            SocketEventKind::Inbound,
            DB_NS,
            "10.244.0.6:5432",
            "10.244.0.5:40001",
            0,
        ),
        at(22),
    );
    let (pods, truncated) = agg.publish(at(31));
    assert!(!truncated);
    assert_eq!(
        pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["agent", "db", "web"]
    );
    let web = find(&pods, "web");
    assert_eq!(web.coverage, Some(PodCoverage::Complete));
    assert_eq!(web.partial_reason, None);
    assert_eq!(
        web.listeners,
        [Listener {
            protocol: Protocol::Tcp,
            port: 8080,
            address: Some("0.0.0.0".into())
        }]
    );
    assert_eq!(web.connections.len(), 1);
    let c = &web.connections[0];
    assert_eq!(
        (c.direction, c.peer_ip.as_str(), c.peer_port, c.count),
        (Direction::Outbound, "10.96.0.12", 5432, 3)
    );
    assert_eq!(
        (c.first_seen.clone(), c.last_seen.clone()),
        (Some(Time(at(21))), Some(Time(at(30))))
    );
    // Inbound: aggregated by peer IP (the peer's port is ephemeral).
    let db = find(&pods, "db");
    assert_eq!(db.connections.len(), 1);
    assert_eq!(
        (
            db.connections[0].direction,
            db.connections[0].peer_port,
            db.connections[0].count
        ),
        (Direction::Inbound, 0, 2)
    );
}

#[test]
fn listen_closed_removes_the_listener_by_cookie_or_by_port_for_snapshot_entries() {
    let mut agg = Aggregator::new(Limits::default(), Duration::ZERO);
    agg.set_pods([pod("uid-web", "web", false, -100)]);
    let mut with_snapshot = view();
    with_snapshot.snapshot = vec![ev(
        SocketEventKind::Listen,
        WEB_NS,
        "0.0.0.0:9000",
        "0.0.0.0:0",
        0,
    )];
    agg.start(with_snapshot, at(0));
    agg.apply(
        ev(
            SocketEventKind::Listen,
            WEB_NS,
            "0.0.0.0:8080",
            "0.0.0.0:0",
            7,
        ),
        at(1),
    );
    let ports = |agg: &mut Aggregator| {
        let (pods, _) = agg.publish(at(2));
        pods[0].listeners.iter().map(|l| l.port).collect::<Vec<_>>()
    };
    assert_eq!(ports(&mut agg), [8080, 9000]);
    // The kernel may read port 0 on close: the cookie pairs it.
    agg.apply(
        ev(
            SocketEventKind::ListenClosed,
            WEB_NS,
            "0.0.0.0:0",
            "0.0.0.0:0",
            7,
        ),
        at(3),
    );
    assert_eq!(ports(&mut agg), [9000]);
    // A snapshot listener (cookie 0) pairs by address and port.
    agg.apply(
        ev(
            SocketEventKind::ListenClosed,
            WEB_NS,
            "0.0.0.0:9000",
            "0.0.0.0:0",
            99,
        ),
        at(4),
    );
    assert_eq!(ports(&mut agg), Vec::<i32>::new());
}

#[test]
fn coverage_reasons_host_network_started_after_pod_and_overflow() {
    let mut agg = Aggregator::new(Limits::default(), Duration::from_mins(5));
    agg.set_pods([
        pod("uid-web", "web", false, -100), // running before the agent
        pod("uid-db", "db", false, 10),     // started after the agent
        pod("uid-agent", "agent", true, 10),
    ]);
    agg.start(view(), at(0));
    // Host netns: split by the socket's cgroup; an unrelated host socket is not reported.
    let mut host = ev(
        SocketEventKind::Listen,
        HOST_NS,
        "0.0.0.0:9100",
        "0.0.0.0:0",
        3,
    );
    host.cgroup_id = AGENT_CG;
    agg.apply(host, at(1));
    host.cgroup_id = 12345;
    host.local = "0.0.0.0:22".parse().unwrap();
    agg.apply(host, at(1));
    let (pods, _) = agg.publish(at(60));
    let reason = |pods: &[PodObservation], name: &str| find(pods, name).partial_reason.clone();
    assert_eq!(reason(&pods, "web").as_deref(), Some(STARTED_AFTER_POD));
    assert_eq!(find(&pods, "db").coverage, Some(PodCoverage::Complete));
    let agent = find(&pods, "agent");
    assert_eq!(agent.partial_reason.as_deref(), Some(HOST_NETWORK));
    assert_eq!(
        agent.listeners.iter().map(|l| l.port).collect::<Vec<_>>(),
        [9100]
    );

    // After the warm-up the early pod reads Complete; drops mark every pod for one publish.
    agg.note_drops(5);
    let (pods, _) = agg.publish(at(301));
    assert_eq!(reason(&pods, "web").as_deref(), Some(RING_BUFFER_OVERFLOW));
    assert_eq!(
        reason(&pods, "agent").as_deref(),
        Some("hostNetwork, ring buffer overflow")
    );
    agg.note_drops(5);
    let (pods, _) = agg.publish(at(331));
    assert_eq!(find(&pods, "web").coverage, Some(PodCoverage::Complete));
}

#[test]
fn events_for_an_unknown_namespace_wait_for_the_next_scan() {
    let mut agg = started(Limits::default());
    agg.apply(
        ev(
            SocketEventKind::Listen,
            NEW_NS,
            "0.0.0.0:7000",
            "0.0.0.0:0",
            1,
        ),
        at(1),
    );
    assert!(agg.wants_scan());
    let mut pods: Vec<PodMeta> = ["web", "db"]
        .iter()
        .map(|n| pod(&format!("uid-{n}"), n, false, 10))
        .collect();
    pods.push(pod("uid-new", "new", false, 10));
    agg.set_pods(pods);
    let mut v = view();
    v.netns_pods
        .insert(NEW_NS, BTreeSet::from(["uid-new".to_owned()]));
    agg.set_view(v, at(2));
    assert!(!agg.wants_scan());
    let (pods, _) = agg.publish(at(3));
    assert_eq!(find(&pods, "new").listeners.len(), 1);
    // A pod that left the node takes its view with it.
    agg.set_pods([pod("uid-web", "web", false, 10)]);
    assert_eq!(agg.publish(at(4)).0.len(), 1);
}

#[test]
fn top_n_and_size_cap_set_truncated() {
    let limits = Limits {
        top_connections: 2,
        max_bytes: 1024 * 1024,
        tracked_per_pod: 100,
    };
    let mut agg = started(limits);
    for (port, times) in [(1_u16, 1), (2, 3), (3, 2)] {
        for t in 0..times {
            agg.apply(
                ev(
                    SocketEventKind::Outbound,
                    WEB_NS,
                    "10.0.0.1:1",
                    &format!("10.0.0.9:{port}"),
                    0,
                ),
                at(20 + t),
            );
        }
    }
    let (pods, truncated) = agg.publish(at(30));
    assert!(truncated);
    let ports: Vec<i32> = find(&pods, "web")
        .connections
        .iter()
        .map(|c| c.peer_port)
        .collect();
    assert_eq!(ports, [2, 3], "most frequent first");

    // A tiny size cap: connections go first, then whole pods; never a panic.
    let limits = Limits {
        top_connections: 50,
        max_bytes: 300,
        tracked_per_pod: 100,
    };
    let mut agg = started(limits);
    for port in 0..200_u16 {
        agg.apply(
            ev(
                SocketEventKind::Outbound,
                WEB_NS,
                "10.0.0.1:1",
                &format!("10.0.0.9:{port}"),
                0,
            ),
            at(20),
        );
    }
    let (pods, truncated) = agg.publish(at(30));
    assert!(truncated);
    assert!(serde_json::to_vec(&pods).unwrap().len() <= 300);

    // The in-memory cap forgets the least used entry and says so once.
    let limits = Limits {
        top_connections: 50,
        max_bytes: 1024 * 1024,
        tracked_per_pod: 3,
    };
    let mut agg = started(limits);
    for port in 0..5_u16 {
        agg.apply(
            ev(
                SocketEventKind::Outbound,
                WEB_NS,
                "10.0.0.1:1",
                &format!("10.0.0.9:{port}"),
                0,
            ),
            at(20),
        );
    }
    let (pods, truncated) = agg.publish(at(30));
    assert!(truncated);
    assert_eq!(find(&pods, "web").connections.len(), 3);
    assert!(!agg.publish(at(31)).1);
}

#[test]
fn arbitrary_events_never_panic() {
    let mut agg = started(Limits {
        top_connections: 1,
        max_bytes: 10,
        tracked_per_pod: 1,
    });
    let kinds = [
        SocketEventKind::Listen,
        SocketEventKind::ListenClosed,
        SocketEventKind::Outbound,
        SocketEventKind::Inbound,
    ];
    for i in 0..10_000_u32 {
        let kind = kinds[(i % 4) as usize];
        let netns = [HOST_NS, WEB_NS, DB_NS, 0, u32::MAX][(i % 5) as usize];
        let mut e = ev(kind, netns, "[::]:0", "[::1]:65535", u64::from(i % 7));
        e.cgroup_id = u64::from(i % 3) * AGENT_CG;
        agg.apply(e, at(i64::from(i % 50)));
        agg.note_drops(u64::from(i));
    }
    let _ = agg.publish(at(100));
}

/// What an early report is for: a listener opened (first socket on its address and port) or
/// closed (its last socket), or the set of pods changed; not a second socket of a listener, not a
/// connection. Publishing clears the mark, and so does taking it, which keeps the per-publish
/// marks (overflow) for the next publish.
#[test]
fn listener_changes_mark_an_early_report_and_connections_do_not() {
    let mut agg = started(Limits::default());
    agg.publish(at(1));
    assert!(!agg.listeners_changed());
    let listen = |cookie| {
        ev(
            SocketEventKind::Listen,
            WEB_NS,
            "0.0.0.0:8080",
            "0.0.0.0:0",
            cookie,
        )
    };
    let closed = |cookie| {
        ev(
            SocketEventKind::ListenClosed,
            WEB_NS,
            "0.0.0.0:8080",
            "0.0.0.0:0",
            cookie,
        )
    };
    agg.apply(listen(7), at(2));
    assert!(agg.listeners_changed(), "a new listener");
    let (pods, _) = agg.take_listeners_changed(at(2));
    assert_eq!(find(&pods, "web").listeners.len(), 1);
    assert!(!agg.listeners_changed());

    // A second socket on the same address and port (SO_REUSEPORT), then a connection: the
    // listener set is unchanged.
    agg.apply(listen(8), at(3));
    agg.apply(
        ev(
            SocketEventKind::Outbound,
            WEB_NS,
            "10.244.0.5:40000",
            "10.96.0.12:5432",
            0,
        ),
        at(3),
    );
    assert!(!agg.listeners_changed());
    // One of the two closes: still listening. The last closes: changed.
    agg.apply(closed(7), at(4));
    assert!(!agg.listeners_changed());
    agg.note_drops(2);
    agg.apply(closed(8), at(5));
    assert!(agg.listeners_changed(), "the listener is gone");
    let (pods, _) = agg.take_listeners_changed(at(5));
    let web = find(&pods, "web");
    assert!(web.listeners.is_empty(), "{web:?}");
    assert_eq!(web.coverage, Some(PodCoverage::Partial), "{web:?}");
    // The early view did not consume the overflow mark: the publish carries it, then clears it.
    let (pods, _) = agg.publish(at(6));
    let web = find(&pods, "web");
    assert!(
        web.partial_reason
            .as_deref()
            .is_some_and(|r| r.contains("ring buffer overflow")),
        "{web:?}"
    );
    let (pods, _) = agg.publish(at(7));
    assert!(
        !find(&pods, "web")
            .partial_reason
            .as_deref()
            .unwrap_or_default()
            .contains("ring buffer overflow")
    );

    // A pod added or removed changes what a report says; the same pods again do not.
    agg.set_pods([
        pod("uid-web", "web", false, 10),
        pod("uid-db", "db", false, 10),
        pod("uid-agent", "agent", true, 10),
    ]);
    assert!(!agg.listeners_changed());
    agg.set_pods([pod("uid-web", "web", false, 10)]);
    assert!(agg.listeners_changed());
    agg.publish(at(8));
    assert!(!agg.listeners_changed());
}

fn listen_at(netns: u32, local: &str, cookie: u64) -> SocketEvent {
    ev(SocketEventKind::Listen, netns, local, "0.0.0.0:0", cookie)
}

fn ports_of(pods: &[PodObservation], name: &str) -> Vec<i32> {
    find(pods, name).listeners.iter().map(|l| l.port).collect()
}

fn listener_cov(pods: &[PodObservation], name: &str) -> (Option<PodCoverage>, Option<String>) {
    let pod = find(pods, name);
    (pod.listener_coverage, pod.listener_partial_reason.clone())
}

const COMPLETE: (Option<PodCoverage>, Option<String>) = (Some(PodCoverage::Complete), None);

fn partial(reason: &str) -> (Option<PodCoverage>, Option<String>) {
    (Some(PodCoverage::Partial), Some(reason.to_owned()))
}

/// An agent restart must not make every pod's listeners Partial for the warm-up: the start-up
/// snapshot gives them completely; only the connection history is Partial.
#[test]
fn started_after_pod_marks_only_the_connection_history_partial() {
    let mut agg = Aggregator::new(Limits::default(), Duration::from_mins(5));
    agg.set_pods([pod("uid-web", "web", false, -100)]);
    let mut v = view();
    v.snapshot = vec![listen_at(WEB_NS, "0.0.0.0:8080", 0)];
    agg.start(v, at(0));
    let (pods, _) = agg.publish(at(10));
    let web = find(&pods, "web");
    assert_eq!(
        (web.coverage, web.partial_reason.as_deref()),
        (Some(PodCoverage::Partial), Some(STARTED_AFTER_POD))
    );
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
    assert!(!web.host_network);
    assert_eq!(ports_of(&pods, "web"), [8080]);
    let (pods, _) = agg.publish(at(301));
    assert_eq!(find(&pods, "web").coverage, Some(PodCoverage::Complete));
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
}

#[test]
fn host_network_pods_are_partial_in_both_dimensions_and_say_so() {
    let mut agg = started(Limits::default());
    let (pods, _) = agg.publish(at(400));
    let agent = find(&pods, "agent");
    assert!(agent.host_network);
    assert_eq!(
        (agent.coverage, agent.partial_reason.as_deref()),
        (Some(PodCoverage::Partial), Some(HOST_NETWORK))
    );
    assert_eq!(listener_cov(&pods, "agent"), partial(HOST_NETWORK));
    assert!(!find(&pods, "web").host_network);
}

#[test]
fn a_pod_whose_namespace_no_scan_found_has_partial_listeners_until_one_does() {
    let mut agg = started(Limits::default());
    agg.set_pods([
        pod("uid-web", "web", false, 10),
        pod("uid-new", "new", false, 20),
    ]);
    agg.take_listeners_changed(at(20));
    let (pods, _) = agg.publish(at(21));
    assert_eq!(listener_cov(&pods, "new"), partial(NETNS_NOT_FOUND));
    assert_eq!(find(&pods, "new").coverage, Some(PodCoverage::Complete));
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
    // A scan that still does not know it changes nothing; the one that finds it is worth an
    // early report (the listener coverage changed).
    agg.set_view(view(), at(22));
    assert!(!agg.listeners_changed());
    let mut v = view();
    v.netns_pods
        .insert(NEW_NS, BTreeSet::from(["uid-new".to_owned()]));
    agg.set_view(v, at(23));
    assert!(agg.listeners_changed());
    let (pods, _) = agg.publish(at(24));
    assert_eq!(listener_cov(&pods, "new"), COMPLETE);
}

/// Drops: connections Partial for that publish; listeners Partial only until the socket snapshot
/// taken after the drops repaired them (cookies of surviving listeners kept, vanished ones
/// removed, unseen ones added with cookie 0), then events apply on top.
#[test]
fn overflow_repairs_listeners_from_a_snapshot_and_connections_stay_partial_once() {
    let mut agg = started(Limits::default());
    agg.apply(listen_at(WEB_NS, "0.0.0.0:8080", 7), at(1));
    agg.apply(listen_at(WEB_NS, "0.0.0.0:9000", 8), at(1));
    agg.apply(listen_at(DB_NS, "0.0.0.0:5432", 9), at(1));
    let mut host = listen_at(HOST_NS, "0.0.0.0:9100", 3);
    host.cgroup_id = AGENT_CG;
    agg.apply(host, at(1));
    agg.publish(at(2));
    assert!(!agg.wants_snapshot());

    // Lost meanwhile: 9000 closed, 7000 opened; db's namespace is not in the next scan.
    agg.note_drops(4);
    assert!(agg.wants_snapshot());
    let (pods, _) = agg.take_listeners_changed(at(3));
    assert_eq!(listener_cov(&pods, "web"), partial(RING_BUFFER_OVERFLOW));
    let mut v = view();
    v.netns_pods.remove(&DB_NS);
    v.snapshot = vec![
        listen_at(WEB_NS, "0.0.0.0:8080", 0),
        listen_at(WEB_NS, "0.0.0.0:7000", 0),
        ev(
            SocketEventKind::Outbound,
            WEB_NS,
            "10.0.0.1:1",
            "10.0.0.9:80",
            0,
        ),
    ];
    agg.resync_listeners(v, at(3));
    assert!(!agg.wants_snapshot());
    assert!(agg.listeners_changed());
    let (pods, _) = agg.publish(at(4));
    assert_eq!(ports_of(&pods, "web"), [7000, 8080]);
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
    let web = find(&pods, "web");
    assert_eq!(web.partial_reason.as_deref(), Some(RING_BUFFER_OVERFLOW));
    assert!(
        web.connections.is_empty(),
        "snapshot connections are not counted again"
    );
    // Not in the scan: db keeps its listeners (Partial: namespace not found); the hostNetwork
    // pod keeps its own.
    assert_eq!(ports_of(&pods, "db"), [5432]);
    assert_eq!(listener_cov(&pods, "db"), partial(NETNS_NOT_FOUND));
    assert_eq!(ports_of(&pods, "agent"), [9100]);

    // Events on top: the kept listener still closes by its cookie, the new one by its port;
    // the removed one's cookie is forgotten.
    agg.apply(
        ev(
            SocketEventKind::ListenClosed,
            WEB_NS,
            "0.0.0.0:0",
            "0.0.0.0:0",
            7,
        ),
        at(5),
    );
    agg.apply(
        ev(
            SocketEventKind::ListenClosed,
            WEB_NS,
            "0.0.0.0:9000",
            "0.0.0.0:0",
            8,
        ),
        at(5),
    );
    assert_eq!(ports_of(&agg.publish(at(6)).0, "web"), [7000]);
    agg.apply(
        ev(
            SocketEventKind::ListenClosed,
            WEB_NS,
            "0.0.0.0:7000",
            "0.0.0.0:0",
            55,
        ),
        at(7),
    );
    let (pods, _) = agg.publish(at(8));
    assert!(ports_of(&pods, "web").is_empty());
    assert_eq!(find(&pods, "web").coverage, Some(PodCoverage::Complete));
}

#[test]
fn a_failed_snapshot_keeps_listeners_partial_until_one_succeeds() {
    let mut agg = started(Limits::default());
    agg.apply(listen_at(WEB_NS, "0.0.0.0:8080", 7), at(1));
    agg.publish(at(2));
    agg.note_drops(1);
    agg.snapshot_failed();
    assert!(agg.listeners_changed(), "the listeners turned Partial");
    agg.take_listeners_changed(at(3));
    agg.snapshot_failed();
    assert!(!agg.listeners_changed(), "said once, not at every retry");
    let (pods, _) = agg.publish(at(4));
    assert_eq!(listener_cov(&pods, "web"), partial(RING_BUFFER_OVERFLOW));
    // The next publish: connections are Complete again, listeners still wait for a snapshot.
    let (pods, _) = agg.publish(at(5));
    assert_eq!(find(&pods, "web").coverage, Some(PodCoverage::Complete));
    assert_eq!(listener_cov(&pods, "web"), partial(RING_BUFFER_OVERFLOW));
    assert!(agg.wants_snapshot());
    let mut v = view();
    v.snapshot = vec![listen_at(WEB_NS, "0.0.0.0:8080", 0)];
    agg.resync_listeners(v, at(6));
    assert!(agg.listeners_changed(), "Complete again");
    let (pods, _) = agg.publish(at(7));
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
    assert_eq!(ports_of(&pods, "web"), [8080]);
}

#[test]
fn a_failed_start_up_snapshot_marks_listeners_until_a_snapshot_succeeds() {
    let mut agg = Aggregator::new(Limits::default(), Duration::from_mins(5));
    agg.set_pods([pod("uid-web", "web", false, -100)]);
    agg.start_without_snapshot(at(0));
    assert!(agg.wants_snapshot());
    // A plain rescan finds the namespace, but listeners opened before the start stay unknown.
    agg.set_view(view(), at(1));
    let (pods, _) = agg.publish(at(2));
    assert_eq!(listener_cov(&pods, "web"), partial(SNAPSHOT_FAILED));
    let mut v = view();
    v.snapshot = vec![listen_at(WEB_NS, "0.0.0.0:8080", 0)];
    agg.resync_listeners(v, at(3));
    let (pods, _) = agg.publish(at(4));
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
    assert_eq!(ports_of(&pods, "web"), [8080]);
    assert_eq!(
        find(&pods, "web").partial_reason.as_deref(),
        Some(STARTED_AFTER_POD)
    );
}

/// Bounds shared with the observer (docs/design/node-agent.md#bounds): a pod with more listeners
/// than a report may carry keeps 256 of them and reads Partial "more than 256 listeners" in that
/// dimension alone; the other pods stay Complete, and nothing makes the whole report too large.
/// Closing listeners does not make it Complete (the ones not kept may still listen); a socket
/// snapshot within the bound does.
#[test]
fn a_pod_with_more_listeners_than_a_report_carries_is_partial_alone() {
    let mut agg = started(Limits::default());
    agg.apply(listen_at(DB_NS, "0.0.0.0:5432", 1), at(1));
    for port in 1..=300_u16 {
        agg.apply(
            listen_at(WEB_NS, &format!("0.0.0.0:{port}"), 1000 + u64::from(port)),
            at(1),
        );
    }
    let (pods, _) = agg.publish(at(2));
    assert_eq!(ports_of(&pods, "web"), (1..=256).collect::<Vec<i32>>());
    assert_eq!(
        listener_cov(&pods, "web"),
        partial("more than 256 listeners")
    );
    assert_eq!(find(&pods, "web").coverage, Some(PodCoverage::Complete));
    assert_eq!(listener_cov(&pods, "db"), COMPLETE);
    assert_eq!(ports_of(&pods, "db"), [5432]);

    for port in 1..=100_u16 {
        agg.apply(
            ev(
                SocketEventKind::ListenClosed,
                WEB_NS,
                "0.0.0.0:0",
                "0.0.0.0:0",
                1000 + u64::from(port),
            ),
            at(3),
        );
    }
    let (pods, _) = agg.publish(at(4));
    assert_eq!(ports_of(&pods, "web").len(), 156);
    assert_eq!(
        listener_cov(&pods, "web"),
        partial("more than 256 listeners")
    );
    assert!(
        agg.wants_listener_resync(),
        "a capped pod asks for a snapshot"
    );

    // A snapshot still beyond the bound keeps the lowest 256, Partial.
    let mut v = view();
    v.snapshot = (1..=300_u16)
        .map(|port| listen_at(WEB_NS, &format!("0.0.0.0:{port}"), 0))
        .collect();
    agg.resync_listeners(v, at(5));
    let (pods, _) = agg.publish(at(6));
    assert_eq!(ports_of(&pods, "web"), (1..=256).collect::<Vec<i32>>());
    assert_eq!(
        listener_cov(&pods, "web"),
        partial("more than 256 listeners")
    );
    // One within it: Complete again, exactly the snapshot's listeners.
    let mut v = view();
    v.snapshot = (101..=300_u16)
        .map(|port| listen_at(WEB_NS, &format!("0.0.0.0:{port}"), 0))
        .collect();
    agg.resync_listeners(v, at(7));
    assert!(agg.listeners_changed());
    assert!(!agg.wants_listener_resync());
    let (pods, _) = agg.publish(at(8));
    assert_eq!(ports_of(&pods, "web"), (101..=300).collect::<Vec<i32>>());
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
}

/// Per-listener socket sets (SO_REUSEPORT puts many sockets on one address and port) are bounded:
/// at most 4096 listening sockets are tracked per pod. Beyond that the pod's listeners read
/// Partial, and the listener is not removed when the tracked sockets close (an untracked one may
/// still listen) — only a snapshot that no longer lists it removes it.
#[test]
fn listening_sockets_beyond_the_bound_are_not_tracked_and_mark_the_pod_partial() {
    let mut agg = started(Limits::default());
    agg.apply(listen_at(DB_NS, "0.0.0.0:5432", 1), at(1));
    for cookie in 10..4110_u64 {
        agg.apply(listen_at(WEB_NS, "0.0.0.0:8080", cookie), at(1));
    }
    assert!(
        agg.cookies.len() <= 4096 + 1,
        "tracked sockets: {}",
        agg.cookies.len()
    );
    let (pods, _) = agg.publish(at(2));
    assert_eq!(ports_of(&pods, "web"), [8080]);
    assert_eq!(
        listener_cov(&pods, "web"),
        partial("more than 4096 listening sockets")
    );
    assert_eq!(listener_cov(&pods, "db"), COMPLETE);
    for cookie in 10..4110_u64 {
        agg.apply(
            ev(
                SocketEventKind::ListenClosed,
                WEB_NS,
                "0.0.0.0:0",
                "0.0.0.0:0",
                cookie,
            ),
            at(3),
        );
    }
    let (pods, _) = agg.publish(at(4));
    assert_eq!(
        ports_of(&pods, "web"),
        [8080],
        "untracked sockets may remain"
    );
    assert!(agg.wants_listener_resync());
    let mut v = view();
    v.snapshot = vec![listen_at(WEB_NS, "0.0.0.0:9090", 0)];
    agg.resync_listeners(v, at(5));
    let (pods, _) = agg.publish(at(6));
    assert_eq!(ports_of(&pods, "web"), [9090]);
    assert_eq!(listener_cov(&pods, "web"), COMPLETE);
}

/// What the agent publishes never exceeds what the observer accepts: at most 1000 pods (the
/// rest dropped, `truncated`) and at most 1000 connections per pod whatever `--top-connections`
/// says.
#[test]
fn the_published_view_stays_within_the_report_bounds() {
    let mut agg = Aggregator::new(
        Limits {
            top_connections: 5000,
            ..Limits::default()
        },
        Duration::ZERO,
    );
    agg.set_pods((0..1005).map(|i| pod(&format!("uid-{i:04}"), &format!("p{i:04}"), false, 10)));
    let mut v = view();
    v.netns_pods
        .insert(WEB_NS, BTreeSet::from(["uid-0000".to_owned()]));
    agg.start(v, at(0));
    for port in 1..=1200_u16 {
        agg.apply(
            ev(
                SocketEventKind::Outbound,
                WEB_NS,
                "10.0.0.1:1",
                &format!("10.0.0.9:{port}"),
                0,
            ),
            at(1),
        );
    }
    let (pods, truncated) = agg.publish(at(2));
    assert!(truncated);
    assert_eq!(pods.len(), 1000);
    assert_eq!(find(&pods, "p0000").connections.len(), 1000);
}
