//! `pacto status`, the pure half: what the command shows about a Pacto (built from the object,
//! its Events, the node Leases and the current time) and its rendering as text, JSON or YAML.
//! No I/O, so it is tested without a cluster; `status` reads the objects and calls it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use pacto_api::conditions::{
    CONTRACT_VALID, READINESS_SATISFIED, RUNTIME_OBSERVED, find_condition, is_stale, reason,
};
use pacto_api::{ClaimState, ContractStatus, DEFAULT_CHECK_INTERVAL_SECONDS, Pacto};
use serde::Serialize;

use crate::explain::{self, CONTRACT_UNAVAILABLE};

/// How many of the latest Events the report shows.
pub const EVENTS_SHOWN: usize = 5;

/// A node's heartbeat as `status` could read it (for EVIDENCE_STALE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLease {
    pub node: String,
    /// `Ok(renewTime)` (None: no renewTime), or why the Lease could not be read.
    pub renewed: Result<Option<Timestamp>, String>,
}

/// Everything `pacto status <name>` shows, in the guide's vocabulary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub namespace: String,
    pub name: String,
    /// `status.contractStatus`; `None` until the first reconcile.
    pub verdict: Option<String>,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    /// `<service> <version>` of the resolved contract.
    pub contract: Option<String>,
    /// `(evaluated, required)` assertions.
    pub coverage: Option<(i32, i32)>,
    pub conditions: Vec<ConditionLine>,
    pub findings: Vec<FindingLine>,
    /// All findings, when more than the listed ones exist.
    pub total_findings: Option<u64>,
    /// For an Unknown verdict: each code behind it with the guide's explanation.
    pub unknown: Vec<UnknownLine>,
    pub readiness: Option<ReadinessLine>,
    pub events: Vec<EventLine>,
    /// Why the Events could not be read, if they could not.
    pub events_note: Option<String>,
    pub last_reconciled_seconds_ago: Option<i64>,
    pub next_check: Option<NextCheck>,
}

/// One of the three conditions (which stage produced the verdict).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLine {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False`, `Unknown`; `None` when the condition is absent.
    pub status: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// Seconds since lastTransitionTime.
    pub age_seconds: Option<i64>,
    pub observed_generation: Option<i64>,
    /// observedGeneration behind metadata.generation: not re-evaluated on the latest spec.
    pub stale: bool,
    /// Why an absent condition is absent (the guide's two meaningful absences).
    pub absent_because: Option<&'static str>,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingLine {
    pub severity: String,
    pub code: String,
    pub subject: Option<String>,
    /// The collectors of its evidence refs (`k8s-observer`, `k8s-observer+ebpf`, `ebpf`).
    pub collector: Option<String>,
    /// Seconds since the newest evidence ref's observedAt.
    pub evidence_age_seconds: Option<i64>,
    pub message: String,
}

/// A code behind an Unknown verdict and what to do about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownLine {
    pub code: String,
    pub meaning: &'static str,
    pub next_step: &'static str,
    /// For EVIDENCE_STALE: the nodes named and their Lease age.
    pub nodes: Vec<NodeLine>,
}

/// A node behind EVIDENCE_STALE.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLine {
    pub node: String,
    /// Seconds since the Lease's renewTime.
    pub lease_age_seconds: Option<i64>,
    /// Why no age: no Lease, never renewed, or not readable (the error).
    pub lease_note: Option<String>,
}

/// The readiness score broken down by claim status.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessLine {
    pub score: i32,
    pub min_score: i32,
    pub passing: bool,
    pub expired: bool,
    pub done: i32,
    pub partial: i32,
    pub not_done: i32,
    pub deferred: i32,
}

/// One Event on the Pacto.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub count: i32,
    /// Seconds since it was last seen.
    pub age_seconds: Option<i64>,
    pub message: String,
}

/// When the next periodic check is due.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NextCheck {
    pub interval_seconds: i64,
    /// Seconds until it is due (negative: overdue).
    pub in_seconds: i64,
}

