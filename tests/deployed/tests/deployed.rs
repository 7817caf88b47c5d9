//! The deployed tier: the project as users deploy it, onto a real node (root only; see the crate
//! docs of `pacto-deployed` for when it skips or fails). One node for the whole binary: the
//! scenarios run in order inside one test, each timed, and the node is torn down at the end (or
//! during unwinding when a step fails), checking that the host is restored.

mod agent;
mod metrics;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use pacto_deployed::{
    DEPLOYMENTS, Deployed, IMAGE_HOST, OPERATOR_NAMESPACE, PactoEvent, PodTimeline, RELEASE_PREFIX,
    SAMPLE_HTTP_IMAGE, SERVICES, VerdictWatch, may_run, new_pacto_events, step, timed,
};

const SERVICES_READY: Duration = Duration::from_mins(3);
const VERDICT: Duration = Duration::from_mins(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployed_tier() -> Result<()> {
    if !may_run() {
        return Ok(());
    }
    let tier = Instant::now();
    let deployed = step(
        "node start (control plane, node Ready, CoreDNS Ready)",
        Box::pin(Deployed::start()),
    )
    .await?;
    let t = deployed.node().timings();
    eprintln!(
        "deployed: node phases: control plane {:?}, containerd {:?}, images {:?}, node Ready {:?}, kube-proxy {:?}, CoreDNS Ready {:?}",
        t.control_plane, t.containerd, t.images, t.node_ready, t.kube_proxy, t.coredns_ready
    );

    step(
        "helmfile sync and the four services Ready",
        helmfile_sync_brings_every_service_up(&deployed),
    )
    .await?;

    // Right after the sync: the status-writer subscribed to WatchTargets while the observer was
    // not Ready yet, so this also checks that no endpoint change is lost in that gap.
    step(
        "sample workload: Compliant, NotReady -> NonCompliant after the window, Ready -> Compliant",
        a_real_workload_is_compliant(&deployed),
    )
    .await?;

    // Early, while the services' logs still hold their first lines: at debug level the kubelet
    // rotates the status-writer's container log (10 MiB) within minutes, and `kubectl logs`
    // shows only the current file.
    step(
        "Invalid, Reference, Unknown (EVIDENCE_MISSING); pactorevisions and describe events",
        verdicts_without_a_workload(&deployed),
    )
    .await?;

    step("the guide's kubectl commands", async {
        the_guide_commands_run(&deployed)
    })
    .await?;

    step(
        "observer at 2 replicas (its chart's replicaCount): both Ready, the status-writer balancing over both",
        agent::stream::scale_observer(&deployed, agent::stream::OBSERVER_REPLICAS),
    )
    .await?;

    step(
        "node agent: DaemonSet Ready, observation Running with a real pod's listener, Lease renewed",
        agent::the_agent_sees_real_pods(&deployed),
    )
    .await?;

    step(
        "node evidence: a real pod's interfaces Found by the agent's view (k8s-observer+ebpf)",
        agent::evidence::interfaces_found_by_node_evidence(&deployed),
    )
    .await?;

    step(
        "node evidence: listener closed -> INTERFACE_ABSENT after the window, then 20 flips (p50/p99 printed), reports streamed to both observer replicas",
        agent::evidence::listener_closed_flips_the_status(&deployed),
    )
    .await?;

    step(
        "node evidence: report stream refused (token audience) -> the verdict follows the NodeRuntimeObservation; stream open again",
        agent::evidence::refused_stream_falls_back_to_the_object(&deployed),
    )
    .await?;

    step(
        "node evidence: agent stopped (image missing) -> EVIDENCE_STALE after stale-after; back -> Compliant",
        agent::evidence::agent_stopped_reads_stale_then_recovers(&deployed),
    )
    .await?;

    step(
        "node evidence: a UDP Service port and a hostNetwork pod keep the Kubernetes verdict (Compliant past the window)",
        agent::fleet::udp_and_host_network_keep_the_kubernetes_verdict(&deployed),
    )
    .await?;

    step(
        "node evidence: 20 Pactos Compliant, nudged through both observer replicas: no verdict change",
        agent::fleet::twenty_pactos_balanced_over_the_replicas(&deployed),
    )
    .await?;

    step(
        "node agent: kubectl rollout restart with 20 Compliant Pactos: no verdict change, no Pacto event",
        agent::fleet::agent_rollout_changes_no_verdict(&deployed),
    )
    .await?;

    step(
        "node agent: the node outside the DaemonSet's nodeSelector -> Kubernetes verdicts past stale-after, never EVIDENCE_STALE; restored",
        agent::fleet::excluded_node_keeps_the_kubernetes_verdict(&deployed),
    )
    .await?;

    step(
        "node agent: a listener closed in a real pod leaves the observation",
        agent::a_closed_listener_leaves_the_observation(&deployed),
    )
    .await?;

    step(
        "node agent footprint: RSS and CPU idle and under connection load",
        agent::footprint(&deployed, deployed.image_archives()),
    )
    .await?;

    step(
        "node agent: the admission policy refuses another node's objects and an unbound token",
        async { agent::the_admission_policy_refuses_other_nodes(&deployed) },
    )
    .await?;

    step(
        "node agent: collection Failed (BTF missing) keeps the Lease renewed, COLLECTION_FAILED in the verdict; back to Running",
        agent::collection_failed_keeps_the_heartbeat(&deployed),
    )
    .await?;

    step(
        "node agent: Pod Security restricted refuses the pod; the status-writer restores the labels",
        agent::pod_security_refusal_is_healed(&deployed),
    )
    .await?;

    step(
        "observer back to 1 replica: no verdict change",
        agent::stream::scale_observer(&deployed, 1),
    )
    .await?;

    step("configuration: Compliant, ConfigMap violated -> NonCompliant at once, restored -> Compliant", configuration_on_the_node(&deployed)).await?;

    step(
        "Prometheus scrapes the four metrics Services and the node agent over HTTPS with a token; 401 and 403 without",
        prometheus_scrapes_the_services(&deployed),
    )
    .await?;

    step(
        "metrics scraped on a real pod: Compliant",
        metrics_scraped(&deployed),
    )
    .await?;

    step(
        "evaluator pod deleted: healed by its Deployment, no verdict lost",
        a_killed_service_pod_is_healed(&deployed),
    )
    .await?;

    step("helmfile sync with a value the schema refuses", async {
        a_refused_value_fails_helmfile_sync(&deployed)
    })
    .await?;

    step(
        "health probed through the Service: Compliant",
        health_probed(&deployed),
    )
    .await?;

    step(
        "helmfile sync (log level) and helm rollback: rolled, no verdict or Pacto event changed",
        upgrade_and_rollback_change_no_verdict(&deployed),
    )
    .await?;

    let started = Instant::now();
    for ns in [VERDICTS_NS, PROBE_NS, CONFIG_NS, agent::WORKLOAD_NS] {
        delete_namespace(&deployed, ns)?;
    }
    timed("scenario namespaces deleted", started);

    step(
        "helmfile destroy",
        helmfile_destroy_leaves_nothing(&deployed),
    )
    .await?;

    let took = deployed.down()?;
    eprintln!("deployed: teardown: {:.1} s", took.as_secs_f64());
    timed("the whole tier", tier);
    Ok(())
}

/// The stabilization window the tier installs with (`controller.stabilizationWindow`, 2 minutes
/// by default), so that an absence is confirmed within the test's deadlines.
const WINDOW: &str = "20s";

/// `helmfile -e local` with the tier's state values (the stabilization window, metrics
/// observation on, the node agent's [`agent::AGENT_VALUES`]) and `extra`, then `command`.
fn sync_args<'a>(extra: &[&'a str], command: &'a str) -> Vec<String> {
    let mut values = vec![
        format!("controller.stabilizationWindow={WINDOW}"),
        "controller.enableMetricsObservation=true".to_owned(),
    ];
    values.extend(extra.iter().map(|v| (*v).to_owned()));
    let mut args: Vec<String> = vec!["-e".into(), "local".into()];
    for v in agent::state_values(&[])
        .into_iter()
        .map(str::to_owned)
        .chain(
            values
                .into_iter()
                .flat_map(|v| ["--state-values-set".to_owned(), v]),
        )
    {
        args.push(v);
    }
    args.push(command.to_owned());
    args
}

