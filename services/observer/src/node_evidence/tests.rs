#![allow(
    clippy::unwrap_used,
    reason = "tests: a malformed fixture should fail the test"
)]

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};
use pacto_engine::DependencyValue;
use pacto_runtime::CancellationToken;
use serde_json::json;

use super::*;
use crate::interfaces::fixtures::{port, service, slice_with as slice};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix(1_800_000_000 + seconds, 0).unwrap()
}

const STALE_AFTER: Duration = Duration::from_secs(90);

fn view(published: Option<i64>, pods: &[(&str, PodView)]) -> NodeView {
    NodeView {
        last_published: published.map(at),
        failed: None,
        pods: pods
            .iter()
            .map(|(uid, v)| ((*uid).to_owned(), v.clone()))
            .collect(),
    }
}

fn listening(ports: &[u32]) -> PodView {
    PodView {
        listening: ports.iter().copied().collect(),
        ..PodView::default()
    }
}

fn sources(view: Option<NodeView>, lease: Option<i64>) -> NodeSources {
    NodeSources {
        view,
        streamed: false,
        lease_renewed: lease.map(at),
    }
}

fn is_stale(state: &NodeState) -> bool {
    matches!(state, NodeState::Stale(..))
}

#[test]
fn the_newer_of_lease_and_observation_decides_freshness() {
    let now = at(1000);
    // Lease far older than the observation: the observation's lastPublished decides.
    let lease_old = sources(Some(view(Some(950), &[])), Some(100));
    assert!(matches!(
        assess("n1", &lease_old, &now, STALE_AFTER),
        NodeState::Fresh(_)
    ));
    // Observation far older than the Lease: the Lease decides.
    let observation_old = sources(Some(view(Some(100), &[])), Some(990));
    assert!(matches!(
        assess("n1", &observation_old, &now, STALE_AFTER),
        NodeState::Fresh(_)
    ));
    // Both old: stale, and the newer of the two is when the node was last heard from.
    let both_old = sources(Some(view(Some(800), &[])), Some(850));
    let state = assess("n1", &both_old, &now, STALE_AFTER);
    let NodeState::Stale(why, heard) = state else {
        panic!("expected stale, got {state:?}");
    };
    assert_eq!(heard, Some(at(850)));
    assert!(why.contains("node-agent") && why.contains("n1"), "{why}");
}

#[test]
fn exactly_stale_after_is_still_fresh() {
    let now = at(1000);
    let boundary = sources(Some(view(Some(910), &[])), Some(910));
    assert!(!is_stale(&assess("n1", &boundary, &now, STALE_AFTER)));
    let beyond = sources(Some(view(Some(909), &[])), Some(909));
    assert!(is_stale(&assess("n1", &beyond, &now, STALE_AFTER)));
}

#[test]
fn a_missing_observation_or_lease_is_stale() {
    let now = at(1000);
    let no_observation = assess("n1", &sources(None, Some(999)), &now, STALE_AFTER);
    assert!(
        matches!(&no_observation, NodeState::Stale(why, _) if why.contains("no NodeRuntimeObservation")),
        "{no_observation:?}"
    );
    let no_lease = assess(
        "n1",
        &sources(Some(view(Some(999), &[])), None),
        &now,
        STALE_AFTER,
    );
    assert!(
        matches!(&no_lease, NodeState::Stale(why, _) if why.contains("no renewed Lease")),
        "{no_lease:?}"
    );
}

#[test]
fn every_stale_message_says_when_the_node_was_last_heard_from() {
    let now = at(1000);
    let heard = at(999).to_rfc3339_seconds();
    for (sources, want) in [
        (sources(None, Some(999)), format!("last heard at {heard}")),
        (
            sources(Some(view(Some(999), &[])), None),
            format!("last heard at {heard}"),
        ),
        (sources(None, None), "never heard from".to_owned()),
        (
            sources(Some(view(Some(900), &[])), Some(900)),
            format!("last heard at {}", at(900).to_rfc3339_seconds()),
        ),
    ] {
        let state = assess("n1", &sources, &now, STALE_AFTER);
        assert!(
            matches!(&state, NodeState::Stale(why, _) if why.contains(&want)),
            "{state:?} should say {want:?}"
        );
    }
}

