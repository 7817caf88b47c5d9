//! Every chart, with its defaults and with the non-default values under `tests/charts/values/`:
//! `helm lint --strict`, `helm template`, `kubernetes-validate --strict` of the result, `promtool
//! check rules` of the alerts, and the properties the charts promise (hardening, probes, least
//! privilege RBAC matching docs/design/architecture.md#kubernetes-access, the troubleshooting guide's values).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail, ensure};
use pacto_chart_tests::{
    CHARTS, SERVICE_CHARTS, Tools, documents, object_key, repo_root, required_sets,
};
use serde_json::Value;

const NAMESPACE: &str = "pacto-operator-system";

fn values_file(chart: &str) -> PathBuf {
    repo_root()
        .join("tests/charts/values")
        .join(format!("{chart}.yaml"))
}

/// `helm template <chart> charts/<chart> -n pacto-operator-system [-f values] [--set …]`.
fn template(tools: &Tools, chart: &str, values: Option<&Path>, sets: &[&str]) -> Result<String> {
    let mut args: Vec<String> = vec![
        "template".into(),
        chart.into(),
        format!("charts/{chart}"),
        "--namespace".into(),
        NAMESPACE.into(),
    ];
    if let Some(values) = values {
        args.push("--values".into());
        args.push(values.display().to_string());
    } else {
        for set in required_sets(chart) {
            args.push("--set".into());
            args.push((*set).into());
        }
    }
    for set in sets {
        args.push("--set".into());
        args.push((*set).into());
    }
    Ok(tools.run("helm", &args)?)
}

fn render(tools: &Tools, chart: &str, values: Option<&Path>, sets: &[&str]) -> Result<Vec<Value>> {
    Ok(documents(&template(tools, chart, values, sets)?)?)
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

fn args(deployment: &Value) -> Vec<String> {
    container(deployment)["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `(apiGroup, resource, verb)` for every rule of every Role/ClusterRole in `docs`, with the
/// resourceNames restriction (if any) appended to the resource as `name=<names>`.
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
            let names: Vec<&str> = rule["resourceNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for group in rule["apiGroups"].as_array().into_iter().flatten() {
                for resource in rule["resources"].as_array().into_iter().flatten() {
                    for verb in rule["verbs"].as_array().into_iter().flatten() {
                        let mut entry = format!(
                            "{scope} {}/{} {}",
                            group.as_str().unwrap_or("?"),
                            resource.as_str().unwrap_or("?"),
                            verb.as_str().unwrap_or("?")
                        );
                        if !names.is_empty() {
                            entry.push_str(" name=");
                            entry.push_str(&names.join(","));
                        }
                        out.insert(entry);
                    }
                }
            }
        }
    }
    out
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn every_chart_lints_strictly_with_default_and_non_default_values() -> Result<()> {
    let tools = Tools::new()?;
    for chart in CHARTS {
        let mut lint = vec![
            "lint".to_owned(),
            "--strict".to_owned(),
            format!("charts/{chart}"),
        ];
        for set in required_sets(chart) {
            lint.push("--set".to_owned());
            lint.push((*set).to_owned());
        }
        tools.run("helm", &lint)?;
        let values = values_file(chart);
        if values.is_file() {
            tools.run(
                "helm",
                [
                    "lint",
                    "--strict",
                    &format!("charts/{chart}"),
                    "--values",
                    &values.display().to_string(),
                ],
            )?;
        }
    }
    Ok(())
}

#[test]
fn non_default_values_exist_for_every_chart_with_values() {
    for chart in CHARTS {
        let has_values = repo_root()
            .join("charts")
            .join(chart)
            .join("values.yaml")
            .is_file();
        assert_eq!(
            has_values,
            values_file(chart).is_file(),
            "{chart}: every chart with values.yaml needs non-default values in tests/charts/values/"
        );
    }
}

#[test]
fn rendered_manifests_pass_kubernetes_validate_strict() -> Result<()> {
    let tools = Tools::new()?;
    let dir = tempfile::tempdir()?;
    for chart in CHARTS {
        let mut variants = vec![("default", None)];
        let values = values_file(chart);
        if values.is_file() {
            variants.push(("non-default", Some(values)));
        }
        for (label, values) in variants {
            let text = template(&tools, chart, values.as_deref(), &[])?;
            let docs = documents(&text)?;
            ensure!(!docs.is_empty(), "{chart} ({label}) renders nothing");
            let file = dir.path().join(format!("{chart}-{label}.yaml"));
            std::fs::write(&file, &text)?;
            if let Some(report) = tools.validate_strict(&file)? {
                bail!("kubernetes-validate --strict rejected {chart} ({label}):\n{report}");
            }
        }
    }
    Ok(())
}

#[test]
fn service_pods_are_hardened_and_probed_on_the_admin_port() -> Result<()> {
    let tools = Tools::new()?;
    for chart in SERVICE_CHARTS {
        for values in [None, Some(values_file(chart))] {
            let docs = render(&tools, chart, values.as_deref(), &[])?;
            let deployments = of_kind(&docs, "Deployment");
            ensure!(deployments.len() == 1, "{chart}: one Deployment expected");
            let d = deployments[0];
            let pod = &d["spec"]["template"]["spec"];
            let c = container(d);
            let ctx = format!("{chart} ({values:?})");
            ensure!(
                pod["securityContext"]["runAsNonRoot"] == true,
                "{ctx}: runAsNonRoot"
            );
            ensure!(
                pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault",
                "{ctx}: seccomp"
            );
            let sc = &c["securityContext"];
            ensure!(
                sc["readOnlyRootFilesystem"] == true,
                "{ctx}: readOnlyRootFilesystem"
            );
            ensure!(
                sc["allowPrivilegeEscalation"] == false,
                "{ctx}: allowPrivilegeEscalation"
            );
            ensure!(sc["runAsNonRoot"] == true, "{ctx}: container runAsNonRoot");
            ensure!(
                sc["capabilities"]["drop"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|c| c == "ALL")),
                "{ctx}: capabilities.drop ALL"
            );
            ensure!(
                c["resources"]["requests"].is_object(),
                "{ctx}: resource requests"
            );
            ensure!(
                c["resources"]["limits"].is_object(),
                "{ctx}: resource limits"
            );
            ensure!(
                c["livenessProbe"]["httpGet"]["path"] == "/healthz",
                "{ctx}: liveness"
            );
            ensure!(
                c["readinessProbe"]["httpGet"]["path"] == "/readyz",
                "{ctx}: readiness"
            );
            ensure!(
                c["livenessProbe"]["httpGet"]["port"] == "admin",
                "{ctx}: liveness port"
            );
            let admin_port = c["ports"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["name"] == "admin"))
                .map(|p| p["containerPort"].clone())
                .context("admin port")?;
            let admin_flag = format!("--admin-addr=0.0.0.0:{admin_port}");
            ensure!(args(d).contains(&admin_flag), "{ctx}: {admin_flag} missing");
            // The metrics Service keeps the admin port (probes, /version; /metrics without
            // secure metrics); its `metrics` port is tests/charts/tests/secure_metrics.rs's.
            let metrics = docs
                .iter()
                .find(|s| {
                    s["kind"] == "Service"
                        && s["metadata"]["name"]
                            .as_str()
                            .is_some_and(|n| n.ends_with("-metrics"))
                })
                .with_context(|| format!("{ctx}: metrics Service"))?;
            ensure!(
                metrics["spec"]["ports"].as_array().is_some_and(|p| p
                    .iter()
                    .any(|p| p["name"] == "admin" && p["targetPort"] == "admin")),
                "{ctx}: metrics Service admin port"
            );
        }
    }
    Ok(())
}

