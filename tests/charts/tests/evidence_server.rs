//! `charts/pacto-evidence-server` and its helmfile entry (docs/evidence.md#running-the-server):
//! the schema's refusals with their exact messages, the hardened single-replica Deployment with
//! its probes on the API, the trust and credential volumes, the Service on 8686, and the
//! helmfile release (off by default; when on, after the contract-resolver, which then admits
//! the server's identity). The rendered chart is pinned by a golden file
//! (`tests/charts/golden/pacto-evidence-server.yaml`; regenerate with
//! `PACTO_UPDATE_GOLDEN=1 cargo test -p pacto-chart-tests --test evidence_server`).

use anyhow::{Context, Result, ensure};
use pacto_chart_tests::{Tools, documents, repo_root, required_sets};
use serde_json::{Value, json};

const CHART: &str = "pacto-evidence-server";
const REGENERATE: &str =
    "PACTO_UPDATE_GOLDEN=1 cargo test -p pacto-chart-tests --test evidence_server";

fn template(tools: &Tools, sets: &[&str], values: bool) -> Result<String> {
    let mut args = vec![
        "template".to_owned(),
        CHART.to_owned(),
        format!("charts/{CHART}"),
        "--namespace".to_owned(),
        "pacto-operator-system".to_owned(),
    ];
    if values {
        args.push("--values".to_owned());
        args.push(
            repo_root()
                .join("tests/charts/values")
                .join(format!("{CHART}.yaml"))
                .display()
                .to_string(),
        );
    }
    for set in sets {
        args.push("--set".to_owned());
        args.push((*set).to_owned());
    }
    Ok(tools.run("helm", &args)?)
}

