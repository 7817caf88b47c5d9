//! The configuration reference and the charts against the binaries' clap definitions:
//! - the flag tables of docs/configuration.md are generated from `Args::command()` (drift check;
//!   regenerate with `PACTO_UPDATE_DOCS=1 cargo test -p pacto-chart-tests --test docs`);
//! - the command line every chart renders parses with the real `Args` parser;
//! - every flag and `PACTO_*` variable the docs mention exists.

use std::{collections::BTreeSet, fmt::Write as _};

use anyhow::{Context, Result, bail, ensure};
use clap::{ArgAction, Command, CommandFactory, Parser};
use pacto_chart_tests::{Tools, documents, repo_root, required_sets};

const REGENERATE: &str = "PACTO_UPDATE_DOCS=1 cargo test -p pacto-chart-tests --test docs";

/// Charts whose binary is not in the workspace yet: their flags are provisional and documented
/// as such. When the binary lands, this test fails until it is added to [`binaries`].
const PENDING: &[(&str, &str)] = &[];

/// `(chart, binary name, clap command)` of every service binary that exists.
fn binaries() -> Vec<(&'static str, Command)> {
    vec![
        (
            "pacto-contract-resolver",
            pacto_contract_resolver::Args::command(),
        ),
        ("pacto-observer", pacto_observer::Args::command()),
        ("pacto-evaluator", pacto_evaluator::Args::command()),
        ("pacto-status-writer", pacto_status_writer::Args::command()),
        ("pacto-node-agent", pacto_node_agent::Args::command()),
        (
            "pacto-evidence-server",
            pacto_evidence_server::Args::command(),
        ),
    ]
}

/// The service part of the environment variables of a chart's binary (`PACTO_<part>_<FLAG>`).
fn env_service(chart: &str) -> Result<&'static str> {
    Ok(match chart {
        "pacto-contract-resolver" => "RESOLVER",
        "pacto-observer" => "OBSERVER",
        "pacto-evaluator" => "EVALUATOR",
        "pacto-status-writer" => "STATUS_WRITER",
        "pacto-node-agent" => "NODE_AGENT",
        "pacto-evidence-server" => "EVIDENCE_SERVER",
        other => bail!("no environment prefix for {other}"),
    })
}

/// Every flag of every binary has the environment variable the rule in docs/configuration.md
/// names: `PACTO_<FLAG>` for the shared runtime flags, `PACTO_<SERVICE>_<FLAG>` for the rest.
#[test]
fn every_binary_follows_the_environment_variable_rule() -> Result<()> {
    let mut violations = Vec::new();
    for (chart, cmd) in binaries() {
        for violation in pacto_runtime::args::env_rule_violations(&cmd, env_service(chart)?) {
            violations.push(format!("{chart}: {violation}"));
        }
    }
    ensure!(violations.is_empty(), "{}", violations.join("\n"));
    Ok(())
}

/// Parses a rendered command line with the binary's real parser.
fn parse(chart: &str, args: &[String]) -> Result<()> {
    let argv = std::iter::once(chart.to_owned()).chain(args.iter().cloned());
    let result = match chart {
        "pacto-contract-resolver" => pacto_contract_resolver::Args::try_parse_from(argv).map(drop),
        "pacto-observer" => pacto_observer::Args::try_parse_from(argv).map(drop),
        "pacto-evaluator" => pacto_evaluator::Args::try_parse_from(argv).map(drop),
        "pacto-status-writer" => pacto_status_writer::Args::try_parse_from(argv).map(drop),
        // The DaemonSet passes `--node-name=$(NODE_NAME)`, which the kubelet expands from the
        // downward API.
        "pacto-node-agent" => pacto_node_agent::Args::try_parse_from(argv).map(drop),
        "pacto-evidence-server" => pacto_evidence_server::Args::try_parse_from(argv).map(drop),
        other => bail!("no parser for {other}"),
    };
    result.map_err(|e| anyhow::anyhow!("{chart} rejects the chart's arguments {args:?}:\n{e}"))
}

fn rendered_args(tools: &Tools, chart: &str, extra: &[&str]) -> Result<Vec<String>> {
    let mut argv = vec![
        "template".to_owned(),
        chart.to_owned(),
        format!("charts/{chart}"),
    ];
    if !extra.contains(&"--values") {
        for set in required_sets(chart) {
            argv.push("--set".to_owned());
            argv.push((*set).to_owned());
        }
    }
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    let docs = documents(&tools.run("helm", &argv)?)?;
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
        .with_context(|| format!("{chart}: no Deployment or DaemonSet"))?;
    Ok(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .context("args")?
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect(),
    )
}

