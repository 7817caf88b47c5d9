//! Cluster tests of the observer against a real kube-apiserver + etcd + kube-controller-manager
//! (pacto-testenv), with Pods made Ready by the workload simulator and EndpointSlices written by
//! the real EndpointSlice controller. Binaries: `scripts/k8s-binaries.sh`.

#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed setup step should fail the test"
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pacto_api::testing::PactoBuilder;
use pacto_api::{ConfigBinding, ConfigBindingKind, Pacto, TargetRef};
use pacto_engine::{
    CapabilityValue, ConfigurationValue, DependencyValue, InterfaceValue, Observation,
    ObservationKind, Outcome, PersistenceValue, Timestamp, Value, WorkloadValue,
};
use pacto_observer::KubeCluster;
use pacto_observer::Prober;
use pacto_observer::Window;
use pacto_observer::{ObserveInput, ObserveOutput, Observer, Options, Target};
use pacto_runtime::testing::{admin_get, eventually};
use serde_json::json;

mod common;
use common::{apply, cluster, later, sibling};

/// An observer reading through reflector caches (as the binary does), cluster-wide. The caches
/// live as long as the test's runtime.
fn observer(client: &Client, options: Options, overrides: &[(String, SocketAddr)]) -> Observer {
    Observer::new(
        KubeCluster::cached(
            client.clone(),
            None,
            &pacto_runtime::CancellationToken::new(),
        ),
        Prober::with_overrides(overrides).unwrap(),
        options,
    )
}

fn target(ns: &str, spec: serde_json::Value) -> Target {
    Target {
        namespace: ns.to_owned(),
        pacto_name: "under-test".to_owned(),
        spec: serde_json::from_value::<TargetRef>(spec).unwrap(),
    }
}

fn input(target: Target, contract: &str, windows: Vec<Window>) -> ObserveInput {
    ObserveInput {
        target,
        contract: std::sync::Arc::new(
            pacto_contract::parse_contract(contract.as_bytes())
                .unwrap()
                .1,
        ),
        schemas: BTreeMap::new(),
        contract_ref: "oci://registry.example/acme/under-test:1.0.0".to_owned(),
        windows,
        stabilization_window: None,
    }
}

fn find(out: &ObserveOutput, kind: ObservationKind, name: &str) -> Option<Observation> {
    out.evidence
        .observations()
        .iter()
        .find(|o| o.kind == kind && o.subject.name == name)
        .cloned()
}

fn outcome(out: &ObserveOutput, kind: ObservationKind, name: &str) -> Option<Outcome> {
    find(out, kind, name).map(|o| o.outcome)
}

fn deployment(name: &str, port: i32, ready: bool) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {pacto_testenv::simulator::READY_ANNOTATION: ready.to_string()}
                },
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.example/app:1",
                    "ports": [{"name": "web", "containerPort": port}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": port}}
                }]}
            }
        }
    })
}

fn service(name: &str, selector: &str, ports: &serde_json::Value) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {"selector": {"app": selector}, "ports": ports}
    })
}

/// How long a relevant change may take to reach a WatchTargets subscriber before the test calls
/// it "not notified": generous, since the API server shares a small machine with other jobs.
const NOTIFIED: Duration = Duration::from_secs(30);

const WEB_CONTRACT: &str = r#"
pactoVersion: "2.0"
service:
  name: web
  version: 1.0.0
workload: service
interfaces:
  - name: api
    type: openapi
    ref: interfaces/openapi.yaml
capabilities:
  - type: health
    binding:
      type: http
      interface: api
      path: /healthz
state:
  type: stateful
  persistence:
    scope: local
    durability: persistent
"#;

