//! The per-Pacto gauges of docs/design/status.md#gauges, kept in their own registry so that the series of a
//! deleted Pacto (or of a Pacto that stopped declaring readiness) can be removed — the global
//! `metrics` recorder cannot forget a series. Rendered in the Prometheus text format next to the
//! process metrics on `/metrics`.

use std::borrow::Cow;
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
    /// `name="…",namespace="…"`, escaped once when the Pacto is first recorded: a scrape only
    /// copies it (a scrape renders every series of every Pacto).
    labels: Box<str>,
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

/// Entries by namespace, then name (the order of the rendered series).
type Entries = BTreeMap<String, BTreeMap<String, Entry>>;

/// The gauge registry, shared between the controller and the admin server.
#[derive(Debug, Clone, Default)]
pub struct Gauges(Arc<Mutex<Entries>>);

impl Gauges {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
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
        let mut entries = self.lock();
        // A steady reconcile finds its entry: no key or label is allocated again.
        if let Some(entry) = entries.get_mut(namespace).and_then(|n| n.get_mut(name)) {
            entry.status = status;
            entry.readiness = readiness;
            entry.undeclared_peers = undeclared_peers;
            return;
        }
        let labels = format!(
            "name=\"{}\",namespace=\"{}\"",
            escape(name),
            escape(namespace)
        );
        entries.entry(namespace.to_owned()).or_default().insert(
            name.to_owned(),
            Entry {
                labels: labels.into_boxed_str(),
                status,
                readiness,
                undeclared_peers,
            },
        );
    }

    /// Removes every series of `namespace/name`. Returns whether there were any.
    pub fn remove(&self, namespace: &str, name: &str) -> bool {
        let mut entries = self.lock();
        let Some(names) = entries.get_mut(namespace) else {
            return false;
        };
        let removed = names.remove(name).is_some();
        if names.is_empty() {
            entries.remove(namespace);
        }
        removed
    }

    /// Removes every series: a replica that stops leading exports none, so that only the
    /// leader's gauges are scraped (docs/design/status.md#leader-election).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Keeps only the Pactos in `live` (after a watch restart, deletions may have been missed).
    pub fn retain(&self, live: &std::collections::BTreeSet<(String, String)>) {
        let mut entries = self.lock();
        for (namespace, names) in entries.iter_mut() {
            names.retain(|name, _| live.contains(&(namespace.clone(), name.clone())));
        }
        entries.retain(|_, names| !names.is_empty());
    }

    /// The gauges in the Prometheus text exposition format (HELP and TYPE for each family),
    /// written under the lock straight from the entries (no copy of the registry).
    pub fn render(&self) -> String {
        let entries = self.lock();
        let all = || entries.values().flat_map(BTreeMap::values);
        let with_readiness = || all().filter_map(|e| e.readiness.as_ref().map(|r| (&*e.labels, r)));
        let count = all().count();
        // About 80 bytes a series, 6 status series a Pacto, more with readiness.
        let mut out = String::with_capacity(1024 + count * 640);
        family(
            &mut out,
            CONTRACT_STATUS,
            "Contract status of a Pacto: 1 for the current status, 0 for the others.",
        );
        for entry in all() {
            for status in ContractStatus::ALL {
                let value = u8::from(status == entry.status);
                let _ = writeln!(
                    out,
                    "{CONTRACT_STATUS}{{{},status=\"{}\"}} {value}",
                    entry.labels,
                    status.as_str()
                );
            }
        }
        family(
            &mut out,
            READINESS_SCORE,
            "Readiness score of a Pacto (0-100).",
        );
        for (labels, r) in with_readiness() {
            let _ = writeln!(out, "{READINESS_SCORE}{{{labels}}} {}", r.score);
        }
        family(
            &mut out,
            READINESS_GATE,
            "1 when the readiness gate of a Pacto is met, else 0.",
        );
        for (labels, r) in with_readiness() {
            let _ = writeln!(out, "{READINESS_GATE}{{{labels}}} {}", u8::from(r.passing));
        }
        family(
            &mut out,
            READINESS_STATUS,
            "Readiness gate state of a Pacto: 1 for the current state (Satisfied, BelowMinScore, Expired).",
        );
        for (labels, r) in with_readiness() {
            for state in ["Satisfied", "BelowMinScore", "Expired"] {
                let _ = writeln!(
                    out,
                    "{READINESS_STATUS}{{{labels},status=\"{state}\"}} {}",
                    u8::from(state == r.reason)
                );
            }
        }
        family(
            &mut out,
            READINESS_CHECKS,
            "Readiness claims of a Pacto by declared status.",
        );
        for (labels, r) in with_readiness() {
            for (state, value) in [
                ("done", r.done),
                ("partial", r.partial),
                ("not-done", r.not_done),
                ("deferred", r.deferred),
            ] {
                let _ = writeln!(
                    out,
                    "{READINESS_CHECKS}{{{labels},status=\"{state}\"}} {value}"
                );
            }
        }
        family(
            &mut out,
            UNDECLARED_PEERS,
            "Outbound peers of a Pacto's target that its contract does not declare, in fresh, complete node-agent evidence (an observation, not a finding).",
        );
        for entry in all() {
            if let Some(count) = entry.undeclared_peers {
                let _ = writeln!(out, "{UNDECLARED_PEERS}{{{}}} {count}", entry.labels);
            }
        }
        out
    }
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

/// A label value escaped for the text format; borrowed when nothing needs escaping (names and
/// namespaces are DNS labels, so always in practice).
fn escape(value: &str) -> Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
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
    fn label_values_are_escaped() {
        assert!(matches!(escape("orders"), Cow::Borrowed("orders")));
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        let gauges = Gauges::new();
        gauges.set("shop", "we\"ird", ContractStatus::Compliant, None, None);
        assert!(
            gauges
                .render()
                .contains("name=\"we\\\"ird\",namespace=\"shop\"")
        );
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