/// Value sets each chart is rendered with for the argument check (defaults, the non-default
/// values file, and the feature switches).
fn variants(chart: &str) -> Vec<Vec<String>> {
    let values = repo_root()
        .join("tests/charts/values")
        .join(format!("{chart}.yaml"))
        .display()
        .to_string();
    let mut out = vec![vec![], vec!["--values".to_owned(), values]];
    for set in [
        "tls.mode=insecure",
        "tls.mode=existing-secret,tls.existingSecret=x",
    ] {
        out.push(vec!["--set".to_owned(), set.to_owned()]);
    }
    if chart == "pacto-observer" {
        out.push(vec![
            "--set".to_owned(),
            "controller.enableProbing=true,controller.enableMetricsObservation=true,controller.interfaceNameMatchDiscovery=true,controller.stabilizationWindow=90s,controller.watchNamespace=x,nodeAgent.enabled=true".to_owned(),
        ]);
    }
    if chart == "pacto-status-writer" {
        out.push(vec![
            "--set".to_owned(),
            "controller.watchNamespace=x,controller.stabilizationWindow=1m,controller.revisionMirrorInterval=10m,controller.maxConcurrentReconciles=4,nodeAgent.enabled=true,backends.resolver=r.example:1".to_owned(),
        ]);
    }
    if chart == "pacto-observer" || chart == "pacto-status-writer" {
        out.push(vec![
            "--set".to_owned(),
            "controller.namespaceSelector=pacto.trianalab.io/audit in (on\\,strict),controller.excludeNamespaces={kube-system,dev}".to_owned(),
        ]);
    }
    if chart == "pacto-contract-resolver" {
        out.push(vec![
            "--set".to_owned(),
            "insecureRegistries={a:5000,b.example}".to_owned(),
        ]);
    }
    out
}

#[test]
fn every_command_line_a_chart_renders_parses_with_the_binary() -> Result<()> {
    let tools = Tools::new()?;
    for (chart, _) in binaries() {
        for variant in variants(chart) {
            let extra: Vec<&str> = variant.iter().map(String::as_str).collect();
            let args = rendered_args(&tools, chart, &extra)?;
            parse(chart, &args)?;
        }
    }
    for (chart, dir) in PENDING {
        let lib =
            std::fs::read_to_string(repo_root().join(dir).join("src/lib.rs")).unwrap_or_default();
        ensure!(
            !lib.contains("pub struct Args"),
            "{dir} defines its Args now: add {chart} to binaries() and parse() in tests/charts/tests/docs.rs, \
             align the chart's flags with its Args and regenerate docs/configuration.md ({REGENERATE})"
        );
        // Its provisional command line is still rendered and well-formed.
        let args = rendered_args(&tools, chart, &[])?;
        ensure!(
            args.iter().all(|a| a.starts_with("--")),
            "{chart}: {args:?}"
        );
    }
    Ok(())
}