#[test]
fn failed_collection_carries_the_agents_reason_unless_stale() {
    let now = at(1000);
    let mut failed = view(Some(999), &[]);
    failed.failed = Some((
        "BTFUnavailable".into(),
        "/sys/kernel/btf/vmlinux: not found".into(),
    ));
    let state = assess(
        "n1",
        &sources(Some(failed.clone()), Some(999)),
        &now,
        STALE_AFTER,
    );
    assert_eq!(
        state,
        NodeState::Failed(
            "the node agent on node n1 reports collection Failed: BTFUnavailable: /sys/kernel/btf/vmlinux: not found"
                .into()
        )
    );
    failed.last_published = Some(at(1));
    assert!(is_stale(&assess(
        "n1",
        &sources(Some(failed), Some(1)),
        &now,
        STALE_AFTER
    )));
}

fn pod(uid: &str, node: Option<&str>) -> PodRef {
    PodRef {
        uid: uid.into(),
        name: format!("ns/{uid}"),
        node: node.map(str::to_owned),
    }
}

fn fresh(pods: &[(&str, PodView)]) -> NodeState {
    NodeState::Fresh(view(Some(0), pods))
}

#[test]
fn partial_or_absent_pods_are_insufficient_failed_beats_them_and_stale_beats_all() {
    let partial = PodView {
        listeners_partial: Some("ring buffer overflow".into()),
        connections_partial: Some("ring buffer overflow".into()),
        ..PodView::default()
    };
    let nodes = NodeStates::from([
        (
            "a".into(),
            fresh(&[("p1", listening(&[80])), ("p2", partial)]),
        ),
        (
            "f".into(),
            NodeState::Failed("collection Failed: BTF".into()),
        ),
        ("s".into(), NodeState::Stale("stale".into(), Some(at(5)))),
    ]);
    assert_eq!(
        views([&pod("p1", Some("a"))], &nodes, Need::Listeners)
            .unwrap()
            .len(),
        1
    );
    let partial = views([&pod("p2", Some("a"))], &nodes, Need::Listeners).unwrap_err();
    assert_eq!(partial.outcome, Outcome::Insufficient);
    assert!(
        partial
            .why
            .contains("listeners of pod ns/p2 on node a are Partial (ring buffer overflow)"),
        "{}",
        partial.why
    );
    let absent = views([&pod("p3", Some("a"))], &nodes, Need::Listeners).unwrap_err();
    assert_eq!(absent.outcome, Outcome::Insufficient);
    assert!(
        absent
            .why
            .contains("missing from the observation of node a")
    );
    let no_node = views([&pod("p4", None)], &nodes, Need::Listeners).unwrap_err();
    assert_eq!(no_node.outcome, Outcome::Insufficient);
    let failed = views(
        [&pod("p3", Some("a")), &pod("x", Some("f"))],
        &nodes,
        Need::Listeners,
    )
    .unwrap_err();
    assert_eq!(failed.outcome, Outcome::Failed);
    let stale = views(
        [
            &pod("x", Some("f")),
            &pod("p2", Some("a")),
            &pod("y", Some("s")),
        ],
        &nodes,
        Need::Listeners,
    )
    .unwrap_err();
    assert_eq!((stale.outcome, stale.heard), (Outcome::Stale, Some(at(5))));
    // A node nobody read is stale too.
    let unread = views([&pod("z", Some("elsewhere"))], &nodes, Need::Listeners).unwrap_err();
    assert_eq!(unread.outcome, Outcome::Stale);
}

fn present(value: bool) -> Value {
    interface_value("openapi", value)
}