/// The rights of secure metrics (docs/metrics.md#secure-metrics): the TokenReview and the
/// SubjectAccessReview of each scrape, in the ClusterRole `<release>-<namespace>-metrics-auth`.
const REVIEWS: [&str; 2] = [
    "cluster authentication.k8s.io/tokenreviews create",
    "cluster authorization.k8s.io/subjectaccessreviews create",
];

#[test]
fn rbac_matches_the_architecture_table() -> Result<()> {
    let tools = Tools::new()?;
    let read = ["get", "list", "watch"];
    let mut observer = BTreeSet::new();
    for (group, resources) in [
        // No Pods, no DaemonSets: nothing in the observer reads them (its pod facts come from
        // EndpointSlices; the node agent's DaemonSet is read in that agent's namespace only).
        ("", &["services", "configmaps"][..]),
        ("discovery.k8s.io", &["endpointslices"][..]),
        ("apps", &["deployments", "statefulsets", "replicasets"][..]),
        ("batch", &["jobs", "cronjobs"][..]),
        ("pacto.trianalab.io", &["pactos"][..]),
    ] {
        for resource in resources {
            for verb in read {
                observer.insert(format!("cluster {group}/{resource} {verb}"));
            }
        }
    }
    let mut expected: BTreeMap<&str, BTreeSet<String>> = BTreeMap::from([
        ("pacto-evaluator", BTreeSet::new()),
        ("pacto-contract-resolver", set(&["cluster /secrets get"])),
        ("pacto-observer", observer),
        (
            "pacto-status-writer",
            set(&[
                "cluster pacto.trianalab.io/pactos get",
                "cluster pacto.trianalab.io/pactos list",
                "cluster pacto.trianalab.io/pactos watch",
                "cluster pacto.trianalab.io/pactos/status get",
                "cluster pacto.trianalab.io/pactos/status patch",
                "cluster pacto.trianalab.io/pactos/status update",
                "cluster pacto.trianalab.io/pactos/finalizers update",
                "cluster pacto.trianalab.io/pactorevisions get",
                "cluster pacto.trianalab.io/pactorevisions list",
                "cluster pacto.trianalab.io/pactorevisions watch",
                "cluster pacto.trianalab.io/pactorevisions create",
                "cluster pacto.trianalab.io/pactorevisions update",
                "cluster pacto.trianalab.io/pactorevisions patch",
                "cluster pacto.trianalab.io/pactorevisions delete",
                "cluster pacto.trianalab.io/pactorevisions/status get",
                "cluster pacto.trianalab.io/pactorevisions/status patch",
                "cluster pacto.trianalab.io/pactorevisions/status update",
                "cluster /events create",
                "cluster /events get",
                "cluster /events patch",
                "ns=pacto-operator-system coordination.k8s.io/leases create",
                "ns=pacto-operator-system coordination.k8s.io/leases get name=pacto-status-writer",
                "ns=pacto-operator-system coordination.k8s.io/leases update name=pacto-status-writer",
                "ns=pacto-operator-system coordination.k8s.io/leases patch name=pacto-status-writer",
            ]),
        ),
    ]);
    // Secure metrics (on by default): every service reviews each scrape.
    for want in expected.values_mut() {
        want.extend(set(&REVIEWS));
    }
    for (chart, want) in &expected {
        let docs = render(&tools, chart, None, &[])?;
        let got = permissions(&docs);
        ensure!(
            &got == want,
            "{chart}: RBAC differs from docs/design/architecture.md#kubernetes-access\n  extra:   {:?}\n  missing: {:?}",
            got.difference(want).collect::<Vec<_>>(),
            want.difference(&got).collect::<Vec<_>>()
        );
        // Every binding binds the chart's own ServiceAccount and nothing else.
        for binding in docs
            .iter()
            .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
        {
            let subjects = binding["subjects"].as_array().context("subjects")?;
            ensure!(subjects.len() == 1, "{chart}: {}", object_key(binding));
            ensure!(subjects[0]["kind"] == "ServiceAccount" && subjects[0]["name"] == *chart);
        }
    }
    // Only the resolver may read Secrets at all, and only with get.
    for chart in SERVICE_CHARTS {
        let docs = render(&tools, chart, None, &[])?;
        let secret_rights: Vec<String> = permissions(&docs)
            .into_iter()
            .filter(|p| p.contains("/secrets "))
            .collect();
        if *chart == "pacto-contract-resolver" {
            ensure!(secret_rights == vec!["cluster /secrets get".to_owned()]);
        } else {
            ensure!(
                secret_rights.is_empty(),
                "{chart} may read Secrets: {secret_rights:?}"
            );
        }
        // Only the status-writer writes (a review is a question, not a write).
        if *chart != "pacto-status-writer" {
            let writes: Vec<String> = permissions(&docs)
                .into_iter()
                .filter(|p| !REVIEWS.contains(&p.as_str()))
                .filter(|p| !(p.ends_with(" get") || p.ends_with(" list") || p.ends_with(" watch")))
                .collect();
            ensure!(writes.is_empty(), "{chart} may write: {writes:?}");
        }
    }
    Ok(())
}

