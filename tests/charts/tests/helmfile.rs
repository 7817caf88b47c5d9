//! `helmfile lint` and `helmfile template` for each environment, the release order, and the
//! committed golden output (`tests/charts/golden/helmfile-<env>.yaml`) with a drift check.

use anyhow::{Context, Result, bail, ensure};
use pacto_chart_tests::{Tools, documents, repo_root};

const ENVIRONMENTS: &[&str] = &["local", "production"];
const REGENERATE: &str = "PACTO_UPDATE_GOLDEN=1 cargo test -p pacto-chart-tests --test helmfile";

/// `helmfile -e <env> template`, releases one at a time so the output order is stable.
pub fn helmfile_template(tools: &Tools, env: &str) -> Result<String> {
    Ok(tools.run(
        "helmfile",
        [
            "--environment",
            env,
            "template",
            "--concurrency",
            "1",
            "--skip-deps",
        ],
    )?)
}

/// Whether the node agent's image is built and released (a `service` line in `release/components`,
/// which `scripts/node-images.sh` and `scripts/release.sh` read).
fn node_agent_image_is_built() -> Result<bool> {
    Ok(pacto_chart_tests::released_services()
        .context("read release/components")?
        .iter()
        .any(|c| c == "node-agent"))
}

#[test]
fn helmfile_lints_in_every_environment() -> Result<()> {
    let tools = Tools::new()?;
    for env in ENVIRONMENTS {
        tools.run("helmfile", ["--environment", env, "lint", "--skip-deps"])?;
    }
    Ok(())
}

/// docs/upgrade.md: with `chartRepository` set, EVERY release comes from that OCI repository at the
/// version of this checkout's chart (the Evidence Server's once came from ./charts regardless).
#[test]
fn chart_repository_is_where_every_release_comes_from() -> Result<()> {
    let tools = Tools::new()?;
    for env in ENVIRONMENTS {
        let out = tools.run(
            "helmfile",
            [
                "--state-values-set",
                "chartRepository=registry.example/pacto/charts",
                "--state-values-set",
                "nodeAgent.enabled=true",
                "--state-values-set",
                "evidenceServer.enabled=true",
                "--environment",
                env,
                "list",
                "--output",
                "json",
                "--skip-charts",
            ],
        )?;
        let releases: serde_json::Value =
            serde_json::from_str(&out).context("helmfile list json")?;
        let releases = releases.as_array().context("list")?;
        ensure!(
            releases
                .iter()
                .any(|r| r["name"] == "pacto-evidence-server"),
            "{env}: no evidence-server release to check: {releases:?}"
        );
        for release in releases {
            let name = release["name"].as_str().unwrap_or_default();
            let chart = release["chart"].as_str().unwrap_or_default();
            ensure!(
                chart == format!("pacto/{name}"),
                "{env}: release {name} comes from {chart:?}, not from chartRepository"
            );
        }
    }
    Ok(())
}

