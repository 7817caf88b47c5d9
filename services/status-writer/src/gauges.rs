//! The per-Pacto gauges of docs/design/status.md#gauges, kept in their own registry so that the series of a
//! deleted Pacto (or of a Pacto that stopped declaring readiness) can be removed — the global
//! `metrics` recorder cannot forget a series. Rendered in the Prometheus text format next to the
//! process metrics on `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use pacto_api::{ContractStatus, ReadinessStatus};

/// `pacto_contract_status{name,namespace,status}`.
pub const CONTRACT_STATUS: &str = "pacto_contract_status";
/// `pacto_readiness_score{name,namespace}`.
pub const READINESS_SCORE: &str = "pacto_readiness_score";
/// `pacto_readiness_gate{name,namespace}`.
pub const READINESS_GATE: &str = "pacto_readiness_gate";
/// `pacto_readiness_status{name,namespace,status}`.
pub const READINESS_STATUS: &str = "pacto_readiness_status";
/// `pacto_readiness_checks{name,namespace,status}`.
pub const READINESS_CHECKS: &str = "pacto_readiness_checks";
/// `pacto_undeclared_peers{name,namespace}`.
pub const UNDECLARED_PEERS: &str = "pacto_undeclared_peers";

/// What the gauges of one Pacto show.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    status: ContractStatus,
    readiness: Option<ReadinessGauges>,
    /// How many undeclared peers the status lists; `None` when it says nothing about them.
    undeclared_peers: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ReadinessGauges {
    score: i32,
    passing: bool,
    reason: &'static str,
    done: i32,
    partial: i32,
    not_done: i32,
    deferred: i32,
}

/// The gauge registry, shared between the controller and the admin server.
#[derive(Debug, Clone, Default)]
pub struct Gauges(Arc<Mutex<BTreeMap<(String, String), Entry>>>);

