//! Secure metrics in every chart (docs/metrics.md#secure-metrics): per TLS mode, what the four
//! service charts, the Evidence Server's and the node agent's render: the flags, the `metrics`
//! port, the metrics Service, the ServiceMonitor (HTTPS, CA and server name, bearer token), the
//! NetworkPolicy, the TokenReview/SubjectAccessReview ClusterRole, the certificate's usages and
//! the status-writer's `pacto-metrics-reader`; and `kubernetes-validate --strict` accepts each
//! render.

use anyhow::{Context, Result, bail, ensure};
use pacto_chart_tests::{SERVICE_CHARTS, Tools, documents, object_key, required_sets};
use serde_json::{Value, json};

/// The charts serving metrics: the four services, the Evidence Server and the node agent.
fn charts() -> impl Iterator<Item = &'static str> {
    SERVICE_CHARTS
        .iter()
        .copied()
        .chain(["pacto-evidence-server", "pacto-node-agent"])
}

fn namespace(chart: &str) -> &'static str {
    if chart == "pacto-node-agent" {
        "pacto-node-agent"
    } else {
        "pacto-operator-system"
    }
}

/// The modes: label, `--set`s, whether metrics are secure in it.
const MODES: [(&str, &[&str], bool); 4] = [
    ("cert-manager", &["tls.mode=cert-manager"], true),
    (
        "existing-secret",
        &["tls.mode=existing-secret", "tls.existingSecret=team-certs"],
        true,
    ),
    ("insecure", &["tls.mode=insecure"], false),
    (
        "cert-manager, metrics.secure=false",
        &["tls.mode=cert-manager", "metrics.secure=false"],
        false,
    ),
];

/// `helm template` of `chart` with the ServiceMonitor on and `sets`: the text and its documents.
fn render(tools: &Tools, chart: &str, sets: &[&str]) -> Result<(String, Vec<Value>)> {
    let mut args: Vec<String> = vec![
        "template".into(),
        chart.into(),
        format!("charts/{chart}"),
        "--namespace".into(),
        namespace(chart).into(),
        "--set".into(),
        "metrics.serviceMonitor.enabled=true".into(),
    ];
    for set in required_sets(chart).iter().chain(sets) {
        args.push("--set".into());
        args.push((*set).into());
    }
    let text = tools.run("helm", &args)?;
    let docs = documents(&text)?;
    Ok((text, docs))
}

fn one<'a>(docs: &'a [Value], kind: &str, name_suffix: &str) -> Result<&'a Value> {
    docs.iter()
        .find(|d| {
            d["kind"] == kind
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with(name_suffix))
        })
        .with_context(|| {
            format!(
                "no {kind} named *{name_suffix} in {:?}",
                docs.iter().map(object_key).collect::<Vec<_>>()
            )
        })
}