#[test]
fn interfaces_qualified_and_decided_by_listen_sockets() {
    let nodes = NodeStates::from([
        (
            "a".into(),
            fresh(&[("p1", listening(&[8080])), ("p2", listening(&[9090]))]),
        ),
        (
            "s".into(),
            NodeState::Stale("node-agent evidence of node s is stale".into(), Some(at(7))),
        ),
    ]);
    let k8s_found = Verdict::Clear(Outcome::Observed(present(true)));
    // Ready and listening on the targetPort: found, with the combined collector.
    let all = InterfaceCheck::Qualify(vec![(pod("p1", Some("a")), 8080)]);
    let decided = interface_rule(k8s_found.clone(), &all, "openapi", &nodes);
    assert_eq!(decided.verdict, k8s_found);
    assert_eq!(decided.collector, COLLECTOR_WITH_EBPF);
    // Ready but no LISTEN socket on the targetPort: a windowed negative.
    let silent = InterfaceCheck::Qualify(vec![
        (pod("p1", Some("a")), 8080),
        (pod("p2", Some("a")), 8080),
    ]);
    let decided = interface_rule(k8s_found.clone(), &silent, "openapi", &nodes);
    assert_eq!(decided.verdict, Verdict::Negative(present(false)));
    assert_eq!(decided.collector, COLLECTOR_WITH_EBPF);
    assert!(
        decided
            .detail
            .unwrap()
            .contains("no LISTEN socket on port 8080")
    );
    // Stale evidence: Stale, never a violation, dated when the node was last heard from.
    let stale = InterfaceCheck::Qualify(vec![(pod("q", Some("s")), 8080)]);
    let decided = interface_rule(k8s_found.clone(), &stale, "openapi", &nodes);
    assert_eq!(decided.verdict, Verdict::Report(Outcome::Stale));
    assert_eq!(decided.detected_at, Some(at(7)));
    // The agent's data decided nothing: the Kubernetes collector.
    assert_eq!(decided.collector, crate::verdict::COLLECTOR);
    // Nothing to check: the Kubernetes verdict, with the Kubernetes collector.
    let negative = Verdict::Negative(present(false));
    let decided = interface_rule(
        negative.clone(),
        &InterfaceCheck::Nothing,
        "openapi",
        &nodes,
    );
    assert_eq!(decided, Decided::kubernetes(negative));
    // Deciding an insufficient interface: every Ready pod listens ⇒ found; otherwise unchanged.
    let insufficient = Verdict::insufficient();
    let decide = InterfaceCheck::Decide(vec![(pod("p2", Some("a")), 9090)]);
    let decided = interface_rule(insufficient.clone(), &decide, "openapi", &nodes);
    assert_eq!(
        (decided.verdict, decided.collector),
        (
            Verdict::Clear(Outcome::Observed(present(true))),
            COLLECTOR_WITH_EBPF
        )
    );
    let undecided = InterfaceCheck::Decide(vec![
        (pod("p1", Some("a")), 9090),
        (pod("p2", Some("a")), 9090),
    ]);
    let decided = interface_rule(insufficient.clone(), &undecided, "openapi", &nodes);
    assert_eq!(decided, Decided::kubernetes(insufficient));
}

fn endpoint(uid: &str, node: &str, ip: &str, ready: bool) -> Endpoint {
    Endpoint {
        addresses: vec![ip.into()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            ..EndpointConditions::default()
        }),
        node_name: Some(node.into()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("ns".into()),
            name: Some(uid.into()),
            uid: Some(uid.into()),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    }
}

#[test]
fn interface_checks_use_the_ready_pods_and_the_resolved_target_port() {
    let svc = service(vec![port(Some("http"), 80, Some(IntOrString::Int(8080)))]);
    let slices = vec![slice(
        &[(Some("http"), 8080)],
        vec![
            endpoint("p1", "a", "10.0.0.1", true),
            endpoint("p2", "b", "10.0.0.2", false),
        ],
    )];
    let by_name = IntOrString::String("http".into());
    assert_eq!(
        interface_check(
            Some(&by_name),
            &Ok(Some(svc.clone())),
            &Ok(Some(slices.clone()))
        ),
        InterfaceCheck::Qualify(vec![(
            PodRef {
                uid: "p1".into(),
                name: "ns/p1".into(),
                node: Some("a".into())
            },
            8080
        )])
    );
    // A bound number the Service does not have: decided on that number.
    let missing = IntOrString::Int(9090);
    let check = interface_check(
        Some(&missing),
        &Ok(Some(svc.clone())),
        &Ok(Some(slices.clone())),
    );
    assert!(matches!(&check, InterfaceCheck::Decide(p) if p.len() == 1 && p[0].1 == 9090));
    // Unbound, or no Ready endpoint: nothing to add.
    assert_eq!(
        interface_check(None, &Ok(Some(svc.clone())), &Ok(Some(slices))),
        InterfaceCheck::Nothing
    );
    let not_ready = vec![slice(
        &[(Some("http"), 8080)],
        vec![endpoint("p2", "b", "10.0.0.2", false)],
    )];
    assert_eq!(
        interface_check(Some(&by_name), &Ok(Some(svc)), &Ok(Some(not_ready))),
        InterfaceCheck::Nothing
    );
}

