//! The status-writer chart's `policyReports.enabled` (docs/reports.md): off by default, it renders
//! neither the `--policy-reports` flag nor any right on `wgpolicyk8s.io`; on, exactly the flag and
//! get/patch on `policyreports` in the status-writer's own (Cluster)Role, and the helmfile
//! environment key reaches the release.

use anyhow::{Context, Result, ensure};
use pacto_chart_tests::{Tools, deployment_args, documents, template_in_operator_namespace};
use serde_json::Value;

const CHART: &str = "pacto-status-writer";

fn render(tools: &Tools, sets: &[&str]) -> Result<Vec<Value>> {
    Ok(template_in_operator_namespace(tools, CHART, sets)?)
}

/// `(role kind, role namespace, verbs)` of every rule naming `wgpolicyk8s.io`.
fn report_rules(docs: &[Value]) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for role in docs
        .iter()
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
    {
        for rule in role["rules"].as_array().into_iter().flatten() {
            let groups = rule["apiGroups"].to_string();
            if groups.contains("wgpolicyk8s.io") {
                ensure_resources(rule);
                out.push((
                    role["kind"].as_str().unwrap_or_default().to_owned(),
                    role["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    rule["verbs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect(),
                ));
            }
        }
    }
    out
}

fn ensure_resources(rule: &Value) {
    assert_eq!(
        rule["resources"],
        serde_json::json!(["policyreports"]),
        "{rule}"
    );
}

fn flags(docs: &[Value]) -> Result<Vec<String>> {
    deployment_args(docs).context("no Deployment")
}

#[test]
fn policy_reports_add_the_flag_and_the_right_only_when_enabled() -> Result<()> {
    let tools = Tools::new()?;
    let off = render(&tools, &[])?;
    ensure!(report_rules(&off).is_empty(), "{:?}", report_rules(&off));
    ensure!(!flags(&off)?.iter().any(|f| f == "--policy-reports"));

    let on = render(&tools, &["policyReports.enabled=true"])?;
    ensure!(
        report_rules(&on)
            == vec![(
                "ClusterRole".to_owned(),
                String::new(),
                vec!["get".to_owned(), "patch".to_owned()]
            )],
        "{:?}",
        report_rules(&on)
    );
    ensure!(flags(&on)?.iter().any(|f| f == "--policy-reports"));

    // A watched namespace: the right is in that namespace's Role, like the rights on Pactos.
    let scoped = render(
        &tools,
        &[
            "policyReports.enabled=true",
            "controller.watchNamespace=team-a",
        ],
    )?;
    ensure!(
        report_rules(&scoped)
            == vec![(
                "Role".to_owned(),
                "team-a".to_owned(),
                vec!["get".to_owned(), "patch".to_owned()]
            )],
        "{:?}",
        report_rules(&scoped)
    );
    Ok(())
}

#[test]
fn the_helmfile_environment_key_reaches_the_status_writer() -> Result<()> {
    let tools = Tools::new()?;
    for (set, want) in [(None, false), (Some("policyReports.enabled=true"), true)] {
        let mut args = vec!["--environment", "production"];
        if let Some(set) = set {
            args.extend(["--state-values-set", set]);
        }
        args.extend([
            "--selector",
            "name=pacto-status-writer",
            "template",
            "--skip-deps",
        ]);
        let docs = documents(&tools.run("helmfile", &args)?)?;
        let has_flag = flags(&docs)?.iter().any(|f| f == "--policy-reports");
        ensure!(
            has_flag == want,
            "{set:?}: --policy-reports rendered: {has_flag}"
        );
        ensure!(report_rules(&docs).is_empty() != want, "{set:?}");
    }
    Ok(())
}
