//! The evidence sections of the troubleshooting guide end to end ("Status is Unknown", "Status is
//! NonCompliant", "Metrics or health always Unknown"), read the way a user reads them: `kubectl
//! get pacto -o yaml` (findings' code, severity, subject, evidenceRefs) and `kubectl describe pacto`
//! (events and their counts), produced by the four service binaries as separate processes (see
//! the `pacto-e2e` library) against real workloads, real HTTP servers and real ConfigMaps.
//!
//! - Health with `--enable-probing`: a real HTTP server answers the Tier A probe (200 → present;
//!   404 → Unknown inside the stabilization window, `CAPABILITY_ABSENT` beyond it; 200 again →
//!   `ContractRecovered`).
//! - Metrics with `--enable-metrics-observation`: a real server on a non-loopback address of this
//!   machine, declared as the Pod's IP through the simulator's pod-ip annotation, is scraped on
//!   the Ready endpoint found through the Service's `prometheus.io/*` annotations.
//! - Configurations: `CONFIGURATION_MISMATCH` is NonCompliant on the first reconcile that
//!   observes it; `CONFIGURATION_ABSENT` reads Unknown until the negative streak spans the window,
//!   and creating the ConfigMap recovers the contract.
//! - `EVIDENCE_MISSING`: `spec.target.serviceName` names a Service that does not exist.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use pacto_api::testing::PactoBuilder;
use pacto_e2e::{STATUS_DEADLINE, Stack, StackOptions, condition, expect_runtime_found};
use pacto_runtime::testing::{eventually, within};
use pacto_testenv::simulator::POD_IP_ANNOTATION;
use serde_json::{Value, json};

/// How long an absence may take to be confirmed once it reads Unknown. The Pactos that wait for it
/// check only every [`LONG_CHECK_INTERVAL`] seconds, so only the requeue at the window's end can
/// meet this deadline, however generous it is.
const WINDOW_CONFIRMATION: Duration = STATUS_DEADLINE;

/// A `checkIntervalSeconds` far beyond every deadline of this file: a Pacto with it is reconciled
/// only on a watch event, a nudge or a requeue the status-writer asks for (the window's end).
const LONG_CHECK_INTERVAL: i32 = 3600;

/// The Prometheus text exposition the metrics server serves.
const EXPOSITION: &str = "# HELP shop_orders_total Orders taken.\n# TYPE shop_orders_total counter\nshop_orders_total{method=\"card\"} 3\nshop_orders_total{method=\"cash\"} 1\n";

/// A real HTTP/1.1 server (hyper) for the observer to probe and scrape: the health path answers
/// with a status the test can change, `/metrics` serves [`EXPOSITION`] as `text/plain`, anything
/// else is 404. It counts the requests per path, so a test can tell that the observer really
/// reached it. Stopped when dropped.
struct HttpServer {
    addr: SocketAddr,
    health_status: Arc<AtomicU16>,
    hits: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpServer {
    async fn start(ip: IpAddr, health_path: &'static str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind((ip, 0))
            .await
            .with_context(|| format!("binding an HTTP server on {ip}"))?;
        let addr = listener.local_addr()?;
        let health_status = Arc::new(AtomicU16::new(200));
        let hits: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
        let (status, counts) = (health_status.clone(), hits.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (status, counts) = (status.clone(), counts.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: hyper::Request<_>| {
                        let path = request.uri().path().to_owned();
                        *counts
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .entry(path.clone())
                            .or_default() += 1;
                        let (code, content_type, body) = if path == health_path {
                            (status.load(Ordering::SeqCst), "text/plain", "ok\n")
                        } else if path == "/metrics" {
                            (200, "text/plain; version=0.0.4; charset=utf-8", EXPOSITION)
                        } else {
                            (404, "text/plain", "not found\n")
                        };
                        let response = hyper::Response::builder()
                            .status(code)
                            .header("content-type", content_type)
                            .body(Full::new(Bytes::from_static(body.as_bytes())))
                            .unwrap_or_default();
                        async move { Ok::<_, Infallible>(response) }
                    });
                    // A connection error (the observer's 5 s timeout, a reset) ends that
                    // connection only.
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            health_status,
            hits,
            task,
        })
    }

    fn set_health_status(&self, code: u16) {
        self.health_status.store(code, Ordering::SeqCst);
    }