#[test]
fn dependencies_without_a_sibling_are_decided_by_outbound_connections() {
    let mut svc = service(vec![port(None, 5432, None)]);
    svc.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.20".into());
    let db_slices = vec![slice(
        &[(None, 5432)],
        vec![endpoint("db", "b", "10.244.1.9", true)],
    )];
    let addresses = crate::addresses::of(Some(&svc), &db_slices);
    assert_eq!(addresses.len(), 2);
    let to_cluster_ip = PodView {
        outbound: BTreeMap::from([("10.96.0.20".parse().unwrap(), BTreeSet::from([5432]))]),
        ..PodView::default()
    };
    let nodes = NodeStates::from([
        (
            "a".into(),
            fresh(&[("p1", to_cluster_ip), ("p2", PodView::default())]),
        ),
        (
            "f".into(),
            NodeState::Failed("the node agent on node f reports collection Failed: x".into()),
        ),
    ]);
    let unsupported = Verdict::unsupported();
    let decided = dependency_rule(
        unsupported.clone(),
        Some(&addresses),
        &[pod("p1", Some("a"))],
        &nodes,
    );
    assert_eq!(
        decided.verdict,
        Verdict::Clear(Outcome::Observed(Value::Dependency(DependencyValue {
            reachable: true
        })))
    );
    assert_eq!(decided.collector, COLLECTOR_WITH_EBPF);
    // No connection seen: absence of traffic is no evidence; the Kubernetes verdict stands.
    let decided = dependency_rule(
        unsupported.clone(),
        Some(&addresses),
        &[pod("p2", Some("a"))],
        &nodes,
    );
    assert_eq!(decided, Decided::kubernetes(unsupported.clone()));
    // Failed collection on a source pod's node: COLLECTION_FAILED with the agent's words.
    let decided = dependency_rule(
        unsupported.clone(),
        Some(&addresses),
        &[pod("p9", Some("f"))],
        &nodes,
    );
    assert_eq!(decided.verdict, Verdict::Report(Outcome::Failed));
    assert_eq!(decided.collector, crate::verdict::COLLECTOR);
    assert!(decided.detail.unwrap().contains("collection Failed: x"));
    // No such Service: nothing to decide with.
    assert_eq!(
        dependency_rule(unsupported.clone(), None, &[pod("p1", Some("a"))], &nodes),
        Decided::kubernetes(unsupported)
    );
}