#[test]
fn helmfile_orders_crds_first_and_needs_are_declared() -> Result<()> {
    let tools = Tools::new()?;
    for env in ENVIRONMENTS {
        let out = tools.run(
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
        let releases: serde_json::Value =
            serde_json::from_str(&out).context("helmfile list json")?;
        let names: Vec<&str> = releases
            .as_array()
            .context("list")?
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        for service in [
            "pacto-contract-resolver",
            "pacto-observer",
            "pacto-evaluator",
            "pacto-status-writer",
        ] {
            ensure!(
                names.contains(&service),
                "{env}: release {service} missing: {names:?}"
            );
        }
        ensure!(names.first() == Some(&"pacto-crds"), "{env}: {names:?}");
        ensure!(
            names.contains(&"pacto-pki") == (*env == "production"),
            "{env}: {names:?}"
        );
        // An environment deploys the node agent only once scripts/node-images.sh builds its
        // image (its COMPONENTS list names node-agent).
        ensure!(
            !names.contains(&"pacto-node-agent") || node_agent_image_is_built()?,
            "{env} deploys the node agent, but scripts/node-images.sh does not build its image: {names:?}"
        );
    }
    // The DAG: `helmfile template` renders in dependency order (crds, node agent, pki,
    // backends, status-writer), with the node agent switched on.
    let text = tools.run(
        "helmfile",
        [
            "--state-values-set",
            "nodeAgent.enabled=true",
            "--environment",
            "production",
            "template",
            "--concurrency",
            "1",
            "--skip-deps",
        ],
    )?;
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# Source: "))
        .filter_map(|s| s.split('/').next())
        .fold(Vec::new(), |mut acc, chart| {
            if acc.last() != Some(&chart) {
                acc.push(chart);
            }
            acc
        });
    ensure!(order.first() == Some(&"pacto-crds"), "{order:?}");
    let pos = |chart: &str| order.iter().position(|c| *c == chart);
    for backend in [
        "pacto-contract-resolver",
        "pacto-observer",
        "pacto-evaluator",
    ] {
        ensure!(
            pos(backend) < pos("pacto-status-writer"),
            "{backend} after the status-writer: {order:?}"
        );
        ensure!(
            pos("pacto-pki").is_some() && pos("pacto-pki") < pos(backend),
            "{backend} before the CA: {order:?}"
        );
    }
    // pacto-pki puts its Issuer into the agent namespace, which the agent's release creates.
    ensure!(
        pos("pacto-node-agent") < pos("pacto-pki"),
        "the CA before the agent namespace exists: {order:?}"
    );
    // The agent's release creates its namespace, where the observer's Role goes: it comes
    // first (a fresh install failed with `namespaces "pacto-node-agent" not found` otherwise).
    ensure!(
        pos("pacto-node-agent").is_some() && pos("pacto-node-agent") < pos("pacto-observer"),
        "{order:?}"
    );
    Ok(())
}

/// The CA key pair charts/pacto-pki generates at install time differs on every render: the golden
/// files hold a placeholder instead (the identity tests below check the real render).
fn redact_generated_keys(text: &str) -> String {
    text.lines()
        .map(|line| {
            let field = line.trim_start();
            match ["tls.crt: ", "tls.key: ", "ca.crt: "]
                .iter()
                .find(|prefix| field.starts_with(*prefix))
            {
                Some(prefix) => format!(
                    "{}{prefix}<generated by charts/pacto-pki>",
                    &line[..line.len() - field.len()]
                ),
                None => line.to_owned(),
            }
        })
        .map(|line| line + "\n")
        .collect()
}

#[test]
fn helmfile_template_matches_the_golden_files() -> Result<()> {
    let tools = Tools::new()?;
    let update = std::env::var_os("PACTO_UPDATE_GOLDEN").is_some_and(|v| v == "1");
    for env in ENVIRONMENTS {
        let text = redact_generated_keys(&helmfile_template(&tools, env)?);
        ensure!(
            !documents(&text)?.is_empty(),
            "{env}: helmfile renders nothing"
        );
        let path = repo_root()
            .join("tests/charts/golden")
            .join(format!("helmfile-{env}.yaml"));
        if update {
            std::fs::write(&path, &text)?;
            continue;
        }
        let golden = std::fs::read_to_string(&path).with_context(|| {
            format!("{} missing; regenerate with `{REGENERATE}`", path.display())
        })?;
        if golden != text {
            let line = golden
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| golden.lines().count().min(text.lines().count()));
            anyhow::bail!(
                "helmfile template ({env}) differs from {} from line {} on:\n  golden:   {:?}\n  rendered: {:?}\n\
                 If the change is intended, regenerate with `{REGENERATE}` and commit the golden files.",
                path.display(),
                line + 1,
                golden.lines().nth(line),
                text.lines().nth(line)
            );
        }
    }
    Ok(())
}

#[test]
fn helmfile_output_passes_kubernetes_validate_strict() -> Result<()> {
    let tools = Tools::new()?;
    let dir = tempfile::tempdir()?;
    for env in ENVIRONMENTS {
        let file = dir.path().join(format!("{env}.yaml"));
        std::fs::write(&file, helmfile_template(&tools, env)?)?;
        if let Some(report) = tools.validate_strict(&file)? {
            bail!("kubernetes-validate --strict rejected the {env} environment:\n{report}");
        }
    }
    Ok(())
}

/// The `--<flag>=` argument values of every container in `docs`.
fn flag_values<'a>(docs: &'a [serde_json::Value], flag: &str) -> Vec<&'a str> {
    let prefix = format!("{flag}=");
    docs.iter()
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .flat_map(|c| c["args"].as_array().into_iter().flatten())
        .filter_map(|a| a.as_str()?.strip_prefix(prefix.as_str()))
        .collect()
}