fn refusal(tools: &Tools, sets: &[&str]) -> Result<String> {
    let mut args = vec![
        "template".to_owned(),
        CHART.to_owned(),
        format!("charts/{CHART}"),
    ];
    for set in sets {
        args.push("--set".to_owned());
        args.push((*set).to_owned());
    }
    let out = tools.output("helm", &args)?;
    ensure!(!out.status.success(), "helm template {sets:?} succeeded");
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

#[test]
fn the_schema_requires_subjects_with_a_full_digest_and_the_keys_secret() -> Result<()> {
    let tools = Tools::new()?;
    let err = refusal(&tools, &["trust.keysSecret=k"])?;
    ensure!(
        err.contains("at '/subjects': minItems: got 0, want 1"),
        "{err}"
    );
    let err = refusal(
        &tools,
        &["subjects[0]=oci://registry.example.com/team/svc@sha256:abc,trust.keysSecret=k"],
    )?;
    ensure!(err.contains("at '/subjects/0'"), "{err}");
    let err = refusal(
        &tools,
        &[&format!(
            "subjects[0]=oci://registry.example.com/team/svc:1.0@sha256:{},trust.keysSecret=k",
            "a".repeat(64)
        )],
    )?;
    ensure!(err.contains("at '/subjects/0'"), "{err}");
    let subject = format!(
        "subjects[0]=oci://registry.example.com/team/svc@sha256:{}",
        "a".repeat(64)
    );
    let err = refusal(&tools, &[&subject])?;
    ensure!(
        err.contains("trust.keysSecret: the Secret holding the producers' .pub keys is required"),
        "{err}"
    );
    Ok(())
}

#[test]
fn the_deployment_is_one_hardened_replica_probed_on_the_api() -> Result<()> {
    let tools = Tools::new()?;
    let docs = documents(&template(&tools, required_sets(CHART), false)?)?;
    let deployment = of_kind(&docs, "Deployment")[0];
    let spec = &deployment["spec"];
    ensure!(spec["replicas"] == 1, "{spec}");
    ensure!(spec["strategy"] == json!({"type": "Recreate"}), "{spec}");
    let pod = &spec["template"]["spec"];
    // The API token only for the reviews of secure metrics (on by default with a certificate).
    ensure!(pod["automountServiceAccountToken"] == true, "{pod}");
    ensure!(pod["securityContext"]["runAsUser"] == 65532, "{pod}");
    ensure!(pod["securityContext"]["runAsNonRoot"] == true, "{pod}");
    let c = &pod["containers"][0];
    ensure!(
        c["securityContext"]["readOnlyRootFilesystem"] == true,
        "{c}"
    );
    ensure!(
        c["securityContext"]["allowPrivilegeEscalation"] == false,
        "{c}"
    );
    ensure!(
        c["ports"][0] == json!({"name": "http", "containerPort": 8686, "protocol": "TCP"}),
        "{c}"
    );
    ensure!(
        c["startupProbe"]["httpGet"]["path"] == "/api/evidence/v1/ready",
        "{c}"
    );
    ensure!(c["startupProbe"]["failureThreshold"] == 60, "{c}");
    ensure!(
        c["readinessProbe"]["httpGet"]["path"] == "/api/evidence/v1/ready",
        "{c}"
    );
    ensure!(
        c["livenessProbe"]["httpGet"]["path"] == "/api/evidence/v1/health",
        "{c}"
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .context("args")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for want in [
        "--listen-address=0.0.0.0:8686",
        "--trust=/etc/pacto/trust",
        "--resolver-addr=pacto-contract-resolver.pacto-operator-system.svc:8443",
    ] {
        ensure!(args.contains(&want), "{want} missing: {args:?}");
    }
    // no credentials volume unless asked for; the keys Secret is projected at /etc/pacto/trust
    let volumes = pod["volumes"].to_string();
    ensure!(!volumes.contains("registry-credentials"), "{volumes}");
    ensure!(volumes.contains("\"name\":\"evidence-keys\""), "{volumes}");
    let service = of_kind(&docs, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == CHART)
        .context("the API Service")?;
    ensure!(service["spec"]["type"] == "ClusterIP", "{service}");
    ensure!(service["spec"]["ports"][0]["port"] == 8686, "{service}");
    ensure!(of_kind(&docs, "ServiceMonitor").is_empty());
    ensure!(of_kind(&docs, "NetworkPolicy").len() == 1);
    ensure!(of_kind(&docs, "ConfigMap").is_empty());

    // non-default values: the structured trust config, credentials, NodePort, ServiceMonitor
    let docs = documents(&template(&tools, &[], true)?)?;
    let pod = &of_kind(&docs, "Deployment")[0]["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args = c["args"].to_string();
    ensure!(
        args.contains("--trust=/etc/pacto/trust/trust.yaml"),
        "{args}"
    );
    ensure!(args.contains("--producer=ci-runner"), "{args}");
    ensure!(
        args.contains("--insecure-registries=registry.example.com"),
        "{args}"
    );
    ensure!(
        c["env"]
            .to_string()
            .contains("{\"name\":\"DOCKER_CONFIG\",\"value\":\"/etc/pacto/registry\"}"),
        "{}",
        c["env"]
    );
    ensure!(
        pod["volumes"]
            .to_string()
            .contains("\"key\":\".dockerconfigjson\",\"path\":\"config.json\""),
        "{}",
        pod["volumes"]
    );
    let config = of_kind(&docs, "ConfigMap");
    ensure!(config.len() == 1, "one trust ConfigMap");
    ensure!(
        config[0]["data"]["trust.yaml"]
            .as_str()
            .is_some_and(|t| t.starts_with("apiVersion: pacto.dev/evidence-trust/v1")),
        "{}",
        config[0]
    );
    ensure!(of_kind(&docs, "ServiceMonitor").len() == 1);
    ensure!(of_kind(&docs, "PrometheusRule").len() == 1);
    Ok(())
}

#[test]
fn the_rendered_chart_matches_its_golden_file() -> Result<()> {
    let tools = Tools::new()?;
    let text = template(&tools, &[], true)?;
    let path = repo_root()
        .join("tests/charts/golden")
        .join(format!("{CHART}.yaml"));
    if std::env::var_os("PACTO_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text)?;
        return Ok(());
    }
    let golden = std::fs::read_to_string(&path)
        .with_context(|| format!("{} missing; regenerate with `{REGENERATE}`", path.display()))?;
    ensure!(
        golden == text,
        "the rendered {CHART} differs from {}; regenerate with `{REGENERATE}`",
        path.display()
    );
    Ok(())
}

#[test]
fn helmfile_deploys_it_only_when_enabled_and_the_resolver_then_admits_it() -> Result<()> {
    let tools = Tools::new()?;
    for env in ["local", "production"] {
        let text = tools.run(
            "helmfile",
            [
                "--environment",
                env,
                "list",
                "--output",
                "json",
                "--skip-charts",
            ],
        )?;
        ensure!(!text.contains("pacto-evidence-server"), "{env}: {text}");
    }
    let subject = format!(
        "evidenceServer.enabled=true,evidenceServer.subjects[0]=oci://registry.pacto-operator-system.svc:5000/team/svc@sha256:{},evidenceServer.trust.keysSecret=keys",
        "a".repeat(64)
    );
    let text = tools.run(
        "helmfile",
        [
            "--state-values-set",
            &subject,
            "--environment",
            "local",
            "template",
            "--concurrency",
            "1",
            "--skip-deps",
        ],
    )?;
    let docs = documents(&text)?;
    let deployment = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
            .with_context(|| format!("Deployment {name}"))
    };
    let resolver = deployment("pacto-contract-resolver")?;
    let args = resolver["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    ensure!(
        args.contains("--allowed-identities=spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer,spiffe://pacto/ns/pacto-operator-system/sa/pacto-evidence-server"),
        "{args}"
    );
    let server = deployment("pacto-evidence-server")?;
    let args = server["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    ensure!(args.contains("--insecure"), "{args}");
    ensure!(
        args.contains(
            "--insecure-registries=localhost:5000,registry.pacto-operator-system.svc:5000"
        ),
        "{args}"
    );
    ensure!(
        server["spec"]["template"]["spec"]["serviceAccountName"] == "pacto-evidence-server",
        "the resolver admits the ServiceAccount pacto-evidence-server"
    );
    Ok(())
}