#[test]
fn observations_and_reports_read_the_same() {
    let observation: NodeRuntimeObservation = serde_json::from_value(json!({
        "apiVersion": "pacto.trianalab.io/v1alpha1",
        "kind": "NodeRuntimeObservation",
        "metadata": {"name": "n1", "namespace": "agents"},
        "spec": {"nodeName": "n1"},
        "status": {
            "lastPublished": "2027-01-15T08:00:00Z",
            "collection": {"state": "Running"},
            "pods": [
                {"uid": "u1", "namespace": "ns", "name": "p1", "coverage": "Complete",
                 "listeners": [{"protocol": "TCP", "port": 8080}, {"protocol": "UDP", "port": 53}],
                 "connections": [
                    {"direction": "outbound", "protocol": "TCP", "peerIP": "10.96.0.20", "peerPort": 5432},
                    {"direction": "inbound", "protocol": "TCP", "peerIP": "10.0.0.9", "peerPort": 40000}
                 ]},
                {"uid": "u2", "namespace": "ns", "name": "p2"}
            ]
        }
    }))
    .unwrap();
    let from_observation = NodeView::from_observation(&observation);
    assert_eq!(
        from_observation.last_published,
        Some(Timestamp::parse("2027-01-15T08:00:00Z").unwrap())
    );
    assert_eq!(
        from_observation.pods["u1"].listening,
        BTreeSet::from([8080])
    );
    assert_eq!(from_observation.pods["u1"].outbound.len(), 1);
    assert!(from_observation.pods["u1"].listeners_partial.is_none());
    assert!(from_observation.pods["u1"].connections_partial.is_none());
    // No coverage stated is not a claim of completeness.
    assert!(from_observation.pods["u2"].listeners_partial.is_some());
    assert!(from_observation.pods["u2"].connections_partial.is_some());

    let report = NodeReport {
        node_name: "n1".into(),
        published_at: Some(pacto_proto::prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        }),
        collection: Some(pacto_proto::observer::CollectionState {
            state: "Failed".into(),
            reason: "BTFUnavailable".into(),
            message: "no BTF".into(),
        }),
        pods: vec![pacto_proto::observer::PodSockets {
            uid: "u1".into(),
            namespace: "ns".into(),
            name: "p1".into(),
            coverage: "Partial".into(),
            partial_reason: "hostNetwork".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let from_report = NodeView::from_report(&report);
    assert_eq!(from_report.last_published, Some(at(0)));
    assert_eq!(
        from_report.failed,
        Some(("BTFUnavailable".into(), "no BTF".into()))
    );
    // An older agent (no listener coverage): `coverage` stands for the listeners too.
    assert_eq!(
        from_report.pods["u1"].listeners_partial.as_deref(),
        Some("hostNetwork")
    );
    assert_eq!(
        from_report.pods["u1"].connections_partial.as_deref(),
        Some("hostNetwork")
    );
}

fn pod_view(edit: impl FnOnce(&mut PodView)) -> PodView {
    let mut view = PodView::default();
    edit(&mut view);
    view
}

#[test]
fn listener_and_connection_coverage_are_read_separately_older_agents_fall_back() {
    let observation: NodeRuntimeObservation = serde_json::from_value(json!({
        "apiVersion": "pacto.trianalab.io/v1alpha1",
        "kind": "NodeRuntimeObservation",
        "metadata": {"name": "n1", "namespace": "agents"},
        "spec": {"nodeName": "n1"},
        "status": {
            "collection": {"state": "Running"},
            "pods": [
                // A restarted agent: listeners complete at once, the history warming up.
                {"uid": "warm", "namespace": "ns", "name": "p1", "coverage": "Partial",
                 "partialReason": "started after pod", "listenerCoverage": "Complete"},
                {"uid": "lossy", "namespace": "ns", "name": "p2", "coverage": "Complete",
                 "listenerCoverage": "Partial", "listenerPartialReason": "ring buffer overflow"},
                {"uid": "old", "namespace": "ns", "name": "p3", "coverage": "Partial",
                 "partialReason": "started after pod"},
                {"uid": "host", "namespace": "ns", "name": "p4", "coverage": "Complete",
                 "listenerCoverage": "Complete", "hostNetwork": true}
            ]
        }
    }))
    .unwrap();
    let report = NodeReport {
        pods: vec![
            pacto_proto::observer::PodSockets {
                uid: "warm".into(),
                coverage: "Partial".into(),
                partial_reason: "started after pod".into(),
                listener_coverage: "Complete".into(),
                ..Default::default()
            },
            pacto_proto::observer::PodSockets {
                uid: "lossy".into(),
                coverage: "Complete".into(),
                listener_coverage: "Partial".into(),
                listener_partial_reason: "ring buffer overflow".into(),
                ..Default::default()
            },
            pacto_proto::observer::PodSockets {
                uid: "old".into(),
                coverage: "Partial".into(),
                partial_reason: "started after pod".into(),
                ..Default::default()
            },
            pacto_proto::observer::PodSockets {
                uid: "host".into(),
                coverage: "Complete".into(),
                listener_coverage: "Complete".into(),
                host_network: true,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    for view in [
        NodeView::from_observation(&observation),
        NodeView::from_report(&report),
    ] {
        let claims = |uid: &str| {
            let p = &view.pods[uid];
            (
                p.listeners_partial.clone(),
                p.connections_partial.clone(),
                p.host_network,
            )
        };
        let partial = |why: &str| Some(why.to_owned());
        assert_eq!(claims("warm"), (None, partial("started after pod"), false));
        assert_eq!(
            claims("lossy"),
            (partial("ring buffer overflow"), None, false)
        );
        assert_eq!(
            claims("old"),
            (
                partial("started after pod"),
                partial("started after pod"),
                false
            )
        );
        assert_eq!(claims("host"), (None, None, true));
    }
}

#[test]
fn interfaces_read_listener_coverage_and_dependencies_take_what_was_seen() {
    let warming = pod_view(|v| {
        v.listening = BTreeSet::from([8080]);
        v.connections_partial = Some("started after pod".into());
        v.outbound = BTreeMap::from([("10.96.0.20".parse().unwrap(), BTreeSet::from([5432]))]);
    });
    let quiet_warming = pod_view(|v| {
        v.connections_partial = Some("started after pod".into());
    });
    let nodes = NodeStates::from([(
        "a".into(),
        fresh(&[("warm", warming), ("quiet", quiet_warming)]),
    )]);
    // Listeners complete, connection history warming up: the interface is decided.
    let found = Verdict::Clear(Outcome::Observed(present(true)));
    let check = InterfaceCheck::Qualify(vec![(pod("warm", Some("a")), 8080)]);
    let decided = interface_rule(found.clone(), &check, "openapi", &nodes);
    assert_eq!(
        (decided.verdict, decided.collector),
        (found, COLLECTOR_WITH_EBPF)
    );
    // ...and undeclared peers say nothing (they need the whole history).
    assert!(views([&pod("warm", Some("a"))], &nodes, Need::Connections).is_err());

    // A connection seen proves reachability even with a partial history; none seen is no
    // evidence: Unsupported stands with the Kubernetes collector, never Insufficient.
    let addresses = BTreeSet::from(["10.96.0.20".parse().unwrap()]);
    let unsupported = Verdict::unsupported();
    let decided = dependency_rule(
        unsupported.clone(),
        Some(&addresses),
        &[pod("warm", Some("a")), pod("gone", Some("a"))],
        &nodes,
    );
    assert_eq!(decided.collector, COLLECTOR_WITH_EBPF);
    assert!(matches!(decided.verdict, Verdict::Clear(_)));
    for sources in [
        vec![pod("quiet", Some("a"))],
        vec![pod("gone", Some("a"))],
        vec![pod("nowhere", None)],
    ] {
        assert_eq!(
            dependency_rule(unsupported.clone(), Some(&addresses), &sources, &nodes),
            Decided::kubernetes(unsupported.clone()),
            "{sources:?}"
        );
    }
}

#[test]
fn only_tcp_service_ports_are_checked() {
    let mut dhcp = port(Some("dhcp"), 67, Some(IntOrString::Int(67)));
    dhcp.protocol = Some("UDP".into());
    let mut sctp = port(Some("sig"), 3868, Some(IntOrString::Int(3868)));
    sctp.protocol = Some("SCTP".into());
    let mut tcp = port(Some("http"), 80, Some(IntOrString::Int(8080)));
    tcp.protocol = Some("TCP".into());
    let svc = service(vec![dhcp, sctp, tcp]);
    let slices = vec![slice(
        &[
            (Some("dhcp"), 67),
            (Some("sig"), 3868),
            (Some("http"), 8080),
        ],
        vec![endpoint("p1", "a", "10.0.0.1", true)],
    )];
    let (svc, slices) = (Ok(Some(svc)), Ok(Some(slices)));
    for binding in ["dhcp", "sig"] {
        let binding = IntOrString::String(binding.into());
        assert_eq!(
            interface_check(Some(&binding), &svc, &slices),
            InterfaceCheck::Nothing,
            "{binding:?}"
        );
    }
    assert_eq!(
        interface_check(Some(&IntOrString::Int(67)), &svc, &slices),
        InterfaceCheck::Nothing
    );
    let http = IntOrString::String("http".into());
    assert!(matches!(
        interface_check(Some(&http), &svc, &slices),
        InterfaceCheck::Qualify(_)
    ));
}

#[test]
fn pods_node_evidence_cannot_speak_for_are_left_out() {
    let host = pod_view(|v| v.host_network = true);
    let nodes = NodeStates::from([
        (
            "a".into(),
            fresh(&[
                ("host", host),
                ("p1", listening(&[8080])),
                ("p2", listening(&[9090])),
            ]),
        ),
        (
            "tainted".into(),
            NodeState::NotCovered("not run there by design".into()),
        ),
    ]);
    let found = Verdict::Clear(Outcome::Observed(present(true)));
    let qualify = |pods: &[(&str, &str)], port: u32| {
        InterfaceCheck::Qualify(
            pods.iter()
                .map(|(uid, node)| (pod(uid, Some(node)), port))
                .collect(),
        )
    };
    // Nobody left to check: the Kubernetes verdict, with the Kubernetes collector.
    let check = qualify(&[("host", "a"), ("x", "tainted")], 8080);
    let decided = interface_rule(found.clone(), &check, "openapi", &nodes);
    assert_eq!(decided, Decided::kubernetes(found.clone()));
    // Qualifying: the checked pods decide, a positive or a negative.
    let check = qualify(&[("host", "a"), ("x", "tainted"), ("p1", "a")], 8080);
    let decided = interface_rule(found.clone(), &check, "openapi", &nodes);
    assert_eq!(
        (&decided.verdict, decided.collector),
        (&found, COLLECTOR_WITH_EBPF)
    );
    let check = qualify(&[("host", "a"), ("p1", "a"), ("p2", "a")], 8080);
    let decided = interface_rule(found.clone(), &check, "openapi", &nodes);
    assert_eq!(decided.verdict, Verdict::Negative(present(false)));
    // Deciding: every Ready pod must be checkable.
    let insufficient = Verdict::insufficient();
    let decide = |pods: &[(&str, &str)]| {
        InterfaceCheck::Decide(
            pods.iter()
                .map(|(uid, node)| (pod(uid, Some(node)), 9090))
                .collect(),
        )
    };
    let decided = interface_rule(
        insufficient.clone(),
        &decide(&[("p2", "a")]),
        "openapi",
        &nodes,
    );
    assert_eq!(decided.collector, COLLECTOR_WITH_EBPF);
    for pods in [
        &[("p2", "a"), ("host", "a")][..],
        &[("p2", "a"), ("x", "tainted")],
    ] {
        let decided = interface_rule(insufficient.clone(), &decide(pods), "openapi", &nodes);
        assert_eq!(
            decided,
            Decided::kubernetes(insufficient.clone()),
            "{pods:?}"
        );
    }
    // Undeclared peers: a pod left out leaves the list incomplete (the caller says nothing).
    let pods = [pod("p1", Some("a")), pod("host", Some("a"))];
    let read = views(&pods, &nodes, Need::Connections).unwrap();
    assert_eq!(read.iter().filter(|(_, v)| v.is_none()).count(), 1);
}

#[test]
fn nodes_the_daemonset_does_not_cover_by_design() {
    let site = AgentSite {
        namespace: "agents".into(),
        daemonset: "pacto-node-agent".into(),
    };
    let daemonset: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "pacto-node-agent", "namespace": "agents"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                                       "containers": [{"name": "agent"}]}}}
    }))
    .unwrap();
    let node = |os: &str| -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/os": os}}}),
        )
        .unwrap()
    };
    assert_eq!(
        not_covered(&site, Some(&daemonset), "n1", Some(&node("linux"))),
        None
    );
    let windows = not_covered(&site, Some(&daemonset), "n1", Some(&node("windows"))).unwrap();
    assert!(
        windows.contains("agents/pacto-node-agent does not run on node n1 by design"),
        "{windows}"
    );
    let missing = not_covered(&site, Some(&daemonset), "n9", None).unwrap();
    assert!(missing.contains("node n9 does not exist"), "{missing}");
    // No DaemonSet: every node is expected to report.
    assert_eq!(not_covered(&site, None, "n9", None), None);
    assert_eq!(not_covered(&site, None, "n1", Some(&node("windows"))), None);
}

