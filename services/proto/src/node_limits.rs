//! The bounds of a node agent's report (`pacto.observer.v1.NodeReport`), defined once for both
//! sides (docs/design/node-agent.md#bounds): the agent keeps what it publishes within them, and
//! the observer, handed a report that is not (an older agent, or one with other bounds), cuts the
//! pod that exceeds one and marks that pod `Partial` in the dimension cut — never refusing the
//! node's whole report for one crowded pod.
//!
//! The per-pod Partial reasons are fixed texts, so a reader sees the same reason whichever side
//! cut the list.

use crate::observer::{NodeReport, PodSockets};

/// Largest report, encoded (the whole report is refused beyond it; the agent caps its serialized
/// pod list at the same size, and a protobuf encoding is smaller than that JSON).
pub const MAX_REPORT_BYTES: usize = 1024 * 1024;
/// Most pods in one report; beyond it the pods last in (namespace, name) order are dropped and
/// the report says `truncated` (a pod missing from a view makes what depends on it Insufficient).
pub const MAX_PODS: usize = 1000;
/// Most listeners of one pod in a report; beyond it the pod's listeners read Partial
/// [`TOO_MANY_LISTENERS`].
pub const MAX_LISTENERS_PER_POD: usize = 256;
/// Most connections of one pod in a report; beyond it the pod's connection history reads Partial
/// [`TOO_MANY_CONNECTIONS`].
pub const MAX_CONNECTIONS_PER_POD: usize = 1000;

/// Listener Partial reason: the pod has (or had) more listeners than [`MAX_LISTENERS_PER_POD`].
pub const TOO_MANY_LISTENERS: &str = "more than 256 listeners";
/// Connection Partial reason: the report carried more connections of the pod than
/// [`MAX_CONNECTIONS_PER_POD`].
pub const TOO_MANY_CONNECTIONS: &str = "more than 1000 connections";

/// `reasons` (", "-joined, possibly empty) with `reason` added once.
pub fn add_reason(reasons: &str, reason: &str) -> String {
    if reasons.is_empty() {
        reason.to_owned()
    } else if reasons.split(", ").any(|r| r == reason) {
        reasons.to_owned()
    } else {
        format!("{reasons}, {reason}")
    }
}

/// Brings `report` within the pod bounds: at most [`MAX_PODS`] pods (the first ones kept), and
/// per pod at most [`MAX_LISTENERS_PER_POD`] listeners and [`MAX_CONNECTIONS_PER_POD`]
/// connections (the first ones kept; the pod's claim in that dimension becomes Partial with the
/// bound's reason added). Anything cut sets `truncated`. Returns whether anything was cut.
///
/// An older agent's pod without `listener_coverage` (its `coverage` stands for both) gets its
/// listener claim spelled out first, so cutting its connections does not mark its listeners.
pub fn bound(report: &mut NodeReport) -> bool {
    let mut cut = false;
    if report.pods.len() > MAX_PODS {
        report.pods.truncate(MAX_PODS);
        cut = true;
    }
    for pod in &mut report.pods {
        cut |= bound_pod(pod);
    }
    report.truncated |= cut;
    cut
}

fn bound_pod(pod: &mut PodSockets) -> bool {
    let listeners = pod.listeners.len() > MAX_LISTENERS_PER_POD;
    let connections = pod.connections.len() > MAX_CONNECTIONS_PER_POD;
    if (listeners || connections) && pod.listener_coverage.is_empty() {
        pod.listener_coverage.clone_from(&pod.coverage);
        pod.listener_partial_reason.clone_from(&pod.partial_reason);
    }
    if listeners {
        pod.listeners.truncate(MAX_LISTENERS_PER_POD);
        pod.listener_partial_reason = add_reason(
            partial_reason(&pod.listener_coverage, &pod.listener_partial_reason),
            TOO_MANY_LISTENERS,
        );
        "Partial".clone_into(&mut pod.listener_coverage);
    }
    if connections {
        pod.connections.truncate(MAX_CONNECTIONS_PER_POD);
        pod.partial_reason = add_reason(
            partial_reason(&pod.coverage, &pod.partial_reason),
            TOO_MANY_CONNECTIONS,
        );
        "Partial".clone_into(&mut pod.coverage);
    }
    listeners || connections
}

/// The reasons a claim already carries (none unless it is Partial).
fn partial_reason<'a>(coverage: &str, reason: &'a str) -> &'a str {
    if coverage == "Partial" { reason } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observer::{Connection, Listener};

    #[test]
    fn reasons_name_the_bounds() {
        assert_eq!(
            TOO_MANY_LISTENERS,
            format!("more than {MAX_LISTENERS_PER_POD} listeners")
        );
        assert_eq!(
            TOO_MANY_CONNECTIONS,
            format!("more than {MAX_CONNECTIONS_PER_POD} connections")
        );
        assert_eq!(add_reason("", "a"), "a");
        assert_eq!(add_reason("hostNetwork", "a"), "hostNetwork, a");
        assert_eq!(add_reason("hostNetwork, a", "a"), "hostNetwork, a");
    }

    fn pod(uid: &str, listeners: usize, connections: usize) -> PodSockets {
        PodSockets {
            uid: uid.to_owned(),
            coverage: "Complete".into(),
            listeners: vec![Listener::default(); listeners],
            connections: vec![Connection::default(); connections],
            ..PodSockets::default()
        }
    }

    #[test]
    fn only_the_pod_beyond_a_bound_is_cut_and_partial_in_that_dimension() {
        let mut partial = pod("partial", MAX_LISTENERS_PER_POD + 1, 0);
        partial.listener_coverage = "Partial".into();
        partial.listener_partial_reason = "ring buffer overflow".into();
        let mut report = NodeReport {
            pods: vec![
                pod("fine", MAX_LISTENERS_PER_POD, MAX_CONNECTIONS_PER_POD),
                pod("old", 1, MAX_CONNECTIONS_PER_POD + 5),
                partial,
            ],
            ..NodeReport::default()
        };
        let fine = report.pods[0].clone();
        assert!(bound(&mut report));
        assert!(report.truncated);
        assert_eq!(report.pods[0], fine);
        let old = &report.pods[1];
        assert_eq!(old.connections.len(), MAX_CONNECTIONS_PER_POD);
        assert_eq!(
            (old.coverage.as_str(), old.partial_reason.as_str()),
            ("Partial", TOO_MANY_CONNECTIONS)
        );
        assert_eq!(
            (
                old.listener_coverage.as_str(),
                old.listener_partial_reason.as_str()
            ),
            ("Complete", ""),
            "an older agent's listener claim is kept"
        );
        let partial = &report.pods[2];
        assert_eq!(partial.listeners.len(), MAX_LISTENERS_PER_POD);
        assert_eq!(
            partial.listener_partial_reason,
            "ring buffer overflow, more than 256 listeners"
        );
        assert_eq!(partial.coverage, "Complete");

        let mut many = NodeReport {
            pods: vec![pod("p", 0, 0); MAX_PODS + 1],
            ..NodeReport::default()
        };
        assert!(bound(&mut many));
        assert_eq!(many.pods.len(), MAX_PODS);
        let mut within = NodeReport {
            pods: vec![fine],
            ..NodeReport::default()
        };
        assert!(!bound(&mut within));
        assert!(!within.truncated);
    }
}
