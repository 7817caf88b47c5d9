//! The deployed tier: the project as users deploy it, onto a real node (root only; see the crate
//! docs of `pacto-deployed` for when it skips or fails). One node for the whole binary: the
//! scenarios run in order inside one test, each timed, and the node is torn down at the end (or
//! during unwinding when a step fails), checking that the host is restored.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use pacto_deployed::{Deployed, OPERATOR_NAMESPACE, SAMPLE_HTTP_IMAGE, SERVICES, may_run, timed};

const SERVICES_READY: Duration = Duration::from_mins(3);
const VERDICT: Duration = Duration::from_mins(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployed_tier() -> Result<()> {
    if !may_run() {
        return Ok(());
    }
    let tier = Instant::now();
    let started = Instant::now();
    let deployed = Deployed::start().await?;
    timed(
        "node start (control plane, node Ready, CoreDNS Ready)",
        started,
    );
    let t = deployed.node().timings();
    eprintln!(
        "deployed: node phases: control plane {:?}, containerd {:?}, images {:?}, node Ready {:?}, kube-proxy {:?}, CoreDNS Ready {:?}",
        t.control_plane, t.containerd, t.images, t.node_ready, t.kube_proxy, t.coredns_ready
    );

    let started = Instant::now();
    helmfile_sync_brings_every_service_up(&deployed).await?;
    timed("helmfile sync and the four services Ready", started);

    let started = Instant::now();
    a_real_workload_is_compliant(&deployed).await?;
    timed(
        "sample workload: Compliant, NotReady -> NonCompliant after the window, Ready -> Compliant",
        started,
    );

    let started = Instant::now();
    helmfile_destroy_leaves_nothing(&deployed).await?;
    timed("helmfile destroy", started);

    let took = deployed.down()?;
    eprintln!("deployed: teardown: {:.1} s", took.as_secs_f64());
    timed("the whole tier", tier);
    Ok(())
}

/// The stabilization window the tier installs with (`controller.stabilizationWindow`, 2 minutes
/// by default), so that an absence is confirmed within the test's deadlines.
const WINDOW: &str = "20s";

/// `helmfile -e local sync` of the unmodified charts (one environment knob set: the
/// stabilization window): every service Deployment Available, its pods Ready through the charts'
/// own probes (kubelet runs them), on the real node.
async fn helmfile_sync_brings_every_service_up(d: &Deployed) -> Result<()> {
    d.helmfile(&[
        "-e",
        "local",
        "--state-values-set",
        &format!("controller.stabilizationWindow={WINDOW}"),
        "sync",
    ])?;
    for service in SERVICES {
        d.wait_available(OPERATOR_NAMESPACE, service, SERVICES_READY)
            .await?;
    }
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
    d.apply(
        ns,
        &format!(
            r"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: app
          image: {SAMPLE_HTTP_IMAGE}
          imagePullPolicy: IfNotPresent
          ports: [{{name: http, containerPort: 8080}}]
          readinessProbe:
            httpGet: {{path: /readyz, port: http}}
            periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: http}}]
"
        ),
    )?;
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
                "deployment/pacto-status-writer",
                "--tail=40",
            ])
            .unwrap_or_default();
        e.context(logs)
    })
}

/// The condition `kind` of a Pacto has `status` and `reason`.
fn expect_condition(
    pacto: &serde_json::Value,
    kind: &str,
    status: &str,
    reason: &str,
) -> Result<()> {
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
    Ok(())
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
    d.helmfile(&["-e", "local", "destroy"])?;
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
