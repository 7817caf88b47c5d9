//! End-to-end harness of the operator, used by the suite in `tests/` and the pipeline bench: the
//! control plane with kube-controller-manager, a docker-registry, Prometheus and the four service
//! binaries (`pacto-contract-resolver`, `pacto-observer`, `pacto-evaluator`,
//! `pacto-status-writer`) as separate processes talking mTLS with certificates generated for the
//! run. Scenarios are asserted through `kubectl get -o yaml` and `kubectl describe`, as a user
//! reads them. Run with `cargo test -p pacto-e2e` (the harness builds the service binaries and the
//! `pacto` CLI itself).
//!
//! One shared control plane (etcd + kube-apiserver + kube-controller-manager, CRDs from the chart)
//! per test binary, and per test a namespace, a workload simulator, two docker-registries
//! (anonymous and basic-auth), the four service binaries as child processes with mTLS
//! certificates generated for the run, and Prometheus scraping every admin port. Everything
//! started here is killed when the [`Stack`] is dropped (pacto-testenv's `ManagedProcess`:
//! process-group kill on drop plus a watchdog).
//!
//! Kubernetes credentials: each service runs as its own ServiceAccount with exactly the RBAC its
//! chart renders (`helm template` with `controller.watchNamespace` set to the test's namespace,
//! so the Roles are namespaced and tests do not share them); the test itself (kubectl, the
//! simulator) uses the admin identity.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use pacto_api::testing::PactoBuilder;
use pacto_runtime::testing::{TestCa, within, write_tls_files};
use pacto_testenv::process::ManagedProcess;
use pacto_testenv::prometheus::{Prometheus, ScrapeTarget};
use pacto_testenv::registry::Registry;
use pacto_testenv::{ControlPlane, ControlPlaneOptions, Simulator, SimulatorOptions};

pub const STATUS_WRITER: &str = "status-writer.pacto.svc";
pub const RESOLVER: &str = "contract-resolver.pacto.svc";
pub const EVALUATOR: &str = "evaluator.pacto.svc";
pub const OBSERVER: &str = "observer.pacto.svc";
/// The status-writer's URI SAN: the identity the other services admit by default
/// (docs/design/identity.md).
pub const STATUS_WRITER_ID: &str = pacto_runtime::DEFAULT_STATUS_WRITER_IDENTITY;

/// The URI SAN the charts put on a service's certificate with the default release names,
/// namespace and trust domain: `spiffe://pacto/ns/pacto-operator-system/sa/pacto-<service>`.
pub fn service_spiffe_id(service: &str) -> String {
    pacto_runtime::spiffe_id(
        pacto_runtime::DEFAULT_TRUST_DOMAIN,
        "pacto-operator-system",
        &format!("pacto-{service}"),
    )
}