    fn hits(&self, path: &str) -> usize {
        self.hits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

/// A non-loopback IPv4 address of this machine: the source address the kernel picks towards a
/// documentation address (a UDP `connect` sends nothing), else the first global address `ip`
/// lists. The API server refuses loopback endpoint addresses, so the metrics scenario needs one.
fn host_address() -> anyhow::Result<Ipv4Addr> {
    let routed = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|socket| {
            socket.connect((Ipv4Addr::new(198, 51, 100, 1), 9))?;
            socket.local_addr()
        })
        .ok()
        .and_then(|addr| match addr.ip() {
            IpAddr::V4(ip) if !ip.is_loopback() && !ip.is_unspecified() => Some(ip),
            _ => None,
        });
    if let Some(ip) = routed {
        return Ok(ip);
    }
    let listed = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    listed
        .split_whitespace()
        .skip_while(|word| *word != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next()?.parse::<Ipv4Addr>().ok())
        .filter(|ip| !ip.is_loopback())
        .context(
            "this machine has no non-loopback IPv4 address (no default route and `ip -4 addr show \
             scope global` lists none); the metrics scenario needs one, because the API server \
             refuses loopback endpoint addresses",
        )
}

/// A Pacto manifest: `contract_ref` and `target` are the `spec.contractRef` and `spec.target`
/// objects.
fn pacto_manifest(name: &str, contract_ref: &Value, target: &Value) -> String {
    PactoBuilder::new(name, serde_json::from_value(contract_ref.clone()).unwrap())
        .target(serde_json::from_value(target.clone()).unwrap())
        .check_interval(30)
        .manifest()
}

/// [`pacto_manifest`] with the [`LONG_CHECK_INTERVAL`]: for a Pacto whose absence must be
/// confirmed by the requeue at the window's end, never by the regular check.
fn window_pacto_manifest(name: &str, contract_ref: &Value, target: &Value) -> String {
    PactoBuilder::new(name, serde_json::from_value(contract_ref.clone()).unwrap())
        .target(serde_json::from_value(target.clone()).unwrap())
        .check_interval(LONG_CHECK_INTERVAL)
        .manifest()
}

/// A one-replica Deployment `name` (label `app: <name>`) with one container exposing
/// `container_port` named `http`, no probes, and `annotations` on its pod template.
fn deployment(name: &str, container_port: u16, annotations: &Value) -> String {
    serde_norway::to_string(&json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name }, "annotations": annotations },
                "spec": { "containers": [{
                    "name": "app",
                    "image": format!("registry.local/{name}:1"),
                    "ports": [{ "name": "http", "containerPort": container_port }],
                }]},
            },
        },
    }))
    .unwrap()
}

/// A Service `name` selecting `app: <name>` with one port named `http` (`port` → the container
/// port named `http`) and `annotations`.
fn service(name: &str, port: u16, annotations: &Value) -> String {
    serde_norway::to_string(&json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": name, "annotations": annotations },
        "spec": {
            "selector": { "app": name },
            "ports": [{ "name": "http", "port": port, "targetPort": "http" }],
        },
    }))
    .unwrap()
}

/// The inline contract of service `name`: one OpenAPI interface `http` and, when given, one
/// capability of `capability` type bound to it at `path`.
fn http_contract(name: &str, capability: Option<(&str, &str)>) -> Value {
    let capabilities = capability.map_or_else(String::new, |(kind, path)| {
        format!(
            "capabilities:\n  - type: {kind}\n    binding: {{type: http, interface: http, path: {path}}}\n"
        )
    });
    let contract = format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: 1.0.0\ninterfaces:\n  - name: http\n    type: openapi\n    ref: interfaces/openapi.yaml\n{capabilities}"
    );
    json!({ "inline": contract })
}