/// One row of `pacto status --all-namespaces`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableRow {
    pub namespace: String,
    pub name: String,
    pub verdict: Option<String>,
    pub errors: i32,
    pub warnings: i32,
    pub unknown: i32,
    pub readiness: Option<i32>,
    pub last_reconciled_seconds_ago: Option<i64>,
}

/// Every Pacto and the counts by verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Table {
    pub pactos: Vec<TableRow>,
    /// Verdict → how many Pactos have it (`Pending` for none yet).
    pub counts: BTreeMap<String, usize>,
}

fn seconds_since(then: Timestamp, now: Timestamp) -> i64 {
    now.as_second() - then.as_second()
}

fn parse_time(text: &str) -> Option<Timestamp> {
    text.parse().ok()
}

fn verdict_of(pacto: &Pacto) -> Option<String> {
    pacto
        .status
        .as_ref()
        .and_then(|s| s.contract_status)
        .map(|s| s.as_str().to_owned())
}

fn event_time(event: &Event) -> Option<Timestamp> {
    event
        .last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The last [`EVENTS_SHOWN`] Events, newest first.
fn events(list: &[Event], now: Timestamp) -> Vec<EventLine> {
    let mut sorted: Vec<&Event> = list.iter().collect();
    // Newest first; Events of the same second by reason, so that the order is stable.
    sorted.sort_by(|a, b| {
        event_time(b)
            .cmp(&event_time(a))
            .then_with(|| a.reason.cmp(&b.reason))
    });
    sorted
        .into_iter()
        .take(EVENTS_SHOWN)
        .map(|e| EventLine {
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1),
            age_seconds: event_time(e).map(|t| seconds_since(t, now)),
            message: e.message.clone().unwrap_or_default(),
        })
        .collect()
}

fn conditions(pacto: &Pacto, now: Timestamp) -> Vec<ConditionLine> {
    let generation = pacto.metadata.generation;
    let status = pacto.status.as_ref();
    let list = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let contract_failed = find_condition(list, CONTRACT_VALID)
        .is_some_and(|c| c.status != "True" || c.reason == reason::REFERENCE_ONLY);
    [CONTRACT_VALID, RUNTIME_OBSERVED, READINESS_SATISFIED]
        .into_iter()
        .map(|type_| match find_condition(list, type_) {
            Some(c) => ConditionLine {
                type_: type_.to_owned(),
                status: Some(c.status.clone()),
                reason: Some(c.reason.clone()),
                message: Some(c.message.clone()),
                age_seconds: Some(seconds_since(c.last_transition_time.0, now)),
                observed_generation: c.observed_generation,
                stale: is_stale(c, generation),
                absent_because: None,
            },
            None => ConditionLine {
                type_: type_.to_owned(),
                status: None,
                reason: None,
                message: None,
                age_seconds: None,
                observed_generation: None,
                stale: false,
                absent_because: Some(match type_ {
                    _ if status.and_then(|s| s.contract_status).is_none() => {
                        "not reconciled yet"
                    }
                    RUNTIME_OBSERVED if contract_failed => {
                        "the reconcile never got as far as observing (a reference-only contract, or one that failed at ContractValid)"
                    }
                    READINESS_SATISFIED => "the contract declares no readiness: block",
                    _ => "not set",
                }),
            },
        })
        .collect()
}

