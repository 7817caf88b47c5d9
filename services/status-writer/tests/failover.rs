//! Failover of the leader (docs/design/status.md#leader-election), process level: two real
//! `pacto-status-writer` binaries against a real kube-apiserver, replica A reaching it through a
//! loopback TCP proxy that the test controls. Who wrote what, and when, is read from the API
//! server's audit log: each replica has its own ServiceAccount, so every status write, revision
//! and event is attributed to the replica that made it, with the API server's timestamps.
//!
//! The proxy's cut is a partition: nothing moves in either direction and new connections are
//! accepted but not forwarded, so A's calls hang rather than fail fast (its Lease calls can only
//! end by their timeout). When the partition heals, the bytes of connections that A still holds
//! are delivered; a connection A gave up on during the cut is dropped undelivered.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test")]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use pacto_api::{ContractStatus, Pacto};
use pacto_runtime::CancellationToken;
use pacto_runtime::testing::{TestCa, TestEndpoint, admin_get, metric_value};
use pacto_testenv::{ControlPlane, ControlPlaneOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use common::{EVALUATOR, OBSERVER, RESOLVER, STATUS_WRITER, VALID, eventually, pacto};

const LEASE: &str = "pacto-status-writer";
const LEASE_DURATION: Duration = Duration::from_secs(6);
const A: &str = "writer-a";
const B: &str = "writer-b";

/// A loopback TCP proxy to `upstream` that can be cut (a partition) and restored.
struct Proxy {
    addr: SocketAddr,
    open: watch::Sender<bool>,
    /// Connections whose client closed them during a cut with bytes not yet delivered.
    abandoned: Arc<AtomicUsize>,
}

impl Proxy {
    async fn start(upstream: SocketAddr, stop: CancellationToken) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (open, gate) = watch::channel(true);
        let abandoned = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&abandoned);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                if let Ok((client, _)) = accepted {
                    tokio::spawn(relay(client, upstream, gate.clone(), Arc::clone(&counter)));
                }
            }
        });
        Self {
            addr,
            open,
            abandoned,
        }
    }

    fn cut(&self) {
        self.open.send_replace(false);
    }

    fn restore(&self) {
        self.open.send_replace(true);
    }
}