/// The binaries the suite runs, with the package that builds each.
const BINARIES: [(&str, &str); 6] = [
    ("pacto-contract-resolver", "pacto-contract-resolver"),
    ("pacto-observer", "pacto-observer"),
    ("pacto-evaluator", "pacto-evaluator"),
    ("pacto-status-writer", "pacto-status-writer"),
    ("pacto", "pacto"),
    // The same CLI as the kubectl plugin (`kubectl pacto status`).
    ("kubectl-pacto", "pacto"),
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the service binaries and the CLI once per test binary (cargo does not build other
/// packages' binaries for this crate's tests) into the same target directory and profile as
/// the running test, and returns that profile directory.
pub fn binaries() -> anyhow::Result<&'static Path> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_binaries().map_err(|e| format!("{e:#}")))
        .as_deref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn build_binaries() -> anyhow::Result<PathBuf> {
    // <target>/<profile>/deps/<test-binary>
    let exe = std::env::current_exe().context("locating the test binary")?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the test binary is not in <target>/<profile>/deps")?
        .to_owned();
    let target_dir = profile_dir
        .parent()
        .context("the profile directory has no parent")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.arg("build")
        .arg("--bins")
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(workspace_root());
    if profile_dir.file_name().and_then(|n| n.to_str()) == Some("release") {
        cmd.arg("--release");
    }
    for (_, package) in BINARIES {
        cmd.args(["-p", package]);
    }
    let started = Instant::now();
    let output = cmd
        .output()
        .with_context(|| format!("running {} build", cargo.to_string_lossy()))?;
    if !output.status.success() {
        bail!(
            "`cargo build` of the service binaries failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    for (bin, _) in BINARIES {
        let path = profile_dir.join(bin);
        ensure!(
            path.is_file(),
            "{} missing after `cargo build` (target dir {})",
            path.display(),
            target_dir.display()
        );
    }
    eprintln!(
        "pacto-e2e: service binaries built in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(profile_dir)
}

fn crds() -> Vec<PathBuf> {
    let dir = workspace_root().join("charts/pacto-crds/templates");
    [
        "pacto.trianalab.io_pactos.yaml",
        "pacto.trianalab.io_pactorevisions.yaml",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect()
}

pub async fn cluster() -> anyhow::Result<&'static ControlPlane> {
    pacto_testenv::controlplane::ensure_crypto_provider();
    pacto_testenv::shared(|| {
        crds().into_iter().fold(
            ControlPlaneOptions::default().with_controller_manager(),
            ControlPlaneOptions::with_crd,
        )
    })
    .await
    .context("starting the control plane (scripts/k8s-binaries.sh provides the binaries)")
}

fn free_addr() -> anyhow::Result<SocketAddr> {
    pacto_testenv::ports::free_addr().context("finding a free port")
}

/// How a service process is started (kept so that a test can stop and restart it).
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program and its arguments; when the observer needs private host names, this is
    /// `unshare --mount sh -c …` wrapping the binary.
    pub argv: Vec<String>,
    /// The service's own kubeconfig (its chart ServiceAccount), if it talks to Kubernetes.
    pub kubeconfig: Option<PathBuf>,
    /// The tokio worker threads of the process: as many as its chart's default CPU limit gives
    /// it ([`chart_worker_threads`]).
    pub worker_threads: usize,
}

/// The tokio worker threads `service` runs with in a default install. A service's runtime sizes
/// itself by `std::thread::available_parallelism`, which under a container's CPU limit is the
/// cgroup quota rounded down, at least 1: so the chart's `resources.limits.cpu` (500m or 1 for
/// the four services) means one worker. The suite and the pipeline bench set the same count
/// (`TOKIO_WORKER_THREADS`), so that they run each service as users do rather than with a worker
/// per core of the test machine (docs/testing.md#pipeline-bench).
pub fn chart_worker_threads(service: &str) -> anyhow::Result<usize> {
    let path = workspace_root()
        .join("charts")
        .join(format!("pacto-{service}"))
        .join("values.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let values: serde_json::Value =
        serde_norway::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let limit = &values["resources"]["limits"]["cpu"];
    let cores = match limit {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => match s.strip_suffix('m') {
            Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
            None => s.parse::<f64>().ok(),
        },
        _ => None,
    }
    .with_context(|| {
        format!(
            "{}: resources.limits.cpu is {limit}, not a CPU quantity",
            path.display()
        )
    })?;
    // Truncation is the point: the quota rounded down, as the standard library does.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a small non-negative CPU count"
    )]
    Ok((cores.floor() as usize).max(1))
}

/// One service process and its addresses.
pub struct Service {
    pub name: &'static str,
    pub grpc: Option<SocketAddr>,
    pub admin: SocketAddr,
    pub launch: Launch,
    pub process: ManagedProcess,
    /// How many times the process has been started (names the log file).
    pub starts: usize,
}

/// What a test changes about the stack.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// Extra observer flags (`--enable-probing`, `--enable-metrics-observation`, …).
    /// `--enable-metrics-observation` also renders the chart's monitor RBAC, like the chart value;
    /// `--observe-secrets` renders the chart's Secret RBAC (`rbac.secretMetadata=true`).
    pub observer_args: Vec<String>,
    /// Services whose in-cluster name `<name>.<namespace>.svc` the observer resolves to
    /// 127.0.0.1: the observer runs in a private mount namespace (`unshare --mount`, needs root)
    /// with its own `/etc/hosts`, so the real system resolver answers. For Tier A health probes.
    pub probe_hosts: Vec<String>,
    /// Resources removed from every rule of the observer's chart Role before it is applied (an
    /// operator who installed an incomplete role), e.g. `["endpointslices"]`.
    pub observer_denied: Vec<&'static str>,
    /// Extra status-writer flags (a `--revision-mirror-interval` replaces the suite's 1 s).
    pub status_writer_args: Vec<String>,
    /// Extra contract-resolver flags (e.g. a shorter `--tags-cache-ttl`).
    pub resolver_args: Vec<String>,
    /// Processes of each of the contract-resolver, the observer and the evaluator (0 or 1: one
    /// each, on 127.0.0.1). With 2 or more, replica `i` listens on `127.0.0.<2+i>`, all on the same
    /// port, as pods behind a headless Service; the first keeps the service's name, the others are
    /// named `<service>-<i+1>` (e.g. `observer-2`). The status-writer then dials each backend by a
    /// name that resolves to all of them ([`peers_host`]): it runs in a private mount namespace
    /// (`unshare --mount`, needs root) whose `/etc/hosts` maps that name to every replica's address.
    pub backend_replicas: usize,
    /// How often the stack's Prometheus scrapes every service; `None`: the suite's 500 ms, so
    /// that alert and metric tests see a change quickly.
    pub scrape_interval: Option<Duration>,
    /// `--log-level` (an `EnvFilter` directive) per service name; the others log at `info`.
    /// The pipeline bench traces a change through debug events this way.
    pub log_levels: Vec<(&'static str, String)>,
}

/// The name the status-writer dials a replicated backend by (see
/// [`StackOptions::backend_replicas`]): its private `/etc/hosts` maps it to every replica, as
/// cluster DNS maps a headless Service's name to every ready pod.
pub fn peers_host(service: &str) -> String {
    format!("{service}-peers.e2e.test")
}

/// The process name of replica `index` (0-based) of `service` (see
/// [`StackOptions::backend_replicas`]).
pub fn replica_name(service: &'static str, index: usize) -> &'static str {
    if index == 0 {
        service
    } else {
        // A handful per test binary; service names are `&'static str` throughout the harness.
        Box::leak(format!("{service}-{}", index + 1).into_boxed_str())
    }
}

/// `count` addresses `127.0.0.2`, `127.0.0.3`, … sharing one free port.
fn replica_addrs(count: usize) -> anyhow::Result<Vec<SocketAddr>> {
    let ip = |i: usize| -> anyhow::Result<std::net::Ipv4Addr> {
        Ok(std::net::Ipv4Addr::new(127, 0, 0, u8::try_from(2 + i)?))
    };
    let ips = (0..count).map(ip).collect::<anyhow::Result<Vec<_>>>()?;
    let port = pacto_testenv::ports::free_port_on(&ips)
        .with_context(|| format!("no port free on all of 127.0.0.2..127.0.0.{}", 1 + count))?;
    Ok(ips
        .into_iter()
        .map(|ip| SocketAddr::from((ip, port)))
        .collect())
}

/// Everything one end-to-end test runs against.
pub struct Stack {
    pub services: Vec<Service>,
    pub prometheus: Prometheus,
    pub registry: Registry,
    pub private_registry: Registry,
    pub simulator: Simulator,
    pub cp: &'static ControlPlane,
    pub namespace: String,
    pub dir: tempfile::TempDir,
    pub bins: &'static Path,
}

pub const PRIVATE_USER: &str = "pacto";
pub const PRIVATE_PASSWORD: &str = "e2e-secret";

/// The Helm release name the suite renders the service charts with.
pub const RELEASE: &str = "e2e";

/// Renders the RBAC of the three service charts that talk to Kubernetes (`helm template`, release [`RELEASE`] in
/// `namespace`, `controller.watchNamespace=namespace`, so everything is namespaced and tests do
/// not share it), applies it with the admin identity and returns, per service that talks to
/// Kubernetes, a kubeconfig file with a TokenRequest token of its chart ServiceAccount.
async fn service_identities(
    cp: &ControlPlane,
    namespace: &str,
    dir: &Path,
    options: &StackOptions,
) -> anyhow::Result<Vec<(&'static str, PathBuf)>> {
    let tools = pacto_chart_tests::Tools::new()?;
    let metrics = options
        .observer_args
        .iter()
        .any(|a| a == "--enable-metrics-observation");
    let mut rbac = Vec::new();
    let mut accounts = Vec::new();
    // The evaluator never talks to Kubernetes (no ServiceAccount token, no RBAC).
    for service in ["contract-resolver", "observer", "status-writer"] {
        let chart = workspace_root().join(format!("charts/pacto-{service}"));
        let mut args = vec![
            "template".to_owned(),
            RELEASE.to_owned(),
            chart.display().to_string(),
            format!("--namespace={namespace}"),
            format!("--set=controller.watchNamespace={namespace}"),
        ];
        if service == "observer" && metrics {
            args.push("--set=controller.enableMetricsObservation=true".into());
        }
        // `--observe-secrets` comes with the Secret access the chart grants for it.
        if service == "observer"
            && options
                .observer_args
                .iter()
                .any(|a| a == "--observe-secrets")
        {
            args.push("--set=rbac.secretMetadata=true".into());
        }
        let text = tools
            .run("helm", &args)
            .with_context(|| format!("rendering charts/pacto-{service}"))?;
        for mut doc in pacto_chart_tests::documents(&text)? {
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            if !matches!(
                kind.as_str(),
                "ServiceAccount" | "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding"
            ) {
                continue;
            }
            if kind == "ServiceAccount" {
                let name = doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                accounts.push((service, name));
            }
            if service == "observer" && kind == "Role" && !options.observer_denied.is_empty() {
                deny(&mut doc, &options.observer_denied);
            }
            rbac.push(doc);
        }
    }
    let file = dir.join("rbac.yaml");
    let text = rbac
        .iter()
        .map(|d| serde_norway::to_string(d).context("writing the rendered RBAC"))
        .collect::<anyhow::Result<Vec<_>>>()?
        .join("---\n");
    std::fs::write(&file, text)?;
    let output = tokio::process::Command::from(cp.kubectl()?)
        .args(["apply", "--server-side", "--field-manager=pacto-e2e", "-f"])
        .arg(&file)
        .output()
        .await
        .context("running kubectl apply for the chart RBAC")?;
    ensure!(
        output.status.success(),
        "applying the chart RBAC failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut identities = Vec::new();
    for (service, account) in accounts {
        let yaml = cp.service_account_kubeconfig(namespace, &account).await?;
        let path = dir.join(format!("{service}.kubeconfig"));
        std::fs::write(&path, yaml)?;
        identities.push((service, path));
    }
    Ok(identities)
}

/// Removes `denied` resources from every rule of a rendered Role (rules left empty are dropped).
fn deny(role: &mut serde_json::Value, denied: &[&str]) {
    if let Some(rules) = role["rules"].as_array_mut() {
        for rule in rules.iter_mut() {
            if let Some(resources) = rule["resources"].as_array_mut() {
                resources.retain(|r| !denied.iter().any(|d| r == d));
            }
        }
        rules.retain(|r| r["resources"].as_array().is_none_or(|a| !a.is_empty()));
    }
}

/// `argv` run in a private mount namespace whose `/etc/hosts` is `hosts` (a bind mount visible to
/// this process tree only).
fn with_private_hosts(hosts: &Path, argv: Vec<String>) -> Vec<String> {
    let mut wrapped = vec![
        "unshare".to_owned(),
        "--mount".to_owned(),
        "--propagation=private".to_owned(),
        "sh".to_owned(),
        "-c".to_owned(),
        "mount --bind \"$0\" /etc/hosts && exec \"$@\"".to_owned(),
        hosts.display().to_string(),
    ];
    wrapped.extend(argv);
    wrapped
}

fn spawn_service(
    name: &str,
    launch: &Launch,
    dir: &Path,
    starts: usize,
) -> anyhow::Result<ManagedProcess> {
    let mut cmd = Command::new(&launch.argv[0]);
    cmd.args(&launch.argv[1..]);
    // An error that stops the service ends its log instead of sitting above a backtrace that
    // fills the tail a failure message shows (RUST_BACKTRACE still applies to panics).
    cmd.env("RUST_LIB_BACKTRACE", "0");
    cmd.env("TOKIO_WORKER_THREADS", launch.worker_threads.to_string());
    if let Some(kubeconfig) = &launch.kubeconfig {
        cmd.env("KUBECONFIG", kubeconfig);
    } else {
        cmd.env_remove("KUBECONFIG");
    }
    heaptrack(name, starts, launch, &mut cmd)?;
    let log = if starts == 0 {
        dir.join(format!("{name}.log"))
    } else {
        dir.join(format!("{name}.{starts}.log"))
    };
    Ok(ManagedProcess::spawn(name, cmd, &log, &[])?)
}

/// With `PACTO_E2E_HEAPTRACK=<dir>`, the services named in `PACTO_E2E_HEAPTRACK_SERVICES`
/// (comma-separated, default `status-writer`) run under heaptrack's preload library, each start
/// writing `<dir>/<service>.<start>.gz` for `heaptrack_print` (docs/testing.md#pipeline-bench).
/// The preload is set here rather than through the `heaptrack` script, which would fork: the
/// service keeps its own pid, so the bench's CPU and RSS readings and its signals stay on it.
/// The interpreter reads a FIFO the preload library writes and ends when the service does. Not
/// for the observer, which starts through `unshare` and `sh` (they would write to the FIFO too).
fn heaptrack(name: &str, starts: usize, launch: &Launch, cmd: &mut Command) -> anyhow::Result<()> {
    let Some(dir) = std::env::var_os("PACTO_E2E_HEAPTRACK") else {
        return Ok(());
    };
    let services = std::env::var("PACTO_E2E_HEAPTRACK_SERVICES")
        .unwrap_or_else(|_| "status-writer".to_owned());
    if !services.split(',').any(|s| s.trim() == name) {
        return Ok(());
    }
    ensure!(
        launch.argv[0] != "unshare",
        "PACTO_E2E_HEAPTRACK_SERVICES names {name}, which starts through unshare and sh: heaptrack \
         would trace those too"
    );
    let lib = Path::new(HEAPTRACK_LIB);
    let preload = lib.join("libheaptrack_preload.so");
    let interpret = lib.join("libexec/heaptrack_interpret");
    ensure!(
        preload.is_file() && interpret.is_file(),
        "PACTO_E2E_HEAPTRACK is set but heaptrack is not installed ({} or {} missing; apt-get \
         install heaptrack)",
        preload.display(),
        interpret.display()
    );
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    let fifo = dir.join(format!("{name}.{starts}.fifo"));
    let output = dir.join(format!("{name}.{starts}.gz"));
    let _ = std::fs::remove_file(&fifo);
    let made = Command::new("mkfifo").arg(&fifo).status()?;
    ensure!(made.success(), "mkfifo {} failed", fifo.display());
    // In the background of a shell that returns at once: nothing to reap here. The FIFO goes
    // when the service has closed it.
    let started = Command::new("sh")
        .args(["-c", "(\"$0\" < \"$1\" | gzip -c > \"$2\"; rm -f \"$1\") &"])
        .arg(&interpret)
        .arg(&fifo)
        .arg(&output)
        .stdin(Stdio::null())
        .status()
        .context("starting heaptrack_interpret")?;
    ensure!(started.success(), "starting heaptrack_interpret failed");
    cmd.env("LD_PRELOAD", &preload)
        .env("DUMP_HEAPTRACK_OUTPUT", &fifo);
    eprintln!(
        "pacto-e2e: {name} (start {starts}) runs under heaptrack: {}",
        output.display()
    );
    Ok(())
}

/// Where Debian's heaptrack package installs its preload library and interpreter.
const HEAPTRACK_LIB: &str = "/usr/lib/heaptrack";

impl Stack {
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(StackOptions::default()).await
    }

    #[allow(clippy::too_many_lines, reason = "one linear start-up sequence")]
    pub async fn start_with(options: StackOptions) -> anyhow::Result<Self> {
        // Before the minutes of `cargo build`: no control plane, no run.
        pacto_testenv::bins::require_kubernetes();
        let bins = tokio::task::spawn_blocking(binaries)
            .await
            .context("joining the build")??;
        let cp = cluster().await?;
        let namespace = cp.create_namespace("e2e").await?;
        let dir = tempfile::Builder::new().prefix("pacto-e2e-").tempdir()?;
        let simulator = Simulator::start(
            cp.client()?,
            SimulatorOptions {
                nodes: vec![format!("{namespace}-node")],
                namespace: Some(namespace.clone()),
                ..SimulatorOptions::default()
            },
        )
        .await
        .context("starting the workload simulator")?;
        let registry = Registry::start().context("starting docker-registry")?;
        let private_registry = Registry::start_with_basic_auth(PRIVATE_USER, PRIVATE_PASSWORD)
            .context("starting the private docker-registry")?;
        let identities = service_identities(cp, &namespace, dir.path(), &options).await?;

        let ca = TestCa::new("pacto e2e CA")?;
        // Each certificate as the charts issue it: the DNS identity (the server name the
        // status-writer checks) and the URI SAN the default allow-lists admit.
        let tls = |service: &str, name: &str, identity: &str| -> anyhow::Result<Vec<String>> {
            let uri = service_spiffe_id(service);
            let cert = ca.issue(&[identity, uri.as_str()])?;
            let files = write_tls_files(dir.path(), name, &ca.pem(), &cert)?;
            Ok(vec![
                format!("--tls-ca={}", files.ca.display()),
                format!("--tls-cert={}", files.cert.display()),
                format!("--tls-key={}", files.key.display()),
            ])
        };
        let insecure = format!("{},{}", registry.host(), private_registry.host());
        let hosts = if options.probe_hosts.is_empty() {
            None
        } else {
            ensure!(
                pacto_testenv::privilege::is_root(),
                "probe_hosts needs root (the observer runs under `unshare --mount`); run as root, \
                 or guard the test with pacto_e2e::privileged"
            );
            let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
            text.extend(
                options
                    .probe_hosts
                    .iter()
                    .map(|service| format!("127.0.0.1 {service}.{namespace}.svc\n")),
            );
            let path = dir.path().join("observer.hosts");
            std::fs::write(&path, text)?;
            Some(path)
        };

        let replicas = options.backend_replicas.max(1);
        // With replicas, the status-writer resolves each backend's peers name to all of them.
        let writer_hosts = if replicas > 1 {
            ensure!(
                pacto_testenv::privilege::is_root(),
                "backend_replicas needs root (the status-writer runs under `unshare --mount`); run \
                 as root, or guard the test with pacto_e2e::privileged"
            );
            Some(dir.path().join("status-writer.hosts"))
        } else {
            None
        };

        let mut services = Vec::new();
        let mut spawn = |service: &'static str,
                         name: &'static str,
                         identity: &str,
                         grpc: Option<SocketAddr>,
                         extra: Vec<String>|
         -> anyhow::Result<()> {
            let admin = free_addr()?;
            let level = options
                .log_levels
                .iter()
                .find(|(s, _)| *s == service)
                .map_or("info", |(_, level)| level.as_str());
            let mut argv = vec![
                bins.join(format!("pacto-{service}")).display().to_string(),
                format!("--admin-addr={admin}"),
                "--log-format=text".into(),
                format!("--log-level={level}"),
            ];
            argv.extend(tls(service, name, identity)?);
            argv.extend(extra);
            if let Some(grpc) = grpc {
                argv.push(format!("--listen-addr={grpc}"));
            }
            if let (Some(hosts), "observer") = (&hosts, service) {
                argv = with_private_hosts(hosts, argv);
            }
            if let (Some(hosts), "status-writer") = (&writer_hosts, service) {
                argv = with_private_hosts(hosts, argv);
            }
            let launch = Launch {
                worker_threads: chart_worker_threads(service)?,
                argv,
                kubeconfig: identities
                    .iter()
                    .find(|(s, _)| *s == service)
                    .map(|(_, path)| path.clone()),
            };
            let process = spawn_service(name, &launch, dir.path(), 0)?;
            services.push(Service {
                name,
                grpc,
                admin,
                launch,
                process,
                starts: 1,
            });
            Ok(())
        };
        // Each backend's replicas' addresses, and the address the status-writer dials.
        let addrs = |service: &str| -> anyhow::Result<(Vec<SocketAddr>, String)> {
            if replicas > 1 {
                let addrs = replica_addrs(replicas)?;
                let port = addrs[0].port();
                Ok((addrs, format!("{}:{port}", peers_host(service))))
            } else {
                let addr = free_addr()?;
                Ok((vec![addr], addr.to_string()))
            }
        };
        let (resolvers, resolver) = addrs("contract-resolver")?;
        let (observers, observer) = addrs("observer")?;
        let (evaluators, evaluator) = addrs("evaluator")?;
        if let Some(path) = &writer_hosts {
            let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
            for (service, replicas) in [
                ("contract-resolver", &resolvers),
                ("observer", &observers),
                ("evaluator", &evaluators),
            ] {
                for addr in replicas {
                    use std::fmt::Write as _;
                    let _ = writeln!(text, "{} {}", addr.ip(), peers_host(service));
                }
            }
            std::fs::write(path, text)?;
        }
        for (i, addr) in resolvers.iter().enumerate() {
            spawn(
                "contract-resolver",
                replica_name("contract-resolver", i),
                RESOLVER,
                Some(*addr),
                std::iter::once(format!("--insecure-registries={insecure}"))
                    .chain(options.resolver_args.iter().cloned())
                    .collect(),
            )?;
        }
        let mut observer_args = vec![
            format!("--watch-namespace={namespace}"),
            "--stabilization-window=5s".into(),
        ];
        observer_args.extend(options.observer_args.iter().cloned());
        for (i, addr) in observers.iter().enumerate() {
            spawn(
                "observer",
                replica_name("observer", i),
                OBSERVER,
                Some(*addr),
                observer_args.clone(),
            )?;
        }
        for (i, addr) in evaluators.iter().enumerate() {
            spawn(
                "evaluator",
                replica_name("evaluator", i),
                EVALUATOR,
                Some(*addr),
                Vec::new(),
            )?;
        }
        let mut writer_args = vec![
            format!("--resolver-addr={resolver}"),
            format!("--resolver-server-name={RESOLVER}"),
            format!("--observer-addr={observer}"),
            format!("--observer-server-name={OBSERVER}"),
            format!("--evaluator-addr={evaluator}"),
            format!("--evaluator-server-name={EVALUATOR}"),
            format!("--watch-namespace={namespace}"),
            "--leader-elect".into(),
            format!("--leader-election-namespace={namespace}"),
            "--pod-name=status-writer-e2e".into(),
            "--grpc-request-timeout=10s".into(),
        ];
        // The mirror runs every second unless the test sets its own interval.
        if !options
            .status_writer_args
            .iter()
            .any(|a| a.starts_with("--revision-mirror-interval"))
        {
            writer_args.push("--revision-mirror-interval=1s".into());
        }
        writer_args.extend(options.status_writer_args.iter().cloned());
        spawn(
            "status-writer",
            "status-writer",
            STATUS_WRITER,
            None,
            writer_args,
        )?;

        let admins: Vec<String> = services.iter().map(|s| s.admin.to_string()).collect();
        let targets: Vec<ScrapeTarget> = services
            .iter()
            .zip(&admins)
            .map(|(s, a)| ScrapeTarget::new(s.name, &[a.as_str()]))
            .collect();
        let scrape_interval = options
            .scrape_interval
            .unwrap_or(Duration::from_millis(500));
        let prometheus = Prometheus::start(&targets, scrape_interval, Duration::from_mins(1))
            .await
            .context("starting Prometheus")?;

        let mut stack = Self {
            services,
            prometheus,
            registry,
            private_registry,
            simulator,
            cp,
            namespace,
            dir,
            bins,
        };
        stack.wait_ready(Duration::from_mins(1)).await?;
        Ok(stack)
    }

    fn service_mut(&mut self, name: &str) -> anyhow::Result<&mut Service> {
        self.services
            .iter_mut()
            .find(|s| s.name == name)
            .with_context(|| format!("no service {name}"))
    }

    /// Kills a service's process (a crash or an outage of that service).
    pub fn stop_service(&mut self, name: &str) -> anyhow::Result<()> {
        self.service_mut(name)?.process.stop();
        Ok(())
    }

    /// Starts a stopped service again with the same command line (a new log file), and waits
    /// until every service is ready.
    pub async fn restart_service(&mut self, name: &str) -> anyhow::Result<()> {
        let dir = self.dir.path().to_owned();
        let service = self.service_mut(name)?;
        service.process.stop();
        service.process = spawn_service(service.name, &service.launch, &dir, service.starts)?;
        service.starts += 1;
        self.wait_ready(Duration::from_mins(1)).await
    }

    /// Waits until every service answers `/readyz` with 200; fails early (with its log) when one
    /// exits.
    async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let deadline = Instant::now() + timeout;
        for service in &mut self.services {
            let url = format!("http://{}/readyz", service.admin);
            let remaining = deadline.saturating_duration_since(Instant::now());
            // Ok(Some(exit)) ends the wait early: the process is gone.
            let ready = within(&format!("{} to be ready", service.name), remaining, || {
                let exited = service.process.exited();
                let probe = http.get(&url).send();
                async move {
                    if exited.is_some() {
                        return Ok(exited);
                    }
                    match probe.await {
                        Ok(r) if r.status().is_success() => Ok(None),
                        Ok(r) => Err(format!("HTTP {}", r.status())),
                        Err(e) => Err(e.to_string()),
                    }
                }
            })
            .await;
            match ready {
                Ok(None) => {}
                Ok(Some(status)) => bail!(
                    "{} exited during start-up ({status}); log:\n{}",
                    service.name,
                    service.process.log_tail(4000)
                ),
                Err(timeout) => bail!("{timeout}; log:\n{}", service.process.log_tail(4000)),
            }
        }
        Ok(())
    }

    /// The logs of every service, for failure messages.
    pub fn logs(&self) -> String {
        self.services
            .iter()
            .map(|s| format!("--- {} ---\n{}", s.name, s.process.log_tail(3000)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `kubectl get pactos --watch -o jsonpath=<jsonpath>` in the test's namespace: every line it
    /// prints (one per update of a Pacto) goes to `on_line`, split at spaces. Started before the
    /// Pactos exist, it sees every update of every Pacto. The watch stops when the returned child
    /// is dropped.
    pub fn watch_pactos<F>(
        &self,
        jsonpath: &str,
        mut on_line: F,
    ) -> anyhow::Result<tokio::process::Child>
    where
        F: FnMut(Vec<&str>) + Send + 'static,
    {
        use tokio::io::{AsyncBufReadExt as _, BufReader};
        let mut cmd = tokio::process::Command::from(self.cp.kubectl()?);
        cmd.args([
            "get",
            "pactos",
            "-n",
            &self.namespace,
            "--watch",
            "-o",
            &format!("jsonpath={jsonpath}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
        let mut child = cmd.spawn().context("starting kubectl get --watch")?;
        let out = child.stdout.take().context("kubectl's stdout")?;
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                on_line(line.split(' ').collect());
            }
        });
        Ok(child)
    }

    /// Runs `kubectl <args>` (admin kubeconfig) with optional stdin; returns stdout or fails
    /// with stderr.
    pub async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        use tokio::io::AsyncWriteExt;
        // Async, so the simulator's tasks keep running while kubectl waits.
        let mut cmd = tokio::process::Command::from(self.cp.kubectl()?);
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().context("starting kubectl")?;
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .context("kubectl stdin")?
                .write_all(input.as_bytes())
                .await
                .context("writing kubectl stdin")?;
        }
        let output = child
            .wait_with_output()
            .await
            .context("waiting for kubectl")?;
        ensure!(
            output.status.success(),
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `kubectl apply -n <ns> -f -`.
    pub async fn apply(&self, yaml: &str) -> anyhow::Result<String> {
        self.kubectl(&["apply", "-n", &self.namespace, "-f", "-"], Some(yaml))
            .await
    }

    /// `kubectl get pacto <name> -o yaml`, parsed.
    pub async fn get_pacto(&self, name: &str) -> anyhow::Result<serde_json::Value> {
        let yaml = self
            .kubectl(
                &["get", "pacto", name, "-n", &self.namespace, "-o", "yaml"],
                None,
            )
            .await?;
        serde_norway::from_str(&yaml).context("parsing `kubectl get pacto -o yaml`")
    }

    /// `kubectl describe pacto <name>`.
    pub async fn describe_pacto(&self, name: &str) -> anyhow::Result<String> {
        self.kubectl(&["describe", "pacto", name, "-n", &self.namespace], None)
            .await
    }

    /// Polls `kubectl get pacto -o yaml` until `check` holds for the Pacto; returns it. `what`
    /// names the wait in the timeout message, which also carries the last status seen and the
    /// services' logs.
    pub async fn wait_pacto(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&serde_json::Value) -> bool,
    ) -> anyhow::Result<serde_json::Value> {
        // Ok(Err(_)) ends the wait early: kubectl itself failed.
        let waited = within(what, timeout, || async {
            match self.get_pacto(name).await {
                Ok(pacto) if check(&pacto) => Ok(Ok(pacto)),
                Ok(pacto) => Err(serde_norway::to_string(&pacto["status"]).unwrap_or_default()),
                Err(e) => Ok(Err(e)),
            }
        })
        .await;
        match waited {
            Ok(got) => got,
            Err(timeout) => bail!("{timeout}\n{}", self.logs()),
        }
    }

    /// Polls `kubectl get pacto -o yaml` until `status.contractStatus` is `want`.
    pub async fn wait_contract_status(
        &self,
        name: &str,
        want: &str,
        timeout: Duration,
    ) -> anyhow::Result<serde_json::Value> {
        self.wait_pacto(name, &format!("{name} to be {want}"), timeout, |p| {
            p["status"]["contractStatus"] == want
        })
        .await
    }

    /// Polls `kubectl describe pacto` until its output contains every string of `needles`.
    pub async fn wait_describe(
        &self,
        name: &str,
        needles: &[&str],
        timeout: Duration,
    ) -> anyhow::Result<String> {
        // Ok(Err(_)) ends the wait early: kubectl itself failed.
        let what = format!("`kubectl describe pacto {name}` to show {needles:?}");
        let waited = within(&what, timeout, || async {
            match self.describe_pacto(name).await {
                Ok(text) if needles.iter().all(|n| text.contains(n)) => Ok(Ok(text)),
                Ok(text) => Err(text),
                Err(e) => Ok(Err(e)),
            }
        })
        .await;
        waited?
    }

    /// The samples of `metric` on a service's admin `/metrics`, each as `{labels} value`.
    pub async fn metric_lines(&self, service: &str, metric: &str) -> anyhow::Result<Vec<String>> {
        let admin = self
            .services
            .iter()
            .find(|s| s.name == service)
            .with_context(|| format!("no service {service}"))?
            .admin;
        let text = reqwest::get(format!("http://{admin}/metrics"))
            .await?
            .text()
            .await?;
        Ok(text
            .lines()
            .filter_map(|l| l.strip_prefix(metric))
            .filter(|rest| rest.starts_with(['{', ' ']))
            .map(|rest| rest.trim().to_owned())
            .collect())
    }

    /// Sum of the samples of `metric` on a service's admin `/metrics`.
    pub async fn metric_sum(&self, service: &str, metric: &str) -> anyhow::Result<f64> {
        Ok(self
            .metric_lines(service, metric)
            .await?
            .iter()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    /// The guide's nudge (`kubectl annotate pacto <name> reconcile-requested-at=<value>
    /// --overwrite`), then waits until the status-writer has finished at least one more reconcile
    /// (its `pacto_status_writer_reconciles_total`). `value` gets a suffix unique in the run:
    /// annotating the value a Pacto already has changes nothing, so it would reconcile nothing.
    pub async fn nudge(&self, name: &str, value: &str) -> anyhow::Result<()> {
        const RECONCILES: &str = "pacto_status_writer_reconciles_total";
        static NUDGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NUDGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let value = format!("{value}.{n}");
        let before = self.metric_sum("status-writer", RECONCILES).await?;
        self.kubectl(
            &[
                "annotate",
                "-n",
                &self.namespace,
                &format!("pacto/{name}"),
                &format!("reconcile-requested-at={value}"),
                "--overwrite",
            ],
            None,
        )
        .await?;
        // Ok(Err(_)) ends the wait early: the metrics could not be read.
        let waited = within(
            &format!("the nudge of {name} to be reconciled"),
            STATUS_DEADLINE,
            || async {
                match self.metric_sum("status-writer", RECONCILES).await {
                    Ok(reconciles) if reconciles > before => Ok(Ok(())),
                    Ok(reconciles) => Err(format!("{RECONCILES} {reconciles}")),
                    Err(e) => Ok(Err(e)),
                }
            },
        )
        .await;
        match waited {
            Ok(got) => got,
            Err(timeout) => bail!("{timeout}\n{}", self.logs()),
        }
    }

    /// A bundle whose `pacto.yaml` is `manifest` (written under the stack's directory), pushed
    /// with `pacto push` to `oci://<registry>/pacto/<name>` followed by `tag` (`""`: the tag is
    /// the contract's version). Returns the repository reference (without the tag) and what
    /// `pacto push` printed.
    pub async fn push_contract(
        &self,
        name: &str,
        manifest: &str,
        tag: &str,
    ) -> anyhow::Result<(String, String)> {
        let bundle = self.dir.path().join("bundles").join(name);
        std::fs::create_dir_all(&bundle).context("creating the bundle directory")?;
        std::fs::write(bundle.join("pacto.yaml"), manifest).context("writing pacto.yaml")?;
        let repository = format!("oci://{}/pacto/{name}", self.registry.host());
        let bundle = bundle.display().to_string();
        let pushed = self
            .pacto_cli(&["push", &bundle, &format!("{repository}{tag}")])
            .await?;
        Ok((repository, pushed))
    }

    /// Pushes the `settings` bundle (a required configuration `app` with a JSON Schema that wants
    /// an integer `port`) and returns its reference, `oci://<registry>/pacto/settings:1.0.0`.
    pub async fn push_settings_bundle(&self) -> anyhow::Result<String> {
        let configuration = self.dir.path().join("bundles/settings/configuration");
        std::fs::create_dir_all(&configuration).context("creating the bundle directory")?;
        std::fs::write(
            configuration.join("schema.json"),
            r#"{"type":"object","required":["port"],"properties":{"port":{"type":"integer"}}}"#,
        )
        .context("writing configuration/schema.json")?;
        let (repository, _) = self
            .push_contract(
                "settings",
                "pactoVersion: \"2.0\"\nservice:\n  name: settings\n  version: 1.0.0\nconfigurations:\n  - name: app\n    required: true\n    schema: configuration/schema.json\n",
                ":1.0.0",
            )
            .await?;
        Ok(format!("{repository}:1.0.0"))
    }

    /// `kubectl wait --for=condition=Available deployment/<name>` in the test namespace (60 s).
    pub async fn wait_available(&self, deployment: &str) -> anyhow::Result<()> {
        self.kubectl(
            &[
                "wait",
                "-n",
                &self.namespace,
                "--for=condition=Available",
                &format!("deployment/{deployment}"),
                "--timeout=60s",
            ],
            None,
        )
        .await
        .map(drop)
    }

    /// Runs the `pacto` CLI with the suite's registries allowed over plain HTTP.
    pub async fn pacto_cli(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = tokio::process::Command::new(self.bins.join("pacto"))
            .args(args)
            .env("PACTO_INSECURE_REGISTRIES", self.registry.host())
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"))
            .output()
            .await
            .context("running pacto")?;
        ensure!(
            output.status.success(),
            "pacto {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The core/v1 Events recorded on the Pacto `name`, as `kubectl get events -n <ns>
    /// --field-selector involvedObject.name=<name> -o json [extra…]` lists them (in its order,
    /// e.g. with `--sort-by=.lastTimestamp`); Events about other kinds with the same name are left
    /// out.
    pub async fn pacto_events(
        &self,
        name: &str,
        extra: &[&str],
    ) -> anyhow::Result<Vec<serde_json::Value>> {
        let selector = format!("involvedObject.name={name}");
        let mut args = vec![
            "get",
            "events",
            "-n",
            &self.namespace,
            "--field-selector",
            &selector,
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        let json = self.kubectl(&args, None).await?;
        let mut list: serde_json::Value =
            serde_json::from_str(&json).context("parsing `kubectl get events -o json`")?;
        let items = match list["items"].take() {
            serde_json::Value::Array(items) => items,
            other => bail!("`kubectl get events` listed no items: {other}"),
        };
        Ok(items
            .into_iter()
            .filter(|e| e["involvedObject"]["kind"] == "Pacto")
            .collect())
    }
}

/// How many times `reason` was emitted, over `events` from [`Stack::pacto_events`]: the sum of
/// their `count`s, since a recurrence of the same type, reason and message is counted on one
/// Event (docs/design/status.md#events). An Event without a count is an error of the writer.
pub fn times_emitted(events: &[serde_json::Value], reason: &str) -> anyhow::Result<u64> {
    events
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| {
            e["count"]
                .as_u64()
                .with_context(|| format!("an Event without a count: {e}"))
        })
        .sum()
}

/// The condition `kind` of a Pacto (from `kubectl get -o yaml`) as (status, reason, message).
pub fn condition(pacto: &serde_json::Value, kind: &str) -> Option<(String, String, String)> {
    let c = pacto["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?;
    let field = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
    Some((field("status"), field("reason"), field("message")))
}

/// The message of the Pacto's condition `kind`, after asserting its status and reason (the whole
/// Pacto is printed when they differ or the condition is missing).
pub fn expect_condition(
    pacto: &serde_json::Value,
    kind: &str,
    status: &str,
    reason: &str,
) -> String {
    let Some((got_status, got_reason, message)) = condition(pacto, kind) else {
        panic!("no {kind} condition:\n{pacto:#}");
    };
    assert_eq!(
        (got_status.as_str(), got_reason.as_str()),
        (status, reason),
        "{kind}: {message}\n{pacto:#}"
    );
    message
}

/// Asserts RuntimeObserved True/Found with the message of docs/design/status.md#conditions.
pub fn expect_runtime_found(pacto: &serde_json::Value) {
    assert_eq!(
        expect_condition(pacto, "RuntimeObserved", "True", "Found"),
        "Runtime evidence collected successfully"
    );
}

/// How long a test waits for a status, an event or a describe line.
pub const STATUS_DEADLINE: Duration = Duration::from_mins(1);

/// Every line of `text` prefixed with `by`.
pub fn indent(text: &str, by: &str) -> String {
    text.lines().fold(String::new(), |mut out, line| {
        out.push_str(by);
        out.push_str(line);
        out.push('\n');
        out
    })
}

/// A Pacto manifest (checked every 30 s) built from `builder`; `target` is the YAML body of
/// `spec.target` (unindented), e.g. [`service_target`].
fn pacto_manifest(builder: PactoBuilder, target: Option<&str>) -> String {
    let builder = builder.check_interval(30);
    match target {
        Some(yaml) => builder.target(serde_norway::from_str(yaml).expect("a spec.target body")),
        None => builder,
    }
    .manifest()
}

/// A Pacto whose contract is inline; `target` is the YAML body of `spec.target` (unindented),
/// e.g. [`service_target`]. The contract reads as from a YAML literal block: each line ends with
/// one newline, trailing empty lines dropped.
pub fn inline_pacto(name: &str, contract: &str, target: Option<&str>) -> String {
    let mut text = contract.lines().fold(String::new(), |mut text, line| {
        text.push_str(line);
        text.push('\n');
        text
    });
    while text.ends_with("\n\n") {
        text.pop();
    }
    pacto_manifest(PactoBuilder::inline(name, &text), target)
}

/// A Pacto whose contract is the OCI reference `reference`; `target` as for [`inline_pacto`].
pub fn oci_pacto(name: &str, reference: &str, target: Option<&str>) -> String {
    pacto_manifest(PactoBuilder::oci(name, reference), target)
}

/// The `spec.target` body naming Service `service`.
pub fn service_target(service: &str) -> String {
    format!("serviceName: {service}\n")
}

/// A one-replica Deployment `name` with pods labelled `app: <name>`.
pub fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: app\n          image: registry.local/{name}:1\n"
    )
}

/// A Service `name` selecting the pods of [`deployment`]`(name)` (`app: <name>`), one port named
/// `http`: what a `spec.target.serviceName` must name for the target to exist.
pub fn target_service(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector: {{app: {name}}}\n  ports:\n    - {{name: http, port: 80, targetPort: 8080}}\n"
    )
}

/// Whether this process may run a privileged scenario (`reason` says what needs root, e.g.
/// `unshare --mount` for [`StackOptions::probe_hosts`]). As root: true. Without root on a
/// developer machine: false, after printing one line saying the test is skipped and why. Without
/// root under CI (`CI` set and not `0`/`false`, as `.ci/run` does): panics, because a privileged
/// tier must fail there, never skip.
pub fn privileged(reason: &str) -> bool {
    pacto_testenv::privilege::root_or_skip(&format!(
        "needs root ({reason}); run as root (e.g. `sudo -E cargo test -p pacto-e2e`) to include it"
    ))
}