/// The findings of a Pacto (from `kubectl get -o yaml`), or none.
fn findings(pacto: &Value) -> Vec<Value> {
    pacto["status"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The only finding of a Pacto, which must be about `subject`.
fn only_finding(pacto: &Value, subject: &str) -> Value {
    let all = findings(pacto);
    assert_eq!(all.len(), 1, "expected exactly one finding: {pacto:#}");
    assert_eq!(all[0]["subject"], subject, "{pacto:#}");
    all[0].clone()
}

/// `status.observationWindows` of a Pacto as (kind, subject) pairs.
fn windows(pacto: &Value) -> Vec<(String, String)> {
    pacto["status"]["observationWindows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            (
                w["kind"].as_str().unwrap_or_default().to_owned(),
                w["subject"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The `Contract Status:` line of `kubectl describe pacto`.
fn described_status(described: &str) -> Option<&str> {
    described
        .lines()
        .find_map(|line| line.trim().strip_prefix("Contract Status:"))
        .map(str::trim)
}

/// Asserts a finding's single evidenceRef is the Kubernetes observer's reading.
fn assert_k8s_evidence(finding: &Value) {
    let refs = finding["evidenceRefs"].as_array().expect("evidenceRefs");
    assert_eq!(refs.len(), 1, "{finding}");
    assert_eq!(refs[0]["source"], "k8s", "{finding}");
    assert_eq!(refs[0]["collector"], "k8s-observer", "{finding}");
    assert!(refs[0]["observedAt"].is_string(), "{finding}");
    assert!(refs[0]["detectedAt"].is_string(), "{finding}");
}

/// Nudges the Pacto as the guide says ([`Stack::nudge`]: annotate, then wait for the reconcile)
/// until its `status.contractStatus` is `want`; for verdicts that need a reconcile after the
/// stabilization window, without waiting for the 30 s requeue.
async fn nudge_until(stack: &Stack, name: &str, want: &str, timeout: Duration) -> Value {
    let nudges = std::sync::atomic::AtomicU32::new(0);
    within(
        &format!("{name} to be {want} while nudged"),
        timeout,
        || async {
            let pacto = stack.get_pacto(name).await.unwrap();
            if pacto["status"]["contractStatus"] == want {
                return Ok(pacto);
            }
            let nudge = nudges.fetch_add(1, Ordering::Relaxed) + 1;
            stack.nudge(name, &format!("nudge-{nudge}")).await.unwrap();
            Err(serde_norway::to_string(&pacto["status"]).unwrap_or_default())
        },
    )
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}\n{}", stack.logs()))
}

/// Applies the Deployment and Service of `name`, waits until it is Available, then applies the
/// Pacto `pacto(target)` renders (its interface `http` bound to the Service port `http`) and waits
/// for Compliant with the runtime found, no finding, and both required assertions (the interface
/// and one capability) evaluated.
async fn compliant_http_target(
    stack: &Stack,
    name: &str,
    deployment: &str,
    service: &str,
    pacto: impl Fn(&serde_json::Value) -> String,
) -> serde_json::Value {
    stack.apply(deployment).await.unwrap();
    stack.apply(service).await.unwrap();
    stack.wait_available(name).await.unwrap();
    let target = json!({
        "serviceName": name,
        "interfaceBindings": [{ "interface": "http", "servicePort": "http" }],
    });
    stack.apply(&pacto(&target)).await.unwrap();
    let found = stack
        .wait_contract_status(name, "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    expect_runtime_found(&found);
    assert!(findings(&found).is_empty(), "{found:#}");
    assert_eq!(
        found["status"]["evaluationCoverage"],
        json!({ "evaluated": 2, "required": 2 }),
        "{found:#}"
    );
    found
}

/// "Metrics or health always Unknown" → active probing: with `--enable-probing` the observer GETs
/// the health path on the Service's DNS name and port. The workload has no readiness probe, so
/// only the active probe can confirm health (the passive fallback would be Insufficient).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_probed_found_then_absent_beyond_the_window_then_recovered() {
    // The observer resolves the Service's name through a private /etc/hosts.
    if !pacto_e2e::privileged("the observer runs under `unshare --mount` for a private /etc/hosts")
    {
        return;
    }
    let server = HttpServer::start(IpAddr::V4(Ipv4Addr::LOCALHOST), "/healthz")
        .await
        .unwrap();
    let port = server.addr.port();
    let stack = Stack::start_with(StackOptions {
        observer_args: vec!["--enable-probing".into()],
        probe_hosts: vec!["orders".into()],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    // 200 on the capability path: health observed present, nothing Unknown, both required
    // assertions (interface http, capability health) evaluated.
    compliant_http_target(
        &stack,
        "orders",
        &deployment("orders", 8080, &json!({})),
        &service("orders", port, &json!({})),
        |target| {
            window_pacto_manifest(
                "orders",
                &http_contract("orders", Some(("health", "/healthz"))),
                target,
            )
        },
    )
    .await;
    assert!(
        server.hits("/healthz") > 0,
        "the probe never reached the server"
    );
    let described = stack.describe_pacto("orders").await.unwrap();
    assert_eq!(
        described_status(&described),
        Some("Compliant"),
        "{described}"
    );
    assert!(!described.contains("ValidationFailed"), "{described}");

    // The endpoint starts answering 404: a negative inside the window is not yet a violation.
    server.set_health_status(404);
    let pacto = nudge_until(&stack, "orders", "Unknown", STATUS_DEADLINE).await;
    let finding = only_finding(&pacto, "capability/health");
    assert_eq!(finding["code"], "EVIDENCE_INSUFFICIENT", "{finding}");
    assert_eq!(finding["severity"], "unknown", "{finding}");
    assert_eq!(
        windows(&pacto),
        [("capability".to_owned(), "health".to_owned())],
        "{pacto:#}"
    );
    stack
        .wait_describe(
            "orders",
            &[
                "ValidationFailed",
                "ContractStatus: Unknown, 0 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    // Beyond the 5 s window the absence is confirmed, without a nudge: the observer reports when
    // the pending streak ends and the status-writer requeues for then (the regular check is an
    // hour away).
    let pacto = stack
        .wait_contract_status("orders", "NonCompliant", WINDOW_CONFIRMATION)
        .await
        .unwrap();
    let finding = only_finding(&pacto, "capability/health");
    assert_eq!(finding["code"], "CAPABILITY_ABSENT", "{finding}");
    assert_eq!(finding["severity"], "error", "{finding}");
    assert_eq!(finding["category"], "RuntimeDrift", "{finding}");
    assert_eq!(
        finding["message"], "capability \"health\" is absent at runtime",
        "{finding}"
    );
    assert_k8s_evidence(&finding);
    assert_eq!(pacto["status"]["summary"]["errorCount"], 1, "{pacto:#}");
    stack
        .wait_describe(
            "orders",
            &["ContractStatus: NonCompliant, 1 errors, 0 warnings"],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    // Healthy again: Compliant, the streak is cleared, ContractRecovered.
    server.set_health_status(200);
    let pacto = nudge_until(&stack, "orders", "Compliant", STATUS_DEADLINE).await;
    assert!(findings(&pacto).is_empty(), "{pacto:#}");
    assert!(windows(&pacto).is_empty(), "{pacto:#}");
    let described = stack
        .wait_describe("orders", &["ContractRecovered"], STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(described.contains("Normal"), "{described}");
}

/// "Metrics or health always Unknown" → `--enable-metrics-observation`: the Service's
/// `prometheus.io/*` annotations name the container port, which the observer scrapes on the Ready
/// endpoint's pod IP (here a real server on this machine's address, declared as the Pod's IP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_scraped_on_the_ready_pod_ip() {
    let ip = host_address().unwrap();
    let server = HttpServer::start(IpAddr::V4(ip), "/healthz").await.unwrap();
    let container_port = server.addr.port();
    let stack = Stack::start_with(StackOptions {
        observer_args: vec!["--enable-metrics-observation".into()],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    // No OBSERVATION_UNSUPPORTED (or any other finding) for capability/metrics.
    compliant_http_target(
        &stack,
        "shop",
        &deployment(
            "shop",
            container_port,
            &json!({ POD_IP_ANNOTATION: ip.to_string() }),
        ),
        &service(
            "shop",
            80,
            &json!({
                "prometheus.io/scrape": "true",
                "prometheus.io/port": container_port.to_string(),
            }),
        ),
        |target| {
            pacto_manifest(
                "shop",
                &http_contract("shop", Some(("metrics", "/metrics"))),
                target,
            )
        },
    )
    .await;
    // The scrape went to the pod IP (the Service's DNS name resolves nowhere here).
    let scrapes = eventually("a scrape of /metrics", STATUS_DEADLINE, || {
        std::future::ready(Some(server.hits("/metrics")).filter(|n| *n > 0))
    })
    .await;
    assert!(scrapes > 0);
    let endpoints = stack
        .kubectl(
            &[
                "get",
                "endpointslices",
                "-n",
                &stack.namespace,
                "-l",
                "kubernetes.io/service-name=shop",
                "-o",
                "jsonpath={.items[*].endpoints[*].addresses[*]}",
            ],
            None,
        )
        .await
        .unwrap();
    assert_eq!(endpoints.trim(), ip.to_string());
    let described = stack.describe_pacto("shop").await.unwrap();
    assert_eq!(
        described_status(&described),
        Some("Compliant"),
        "{described}"
    );
    assert!(!described.contains("ValidationFailed"), "{described}");
    assert!(
        !described.contains("OBSERVATION_UNSUPPORTED"),
        "{described}"
    );
}

/// "Status is NonCompliant": a mismatch is NonCompliant on the first reconcile that observes it;
/// an absence reads Unknown until the negative streak spans the stabilization window. Creating
/// the missing ConfigMap recovers the contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_mismatch_at_once_absence_after_the_window() {
    let stack = Stack::start().await.unwrap();
    // A contract with a required configuration and its schema in the bundle.
    let reference = stack.push_settings_bundle().await.unwrap();
    stack
        .apply(&deployment("settings", 8080, &json!({})))
        .await
        .unwrap();
    let config_map = |name: &str, value: &str| {
        serde_norway::to_string(&json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name },
            "data": { "config.yaml": value },
        }))
        .unwrap()
    };
    let bound_to = |config_map: &str| {
        json!({
            "workloadRef": { "name": "settings", "kind": "Deployment" },
            "configBindings": [{
                "configuration": "app", "kind": "ConfigMap", "name": config_map,
                "key": "config.yaml", "format": "yaml",
            }],
        })
    };
    let contract_ref = json!({ "oci": reference });

    // A ConfigMap whose value violates the schema: NonCompliant at once, no streak.
    stack
        .apply(&config_map("bad-config", "port: eighty\n"))
        .await
        .unwrap();
    stack
        .apply(&pacto_manifest(
            "mismatch",
            &contract_ref,
            &bound_to("bad-config"),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("mismatch", "NonCompliant", STATUS_DEADLINE)
        .await
        .unwrap();
    let finding = only_finding(&pacto, "configuration/app");
    assert_eq!(finding["code"], "CONFIGURATION_MISMATCH", "{finding}");
    assert_eq!(finding["severity"], "error", "{finding}");
    assert_eq!(
        finding["message"],
        "configuration \"app\" exists but does not conform to the declared schema",
        "{finding}"
    );
    assert_k8s_evidence(&finding);
    assert!(windows(&pacto).is_empty(), "{pacto:#}");
    assert_eq!(condition(&pacto, "RuntimeObserved").unwrap().1, "Found");
    let described = stack
        .wait_describe(
            "mismatch",
            &[
                "ValidationFailed",
                "ContractStatus: NonCompliant, 1 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();
    // It never read Unknown on the way.
    assert!(
        !described.contains("ContractStatus: Unknown"),
        "{described}"
    );

    // A missing ConfigMap: Unknown inside the window, with the streak recorded …
    stack
        .apply(&window_pacto_manifest(
            "absent",
            &contract_ref,
            &bound_to("app-config"),
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("absent", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    let finding = only_finding(&pacto, "configuration/app");
    assert_eq!(finding["code"], "EVIDENCE_INSUFFICIENT", "{finding}");
    assert_eq!(finding["severity"], "unknown", "{finding}");
    assert_eq!(
        windows(&pacto),
        [("configuration".to_owned(), "app".to_owned())],
        "{pacto:#}"
    );
    stack
        .wait_describe(
            "absent",
            &[
                "ValidationFailed",
                "ContractStatus: Unknown, 0 errors, 0 warnings",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    // … and NonCompliant once the streak spans the 5 s window (no nudge: the requeue follows the
    // window's end).
    let pacto = stack
        .wait_contract_status("absent", "NonCompliant", WINDOW_CONFIRMATION)
        .await
        .unwrap();
    let finding = only_finding(&pacto, "configuration/app");
    assert_eq!(finding["code"], "CONFIGURATION_ABSENT", "{finding}");
    assert_eq!(finding["severity"], "error", "{finding}");
    assert_eq!(
        finding["message"], "required configuration \"app\" is absent at runtime",
        "{finding}"
    );
    assert_k8s_evidence(&finding);
    stack
        .wait_describe(
            "absent",
            &["ContractStatus: NonCompliant, 1 errors, 0 warnings"],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();

    // Creating a conforming ConfigMap recovers it (no nudge: the binding's ConfigMap is watched;
    // the regular check is an hour away).
    stack
        .apply(&config_map("app-config", "port: 8080\n"))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("absent", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(findings(&pacto).is_empty(), "{pacto:#}");
    assert!(windows(&pacto).is_empty(), "{pacto:#}");
    stack
        .wait_describe("absent", &["ContractRecovered"], STATUS_DEADLINE)
        .await
        .unwrap();
}

/// "Status is Unknown" → EVIDENCE_MISSING: `spec.target.serviceName` does not match a real
/// Service, so no interface observation was produced. Creating the Service later resolves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_missing_for_a_service_that_does_not_exist() {
    let stack = Stack::start().await.unwrap();
    let target = json!({
        "serviceName": "ghost",
        "interfaceBindings": [{ "interface": "http", "servicePort": "http" }],
    });
    stack
        .apply(&pacto_manifest(
            "ghost",
            &http_contract("ghost", None),
            &target,
        ))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("ghost", "Unknown", STATUS_DEADLINE)
        .await
        .unwrap();
    // The missing target has a finding of its own, first; the interface's follows.
    let all = findings(&pacto);
    assert_eq!(all.len(), 2, "{pacto:#}");
    let target = &all[0];
    let ghost = format!("service/{}/ghost", stack.namespace);
    assert_eq!(target["subject"], ghost.as_str(), "{target}");
    assert_eq!(target["code"], "EVIDENCE_MISSING", "{target}");
    assert_eq!(target["severity"], "unknown", "{target}");
    let finding = all[1].clone();
    assert_eq!(finding["subject"], "interface/http", "{finding}");
    assert_eq!(finding["code"], "EVIDENCE_MISSING", "{finding}");
    assert_eq!(finding["severity"], "unknown", "{finding}");
    assert_eq!(finding["category"], "Inconclusive", "{finding}");
    assert_eq!(
        finding["message"], "no observation was produced for required interface \"http\"",
        "{finding}"
    );
    // No matched observation: the reference dates the reading only.
    let refs = finding["evidenceRefs"].as_array().expect("evidenceRefs");
    assert_eq!(refs.len(), 1, "{finding}");
    assert_eq!(refs[0]["source"], "k8s", "{finding}");
    assert!(refs[0]["observedAt"].is_string(), "{finding}");
    assert!(refs[0].get("collector").is_none(), "{finding}");
    assert!(refs[0].get("detectedAt").is_none(), "{finding}");
    // A Service that is not there is not a failed query.
    assert_eq!(
        condition(&pacto, "RuntimeObserved").unwrap().1,
        "Found",
        "{pacto:#}"
    );
    assert_eq!(
        pacto["status"]["resources"]["service"],
        json!({ "name": "ghost", "exists": false }),
        "{pacto:#}"
    );
    assert_eq!(pacto["status"]["summary"]["unknownCount"], 2, "{pacto:#}");
    assert_eq!(pacto["status"]["summary"]["errorCount"], 0, "{pacto:#}");
    let described = stack
        .wait_describe(
            "ghost",
            &[
                "ValidationFailed",
                "ContractStatus: Unknown, 0 errors, 0 warnings",
                "EVIDENCE_MISSING",
            ],
            STATUS_DEADLINE,
        )
        .await
        .unwrap();
    assert!(described.contains("Warning"), "{described}");
    assert_eq!(described_status(&described), Some("Unknown"), "{described}");

    // The target appears: the Service watch re-observes and the contract is Compliant.
    stack
        .apply(&deployment("ghost", 8080, &json!({})))
        .await
        .unwrap();
    stack
        .apply(&service("ghost", 80, &json!({})))
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("ghost", "Compliant", STATUS_DEADLINE)
        .await
        .unwrap();
    assert!(findings(&pacto).is_empty(), "{pacto:#}");
    assert_eq!(
        pacto["status"]["resources"]["service"],
        json!({ "name": "ghost", "exists": true }),
        "{pacto:#}"
    );
    stack
        .wait_describe("ghost", &["ContractRecovered"], STATUS_DEADLINE)
        .await
        .unwrap();
}