#[test]
fn a_namespace_selector_adds_only_the_right_to_list_and_watch_namespaces() -> Result<()> {
    let tools = Tools::new()?;
    for chart in ["pacto-observer", "pacto-status-writer"] {
        let plain = permissions(&render(&tools, chart, None, &[])?);
        let scoped_docs = render(
            &tools,
            chart,
            None,
            &["controller.namespaceSelector=audit=on,controller.excludeNamespaces={kube-system}"],
        )?;
        let scoped = permissions(&scoped_docs);
        let added: BTreeSet<String> = scoped.difference(&plain).cloned().collect();
        ensure!(
            added == set(&["cluster /namespaces list", "cluster /namespaces watch"]),
            "{chart}: {added:?}"
        );
        ensure!(plain.is_subset(&scoped), "{chart}: a right went away");
        let args = of_kind(&scoped_docs, "Deployment")
            .first()
            .and_then(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].as_array())
            .cloned()
            .context("args")?;
        for flag in [
            "--namespace-selector=audit=on",
            "--exclude-namespaces=kube-system",
        ] {
            ensure!(
                args.iter().any(|a| a.as_str() == Some(flag)),
                "{chart}: no {flag} in {args:?}"
            );
        }
        // An exclusion list alone needs no right.
        let excluded = permissions(&render(
            &tools,
            chart,
            None,
            &["controller.excludeNamespaces={kube-system}"],
        )?);
        ensure!(excluded == plain, "{chart}");
    }
    Ok(())
}

#[test]
fn evaluator_has_no_kubernetes_access_and_no_egress() -> Result<()> {
    let tools = Tools::new()?;
    // Secure metrics (the default) are its one use of the API: the reviews' ClusterRole and
    // binding, the token, and egress to DNS and the API server only.
    let docs = render(&tools, "pacto-evaluator", None, &[])?;
    ensure!(
        permissions(&docs) == set(&REVIEWS),
        "{:?}",
        permissions(&docs)
    );
    ensure!(of_kind(&docs, "Role").is_empty() && of_kind(&docs, "RoleBinding").is_empty());
    ensure!(
        of_kind(&docs, "Deployment")[0]["spec"]["template"]["spec"]["automountServiceAccountToken"]
            == true
    );
    let egress_ports: BTreeSet<String> = of_kind(&docs, "NetworkPolicy")[0]["spec"]["egress"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|rule| rule["ports"].as_array().cloned().unwrap_or_default())
        .map(|p| p["port"].to_string())
        .collect();
    ensure!(
        egress_ports == set(&["53", "443", "6443"]),
        "evaluator egress with secure metrics: {egress_ports:?}"
    );
    // Without them: nothing at all.
    let docs = render(&tools, "pacto-evaluator", None, &["metrics.secure=false"])?;
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        ensure!(
            of_kind(&docs, kind).is_empty(),
            "the evaluator renders a {kind}"
        );
    }
    let sa = of_kind(&docs, "ServiceAccount");
    ensure!(sa.len() == 1 && sa[0]["automountServiceAccountToken"] == false);
    let d = of_kind(&docs, "Deployment")[0];
    ensure!(d["spec"]["template"]["spec"]["automountServiceAccountToken"] == false);
    let np = of_kind(&docs, "NetworkPolicy");
    ensure!(np.len() == 1, "one NetworkPolicy");
    ensure!(
        np[0]["spec"]["egress"] == serde_json::json!([]),
        "evaluator egress must be empty"
    );
    ensure!(
        np[0]["spec"]["policyTypes"] == serde_json::json!(["Ingress", "Egress"]),
        "both directions are policed"
    );
    // gRPC ingress only from the status-writer.
    let grpc_from = &np[0]["spec"]["ingress"][0]["from"];
    ensure!(
        grpc_from[0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
            == "status-writer"
            && grpc_from.as_array().map(Vec::len) == Some(1),
        "evaluator gRPC ingress: {grpc_from}"
    );
    Ok(())
}

#[test]
fn troubleshooting_values_reach_flags_and_rbac() -> Result<()> {
    let tools = Tools::new()?;
    let docs = render(&tools, "pacto-observer", None, &[])?;
    let d = of_kind(&docs, "Deployment")[0];
    let a = args(d);
    for flag in [
        "--enable-probing",
        "--enable-metrics-observation",
        "--interface-name-match-discovery",
    ] {
        ensure!(!a.iter().any(|x| x == flag), "{flag} on by default");
    }
    ensure!(
        !permissions(&docs)
            .iter()
            .any(|p| p.contains("monitoring.coreos.com")),
        "ServiceMonitor access without controller.enableMetricsObservation"
    );

    let docs = render(
        &tools,
        "pacto-observer",
        None,
        &[
            "controller.enableProbing=true",
            "controller.enableMetricsObservation=true",
            "controller.stabilizationWindow=3m",
            "controller.watchNamespace=",
            "nodeAgent.enabled=true",
        ],
    )?;
    let a = args(of_kind(&docs, "Deployment")[0]);
    for flag in [
        "--enable-probing",
        "--enable-metrics-observation",
        "--stabilization-window=3m",
    ] {
        ensure!(a.iter().any(|x| x == flag), "{flag} missing from {a:?}");
    }
    let perms = permissions(&docs);
    for p in [
        "cluster monitoring.coreos.com/servicemonitors get",
        "cluster monitoring.coreos.com/servicemonitors list",
        "cluster monitoring.coreos.com/servicemonitors watch",
        "cluster monitoring.coreos.com/podmonitors get",
        "cluster monitoring.coreos.com/podmonitors list",
        "cluster monitoring.coreos.com/podmonitors watch",
        "ns=pacto-node-agent pacto.trianalab.io/noderuntimeobservations watch",
        "ns=pacto-node-agent coordination.k8s.io/leases get",
        // Which nodes the agent DaemonSet covers by design.
        "ns=pacto-node-agent apps/daemonsets list",
        "ns=pacto-node-agent apps/daemonsets watch",
        "cluster /nodes get",
        "cluster /nodes list",
        "cluster /nodes watch",
    ] {
        ensure!(perms.contains(p), "{p} missing: {perms:?}");
    }
    // Node agents may reach the observer's gRPC port from their namespace.
    let np = of_kind(&docs, "NetworkPolicy")[0];
    ensure!(
        np["spec"]["ingress"][0]["from"]
            .as_array()
            .is_some_and(|f| f.iter().any(|p| {
                p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    == "pacto-node-agent"
            })),
        "node-agent ingress missing"
    );

    // Watch namespace: Role in that namespace, not a ClusterRole.
    for chart in [
        "pacto-observer",
        "pacto-contract-resolver",
        "pacto-status-writer",
    ] {
        let docs = render(&tools, chart, None, &["controller.watchNamespace=team-a"])?;
        let perms = permissions(&docs);
        ensure!(
            !perms
                .iter()
                .any(|p| p.starts_with("cluster ") && !REVIEWS.contains(&p.as_str())),
            "{chart}: cluster-wide rights despite watchNamespace: {perms:?}"
        );
        ensure!(
            perms.iter().any(|p| p.starts_with("ns=team-a ")),
            "{chart}: {perms:?}"
        );
    }

    // Observer with node evidence and a watch namespace: the two system Services by name (cluster
    // DNS and the API server, left out of undeclared peers) and their EndpointSlices, nothing more.
    let docs = render(
        &tools,
        "pacto-observer",
        None,
        &["controller.watchNamespace=team-a", "nodeAgent.enabled=true"],
    )?;
    let perms = permissions(&docs);
    for p in [
        "ns=kube-system /services get name=kube-dns",
        "ns=kube-system discovery.k8s.io/endpointslices list",
        "ns=default /services get name=kubernetes",
        "ns=default discovery.k8s.io/endpointslices list",
    ] {
        ensure!(perms.contains(p), "{p} missing: {perms:?}");
    }
    ensure!(
        !perms
            .iter()
            .any(|p| p.starts_with("ns=kube-system /services list")
                || p.starts_with("ns=default /services list")),
        "{perms:?}"
    );
    let docs = render(
        &tools,
        "pacto-observer",
        None,
        &["controller.watchNamespace=team-a"],
    )?;
    ensure!(
        !permissions(&docs)
            .iter()
            .any(|p| p.starts_with("ns=kube-system") || p.starts_with("ns=default")),
        "system reads without nodeAgent.enabled"
    );
    ensure!(
        !permissions(&docs).iter().any(|p| p.contains("/nodes ")),
        "Node reads without nodeAgent.enabled"
    );

    // Resolver: insecure registries; status-writer: check interval, node agent namespace labels.
    let docs = render(
        &tools,
        "pacto-contract-resolver",
        None,
        &["insecureRegistries={a:5000,b}"],
    )?;
    ensure!(
        args(of_kind(&docs, "Deployment")[0])
            .contains(&"--insecure-registries=a:5000,b".to_owned())
    );
    let docs = render(
        &tools,
        "pacto-status-writer",
        None,
        &[
            "controller.stabilizationWindow=90s",
            "nodeAgent.enabled=true",
            "nodeAgent.namespace=agents",
        ],
    )?;
    let a = args(of_kind(&docs, "Deployment")[0]);
    ensure!(
        a.contains(&"--stabilization-window=90s".to_owned()),
        "{a:?}"
    );
    ensure!(
        permissions(&docs).contains("cluster /namespaces patch name=agents"),
        "status-writer cannot label the agent namespace"
    );
    Ok(())
}