fn escape(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The Markdown flag table of one binary.
fn flag_table(cmd: &Command) -> String {
    let mut out = String::from(
        "| Flag | Environment variable | Default | Description |\n|---|---|---|---|\n",
    );
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if matches!(long, "help" | "version") {
            continue;
        }
        let takes_value = !matches!(
            arg.get_action(),
            ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
        );
        let flag = match arg.get_value_names() {
            Some(names) if takes_value => format!("`--{long} <{}>`", names.join(" ")),
            _ if takes_value => format!("`--{long} <{}>`", arg.get_id().as_str().to_uppercase()),
            _ => format!("`--{long}`"),
        };
        let env = arg
            .get_env()
            .map_or_else(|| "—".to_owned(), |e| format!("`{}`", e.to_string_lossy()));
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = if defaults.is_empty() {
            if takes_value {
                "—".to_owned()
            } else {
                "`false`".to_owned()
            }
        } else {
            format!("`{}`", defaults.join(","))
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        let _ = writeln!(out, "| {flag} | {env} | {default} | {} |", escape(&help));
    }
    out
}

fn begin(chart: &str) -> String {
    format!("<!-- BEGIN GENERATED FLAGS {chart} ({REGENERATE}) -->\n")
}

fn end(chart: &str) -> String {
    format!("<!-- END GENERATED FLAGS {chart} -->")
}

#[test]
fn configuration_reference_is_generated_from_the_clap_definitions() -> Result<()> {
    let path = repo_root().join("docs/configuration.md");
    let mut text = std::fs::read_to_string(&path)?;
    let update = std::env::var_os("PACTO_UPDATE_DOCS").is_some_and(|v| v == "1");
    for (chart, cmd) in binaries() {
        let (b, e) = (begin(chart), end(chart));
        let start = text
            .find(&b)
            .with_context(|| format!("docs/configuration.md lacks the marker {b:?}"))?
            + b.len();
        let stop = start
            + text[start..]
                .find(&e)
                .with_context(|| format!("docs/configuration.md lacks the marker {e:?}"))?;
        let want = flag_table(&cmd);
        if text[start..stop] != want {
            ensure!(
                update,
                "the {chart} flag table in docs/configuration.md is out of date with the code; \
                 regenerate it with `{REGENERATE}`"
            );
            text.replace_range(start..stop, &want);
        }
    }
    if update {
        std::fs::write(&path, text)?;
    }
    Ok(())
}

/// Every `--flag` (outside code blocks that show other tools) and `PACTO_*` variable the user docs
/// name belongs to a binary, or to the status-writer's provisional flag list.
#[test]
fn documented_flags_and_variables_exist() -> Result<()> {
    let tools = Tools::new()?;
    let mut flags = BTreeSet::new();
    let mut envs = BTreeSet::new();
    for (_, cmd) in binaries() {
        for arg in cmd.get_arguments() {
            if let Some(long) = arg.get_long() {
                flags.insert(format!("--{long}"));
            }
            if let Some(env) = arg.get_env() {
                envs.insert(env.to_string_lossy().into_owned());
            }
        }
    }
    for (chart, _) in PENDING {
        for arg in rendered_args(&tools, chart, &[])? {
            flags.insert(arg.split('=').next().unwrap_or_default().to_owned());
        }
    }
    let mut unknown = Vec::new();
    for doc in [
        "configuration.md",
        "installation.md",
        "metrics.md",
        "upgrade.md",
        "turn-it-on.md",
        "opt-in-features.md",
        "runtime-observations.md",
        "rbac.md",
    ] {
        let text = std::fs::read_to_string(repo_root().join("docs").join(doc))
            .with_context(|| format!("docs/{doc}"))?;
        let mut in_shell = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_shell = line.starts_with("```sh") || line.starts_with("```console");
                continue;
            }
            if line.trim_start().starts_with("<!--") {
                continue;
            }
            for token in tokens(line) {
                if token.starts_with("PACTO_")
                    && !token.starts_with("PACTO_UPDATE_")
                    && !token.starts_with("PACTO_CHART_TOOLS")
                    && !token.starts_with("PACTO_CACHE")
                    && !token.starts_with("PACTO_K8S_BIN")
                    && !envs.contains(&token)
                {
                    unknown.push(format!("docs/{doc}: {token}"));
                }
                if token.starts_with("--") && !in_shell && !flags.contains(&token) {
                    unknown.push(format!("docs/{doc}: {token}"));
                }
            }
        }
    }
    ensure!(
        unknown.is_empty(),
        "documented but not defined by any binary:\n{}",
        unknown.join("\n")
    );
    Ok(())
}

/// Flag-like (`--a-b`) and variable-like (`PACTO_A_B`) tokens of a line.
fn tokens(line: &str) -> Vec<String> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|t| {
            (t.starts_with("--")
                && t.len() > 2
                && t[2..].starts_with(|c: char| c.is_ascii_lowercase()))
                || t.starts_with("PACTO_")
        })
        .map(|t| t.trim_end_matches('-').to_owned())
        .collect()
}

#[test]
fn token_extraction_finds_flags_and_variables() {
    assert_eq!(
        tokens("set `--enable-probing` or PACTO_OBSERVER_ENABLE_PROBING=true, not -- or --X"),
        vec!["--enable-probing", "PACTO_OBSERVER_ENABLE_PROBING"]
    );
}

/// The `.rs` files below `dir`, recursively.
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Every metric name the services define (a `&str` constant holding `pacto_…`) has a row in
/// docs/metrics.md, so a new metric cannot ship undocumented.
#[test]
fn every_metric_the_code_defines_is_documented() -> Result<()> {
    let root = repo_root();
    let doc = std::fs::read_to_string(root.join("docs/metrics.md"))?;
    let mut files = Vec::new();
    for service in std::fs::read_dir(root.join("services"))? {
        let src = service?.path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files)?;
        }
    }
    let mut defined = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        for line in text.lines() {
            let Some((_, value)) = line.split_once(": &str = \"pacto_") else {
                continue;
            };
            if let Some((rest, _)) = value.split_once('"') {
                defined.insert(format!("pacto_{rest}"));
            }
        }
    }
    ensure!(
        defined.len() >= 25,
        "found only {} metric constants under services/*/src: {defined:?}",
        defined.len()
    );
    let missing: Vec<_> = defined
        .iter()
        .filter(|m| !doc.contains(&format!("| `{m}` |")))
        .collect();
    ensure!(
        missing.is_empty(),
        "metrics defined in the code without a row in docs/metrics.md: {missing:?}"
    );
    Ok(())
}