fn present(interface_type: &str, present: bool) -> Outcome {
    Outcome::Observed(Value::Interface(InterfaceValue {
        interface_type: interface_type.to_owned(),
        present,
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_and_statefulsets_through_the_simulator() {
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-wl").await.unwrap();
    let client = cp.client().unwrap();
    apply::<Deployment>(&client, &ns, deployment("web", 8080, true)).await;
    // named Service port, port != targetPort
    apply::<Service>(
        &client,
        &ns,
        service(
            "web",
            "web",
            &json!([{"name": "http", "port": 80, "targetPort": 8080}]),
        ),
    )
    .await;
    // unnamed Service port, port != targetPort, bound by number
    apply::<Service>(
        &client,
        &ns,
        service(
            "web-unnamed",
            "web",
            &json!([{"port": 80, "targetPort": 8080}]),
        ),
    )
    .await;
    let observer = observer(&client, Options::default(), &[]);

    let named = target(
        &ns,
        json!({"serviceName": "web", "interfaceBindings": [{"interface": "api", "servicePort": "http"}]}),
    );
    let out = eventually(
        "web to have a Ready endpoint",
        Duration::from_mins(1),
        || {
            let observer = observer.clone();
            let named = named.clone();
            async move {
                let out = observer
                    .observe(input(named, WEB_CONTRACT, vec![]), Timestamp::now())
                    .await;
                (outcome(&out, ObservationKind::InterfaceObserved, "api")
                    == Some(present("openapi", true)))
                .then_some(out)
            }
        },
    )
    .await;
    assert!(out.api_errors.is_empty(), "{:?}", out.api_errors);
    assert!(out.windows.is_empty());
    assert_eq!(
        outcome(&out, ObservationKind::WorkloadObserved, "web"),
        Some(Outcome::Observed(Value::Workload(WorkloadValue {
            workload_type: "service".into()
        })))
    );
    // a Deployment without volumes is ephemeral: a mismatch, immediately
    assert_eq!(
        outcome(&out, ObservationKind::PersistenceObserved, "web"),
        Some(Outcome::Observed(Value::Persistence(PersistenceValue {
            durable: false
        })))
    );
    // passive health: an httpGet readiness probe on the bound port with the declared path + Ready
    assert_eq!(
        outcome(&out, ObservationKind::CapabilityObserved, "health"),
        Some(Outcome::Observed(Value::Capability(CapabilityValue {
            present: true
        })))
    );
    let provenance = &find(&out, ObservationKind::InterfaceObserved, "api")
        .unwrap()
        .provenance;
    assert_eq!(provenance.collector, "k8s-observer");
    assert_eq!(out.evidence.source, "k8s");
    assert_eq!(out.evidence.subject.name, format!("{ns}/web"));
    let snapshot = &out.snapshot;
    assert!(snapshot.service.as_ref().unwrap().exists);
    assert!(snapshot.workload.as_ref().unwrap().exists);
    let runtime = snapshot.observed_runtime.as_ref().unwrap();
    assert_eq!(runtime.workload_kind, "Deployment");
    assert_eq!(runtime.container_images, ["registry.example/app:1"]);

    // the unnamed port is matched by its resolved targetPort, never by the Service port number
    let unnamed = target(
        &ns,
        json!({"serviceName": "web-unnamed", "workloadRef": {"name": "web"},
               "interfaceBindings": [{"interface": "api", "servicePort": 80}]}),
    );
    // (its EndpointSlice is written separately from web's, so it may reach the cache later; a
    // wrong port match never turns present and fails at the deadline)
    eventually(
        "web-unnamed to have a Ready endpoint matched by targetPort",
        Duration::from_mins(1),
        || {
            let observer = observer.clone();
            let unnamed = unnamed.clone();
            async move {
                let out = observer
                    .observe(input(unnamed, WEB_CONTRACT, vec![]), Timestamp::now())
                    .await;
                (outcome(&out, ObservationKind::InterfaceObserved, "api")
                    == Some(present("openapi", true)))
                .then_some(())
            }
        },
    )
    .await;

    // a StatefulSet with volumeClaimTemplates is durable; its pods become Ready through the simulator
    apply::<StatefulSet>(
        &client,
        &ns,
        json!({
            "metadata": {"name": "db"},
            "spec": {
                "serviceName": "db",
                "replicas": 1,
                "selector": {"matchLabels": {"app": "db"}},
                "template": {
                    "metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "db", "image": "registry.example/db:1",
                                             "ports": [{"name": "pg", "containerPort": 5432}]}]}
                },
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                }]
            }
        }),
    )
    .await;
    apply::<Service>(
        &client,
        &ns,
        service("db", "db", &json!([{"name": "pg", "port": 5432}])),
    )
    .await;
    let db = target(
        &ns,
        json!({"serviceName": "db", "workloadRef": {"name": "db", "kind": "StatefulSet"},
               "interfaceBindings": [{"interface": "api", "servicePort": "pg"}]}),
    );
    let contract = WEB_CONTRACT
        .replace("name: web", "name: db")
        .replace("workload: service", "workload: job");
    let out = eventually(
        "db to have a Ready endpoint",
        Duration::from_mins(1),
        || {
            let observer = observer.clone();
            let db = db.clone();
            let contract = contract.clone();
            async move {
                let out = observer
                    .observe(input(db, &contract, vec![]), Timestamp::now())
                    .await;
                (outcome(&out, ObservationKind::InterfaceObserved, "api")
                    == Some(present("openapi", true)))
                .then_some(out)
            }
        },
    )
    .await;
    assert_eq!(
        outcome(&out, ObservationKind::PersistenceObserved, "db"),
        Some(Outcome::Observed(Value::Persistence(PersistenceValue {
            durable: true
        })))
    );
    // explicit kind: the type mismatch is a confirmed observation (WORKLOAD_MISMATCH downstream)
    assert_eq!(
        outcome(&out, ObservationKind::WorkloadObserved, "db"),
        Some(Outcome::Observed(Value::Workload(WorkloadValue {
            workload_type: "service".into()
        })))
    );
    // the same mismatch with an implicit kind is only Insufficient
    let implicit = target(&ns, json!({"workloadRef": {"name": "web"}}));
    let out = observer
        .observe(
            input(
                implicit,
                &WEB_CONTRACT.replace("workload: service", "workload: job"),
                vec![],
            ),
            Timestamp::now(),
        )
        .await;
    assert_eq!(
        outcome(&out, ObservationKind::WorkloadObserved, "web"),
        Some(Outcome::Insufficient)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_interfaces_are_windowed_and_external_names_insufficient() {
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-if").await.unwrap();
    let client = cp.client().unwrap();
    // pods exist but are not Ready
    apply::<Deployment>(&client, &ns, deployment("web", 8080, false)).await;
    apply::<Service>(
        &client,
        &ns,
        service(
            "web",
            "web",
            &json!([{"name": "http", "port": 80, "targetPort": 8080}]),
        ),
    )
    .await;
    apply::<Service>(
        &client,
        &ns,
        json!({"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}}),
    )
    .await;
    let observer = observer(&client, Options::default(), &[]);
    let web = target(
        &ns,
        json!({"serviceName": "web", "interfaceBindings": [{"interface": "api", "servicePort": "http"}]}),
    );
    let t0 = Timestamp::now();
    let first = observer
        .observe(input(web.clone(), WEB_CONTRACT, vec![]), t0)
        .await;
    assert_eq!(
        outcome(&first, ObservationKind::InterfaceObserved, "api"),
        Some(Outcome::Insufficient),
        "zero Ready endpoints inside the window"
    );
    assert_eq!(first.windows.len(), 1);
    assert_eq!(first.windows[0].key.to_string(), "interface/api");
    assert_eq!(first.windows[0].first_observed_negative_at, t0);
    // passive health never contradicts: has probe, no Ready endpoint -> Insufficient
    assert_eq!(
        outcome(&first, ObservationKind::CapabilityObserved, "health"),
        Some(Outcome::Insufficient)
    );
    let confirmed = observer
        .observe(
            input(web, WEB_CONTRACT, first.windows.clone()),
            later(t0, 121),
        )
        .await;
    assert_eq!(
        outcome(&confirmed, ObservationKind::InterfaceObserved, "api"),
        Some(present("openapi", false)),
        "beyond the window the absence is confirmed"
    );
    assert_eq!(confirmed.windows, first.windows, "the streak start is kept");

    let ext = target(
        &ns,
        json!({"serviceName": "ext", "interfaceBindings": [{"interface": "api", "servicePort": 80}]}),
    );
    let out = observer.observe(input(ext, WEB_CONTRACT, vec![]), t0).await;
    assert_eq!(
        outcome(&out, ObservationKind::InterfaceObserved, "api"),
        Some(Outcome::Insufficient)
    );
    // a missing Service gives no observation at all (EVIDENCE_MISSING downstream)
    let missing = target(
        &ns,
        json!({"serviceName": "nope", "interfaceBindings": [{"interface": "api", "servicePort": 80}]}),
    );
    let out = observer
        .observe(input(missing, WEB_CONTRACT, vec![]), t0)
        .await;
    assert_eq!(
        outcome(&out, ObservationKind::InterfaceObserved, "api"),
        None
    );
    assert!(!out.snapshot.service.as_ref().unwrap().exists);
}

const CONFIG_CONTRACT: &str = r#"
pactoVersion: "2.0"
service:
  name: cfg
  version: 1.0.0
configurations:
  - name: good
    required: true
    schema: configuration/schema.json
  - name: bad
    required: true
    schema: configuration/schema.json
  - name: missing-map
    required: true
    schema: configuration/schema.json
  - name: token
    required: true
  - name: missing-token
    required: true
  - name: unbound
    required: true
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_configmaps_and_secrets() {
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-cfg").await.unwrap();
    let client = cp.client().unwrap();
    apply::<ConfigMap>(
        &client,
        &ns,
        json!({"metadata": {"name": "good"}, "data": {"app.yaml": "port: 8080\n"}}),
    )
    .await;
    apply::<ConfigMap>(
        &client,
        &ns,
        json!({"metadata": {"name": "bad"}, "data": {"app.json": "{\"port\": \"eighty\"}"}}),
    )
    .await;
    apply::<Secret>(
        &client,
        &ns,
        json!({"metadata": {"name": "token"}, "stringData": {"token": "s3cr3t"}}),
    )
    .await;
    let secrets = Options {
        observe_secrets: true,
        ..Options::default()
    };
    let observer = observer(&client, secrets, &[]);
    let t = target(
        &ns,
        json!({"configBindings": [
            {"configuration": "good", "kind": "ConfigMap", "name": "good", "key": "app.yaml", "format": "yaml"},
            {"configuration": "bad", "kind": "ConfigMap", "name": "bad", "key": "app.json", "format": "json"},
            {"configuration": "missing-map", "kind": "ConfigMap", "name": "nope", "key": "x", "format": "json"},
            {"configuration": "token", "kind": "Secret", "name": "token"},
            {"configuration": "missing-token", "kind": "Secret", "name": "no-such-secret"}
        ]}),
    );
    let schema =
        br#"{"type":"object","required":["port"],"properties":{"port":{"type":"integer"}}}"#;
    let mut request = input(t.clone(), CONFIG_CONTRACT, vec![]);
    for name in ["good", "bad", "missing-map"] {
        request.schemas.insert(name.to_owned(), schema.to_vec());
    }
    let t0 = Timestamp::now();
    let out = observer.observe(request.clone(), t0).await;
    assert!(out.api_errors.is_empty(), "{:?}", out.api_errors);
    let cfg = |present, conformant| {
        Some(Outcome::Observed(Value::Configuration(
            ConfigurationValue {
                present,
                conformant,
            },
        )))
    };
    let get = |out: &ObserveOutput, n: &str| outcome(out, ObservationKind::ConfigurationPresent, n);
    assert_eq!(get(&out, "good"), cfg(true, true));
    assert_eq!(
        get(&out, "bad"),
        cfg(true, false),
        "a mismatch is immediate"
    );
    assert_eq!(get(&out, "missing-map"), Some(Outcome::Insufficient));
    assert_eq!(
        get(&out, "token"),
        Some(Outcome::Insufficient),
        "Secrets: existence only"
    );
    assert_eq!(get(&out, "missing-token"), Some(Outcome::Insufficient));
    assert_eq!(get(&out, "unbound"), Some(Outcome::Unsupported));
    let keys: Vec<String> = out.windows.iter().map(|w| w.key.to_string()).collect();
    assert_eq!(
        keys,
        ["configuration/missing-map", "configuration/missing-token"]
    );

    request.windows = out.windows.clone();
    let out = observer.observe(request.clone(), later(t0, 120)).await;
    assert_eq!(get(&out, "missing-map"), cfg(false, false));
    assert_eq!(get(&out, "missing-token"), cfg(false, false));

    // the Secret appears: the window is cleared
    apply::<Secret>(
        &client,
        &ns,
        json!({"metadata": {"name": "no-such-secret"}, "stringData": {"k": "v"}}),
    )
    .await;
    request.windows = out.windows.clone();
    let out = observer.observe(request, later(t0, 130)).await;
    assert_eq!(get(&out, "missing-token"), Some(Outcome::Insufficient));
    let keys: Vec<String> = out.windows.iter().map(|w| w.key.to_string()).collect();
    assert_eq!(keys, ["configuration/missing-map"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_resolve_through_sibling_pactos() {
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-dep").await.unwrap();
    let other = cp.create_namespace("obs-dep2").await.unwrap();
    let client = cp.client().unwrap();
    // unique repositories per test run: Pactos are listed cluster-wide
    let repo = |n: &str| format!("registry.example/{ns}/{n}");
    apply::<Deployment>(&client, &ns, deployment("cache", 6379, true)).await;
    apply::<Service>(
        &client,
        &ns,
        service("cache", "cache", &json!([{"port": 6379}])),
    )
    .await;
    sibling(
        &client,
        &ns,
        "cache",
        Some("cache"),
        &format!("{}:1.2.0", repo("cache")),
    )
    .await;
    apply::<Service>(
        &client,
        &ns,
        json!({"metadata": {"name": "pg"}, "spec": {"type": "ExternalName", "externalName": "pg.example.com"}}),
    )
    .await;
    sibling(
        &client,
        &ns,
        "pg",
        Some("pg"),
        &format!("{}:16.0.0", repo("pg")),
    )
    .await;
    sibling(
        &client,
        &ns,
        "blue",
        Some("q"),
        &format!("{}:1.0.0", repo("queue")),
    )
    .await;
    sibling(
        &client,
        &other,
        "green",
        Some("q"),
        &format!("{}:1.0.0", repo("queue")),
    )
    .await;
    sibling(&client, &ns, "lib", None, &format!("{}:1.0.0", repo("lib"))).await;
    sibling(
        &client,
        &ns,
        "gone",
        Some("gone"),
        &format!("{}:1.0.0", repo("gone")),
    )
    .await;
    let contract = format!(
        r#"
pactoVersion: "2.0"
service:
  name: app
  version: 1.0.0
dependencies:
  - name: cache
    ref: oci://{cache}:1.0.0
    required: true
    compatibility: ^1.0.0
  - name: cache-v2
    ref: oci://{cache}:2.0.0
    required: false
    compatibility: ^2.0.0
  - name: pg
    ref: oci://{pg}:16.0.0
    required: true
  - name: queue
    ref: oci://{queue}:1.0.0
    required: true
  - name: lib
    ref: oci://{lib}:1.0.0
    required: true
  - name: gone
    ref: oci://{gone}:1.0.0
    required: true
"#,
        cache = repo("cache"),
        pg = repo("pg"),
        queue = repo("queue"),
        lib = repo("lib"),
        gone = repo("gone"),
    );
    let observer = observer(&client, Options::default(), &[]);
    let t = target(&ns, json!({"serviceName": "app"}));
    let t0 = Timestamp::now();
    let out = eventually("cache to be reachable", Duration::from_mins(1), || {
        let observer = observer.clone();
        let request = input(t.clone(), &contract, vec![]);
        async move {
            let out = observer.observe(request, t0).await;
            (outcome(&out, ObservationKind::DependencyReachable, "cache")
                == Some(Outcome::Observed(Value::Dependency(DependencyValue {
                    reachable: true,
                }))))
            .then_some(out)
        }
    })
    .await;
    let get = |n: &str| outcome(&out, ObservationKind::DependencyReachable, n);
    assert_eq!(
        get("cache-v2"),
        Some(Outcome::Unsupported),
        "no compatible sibling"
    );
    assert_eq!(get("pg"), Some(Outcome::Unsupported), "ExternalName");
    assert_eq!(get("queue"), Some(Outcome::Insufficient), "ambiguous");
    assert_eq!(
        get("lib"),
        Some(Outcome::Insufficient),
        "reference-only sibling"
    );
    assert_eq!(
        get("gone"),
        Some(Outcome::Insufficient),
        "Service missing: windowed"
    );
    let keys: Vec<String> = out.windows.iter().map(|w| w.key.to_string()).collect();
    assert_eq!(keys, ["dependency/gone"]);
    assert_eq!(
        out.dependency_edges.services.len(),
        3,
        "{:?}",
        out.dependency_edges
    );
}

/// A real local HTTP server: `/ok` → 200, `/missing` → 404, anything else → 500.
async fn http_server() -> SocketAddr {
    http_server_on(std::net::Ipv4Addr::LOCALHOST.into()).await
}

/// This host's non-loopback IPv4 address (EndpointSlices refuse loopback addresses): the source
/// address of a route to a private address (a UDP connect sends nothing).
fn host_ip() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket.connect("10.255.255.255:9").unwrap();
    let ip = socket.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback(),
        "this test needs a non-loopback IPv4 address, found {ip}"
    );
    ip
}

async fn http_server_on(ip: std::net::IpAddr) -> SocketAddr {
    use http_body_util::Full;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let (status, body): (u16, &'static [u8]) = match req.uri().path() {
                        "/ok" => (200, b"ok"),
                        "/metrics" => (200, b"# TYPE up gauge\nup 1\n"),
                        "/missing" => (404, b"not found"),
                        _ => (500, b"boom"),
                    };
                    hyper::Response::builder()
                        .status(status)
                        .header("content-type", "text/plain; version=0.0.4")
                        .body(Full::new(body))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

fn health_contract(path: &str) -> String {
    format!(
        r#"
pactoVersion: "2.0"
service:
  name: probe
  version: 1.0.0
interfaces:
  - name: api
    type: openapi
    ref: interfaces/openapi.yaml
capabilities:
  - type: health
    binding:
      type: http
      interface: api
      path: {path}
  - type: metrics
    binding:
      type: http
      interface: api
      path: /metrics
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_health_probe_against_a_real_http_server() {
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-probe").await.unwrap();
    let client = cp.client().unwrap();
    let server = http_server().await;
    apply::<Service>(
        &client,
        &ns,
        service(
            "probe",
            "probe",
            &json!([{"name": "http", "port": server.port()}]),
        ),
    )
    .await;
    let overrides = [(format!("probe.{ns}.svc"), server)];
    let options = Options {
        enable_probing: true,
        enable_metrics: true,
        ..Options::default()
    };
    let observer = observer(&client, options, &overrides);
    let t = target(
        &ns,
        json!({"serviceName": "probe", "interfaceBindings": [{"interface": "api", "servicePort": "http"}]}),
    );
    let t0 = Timestamp::now();
    let health = |out: &ObserveOutput| outcome(out, ObservationKind::CapabilityObserved, "health");
    let capability = |present| {
        Some(Outcome::Observed(Value::Capability(CapabilityValue {
            present,
        })))
    };

    let out = observer
        .observe(input(t.clone(), &health_contract("/ok"), vec![]), t0)
        .await;
    assert_eq!(health(&out), capability(true), "200");
    // metrics: no monitors (CRDs not installed), no annotations, no named port → the contract
    // path on the bound port is scraped and parses
    assert_eq!(
        outcome(&out, ObservationKind::CapabilityObserved, "metrics"),
        capability(true)
    );
    assert!(
        out.api_errors.is_empty(),
        "monitor discovery never fails the observation: {:?}",
        out.api_errors
    );

    let out = observer
        .observe(input(t.clone(), &health_contract("/boom"), vec![]), t0)
        .await;
    assert_eq!(health(&out), Some(Outcome::Insufficient), "500");
    assert!(
        !out.windows
            .iter()
            .any(|w| w.key.to_string() == "capability/health"),
        "a 500 is not an absence"
    );

    let out = observer
        .observe(input(t.clone(), &health_contract("missing"), vec![]), t0)
        .await;
    assert_eq!(
        health(&out),
        Some(Outcome::Insufficient),
        "404 inside the window"
    );
    assert!(
        out.windows
            .iter()
            .any(|w| w.key.to_string() == "capability/health")
    );
    let out = observer
        .observe(
            input(t.clone(), &health_contract("/missing"), out.windows.clone()),
            later(t0, 120),
        )
        .await;
    assert_eq!(health(&out), capability(false), "404 beyond the window");

    // metrics observation off → Unsupported, with probing still on
    let observer = self::observer(
        &client,
        Options {
            enable_probing: true,
            ..Options::default()
        },
        &overrides,
    );
    let out = observer
        .observe(input(t, &health_contract("/ok"), vec![]), t0)
        .await;
    assert_eq!(
        outcome(&out, ObservationKind::CapabilityObserved, "metrics"),
        Some(Outcome::Unsupported)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_targets_notifies_relevant_changes_only() {
    use futures::StreamExt;
    use pacto_observer::watch::{TargetHub, spawn_watchers};
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-watch").await.unwrap();
    let client = cp.client().unwrap();
    let hub = TargetHub::new();
    let shutdown = pacto_runtime::CancellationToken::new();
    let _guard = shutdown.clone().drop_guard();
    let mut ready = spawn_watchers(&client, None, &hub, &shutdown);
    ready.wait().await;
    let pactos: Api<Pacto> = Api::namespaced(client.clone(), &ns);
    let pacto = PactoBuilder::inline("watched", "pactoVersion: \"2.0\"\n")
        .target(TargetRef {
            service_name: Some("watched-svc".into()),
            config_bindings: vec![ConfigBinding {
                configuration: "c".into(),
                kind: ConfigBindingKind::ConfigMap,
                name: "watched-cm".into(),
                key: None,
                format: None,
            }],
            ..TargetRef::default()
        })
        .build();
    pactos.create(&PostParams::default(), &pacto).await.unwrap();
    let key = (ns.clone(), "watched".to_owned());
    eventually("the Pacto to be indexed", Duration::from_secs(10), || {
        let known = hub.knows(&key);
        async move { known.then_some(()) }
    })
    .await;
    let mut stream = Box::pin(hub.subscribe(ns.clone(), shutdown.clone()));
    let svc: Api<Service> = Api::namespaced(client.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // relevant: the target Service is created
    apply::<Service>(
        &client,
        &ns,
        service("watched-svc", "none", &json!([{"port": 80}])),
    )
    .await;
    let batch = tokio::time::timeout(NOTIFIED, stream.next())
        .await
        .expect("a notification for the target Service")
        .unwrap();
    assert!(
        batch
            .iter()
            .any(|c| c.pacto == (ns.clone(), "watched".to_owned())),
        "{batch:?}"
    );

    // drain anything else the creation caused (its EndpointSlice)
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(700), stream.next()).await {}

    // relevant: a label change on the Service → notified, in one batch: the EndpointSlice
    // controller copies the label onto the Service's slice, and that copy is no change of the
    // slice (docs/design/observation.md#change-notifications), so no second batch follows (the
    // unrelated churn below must stay silent). Only "notified or not" is checked here, with a
    // generous deadline: this API server shares a small machine with other jobs. The leading
    // send and the window are tested without a clock in `targets.rs`
    // (`a_change_goes_out_at_once_and_what_follows_in_the_window_as_one_batch`); the pipeline
    // bench measures the latency (docs/testing.md).
    svc.patch(
        "watched-svc",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    let batch = tokio::time::timeout(NOTIFIED, stream.next())
        .await
        .expect("notified of the Service label change")
        .unwrap();
    assert_eq!(batch[0].pacto, (ns.clone(), "watched".to_owned()));

    // unrelated churn: another ConfigMap, another Service, the Pacto's own status write
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "unrelated"}, "data": {"a": "b"}}))
            .unwrap(),
    )
    .await
    .unwrap();
    apply::<Service>(
        &client,
        &ns,
        service("other-svc", "none", &json!([{"port": 80}])),
    )
    .await;
    pactos
        .patch_status(
            "watched",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"contractVersion": "9.9.9"}})),
        )
        .await
        .unwrap();
    if let Ok(batch) = tokio::time::timeout(Duration::from_millis(1500), stream.next()).await {
        panic!("no notification for unrelated changes, got {batch:?}");
    }

    // relevant: the bound ConfigMap appears
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "watched-cm"}})).unwrap(),
    )
    .await
    .unwrap();
    let batch = tokio::time::timeout(NOTIFIED, stream.next())
        .await
        .expect("notified of the bound ConfigMap")
        .unwrap();
    assert!(batch[0].reason.contains("ConfigMap"), "{batch:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_and_watch_targets_over_mtls() {
    use futures::StreamExt;
    use pacto_proto::observer as pb;
    use pacto_proto::observer::observer_client::ObserverClient;
    use pacto_runtime::CancellationToken;
    use pacto_runtime::testing::{TestCa, TestEndpoint};

    const SERVER_NAME: &str = "observer.pacto.svc";
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-grpc").await.unwrap();
    let client = cp.client().unwrap();
    apply::<Service>(
        &client,
        &ns,
        service("web", "web", &json!([{"name": "http", "port": 80}])),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("observer test CA").unwrap();
    let (endpoint, config) =
        TestEndpoint::bind(&ca, dir.path(), SERVER_NAME, &["status-writer.pacto.svc"]).await;
    let (addr, admin_addr) = (endpoint.grpc, endpoint.admin);
    let shutdown = CancellationToken::new();
    let hub = pacto_observer::watch::TargetHub::new();
    // As `run` does: the recorder exists before the caches start.
    pacto_runtime::metrics::install_recorder().unwrap();
    let service = pacto_observer::ObserverService::new(
        observer(&client, Options::default(), &[]),
        hub.clone(),
        shutdown.clone(),
    );
    let task = tokio::spawn(pacto_observer::serve(config, service, shutdown.clone()));
    let connect = |name: &str, identity: &str| {
        ObserverClient::new(ca.channel(dir.path(), name, &[identity], addr, SERVER_NAME))
    };
    let request = pb::ObserveRequest {
        target: Some(pb::Target {
            namespace: ns.clone(),
            pacto_name: "web".into(),
            service_name: "web".into(),
            workload_ref: None,
            interface_bindings: vec![pb::InterfaceBinding {
                interface: "api".into(),
                service_port: Some(pb::interface_binding::ServicePort::PortName("http".into())),
            }],
            config_bindings: vec![],
        }),
        contract: Some(pacto_proto::convert::contract_document(WEB_CONTRACT)),
        configuration_schemas: std::collections::HashMap::default(),
        contract_ref: "oci://registry.example/acme/web:1.0.0".into(),
        windows: vec![],
        stabilization_window: Some(pacto_proto::prost_types::Duration {
            seconds: 0,
            nanos: 0,
        }),
    };

    // /readyz turns true once the reflector caches have listed.
    eventually(
        "/readyz to report ready",
        Duration::from_secs(30),
        || async { (admin_get(admin_addr, "/readyz").await.0 == 200).then_some(()) },
    )
    .await;
    let (_, metrics) = admin_get(admin_addr, "/metrics").await;
    assert!(
        metrics.contains("pacto_observer_cache_objects{kind=\"Service\"}"),
        "cache sizes are exposed: {metrics}"
    );
    let mut allowed = connect("status-writer", "status-writer.pacto.svc");
    let response = allowed.observe(request.clone()).await.unwrap().into_inner();
    let evidence = response.evidence.unwrap();
    assert_eq!(evidence.source, "k8s");
    assert_eq!(evidence.subject.unwrap().name, format!("{ns}/web"));
    assert_eq!(
        response.windows.len(),
        1,
        "the no-endpoint interface starts a streak"
    );
    assert_eq!(response.windows[0].kind, "interface");
    assert!(response.api_errors.is_empty());
    let snapshot = response.snapshot.unwrap();
    assert!(snapshot.service.unwrap().exists);
    assert!(!snapshot.workload.unwrap().exists);

    // a zero stabilization window confirms the streak on the next call
    let mut again = request.clone();
    again.windows = response.windows.clone();
    let response = allowed.observe(again).await.unwrap().into_inner();
    let observation = response
        .evidence
        .unwrap()
        .observations
        .into_iter()
        .find(|o| o.subject.as_ref().is_some_and(|s| s.name == "api"))
        .unwrap();
    assert_eq!(
        observation.outcome(),
        pacto_proto::common::Outcome::Observed
    );

    // bad argument → InvalidArgument naming the field
    let mut bad = request.clone();
    bad.target.as_mut().unwrap().namespace.clear();
    let status = allowed.observe(bad).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "target.namespace: required");

    // wrong identity → PermissionDenied
    let mut intruder = connect("intruder", "node-agent.pacto.svc");
    let status = intruder.observe(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied);

    // WatchTargets: a stream that ends with OK at shutdown
    let mut stream = allowed
        .watch_targets(pb::WatchTargetsRequest {
            namespace: ns.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    shutdown.cancel();
    let end = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("the stream ends at shutdown");
    assert!(end.as_ref().is_none_or(Result::is_ok), "{end:?}");
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("server drains")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_discovery_with_and_without_the_servicemonitor_crd() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};

    let cp = cluster().await;
    let ns = cp.create_namespace("obs-metrics").await.unwrap();
    let client = cp.client().unwrap();
    let server = http_server_on(host_ip()).await;
    // a Service selecting one simulated pod whose IP is this host's, so the EndpointSlice
    // controller writes a slice (managed-by label, Pod targetRef) pointing at the local server;
    // the observer scrapes only such endpoints, never hand-made ones
    apply::<Service>(
        &client,
        &ns,
        json!({"metadata": {"name": "mon", "labels": {"team": "obs"}},
               "spec": {"selector": {"app": "mon"},
                        "ports": [{"name": "http", "port": server.port(), "targetPort": "http"}]}}),
    )
    .await;
    let mut pod = deployment("mon", i32::from(server.port()), true);
    pod["spec"]["template"]["metadata"]["annotations"]
        [pacto_testenv::simulator::POD_IP_ANNOTATION] = json!(server.ip().to_string());
    pod["spec"]["template"]["spec"]["containers"][0]["ports"][0]["name"] = json!("http");
    apply::<Deployment>(&client, &ns, pod).await;
    let overrides = [(format!("mon.{ns}.svc"), server)];
    let options = Options {
        enable_metrics: true,
        ..Options::default()
    };
    let observer = observer(&client, options, &overrides);
    let t = target(
        &ns,
        json!({"serviceName": "mon", "interfaceBindings": [{"interface": "api", "servicePort": "http"}]}),
    );
    // the contract path answers 500: only monitor discovery can make the capability present
    let contract = health_contract("/ok").replace("path: /metrics", "path: /boom");
    let metrics =
        |out: &ObserveOutput| outcome(out, ObservationKind::CapabilityObserved, "metrics");

    // CRD not installed: the monitor lookups fall through silently to the contract path
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let installed = crds
        .get_opt("servicemonitors.monitoring.coreos.com")
        .await
        .unwrap()
        .is_some();
    if !installed {
        let out = observer
            .observe(input(t.clone(), &contract, vec![]), Timestamp::now())
            .await;
        assert_eq!(
            metrics(&out),
            Some(Outcome::Insufficient),
            "500 on the contract path"
        );
        assert!(out.api_errors.is_empty(), "{:?}", out.api_errors);
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
            "spec": {
                "group": "monitoring.coreos.com",
                "scope": "Namespaced",
                "names": {"plural": "servicemonitors", "singular": "servicemonitor",
                          "kind": "ServiceMonitor", "listKind": "ServiceMonitorList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        }))
        .unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    );
    let monitors: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    eventually(
        "the ServiceMonitor CRD to be served",
        Duration::from_secs(30),
        || {
            let monitors = monitors.clone();
            async move { monitors.list(&ListParams::default()).await.ok().map(|_| ()) }
        },
    )
    .await;
    let monitor: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "mon"},
        "spec": {"selector": {"matchLabels": {"team": "obs"}},
                 "endpoints": [{"port": "http", "path": "/metrics"}]}
    }))
    .unwrap();
    monitors
        .create(&PostParams::default(), &monitor)
        .await
        .unwrap();
    // the pod becomes Ready and its slice reaches the cache asynchronously
    let present = Some(Outcome::Observed(Value::Capability(CapabilityValue {
        present: true,
    })));
    let out = eventually(
        "ServiceMonitor → named port resolved → pod IP scraped",
        Duration::from_mins(1),
        || {
            let (observer, t, contract, present) =
                (&observer, t.clone(), contract.clone(), present.clone());
            async move {
                let out = observer
                    .observe(input(t, &contract, vec![]), Timestamp::now())
                    .await;
                (metrics(&out) == present).then_some(out)
            }
        },
    )
    .await;
    assert!(out.api_errors.is_empty(), "{:?}", out.api_errors);
}