#[test]
fn tls_modes_mount_or_issue_the_identity_certificate() -> Result<()> {
    let tools = Tools::new()?;
    // cert-manager (default): a Certificate whose first SAN is the identity, plus Service names.
    let docs = render(&tools, "pacto-evaluator", None, &[])?;
    let cert = of_kind(&docs, "Certificate");
    ensure!(cert.len() == 1, "one Certificate");
    let dns: Vec<&str> = cert[0]["spec"]["dnsNames"]
        .as_array()
        .context("dnsNames")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        dns == [
            "evaluator.pacto.svc",
            "pacto-evaluator",
            "pacto-evaluator.pacto-operator-system",
            "pacto-evaluator.pacto-operator-system.svc",
            "pacto-evaluator.pacto-operator-system.svc.cluster.local"
        ],
        "{dns:?}"
    );
    ensure!(cert[0]["spec"]["issuerRef"]["name"] == "pacto-ca");
    ensure!(cert[0]["spec"]["issuerRef"]["kind"] == "Issuer");
    // The identity peers admit: the URI SAN of its ServiceAccount (docs/design/identity.md).
    ensure!(
        cert[0]["spec"]["uris"]
            == serde_json::json!(["spiffe://pacto/ns/pacto-operator-system/sa/pacto-evaluator"]),
        "{}",
        cert[0]["spec"]
    );
    let d = of_kind(&docs, "Deployment")[0];
    let a = args(d);
    ensure!(a.contains(&"--tls-cert=/etc/pacto/tls/tls.crt".to_owned()));
    // By default only the status-writer's URI identity may call (no bare DNS name).
    ensure!(
        a.contains(
            &"--allowed-identities=spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer"
                .to_owned()
        ),
        "{a:?}"
    );
    // Another trust domain changes both the URI SAN and the allow-list.
    let docs = render(
        &tools,
        "pacto-contract-resolver",
        None,
        &["tls.trustDomain=corp.example"],
    )?;
    ensure!(
        of_kind(&docs, "Certificate")[0]["spec"]["uris"]
            == serde_json::json!([
                "spiffe://corp.example/ns/pacto-operator-system/sa/pacto-contract-resolver"
            ])
    );
    ensure!(
        args(of_kind(&docs, "Deployment")[0]).contains(
            &"--allowed-identities=spiffe://corp.example/ns/pacto-operator-system/sa/pacto-status-writer"
                .to_owned()
        )
    );
    ensure!(
        d["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .is_some_and(|v| v
                .iter()
                .any(|v| v["secret"]["secretName"] == "pacto-evaluator-tls"))
    );
    // The status-writer's certificate is a client certificate carrying only its identity (with
    // secure metrics, on by default, it also serves: tests/charts/tests/secure_metrics.rs).
    let docs = render(
        &tools,
        "pacto-status-writer",
        None,
        &["metrics.secure=false"],
    )?;
    let cert = of_kind(&docs, "Certificate")[0];
    ensure!(cert["spec"]["dnsNames"] == serde_json::json!(["status-writer.pacto.svc"]));
    ensure!(
        cert["spec"]["uris"]
            == serde_json::json!([
                "spiffe://pacto/ns/pacto-operator-system/sa/pacto-status-writer"
            ])
    );
    ensure!(
        !cert["spec"]["usages"]
            .as_array()
            .is_some_and(|u| u.iter().any(|u| u == "server auth"))
    );
    // existing-secret: no Certificate, the named Secret is mounted.
    let docs = render(
        &tools,
        "pacto-observer",
        None,
        &["tls.mode=existing-secret", "tls.existingSecret=mine"],
    )?;
    ensure!(of_kind(&docs, "Certificate").is_empty());
    ensure!(
        of_kind(&docs, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["secret"]["secretName"] == "mine"))
    );
    // insecure: --insecure and no TLS volume.
    let docs = render(&tools, "pacto-observer", None, &["tls.mode=insecure"])?;
    let a = args(of_kind(&docs, "Deployment")[0]);
    ensure!(a.contains(&"--insecure".to_owned()) && !a.iter().any(|x| x.starts_with("--tls-")));
    Ok(())
}

