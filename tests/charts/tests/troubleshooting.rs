//! docs/troubleshooting.md against the code, so that the guide cannot name what does not exist:
//! - the conditions table is exactly the condition states the status-writer can write
//!   (`ConditionState::ALL`: type, status and reason);
//! - the events table is exactly the eight event reasons of `pacto-api`, no more, no fewer;
//! - every other identifier in the prose (a CamelCase word) is one of those, a contract status,
//!   a kind of ours or a listed Kubernetes term;
//! - every UPPER_SNAKE word is a finding code of `pacto-engine` or `pacto-contract` (or its
//!   `PARSE_ERROR` load code);
//! - every chart value path is a key of a chart's `values.yaml` or a helmfile environment, and
//!   every `spec.`/`status.` path a field of the generated Pacto CRD;
//! - every `--flag` is in docs/configuration.md or the CLI reference (or is listed as foreign),
//!   every `pacto <command>` exists, and every `pacto_*` metric is in docs/metrics.md.

use std::collections::BTreeSet;
use std::fs;

use anyhow::{Context, Result, bail, ensure};
use pacto_api::conditions;
use pacto_api::labels::event_reason;
use pacto_chart_tests::repo_root;
use pacto_chart_tests::values::{has_path, schema_has, values_files};
use pacto_engine::{ContractStatus, FindingCode};
use pacto_status_writer::ConditionState;
use serde_json::Value;

/// Flags the guide names that belong to other programs (not ours, so not in our references).
const FOREIGN_FLAGS: &[(&str, &str)] = &[("--event-ttl", "kube-apiserver")];

/// Kinds of ours the guide may name.
const OUR_KINDS: &[&str] = &["Pacto", "PactoRevision", "NodeRuntimeObservation"];

/// CamelCase words the guide uses that are Kubernetes or Prometheus vocabulary, not Pacto
/// identifiers.
const KUBERNETES_TERMS: &[&str] = &[
    "ClusterRole",
    "DaemonSet",
    "EndpointSlices",
    "ExternalName",
    "PodMonitors",
    "ServiceMonitors",
    // The prefix of the ValidationFailed message (`ContractStatus: NonCompliant, ...`).
    "ContractStatus",
    // A gRPC status code the operator's `reports refused by the observer` line names.
    "PermissionDenied",
];

/// The guide, split into prose (outside fenced blocks) and fenced blocks `(info, body)`.
struct Guide {
    prose: Vec<String>,
    fences: Vec<(String, String)>,
}

fn read(path: &str) -> Result<String> {
    let full = repo_root().join(path);
    fs::read_to_string(&full).with_context(|| format!("reading {}", full.display()))
}

fn guide() -> Result<Guide> {
    let text = read("docs/troubleshooting.md")?;
    let mut prose = Vec::new();
    let mut fences = Vec::new();
    // (info, body, indentation of the fence inside a list item)
    let mut open: Option<(String, String, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            if let Some((info, body, _)) = open.take() {
                fences.push((info, body));
            } else {
                let indent = line.len() - trimmed.len();
                open = Some((info.trim().to_owned(), String::new(), indent));
            }
        } else if let Some((_, body, indent)) = open.as_mut() {
            let cut = line.len() - line.trim_start_matches(' ').len();
            body.push_str(&line[cut.min(*indent)..]);
            body.push('\n');
        } else {
            prose.push(line.to_owned());
        }
    }
    ensure!(
        open.is_none(),
        "docs/troubleshooting.md: unterminated fenced block"
    );
    Ok(Guide { prose, fences })
}

/// The inline code spans of the prose lines.
fn code_spans(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .flat_map(|line| {
            line.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Words: maximal runs of ASCII alphanumerics and `_`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

fn is_upper_snake(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.contains('_')
        && !word.ends_with('_')
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// `NonCompliant`, `ContractValid`: an uppercase start, lowercase after it, a second hump.
fn is_camel(word: &str) -> bool {
    let mut chars = word.chars();
    let starts_upper = chars.next().is_some_and(|c| c.is_ascii_uppercase());
    let rest: Vec<char> = chars.collect();
    starts_upper
        && rest.first().is_some_and(char::is_ascii_lowercase)
        && rest.iter().any(char::is_ascii_uppercase)
        && word.chars().all(|c| c.is_ascii_alphanumeric())
}

/// The rows (cells trimmed, backticks removed) of the first table under `## {heading}`.
fn table(guide: &Guide, heading: &str) -> Result<Vec<Vec<String>>> {
    let start = guide
        .prose
        .iter()
        .position(|l| l.trim() == format!("## {heading}"))
        .with_context(|| format!("no section `## {heading}`"))?;
    let rows: Vec<Vec<String>> = guide.prose[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("## "))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace('`', ""))
                .collect()
        })
        .collect();
    ensure!(rows.len() > 2, "section `{heading}` has no table");
    // Header and separator rows.
    Ok(rows.into_iter().skip(2).collect())
}

fn condition_types() -> BTreeSet<&'static str> {
    [
        conditions::CONTRACT_VALID,
        conditions::RUNTIME_OBSERVED,
        conditions::READINESS_SATISFIED,
    ]
    .into()
}