/// A client of an API server nobody listens on: watches fail at once with a connection error.
fn offline_client() -> Client {
    pacto_testenv::controlplane::ensure_crypto_provider();
    Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap()
}

#[tokio::test]
async fn unlisted_caches_fail_the_query_at_once_with_the_watch_error() {
    let client = offline_client();
    let shutdown = CancellationToken::new();
    let evidence = NodeEvidence::spawn(
        &client,
        AgentSite {
            namespace: "agents".into(),
            daemonset: "pacto-node-agent".into(),
        },
        NodeReports::new(),
        STALE_AFTER,
        None,
        &shutdown,
    );
    let nodes = BTreeSet::from(["n1".to_owned()]);
    let waiting = evidence.states(&nodes, &at(0)).unwrap_err();
    assert_eq!(
        waiting.message,
        "node-agent evidence: waiting for the first list of noderuntimeobservations in agents"
    );
    let failed = pacto_runtime::testing::eventually(
        "the watch error recorded",
        Duration::from_secs(30),
        || async {
            let failure = evidence.states(&nodes, &at(0)).unwrap_err();
            (!failure.message.contains("waiting")).then_some(failure)
        },
    )
    .await;
    assert!(
        failed
            .message
            .starts_with("node-agent evidence: list noderuntimeobservations in agents: "),
        "{}",
        failed.message
    );
    assert!(!failed.message.contains("not listed yet"));
    // No read waits for a list (the old read waited 2 s per cache).
    let one = std::time::Instant::now();
    let _ = evidence.states(&nodes, &at(0));
    assert!(one.elapsed() < Duration::from_millis(500));
    shutdown.cancel();
}

