#![allow(
    clippy::unwrap_used,
    reason = "tests: a malformed fixture should fail the test"
)]

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};
use pacto_engine::DependencyValue;
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
        partial: Some("ring buffer overflow".into()),
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
    assert_eq!(views([&pod("p1", Some("a"))], &nodes).unwrap().len(), 1);
    let partial = views([&pod("p2", Some("a"))], &nodes).unwrap_err();
    assert_eq!(partial.outcome, Outcome::Insufficient);
    assert!(
        partial.why.contains("Partial (ring buffer overflow)"),
        "{}",
        partial.why
    );
    let absent = views([&pod("p3", Some("a"))], &nodes).unwrap_err();
    assert_eq!(absent.outcome, Outcome::Insufficient);
    assert!(
        absent
            .why
            .contains("missing from the observation of node a")
    );
    let no_node = views([&pod("p4", None)], &nodes).unwrap_err();
    assert_eq!(no_node.outcome, Outcome::Insufficient);
    let failed = views([&pod("p3", Some("a")), &pod("x", Some("f"))], &nodes).unwrap_err();
    assert_eq!(failed.outcome, Outcome::Failed);
    let stale = views(
        [
            &pod("x", Some("f")),
            &pod("p2", Some("a")),
            &pod("y", Some("s")),
        ],
        &nodes,
    )
    .unwrap_err();
    assert_eq!((stale.outcome, stale.heard), (Outcome::Stale, Some(at(5))));
    // A node nobody read is stale too.
    let unread = views([&pod("z", Some("elsewhere"))], &nodes).unwrap_err();
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
    assert!(from_observation.pods["u1"].partial.is_none());
    // No coverage stated is not a claim of completeness.
    assert!(from_observation.pods["u2"].partial.is_some());

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
    assert_eq!(
        from_report.pods["u1"].partial.as_deref(),
        Some("hostNetwork")
    );
}