/// Every `(type, status, reason)` the status-writer can write: its `ConditionState` list, through
/// which alone it sets conditions (docs/design/status.md#conditions). A state added to the code
/// and not to the guide's table fails [`conditions_table_is_exactly_the_api_conditions`].
fn condition_rows() -> BTreeSet<(&'static str, &'static str, &'static str)> {
    ConditionState::ALL
        .iter()
        .map(|state| {
            let (type_, status, reason) = state.parts();
            (type_, status.as_str(), reason)
        })
        .collect()
}

fn condition_reasons() -> BTreeSet<&'static str> {
    condition_rows().into_iter().map(|(_, _, r)| r).collect()
}

/// The event reasons of type Normal; the other five are Warning.
const NORMAL_EVENTS: [&str; 3] = [
    event_reason::CONTRACT_RECOVERED,
    event_reason::REVISION_CREATED,
    event_reason::READINESS_RECOVERED,
];

fn finding_codes() -> BTreeSet<&'static str> {
    FindingCode::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(pacto_contract::codes::REGISTRY.iter().map(|(c, _, _)| *c))
        // The load code status.validation carries for an Invalid without a validator finding
        // (docs/design/resolution.md#every-invalid-carries-a-validation-report).
        .chain([pacto_contract::codes::PARSE_ERROR])
        // The entry closing a capped list (docs/design/status.md#size-limits).
        .chain([pacto_status_writer::LIST_TRUNCATED])
        .collect()
}

#[test]
fn conditions_table_is_exactly_the_api_conditions() -> Result<()> {
    let guide = guide()?;
    let mut seen = BTreeSet::new();
    for row in table(&guide, "Reading the conditions")? {
        let [type_, status, reason, ..] = row.as_slice() else {
            bail!("conditions table row with fewer than 3 cells: {row:?}");
        };
        let known = condition_rows()
            .into_iter()
            .find(|(t, s, r)| t == type_ && s == status && r == reason)
            .with_context(|| {
                format!(
                    "docs/troubleshooting.md names condition {type_} {status} {reason}, \
                     which the status-writer never writes (types {:?}, reasons {:?})",
                    condition_types(),
                    condition_reasons()
                )
            })?;
        ensure!(seen.insert(known), "condition row {known:?} listed twice");
    }
    let missing: Vec<_> = condition_rows().difference(&seen).copied().collect();
    ensure!(
        missing.is_empty(),
        "condition states the status-writer can write and the guide does not list: {missing:?}"
    );
    Ok(())
}

#[test]
fn events_table_is_exactly_the_eight_reasons() -> Result<()> {
    let guide = guide()?;
    let mut seen = BTreeSet::new();
    for row in table(&guide, "Reading the events")? {
        let [reason, type_, ..] = row.as_slice() else {
            bail!("events table row with fewer than 2 cells: {row:?}");
        };
        ensure!(
            event_reason::ALL.contains(&reason.as_str()),
            "docs/troubleshooting.md names event reason {reason}, not one of {:?}",
            event_reason::ALL
        );
        let expected = if NORMAL_EVENTS.contains(&reason.as_str()) {
            "Normal"
        } else {
            "Warning"
        };
        ensure!(
            type_ == expected,
            "event {reason} is documented as {type_}, it is {expected}"
        );
        ensure!(seen.insert(reason.clone()), "event {reason} listed twice");
    }
    let all: BTreeSet<String> = event_reason::ALL.iter().map(|s| (*s).to_owned()).collect();
    ensure!(
        seen == all,
        "the guide's events {seen:?} are not exactly the eight {all:?}"
    );
    ensure!(
        guide
            .prose
            .iter()
            .any(|l| l.contains("these eight reasons")),
        "the guide must say the operator emits exactly eight reasons"
    );
    Ok(())
}

#[test]
fn every_identifier_in_the_prose_exists() -> Result<()> {
    let guide = guide()?;
    let statuses: Vec<&str> = ContractStatus::ALL.iter().map(|s| s.as_str()).collect();
    let known: BTreeSet<&str> = condition_types()
        .into_iter()
        .chain(condition_reasons())
        .chain(event_reason::ALL)
        .chain(statuses)
        .chain(OUR_KINDS.iter().copied())
        .chain(KUBERNETES_TERMS.iter().copied())
        .collect();
    let unknown: BTreeSet<&str> = guide
        .prose
        .iter()
        // Link targets are anchors and file names, not identifiers.
        .flat_map(|l| l.split("](").enumerate())
        .flat_map(|(i, part)| {
            let part = if i == 0 {
                part
            } else {
                part.split_once(')').map_or("", |(_, after)| after)
            };
            words(part)
        })
        .filter(|w| is_camel(w) && !known.contains(w))
        .collect();
    ensure!(
        unknown.is_empty(),
        "docs/troubleshooting.md names identifiers that are neither condition types, condition \
         reasons, event reasons, contract statuses nor known kinds: {unknown:?}"
    );
    Ok(())
}

