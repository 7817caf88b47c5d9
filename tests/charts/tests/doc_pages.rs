//! The user pages the troubleshooting guide links to, against the code and the charts:
//! - every link between the docs pages resolves: the file exists and the anchor is a heading of it
//!   (GitHub's rule: lowercase, spaces become `-`, other punctuation but `-` and `_` dropped);
//! - docs/runtime-observations.md lists exactly the finding codes the evaluator produces at
//!   runtime, with their registry severity and category;
//! - each YAML snippet of docs/opt-in-features.md grants exactly what the chart adds when the
//!   feature's value is on, and every opt-in boolean flag of the services has a section;
//! - the tables of docs/rbac.md are exactly the rules each chart renders, condition by condition;
//! - the chart values, Pacto or NodeRuntimeObservation fields and codes the new pages name exist.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use clap::{ArgAction, CommandFactory};
use pacto_chart_tests::values::{has_path, schema_has, values_files};
use pacto_chart_tests::{Tools, documents, repo_root, required_sets};
use pacto_contract::codes::{Category, FindingCode};
use serde_json::Value;

/// The pages this test checks for names that must exist (values, fields, codes).
const NEW_PAGES: &[&str] = &[
    "docs/turn-it-on.md",
    "docs/opt-in-features.md",
    "docs/runtime-observations.md",
    "docs/rbac.md",
];

/// Upper-snake words of the new pages that are not finding codes.
const NOT_CODES: &[&str] = &["SYS_PTRACE", "CONFIG_DEBUG_INFO_BTF"];

fn read(path: &str) -> Result<String> {
    let full = repo_root().join(path);
    fs::read_to_string(&full).with_context(|| format!("reading {}", full.display()))
}

/// The prose lines of a section and its fenced blocks `(info, body)`.
type Section = (Vec<String>, Vec<(String, String)>);

/// A Markdown page split into prose lines (outside fenced blocks) and fenced blocks
/// `(info, body, index of the prose line before it)`.
struct Page {
    prose: Vec<String>,
    fences: Vec<(String, String, usize)>,
}

fn page(path: &str) -> Result<Page> {
    let text = read(path)?;
    let mut prose = Vec::new();
    let mut fences = Vec::new();
    let mut open: Option<(String, String, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            if let Some((info, body, _)) = open.take() {
                fences.push((info, body, prose.len()));
            } else {
                open = Some((
                    info.trim().to_owned(),
                    String::new(),
                    line.len() - trimmed.len(),
                ));
            }
        } else if let Some((_, body, indent)) = open.as_mut() {
            let cut = line.len() - line.trim_start_matches(' ').len();
            body.push_str(&line[cut.min(*indent)..]);
            body.push('\n');
        } else {
            prose.push(line.to_owned());
        }
    }
    ensure!(open.is_none(), "{path}: unterminated fenced block");
    Ok(Page { prose, fences })
}

impl Page {
    /// The prose lines of `## {heading}` up to the next `## ` heading, and its fenced blocks.
    fn section(&self, heading: &str) -> Result<Section> {
        let start = self
            .prose
            .iter()
            .position(|l| l.trim() == format!("## {heading}"))
            .with_context(|| format!("no section `## {heading}`"))?;
        let end = self.prose[start + 1..]
            .iter()
            .position(|l| l.starts_with("## "))
            .map_or(self.prose.len(), |i| start + 1 + i);
        let fences = self
            .fences
            .iter()
            .filter(|(_, _, at)| *at > start && *at <= end)
            .map(|(info, body, _)| (info.clone(), body.clone()))
            .collect();
        Ok((self.prose[start + 1..end].to_vec(), fences))
    }

    /// The rows of the first table of `lines`, header and separator removed, cells trimmed.
    fn table(lines: &[String]) -> Vec<Vec<String>> {
        lines
            .iter()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                l.trim()
                    .trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_owned())
                    .collect()
            })
            .collect()
    }
}