fn pod_spec(docs: &[Value]) -> Result<&Value> {
    let workload = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
        .context("no workload rendered")?;
    Ok(&workload["spec"]["template"]["spec"])
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The names of the ports a NetworkPolicy admits `networkPolicy.metricsFrom` to (the ingress
/// rule whose peers are the default Prometheus selector).
fn scrape_ports(policy: &Value) -> Vec<String> {
    policy["spec"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rule| {
            rule["from"].as_array().is_some_and(|from| {
                from.iter().any(|p| {
                    p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "prometheus"
                })
            })
        })
        .flat_map(|rule| rule["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["port"].as_str().map(str::to_owned))
        .collect()
}

/// The secret the chart mounts its certificate from, for the ServiceMonitor's CA.
fn tls_secret(chart: &str, sets: &[&str]) -> String {
    if sets.contains(&"tls.existingSecret=team-certs") {
        "team-certs".to_owned()
    } else {
        format!("{chart}-tls")
    }
}

#[test]
fn every_chart_serves_metrics_securely_when_it_has_a_certificate() -> Result<()> {
    let tools = Tools::new()?;
    let dir = tempfile::tempdir()?;
    for chart in charts() {
        let component = chart.trim_start_matches("pacto-");
        for (label, sets, secure) in MODES {
            let at = format!("{chart} ({label})");
            let (text, docs) = render(&tools, chart, sets)?;

            // The flags and the container port.
            let pod = pod_spec(&docs)?;
            let container = &pod["containers"][0];
            let args = strings(&container["args"]);
            let ports: Vec<(&str, u64)> = container["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| Some((p["name"].as_str()?, p["containerPort"].as_u64()?)))
                .collect();
            if secure {
                ensure!(
                    args.contains(&"--metrics-secure")
                        && args.contains(&"--metrics-addr=0.0.0.0:9443")
                        && !args.contains(&"--insecure"),
                    "{at}: {args:?}"
                );
                ensure!(ports.contains(&("metrics", 9443)), "{at}: ports {ports:?}");
                ensure!(
                    pod["automountServiceAccountToken"] == true,
                    "{at}: the reviews need the API token"
                );
            } else {
                ensure!(
                    !args.iter().any(|a| a.starts_with("--metrics-")),
                    "{at}: {args:?}"
                );
                ensure!(
                    !ports.iter().any(|(n, _)| *n == "metrics"),
                    "{at}: ports {ports:?}"
                );
            }
            // Probes stay on the plain admin port.
            for probe in ["livenessProbe", "readinessProbe"] {
                let port = &container[probe]["httpGet"]["port"];
                ensure!(port == "admin" || port == "http", "{at}: {probe} on {port}");
            }

            // The metrics Service.
            let service = one(&docs, "Service", "-metrics")?;
            let names: Vec<&str> = service["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["name"].as_str())
                .collect();
            if secure {
                let metrics = service["spec"]["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["name"] == "metrics")
                    .with_context(|| format!("{at}: no `metrics` Service port"))?;
                ensure!(
                    metrics["port"] == 9443
                        && metrics["targetPort"] == "metrics"
                        && metrics["appProtocol"] == "https",
                    "{at}: {metrics}"
                );
            } else {
                ensure!(names == ["admin"], "{at}: Service ports {names:?}");
            }

            // The ServiceMonitor.
            let monitor = one(&docs, "ServiceMonitor", "")?;
            let endpoint = &monitor["spec"]["endpoints"][0];
            if secure {
                let expected = json!({
                    "port": "metrics",
                    "path": "/metrics",
                    "scheme": "https",
                    "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                    "tlsConfig": {
                        "ca": { "secret": { "name": tls_secret(chart, sets), "key": "ca.crt" } },
                        "serverName": format!("{component}.pacto.svc"),
                        "insecureSkipVerify": false,
                    },
                    "honorLabels": endpoint["honorLabels"],
                });
                ensure!(
                    *endpoint == expected,
                    "{at}: ServiceMonitor endpoint {endpoint:#}"
                );
            } else {
                ensure!(
                    endpoint["port"] == "admin"
                        && endpoint["scheme"] == "http"
                        && endpoint.get("tlsConfig").is_none()
                        && endpoint.get("bearerTokenFile").is_none(),
                    "{at}: ServiceMonitor endpoint {endpoint:#}"
                );
            }

            // The NetworkPolicy (the node agent's chart has none).
            if chart != "pacto-node-agent" {
                let policy = one(&docs, "NetworkPolicy", "")?;
                let want = if secure { "metrics" } else { "admin" };
                ensure!(
                    scrape_ports(policy) == [want],
                    "{at}: scrapers admitted to {:?}",
                    scrape_ports(policy)
                );
                if secure {
                    let api = policy["spec"]["egress"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|rule| {
                            rule["ports"]
                                .as_array()
                                .is_some_and(|p| p.iter().any(|p| p["port"] == 6443))
                        });
                    ensure!(api, "{at}: no egress to the API server for the reviews");
                }
            }

            // The reviews' ClusterRole, bound to the service's ServiceAccount.
            let auth = docs.iter().find(|d| {
                d["kind"] == "ClusterRole"
                    && d["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("-metrics-auth"))
            });
            if secure {
                let role = auth.with_context(|| format!("{at}: no metrics-auth ClusterRole"))?;
                ensure!(
                    role["rules"]
                        == json!([
                            { "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"] },
                            { "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"] },
                        ]),
                    "{at}: {:#}",
                    role["rules"]
                );
                let name = role["metadata"]["name"].clone();
                let binding = one(&docs, "ClusterRoleBinding", "-metrics-auth")?;
                ensure!(
                    binding["roleRef"]["name"] == name
                        && binding["subjects"][0]["name"] == pod["serviceAccountName"]
                        && binding["subjects"][0]["namespace"] == namespace(chart),
                    "{at}: {binding:#}"
                );
            } else {
                ensure!(
                    auth.is_none(),
                    "{at}: metrics-auth rendered without secure metrics"
                );
            }

            // The certificate serves TLS: server auth.
            if sets.contains(&"tls.mode=cert-manager") {
                let cert = one(&docs, "Certificate", "-tls")?;
                let usages = strings(&cert["spec"]["usages"]);
                ensure!(
                    usages.contains(&"server auth") == (secure || chart_has_grpc_server(chart)),
                    "{at}: usages {usages:?}"
                );
            }

            // The scrapers' role (status-writer only, whatever the mode).
            if chart == "pacto-status-writer" {
                let reader = one(&docs, "ClusterRole", "pacto-metrics-reader")?;
                ensure!(
                    reader["rules"]
                        == json!([{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }]),
                    "{at}: {:#}",
                    reader["rules"]
                );
            }

            let file = dir.path().join(format!(
                "{chart}-{}.yaml",
                label.replace([' ', ',', '='], "-")
            ));
            std::fs::write(&file, &text)?;
            if let Some(report) = tools.validate_strict(&file)? {
                bail!("kubernetes-validate --strict rejected {at}:\n{report}");
            }
        }
    }
    Ok(())
}

fn chart_has_grpc_server(chart: &str) -> bool {
    matches!(
        chart,
        "pacto-contract-resolver" | "pacto-observer" | "pacto-evaluator"
    )
}

/// `metrics.serviceMonitor.bearerTokenSecret`: the token from a Secret as `authorization`
/// credentials, no token file.
#[test]
fn a_token_secret_replaces_the_token_file() -> Result<()> {
    let tools = Tools::new()?;
    for chart in charts() {
        let (_, docs) = render(
            &tools,
            chart,
            &["metrics.serviceMonitor.bearerTokenSecret.name=prometheus-token"],
        )?;
        let endpoint = &one(&docs, "ServiceMonitor", "")?["spec"]["endpoints"][0];
        ensure!(
            endpoint["authorization"]
                == json!({ "type": "Bearer", "credentials": { "name": "prometheus-token", "key": "token" } })
                && endpoint.get("bearerTokenFile").is_none(),
            "{chart}: {endpoint:#}"
        );
    }
    Ok(())
}