#[tokio::test]
async fn each_node_logs_one_line_per_change() {
    let client = offline_client();
    let shutdown = CancellationToken::new();
    let evidence = NodeEvidence::spawn(
        &client,
        AgentSite {
            namespace: "agents".into(),
            daemonset: "pacto-node-agent".into(),
        },
        NodeReports::new(),
        STALE_AFTER,
        None,
        &shutdown,
    );
    let quiet = sources(None, None);
    let log = |state: NodeState| evidence.log_change("n1", &state, &quiet);
    assert_eq!(
        log(fresh(&[])).as_deref(),
        Some("node-agent on node n1 heard (fresh)")
    );
    assert_eq!(log(fresh(&[("p", listening(&[80]))])), None, "no change");
    assert_eq!(
        log(NodeState::Stale("why".into(), Some(at(0)))).as_deref(),
        Some("node-agent on node n1 stale since 2027-01-15T08:00:00Z")
    );
    assert_eq!(log(NodeState::Stale("again".into(), Some(at(0)))), None);
    assert_eq!(
        log(NodeState::Failed("BTFUnavailable".into())).as_deref(),
        Some("node-agent on node n1: collection failed (BTFUnavailable)")
    );
    assert_eq!(
        log(NodeState::NotCovered("tainted".into())).as_deref(),
        Some("node-agent on node n1: not covered by design (tainted)")
    );
    // Another node keeps its own record.
    assert!(evidence.log_change("n2", &fresh(&[]), &quiet).is_some());
    shutdown.cancel();
}