fn unticked(cell: &str) -> String {
    cell.replace('`', "")
}

/// The inline code spans of prose lines.
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

// ---------------------------------------------------------------------------------------------
// Links

/// GitHub's anchor of a heading: lowercase; letters, digits, `-` and `_` kept, spaces become
/// `-`, everything else dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (a repeated heading gets `-1`, `-2`, … as on GitHub).
fn anchors(path: &Path) -> Result<BTreeSet<String>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = anchor(heading);
        let count = seen.entry(base.clone()).or_default();
        out.insert(if *count == 0 {
            base
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    Ok(out)
}

/// The link targets of a page's prose (outside fenced blocks and code spans).
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Drop code spans: a `](` inside one is not a link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for part in prose.split("](").skip(1) {
            if let Some(end) = part.find(')') {
                out.push(part[..end].trim().to_owned());
            }
        }
    }
    out
}

/// Every Markdown file under `docs/`.
fn docs_pages(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            docs_pages(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// Links of pages this test does not own that were already broken: `(page, target)`. Each must
/// still be broken (remove it here once fixed).
const KNOWN_BROKEN: &[(&str, &str)] = &[];

/// The problems of one page's links to other files of the repository.
fn broken_links(page: &Path) -> Result<Vec<String>> {
    let text = fs::read_to_string(page)?;
    let dir = page.parent().context("page without a directory")?;
    let mut broken = Vec::new();
    for target in link_targets(&text) {
        if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
            continue;
        }
        let (file, fragment) = match target.split_once('#') {
            Some((file, fragment)) => (file, Some(fragment)),
            None => (target.as_str(), None),
        };
        let file = if file.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(file)
        };
        if !file.exists() {
            broken.push(format!("{target}: no file {}", file.display()));
            continue;
        }
        let is_page = file.extension().is_some_and(|e| e == "md");
        if let Some(fragment) = fragment
            && is_page
            && !anchors(&file)?.contains(fragment)
        {
            broken.push(format!("{target}: no heading with the anchor #{fragment}"));
        }
    }
    Ok(broken)
}

#[test]
fn anchors_follow_github() {
    assert_eq!(anchor(" Status is NonCompliant"), "status-is-noncompliant");
    assert_eq!(anchor(" 8. End-to-end suite"), "8-end-to-end-suite");
    assert_eq!(anchor(" `pacto status`"), "pacto-status");
    assert_eq!(
        anchor(" Node agent evidence is missing"),
        "node-agent-evidence-is-missing"
    );
    assert_eq!(anchor(" mTLS and identities"), "mtls-and-identities");
    assert_eq!(
        anchor(" Releases and versions: a_b"),
        "releases-and-versions-a_b"
    );
}

#[test]
fn link_targets_skip_code() {
    let text = "see [a](x.md#b) and `[c](y.md)`\n```sh\n[d](z.md)\n```\n[e](#f)";
    assert_eq!(link_targets(text), vec!["x.md#b", "#f"]);
}