/// One proxied connection. While the gate is open, bytes flow both ways. While it is closed,
/// the client's bytes are read and held (nothing reaches the server, nothing comes back); a
/// client that closes the connection meanwhile has given up on it: it is dropped undelivered.
async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    mut gate: watch::Receiver<bool>,
    abandoned: Arc<AtomicUsize>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let mut server: Option<(
        tokio::net::tcp::OwnedReadHalf,
        tokio::net::tcp::OwnedWriteHalf,
    )> = None;
    let mut held = Vec::new();
    let mut from_client = vec![0_u8; 64 * 1024];
    let mut from_server = vec![0_u8; 64 * 1024];
    loop {
        let open = *gate.borrow_and_update();
        if open {
            if server.is_none() {
                let Ok(stream) = TcpStream::connect(upstream).await else {
                    return;
                };
                server = Some(stream.into_split());
            }
            if !held.is_empty() {
                let (_, server_write) = server.as_mut().unwrap();
                if server_write.write_all(&held).await.is_err() {
                    return;
                }
                held.clear();
            }
        }
        let forwarding = open && server.is_some();
        tokio::select! {
            read = client_read.read(&mut from_client) => match read {
                Ok(0) | Err(_) => {
                    if !open && !held.is_empty() {
                        abandoned.fetch_add(1, Ordering::SeqCst);
                    }
                    return;
                }
                Ok(n) => held.extend_from_slice(&from_client[..n]),
            },
            read = async { server.as_mut().unwrap().0.read(&mut from_server).await }, if forwarding => {
                match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if client_write.write_all(&from_server[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
            changed = gate.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// A status-writer process (killed on drop).
struct Replica {
    name: &'static str,
    admin: SocketAddr,
    log: PathBuf,
    /// Killed when the replica is dropped.
    _child: tokio::process::Child,
}

impl Replica {
    async fn metrics(&self) -> String {
        admin_get(self.admin, "/metrics").await.1
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(6000);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        format!("--- {} ---\n{}", self.name, &text[start..])
    }
}

fn free_addr() -> SocketAddr {
    pacto_testenv::ports::free_addr().unwrap()
}

struct Backends {
    resolver: SocketAddr,
    observer: SocketAddr,
    evaluator: SocketAddr,
}

/// The real evaluator, contract-resolver and observer, in-process over mTLS (they talk to the
/// API server directly; only the status-writer replica A goes through the proxy).
async fn backends(
    ca: &TestCa,
    dir: &Path,
    client: &Client,
    namespace: &str,
    stop: &CancellationToken,
) -> Backends {
    let (evaluator, config) = TestEndpoint::bind(ca, dir, EVALUATOR, &[STATUS_WRITER]).await;
    tokio::spawn(pacto_evaluator::serve(
        config,
        pacto_evaluator::EvaluatorService::default(),
        stop.clone(),
    ));
    let (resolver, config) = TestEndpoint::bind(ca, dir, RESOLVER, &[STATUS_WRITER]).await;
    let resolver_service = pacto_contract_resolver::Resolver::new(
        pacto_contract_resolver::ResolverConfig::default(),
        None,
    )
    .unwrap();
    tokio::spawn(pacto_contract_resolver::serve(
        config,
        pacto_contract_resolver::ResolverService::new(Arc::new(resolver_service)),
        stop.clone(),
    ));
    let (observer, config) = TestEndpoint::bind(ca, dir, OBSERVER, &[STATUS_WRITER]).await;
    let hub = pacto_observer::watch::TargetHub::new();
    pacto_observer::watch::spawn_watchers(client, Some(namespace), &hub, stop);
    let service = pacto_observer::Observer::new(
        pacto_observer::KubeCluster::new(client.clone(), Some(namespace.to_owned())),
        pacto_observer::Prober::new().unwrap(),
        pacto_observer::Options::default(),
    );
    tokio::spawn(pacto_observer::serve(
        config,
        pacto_observer::ObserverService::new(service, hub, stop.clone()),
        stop.clone(),
    ));
    Backends {
        resolver: resolver.grpc,
        observer: observer.grpc,
        evaluator: evaluator.grpc,
    }
}

/// Starts replica `name` with its own ServiceAccount's kubeconfig, its API server at `server`.
async fn replica(
    name: &'static str,
    cp: &ControlPlane,
    namespace: &str,
    server: &str,
    ca: &TestCa,
    dir: &Path,
    backends: &Backends,
) -> Replica {
    let kubeconfig = cp
        .service_account_kubeconfig(namespace, name)
        .await
        .unwrap()
        .replace(cp.server(), server);
    let kubeconfig_path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&kubeconfig_path, kubeconfig).unwrap();
    let files = ca.client_files(dir, name, &[STATUS_WRITER]);
    let admin = free_addr();
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_pacto-status-writer"))
        .args([
            format!("--resolver-addr={}", backends.resolver),
            format!("--resolver-server-name={RESOLVER}"),
            format!("--observer-addr={}", backends.observer),
            format!("--observer-server-name={OBSERVER}"),
            format!("--evaluator-addr={}", backends.evaluator),
            format!("--evaluator-server-name={EVALUATOR}"),
            format!("--watch-namespace={namespace}"),
            "--leader-elect".into(),
            format!("--leader-election-namespace={namespace}"),
            format!("--pod-name={name}"),
            format!(
                "--leader-election-lease-duration={}s",
                LEASE_DURATION.as_secs()
            ),
            "--leader-election-renew-deadline=4s".into(),
            "--leader-election-retry-period=1s".into(),
            "--revision-mirror-interval=1s".into(),
            "--grpc-request-timeout=5s".into(),
            format!("--admin-addr={admin}"),
            format!("--tls-ca={}", files.ca.display()),
            format!("--tls-cert={}", files.cert.display()),
            format!("--tls-key={}", files.key.display()),
            "--log-format=text".into(),
            "--log-level=info".into(),
        ])
        .env("KUBECONFIG", &kubeconfig_path)
        .env_remove("PACTO_INSECURE")
        .env_remove("POD_NAMESPACE")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let replica = Replica {
        name,
        admin,
        log,
        _child: child,
    };
    eventually(
        &format!("{name} to contend for the Lease"),
        Duration::from_secs(30),
        || async {
            match TcpStream::connect(replica.admin).await {
                Ok(_) => replica
                    .metrics()
                    .await
                    .contains("pacto_status_writer_leader ")
                    .then_some(()),
                Err(_) => None,
            }
        },
    )
    .await;
    replica
}

/// Samples `pacto_status_writer_leader` of each replica every 100 ms until `stop`: (when, is
/// leading per replica). A replica that does not answer counts as not leading.
async fn sample_leaders(
    admins: [SocketAddr; 2],
    stop: CancellationToken,
) -> Vec<(Instant, [bool; 2])> {
    let mut samples = Vec::new();
    while !stop.is_cancelled() {
        let mut leading = [false; 2];
        for (i, admin) in admins.iter().enumerate() {
            if TcpStream::connect(admin).await.is_ok() {
                let text = admin_get(*admin, "/metrics").await.1;
                leading[i] = metric_value(&text, "pacto_status_writer_leader", &[]) > 0.0;
            }
        }
        samples.push((Instant::now(), leading));
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    samples
}

/// One successful write of the API server's audit log.
#[derive(Debug, Clone)]
struct Write {
    received: Timestamp,
    done: Timestamp,
    writer: String,
    what: String,
}

/// The successful writes (create, update, patch, delete) of replicas A and B, in the order the
/// API server received them.
fn writes(audit: &Path, namespace: &str) -> Vec<Write> {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let mut writes: Vec<Write> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| {
            e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
        })
        .filter_map(|e| {
            let user = e["user"]["username"].as_str()?;
            let writer = [A, B]
                .into_iter()
                .find(|w| user == format!("system:serviceaccount:{namespace}:{w}"))?;
            let object = &e["objectRef"];
            Some(Write {
                received: e["requestReceivedTimestamp"].as_str()?.parse().ok()?,
                done: e["stageTimestamp"].as_str()?.parse().ok()?,
                writer: writer.to_owned(),
                what: format!(
                    "{} {}{} {}",
                    e["verb"].as_str().unwrap_or_default(),
                    object["resource"].as_str().unwrap_or_default(),
                    object["subresource"]
                        .as_str()
                        .map(|s| format!("/{s}"))
                        .unwrap_or_default(),
                    object["name"].as_str().unwrap_or_default()
                ),
            })
        })
        .collect();
    writes.sort_by_key(|w| w.received);
    writes
}

/// Who holds the Lease, and its renew time.
async fn holder(leases: &Api<Lease>) -> Option<(String, Timestamp, i32)> {
    let spec = leases.get_opt(LEASE).await.ok()??.spec?;
    Some((
        spec.holder_identity?,
        spec.renew_time?.0,
        spec.lease_transitions.unwrap_or(0),
    ))
}

/// Each transition event of `name` by reason: (reason, reporting instance, count).
async fn events(client: &Client, namespace: &str, name: &str) -> Vec<(String, String, i32)> {
    let mut found: Vec<_> = common::events_regarding(client, namespace, name)
        .await
        .iter()
        .map(|e| {
            (
                e.reason.clone().unwrap_or_default(),
                e.reporting_instance.clone().unwrap_or_default(),
                common::event_count(e),
            )
        })
        .collect();
    found.sort();
    found
}

fn audit_policy(dir: &Path) -> PathBuf {
    let path = dir.join("audit-policy.yaml");
    std::fs::write(
        &path,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n\
         - level: Metadata\n  verbs: [\"create\", \"update\", \"patch\", \"delete\"]\n  resources:\n\
         \x20 - group: \"pacto.trianalab.io\"\n  - group: \"\"\n    resources: [\"events\"]\n\
         \x20 - group: \"events.k8s.io\"\n    resources: [\"events\"]\n- level: None\n",
    )
    .unwrap();
    path
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one failover story, step by step")]
async fn a_partitioned_leader_stops_writing_before_its_successor_starts() {
    pacto_testenv::controlplane::ensure_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let options = common::crds().into_iter().fold(
        ControlPlaneOptions {
            extra_apiserver_args: vec![
                format!("--audit-policy-file={}", audit_policy(dir.path()).display()),
                format!("--audit-log-path={}", audit.display()),
                "--audit-log-format=json".into(),
                "--audit-log-mode=blocking".into(),
            ],
            ..ControlPlaneOptions::default()
        },
        ControlPlaneOptions::with_crd,
    );
    let cp = ControlPlane::start(options)
        .await
        .expect("start the control plane (scripts/k8s-binaries.sh provides the binaries)");
    let client = cp.client().unwrap();
    let namespace = cp.create_namespace("failover").await.unwrap();
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();

    // One ServiceAccount per replica, both allowed everything: the audit log tells them apart.
    for name in [A, B] {
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{namespace}-{name}")),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: "cluster-admin".into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.into(),
                namespace: Some(namespace.clone()),
                ..Subject::default()
            }]),
        };
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }

    let ca = TestCa::new("pacto failover test CA").unwrap();
    let backends = backends(&ca, dir.path(), &client, &namespace, &stop).await;
    let upstream: SocketAddr = cp
        .server()
        .trim_start_matches("https://")
        .parse()
        .expect("the API server listens on a loopback address");
    let proxy = Proxy::start(upstream, stop.clone()).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);

    // A starts first and leads; B contends.
    let a = replica(
        A,
        &cp,
        &namespace,
        &format!("https://{}", proxy.addr),
        &ca,
        dir.path(),
        &backends,
    )
    .await;
    eventually("A to lead", Duration::from_secs(30), || async {
        holder(&leases).await.filter(|(h, _, _)| h == A)
    })
    .await;
    let b = replica(B, &cp, &namespace, cp.server(), &ca, dir.path(), &backends).await;
    let logs = || format!("{}\n{}", a.log_tail(), b.log_tail());
    // Each replica's own view, sampled every 100 ms from their admin ports (which do not go
    // through the proxy): whether it considers itself the leader.
    let sampling = stop.child_token();
    let sampler = tokio::spawn(sample_leaders([a.admin, b.admin], sampling.clone()));

    // Two Pactos: `orders` targets a Service that does not exist yet (Unknown), `stable` is a
    // reference (no target). No timer requeue during the test.
    let pactos: Api<Pacto> = Api::namespaced(client.clone(), &namespace);
    let contract =
        "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.2.0\nworkload: service\n";
    let mut orders = pacto("orders", contract, Some("orders"));
    orders.spec.check_interval_seconds = Some(3600);
    let mut stable = pacto("stable", VALID, None);
    stable.spec.check_interval_seconds = Some(3600);
    for p in [&orders, &stable] {
        pactos.create(&PostParams::default(), p).await.unwrap();
    }
    common::wait_status(&pactos, "orders", ContractStatus::Unknown).await;
    common::wait_status(&pactos, "stable", ContractStatus::Reference).await;
    eventually("A's gauges", Duration::from_secs(10), || async {
        a.metrics()
            .await
            .contains("pacto_contract_status{name=\"orders\"")
            .then_some(())
    })
    .await;

    // A blip shorter than the renew deadline: one or two Lease calls time out, A keeps its term.
    let (_, _, transitions) = holder(&leases).await.unwrap();
    let blip = Timestamp::now();
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    proxy.restore();
    eventually(
        "A to renew after the blip",
        Duration::from_secs(10),
        || async {
            holder(&leases)
                .await
                .filter(|(_, renewed, _)| *renewed > blip)
        },
    )
    .await;
    let (after_blip, _, transitions_after_blip) = holder(&leases).await.unwrap();
    let a_metrics = a.metrics().await;
    assert_eq!(
        (
            after_blip.as_str(),
            transitions_after_blip,
            metric_value(&a_metrics, "pacto_status_writer_leader_terms_total", &[]),
            metric_value(&a_metrics, "pacto_status_writer_leader", &[]),
        ),
        (A, transitions, 1.0, 1.0),
        "a transient Lease error ended A's term\n{}",
        logs()
    );

    // The partition: A is cut off from the API server. Right after, the target of `orders`
    // appears: the observer tells A (it does not go through the proxy), whose writes cannot
    // land now; only the successor may write the new verdict.
    let cut = Instant::now();
    proxy.cut();
    common::create_orders_target(&client, &namespace).await;
    let changed = Instant::now();

    // B takes over, and the verdict flows again.
    eventually(
        "B to take over from the partitioned A",
        LEASE_DURATION * 3,
        || async { holder(&leases).await.filter(|(h, _, _)| h == B) },
    )
    .await;
    let takeover = cut.elapsed();
    common::wait_status(&pactos, "orders", ContractStatus::Compliant).await;
    let verdict = changed.elapsed();
    // The partition lasts: B renews twice while A is still cut off.
    eventually(
        "B to renew twice during the partition",
        Duration::from_secs(10),
        || async {
            let spec = leases.get_opt(LEASE).await.ok()??.spec?;
            let held = spec.renew_time?.0.duration_since(spec.acquire_time?.0);
            (spec.holder_identity.as_deref() == Some(B) && held.as_secs_f64() >= 2.0).then_some(())
        },
    )
    .await;

    // The partition heals while B leads: whatever A still held is delivered now. A must not
    // write: B keeps the Lease for several renewals, A exports no per-Pacto gauges.
    let restored = Timestamp::now();
    proxy.restore();
    eventually(
        "B to renew three times after the partition healed",
        Duration::from_secs(20),
        || async {
            holder(&leases).await.filter(|(h, renewed, _)| {
                h == B && renewed.duration_since(restored).as_secs_f64() >= 3.0
            })
        },
    )
    .await;
    let a_metrics = a.metrics().await;
    let b_metrics = b.metrics().await;
    assert!(
        metric_value(&a_metrics, "pacto_status_writer_leader", &[]) < 0.5,
        "A still leads\n{}",
        logs()
    );
    assert!(
        !a_metrics.contains("pacto_contract_status{"),
        "A, not leading, still exports per-Pacto gauges:\n{a_metrics}"
    );
    assert!(
        b_metrics.contains("pacto_contract_status{name=\"orders\""),
        "{b_metrics}"
    );

    // At most one replica considered itself the leader at any sample: A gave up (its local
    // deadline) before B took the Lease.
    sampling.cancel();
    let samples = sampler.await.unwrap();
    let both: Vec<_> = samples
        .iter()
        .filter(|(_, leading)| leading[0] && leading[1])
        .map(|(at, _)| *at)
        .collect();
    assert!(
        both.is_empty(),
        "A and B both led at {} of {} samples (first {:?} s after the cut)\n{}",
        both.len(),
        samples.len(),
        both.first()
            .map(|at| at.saturating_duration_since(cut).as_secs_f64()),
        logs()
    );
    let a_stopped = samples
        .iter()
        .filter(|(at, leading)| *at > cut && !leading[0])
        .map(|(at, _)| *at)
        .min()
        .unwrap();
    let b_started = samples
        .iter()
        .filter(|(at, leading)| *at > cut && leading[1])
        .map(|(at, _)| *at)
        .min()
        .unwrap();

    // At most one writer at any instant: every write of A was answered before the API server
    // received the first write of B, and A wrote nothing afterwards.
    let writes = writes(&audit, &namespace);
    let runs: Vec<(&str, usize)> = writes.iter().fold(Vec::new(), |mut runs, w| {
        match runs.last_mut() {
            Some((writer, n)) if *writer == w.writer => *n += 1,
            _ => runs.push((w.writer.as_str(), 1)),
        }
        runs
    });
    let table = writes
        .iter()
        .map(|w| format!("{} {} {} ({})", w.received, w.done, w.writer, w.what))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        runs.iter().map(|(w, _)| *w).collect::<Vec<_>>(),
        vec![A, B],
        "the writers did not take turns once (A, then B):\n{table}\n{}",
        logs()
    );
    let last_a = writes
        .iter()
        .filter(|w| w.writer == A)
        .map(|w| w.done)
        .max();
    let first_b = writes
        .iter()
        .filter(|w| w.writer == B)
        .map(|w| w.received)
        .min();
    let (last_a, first_b) = (last_a.unwrap(), first_b.unwrap());
    assert!(
        last_a < first_b,
        "A's last write ended at {last_a}, after B's first began at {first_b}:\n{table}"
    );

    // No transition event repeated across the failover: each reason once, the recovery by B.
    let orders_events = events(&client, &namespace, "orders").await;
    let stable_events = events(&client, &namespace, "stable").await;
    for (pacto, found) in [("orders", &orders_events), ("stable", &stable_events)] {
        let mut reasons: Vec<&str> = found.iter().map(|(r, _, _)| r.as_str()).collect();
        reasons.dedup();
        for reason in reasons {
            let total: i32 = found
                .iter()
                .filter(|(r, _, _)| r == reason)
                .map(|(_, _, c)| c)
                .sum();
            assert_eq!(
                total, 1,
                "{pacto}: {reason} recorded {total} times: {found:?}"
            );
        }
    }
    assert!(
        orders_events
            .iter()
            .any(|(r, by, _)| r == "ContractRecovered" && by == B),
        "{orders_events:?}"
    );

    let counts = |who: &str| writes.iter().filter(|w| w.writer == who).count();
    println!(
        "failover figures: A stopped leading {:.1} s after the cut, B started {:.1} s after \
         it ({} samples, never both); takeover {:.1} s after the cut (lease {} s); Compliant \
         {:.1} s after the change; writes A {} then B {} (runs {runs:?}); gap between A's last and B's first \
         write {:.1} s; events orders {orders_events:?}, stable {stable_events:?}; connections A \
         abandoned during the cuts (not delivered): {}",
        a_stopped.duration_since(cut).as_secs_f64(),
        b_started.duration_since(cut).as_secs_f64(),
        samples.len(),
        takeover.as_secs_f64(),
        LEASE_DURATION.as_secs(),
        verdict.as_secs_f64(),
        counts(A),
        counts(B),
        first_b.duration_since(last_a).as_secs_f64(),
        proxy.abandoned.load(Ordering::SeqCst),
    );
    drop((a, b));
}