#[test]
fn schemas_reject_unsafe_or_unknown_values() -> Result<()> {
    let tools = Tools::new()?;
    for (chart, set, needle) in [
        (
            "pacto-evaluator",
            "securityContext.runAsNonRoot=false",
            "runAsNonRoot",
        ),
        (
            "pacto-evaluator",
            "securityContext.readOnlyRootFilesystem=false",
            "readOnlyRootFilesystem",
        ),
        ("pacto-observer", "tls.mode=plain", "mode"),
        (
            "pacto-observer",
            "tls.mode=existing-secret",
            "existingSecret",
        ),
        (
            "pacto-observer",
            "controller.enableProbing=yes",
            "enableProbing",
        ),
        (
            "pacto-observer",
            "controller.stabilizationWindow=2 minutes",
            "stabilizationWindow",
        ),
        (
            "pacto-contract-resolver",
            "insecureRegistries={http://x}",
            "insecureRegistries",
        ),
        (
            "pacto-status-writer",
            "controller.stabilizationWindow=five",
            "stabilizationWindow",
        ),
        ("pacto-status-writer", "unknownKey=1", "unknownKey"),
        (
            "pacto-status-writer",
            "evidence.url=http://evidence:8686",
            "keySecret",
        ),
        ("pacto-status-writer", "evidence.url=evidence:8686", "url"),
        ("pacto-pki", "ca.validityDays=forever", "validityDays"),
        (
            "pacto-evaluator",
            "tls.trustDomain=Bad/Domain",
            "trustDomain",
        ),
    ] {
        let out = tools.output(
            "helm",
            ["template", chart, &format!("charts/{chart}"), "--set", set],
        )?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(!out.status.success(), "{chart} accepted --set {set}");
        ensure!(
            stderr.contains(needle),
            "{chart} --set {set}: error does not name {needle}: {stderr}"
        );
    }
    Ok(())
}

#[test]
fn alert_rules_are_valid_promql_over_real_metric_names() -> Result<()> {
    let tools = Tools::new()?;
    let promtool = Path::new("/usr/bin/promtool");
    ensure!(
        promtool.is_file(),
        "promtool not found: run scripts/install-deps.sh (apt-get install -y prometheus)"
    );
    let known = known_metric_names()?;
    let dir = tempfile::tempdir()?;
    for chart in SERVICE_CHARTS {
        let docs = render(
            &tools,
            chart,
            None,
            &["metrics.prometheusRule.enabled=true"],
        )?;
        let rules = of_kind(&docs, "PrometheusRule");
        ensure!(rules.len() == 1, "{chart}: one PrometheusRule");
        let file = dir.path().join(format!("{chart}.rules.yaml"));
        std::fs::write(&file, serde_json::to_string(&rules[0]["spec"])?)?;
        let mut cmd = std::process::Command::new(promtool);
        cmd.args(["check", "rules"]).arg(&file);
        pacto_chart_tests::run(&mut cmd)?;
        for rule in rules[0]["spec"]["groups"][0]["rules"]
            .as_array()
            .context("rules")?
        {
            let expr = rule["expr"].as_str().context("expr")?;
            for name in metric_names_in(expr) {
                ensure!(
                    known.contains(&name),
                    "{chart}: alert {} uses {name}, which no service defines",
                    rule["alert"]
                );
            }
        }
    }
    Ok(())
}

/// Metric names in a PromQL expression (identifiers starting with `pacto_`, and `up`).
fn metric_names_in(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(pos) = expr[i..].find("pacto_") {
        let start = i + pos;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        if boundary {
            out.insert(expr[start..end].to_owned());
        }
        i = end;
    }
    out
}

/// Metric names the code defines (string literals `"pacto_…"` in services/*/src).
fn known_metric_names() -> Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    let services = repo_root().join("services");
    let mut stack = vec![services];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let path = entry?.path();
            if path.is_dir() {
                if !path.ends_with("target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)?;
                for piece in text.split('"').skip(1).step_by(2) {
                    if piece.starts_with("pacto_")
                        && piece
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                    {
                        names.insert(piece.to_owned());
                    }
                }
            }
        }
    }
    if names.len() < 10 {
        bail!("found only {names:?} in services/: is the tree complete?");
    }
    Ok(names)
}

/// The Grafana dashboard the status-writer chart ships (`dashboards/pacto.json`).
fn dashboard_file() -> Result<Value> {
    let path = repo_root().join("charts/pacto-status-writer/dashboards/pacto.json");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// Every PromQL expression of a dashboard: the panels' (and rows' nested panels') targets and the
/// query variables, as `(where, expression)`.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    fn panels(list: &Value, out: &mut Vec<(String, String)>) {
        for panel in list.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("(untitled)");
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((format!("panel {title:?}"), expr.to_owned()));
                }
            }
            panels(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&dashboard["panels"], &mut out);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = &variable["query"];
        if let Some(expr) = query["query"].as_str().or_else(|| query.as_str())
            && variable["type"] == "query"
        {
            out.push((format!("variable {}", variable["name"]), expr.to_owned()));
        }
    }
    out
}

/// `name`, or the histogram series it is a `_bucket`/`_sum`/`_count` of, when `known` has it.
fn known_series(name: &str, known: &BTreeSet<String>) -> bool {
    known.contains(name)
        || ["_bucket", "_sum", "_count"].iter().any(|s| {
            name.strip_suffix(s)
                .is_some_and(|base| known.contains(base))
        })
}

/// What is wrong with a dashboard's queries: each metric not defined in the code (`in_code`) or
/// not documented (`documented`), named with the panel that queries it.
fn dashboard_metric_problems(
    dashboard: &Value,
    in_code: &BTreeSet<String>,
    documented: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (place, expr) in dashboard_queries(dashboard) {
        for name in metric_names_in(&expr) {
            if !known_series(&name, in_code) {
                problems.push(format!("{place} queries {name}, which no service defines"));
            } else if !known_series(&name, documented) {
                problems.push(format!(
                    "{place} queries {name}, which docs/metrics.md does not document"
                ));
            }
        }
    }
    problems
}

/// Metric names docs/metrics.md documents (`pacto_…` in backticks).
fn documented_metric_names() -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(repo_root().join("docs/metrics.md"))?;
    Ok(text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.starts_with("pacto_"))
        .map(str::to_owned)
        .collect())
}

