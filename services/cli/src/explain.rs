//! What an Unknown verdict's codes mean and what to check next, in the words of the
//! troubleshooting guide (`docs/troubleshooting.md`, "Status is Unknown"). A leaf: `status_view`
//! imports it.

/// The guide's explanation of one code behind an Unknown verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Explanation {
    /// What the code means.
    pub meaning: &'static str,
    /// The next step the guide gives.
    pub next_step: &'static str,
}

/// The code `pacto status` uses for a contract that could not be obtained (ContractValid
/// Unknown/Unavailable); it is a condition reason, not a finding code.
pub const CONTRACT_UNAVAILABLE: &str = "CONTRACT_UNAVAILABLE";

/// The explanation of `code` when it is one of the codes that make a verdict Unknown.
pub fn unknown_code(code: &str) -> Option<Explanation> {
    let (meaning, next_step) = match code {
        "EVIDENCE_MISSING" => (
            "nothing was collected",
            "the target may not exist yet, or spec.target.serviceName does not match a real Service",
        ),
        "OBSERVATION_UNSUPPORTED" => (
            "the dimension cannot be observed here",
            "an ExternalName dependency, or a metrics capability while --enable-metrics-observation is off (chart: controller.enableMetricsObservation)",
        ),
        "COLLECTION_FAILED" => (
            "the cluster query errored, or the node agent could not load its kernel program",
            "check the RuntimeObserved condition and the operator logs",
        ),
        "EVIDENCE_STALE" => (
            "the node agent on the pod's node stopped reporting",
            "see \"Node agent evidence is missing\": read the agent pod's log on that node",
        ),
        "EVIDENCE_INSUFFICIENT" => (
            "some evidence arrived but not enough to decide, for example the node agent saw only part of a pod",
            "wait for the next observation; if it persists, see \"Node agent evidence is missing\"",
        ),
        "CONFIGURATION_ABSENT" => (
            "a configuration is absent; it reads Unknown until the negative streak spans the stabilization window",
            "bind the configuration (spec.target.configBindings) or wait for the window to decide",
        ),
        CONTRACT_UNAVAILABLE => (
            "the contract could not be obtained -- registry unreachable, auth rejected, tag not found",
            "see \"Contract not resolving\": confirm the OCI reference is reachable, set spec.contractRef.pullSecretRef for a private registry, and inspect `kubectl get pactorevisions`",
        ),
        _ => return None,
    };
    Some(Explanation { meaning, next_step })
}

/// The node a finding's message names (`… of node <node> …`, as the observer writes
/// EVIDENCE_STALE), if any.
pub fn node_in_message(message: &str) -> Option<&str> {
    let rest = &message[message.find("of node ")? + "of node ".len()..];
    let node = rest
        .split(|c: char| c.is_whitespace() || c == ':' || c == ',')
        .next()?;
    (!node.is_empty()).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unknown_code_of_the_guide_is_explained() {
        for code in [
            "EVIDENCE_MISSING",
            "OBSERVATION_UNSUPPORTED",
            "COLLECTION_FAILED",
            "EVIDENCE_STALE",
            "EVIDENCE_INSUFFICIENT",
        ] {
            assert!(unknown_code(code).is_some(), "{code}");
        }
        assert_eq!(unknown_code("CONFIGURATION_MISMATCH"), None);
    }

    #[test]
    fn the_node_is_read_from_a_stale_message() {
        assert_eq!(
            node_in_message("node-agent evidence of node worker-1 is stale: no renewed Lease"),
            Some("worker-1")
        );
        assert_eq!(node_in_message("no node here"), None);
    }
}