fn findings(pacto: &Pacto, now: Timestamp) -> Vec<FindingLine> {
    let Some(status) = &pacto.status else {
        return Vec::new();
    };
    status
        .findings
        .iter()
        .map(|f| {
            let mut collectors: Vec<&str> = f
                .evidence_refs
                .iter()
                .filter_map(|r| r.collector.as_deref())
                .collect();
            collectors.dedup();
            let newest = f
                .evidence_refs
                .iter()
                .filter_map(|r| parse_time(&r.observed_at))
                .max();
            FindingLine {
                severity: serde_json::to_value(f.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                code: f.code.clone(),
                subject: f.subject.clone(),
                collector: (!collectors.is_empty()).then(|| collectors.join(",")),
                evidence_age_seconds: newest.map(|t| seconds_since(t, now)),
                message: f.message.clone(),
            }
        })
        .collect()
}

fn unknown(
    pacto: &Pacto,
    findings: &[FindingLine],
    leases: &[NodeLease],
    now: Timestamp,
) -> Vec<UnknownLine> {
    let Some(status) = &pacto.status else {
        return Vec::new();
    };
    if status.contract_status != Some(ContractStatus::Unknown) {
        return Vec::new();
    }
    let mut codes: Vec<String> = Vec::new();
    if find_condition(&status.conditions, CONTRACT_VALID)
        .is_some_and(|c| c.reason == reason::UNAVAILABLE)
    {
        codes.push(CONTRACT_UNAVAILABLE.to_owned());
    }
    for f in findings {
        if explain::unknown_code(&f.code).is_some() && !codes.contains(&f.code) {
            codes.push(f.code.clone());
        }
    }
    codes
        .into_iter()
        .filter_map(|code| {
            let explanation = explain::unknown_code(&code)?;
            let nodes = if code == "EVIDENCE_STALE" {
                stale_nodes(findings)
                    .into_iter()
                    .map(|node| node_line(node, leases, now))
                    .collect()
            } else {
                Vec::new()
            };
            Some(UnknownLine {
                code,
                meaning: explanation.meaning,
                next_step: explanation.next_step,
                nodes,
            })
        })
        .collect()
}

/// The nodes named by the EVIDENCE_STALE findings, each once, in order.
pub fn stale_nodes(findings: &[FindingLine]) -> Vec<String> {
    let mut nodes: Vec<String> = Vec::new();
    for f in findings.iter().filter(|f| f.code == "EVIDENCE_STALE") {
        if let Some(node) = explain::node_in_message(&f.message)
            && !nodes.iter().any(|n| n == node)
        {
            nodes.push(node.to_owned());
        }
    }
    nodes
}

fn node_line(node: String, leases: &[NodeLease], now: Timestamp) -> NodeLine {
    let (age, note) = match leases.iter().find(|l| l.node == node).map(|l| &l.renewed) {
        Some(Ok(Some(renewed))) => (Some(seconds_since(*renewed, now)), None),
        Some(Ok(None)) => (None, Some("Lease never renewed".to_owned())),
        Some(Err(why)) => (None, Some(why.clone())),
        None => (None, Some("Lease not read".to_owned())),
    };
    NodeLine {
        node,
        lease_age_seconds: age,
        lease_note: note,
    }
}

fn readiness(pacto: &Pacto) -> Option<ReadinessLine> {
    let r = pacto.status.as_ref()?.readiness.as_ref()?;
    let count = |state: ClaimState| {
        i32::try_from(r.claims.iter().filter(|c| c.status == state).count()).unwrap_or(i32::MAX)
    };
    // The counts are written with the claims; a status without the claim list still has them.
    let (done, partial, not_done, deferred) = if r.claims.is_empty() {
        (
            r.done_count,
            r.partial_count,
            r.not_done_count,
            r.deferred_count,
        )
    } else {
        (
            count(ClaimState::Done),
            count(ClaimState::Partial),
            count(ClaimState::NotDone),
            count(ClaimState::Deferred),
        )
    };
    Some(ReadinessLine {
        score: r.score,
        min_score: r.min_score,
        passing: r.passing,
        expired: r.expired,
        done,
        partial,
        not_done,
        deferred,
    })
}

/// The report of one Pacto at `now`; `leases` are the nodes named by its EVIDENCE_STALE
/// findings ([`stale_nodes`]) as they could be read.
pub fn report(
    pacto: &Pacto,
    event_list: &[Event],
    leases: &[NodeLease],
    now: Timestamp,
) -> StatusReport {
    let status = pacto.status.as_ref();
    let findings = findings(pacto, now);
    let last = status
        .and_then(|s| s.last_reconciled_at.as_ref())
        .map(|t| t.0);
    let interval = pacto
        .spec
        .check_interval_seconds
        .map_or(i64::from(DEFAULT_CHECK_INTERVAL_SECONDS), i64::from);
    StatusReport {
        namespace: pacto.metadata.namespace.clone().unwrap_or_default(),
        name: pacto.metadata.name.clone().unwrap_or_default(),
        verdict: verdict_of(pacto),
        generation: pacto.metadata.generation,
        observed_generation: status.and_then(|s| s.observed_generation),
        contract: status
            .and_then(|s| s.contract.as_ref())
            .map(|c| format!("{} {}", c.service_name, c.version)),
        coverage: status
            .and_then(|s| s.evaluation_coverage.as_ref())
            .map(|c| (c.evaluated, c.required)),
        conditions: conditions(pacto, now),
        unknown: unknown(pacto, &findings, leases, now),
        total_findings: status
            .and_then(|s| s.total_findings)
            .filter(|t| usize::try_from(*t).is_ok_and(|t| t > findings.len())),
        findings,
        readiness: readiness(pacto),
        events: events(event_list, now),
        events_note: None,
        last_reconciled_seconds_ago: last.map(|t| seconds_since(t, now)),
        next_check: last.map(|t| NextCheck {
            interval_seconds: interval,
            in_seconds: t.as_second() + interval - now.as_second(),
        }),
    }
}

/// The `--all-namespaces` table of `pactos` at `now`.
pub fn table(pactos: &[Pacto], now: Timestamp) -> Table {
    let mut counts = BTreeMap::new();
    let rows = pactos
        .iter()
        .map(|p| {
            let verdict = verdict_of(p);
            *counts
                .entry(verdict.clone().unwrap_or_else(|| "Pending".to_owned()))
                .or_insert(0) += 1;
            let status = p.status.as_ref();
            let summary = status.and_then(|s| s.summary.as_ref());
            TableRow {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                verdict,
                errors: summary.map_or(0, |s| s.error_count),
                warnings: summary.map_or(0, |s| s.warning_count),
                unknown: summary.map_or(0, |s| s.unknown_count),
                readiness: status.and_then(|s| s.readiness.as_ref()).map(|r| r.score),
                last_reconciled_seconds_ago: status
                    .and_then(|s| s.last_reconciled_at.as_ref())
                    .map(|t| seconds_since(t.0, now)),
            }
        })
        .collect();
    Table {
        pactos: rows,
        counts,
    }
}

/// A compact duration: `42s`, `3m12s`, `2h5m`, `4d3h`.
pub fn duration(seconds: i64) -> String {
    let s = seconds.unsigned_abs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

fn ago(seconds: Option<i64>) -> String {
    seconds.map_or_else(|| "-".to_owned(), |s| format!("{} ago", duration(s)))
}

/// ANSI styling, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    colour: bool,
}

impl Style {
    /// Colour only on a terminal, and never when `NO_COLOR` is set to a non-empty value
    /// (no-color.org).
    pub fn detect(stdout_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> Self {
        Self {
            colour: stdout_is_terminal && no_color.is_none_or(std::ffi::OsStr::is_empty),
        }
    }

    /// Plain text.
    pub const PLAIN: Self = Self { colour: false };

    fn paint(self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    fn verdict(self, verdict: Option<&str>) -> String {
        match verdict {
            None => self.paint("2", "Pending (not reconciled yet)"),
            Some(v @ ("Compliant" | "Reference")) => self.paint("1;32", v),
            Some(v @ ("Warning" | "Unknown")) => self.paint("1;33", v),
            Some(v) => self.paint("1;31", v),
        }
    }

    fn severity(self, severity: &str) -> String {
        let padded = format!("{severity:<7}");
        match severity {
            "error" => self.paint("31", &padded),
            "warning" | "unknown" => self.paint("33", &padded),
            _ => padded,
        }
    }

    fn condition_status(self, status: &str) -> String {
        let padded = format!("{status:<7}");
        match status {
            "True" => self.paint("32", &padded),
            "False" => self.paint("31", &padded),
            _ => self.paint("33", &padded),
        }
    }
}

/// The text of one report.
pub fn text(r: &StatusReport, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}/{}: {}",
        style.bold("Pacto"),
        r.namespace,
        r.name,
        style.verdict(r.verdict.as_deref())
    );
    if let Some(contract) = &r.contract {
        let _ = writeln!(out, "  Contract:   {contract}");
    }
    if let Some((evaluated, required)) = r.coverage {
        let _ = writeln!(
            out,
            "  Coverage:   {evaluated}/{required} required assertions observed"
        );
    }
    let _ = writeln!(
        out,
        "  Generation: {} (status observed {})",
        r.generation
            .map_or_else(|| "-".to_owned(), |g| g.to_string()),
        r.observed_generation
            .map_or_else(|| "-".to_owned(), |g| g.to_string())
    );

    let _ = writeln!(
        out,
        "\n{}",
        style.bold("Conditions (the stage behind the verdict):")
    );
    for c in &r.conditions {
        match &c.status {
            Some(status) => {
                let stale = if c.stale {
                    style.paint(
                        "33",
                        &format!(
                            "  STALE: observedGeneration {} < generation {}",
                            c.observed_generation
                                .map_or_else(|| "-".to_owned(), |g| g.to_string()),
                            r.generation
                                .map_or_else(|| "-".to_owned(), |g| g.to_string())
                        ),
                    )
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "  {:<19} {} {:<18} {}{stale}",
                    c.type_,
                    style.condition_status(status),
                    c.reason.as_deref().unwrap_or_default(),
                    ago(c.age_seconds),
                );
                if let Some(message) = c.message.as_deref().filter(|m| !m.is_empty()) {
                    let _ = writeln!(out, "      {message}");
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "  {:<19} absent: {}",
                    c.type_,
                    c.absent_because.unwrap_or_default()
                );
            }
        }
    }

    let _ = write!(out, "\n{}", style.bold("Findings"));
    match r.total_findings {
        Some(total) => {
            let _ = writeln!(out, " ({} of {total}):", r.findings.len());
        }
        None => {
            let _ = writeln!(out, " ({}):", r.findings.len());
        }
    }
    if r.findings.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for f in &r.findings {
        let _ = writeln!(
            out,
            "  {} {} {}  collector {}  evidence {}",
            style.severity(&f.severity),
            f.code,
            f.subject.as_deref().unwrap_or("-"),
            f.collector.as_deref().unwrap_or("-"),
            ago(f.evidence_age_seconds),
        );
        let _ = writeln!(out, "      {}", f.message);
    }

    if !r.unknown.is_empty() {
        let _ = writeln!(out, "\n{}", style.bold("Why Unknown:"));
        for u in &r.unknown {
            let _ = writeln!(out, "  {}: {}.", u.code, u.meaning);
            let _ = writeln!(out, "      Next: {}.", u.next_step);
            for n in &u.nodes {
                match (n.lease_age_seconds, &n.lease_note) {
                    (Some(age), _) => {
                        let _ = writeln!(
                            out,
                            "      Node {}: Lease renewed {} ago",
                            n.node,
                            duration(age)
                        );
                    }
                    (None, note) => {
                        let _ = writeln!(
                            out,
                            "      Node {}: {}",
                            n.node,
                            note.as_deref().unwrap_or("Lease not read")
                        );
                    }
                }
            }
        }
    }

    if let Some(rd) = &r.readiness {
        let gate = match (rd.expired, rd.passing) {
            (true, _) => "expired",
            (false, true) => "met",
            (false, false) => "unmet",
        };
        let _ = writeln!(
            out,
            "\n{} {}/100 (min {}, gate {gate}): {} done, {} partial, {} not-done, {} deferred",
            style.bold("Readiness:"),
            rd.score,
            rd.min_score,
            rd.done,
            rd.partial,
            rd.not_done,
            rd.deferred
        );
    }

    let _ = writeln!(out, "\n{}", style.bold("Events (latest first):"));
    if let Some(note) = &r.events_note {
        let _ = writeln!(out, "  not readable: {note}");
    } else if r.events.is_empty() {
        let _ = writeln!(
            out,
            "  none (events expire after the API server's --event-ttl)"
        );
    }
    for e in &r.events {
        let _ = writeln!(
            out,
            "  {:<7} {:<19} x{:<3} {:<10} {}",
            e.type_,
            e.reason,
            e.count,
            ago(e.age_seconds),
            e.message
        );
    }

    match &r.next_check {
        Some(next) if next.in_seconds >= 0 => {
            let _ = writeln!(
                out,
                "\nNext check: in {} (every {}s; last reconciled {})",
                duration(next.in_seconds),
                next.interval_seconds,
                ago(r.last_reconciled_seconds_ago)
            );
        }
        Some(next) => {
            let _ = writeln!(
                out,
                "\nNext check: due {} ago (every {}s; last reconciled {})",
                duration(next.in_seconds),
                next.interval_seconds,
                ago(r.last_reconciled_seconds_ago)
            );
        }
        None => {
            let _ = writeln!(out, "\nNext check: after the first reconcile");
        }
    }
    out
}

/// The text of the `--all-namespaces` table.
pub fn table_text(t: &Table, style: Style) -> String {
    let mut out = String::new();
    let header = format!(
        "{:<20} {:<28} {:<14} {:>6} {:>8} {:>7} {:>9}  {}",
        "NAMESPACE", "NAME", "VERDICT", "ERRORS", "WARNINGS", "UNKNOWN", "READINESS", "RECONCILED"
    );
    let _ = writeln!(out, "{}", style.bold(&header));
    for row in &t.pactos {
        let verdict = row.verdict.as_deref().unwrap_or("Pending");
        let padded = format!("{verdict:<14}");
        let verdict = match verdict {
            "Compliant" | "Reference" => style.paint("32", &padded),
            "Warning" | "Unknown" | "Pending" => style.paint("33", &padded),
            _ => style.paint("31", &padded),
        };
        let _ = writeln!(
            out,
            "{:<20} {:<28} {verdict} {:>6} {:>8} {:>7} {:>9}  {}",
            row.namespace,
            row.name,
            row.errors,
            row.warnings,
            row.unknown,
            row.readiness
                .map_or_else(|| "-".to_owned(), |s| s.to_string()),
            ago(row.last_reconciled_seconds_ago)
        );
    }
    let counts = t
        .counts
        .iter()
        .map(|(verdict, n)| format!("{n} {verdict}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "\n{} Pactos: {}",
        t.pactos.len(),
        if counts.is_empty() { "none" } else { &counts }
    );
    out
}

/// Replaces every age (`12s ago`, `in 4m30s`, `due 3s ago`) in `text` by `<age>`, and the
/// padding after an age by one space, so that outputs compare as goldens.
pub fn normalize_ages(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
        let (before, from) = rest.split_at(i);
        out.push_str(before);
        let preceded_by_word = before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '.' || c == '/');
        let len = from
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, 's' | 'm' | 'h' | 'd')))
            .unwrap_or(from.len());
        let token = &from[..len];
        let after = &from[len..];
        let is_age = !preceded_by_word
            && token.ends_with(['s', 'm', 'h', 'd'])
            && (after.starts_with(" ago") || before.ends_with("in "));
        if !is_age {
            out.push_str(token);
            rest = after;
        } else if let Some(tail) = after.strip_prefix(" ago") {
            // The age column's padding depends on the age's width: one space stands for it.
            out.push_str("<age> ago");
            let trimmed = tail.trim_start_matches(' ');
            if trimmed.len() < tail.len() {
                out.push(' ');
            }
            rest = trimmed;
        } else {
            out.push_str("<age>");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    /// An Unknown Pacto whose finding is EVIDENCE_STALE on node `worker-1`, a generation ahead of
    /// its RuntimeObserved condition, with readiness and one event.
    fn unknown_pacto() -> Pacto {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "Pacto",
            "metadata": {"name": "shop", "namespace": "team-a", "generation": 3},
            "spec": {"contractRef": {"oci": "oci://r/pacto/shop"}, "checkIntervalSeconds": 60,
                     "target": {"serviceName": "shop"}},
            "status": {
                "contractStatus": "Unknown",
                "evaluationCoverage": {"evaluated": 3, "required": 4},
                "contract": {"serviceName": "shop", "version": "1.2.0"},
                "findings": [{
                    "code": "EVIDENCE_STALE", "severity": "unknown", "category": "runtime",
                    "subject": "interface/http",
                    "message": "node-agent evidence of node worker-1 is stale: no renewed Lease",
                    "evidenceRefs": [{"source": "k8s", "observedAt": "2026-12-04T10:59:00Z",
                                      "collector": "k8s-observer+ebpf"}]
                }],
                "readiness": {"score": 75, "minScore": 80, "passing": false, "totalWeight": 4,
                              "earnedWeight": 3, "expired": false, "doneCount": 0,
                              "partialCount": 0, "notDoneCount": 0, "deferredCount": 0,
                              "claims": [
                                  {"id": "a", "type": "t", "status": "done", "weight": 1, "earnedWeight": 1},
                                  {"id": "b", "type": "t", "status": "not-done", "weight": 1, "earnedWeight": 0},
                                  {"id": "c", "type": "t", "status": "deferred", "weight": 1, "earnedWeight": 0}
                              ]},
                "conditions": [
                    {"type": "ContractValid", "status": "True", "reason": "Parsed",
                     "message": "Contract shop 1.2.0 is valid", "observedGeneration": 3,
                     "lastTransitionTime": "2026-12-04T10:00:00Z"},
                    {"type": "RuntimeObserved", "status": "True", "reason": "Found",
                     "message": "Runtime evidence collected successfully", "observedGeneration": 2,
                     "lastTransitionTime": "2026-12-04T10:30:00Z"}
                ],
                "lastReconciledAt": "2026-12-04T10:59:00Z",
                "observedGeneration": 3
            }
        }))
        .expect("a Pacto")
    }

    fn event() -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "e1", "namespace": "team-a"},
            "involvedObject": {"kind": "Pacto", "name": "shop"},
            "type": "Warning", "reason": "ValidationFailed", "count": 2,
            "message": "ContractStatus: Unknown, 0 errors, 0 warnings",
            "lastTimestamp": "2026-12-04T10:58:00Z"
        }))
        .expect("an Event")
    }

    #[test]
    fn an_unknown_verdict_is_explained_with_the_node_lease() {
        let now = at("2026-12-04T11:00:00Z");
        let leases = [NodeLease {
            node: "worker-1".into(),
            renewed: Ok(Some(at("2026-12-04T10:55:00Z"))),
        }];
        let r = report(&unknown_pacto(), &[event()], &leases, now);
        assert_eq!(r.verdict.as_deref(), Some("Unknown"));
        assert_eq!(r.unknown.len(), 1);
        assert_eq!(r.unknown[0].code, "EVIDENCE_STALE");
        assert_eq!(r.unknown[0].nodes[0].lease_age_seconds, Some(300));
        let stale: Vec<bool> = r.conditions.iter().map(|c| c.stale).collect();
        assert_eq!(stale, [false, true, false]);
        let readiness = r.readiness.as_ref().expect("readiness");
        assert_eq!(
            (readiness.done, readiness.not_done, readiness.deferred),
            (1, 1, 1)
        );
        assert_eq!(r.next_check.as_ref().map(|n| n.in_seconds), Some(0));
        let text = text(&r, Style::PLAIN);
        for needle in [
            "Pacto team-a/shop: Unknown",
            "RuntimeObserved     True    Found              30m0s ago  STALE: observedGeneration 2 < generation 3",
            "ReadinessSatisfied  absent: the contract declares no readiness: block",
            "unknown EVIDENCE_STALE interface/http  collector k8s-observer+ebpf  evidence 1m0s ago",
            "EVIDENCE_STALE: the node agent on the pod's node stopped reporting.",
            "Node worker-1: Lease renewed 5m0s ago",
            "Readiness: 75/100 (min 80, gate unmet): 1 done, 0 partial, 1 not-done, 1 deferred",
            "Warning ValidationFailed    x2   2m0s ago   ContractStatus: Unknown, 0 errors, 0 warnings",
            "Next check: in 0s (every 60s; last reconciled 1m0s ago)",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    }

    #[test]
    fn an_unreadable_lease_is_named_not_fatal() {
        let leases = [NodeLease {
            node: "worker-1".into(),
            renewed: Err(
                "cannot get leases.coordination.k8s.io pacto-node-agent/worker-1: forbidden: no"
                    .into(),
            ),
        }];
        let r = report(&unknown_pacto(), &[], &leases, at("2026-12-04T11:00:00Z"));
        let text = text(&r, Style::PLAIN);
        assert!(
            text.contains("Node worker-1: cannot get leases.coordination.k8s.io pacto-node-agent/worker-1: forbidden"),
            "{text}"
        );
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        let r = report(
            &unknown_pacto(),
            &[event()],
            &[],
            at("2026-12-04T11:00:00Z"),
        );
        let coloured = Style::detect(true, None);
        assert!(text(&r, coloured).contains("\x1b[1;33mUnknown\x1b[0m"));
        for style in [
            Style::detect(false, None),                 // piped
            Style::detect(true, Some(OsStr::new("1"))), // NO_COLOR=1
            Style::detect(false, Some(OsStr::new("1"))),
        ] {
            assert_eq!(style, Style::PLAIN);
            assert!(!text(&r, style).contains('\x1b'));
            let t = table(&[unknown_pacto()], at("2026-12-04T11:00:00Z"));
            assert!(!table_text(&t, style).contains('\x1b'));
        }
        // An empty NO_COLOR does not disable colour (no-color.org).
        assert_eq!(Style::detect(true, Some(OsStr::new(""))), coloured);
    }

    #[test]
    fn the_table_counts_pactos_by_verdict() {
        let mut compliant = unknown_pacto();
        compliant.metadata.name = Some("cart".into());
        if let Some(s) = compliant.status.as_mut() {
            s.contract_status = Some(ContractStatus::Compliant);
        }
        let mut pending = unknown_pacto();
        pending.metadata.name = Some("new".into());
        pending.status = None;
        let t = table(
            &[unknown_pacto(), compliant.clone(), compliant, pending],
            at("2026-12-04T11:00:00Z"),
        );
        assert_eq!(
            t.counts
                .iter()
                .map(|(k, v)| (k.as_str(), *v))
                .collect::<Vec<_>>(),
            [("Compliant", 2), ("Pending", 1), ("Unknown", 1)]
        );
        let text = table_text(&t, Style::PLAIN);
        assert!(
            text.ends_with("4 Pactos: 2 Compliant, 1 Pending, 1 Unknown\n"),
            "{text}"
        );
    }

    #[test]
    fn a_pacto_never_reconciled_reads_pending() {
        let mut p = unknown_pacto();
        p.status = None;
        let text = text(
            &report(&p, &[], &[], at("2026-12-04T11:00:00Z")),
            Style::PLAIN,
        );
        assert!(
            text.contains("Pacto team-a/shop: Pending (not reconciled yet)"),
            "{text}"
        );
        assert!(
            text.contains("ContractValid       absent: not reconciled yet"),
            "{text}"
        );
        assert!(
            text.contains("Next check: after the first reconcile"),
            "{text}"
        );
    }

    #[test]
    fn ages_are_normalized_and_nothing_else() {
        assert_eq!(
            normalize_ages(
                "Parsed 3m12s ago  x2   12s ago\nNext check: in 4m30s (every 300s; last reconciled 1h2m ago) v1.2.0 node-1 e2e-5s"
            ),
            "Parsed <age> ago x2   <age> ago\nNext check: in <age> (every 300s; last reconciled <age> ago) v1.2.0 node-1 e2e-5s"
        );
        assert_eq!(duration(59), "59s");
        assert_eq!(duration(3599), "59m59s");
        assert_eq!(duration(90_000), "1d1h");
    }
}