#[test]
fn the_grafana_dashboard_is_json_over_real_documented_metrics() -> Result<()> {
    let dashboard = dashboard_file()?;
    ensure!(
        dashboard["uid"].as_str().is_some_and(|u| !u.is_empty())
            && dashboard["title"].as_str().is_some_and(|t| !t.is_empty()),
        "the dashboard has a uid and a title"
    );
    let queries = dashboard_queries(&dashboard);
    ensure!(
        queries.len() >= 10,
        "only {} queries: {queries:?}",
        queries.len()
    );
    let mut ids = BTreeSet::new();
    for panel in dashboard["panels"].as_array().context("panels")? {
        let id = panel["id"].as_u64().context("a panel without an id")?;
        ensure!(ids.insert(id), "panel id {id} is used twice");
        ensure!(
            panel["gridPos"]["w"]
                .as_u64()
                .is_some_and(|w| w > 0 && w <= 24),
            "panel {} has no gridPos within 24 columns",
            panel["title"]
        );
    }
    let problems = dashboard_metric_problems(
        &dashboard,
        &known_metric_names()?,
        &documented_metric_names()?,
    );
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    // The panels the dashboard promises (issue 20).
    let all: String = queries.iter().map(|(_, e)| e.as_str()).collect();
    for metric in [
        "pacto_contract_status",
        "pacto_status_writer_reconcile_seconds_bucket",
        "pacto_status_writer_backend_failures_total",
        "pacto_resolver_resolves_total",
        "pacto_observer_api_errors_total",
        "pacto_node_agent_reports_acked_total",
        "pacto_observer_node_agents_connected",
    ] {
        ensure!(all.contains(metric), "no panel queries {metric}");
    }
    Ok(())
}

#[test]
fn a_dashboard_query_over_an_unknown_metric_is_named() {
    let dashboard = serde_json::json!({
        "panels": [{"type": "row", "title": "r", "panels": [{"title": "Latency", "targets": [
            {"expr": "histogram_quantile(0.9, rate(pacto_a_seconds_bucket[5m])) + pacto_typo_total"}
        ]}]}],
        "templating": {"list": [{"name": "ns", "type": "query", "query": {"query": "label_values(pacto_b, namespace)"}}]}
    });
    let known = set(&["pacto_a_seconds", "pacto_b"]);
    assert_eq!(
        dashboard_metric_problems(&dashboard, &known, &set(&["pacto_a_seconds"])),
        [
            "panel \"Latency\" queries pacto_typo_total, which no service defines",
            "variable \"ns\" queries pacto_b, which docs/metrics.md does not document",
        ]
    );
}

#[test]
fn the_status_writer_producer_mode_mounts_the_key_and_opens_egress_only_when_on() -> Result<()> {
    let tools = Tools::new()?;
    let chart = "pacto-status-writer";
    let off = render(&tools, chart, None, &[])?;
    let deployment = of_kind(&off, "Deployment")[0];
    ensure!(
        !args(deployment).iter().any(|a| a.starts_with("--evidence")),
        "no evidence flag by default: {:?}",
        args(deployment)
    );
    ensure!(
        !deployment.to_string().contains("evidence-key"),
        "no key volume by default"
    );
    let on = render(
        &tools,
        chart,
        None,
        &[
            "evidence.url=http://evidence.pacto-operator-system.svc:8686",
            "evidence.keySecret=sw-evidence",
            "evidence.keyFile=sw-2026.key",
            "evidence.queueSize=50",
        ],
    )?;
    let deployment = of_kind(&on, "Deployment")[0];
    let flags = args(deployment);
    for want in [
        "--evidence-url=http://evidence.pacto-operator-system.svc:8686",
        "--evidence-key=/etc/pacto/evidence/sw-2026.key",
        "--evidence-producer=pacto-status-writer",
        "--evidence-queue-size=50",
    ] {
        ensure!(flags.iter().any(|a| a == want), "{want} missing: {flags:?}");
    }
    let pod = &deployment["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "evidence-key"))
        .context("the key volume")?;
    ensure!(
        volume["secret"]["secretName"] == "sw-evidence"
            && volume["secret"]["items"][0]["key"] == "sw-2026.key"
            // as written in the template (the YAML reader keeps the octal literal's text)
            && (volume["secret"]["defaultMode"] == "0440" || volume["secret"]["defaultMode"] == 0o440),
        "only the key of the Secret, group-readable: {volume}"
    );
    let mount = container(deployment)["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == "evidence-key"))
        .context("the key mount")?;
    ensure!(
        mount["mountPath"] == "/etc/pacto/evidence" && mount["readOnly"] == true,
        "{mount}"
    );
    let policy = of_kind(&on, "NetworkPolicy")[0];
    ensure!(
        policy["spec"]["egress"]
            .as_array()
            .is_some_and(|rules| rules.iter().any(|r| r["ports"][0]["port"] == 8686)),
        "egress to the Evidence Server: {}",
        policy["spec"]["egress"]
    );
    Ok(())
}

#[test]
fn the_status_writer_chart_renders_the_dashboard_configmap_only_when_enabled() -> Result<()> {
    let tools = Tools::new()?;
    let chart = "pacto-status-writer";
    let dashboards = |docs: &[Value]| -> Vec<Value> {
        of_kind(docs, "ConfigMap")
            .into_iter()
            .filter(|d| d["data"].get("pacto.json").is_some())
            .cloned()
            .collect()
    };
    ensure!(
        dashboards(&render(&tools, chart, None, &[])?).is_empty(),
        "the dashboard ConfigMap is rendered by default"
    );
    let on = dashboards(&render(
        &tools,
        chart,
        None,
        &["grafanaDashboard.enabled=true"],
    )?);
    ensure!(
        on.len() == 1,
        "one dashboard ConfigMap when enabled: {on:?}"
    );
    let map = &on[0];
    ensure!(
        map["metadata"]["labels"]["grafana_dashboard"] == "1",
        "labelled for the sidecar: {}",
        map["metadata"]
    );
    ensure!(map["metadata"]["namespace"] == NAMESPACE);
    let shipped: Value = serde_json::from_str(map["data"]["pacto.json"].as_str().context("data")?)
        .context("the ConfigMap's pacto.json is not JSON")?;
    ensure!(
        shipped == dashboard_file()?,
        "the ConfigMap holds dashboards/pacto.json"
    );
    let custom = dashboards(&render(
        &tools,
        chart,
        None,
        &[
            "grafanaDashboard.enabled=true",
            "grafanaDashboard.label=dashboards",
            "grafanaDashboard.labelValue=pacto",
            "grafanaDashboard.namespace=monitoring",
            "grafanaDashboard.annotations.grafana_folder=Pacto",
        ],
    )?);
    let meta = &custom[0]["metadata"];
    ensure!(
        meta["labels"]["dashboards"] == "pacto"
            && meta["labels"].get("grafana_dashboard").is_none()
            && meta["namespace"] == "monitoring"
            && meta["annotations"]["grafana_folder"] == "Pacto",
        "label, value, namespace and annotations are the values': {meta}"
    );
    Ok(())
}

#[test]
fn metric_name_extraction_respects_identifier_boundaries() {
    let names = metric_names_in("sum(rate(pacto_a_total{x=\"pacto_b\"}[5m])) / xpacto_c + pacto_d");
    assert_eq!(names, set(&["pacto_a_total", "pacto_b", "pacto_d"]));
}

/// Dotted identifiers in an alert text (`grpc.allowedIdentities`, `docs/troubleshooting.md`'s
/// `troubleshooting.md`): runs of `[A-Za-z0-9_]` segments joined by single dots, starting with a
/// letter, with at least one dot.
fn dotted_names_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let flush = |current: &mut String, out: &mut Vec<String>| {
        let name = current.trim_end_matches('.');
        if name.contains('.') && name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            out.push(name.to_owned());
        }
        current.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || (c == '.' && !current.is_empty()) {
            if c == '.' && current.ends_with('.') {
                flush(&mut current, &mut out);
                continue;
            }
            current.push(c);
        } else {
            flush(&mut current, &mut out);
        }
    }
    flush(&mut current, &mut out);
    out
}