#[test]
fn every_link_between_docs_pages_resolves() -> Result<()> {
    let mut pages = Vec::new();
    docs_pages(&repo_root().join("docs"), &mut pages)?;
    pages.sort();
    let mut problems = Vec::new();
    let mut known = BTreeSet::new();
    let mut checked = 0;
    for page in &pages {
        checked += 1;
        let name = page
            .strip_prefix(repo_root())
            .unwrap_or(page)
            .display()
            .to_string();
        for problem in broken_links(page)? {
            match KNOWN_BROKEN
                .iter()
                .find(|(p, target)| *p == name && problem.starts_with(&format!("{target}:")))
            {
                Some(entry) => {
                    known.insert(*entry);
                }
                None => problems.push(format!("{name}: {problem}")),
            }
        }
    }
    for entry in KNOWN_BROKEN {
        ensure!(
            known.contains(entry),
            "{entry:?} resolves now: remove it from KNOWN_BROKEN"
        );
    }
    ensure!(checked > 10, "found only {checked} pages under docs/");
    ensure!(
        problems.is_empty(),
        "links that do not resolve:\n{}",
        problems.join("\n")
    );
    // The pages the guide names by title, linked from it.
    let guide = read("docs/troubleshooting.md")?;
    for (title, file) in [
        ("Runtime observations", "runtime-observations.md"),
        ("Opt-in features", "opt-in-features.md"),
        ("RBAC", "rbac.md"),
        ("Turn it on", "turn-it-on.md"),
    ] {
        ensure!(
            guide.contains(&format!("[{title}]({file}")),
            "docs/troubleshooting.md does not link [{title}]({file})"
        );
        ensure!(
            read(&format!("docs/{file}"))?.starts_with(&format!("# {title}\n")),
            "docs/{file} is not titled `# {title}`"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Runtime observations

/// The runtime codes of the registry: the categories of runtime drift and of inconclusive
/// evidence.
fn runtime_codes() -> BTreeSet<FindingCode> {
    FindingCode::ALL
        .iter()
        .copied()
        .filter(|c| {
            matches!(
                c.category(true),
                Some(Category::RuntimeDrift | Category::Inconclusive)
            )
        })
        .collect()
}

#[test]
fn runtime_observations_lists_exactly_the_runtime_codes() -> Result<()> {
    let expected = runtime_codes();
    // The codes the evaluator writes (`FindingCode::<Variant>` in its source) are those.
    let source = read("services/engine/src/evaluate.rs")?;
    let produced: BTreeSet<String> = source
        .split("FindingCode::")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect::<String>()
        })
        .filter(|v| v.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect();
    let variants: BTreeSet<String> = expected.iter().map(|c| format!("{c:?}")).collect();
    ensure!(
        produced == variants,
        "the evaluator produces {produced:?}, the registry's runtime categories hold {variants:?}"
    );

    let page = page("docs/runtime-observations.md")?;
    let (lines, _) = page.section("Codes")?;
    let mut listed = BTreeSet::new();
    for row in Page::table(&lines) {
        let [code, _dimension, severity, category, meaning, _guide] = row.as_slice() else {
            bail!("runtime-observations row without 6 cells: {row:?}");
        };
        let code = unticked(code);
        let known: FindingCode = code
            .parse()
            .with_context(|| format!("{code} is not a registered finding code"))?;
        ensure!(
            expected.contains(&known),
            "{code} is listed but is not a runtime code"
        );
        ensure!(listed.insert(known), "{code} is listed twice");
        let want = known.severity(true).as_str();
        ensure!(
            severity.split(';').next().map(str::trim) == Some(want),
            "{code}: severity `{severity}`, the registry says {want}"
        );
        ensure!(
            known.entry().optional_axis == severity.contains("warning"),
            "{code}: the optional-assertion warning is {} in the registry",
            if known.entry().optional_axis {
                "there"
            } else {
                "not there"
            }
        );
        let want = known.category(true).map_or("", Category::as_str);
        ensure!(
            category == want,
            "{code}: category `{category}`, the registry says {want}"
        );
        ensure!(!meaning.is_empty(), "{code}: no meaning");
    }
    let missing: Vec<&str> = expected.difference(&listed).map(|c| c.as_str()).collect();
    ensure!(
        missing.is_empty(),
        "runtime codes missing from docs/runtime-observations.md: {missing:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Rendering and RBAC

fn render(tools: &Tools, chart: &str, namespace: &str, sets: &[&str]) -> Result<Vec<Value>> {
    let mut args: Vec<String> = vec![
        "template".into(),
        chart.into(),
        format!("charts/{chart}"),
        "--namespace".into(),
        namespace.into(),
    ];
    for set in required_sets(chart).iter().chain(sets) {
        args.push("--set".into());
        args.push((*set).into());
    }
    Ok(documents(&tools.run("helm", &args)?)?)
}

fn namespace_of(chart: &str) -> &'static str {
    if chart == "pacto-node-agent" {
        "pacto-node-agent"
    } else {
        "pacto-operator-system"
    }
}

/// `"<scope> <group>/<resource> <verb>[ name=<names>]"` of every rule of every Role and
/// ClusterRole in `docs`; the scope is `cluster` or `ns=<namespace>`.
fn permissions(docs: &[Value]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for role in docs
        .iter()
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
    {
        let scope = if role["kind"] == "Role" {
            format!(
                "ns={}",
                role["metadata"]["namespace"].as_str().unwrap_or("?")
            )
        } else {
            "cluster".to_owned()
        };
        for rule in role["rules"].as_array().into_iter().flatten() {
            let strings = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            let names = strings("resourceNames");
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    for verb in strings("verbs") {
                        out.insert(permission(&scope, &group, &resource, &verb, &names));
                    }
                }
            }
        }
    }
    out
}

fn permission(scope: &str, group: &str, resource: &str, verb: &str, names: &[String]) -> String {
    let mut entry = format!("{scope} {group}/{resource} {verb}");
    if !names.is_empty() {
        entry.push_str(" name=");
        entry.push_str(&names.join(","));
    }
    entry
}

fn container_args(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .filter(|d| d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

fn passes(args: &[String], flag: &str) -> bool {
    args.iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

// ---------------------------------------------------------------------------------------------
// Opt-in features

/// One section of docs/opt-in-features.md: its heading, the flag, the charts it concerns, the
/// chart value in the overview table and the `--set`s that turn it on.
struct Feature {
    heading: &'static str,
    flag: Option<&'static str>,
    charts: &'static [&'static str],
    value: &'static str,
    sets: &'static [&'static str],
}

const FEATURES: &[Feature] = &[
    Feature {
        heading: "Health probing",
        flag: Some("--enable-probing"),
        charts: &["pacto-observer"],
        value: "controller.enableProbing",
        sets: &["controller.enableProbing=true"],
    },
    Feature {
        heading: "Metrics observation",
        flag: Some("--enable-metrics-observation"),
        charts: &["pacto-observer"],
        value: "controller.enableMetricsObservation",
        sets: &["controller.enableMetricsObservation=true"],
    },
    Feature {
        heading: "Interface name matching",
        flag: Some("--interface-name-match-discovery"),
        charts: &["pacto-observer"],
        value: "controller.interfaceNameMatchDiscovery",
        sets: &["controller.interfaceNameMatchDiscovery=true"],
    },
    Feature {
        heading: "Secret metadata",
        flag: Some("--observe-secrets"),
        charts: &["pacto-observer"],
        value: "rbac.secretMetadata",
        sets: &["rbac.secretMetadata=true"],
    },
    Feature {
        heading: "Node evidence",
        flag: Some("--node-evidence"),
        charts: &["pacto-observer"],
        value: "nodeAgent.enabled",
        sets: &["nodeAgent.enabled=true"],
    },
    Feature {
        heading: "Agent namespace labels",
        flag: Some("--node-agent-namespace"),
        charts: &["pacto-status-writer"],
        value: "nodeAgent.enabled",
        sets: &["nodeAgent.enabled=true"],
    },
    Feature {
        heading: "Namespace selector",
        flag: Some("--namespace-selector"),
        charts: &["pacto-observer", "pacto-status-writer"],
        value: "controller.namespaceSelector",
        sets: &["controller.namespaceSelector=pacto.trianalab.io/audit=enabled"],
    },
    Feature {
        heading: "PolicyReports",
        flag: Some("--policy-reports"),
        charts: &["pacto-status-writer"],
        value: "policyReports.enabled",
        sets: &["policyReports.enabled=true"],
    },
    Feature {
        heading: "Evidence producer",
        flag: Some("--evidence-url"),
        charts: &["pacto-status-writer"],
        value: "evidence.url",
        sets: &[
            "evidence.url=http://pacto-evidence-server.pacto-operator-system.svc:8686",
            "evidence.keySecret=pacto-evidence-key",
            "evidence.keyFile=status-writer.key",
        ],
    },
    Feature {
        heading: "Evidence Server callers",
        flag: None,
        charts: &["pacto-contract-resolver"],
        value: "evidenceServer.enabled",
        sets: &["evidenceServer.enabled=true"],
    },
];

/// Boolean flags that are not opt-in features: development switches, leader election, which
/// the status-writer chart turns on by default, and secure metrics, which every chart turns on
/// when it has a certificate (docs/metrics.md#secure-metrics).
const NOT_OPT_IN: &[&str] = &[
    "--insecure",
    "--no-kubernetes",
    "--leader-elect",
    "--metrics-secure",
];

#[test]
fn opt_in_snippets_grant_what_the_charts_grant() -> Result<()> {
    let tools = Tools::new()?;
    let page = page("docs/opt-in-features.md")?;
    let text = read("docs/opt-in-features.md")?;

    // The overview table: one row per feature, with its flag and chart value.
    let rows = Page::table(&page.prose);
    ensure!(
        rows.len() == FEATURES.len(),
        "the overview table has {} rows, the test knows {} features",
        rows.len(),
        FEATURES.len()
    );
    for row in &rows {
        let [feature, flag, _service, value, environment, _rights] = row.as_slice() else {
            bail!("opt-in overview row without 6 cells: {row:?}");
        };
        let title = feature
            .trim_start_matches('[')
            .split(']')
            .next()
            .unwrap_or_default();
        let known = FEATURES
            .iter()
            .find(|f| f.heading == title)
            .with_context(|| format!("overview row {title:?} has no section the test knows"))?;
        ensure!(
            unticked(flag) == known.flag.unwrap_or("—"),
            "{title}: flag {flag}, expected {:?}",
            known.flag
        );
        ensure!(
            unticked(value) == known.value,
            "{title}: chart value {value}, expected {}",
            known.value
        );
        if environment.starts_with('`') {
            let key = unticked(environment);
            ensure!(
                environments()?.iter().all(|env| has_path(env, &key)),
                "{title}: {key} is not a key of every helmfile environment"
            );
        }
    }

    // Every boolean flag of the services that is off by default has a section.
    for cmd in [
        pacto_observer::Args::command(),
        pacto_status_writer::Args::command(),
        pacto_contract_resolver::Args::command(),
    ] {
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let flag = format!("--{long}");
            if matches!(arg.get_action(), ArgAction::SetTrue)
                && !NOT_OPT_IN.contains(&flag.as_str())
            {
                ensure!(
                    text.contains(&format!("`{flag}`")),
                    "{} flag {flag} is not in docs/opt-in-features.md",
                    cmd.get_name()
                );
            }
        }
    }

    for feature in FEATURES {
        let (lines, fences) = page.section(feature.heading)?;
        let prose = lines.join("\n");
        ensure!(
            prose.contains(&format!("`{}`", feature.value)),
            "section {} does not name `{}`",
            feature.heading,
            feature.value
        );
        if let Some(flag) = feature.flag {
            ensure!(
                prose.contains(&format!("`{flag}`")),
                "section {} does not name `{flag}`",
                feature.heading
            );
        }
        let mut snippet = BTreeSet::new();
        for (_, body) in fences.iter().filter(|(info, _)| info == "yaml") {
            let docs = documents(body).with_context(|| format!("{}: snippet", feature.heading))?;
            ensure!(
                docs.iter()
                    .all(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole"),
                "{}: a snippet holds something other than a Role or ClusterRole",
                feature.heading
            );
            snippet.extend(permissions(&docs));
        }
        for chart in feature.charts {
            let namespace = namespace_of(chart);
            // Without secure metrics, whose TokenReview right (on by default) would hide the
            // node evidence's own.
            let plain = "metrics.secure=false";
            let off = render(&tools, chart, namespace, &[plain])?;
            let sets: Vec<&str> = feature.sets.iter().copied().chain([plain]).collect();
            let on = render(&tools, chart, namespace, &sets)?;
            if let Some(flag) = feature.flag {
                ensure!(
                    !passes(&container_args(&off), flag),
                    "{chart} passes {flag} by default"
                );
                ensure!(
                    passes(&container_args(&on), flag),
                    "{chart} does not pass {flag} with {:?}",
                    feature.sets
                );
            }
            let (off, on) = (permissions(&off), permissions(&on));
            ensure!(
                off.is_subset(&on),
                "{chart}: {:?} takes rights away",
                feature.sets
            );
            let added: BTreeSet<String> = on.difference(&off).cloned().collect();
            ensure!(
                added == snippet,
                "{}: docs/opt-in-features.md grants what {chart} does not with {:?}\n  \
                 only in the page:  {:?}\n  only in the chart: {:?}",
                feature.heading,
                feature.sets,
                snippet.difference(&added).collect::<Vec<_>>(),
                added.difference(&snippet).collect::<Vec<_>>()
            );
        }
    }
    // The binding example binds a service's own ServiceAccount.
    for (info, body, _) in &page.fences {
        if info != "yaml" {
            continue;
        }
        for doc in documents(body)? {
            if doc["kind"] == "ClusterRoleBinding" || doc["kind"] == "RoleBinding" {
                ensure!(doc["subjects"][0]["kind"] == "ServiceAccount");
                let name = doc["subjects"][0]["name"].as_str().unwrap_or_default();
                ensure!(
                    pacto_chart_tests::SERVICE_CHARTS.contains(&name),
                    "the binding example binds {name}, not a service's ServiceAccount"
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// RBAC

/// A chart value a docs/rbac.md row depends on (its `With` cell): the `--set`s that turn it on
/// and off, whether the chart has it on by default, the `--set`s of the base it is compared
/// against, and the other `With` cells whose rows it adds too.
struct Condition {
    with: &'static str,
    on: &'static [&'static str],
    off: &'static [&'static str],
    default_on: bool,
    base: &'static [&'static str],
    also: &'static [&'static str],
}

const fn condition(with: &'static str, on: &'static [&'static str]) -> Condition {
    Condition {
        with,
        on,
        off: &[],
        default_on: false,
        base: &[],
        also: &[],
    }
}

/// Secure metrics (on by default in the cert-manager mode every chart defaults to): the
/// TokenReview and SubjectAccessReview each scrape is checked with.
fn metrics_secure() -> Condition {
    Condition {
        off: &["metrics.secure=false"],
        default_on: true,
        ..condition("metrics.secure", &["metrics.secure=true"])
    }
}

/// `(section, chart, conditions)` of docs/rbac.md.
fn rbac_sections() -> Vec<(&'static str, &'static str, Vec<Condition>)> {
    let selector = condition(
        "controller.namespaceSelector",
        &["controller.namespaceSelector=pacto.trianalab.io/audit=enabled"],
    );
    let selector2 = condition(
        "controller.namespaceSelector",
        &["controller.namespaceSelector=pacto.trianalab.io/audit=enabled"],
    );
    vec![
        (
            "contract-resolver",
            "pacto-contract-resolver",
            vec![metrics_secure()],
        ),
        (
            "observer",
            "pacto-observer",
            vec![
                condition("rbac.secretMetadata", &["rbac.secretMetadata=true"]),
                condition(
                    "controller.enableMetricsObservation",
                    &["controller.enableMetricsObservation=true"],
                ),
                condition("nodeAgent.enabled", &["nodeAgent.enabled=true"]),
                Condition {
                    base: &["controller.watchNamespace=team-a"],
                    also: &["nodeAgent.enabled"],
                    ..condition(
                        "nodeAgent.enabled and controller.watchNamespace",
                        &["nodeAgent.enabled=true"],
                    )
                },
                selector,
                metrics_secure(),
            ],
        ),
        ("evaluator", "pacto-evaluator", vec![metrics_secure()]),
        (
            "status-writer",
            "pacto-status-writer",
            vec![
                Condition {
                    off: &["leaderElection.enabled=false"],
                    default_on: true,
                    ..condition("leaderElection.enabled", &["leaderElection.enabled=true"])
                },
                condition("nodeAgent.enabled", &["nodeAgent.enabled=true"]),
                selector2,
                condition("policyReports.enabled", &["policyReports.enabled=true"]),
                metrics_secure(),
            ],
        ),
        ("node-agent", "pacto-node-agent", vec![metrics_secure()]),
        (
            "evidence-server",
            "pacto-evidence-server",
            vec![metrics_secure()],
        ),
    ]
}

/// The permissions of one docs/rbac.md row (`Scope | API group | Resources | Verbs | Only |
/// With`), with its `With` cell.
fn row_permissions(row: &[String]) -> Result<(String, BTreeSet<String>)> {
    let [scope, group, resources, verbs, only, with] = row else {
        bail!("docs/rbac.md row without 6 cells: {row:?}");
    };
    let scope = match unticked(scope).as_str() {
        "cluster" => "cluster".to_owned(),
        other => format!(
            "ns={}",
            other
                .strip_prefix("namespace ")
                .with_context(|| format!("scope {other:?} is neither cluster nor a namespace"))?
        ),
    };
    let group = match unticked(group).as_str() {
        "core" => String::new(),
        other => other.to_owned(),
    };
    let list = |cell: &str| -> Vec<String> {
        unticked(cell)
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let names = if only == "—" { vec![] } else { list(only) };
    let mut out = BTreeSet::new();
    for resource in list(resources) {
        for verb in list(verbs) {
            out.insert(permission(&scope, &group, &resource, &verb, &names));
        }
    }
    Ok((unticked(with), out))
}

#[test]
fn rbac_page_lists_what_each_chart_grants() -> Result<()> {
    let tools = Tools::new()?;
    let page = page("docs/rbac.md")?;
    for (section, chart, conditions) in rbac_sections() {
        let namespace = namespace_of(chart);
        let (lines, _) = page.section(section)?;
        let mut by_with: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for row in Page::table(&lines) {
            let (with, perms) = row_permissions(&row)?;
            ensure!(
                with == "—" || conditions.iter().any(|c| c.with == with),
                "docs/rbac.md, {section}: the test knows no condition `{with}`"
            );
            by_with.entry(with).or_default().extend(perms);
        }
        let rows = |with: &str| by_with.get(with).cloned().unwrap_or_default();

        // Everything off: the unconditional rows.
        let all_off: Vec<&str> = conditions
            .iter()
            .flat_map(|c| c.off.iter().copied())
            .collect();
        let base = permissions(&render(&tools, chart, namespace, &all_off)?);
        ensure!(
            base == rows("—"),
            "docs/rbac.md, {section}: the unconditional rows differ from {chart}\n  \
             only in the page:  {:?}\n  only in the chart: {:?}",
            rows("—").difference(&base).collect::<Vec<_>>(),
            base.difference(&rows("—")).collect::<Vec<_>>()
        );
        if rows("—").is_empty() && conditions.is_empty() {
            ensure!(
                lines.iter().any(|l| l.starts_with("None")),
                "docs/rbac.md, {section}: say `None` for a chart without rights"
            );
        }

        // The defaults: the unconditional rows and those of the conditions on by default.
        let mut defaults = rows("—");
        for c in conditions.iter().filter(|c| c.default_on) {
            defaults.extend(rows(c.with));
        }
        let rendered = permissions(&render(&tools, chart, namespace, &[])?);
        ensure!(
            rendered == defaults,
            "docs/rbac.md, {section}: the defaults differ from {chart}: {:?}",
            rendered.symmetric_difference(&defaults).collect::<Vec<_>>()
        );

        // Each condition adds exactly its rows.
        for c in &conditions {
            let before: Vec<&str> = all_off.iter().chain(c.base).copied().collect();
            let after: Vec<&str> = before.iter().chain(c.on).copied().collect();
            let before = permissions(&render(&tools, chart, namespace, &before)?);
            let after = permissions(&render(&tools, chart, namespace, &after)?);
            ensure!(
                before.is_subset(&after),
                "{chart}: {} takes rights away",
                c.with
            );
            let added: BTreeSet<String> = after.difference(&before).cloned().collect();
            let mut want = rows(c.with);
            for other in c.also {
                want.extend(rows(other));
            }
            ensure!(
                added == want,
                "docs/rbac.md, {section}: `{}` adds other rights in {chart}\n  \
                 only in the page:  {:?}\n  only in the chart: {:?}",
                c.with,
                want.difference(&added).collect::<Vec<_>>(),
                added.difference(&want).collect::<Vec<_>>()
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Names in the new pages

fn environments() -> Result<Vec<Value>> {
    Ok(values_files()?
        .into_iter()
        .filter(|(p, _)| p.contains("environments"))
        .map(|(_, v)| v)
        .collect())
}

/// The schemas of our CRDs (Pacto, PactoRevision, NodeRuntimeObservation).
fn crd_schemas() -> Result<Vec<Value>> {
    let dir = repo_root().join("charts/pacto-crds/templates");
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir)? {
        let crd: Value = serde_norway::from_str(&fs::read_to_string(entry?.path())?)?;
        out.push(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone());
    }
    ensure!(out.len() == 3, "expected three CRDs, found {}", out.len());
    Ok(out)
}

/// `a.b.c` of lowercase-led alphanumeric segments, neither an API group (`….io`, `….com`) nor a
/// file name (`production.yaml`).
fn is_value_path(span: &str) -> bool {
    let segments: Vec<&str> = span.split('.').collect();
    segments.len() > 1
        && !matches!(
            segments.last(),
            Some(&("io" | "com" | "yaml" | "md" | "rs" | "json"))
        )
        && segments.iter().all(|s| {
            s.starts_with(|c: char| c.is_ascii_lowercase())
                && s.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

fn is_upper_snake(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.contains('_')
        && !word.ends_with('_')
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

#[test]
fn new_pages_name_only_values_fields_and_codes_that_exist() -> Result<()> {
    let files = values_files()?;
    let schemas = crd_schemas()?;
    let codes: BTreeSet<&str> = FindingCode::ALL.iter().map(|c| c.as_str()).collect();
    let mut checked = 0;
    for path in NEW_PAGES {
        let page = page(path)?;
        for span in code_spans(&page.prose) {
            // `key: value` spans name the key.
            let span = span.split(':').next().unwrap_or_default().trim();
            if !is_value_path(span) {
                continue;
            }
            checked += 1;
            let segments: Vec<&str> = span.split('.').collect();
            match segments[0] {
                "metadata" => {}
                "spec" | "status" => ensure!(
                    schemas.iter().any(|s| schema_has(s, &segments)),
                    "{path} names `{span}`, a field of none of our CRDs"
                ),
                _ => ensure!(
                    files.iter().any(|(_, v)| has_path(v, span)),
                    "{path} names chart value `{span}`, which no chart values.yaml or helmfile \
                     environment defines"
                ),
            }
        }
        let text = page
            .prose
            .iter()
            .cloned()
            .chain(page.fences.iter().map(|(_, body, _)| body.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        for word in text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| is_upper_snake(w))
        {
            ensure!(
                codes.contains(word) || NOT_CODES.contains(&word),
                "{path} names {word}, which is not a finding code"
            );
        }
    }
    ensure!(
        checked > 20,
        "too few chart values and fields found: {checked}"
    );
    Ok(())
}