#[test]
fn every_finding_code_exists() -> Result<()> {
    let guide = guide()?;
    let codes = finding_codes();
    let all_text = guide
        .prose
        .iter()
        .cloned()
        .chain(guide.fences.iter().map(|(_, body)| body.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let named: BTreeSet<&str> = words(&all_text).filter(|w| is_upper_snake(w)).collect();
    ensure!(!named.is_empty(), "no finding code found in the guide");
    let unknown: Vec<_> = named.iter().filter(|c| !codes.contains(*c)).collect();
    ensure!(
        unknown.is_empty(),
        "docs/troubleshooting.md names finding codes that neither pacto-engine's registry nor \
         pacto-contract's codes define: {unknown:?}"
    );
    // The five Unknown codes the guide explains one by one must all be there.
    for code in [
        "EVIDENCE_MISSING",
        "OBSERVATION_UNSUPPORTED",
        "COLLECTION_FAILED",
        "EVIDENCE_STALE",
        "EVIDENCE_INSUFFICIENT",
    ] {
        ensure!(named.contains(code), "the guide does not explain {code}");
    }
    Ok(())
}

fn pacto_schema() -> Result<Value> {
    let text = read("charts/pacto-crds/templates/pacto.trianalab.io_pactos.yaml")?;
    let crd: Value = serde_norway::from_str(&text).context("parsing the Pacto CRD")?;
    let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    ensure!(schema.is_object(), "the Pacto CRD has no schema");
    Ok(schema)
}

fn is_value_path(span: &str) -> bool {
    let segments: Vec<&str> = span.split('.').collect();
    segments.len() > 1
        && segments.iter().all(|s| {
            s.starts_with(|c: char| c.is_ascii_lowercase())
                && s.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

#[test]
fn every_chart_value_and_field_path_exists() -> Result<()> {
    let guide = guide()?;
    let files = values_files()?;
    let schema = pacto_schema()?;
    let mut chart_values = 0;
    for span in code_spans(&guide.prose) {
        if !is_value_path(&span) {
            continue;
        }
        let segments: Vec<&str> = span.split('.').collect();
        match segments[0] {
            // Object metadata is Kubernetes', not in the CRD schema.
            "metadata" => {}
            "spec" | "status" => ensure!(
                schema_has(&schema, &segments),
                "docs/troubleshooting.md names `{span}`, which is not a field of the Pacto CRD"
            ),
            _ => {
                chart_values += 1;
                ensure!(
                    files.iter().any(|(_, v)| has_path(v, &span)),
                    "docs/troubleshooting.md names chart value `{span}`, which no chart \
                     values.yaml or helmfile environment defines"
                );
            }
        }
    }
    for required in [
        "controller.enableProbing",
        "controller.enableMetricsObservation",
        "nodeAgent.enabled",
        "nodeAgent.namespace",
    ] {
        ensure!(
            guide
                .prose
                .iter()
                .any(|l| l.contains(&format!("`{required}`"))),
            "the guide does not name the chart value {required}"
        );
    }
    ensure!(
        chart_values >= 4,
        "too few chart values found: {chart_values}"
    );

    // YAML snippets: a helmfile environment snippet must use environment keys only; the
    // evidenceRefs example must use fields of the CRD's findings.
    let environments: Vec<&Value> = files
        .iter()
        .filter(|(p, _)| p.contains("environments"))
        .map(|(_, v)| v)
        .collect();
    ensure!(!environments.is_empty(), "no helmfile environment files");
    for (info, body) in guide.fences.iter().filter(|(i, _)| i == "yaml") {
        let snippet: Value = serde_norway::from_str(body)
            .with_context(|| format!("parsing the guide's {info} block:\n{body}"))?;
        let mut leaves = Vec::new();
        leaf_paths(&snippet, String::new(), &mut leaves);
        if snippet.get("evidenceRefs").is_some() {
            for leaf in &leaves {
                let path: Vec<&str> = ["status", "findings"]
                    .into_iter()
                    .chain(leaf.split('.'))
                    .collect();
                ensure!(
                    schema_has(&schema, &path),
                    "the guide's evidenceRefs example has `{leaf}`, not in the Pacto CRD"
                );
            }
        } else {
            for leaf in &leaves {
                ensure!(
                    environments.iter().all(|env| has_path(env, leaf)),
                    "the guide's environment snippet sets `{leaf}`, which a helmfile \
                     environment file does not have"
                );
            }
        }
    }
    Ok(())
}

/// Dotted paths of the scalar leaves of `value` (array elements are descended into without an
/// index).
fn leaf_paths(value: &Value, prefix: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                leaf_paths(child, path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                leaf_paths(item, prefix.clone(), out);
            }
        }
        _ => out.push(prefix),
    }
}

/// Whether `reference` documents `flag` as a whole flag (not a prefix of a longer one).
fn documents_flag(reference: &str, flag: &str) -> bool {
    reference.contains(&format!("`{flag}`")) || reference.contains(&format!("`{flag} "))
}

fn flags_in(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace().filter_map(|w| {
        let w = w.trim_matches(|c: char| c == '`' || c == ',' || c == ')' || c == '(');
        let flag = w.split('=').next().unwrap_or(w);
        (flag.starts_with("--") && flag.len() > 2).then_some(flag)
    })
}

#[test]
fn every_flag_and_command_exists() -> Result<()> {
    let guide = guide()?;
    let configuration = read("docs/configuration.md")?;
    let cli = read("docs/reference/cli.md")?;
    let mut flags = 0;
    for span in code_spans(&guide.prose) {
        for flag in flags_in(&span) {
            flags += 1;
            if FOREIGN_FLAGS.iter().any(|(f, _)| *f == flag) {
                continue;
            }
            ensure!(
                documents_flag(&configuration, flag) || documents_flag(&cli, flag),
                "docs/troubleshooting.md names `{flag}`, which neither docs/configuration.md \
                 nor docs/reference/cli.md documents"
            );
        }
    }
    for required in ["--enable-probing", "--enable-metrics-observation"] {
        ensure!(
            documents_flag(&configuration, required)
                && guide
                    .prose
                    .iter()
                    .any(|l| l.contains(&format!("`{required}`"))),
            "{required} must be named by the guide and documented in docs/configuration.md"
        );
    }
    ensure!(flags >= 4, "too few flags found: {flags}");

    // `pacto <command> ...` lines of the shell blocks: the command and its flags exist.
    let mut commands = 0;
    for (_, body) in guide.fences.iter().filter(|(i, _)| i == "sh") {
        for line in body.lines() {
            let line = line.split('#').next().unwrap_or_default();
            let Some(rest) = line.trim().strip_prefix("pacto ") else {
                continue;
            };
            commands += 1;
            let command = rest.split_whitespace().next().unwrap_or_default();
            ensure!(
                cli.contains(&format!("## `pacto {command}`")),
                "the guide runs `pacto {command}`, which docs/reference/cli.md does not have"
            );
            for flag in flags_in(rest) {
                ensure!(
                    documents_flag(&cli, flag),
                    "the guide runs `pacto {command} {flag}`, not in docs/reference/cli.md"
                );
            }
        }
    }
    ensure!(commands > 0, "the guide runs no pacto command");
    for span in code_spans(&guide.prose) {
        if let Some(rest) = span.strip_prefix("pacto ") {
            let command = rest.split_whitespace().next().unwrap_or_default();
            ensure!(
                cli.contains(&format!("## `pacto {command}`")),
                "the guide names `pacto {command}`, which docs/reference/cli.md does not have"
            );
        }
    }
    Ok(())
}

#[test]
fn every_metric_and_deployment_exists() -> Result<()> {
    let guide = guide()?;
    let metrics = read("docs/metrics.md")?;
    let text = guide
        .prose
        .iter()
        .cloned()
        .chain(guide.fences.iter().map(|(_, body)| body.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let mut named = 0;
    for metric in words(&text).filter(|w| w.starts_with("pacto_")) {
        named += 1;
        ensure!(
            metrics.contains(&format!("`{metric}`")),
            "docs/troubleshooting.md names metric {metric}, not in docs/metrics.md"
        );
    }
    ensure!(named > 0, "the guide names no metric");
    // `deploy/<name>`: a chart of that name exists (the helmfile release name), or a chart
    // names its Deployment so (`deploymentName: <name>` in its values.yaml).
    for chunk in text.split("deploy/").skip(1) {
        let name: String = chunk
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let renamed = fs::read_dir(repo_root().join("charts"))?
            .filter_map(Result::ok)
            .filter_map(|chart| fs::read_to_string(chart.path().join("values.yaml")).ok())
            .any(|values| {
                values
                    .lines()
                    .any(|l| l == format!("deploymentName: {name}"))
            });
        ensure!(
            repo_root().join("charts").join(&name).is_dir() || renamed,
            "the guide reads logs of deploy/{name}, but no chart renders that Deployment"
        );
    }
    Ok(())
}
