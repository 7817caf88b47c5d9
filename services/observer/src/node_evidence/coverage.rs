//! Which nodes the node agent's DaemonSet covers by design
//! (docs/design/observation.md#node-evidence, "Nodes the agent does not cover"): the DaemonSet
//! controller's own placement rules applied to the DaemonSet's pod template and a Node — the
//! template's `nodeName`, `nodeSelector` and required node affinity, and the Node's taints with
//! effect `NoSchedule` or `NoExecute` that the template's tolerations (plus the tolerations the
//! controller adds to every daemon pod) do not tolerate. A node the agent does not cover by
//! design has no node evidence to wait for: its pods keep the Kubernetes verdict.
//!
//! Pure: the caller supplies the DaemonSet's pod spec and the Node.

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

/// The tolerations the DaemonSet controller adds to every daemon pod
/// (`AddOrUpdateDaemonPodTolerations`): `(key, effect)`, operator `Exists`.
const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];

/// Added as well when the daemon pod uses the host network.
const HOST_NETWORK_TOLERATION: (&str, &str) =
    ("node.kubernetes.io/network-unavailable", "NoSchedule");

/// Whether `toleration` tolerates `taint` (Kubernetes `Toleration.ToleratesTaint`).
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

fn daemon_tolerates(spec: &PodSpec, taint: &Taint) -> bool {
    let added = DAEMON_TOLERATIONS
        .iter()
        .chain(
            spec.host_network
                .unwrap_or(false)
                .then_some(&HOST_NETWORK_TOLERATION),
        )
        .any(|(key, effect)| *key == taint.key && *effect == taint.effect);
    added
        || spec
            .tolerations
            .iter()
            .flatten()
            .any(|t| tolerates(t, taint))
}

/// Whether one requirement matches `value` (the label's value, `None` when the label is absent).
fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [limit]) = (value.and_then(number), values) else {
                return false;
            };
            let Some(limit) = number(limit) else {
                return false;
            };
            if requirement.operator == "Gt" {
                have > limit
            } else {
                have < limit
            }
        }
        _ => false,
    }
}

/// Whether a node selector term matches `node` (every expression and field; an empty term
/// matches nothing, as in Kubernetes).
fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(name)))
}

/// Whether the DaemonSet whose pod template spec is `spec` runs a pod on `node`; `Err` says
/// why not (for the observation's detail and the log).
pub fn covers(spec: &PodSpec, node: &Node) -> Result<(), String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if let Some(pinned) = spec.node_name.as_deref().filter(|n| !n.is_empty())
        && pinned != name
    {
        return Err(format!("its pod template is pinned to node {pinned}"));
    }
    if let Some(selector) = spec.node_selector.as_ref().filter(|s| !s.is_empty()) {
        let labels = node.metadata.labels.as_ref();
        if let Some((key, value)) = selector
            .iter()
            .find(|(k, v)| labels.and_then(|l| l.get(*k)) != Some(*v))
        {
            return Err(format!("its nodeSelector {key}={value} does not match"));
        }
    }
    if let Some(required) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        && !required
            .node_selector_terms
            .iter()
            .any(|t| term_matches(t, node))
    {
        return Err("its required node affinity does not match".to_owned());
    }
    if let Some(taint) = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .find(|t| !daemon_tolerates(spec, t))
    {
        let value = taint
            .value
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(|v| format!("={v}"))
            .unwrap_or_default();
        return Err(format!(
            "it does not tolerate the taint {}{value}:{}",
            taint.key, taint.effect
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a malformed fixture should fail the test"
    )]

    use serde_json::json;

    use super::*;

    fn node(labels: &serde_json::Value, taints: &serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": labels},
            "spec": {"taints": taints}
        }))
        .unwrap()
    }

    fn spec(value: serde_json::Value) -> PodSpec {
        let mut value = value;
        value["containers"] = json!([{"name": "agent"}]);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn node_selector_and_required_affinity_as_the_daemonset_controller_reads_them() {
        let linux = node(
            &json!({"kubernetes.io/os": "linux", "gpus": "4"}),
            &json!([]),
        );
        assert_eq!(covers(&spec(json!({})), &linux), Ok(()));
        assert_eq!(
            covers(
                &spec(json!({"nodeSelector": {"kubernetes.io/os": "linux"}})),
                &linux
            ),
            Ok(())
        );
        let windows = spec(json!({"nodeSelector": {"kubernetes.io/os": "windows"}}));
        assert!(
            covers(&windows, &linux)
                .unwrap_err()
                .contains("nodeSelector")
        );
        let affinity = |terms: serde_json::Value| {
            spec(json!({"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
        };
        // Terms are ORed, a term's requirements ANDed.
        let either = affinity(json!([
            {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["8"]}]},
            {"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["8"]},
                                  {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
        ]));
        assert_eq!(covers(&either, &linux), Ok(()));
        let neither = affinity(json!([
            {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
            {}
        ]));
        assert!(covers(&neither, &linux).unwrap_err().contains("affinity"));
        let by_name = affinity(json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
             "matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}
        ]));
        assert_eq!(covers(&by_name, &linux), Ok(()));
        assert!(covers(&spec(json!({"nodeName": "n2"})), &linux).is_err());
    }

    #[test]
    fn taints_need_a_toleration_unless_prefer_or_added_by_the_controller() {
        let tainted = |taints: serde_json::Value| node(&json!({}), &taints);
        let dedicated =
            tainted(json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]));
        let error = covers(&spec(json!({})), &dedicated).unwrap_err();
        assert!(error.contains("dedicated=db:NoSchedule"), "{error}");
        for toleration in [
            json!({"key": "dedicated", "operator": "Equal", "value": "db"}),
            json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"operator": "Exists"}),
        ] {
            let spec = spec(json!({"tolerations": [toleration]}));
            assert_eq!(covers(&spec, &dedicated), Ok(()), "{toleration}");
        }
        for toleration in [
            json!({"key": "dedicated", "value": "web"}),
            json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}),
        ] {
            let spec = spec(json!({"tolerations": [toleration]}));
            assert!(covers(&spec, &dedicated).is_err(), "{toleration}");
        }
        // PreferNoSchedule does not keep a daemon pod away; the controller's own tolerations
        // cover the node-condition taints.
        let soft = tainted(json!([
            {"key": "dedicated", "effect": "PreferNoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
        ]));
        assert_eq!(covers(&spec(json!({})), &soft), Ok(()));
        let network = tainted(json!([
            {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}
        ]));
        assert!(covers(&spec(json!({})), &network).is_err());
        assert_eq!(
            covers(&spec(json!({"hostNetwork": true})), &network),
            Ok(())
        );
    }
}