/// Issue 17 item 10 (docs/design/identity.md): in the production environment only the Pacto
/// namespaces can obtain a certificate the services accept. No ClusterIssuer is created or
/// referenced; every Certificate names a namespaced CA Issuer that pacto-pki creates in the
/// Certificate's own namespace (all backed by one CA); every Certificate carries the URI SAN of
/// the ServiceAccount of the workload that mounts it; and the allow-lists name only such URIs.
#[test]
fn production_identities_are_uri_sans_from_namespaced_issuers() -> Result<()> {
    let tools = Tools::new()?;
    let docs = documents(&helmfile_template(&tools, "production")?)?;
    let of_kind = |kind: &'static str| docs.iter().filter(move |d| d["kind"] == kind);
    let at = |d: &serde_json::Value| {
        format!(
            "{}/{}",
            d["metadata"]["namespace"].as_str().unwrap_or(""),
            d["metadata"]["name"].as_str().unwrap_or("")
        )
    };
    ensure!(
        of_kind("ClusterIssuer").next().is_none(),
        "production creates a ClusterIssuer"
    );
    // The CA Issuers, each with the CA Secret in its namespace; one CA for all.
    let issuers: Vec<String> = of_kind("Issuer")
        .map(|issuer| {
            ensure!(
                issuer["spec"]["ca"]["secretName"].is_string(),
                "{} is not a CA Issuer: {issuer}",
                at(issuer)
            );
            Ok(at(issuer))
        })
        .collect::<Result<_>>()?;
    let namespaces = ["pacto-operator-system", "pacto-node-agent"];
    for namespace in namespaces {
        ensure!(
            issuers.contains(&format!("{namespace}/pacto-ca")),
            "no CA Issuer in {namespace}: {issuers:?}"
        );
    }
    let ca_certs: Vec<&str> = of_kind("Secret")
        .filter(|s| s["metadata"]["name"] == "pacto-ca")
        .filter_map(|s| s["data"]["tls.crt"].as_str())
        .collect();
    ensure!(
        ca_certs.len() == 2 && ca_certs[0] == ca_certs[1],
        "the two Issuers are not backed by one CA: {} CA Secrets",
        ca_certs.len()
    );

    let mut uris = Vec::new();
    for cert in of_kind("Certificate") {
        let namespace = cert["metadata"]["namespace"].as_str().unwrap_or("");
        let issuer = &cert["spec"]["issuerRef"];
        ensure!(
            issuer["kind"] == "Issuer"
                && issuers.contains(&format!(
                    "{namespace}/{}",
                    issuer["name"].as_str().unwrap_or("")
                )),
            "{} is not issued by a CA Issuer of its own namespace: {issuer}",
            at(cert)
        );
        // The workload that mounts the certificate's Secret, and its ServiceAccount.
        let secret = &cert["spec"]["secretName"];
        let workload = docs
            .iter()
            .filter(|d| d["metadata"]["namespace"] == namespace)
            .find(|d| {
                d["spec"]["template"]["spec"]["volumes"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|v| v["secret"]["secretName"] == *secret))
            })
            .with_context(|| format!("no workload mounts the Secret of {}", at(cert)))?;
        let account = workload["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .context("serviceAccountName")?;
        let uri = format!("spiffe://pacto/ns/{namespace}/sa/{account}");
        ensure!(
            cert["spec"]["uris"] == serde_json::json!([uri]),
            "{} does not carry the URI SAN {uri}: {}",
            at(cert),
            cert["spec"]
        );
        uris.push(uri);
    }
    ensure!(uris.len() == 5, "five Certificates: {uris:?}");

    // The allow-lists: URIs of the status-writer's and the agent's certificates, nothing else.
    let allowed = flag_values(&docs, "--allowed-identities");
    ensure!(allowed.len() == 3, "three gRPC servers: {allowed:?}");
    for value in allowed {
        ensure!(
            value == "spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer"
                && uris.iter().any(|u| u == value),
            "--allowed-identities={value}"
        );
    }
    let agents = flag_values(&docs, "--node-agent-identities");
    ensure!(
        agents == ["spiffe://pacto/ns/pacto-node-agent/sa/pacto-node-agent"]
            && uris.iter().any(|u| u == agents[0]),
        "--node-agent-identities={agents:?}"
    );
    Ok(())
}