/// The observer's Role of the chart's default (`rbac.secretMetadata: false`): every kind it
/// reads except Secrets.
fn role_without_secrets() -> serde_json::Value {
    let read = json!(["get", "list", "watch"]);
    json!({
        "metadata": {"name": "observer-no-secrets"},
        "rules": [
            {"apiGroups": [""], "resources": ["services", "configmaps"], "verbs": read},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"], "verbs": read},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": read},
            {"apiGroups": ["pacto.trianalab.io"], "resources": ["pactos"], "verbs": read}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_secret_access_bound_secrets_are_honest_unknowns() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use pacto_observer::watch::{TargetHub, spawn_watchers};
    let cp = cluster().await;
    let ns = cp.create_namespace("obs-nosecret").await.unwrap();
    let admin = cp.client().unwrap();
    apply::<ConfigMap>(
        &admin,
        &ns,
        json!({"metadata": {"name": "good"}, "data": {"app.yaml": "port: 8080\n"}}),
    )
    .await;
    apply::<Secret>(
        &admin,
        &ns,
        json!({"metadata": {"name": "token"}, "stringData": {"token": "s3cr3t"}}),
    )
    .await;
    apply::<Role>(&admin, &ns, role_without_secrets()).await;
    apply::<RoleBinding>(
        &admin,
        &ns,
        json!({
            "metadata": {"name": "observer-no-secrets"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "observer-no-secrets"},
            "subjects": [{"kind": "ServiceAccount", "name": "observer", "namespace": ns}]
        }),
    )
    .await;
    let restricted = cp.service_account_client(&ns, "observer").await.unwrap();
    // The identity really lacks Secret rights, and has the others.
    let secrets: Api<Secret> = Api::namespaced(restricted.clone(), &ns);
    let refused = secrets.get_metadata("token").await.unwrap_err();
    assert!(pacto_observer::is_forbidden(&refused), "{refused:?}");

    // `--observe-secrets` given without the access it needs (the chart would grant it with
    // rbac.secretMetadata; an operator passed the flag through extraArgs).
    let observer = Observer::new(
        KubeCluster::cached(
            restricted.clone(),
            Some(ns.clone()),
            &pacto_runtime::CancellationToken::new(),
        ),
        Prober::with_overrides(&[]).unwrap(),
        Options {
            observe_secrets: true,
            ..Options::default()
        },
    );
    let t = target(
        &ns,
        json!({"configBindings": [
            {"configuration": "good", "kind": "ConfigMap", "name": "good", "key": "app.yaml", "format": "yaml"},
            {"configuration": "token", "kind": "Secret", "name": "token"},
            {"configuration": "missing-token", "kind": "Secret", "name": "no-such-secret"}
        ]}),
    );
    let schema =
        br#"{"type":"object","required":["port"],"properties":{"port":{"type":"integer"}}}"#;
    let mut request = input(t, CONFIG_CONTRACT, vec![]);
    request.schemas.insert("good".to_owned(), schema.to_vec());
    let t0 = Timestamp::now();
    let out = observer.observe(request.clone(), t0).await;
    let get = |out: &ObserveOutput, n: &str| outcome(out, ObservationKind::ConfigurationPresent, n);
    // Other kinds still read through the restricted identity.
    assert_eq!(
        get(&out, "good"),
        Some(Outcome::Observed(Value::Configuration(
            ConfigurationValue {
                present: true,
                conformant: true,
            }
        )))
    );
    // Forbidden is an inability to observe: Failed (COLLECTION_FAILED → Unknown), never an
    // absence — not even for a Secret that does not exist — and no absence streak starts.
    assert_eq!(get(&out, "token"), Some(Outcome::Failed));
    assert_eq!(get(&out, "missing-token"), Some(Outcome::Failed));
    assert!(
        out.windows.is_empty(),
        "a refused read starts no absence window: {:?}",
        out.windows
    );
    assert_eq!(out.api_errors.len(), 2, "{:?}", out.api_errors);
    for error in &out.api_errors {
        assert!(
            error.starts_with(&format!("get secrets {ns}/")),
            "names the query: {error}"
        );
        assert!(
            error.contains("rbac.secretMetadata=true"),
            "tells the user the chart value: {error}"
        );
    }
    // Even beyond the stabilization window nothing turns into a violation.
    request.windows = out.windows.clone();
    let out = observer.observe(request.clone(), later(t0, 600)).await;
    assert_eq!(get(&out, "missing-token"), Some(Outcome::Failed));

    // Without `--observe-secrets` (the chart's default): no Secret is requested, no query
    // fails, and each Secret binding is Unsupported with the chart value to set.
    let quiet = Observer::new(
        KubeCluster::cached(
            restricted.clone(),
            Some(ns.clone()),
            &pacto_runtime::CancellationToken::new(),
        ),
        Prober::with_overrides(&[]).unwrap(),
        Options::default(),
    );
    let out = quiet.observe(request, later(t0, 700)).await;
    assert!(out.api_errors.is_empty(), "{:?}", out.api_errors);
    for name in ["token", "missing-token"] {
        let observation = out
            .evidence
            .observations()
            .iter()
            .find(|o| o.kind == ObservationKind::ConfigurationPresent && o.subject.name == name)
            .unwrap();
        assert_eq!(observation.outcome, Outcome::Unsupported, "{name}");
        let detail = observation.detail.as_deref().unwrap_or_default();
        assert!(detail.contains("rbac.secretMetadata=true"), "{detail}");
    }
    assert!(out.windows.is_empty(), "{:?}", out.windows);

    // The watches under the same identity: the refused Secret watch does not hold readiness
    // back (it backs off instead of spinning), and the others work.
    let hub = TargetHub::new();
    let shutdown = pacto_runtime::CancellationToken::new();
    let _guard = shutdown.clone().drop_guard();
    let mut ready = spawn_watchers(&restricted, Some(&ns), &hub, &shutdown);
    tokio::time::timeout(Duration::from_secs(30), ready.wait())
        .await
        .expect("the watches are ready although the Secret watch is forbidden");
    // Without Secrets among the kinds (the e2e suite reads the per-kind metric).
    let watchers = pacto_observer::watch::spawn(
        &restricted,
        Some(&ns),
        Some(&hub),
        pacto_observer::watch::Kinds { secrets: false },
        &shutdown,
    );
    let mut ready = watchers.ready.clone();
    tokio::time::timeout(Duration::from_secs(30), ready.wait())
        .await
        .expect("the watches without Secrets are ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_outside_the_namespace_scope_is_refused_until_the_namespace_is_labelled() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Patch, PatchParams};
    use pacto_proto::observer as pb;
    use pacto_proto::observer::observer_server::Observer as _;
    use pacto_runtime::CancellationToken;
    use pacto_runtime::scope::NamespaceScope;

    let cp = cluster().await;
    let ns = cp.create_namespace("obs-scope").await.unwrap();
    let client = cp.client().unwrap();
    let label = "pacto-test/observe";
    let scope =
        NamespaceScope::new(Some(&format!("{label}={ns}")), ["kube-system".to_owned()]).unwrap();
    scope.check(&client).await.unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(scope.clone().run(client.clone(), shutdown.clone()));
    let service = pacto_observer::ObserverService::new(
        observer(&client, Options::default(), &[]),
        pacto_observer::watch::TargetHub::new(),
        shutdown.clone(),
    )
    .with_scope(scope);
    let request = |namespace: &str| pb::ObserveRequest {
        target: Some(pb::Target {
            namespace: namespace.to_owned(),
            pacto_name: "web".into(),
            service_name: "web".into(),
            ..pb::Target::default()
        }),
        contract: Some(pacto_proto::convert::contract_document(WEB_CONTRACT)),
        ..pb::ObserveRequest::default()
    };
    // Not labelled: refused, naming the namespace and the scope.
    let status = service
        .observe(tonic::Request::new(request(&ns)))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        status.message(),
        format!(
            "namespace {ns} is outside this observer's scope (namespaces labelled \"{label}={ns}\" except kube-system; flags --namespace-selector, --exclude-namespaces)"
        )
    );
    // Excluded: refused whatever its labels.
    let status = service
        .observe(tonic::Request::new(request("kube-system")))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);

    // Labelled: observed (the scope follows the namespace's labels through its watch).
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {label: ns.clone()}}})),
        )
        .await
        .unwrap();
    eventually(
        "Observe to be served once the namespace is labelled",
        Duration::from_secs(30),
        || async {
            service
                .observe(tonic::Request::new(request(&ns)))
                .await
                .map(drop)
                .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
        },
    )
    .await;
    // And refused again once the label goes.
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {label: null}}})),
        )
        .await
        .unwrap();
    eventually(
        "Observe to be refused once the label is removed",
        Duration::from_secs(30),
        || async {
            match service.observe(tonic::Request::new(request(&ns))).await {
                Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    shutdown.cancel();
}