#[test]
fn dotted_name_extraction() {
    assert_eq!(
        dotted_names_in(
            "Check grpc.allowedIdentities and nodeAgent.allowedIdentities. See docs/troubleshooting.md (x.y)."
        ),
        [
            "grpc.allowedIdentities",
            "nodeAgent.allowedIdentities",
            "troubleshooting.md",
            "x.y"
        ]
    );
}

/// Extensions of file names that alert texts mention (not chart values).
const FILE_EXTENSIONS: &[&str] = &["crt", "key", "pem", "md", "yaml", "yml", "json"];

/// Alert summaries and descriptions tell the user which chart value to check: every dotted name
/// in them whose first segment is a top-level key of the chart's values.yaml must be a value
/// that exists there.
#[test]
fn alert_texts_name_only_chart_values_that_exist() -> Result<()> {
    let tools = Tools::new()?;
    for chart in SERVICE_CHARTS {
        let path = repo_root().join("charts").join(chart).join("values.yaml");
        let values: Value = serde_norway::from_str(
            &std::fs::read_to_string(&path).with_context(|| path.display().to_string())?,
        )
        .with_context(|| path.display().to_string())?;
        let docs = render(
            &tools,
            chart,
            None,
            &["metrics.prometheusRule.enabled=true"],
        )?;
        let rules = of_kind(&docs, "PrometheusRule");
        ensure!(rules.len() == 1, "{chart}: one PrometheusRule");
        let mut checked = 0;
        for rule in rules[0]["spec"]["groups"][0]["rules"]
            .as_array()
            .context("rules")?
        {
            let Some(annotations) = rule["annotations"].as_object() else {
                continue;
            };
            for text in annotations.values().filter_map(Value::as_str) {
                for name in dotted_names_in(text) {
                    // File names (`tls.crt`, `troubleshooting.md`) are not values.
                    let extension = name.rsplit('.').next().unwrap_or_default();
                    if FILE_EXTENSIONS.contains(&extension) {
                        continue;
                    }
                    let mut segments = name.split('.');
                    let first = segments.next().unwrap_or_default();
                    if values.get(first).is_none() {
                        continue;
                    }
                    let found = segments.try_fold(&values[first], |node, segment| {
                        node.get(segment).filter(|_| node.is_object())
                    });
                    ensure!(
                        found.is_some(),
                        "{chart}: alert {} names the chart value {name}, which {} does not define",
                        rule["alert"],
                        path.display()
                    );
                    checked += 1;
                }
            }
        }
        ensure!(
            checked > 0 || *chart == "pacto-status-writer",
            "{chart}: no alert text names a chart value (is the extraction broken?)"
        );
    }
    Ok(())
}

/// The node agent's pod and RBAC: the fewest rights (docs/design/node-agent.md#admission).
#[test]
fn node_agent_has_least_privilege() -> Result<()> {
    let tools = Tools::new()?;
    let docs = render(&tools, "pacto-node-agent", None, &[])?;
    let ds = of_kind(&docs, "DaemonSet")[0];
    let pod = &ds["spec"]["template"]["spec"];
    ensure!(pod["hostPID"] == true, "hostPID missing");
    let c = container(ds);
    ensure!(
        c["securityContext"]["privileged"] == false,
        "capabilities mode is the default (tests/charts/tests/node_agent.rs pins it)"
    );
    let a = args(ds);
    for flag in [
        "--node-name=$(NODE_NAME)",
        "--namespace=pacto-operator-system",
        "--btf-path=/sys/kernel/btf/vmlinux",
        "--proc-root=/proc",
        "--cgroup-root=/host/sys/fs/cgroup",
        "--token-path=/var/run/secrets/pacto/observer-token/token",
    ] {
        ensure!(a.iter().any(|x| x == flag), "{flag} missing from {a:?}");
    }
    // Host mounts: BTF and the cgroup file system, read-only; no bpffs, no tracefs.
    let host_paths: BTreeSet<String> = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["hostPath"]["path"].as_str().map(str::to_owned))
        .collect();
    ensure!(
        host_paths == set(&["/sys/kernel/btf", "/sys/fs/cgroup"]),
        "{host_paths:?}"
    );
    for mount in c["volumeMounts"].as_array().into_iter().flatten() {
        ensure!(mount["readOnly"] == true, "writable mount {mount}");
    }
    let audience = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| v["projected"]["sources"].as_array().into_iter().flatten())
        .find_map(|s| s["serviceAccountToken"]["audience"].as_str());
    ensure!(audience == Some("pacto-observer"), "{audience:?}");
    ensure!(
        permissions(&docs)
            == set(&[
                "cluster /pods get",
                "cluster /pods list",
                "cluster /pods watch",
                "ns=pacto-operator-system pacto.trianalab.io/noderuntimeobservations get",
                "ns=pacto-operator-system pacto.trianalab.io/noderuntimeobservations create",
                "ns=pacto-operator-system pacto.trianalab.io/noderuntimeobservations/status get",
                "ns=pacto-operator-system pacto.trianalab.io/noderuntimeobservations/status update",
                "ns=pacto-operator-system pacto.trianalab.io/noderuntimeobservations/status patch",
                "ns=pacto-operator-system coordination.k8s.io/leases get",
                "ns=pacto-operator-system coordination.k8s.io/leases create",
                "ns=pacto-operator-system coordination.k8s.io/leases update",
                "ns=pacto-operator-system coordination.k8s.io/leases patch",
                REVIEWS[0],
                REVIEWS[1],
            ]),
        "{:?}",
        permissions(&docs)
    );

    // The fallback: a privileged container.
    let docs = render(
        &tools,
        "pacto-node-agent",
        None,
        &["securityContext.mode=privileged"],
    )?;
    let sc = &container(of_kind(&docs, "DaemonSet")[0])["securityContext"];
    ensure!(sc["privileged"] == true, "{sc}");

    // The observer reviews the agents' tokens only when the node agent is on (secure metrics,
    // which review scrapes, off).
    let observer = |sets: &[&str]| -> Result<BTreeSet<String>> {
        let sets: Vec<&str> = sets
            .iter()
            .copied()
            .chain(["metrics.secure=false"])
            .collect();
        Ok(permissions(&render(&tools, "pacto-observer", None, &sets)?))
    };
    let review = "cluster authentication.k8s.io/tokenreviews create";
    ensure!(
        !observer(&[])?.contains(review),
        "TokenReview without the node agent"
    );
    ensure!(
        observer(&["nodeAgent.enabled=true"])?.contains(review),
        "no TokenReview with nodeAgent.enabled"
    );
    Ok(())
}