/// `helmfile` as [`sync_args`] does, for the release `name` alone (`--selector name=<name>`),
/// with chart values `sets` (`--set`, for that release only).
fn sync_release(d: &Deployed, name: &str, sets: &[&str]) -> Result<()> {
    let mut args = sync_args(&[], "sync");
    args.pop();
    args.extend([
        "--selector".to_owned(),
        format!("name={name}"),
        "sync".to_owned(),
    ]);
    for set in sets {
        args.extend(["--set".to_owned(), (*set).to_owned()]);
    }
    d.helmfile(&args)?;
    Ok(())
}

/// `helmfile -e local sync` of the unmodified charts (environment knobs set: the stabilization
/// window, metrics observation on, and existing-secret TLS; probing is already on in the `local`
/// environment): every service Deployment Available, its pods Ready through the charts' own probes
/// (kubelet runs them), on the real node.
async fn helmfile_sync_brings_every_service_up(d: &Deployed) -> Result<()> {
    // Existing-secret TLS (metrics::TLS_VALUES, part of every helmfile call's state values):
    // mTLS between the services and secure metrics, certificates from the tier's own CA.
    metrics::install_tls(d)?;
    d.helmfile(&sync_args(&[], "sync"))?;
    for service in DEPLOYMENTS {
        d.wait_available(OPERATOR_NAMESPACE, service, SERVICES_READY)
            .await?;
    }
    metrics::install_reader(d)?;
    let pods = d.kubectl_json(&["get", "pods", "-n", OPERATOR_NAMESPACE])?;
    let pods = pods["items"].as_array().cloned().unwrap_or_default();
    ensure!(pods.len() >= SERVICES.len(), "pods: {pods:#?}");
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or("?");
        ensure!(
            pod["spec"]["nodeName"] == "pacto-node",
            "{name} is not on the real node"
        );
        let container = &pod["spec"]["containers"][0];
        ensure!(
            container["readinessProbe"].is_object(),
            "{name} has no readiness probe: the chart must declare one"
        );
        let ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ensure!(ready, "{name} is not Ready: {:#}", pod["status"]);
        ensure!(
            pod["status"]["podIP"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.88.0.")),
            "{name}: no pod IP from the node's CNI: {:#}",
            pod["status"]
        );
        let image = container["image"].as_str().unwrap_or_default();
        ensure!(
            image.starts_with(&format!("{IMAGE_HOST}/{RELEASE_PREFIX}/")),
            "{name} runs {image}, not a released image"
        );
    }
    installed_services_report_the_rehearsed_release(d)
}