impl Gauges {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the status (and readiness, or its absence) of `namespace/name`, and how many
    /// undeclared peers its status lists (`None`: it says nothing about them, no series).
    pub fn set(
        &self,
        namespace: &str,
        name: &str,
        status: ContractStatus,
        readiness: Option<&ReadinessStatus>,
        undeclared_peers: Option<u64>,
    ) {
        let readiness = readiness.map(|r| ReadinessGauges {
            score: r.score,
            passing: r.passing,
            reason: if r.passing {
                "Satisfied"
            } else if r.expired {
                "Expired"
            } else {
                "BelowMinScore"
            },
            done: r.done_count,
            partial: r.partial_count,
            not_done: r.not_done_count,
            deferred: r.deferred_count,
        });
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                (namespace.to_owned(), name.to_owned()),
                Entry {
                    status,
                    readiness,
                    undeclared_peers,
                },
            );
    }

    /// Removes every series of `namespace/name`. Returns whether there were any.
    pub fn remove(&self, namespace: &str, name: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(namespace.to_owned(), name.to_owned()))
            .is_some()
    }

    /// Removes every series: a replica that stops leading exports none, so that only the
    /// leader's gauges are scraped (docs/design/status.md#leader-election).
    pub fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Keeps only the Pactos in `live` (after a watch restart, deletions may have been missed).
    pub fn retain(&self, live: &std::collections::BTreeSet<(String, String)>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| live.contains(key));
    }

    /// The gauges in the Prometheus text exposition format (HELP and TYPE for each family).
    pub fn render(&self) -> String {
        let entries = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut out = String::new();
        let labels = |ns: &str, name: &str| {
            format!("name=\"{}\",namespace=\"{}\"", escape(name), escape(ns))
        };
        family(
            &mut out,
            CONTRACT_STATUS,
            "Contract status of a Pacto: 1 for the current status, 0 for the others.",
        );
        for ((ns, name), entry) in &entries {
            for status in ContractStatus::ALL {
                let value = u8::from(status == entry.status);
                let _ = writeln!(
                    out,
                    "{CONTRACT_STATUS}{{{},status=\"{}\"}} {value}",
                    labels(ns, name),
                    status.as_str()
                );
            }
        }
        let with_readiness: Vec<_> = entries
            .iter()
            .filter_map(|(key, e)| e.readiness.as_ref().map(|r| (key, r)))
            .collect();
        family(
            &mut out,
            READINESS_SCORE,
            "Readiness score of a Pacto (0-100).",
        );
        for ((ns, name), r) in &with_readiness {
            let _ = writeln!(out, "{READINESS_SCORE}{{{}}} {}", labels(ns, name), r.score);
        }
        family(
            &mut out,
            READINESS_GATE,
            "1 when the readiness gate of a Pacto is met, else 0.",
        );
        for ((ns, name), r) in &with_readiness {
            let _ = writeln!(
                out,
                "{READINESS_GATE}{{{}}} {}",
                labels(ns, name),
                u8::from(r.passing)
            );
        }
        family(
            &mut out,
            READINESS_STATUS,
            "Readiness gate state of a Pacto: 1 for the current state (Satisfied, BelowMinScore, Expired).",
        );
        for ((ns, name), r) in &with_readiness {
            for state in ["Satisfied", "BelowMinScore", "Expired"] {
                let _ = writeln!(
                    out,
                    "{READINESS_STATUS}{{{},status=\"{state}\"}} {}",
                    labels(ns, name),
                    u8::from(state == r.reason)
                );
            }
        }
        family(
            &mut out,
            READINESS_CHECKS,
            "Readiness claims of a Pacto by declared status.",
        );
        for ((ns, name), r) in &with_readiness {
            for (state, value) in [
                ("done", r.done),
                ("partial", r.partial),
                ("not-done", r.not_done),
                ("deferred", r.deferred),
            ] {
                let _ = writeln!(
                    out,
                    "{READINESS_CHECKS}{{{},status=\"{state}\"}} {value}",
                    labels(ns, name)
                );
            }
        }
        family(
            &mut out,
            UNDECLARED_PEERS,
            "Outbound peers of a Pacto's target that its contract does not declare, in fresh, complete node-agent evidence (an observation, not a finding).",
        );
        for ((ns, name), entry) in &entries {
            if let Some(count) = entry.undeclared_peers {
                let _ = writeln!(out, "{UNDECLARED_PEERS}{{{}}} {count}", labels(ns, name));
            }
        }
        out
    }
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readiness(passing: bool, expired: bool) -> ReadinessStatus {
        ReadinessStatus {
            score: 40,
            min_score: 80,
            passing,
            expired,
            done_count: 1,
            not_done_count: 2,
            ..ReadinessStatus::default()
        }
    }

    #[test]
    fn one_hot_status_and_removal() {
        let gauges = Gauges::new();
        gauges.set("shop", "orders", ContractStatus::NonCompliant, None, None);
        let text = gauges.render();
        assert!(text.contains(
            "pacto_contract_status{name=\"orders\",namespace=\"shop\",status=\"NonCompliant\"} 1"
        ));
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("pacto_contract_status{") && l.ends_with(" 0"))
                .count(),
            6
        );
        assert!(!text.contains("pacto_readiness_score{"));

        gauges.set(
            "shop",
            "orders",
            ContractStatus::Compliant,
            Some(&readiness(false, true)),
            None,
        );
        let text = gauges.render();
        assert!(text.contains("pacto_readiness_score{name=\"orders\",namespace=\"shop\"} 40"));
        assert!(text.contains("pacto_readiness_gate{name=\"orders\",namespace=\"shop\"} 0"));
        assert!(text.contains(
            "pacto_readiness_status{name=\"orders\",namespace=\"shop\",status=\"Expired\"} 1"
        ));
        assert!(text.contains(
            "pacto_readiness_checks{name=\"orders\",namespace=\"shop\",status=\"not-done\"} 2"
        ));

        // Readiness no longer declared: its series go, the status stays.
        gauges.set("shop", "orders", ContractStatus::Compliant, None, Some(3));
        assert!(
            gauges
                .render()
                .contains("pacto_undeclared_peers{name=\"orders\",namespace=\"shop\"} 3")
        );
        assert!(!gauges.render().contains("pacto_readiness_score{"));

        assert!(gauges.remove("shop", "orders"));
        assert!(!gauges.render().contains("orders"));
        assert!(!gauges.remove("shop", "orders"));

        gauges.set("shop", "a", ContractStatus::Compliant, None, None);
        gauges.set(
            "shop",
            "b",
            ContractStatus::Compliant,
            Some(&readiness(true, false)),
            None,
        );
        gauges.clear();
        let text = gauges.render();
        assert!(
            !text.contains("name=\"a\"") && !text.contains("name=\"b\""),
            "{text}"
        );
    }
}