/// Issue 19, "Replicas and load" (docs/design/scaling.md#replicas-and-client-side-balancing): the
/// three stateless backends run 2 replicas with a PodDisruptionBudget, a default anti-affinity and
/// a headless `<fullname>-peers` Service beside the ClusterIP one; the status-writer stays one
/// replica without them and dials the headless names with the ClusterIP Services' server names.
#[test]
fn backends_run_replicas_with_a_budget_anti_affinity_and_a_headless_service() -> Result<()> {
    let tools = Tools::new()?;
    for chart in [
        "pacto-contract-resolver",
        "pacto-observer",
        "pacto-evaluator",
    ] {
        let docs = render(&tools, chart, None, &[])?;
        let deployment = of_kind(&docs, "Deployment")[0];
        ensure!(deployment["spec"]["replicas"] == 2, "{chart}: 2 replicas");
        let labels = &deployment["spec"]["selector"]["matchLabels"];
        let pdb = of_kind(&docs, "PodDisruptionBudget");
        ensure!(pdb.len() == 1, "{chart}: one PodDisruptionBudget");
        ensure!(
            pdb[0]["spec"]["maxUnavailable"] == 1
                && pdb[0]["spec"]["selector"]["matchLabels"] == *labels,
            "{chart}: {}",
            pdb[0]
        );
        let anti = &deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
        let term = &anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"];
        ensure!(
            term["topologyKey"] == "kubernetes.io/hostname"
                && term["labelSelector"]["matchLabels"] == *labels,
            "{chart}: anti-affinity {anti}"
        );
        let services = of_kind(&docs, "Service");
        let named = |name: String| {
            services
                .iter()
                .find(|s| s["metadata"]["name"] == name.as_str())
        };
        let cluster_ip = named(chart.to_owned()).context("the ClusterIP Service")?;
        ensure!(
            cluster_ip["spec"].get("clusterIP").is_none(),
            "{chart}: the existing Service keeps its cluster IP (immutable on upgrade)"
        );
        let peers = named(format!("{chart}-peers")).context("the headless Service")?;
        ensure!(
            peers["spec"]["clusterIP"] == "None"
                && peers["spec"]["publishNotReadyAddresses"] == false
                && peers["spec"]["selector"] == *labels
                && peers["spec"]["ports"] == cluster_ip["spec"]["ports"],
            "{chart}: {peers}"
        );

        // One replica: no budget (it would block every drain); required or no anti-affinity on
        // request; a user's affinity replaces the default.
        let docs = render(&tools, chart, None, &["replicaCount=1"])?;
        ensure!(
            of_kind(&docs, "PodDisruptionBudget").is_empty(),
            "{chart}: PDB with 1 replica"
        );
        let docs = render(&tools, chart, None, &["podAntiAffinity=required"])?;
        let anti = &of_kind(&docs, "Deployment")[0]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
        ensure!(
            anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"]
                == "kubernetes.io/hostname",
            "{chart}: {anti}"
        );
        let docs = render(&tools, chart, None, &["podAntiAffinity=off"])?;
        ensure!(
            of_kind(&docs, "Deployment")[0]["spec"]["template"]["spec"]
                .get("affinity")
                .is_none(),
            "{chart}: podAntiAffinity=off"
        );
        let docs = render(&tools, chart, None, &["affinity.nodeAffinity.x=y"])?;
        let affinity = &of_kind(&docs, "Deployment")[0]["spec"]["template"]["spec"]["affinity"];
        ensure!(
            affinity.get("podAntiAffinity").is_none() && affinity["nodeAffinity"]["x"] == "y",
            "{chart}: {affinity}"
        );
        let docs = render(&tools, chart, None, &["podDisruptionBudget.enabled=false"])?;
        ensure!(
            of_kind(&docs, "PodDisruptionBudget").is_empty(),
            "{chart}: PDB off"
        );
    }

    let docs = render(&tools, "pacto-status-writer", None, &[])?;
    let deployment = of_kind(&docs, "Deployment")[0];
    ensure!(
        deployment["spec"]["replicas"] == 1,
        "the status-writer stays one writer"
    );
    ensure!(of_kind(&docs, "PodDisruptionBudget").is_empty());
    ensure!(
        deployment["spec"]["template"]["spec"]
            .get("affinity")
            .is_none()
    );
    let args = args(deployment);
    for (flag, backend) in [
        ("resolver", "contract-resolver"),
        ("observer", "observer"),
        ("evaluator", "evaluator"),
    ] {
        for want in [
            format!("--{flag}-addr=pacto-{backend}-peers.{NAMESPACE}.svc:8443"),
            format!("--{flag}-server-name=pacto-{backend}.{NAMESPACE}.svc"),
        ] {
            ensure!(args.contains(&want), "{want} missing from {args:?}");
        }
    }
    // A set address is dialled as it is, its host being the server name.
    let docs = render(
        &tools,
        "pacto-status-writer",
        None,
        &["backends.observer=obs.example:9000"],
    )?;
    let args_set = args_of(&docs);
    ensure!(
        args_set.contains(&"--observer-addr=obs.example:9000".to_owned())
            && !args_set
                .iter()
                .any(|a| a.starts_with("--observer-server-name")),
        "{args_set:?}"
    );
    Ok(())
}

fn args_of(docs: &[Value]) -> Vec<String> {
    args(of_kind(docs, "Deployment")[0])
}