/// The per-pod bounds of a report (docs/design/node-agent.md#bounds) hold on both paths: a pod
/// of a NodeRuntimeObservation (or a report) beyond them reads Partial in the dimension cut —
/// the same as the streamed report the registry bounded — and the other pods keep their claims.
#[test]
fn a_pod_beyond_the_report_bounds_reads_partial_on_both_paths() {
    let listeners: Vec<serde_json::Value> = (1..=300)
        .map(|port| json!({"protocol": "TCP", "port": port}))
        .collect();
    let connections: Vec<serde_json::Value> = (1..=1200)
        .map(|port| {
            json!({"direction": "outbound", "protocol": "TCP", "peerIP": "10.96.0.10",
                   "peerPort": port})
        })
        .collect();
    let observation: NodeRuntimeObservation = serde_json::from_value(json!({
        "apiVersion": "pacto.trianalab.io/v1alpha1",
        "kind": "NodeRuntimeObservation",
        "metadata": {"name": "n1", "namespace": "agents"},
        "spec": {"nodeName": "n1"},
        "status": {
            "collection": {"state": "Running"},
            "pods": [
                {"uid": "busy", "namespace": "ns", "name": "p1", "coverage": "Complete",
                 "listenerCoverage": "Complete", "listeners": listeners,
                 "connections": connections},
                // An older agent: `coverage` stands for both; only the connections are cut.
                {"uid": "old", "namespace": "ns", "name": "p2", "coverage": "Complete",
                 "connections": connections},
                {"uid": "quiet", "namespace": "ns", "name": "p3", "coverage": "Complete",
                 "listenerCoverage": "Complete",
                 "listeners": [{"protocol": "TCP", "port": 8080}]}
            ]
        }
    }))
    .unwrap();
    let pod = |uid: &str, listeners: u32, connections: u32, listener_coverage: &str| {
        pacto_proto::observer::PodSockets {
            uid: uid.into(),
            coverage: "Complete".into(),
            listener_coverage: listener_coverage.into(),
            listeners: (1..=listeners)
                .map(|port| pacto_proto::observer::Listener {
                    protocol: "TCP".into(),
                    port,
                    address: String::new(),
                })
                .collect(),
            connections: (1..=connections)
                .map(|port| pacto_proto::observer::Connection {
                    direction: "outbound".into(),
                    protocol: "TCP".into(),
                    peer_ip: "10.96.0.10".into(),
                    peer_port: port,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
    let report = NodeReport {
        pods: vec![
            pod("busy", 300, 1200, "Complete"),
            pod("old", 0, 1200, ""),
            pacto_proto::observer::PodSockets {
                listeners: vec![pacto_proto::observer::Listener {
                    protocol: "TCP".into(),
                    port: 8080,
                    address: String::new(),
                }],
                ..pod("quiet", 0, 0, "Complete")
            },
        ],
        ..Default::default()
    };
    for view in [
        NodeView::from_observation(&observation),
        NodeView::from_report(&report),
    ] {
        let busy = &view.pods["busy"];
        assert_eq!(
            busy.listeners_partial.as_deref(),
            Some("more than 256 listeners")
        );
        assert_eq!(busy.listening.len(), 256);
        assert_eq!(
            busy.connections_partial.as_deref(),
            Some("more than 1000 connections")
        );
        assert_eq!(
            busy.outbound[&"10.96.0.10".parse::<IpAddr>().unwrap()].len(),
            1000
        );
        let old = &view.pods["old"];
        assert_eq!(old.listeners_partial, None, "only the connections were cut");
        assert_eq!(
            old.connections_partial.as_deref(),
            Some("more than 1000 connections")
        );
        let quiet = &view.pods["quiet"];
        assert_eq!(
            (&quiet.listeners_partial, &quiet.connections_partial),
            (&None, &None)
        );
        assert_eq!(quiet.listening, BTreeSet::from([8080]));
    }
}