/// The rehearsal's promise (docs/upgrade.md): what runs is what was released. Every service's
/// `/version` (admin port, through its metrics Service and the API server's proxy) names the
/// version the rehearsal released and the commit it was built from.
fn installed_services_report_the_rehearsed_release(d: &Deployed) -> Result<()> {
    // The commit the rehearsal released (HEAD when it began; a later commit does not matter).
    let head = d.released_commit().to_owned();
    for service in SERVICES {
        let component = service.trim_start_matches("pacto-");
        let released = d
            .released()
            .iter()
            .find(|r| r.name == component)
            .with_context(|| format!("{component} was not released by the rehearsal"))?;
        let raw = d.kubectl(&[
            "get",
            "--raw",
            &format!(
                "/api/v1/namespaces/{OPERATOR_NAMESPACE}/services/{service}-metrics:admin/proxy/version"
            ),
        ])?;
        let v: serde_json::Value =
            serde_json::from_str(&raw).with_context(|| format!("{service} /version: {raw}"))?;
        ensure!(
            v["name"] == *service && v["version"] == *released.version && v["commit"] == *head,
            "{service} /version is {raw}; the rehearsal released {} at {head}",
            released.version
        );
        ensure!(
            v["buildTime"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{service} /version has no build time: {raw}"
        );
        eprintln!("deployed: {service} /version: {}", raw.trim());
    }
    Ok(())
}

/// A real Deployment of the HTTP workload with a real readiness probe, its Service, and a Pacto
/// for it: Compliant, with `RuntimeObserved=True` (the observer found the Service's Ready
/// endpoints of a real pod). Then the pod is made NotReady through its readiness probe: the
/// endpoint turns not ready and, after the stabilization window, the Pacto is NonCompliant with
/// `INTERFACE_ABSENT`; Ready again, it is Compliant again.
async fn a_real_workload_is_compliant(d: &Deployed) -> Result<()> {
    let ns = "deployed-web";
    d.kubectl(&["create", "namespace", ns])?;
    d.apply(ns, &sample_workload("web", "{}"))?;
    d.wait_available(ns, "web", SERVICES_READY).await?;
    d.apply(
        ns,
        r#"apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: web}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: web
        version: 1.0.0
      interfaces:
        - name: http
          type: openapi
          ref: interfaces/openapi.yaml
  target:
    serviceName: web
    interfaceBindings:
      - {interface: http, servicePort: http}
"#,
    )?;
    let pacto = wait_status(d, ns, "web", "Compliant").await?;
    expect_condition(&pacto, "RuntimeObserved", "True", "Found")?;
    ensure!(
        pacto["status"]["resources"]["service"]["exists"] == true,
        "{:#}",
        pacto["status"]
    );

    // The pod made NotReady through its real readiness probe (kubectl exec, through the kubelet):
    // its endpoint turns not ready, and the interface's absence is confirmed after the window.
    d.kubectl(&[
        "exec",
        "-n",
        ns,
        "deployment/web",
        "--",
        "touch",
        "/tmp/not-ready",
    ])?;
    d.wait("the web endpoint not ready", VERDICT, |d| {
        let slices = d
            .kubectl_json(&[
                "get",
                "endpointslices",
                "-n",
                ns,
                "-l",
                "kubernetes.io/service-name=web",
            ])
            .map_err(|e| e.to_string())?;
        let ready: Vec<&serde_json::Value> = slices["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
            .map(|e| &e["conditions"]["ready"])
            .collect();
        if !ready.is_empty() && ready.iter().all(|r| **r == false) {
            Ok(())
        } else {
            Err(format!("endpoint readiness {ready:?}"))
        }
    })
    .await?;
    let absent = wait_status(d, ns, "web", "NonCompliant").await?;
    let codes: Vec<&str> = absent["status"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str())
        .collect();
    ensure!(
        codes == ["INTERFACE_ABSENT"],
        "findings {codes:?}: {absent:#}"
    );

    // Ready again: Compliant again.
    d.kubectl(&[
        "exec",
        "-n",
        ns,
        "deployment/web",
        "--",
        "rm",
        "/tmp/not-ready",
    ])?;
    let back = wait_status(d, ns, "web", "Compliant").await?;
    expect_condition(&back, "RuntimeObserved", "True", "Found")?;
    d.kubectl(&["delete", "namespace", ns, "--wait=true", "--timeout=90s"])?;
    Ok(())
}

/// Waits until Pacto `namespace/name` reads `status`; the error carries the status-writer's log.
async fn wait_status(
    d: &Deployed,
    namespace: &str,
    name: &str,
    status: &str,
) -> Result<serde_json::Value> {
    d.wait(&format!("Pacto {name} {status}"), VERDICT, |d| {
        let p = d
            .kubectl_json(&["get", "pacto", "-n", namespace, name])
            .map_err(|e| e.to_string())?;
        if p["status"]["contractStatus"] == status {
            Ok(p)
        } else {
            Err(format!("status {:#}", p["status"]))
        }
    })
    .await
    .map_err(|e| {
        let logs = d
            .kubectl(&[
                "logs",
                "-n",
                OPERATOR_NAMESPACE,
                "deployment/pacto-operator",
                "--tail=40",
            ])
            .unwrap_or_default();
        e.context(logs)
    })
}

/// The condition `kind` of a Pacto has `status` and `reason`; returns its message.
fn expect_condition(
    pacto: &serde_json::Value,
    kind: &str,
    status: &str,
    reason: &str,
) -> Result<String> {
    let c = pacto["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .cloned()
        .unwrap_or_default();
    ensure!(
        c["status"] == status && c["reason"] == reason,
        "{kind}: want {status}/{reason}, got {c:#}"
    );
    Ok(c["message"].as_str().unwrap_or_default().to_owned())
}

/// The CRDs of `charts/pacto-crds`, kept by `helm.sh/resource-policy: keep` (docs/installation.md,
/// Uninstall).
const KEPT_CRDS: [&str; 3] = [
    "noderuntimeobservations.pacto.trianalab.io",
    "pactorevisions.pacto.trianalab.io",
    "pactos.pacto.trianalab.io",
];

/// `helmfile -e local destroy` removes every release: no service workload, no pod (the kubelet
/// stops them), no RBAC of the charts; only the three CRDs stay, as the installation guide says,
/// and its `kubectl delete crd` command removes them.
async fn helmfile_destroy_leaves_nothing(d: &Deployed) -> Result<()> {
    d.helmfile(&sync_args(&[], "destroy"))?;
    metrics::remove(d)?;
    let crds = d.kubectl(&["get", "crd", "-o", "name"])?;
    let mut ours: Vec<&str> = crds
        .lines()
        .filter_map(|l| l.strip_prefix("customresourcedefinition.apiextensions.k8s.io/"))
        .filter(|n| n.ends_with(".pacto.trianalab.io"))
        .collect();
    ours.sort_unstable();
    ensure!(ours == KEPT_CRDS, "CRDs after destroy: {ours:?}");
    // Not checked: the status-writer's leader-election Lease, written at run time and not part
    // of any release, stays (with the namespace) after the uninstall.
    let left = d.kubectl(&[
        "get",
        "deployments,replicasets,services,serviceaccounts,configmaps,secrets,roles,rolebindings",
        "-n",
        OPERATOR_NAMESPACE,
        "-o",
        "name",
    ])?;
    let ours: Vec<&str> = left.lines().filter(|l| l.contains("pacto")).collect();
    ensure!(ours.is_empty(), "left in {OPERATOR_NAMESPACE}: {ours:?}");
    let cluster = d.kubectl(&["get", "clusterroles,clusterrolebindings", "-o", "name"])?;
    let ours: Vec<&str> = cluster.lines().filter(|l| l.contains("pacto")).collect();
    ensure!(ours.is_empty(), "cluster RBAC left: {ours:?}");
    d.wait("the service pods gone", SERVICES_READY, |d| {
        let pods = d
            .kubectl(&["get", "pods", "-n", OPERATOR_NAMESPACE, "-o", "name"])
            .map_err(|e| e.to_string())?;
        if pods.trim().is_empty() {
            Ok(())
        } else {
            Err(pods)
        }
    })
    .await?;
    let mut delete = vec!["delete", "crd"];
    delete.extend(KEPT_CRDS);
    d.kubectl(&delete)?;
    let crds = d.kubectl(&["get", "crd", "-o", "name"])?;
    ensure!(!crds.contains("pacto.trianalab.io"), "CRDs left: {crds}");
    Ok(())
}

/// The namespace of the Pactos without a workload (kept until the evaluator's outage is over, so
/// that their verdicts are checked across it).
const VERDICTS_NS: &str = "deployed-verdicts";
/// The namespace of the probed workload (kept likewise).
const PROBE_NS: &str = "deployed-probe";

/// `kubectl delete namespace` and wait until it is gone.
fn delete_namespace(d: &Deployed, ns: &str) -> Result<()> {
    d.kubectl(&["delete", "namespace", ns, "--wait=true", "--timeout=90s"])?;
    Ok(())
}

/// The three verdicts that need no workload, read with the guide's commands: an inline contract
/// that fails validation is `Invalid` (`ContractValid False/Invalid`, `status.validation` with a
/// code and a path, a `ContractInvalid` warning in `kubectl describe pacto`); a contract without a
/// target is `Reference` (`ContractValid True/ReferenceOnly`, no `RuntimeObserved`); a target
/// Service that does not exist is `Unknown` with `EVIDENCE_MISSING` on the Service and on the
/// interface. `kubectl get pactorevisions` lists one revision per resolved contract (none for the
/// invalid one), named `<pacto>-<version>-<hash[:7]>`, with the CRD's columns, and `kubectl
/// describe pacto` shows its `RevisionCreated` event.
async fn verdicts_without_a_workload(d: &Deployed) -> Result<()> {
    let ns = VERDICTS_NS;
    d.kubectl(&["create", "namespace", ns])?;
    d.apply(
        ns,
        r#"apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: broken}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: broken
        version: not-a-version
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: catalog}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: catalog
        version: 1.2.0
---
apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: ghost}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: ghost
        version: 1.0.0
      interfaces:
        - name: http
          type: openapi
          ref: interfaces/openapi.yaml
  target:
    serviceName: ghost
    interfaceBindings:
      - {interface: http, servicePort: http}
"#,
    )?;

    // Invalid: the condition, the validation report, the guide's jsonpath, the event.
    let broken = wait_status(d, ns, "broken", "Invalid").await?;
    let message = expect_condition(&broken, "ContractValid", "False", "Invalid")?;
    ensure!(
        broken["status"]["validation"]["valid"] == false,
        "{:#}",
        broken["status"]
    );
    let errors = d.kubectl(&[
        "get",
        "pacto",
        "-n",
        ns,
        "broken",
        "-o",
        "jsonpath={.status.validation.errors}",
    ])?;
    let errors: serde_json::Value = serde_json::from_str(&errors)
        .map_err(|e| anyhow::anyhow!("validation errors not JSON ({e}): {errors}"))?;
    ensure!(
        errors
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["code"] == "INVALID_SEMVER" && e["path"] == "service.version"),
        "no INVALID_SEMVER at service.version: {errors:#}"
    );
    let described = wait_describe(d, ns, "broken", &["ContractInvalid"]).await?;
    ensure!(
        described_status(&described) == Some("Invalid"),
        "{described}"
    );
    ensure!(
        events_block(&described)
            .iter()
            .any(|l| l.starts_with("Warning") && l.contains("ContractInvalid")),
        "no Warning ContractInvalid in the Events block:\n{described}"
    );
    // The guide's events command: the event carries the condition's message.
    let events = d.kubectl_json(&[
        "get",
        "events",
        "-n",
        ns,
        "--field-selector",
        "involvedObject.name=broken",
        "--sort-by=.lastTimestamp",
    ])?;
    let invalid: Vec<&serde_json::Value> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "ContractInvalid")
        .collect();
    ensure!(
        invalid.len() == 1 && invalid[0]["message"] == message.as_str(),
        "ContractInvalid events {invalid:#?}, condition message {message:?}"
    );

    // Reference: parsed, not observed.
    let catalog = wait_status(d, ns, "catalog", "Reference").await?;
    expect_condition(&catalog, "ContractValid", "True", "ReferenceOnly")?;
    ensure!(
        condition(&catalog, "RuntimeObserved").is_null(),
        "a reference-only contract is never observed: {:#}",
        catalog["status"]
    );

    // Unknown: the missing Service, then the interface, both EVIDENCE_MISSING.
    let ghost = wait_status(d, ns, "ghost", "Unknown").await?;
    let found: Vec<(&str, &str)> = ghost["status"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["subject"].as_str().unwrap_or("?"),
                f["code"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    let service = format!("service/{ns}/ghost");
    ensure!(
        found
            == [
                (service.as_str(), "EVIDENCE_MISSING"),
                ("interface/http", "EVIDENCE_MISSING")
            ],
        "findings {found:?}: {:#}",
        ghost["status"]
    );
    let yaml = d.kubectl(&["get", "pacto", "-n", ns, "ghost", "-o", "yaml"])?;
    ensure!(
        yaml.contains("contractStatus: Unknown") && yaml.contains("code: EVIDENCE_MISSING"),
        "{yaml}"
    );

    // The revisions of the two resolved contracts, as `kubectl get pactorevisions` prints them.
    let table = d
        .wait("a PactoRevision for catalog and ghost", VERDICT, |d| {
            let table = d
                .kubectl(&["get", "pactorevisions", "-n", ns])
                .map_err(|e| e.to_string())?;
            let rows = table.lines().skip(1).count();
            if rows >= 2 { Ok(table) } else { Err(table) }
        })
        .await?;
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    ensure!(
        header == ["NAME", "VERSION", "PACTO", "RESOLVED", "AGE"],
        "columns {header:?}:\n{table}"
    );
    let mut rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    rows.sort();
    ensure!(
        rows.len() == 2,
        "one revision per resolved contract:\n{table}"
    );
    for (row, (pacto, version)) in rows.iter().zip([("catalog", "1.2.0"), ("ghost", "1.0.0")]) {
        ensure!(
            row.get(1..3) == Some(&[version, pacto][..]),
            "revision of {pacto}: {row:?}\n{table}"
        );
        let name = row[0];
        let revision = d.kubectl_json(&["get", "pactorevision", "-n", ns, name])?;
        let hash = revision["status"]["contractHash"].as_str().unwrap_or("");
        let want = format!(
            "{pacto}-{}-{}",
            version.replace('.', "-"),
            hash.get(..7).unwrap_or("?")
        );
        ensure!(
            name == want,
            "revision name {name}, want {want}: {revision:#}"
        );
        let owner = d.kubectl_json(&["get", "pacto", "-n", ns, pacto])?;
        ensure!(
            owner["status"]["currentRevision"] == name,
            "{pacto}: currentRevision {} is not {name}",
            owner["status"]["currentRevision"]
        );
        // `kubectl describe pacto`: the RevisionCreated event names it.
        let created = format!("Created revision {name} for contract v{version}");
        let described = wait_describe(d, ns, pacto, &[&created]).await?;
        ensure!(
            events_block(&described)
                .iter()
                .any(|l| l.starts_with("Normal") && l.contains("RevisionCreated")),
            "no Normal RevisionCreated in the Events block:\n{described}"
        );
    }
    Ok(())
}

/// The lines of the `Events:` block of `kubectl describe` after its header and rule, trimmed.
fn events_block(described: &str) -> Vec<&str> {
    described
        .lines()
        .skip_while(|l| !l.starts_with("Events:"))
        .skip(3)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// The `Contract Status:` line of `kubectl describe pacto`.
fn described_status(described: &str) -> Option<&str> {
    described
        .lines()
        .find_map(|line| line.trim().strip_prefix("Contract Status:"))
        .map(str::trim)
}

/// Waits until `kubectl describe pacto` shows every one of `needles`.
async fn wait_describe(d: &Deployed, ns: &str, name: &str, needles: &[&str]) -> Result<String> {
    d.wait(
        &format!("kubectl describe pacto {name} showing {needles:?}"),
        VERDICT,
        |d| {
            let out = d
                .kubectl(&["describe", "pacto", "-n", ns, name])
                .map_err(|e| e.to_string())?;
            if needles.iter().all(|n| out.contains(n)) {
                Ok(out)
            } else {
                Err(out)
            }
        },
    )
    .await
}

/// The condition `kind` of a Pacto, or null.
fn condition(pacto: &serde_json::Value, kind: &str) -> serde_json::Value {
    pacto["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .cloned()
        .unwrap_or_default()
}

/// The sample workload behind a Service whose `prometheus.io/*` annotations name its port, and a
/// contract declaring the `metrics` capability (`/metrics`): with metrics observation on (the
/// sync), the observer scrapes `/metrics` on the Ready pod and the Pacto is Compliant with both
/// assertions evaluated. The workload's own counter shows the scrape arrived.
async fn metrics_scraped(d: &Deployed) -> Result<()> {
    let ns = PROBE_NS;
    d.kubectl(&["create", "namespace", ns])?;
    d.apply(
        ns,
        &sample_workload(
            "probe",
            r#"{prometheus.io/scrape: "true", prometheus.io/port: "8080"}"#,
        ),
    )?;
    d.wait_available(ns, "probe", SERVICES_READY).await?;
    d.apply(ns, &probe_pacto("probe", "metrics", "/metrics"))?;
    expect_all_evaluated(&wait_status(d, ns, "probe", "Compliant").await?)?;
    // One read of the workload's counters, which counts itself once on /metrics.
    let (_, metrics) = sample_counts(d)?;
    ensure!(
        metrics >= 2,
        "the observer never scraped /metrics (one request is this read): {metrics}"
    );
    Ok(())
}

/// A Compliant Pacto of the probed workload: `RuntimeObserved=True Found`, no finding, the
/// interface and the capability both evaluated.
fn expect_all_evaluated(pacto: &serde_json::Value) -> Result<()> {
    expect_condition(pacto, "RuntimeObserved", "True", "Found")?;
    ensure!(
        pacto["status"]["findings"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "findings on a Compliant Pacto: {:#}",
        pacto["status"]
    );
    ensure!(
        pacto["status"]["evaluationCoverage"] == serde_json::json!({"evaluated": 2, "required": 2}),
        "the interface and the capability both evaluated: {:#}",
        pacto["status"]
    );
    Ok(())
}

/// The sample workload's request counters for `/healthz` and `/metrics`, read through the API
/// server's Service proxy (the read counts once on `/metrics`).
fn sample_counts(d: &Deployed) -> Result<(u64, u64)> {
    let exposition = d.kubectl(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/{PROBE_NS}/services/probe:http/proxy/metrics"),
    ])?;
    let count = |path: &str| -> u64 {
        let prefix = format!("sample_http_requests_total{{path=\"{path}\"}} ");
        exposition
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok((count("/healthz"), count("/metrics")))
}

/// A contract declaring the `health` capability (`/healthz`) for the probed workload: with
/// probing on (the `local` environment) the observer GETs `/healthz` through the Service's DNS
/// name, and the Pacto is Compliant with both assertions evaluated. Only the observer asks for
/// `/healthz` (the readiness probe is `/readyz`, so the passive fallback could not confirm it),
/// and the workload's counter shows the probe arrived.
async fn health_probed(d: &Deployed) -> Result<()> {
    let (before, _) = sample_counts(d)?;
    d.apply(PROBE_NS, &probe_pacto("health", "health", "/healthz"))?;
    let pacto = wait_status(d, PROBE_NS, "health", "Compliant")
        .await
        .map_err(|e| {
            let log = d
                .kubectl(&[
                    "logs",
                    "-n",
                    OPERATOR_NAMESPACE,
                    "deployment/pacto-observer",
                    "--since=10m",
                ])
                .unwrap_or_default();
            let probes: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("probe") || l.contains("health"))
                .collect();
            let tail = probes[probes.len().saturating_sub(20)..].join("\n");
            e.context(format!("the observer's probe log:\n{tail}"))
        })?;
    expect_all_evaluated(&pacto)?;
    let (after, _) = sample_counts(d)?;
    ensure!(
        after > before,
        "the observer never probed /healthz: {before} then {after}"
    );
    Ok(())
}

/// A Pacto `name` for the probed workload: interface `http` and one capability of `kind` bound to
/// it at `path`.
fn probe_pacto(name: &str, kind: &str, path: &str) -> String {
    format!(
        r#"apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {{name: {name}}}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: probe
        version: 1.0.0
      interfaces:
        - name: http
          type: openapi
          ref: interfaces/openapi.yaml
      capabilities:
        - type: {kind}
          binding: {{type: http, interface: http, path: {path}}}
  target:
    serviceName: probe
    interfaceBindings:
      - {{interface: http, servicePort: http}}
"#
    )
}

/// `contractStatus` of every Pacto of the scenario namespaces, as `namespace/name=status`.
fn verdicts(d: &Deployed) -> Result<Vec<String>> {
    let mut all = Vec::new();
    for ns in [VERDICTS_NS, PROBE_NS] {
        let list = d.kubectl_json(&["get", "pactos", "-n", ns])?;
        for p in list["items"].as_array().into_iter().flatten() {
            all.push(format!(
                "{ns}/{}={}",
                p["metadata"]["name"].as_str().unwrap_or("?"),
                p["status"]["contractStatus"].as_str().unwrap_or("-")
            ));
        }
    }
    all.sort();
    Ok(all)
}

/// The evaluator's pods as (name, Ready).
fn evaluator_pods(d: &Deployed) -> Result<Vec<(String, bool)>> {
    d.pod_readiness(OPERATOR_NAMESPACE, "app.kubernetes.io/name=pacto-evaluator")
}

/// `kubectl delete pod` of the evaluator while Pactos are reconciled (the probed one nudged
/// with the guide's annotate command every half second): its Deployment replaces the pod, the
/// probed Pacto reads at most `Unknown` meanwhile — with no findings, the status-writer's log
/// naming the evaluator — and is Compliant again; a Pacto created after the healing is evaluated
/// (Compliant); every verdict is the one before.
async fn a_killed_service_pod_is_healed(d: &Deployed) -> Result<()> {
    let before = verdicts(d)?;
    let every_before = all_verdicts(d)?;
    let old = evaluator_pods(d)?;
    ensure!(old.len() == 1, "one evaluator pod: {old:?}");
    let old = old[0].0.clone();
    d.kubectl(&[
        "delete",
        "pod",
        "-n",
        OPERATOR_NAMESPACE,
        &old,
        "--wait=false",
    ])?;
    let mut nudges = 0_u32;
    let mut seen = std::collections::BTreeSet::new();
    let mut unknown: Option<serde_json::Value> = None;
    let mut healed = false;
    d.wait(
        "the evaluator pod replaced and the Pacto probe Compliant after it",
        VERDICT,
        |d| {
            nudges += 1;
            d.kubectl(&[
                "annotate",
                "pacto",
                "-n",
                PROBE_NS,
                "probe",
                &format!("reconcile-requested-at=outage-{nudges}"),
                "--overwrite",
            ])
            .map_err(|e| e.to_string())?;
            let p = d
                .kubectl_json(&["get", "pacto", "-n", PROBE_NS, "probe"])
                .map_err(|e| e.to_string())?;
            let status = p["status"]["contractStatus"]
                .as_str()
                .unwrap_or("-")
                .to_owned();
            if status == "Unknown" && unknown.is_none() {
                unknown = Some(p.clone());
            }
            seen.insert(status.clone());
            // Compliant read in a round after the one that saw the new pod Ready.
            if healed && status == "Compliant" {
                return Ok(());
            }
            let pods = evaluator_pods(d).map_err(|e| e.to_string())?;
            healed = pods.len() == 1 && pods[0].0 != old && pods[0].1;
            Err(format!(
                "status {status}, evaluator pods {pods:?}, seen {seen:?}"
            ))
        },
    )
    .await?;
    d.wait_available(OPERATOR_NAMESPACE, "pacto-evaluator", SERVICES_READY)
        .await?;
    ensure!(
        seen.iter().all(|s| s == "Compliant" || s == "Unknown"),
        "an outage is never a verdict: seen {seen:?}"
    );
    if let Some(u) = &unknown {
        ensure!(
            u["status"]["findings"].as_array().is_none_or(Vec::is_empty),
            "Unknown from an evaluator outage has no findings: {:#}",
            u["status"]
        );
        let log = d.kubectl(&[
            "logs",
            "-n",
            OPERATOR_NAMESPACE,
            "deployment/pacto-operator",
            "--since=10m",
        ])?;
        ensure!(
            log.contains("evaluator unavailable"),
            "the status-writer's log does not name the evaluator:\n{}",
            log.lines().rev().take(40).collect::<Vec<_>>().join("\n")
        );
    }
    eprintln!(
        "deployed: evaluator outage: {nudges} nudges, statuses seen {seen:?}, Unknown seen: {}",
        unknown.is_some()
    );
    // The healed evaluator evaluates a Pacto it never saw.
    d.apply(PROBE_NS, &probe_pacto("probe-after", "metrics", "/metrics"))?;
    wait_status(d, PROBE_NS, "probe-after", "Compliant").await?;
    d.kubectl(&["delete", "pacto", "-n", PROBE_NS, "probe-after"])?;
    let after = verdicts(d)?;
    ensure!(
        after == before,
        "verdicts before the outage {before:?}, after {after:?}"
    );
    // A Pacto of another namespace that was reconciled during the outage read Unknown and is
    // retried with the status-writer's doubling backoff (docs/design/status.md#requeue), not
    // nudged: wait until every Pacto is back to its verdict, so that later scenarios start from
    // settled verdicts, and say how long the slowest took.
    let started = Instant::now();
    d.wait(
        "every Pacto back to its verdict from before the evaluator outage",
        VERDICT,
        |d| {
            let now = all_verdicts(d).map_err(|e| e.to_string())?;
            if now == every_before {
                Ok(())
            } else {
                Err(format!("before {every_before:?}, now {now:?}"))
            }
        },
    )
    .await?;
    eprintln!(
        "deployed: evaluator outage: every Pacto back to its verdict {:.1} s after the probe Pacto",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What a refused `helmfile sync` must leave untouched: the Helm release records and each
/// service Deployment's generation and pod template.
fn release_state(d: &Deployed) -> Result<Vec<String>> {
    let mut state: Vec<String> = d
        .kubectl(&[
            "get",
            "secrets",
            "-n",
            OPERATOR_NAMESPACE,
            "-l",
            "owner=helm",
            "-o",
            "name",
        ])?
        .lines()
        .map(str::to_owned)
        .collect();
    let deployments = d.kubectl_json(&["get", "deployments", "-n", OPERATOR_NAMESPACE])?;
    for dep in deployments["items"].as_array().into_iter().flatten() {
        state.push(format!(
            "{} generation {} template {}",
            dep["metadata"]["name"], dep["metadata"]["generation"], dep["spec"]["template"]
        ));
    }
    state.sort();
    Ok(state)
}

/// `helmfile sync` of the observer's release with a stabilization window the chart's schema
/// refuses fails with the schema's message (the value's path and the pattern it misses), and
/// nothing changes: no new release revision, no Deployment touched. The release is selected
/// alone so that no other release (the CRDs, which come first) is upgraded before the refusal.
fn a_refused_value_fails_helmfile_sync(d: &Deployed) -> Result<()> {
    let before = release_state(d)?;
    let mut args = vec!["-e", "local"];
    args.extend(agent::state_values(&[
        "controller.stabilizationWindow=2 minutes",
    ]));
    args.extend(["--selector", "name=pacto-observer", "sync"]);
    let out = d.helmfile_output(&args)?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        !out.status.success(),
        "helmfile sync accepted a refused value:\n{text}"
    );
    for needle in [
        "values don't meet the specifications of the schema(s)",
        "/controller/stabilizationWindow",
        "does not match pattern",
    ] {
        ensure!(
            text.contains(needle),
            "the failure does not carry the schema's message ({needle}):\n{text}"
        );
    }
    let after = release_state(d)?;
    ensure!(
        after == before,
        "a refused sync changed the cluster: before {before:#?}, after {after:#?}"
    );
    Ok(())
}

/// The sample HTTP workload `name` as a Deployment (readiness through its real `/readyz` probe,
/// every second) behind a Service `name` with `annotations` (a YAML flow mapping). Its pod meets
/// Pod Security `restricted`, the real node's default level (docs/design/real-node.md#pod-security).
fn sample_workload(name: &str, annotations: &str) -> String {
    format!(
        r"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      securityContext: {{runAsNonRoot: true, seccompProfile: {{type: RuntimeDefault}}}}
      containers:
        - name: app
          image: {SAMPLE_HTTP_IMAGE}
          imagePullPolicy: IfNotPresent
          securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}
          ports: [{{name: http, containerPort: 8080}}]
          readinessProbe:
            httpGet: {{path: /readyz, port: http}}
            periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  annotations: {annotations}
spec:
  selector: {{app: {name}}}
  ports: [{{name: http, port: 80, targetPort: http}}]
"
    )
}

/// The namespace of the configuration scenario (kept until the upgrade is over, so that its
/// verdict is checked across it).
const CONFIG_NS: &str = "deployed-config";

/// The ConfigMap `settings` bound to the contract's configuration `app`, with `config.yaml`.
fn settings_config_map(value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\ndata:\n  config.yaml: {}\n",
        serde_json::Value::String(value.to_owned())
    )
}

/// "Status is NonCompliant" for a configuration on the node: a contract whose required
/// configuration `app` (inline JSON schema: an integer `port`) is bound to a ConfigMap of a real
/// workload. Conforming: Compliant. The ConfigMap edited to violate the schema: NonCompliant with
/// `CONFIGURATION_MISMATCH` on `configuration/app` at once — on the reconcile the observer's
/// ConfigMap watch triggers, never Unknown on the way and no window recorded. Restored:
/// Compliant again.
async fn configuration_on_the_node(d: &Deployed) -> Result<()> {
    let ns = CONFIG_NS;
    d.kubectl(&["create", "namespace", ns])?;
    d.apply(ns, &sample_workload("cfg", "{}"))?;
    d.apply(ns, &settings_config_map("port: 8080\n"))?;
    d.wait_available(ns, "cfg", SERVICES_READY).await?;
    d.apply(
        ns,
        r#"apiVersion: pacto.trianalab.io/v1alpha1
kind: Pacto
metadata: {name: cfg}
spec:
  contractRef:
    inline: |
      pactoVersion: "2.0"
      service:
        name: cfg
        version: 1.0.0
      configurations:
        - name: app
          required: true
          schema: '{"type":"object","required":["port"],"properties":{"port":{"type":"integer"}}}'
  target:
    serviceName: cfg
    configBindings:
      - {configuration: app, kind: ConfigMap, name: settings, key: config.yaml, format: yaml}
"#,
    )?;
    let pacto = wait_status(d, ns, "cfg", "Compliant").await?;
    expect_condition(&pacto, "RuntimeObserved", "True", "Found")?;

    d.apply(ns, &settings_config_map("port: eighty\n"))?;
    let mut seen = std::collections::BTreeSet::new();
    let violated = d
        .wait(
            "Pacto cfg NonCompliant after the ConfigMap edit",
            VERDICT,
            |d| {
                let p = d
                    .kubectl_json(&["get", "pacto", "-n", ns, "cfg"])
                    .map_err(|e| e.to_string())?;
                let status = p["status"]["contractStatus"].as_str().unwrap_or("-");
                seen.insert(status.to_owned());
                if status == "NonCompliant" {
                    Ok(p)
                } else {
                    Err(format!("status {:#}", p["status"]))
                }
            },
        )
        .await?;
    ensure!(
        seen.iter().all(|s| s == "Compliant" || s == "NonCompliant"),
        "a mismatch is NonCompliant at once, never Unknown on the way: seen {seen:?}"
    );
    let findings: Vec<(&str, &str)> = violated["status"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["code"].as_str().unwrap_or("?"),
                f["subject"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    ensure!(
        findings == [("CONFIGURATION_MISMATCH", "configuration/app")],
        "findings {findings:?}: {:#}",
        violated["status"]
    );
    ensure!(
        violated["status"]["observationWindows"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "a mismatch needs no window: {:#}",
        violated["status"]
    );

    d.apply(ns, &settings_config_map("port: 8080\n"))?;
    wait_status(d, ns, "cfg", "Compliant").await?;
    Ok(())
}

/// The four services' and the node agent's metrics Services (`<release>-metrics`, port
/// `metrics`) as (release, component, `ClusterIP:port`): the host reaches ClusterIPs through
/// kube-proxy's rules, as a Prometheus in the cluster would.
fn metrics_targets(d: &Deployed) -> Result<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    for service in SERVICES {
        let addr = metrics::metrics_service(d, OPERATOR_NAMESPACE, service)?;
        let component = service.trim_start_matches("pacto-").to_owned();
        out.push((service.to_owned(), component, addr));
    }
    let agent = metrics::metrics_service(d, agent::AGENT_NS, agent::AGENT)?;
    out.push((agent::AGENT.to_owned(), "node-agent".to_owned(), agent));
    Ok(out)
}

/// The metric docs/troubleshooting.md names for each service ("Which service to look at"), and
/// the node agent's collection gauge (docs/metrics.md#node-agent).
const GUIDE_METRICS: [(&str, &str); 5] = [
    ("pacto-contract-resolver", "pacto_resolver_resolves_total"),
    ("pacto-observer", "pacto_observer_api_errors_total"),
    ("pacto-evaluator", "pacto_evaluator_evaluations_total"),
    ("pacto-status-writer", "pacto_contract_status"),
    ("pacto-node-agent", "pacto_node_agent_collection_running"),
];

/// A real Prometheus on the host scrapes the four services and the node agent through their
/// metrics Services over HTTPS (docs/metrics.md#secure-metrics): the server verified with the
/// CA under the certificate's name, the token of a ServiceAccount bound to
/// `pacto-metrics-reader`. Every target `up == 1`, and the series the guide names for each is
/// there. Then the refusals: no token 401, an unbound ServiceAccount's token 403, and `/metrics`
/// gone from the plain admin port (404) while the probes stay there.
async fn prometheus_scrapes_the_services(d: &Deployed) -> Result<()> {
    use pacto_testenv::prometheus::{HttpsScrape, Prometheus, ScrapeTarget};
    let targets = metrics_targets(d)?;
    let scraper = metrics::scraper()?;
    let jobs: Vec<ScrapeTarget> = targets
        .iter()
        .map(|(release, component, addr)| {
            ScrapeTarget::new(release, &[addr.as_str()]).with_https(HttpsScrape {
                ca_file: scraper.ca_file(),
                server_name: metrics::server_name(component),
                bearer_token_file: scraper.token_file(),
            })
        })
        .collect();
    let prometheus = Prometheus::start(&jobs, Duration::from_secs(1), VERDICT).await?;
    for (release, _, addr) in &targets {
        let up = format!("up{{job=\"{release}\"}} == 1");
        prometheus
            .wait_for_query(&up, VERDICT, |r| r.as_array().is_some_and(|a| a.len() == 1))
            .await
            .with_context(|| format!("{release} scraped over HTTPS at {addr}"))?;
        let metric = GUIDE_METRICS
            .iter()
            .find(|(s, _)| s == release)
            .map(|(_, m)| *m)
            .context("a guide metric for every service")?;
        let own = format!("count({metric}{{job=\"{release}\"}}) > 0");
        prometheus
            .wait_for_query(&own, VERDICT, |r| {
                r.as_array().is_some_and(|a| !a.is_empty())
            })
            .await
            .with_context(|| format!("{release}: no {metric} series scraped from {addr}"))?;
        eprintln!("deployed: Prometheus: {release} up over HTTPS at {addr}, {metric} scraped");
    }
    metrics::refusals(d, &targets)?;
    for service in SERVICES {
        metrics::admin_port_keeps_only_probes(d, service)?;
    }
    Ok(())
}

/// The service Deployments' `deployment.kubernetes.io/revision`, by name.
fn deployment_revisions(d: &Deployed) -> Result<std::collections::BTreeMap<String, u64>> {
    let list = d.kubectl_json(&["get", "deployments", "-n", OPERATOR_NAMESPACE])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|dep| {
            (
                dep["metadata"]["name"].as_str().unwrap_or("?").to_owned(),
                dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    .as_str()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0),
            )
        })
        .collect())
}

/// Waits until each of `names` has rolled past `before`'s revision and finished: all replicas
/// updated, available, and no old pod left.
async fn wait_rolled(
    d: &Deployed,
    names: &[&str],
    before: &std::collections::BTreeMap<String, u64>,
) -> Result<()> {
    for name in names {
        let old = before.get(*name).copied().unwrap_or(0);
        d.wait(
            &format!("Deployment {name} rolled past revision {old}"),
            SERVICES_READY,
            |d| {
                let v = d
                    .kubectl_json(&["get", "deployment", "-n", OPERATOR_NAMESPACE, name])
                    .map_err(|e| e.to_string())?;
                let revision: u64 =
                    v["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                        .as_str()
                        .and_then(|r| r.parse().ok())
                        .unwrap_or(0);
                let s = &v["status"];
                let want = v["spec"]["replicas"].as_i64().unwrap_or(1);
                let done = revision > old
                    && s["observedGeneration"] == v["metadata"]["generation"]
                    && s["updatedReplicas"].as_i64() == Some(want)
                    && s["availableReplicas"].as_i64() == Some(want)
                    && s["replicas"].as_i64() == Some(want);
                if done {
                    Ok(())
                } else {
                    Err(format!("revision {revision}, status {s}"))
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// The status-writer's finished reconciles so far (`pacto_status_writer_reconciles_total`, every
/// result), read through its metrics Service over HTTPS (0 when unreadable).
fn reconciles_finished(d: &Deployed) -> u64 {
    let Ok(text) = metrics::metrics_service(d, OPERATOR_NAMESPACE, "pacto-status-writer")
        .and_then(|addr| metrics::scrape(&addr, "status-writer"))
    else {
        return 0;
    };
    text.lines()
        .filter(|l| l.starts_with("pacto_status_writer_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// After a roll of the status-writer, waits until the new one has reconciled every Pacto once
/// (its finished reconciles reach the number of Pactos), so that the comparison that follows
/// sees its verdicts and events, not the old pod's.
async fn wait_reconciled_after_roll(d: &Deployed) -> Result<()> {
    let pactos = d.kubectl_json(&["get", "pactos", "-A"])?;
    let count = pactos["items"].as_array().map_or(0, Vec::len) as u64;
    d.wait(
        "the new status-writer reconciled every Pacto",
        VERDICT,
        |d| {
            let n = reconciles_finished(d);
            if n >= count {
                Ok(())
            } else {
                Err(format!("{n} reconciles finished, {count} Pactos"))
            }
        },
    )
    .await
}

/// Holds for `quiet` while the [`VerdictWatch`] sees no change (a change ends the hold at
/// once), then checks that nothing changed and no Pacto event was recorded since `events_before`.
/// The error names each change (Pacto, from, to, when), each new event (reason, message, time)
/// and the pods' timeline of `pods`, so that a blip shows which component was rolling.
async fn expect_no_verdict_change(
    d: &Deployed,
    what: &str,
    watch: &mut VerdictWatch,
    pods: &mut PodTimeline,
    events_before: &[PactoEvent],
    quiet: Duration,
) -> Result<()> {
    // Ends early at the first change; what changed is reported below.
    let _ = d
        .hold(&format!("{what}: no verdict change"), quiet, |_| {
            let changes = watch.changes().map_err(|e| e.to_string())?;
            if changes.is_empty() {
                Ok(())
            } else {
                Err(format!("{} change(s)", changes.len()))
            }
        })
        .await;
    let changes = watch.changes()?;
    let events = new_pacto_events(events_before, &d.pacto_events()?);
    eprintln!(
        "deployed: {what}: {} verdict change(s), {} new Pacto event(s) over {:.1} s",
        changes.len(),
        events.len(),
        watch.elapsed().as_secs_f64()
    );
    if changes.is_empty() && events.is_empty() {
        return Ok(());
    }
    let changes: Vec<String> = changes.iter().map(ToString::to_string).collect();
    bail!(
        "{what} changed verdicts or recorded Pacto events.\nverdict changes:\n  {}\nnew Pacto events:\n  {}\npods meanwhile:\n  {}",
        changes.join("\n  "),
        events.join("\n  "),
        pods.lines().join("\n  ")
    )
}

/// The generation of the agent DaemonSet.
fn agent_generation(d: &Deployed) -> Result<i64> {
    let ds = d.kubectl_json(&["get", "daemonset", "-n", agent::AGENT_NS, agent::AGENT])?;
    Ok(ds["metadata"]["generation"].as_i64().unwrap_or(0))
}

/// Upgrade and rollback: `helmfile sync` with another log level (harmless) rolls every service
/// Deployment and the node agent's DaemonSet (a new revision, new pods), and `helm rollback` of
/// the evaluator's release rolls it back. Across both, watched from before the command until every
/// component has rolled, the new status-writer reconciled every Pacto, the agent's report stream
/// is open again and a quiet period passed: no Pacto's `contractStatus` changes even for a moment
/// (a `kubectl get pactos -A --watch`) and no Pacto event is recorded. The agent's roll is covered
/// too: the node-evidence Pactos of the agent scenarios (20 of them) keep `Compliant` with the
/// chart's default warm-up.
async fn upgrade_and_rollback_change_no_verdict(d: &Deployed) -> Result<()> {
    let verdicts_before = all_verdicts(d)?;
    let events_before = d.pacto_events()?;
    let revisions = deployment_revisions(d)?;
    let agent_before = agent_generation(d)?;
    let base = Instant::now();
    let mut watch = VerdictWatch::start(d, None, base).await?;
    let mut pods = PodTimeline::start(d, &[OPERATOR_NAMESPACE, agent::AGENT_NS], base)?;
    d.helmfile(&sync_args(&["logLevel=info"], "sync"))?;
    wait_rolled(d, &DEPLOYMENTS, &revisions).await?;
    agent::wait_daemonset_rolled(d, agent_before).await?;
    wait_reconciled_after_roll(d).await?;
    agent::stream::wait_streams_open(d, 1).await?;
    agent::wait_published(d).await?;
    expect_no_verdict_change(
        d,
        "upgrade (every service and the agent rolled)",
        &mut watch,
        &mut pods,
        &events_before,
        QUIET,
    )
    .await?;
    let now = all_verdicts(d)?;
    ensure!(
        now == verdicts_before,
        "before {verdicts_before:?}, now {now:?}"
    );
    eprintln!(
        "deployed: upgrade: {} Pactos, every component rolled and settled {:.1} s after the sync began",
        now.len(),
        base.elapsed().as_secs_f64()
    );
    drop(watch);
    drop(pods);

    let events_before = d.pacto_events()?;
    let revisions = deployment_revisions(d)?;
    let base = Instant::now();
    let mut watch = VerdictWatch::start(d, None, base).await?;
    let mut pods = PodTimeline::start(d, &[OPERATOR_NAMESPACE], base)?;
    d.helm(&[
        "rollback",
        "pacto-evaluator",
        "-n",
        OPERATOR_NAMESPACE,
        "--wait",
        "--timeout",
        "3m",
    ])?;
    wait_rolled(d, &["pacto-evaluator"], &revisions).await?;
    // The old evaluator pod gone too (a terminating pod is no longer counted by the Deployment).
    d.wait("the old evaluator pod gone", SERVICES_READY, |d| {
        let pods = d
            .kubectl(&[
                "get",
                "pods",
                "-n",
                OPERATOR_NAMESPACE,
                "-l",
                "app.kubernetes.io/name=pacto-evaluator",
                "-o",
                "name",
            ])
            .map_err(|e| e.to_string())?;
        if pods.lines().count() == 1 {
            Ok(())
        } else {
            Err(pods)
        }
    })
    .await?;
    let args = d.kubectl(&[
        "get",
        "deployment",
        "-n",
        OPERATOR_NAMESPACE,
        "pacto-evaluator",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].args}",
    ])?;
    ensure!(
        args.contains("--log-level=debug"),
        "the rollback did not restore the evaluator's log level: {args}"
    );
    // A reconcile of every Pacto through the rolled-back evaluator (the guide's nudge).
    let base_reconciles = reconciles_finished(d);
    let pactos = all_pactos(d)?;
    for (ns, name) in &pactos {
        d.kubectl(&[
            "annotate",
            "pacto",
            "-n",
            ns,
            name,
            "reconcile-requested-at=after-rollback",
            "--overwrite",
        ])?;
    }
    d.wait("every Pacto reconciled after the rollback", VERDICT, |d| {
        let done = reconciles_finished(d).saturating_sub(base_reconciles);
        if done >= pactos.len() as u64 {
            Ok(())
        } else {
            Err(format!("{done} reconciles since the nudge"))
        }
    })
    .await?;
    expect_no_verdict_change(
        d,
        "rollback of the evaluator",
        &mut watch,
        &mut pods,
        &events_before,
        QUIET,
    )
    .await?;
    let after = all_verdicts(d)?;
    ensure!(
        after == verdicts_before,
        "{after:?}, before {verdicts_before:?}"
    );
    Ok(())
}

/// How long a roll's result is watched for after everything settled.
const QUIET: Duration = Duration::from_secs(10);

/// Every Pacto of the cluster as (namespace, name).
fn all_pactos(d: &Deployed) -> Result<Vec<(String, String)>> {
    let list = d.kubectl_json(&["get", "pactos", "-A"])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned(),
                p["metadata"]["name"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect())
}

/// `contractStatus` of every Pacto of the cluster, as `namespace/name=status`.
fn all_verdicts(d: &Deployed) -> Result<Vec<String>> {
    let list = d.kubectl_json(&["get", "pactos", "-A"])?;
    let mut all: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{}/{}={}",
                p["metadata"]["namespace"].as_str().unwrap_or("?"),
                p["metadata"]["name"].as_str().unwrap_or("?"),
                p["status"]["contractStatus"].as_str().unwrap_or("-")
            )
        })
        .collect();
    all.sort();
    Ok(all)
}

/// One kubectl command of docs/troubleshooting.md: its text as the guide prints it (`<name>`
/// replaced), and what its output must show.
struct GuideCommand {
    command: &'static str,
    name: &'static str,
    shows: &'static [&'static str],
}

/// The guide's kubectl commands that apply to a deployed operator, run verbatim (through `sh`,
/// in a kubeconfig whose namespace is the verdicts' one) against the node: command → what its
/// output shows.
const GUIDE_COMMANDS: &[GuideCommand] = &[
    GuideCommand {
        command: "kubectl describe pacto <name>",
        name: "ghost",
        shows: &["Contract Status:", "Events:"],
    },
    GuideCommand {
        command: "kubectl get pacto <name> -o yaml",
        name: "ghost",
        shows: &["contractStatus: Unknown", "EVIDENCE_MISSING"],
    },
    GuideCommand {
        command: "kubectl get pacto <name> -o yaml | yq '.status'",
        name: "ghost",
        shows: &["contractStatus", "Unknown"],
    },
    GuideCommand {
        command: "kubectl -n pacto-operator-system logs deploy/pacto-contract-resolver",
        name: "",
        shows: &["INFO"],
    },
    GuideCommand {
        command: "kubectl -n pacto-operator-system logs deploy/pacto-observer",
        name: "",
        shows: &["INFO"],
    },
    GuideCommand {
        command: "kubectl -n pacto-operator-system logs deploy/pacto-evaluator",
        name: "",
        shows: &["INFO"],
    },
    GuideCommand {
        command: "kubectl -n pacto-operator-system logs deploy/pacto-operator",
        name: "",
        shows: &["INFO"],
    },
    GuideCommand {
        command: "kubectl get events --field-selector involvedObject.name=<name> \\\n  --sort-by=.lastTimestamp",
        name: "broken",
        shows: &["ContractInvalid"],
    },
    GuideCommand {
        command: "kubectl annotate pacto <name> reconcile-requested-at=\"$(date -u +%FT%TZ)\" --overwrite",
        name: "catalog",
        shows: &["pacto.pacto.trianalab.io/catalog annotated"],
    },
    GuideCommand {
        command: "kubectl get pacto <name> -o jsonpath='{.status.validation.errors}'",
        name: "broken",
        shows: &["\"code\"", "\"path\""],
    },
    GuideCommand {
        command: "kubectl get pactorevisions",
        name: "",
        shows: &["catalog-1-2-0-"],
    },
];

/// The guide's node agent commands ("Node agent evidence is missing"), with the agent deployed
/// by this tier: the DaemonSet with its pod Ready, the node's observation and Lease, the
/// operator's `node-agent` log lines (the node heard, the agent namespace's Pod Security labels;
/// whichever replica `logs deploy/` picks prints them), and the DaemonSet's description.
const GUIDE_NODE_AGENT_COMMANDS: &[GuideCommand] = &[
    GuideCommand {
        command: "kubectl -n pacto-node-agent get daemonset pacto-node-agent",
        name: "",
        shows: &["DESIRED", "pacto-node-agent", "kubernetes.io/os=linux"],
    },
    GuideCommand {
        command: "kubectl -n pacto-node-agent get noderuntimeobservations,leases",
        name: "",
        shows: &[
            "noderuntimeobservation.pacto.trianalab.io/pacto-node",
            "Running",
            "lease.coordination.k8s.io/pacto-node",
        ],
    },
    GuideCommand {
        command: GUIDE_NODE_AGENT_LOG,
        name: "",
        shows: &[
            "node-agent: node pacto-node heard (agent ",
            "node-agent: Pod Security labels ",
        ],
    },
    GuideCommand {
        command: "kubectl -n pacto-node-agent describe daemonset pacto-node-agent",
        name: "",
        shows: &["Pods Status:", "1 Running", "Events:"],
    },
];

/// The guide's node agent log command, verbatim ("Node agent evidence is missing").
pub const GUIDE_NODE_AGENT_LOG: &str =
    "kubectl -n pacto-operator-system logs deploy/pacto-operator | grep node-agent";

/// Runs [`GUIDE_COMMANDS`] as a user would type them (kubectl from the node's binaries on
/// `PATH`, the current context's namespace set to the verdicts' one) and checks each output,
/// then [`GUIDE_NODE_AGENT_COMMANDS`] the same way.
fn the_guide_commands_run(d: &Deployed) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("pacto-deployed-guide-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("kubeconfig");
    std::fs::copy(d.kubeconfig(), &config)?;
    let sh = |script: &str| d.shell_with(&config, script);
    sh(&format!(
        "kubectl config set-context --current --namespace={VERDICTS_NS}"
    ))?;
    for c in GUIDE_COMMANDS.iter().chain(GUIDE_NODE_AGENT_COMMANDS) {
        let script = c.command.replace("<name>", c.name);
        let out = sh(&script)?;
        for needle in c.shows {
            ensure!(
                out.contains(needle),
                "guide command `{script}` does not show {needle:?}:\n{out}"
            );
        }
        eprintln!(
            "deployed: guide command ran: {script} -> shows {:?}",
            c.shows
        );
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
