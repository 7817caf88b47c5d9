//! A real single Kubernetes node on this machine: containerd + runc + bridge CNI, kubelet and
//! kube-proxy, with CoreDNS as a pod, joined to a [`ControlPlane`] started with the node-ready
//! API server settings ([`ControlPlaneOptions::for_real_node`]).
//!
//! It needs root and changes global host state (iptables, a bridge, `kubepods` cgroups, sysctls,
//! directories under `/var` and `/run`); [`RealNode::start`] refuses with one line, before starting
//! anything, where it cannot run, and [`RealNode::down`] (or drop) restores the host. The rules,
//! the configuration and the teardown order are in `docs/design/real-node.md`.
//!
//! Only one node runs per machine: the fixed kubelet and kube-proxy ports and the host state are
//! global. A lock file in [`STATE_DIR`] records the owner and the sysctl values found before the
//! start, so a node whose process died without teardown is cleaned up by the next start or by
//! [`cleanup_stale`] (`pacto-dev-cluster --cleanup-node`).

pub use crate::privilege::is_root;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::bins::{self, BinaryError};
use crate::controlplane::{ControlPlane, ControlPlaneError, ControlPlaneOptions};
use crate::process::{ManagedProcess, ProcessError, wait_for};

/// The node's name (`kubectl get nodes`).
pub const NODE_NAME: &str = "pacto-node";
/// The pod network of the bridge CNI (host-local IPAM).
pub const POD_CIDR: &str = "10.88.0.0/24";
/// The bridge the CNI creates.
pub const BRIDGE: &str = "cni-pacto0";
/// The cluster IP of Service `kube-system/kube-dns` (CoreDNS), given to kubelet as `clusterDNS`.
pub const CLUSTER_DNS: &str = "10.0.0.10";
/// The API server port of a node cluster.
pub const API_SERVER_PORT: u16 = 6443;
/// The CoreDNS image `scripts/node-images.sh` builds (`localhost/coredns:<version>`). When the
/// node's containerd has no image of this name, the first `localhost/coredns:*` image is used.
pub const COREDNS_IMAGE: &str = "localhost/coredns:v1.14.3";
/// The pause (sandbox) image named in containerd's `sandbox_image`.
pub const PAUSE_IMAGE: &str = "localhost/pause:3.10";
/// Where the lock and the recorded host state live.
pub const STATE_DIR: &str = "/run/pacto-node";

/// Fixed ports the node components listen on: all must be free before the start.
pub const NODE_PORTS: [(u16, &str); 5] = [
    (API_SERVER_PORT, "kube-apiserver"),
    (10250, "kubelet"),
    (10248, "kubelet healthz"),
    (10249, "kube-proxy metrics"),
    (10256, "kube-proxy healthz"),
];

/// Global sysctls kubelet, kube-proxy and the bridge plugin change; recorded before the start
/// and restored by the teardown.
pub const SYSCTLS: [&str; 7] = [
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "vm.overcommit_memory",
    "kernel.panic",
    "kernel.panic_on_oops",
    "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
];

/// Directories outside the run directory that the node writes; removed by the teardown.
pub const HOST_DIRS: [&str; 5] = [
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
];

/// System programs the node needs (Debian packages from `scripts/install-deps.sh --node`).
const SYSTEM_PROGRAMS: [(&str, &str); 9] = [
    ("containerd", "containerd"),
    ("containerd-shim-runc-v2", "containerd"),
    ("ctr", "containerd"),
    ("runc", "runc"),
    ("iptables", "iptables"),
    ("iptables-save", "iptables"),
    ("iptables-restore", "iptables"),
    ("ip", "iproute2"),
    ("umount", "mount"),
];

/// The CNI plugins the configuration names (containerd adds `loopback` itself).
const CNI_PLUGINS: [&str; 4] = ["bridge", "host-local", "portmap", "loopback"];
/// Where Debian's `containernetworking-plugins` installs them.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// Why the node cannot start, or what failed while it ran.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(
        "a real node needs root (it changes iptables, sysctls, cgroups and mounts); run as root"
    )]
    NotRoot,
    #[error(
        "{program} not found (PATH, /usr/sbin, /sbin): install it with `scripts/install-deps.sh --node` (Debian package `{package}`)"
    )]
    MissingProgram { program: String, package: String },
    #[error(
        "CNI plugin {path} not found: install it with `scripts/install-deps.sh --node` (Debian package `containernetworking-plugins`)"
    )]
    MissingCniPlugin { path: PathBuf },
    #[error(transparent)]
    Binary(#[from] BinaryError),
    #[error(
        "image (archive) {path} not found: build the images with `scripts/node-images.sh` and pass its archives"
    )]
    MissingImage { path: PathBuf },
    #[error("port {port} ({owner}) is in use: a real node needs it free")]
    PortInUse { port: u16, owner: &'static str },
    #[error(
        "another real node is running (pid {pid}, run directory {run_dir}); stop it first (`scripts/dev-cluster.sh down`)"
    )]
    AlreadyRunning { pid: u32, run_dir: String },
    #[error(
        "bridge {BRIDGE} already exists: another node runs or a previous one was not torn down"
    )]
    BridgeExists,
    #[error("cannot find this host's address (`ip -4 route get 1.1.1.1` has no `src`): {detail}")]
    HostAddress { detail: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    #[error("starting {0}")]
    Start(String, #[source] ProcessError),
    #[error(transparent)]
    Exited(#[from] crate::process::Exited),
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        command: String,
        status: String,
        output: String,
    },
    #[error("{what} not within {timeout:?}; {detail}")]
    NotReady {
        what: String,
        timeout: Duration,
        detail: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NodeError {
    let what = what.into();
    move |source| NodeError::Io { what, source }
}

/// How to start a [`RealNode`].
#[derive(Debug, Clone)]
pub struct RealNodeOptions {
    /// The cluster directory (control plane state, logs, kubeconfig) and, under `node/`, the node's
    /// run directory. `None`: a fresh temporary directory removed on teardown.
    pub dir: Option<PathBuf>,
    /// CRD files installed with the control plane.
    pub crds: Vec<PathBuf>,
    /// Docker archives imported into containerd's `k8s.io` namespace before kubelet starts
    /// (`scripts/node-images.sh` prints them): at least the pause and CoreDNS images.
    pub image_archives: Vec<PathBuf>,
    /// The CoreDNS image (in one of the archives).
    pub coredns_image: String,
    /// The sandbox image (in one of the archives).
    pub pause_image: String,
    /// Registry mirrors of the node's containerd: `(registry host, mirror endpoint)`, e.g.
    /// `("ghcr.io", "http://127.0.0.1:5000")`: images named after the host are pulled from the
    /// endpoint only (a plain-HTTP endpoint is allowed). Each becomes
    /// `<run>/containerd/certs.d/<host>/hosts.toml`, in the node's own run directory (nothing of
    /// the host's containerd configuration is touched).
    pub registry_mirrors: Vec<(String, String)>,
    /// Deadline for each phase (control plane, containerd, Node Ready, CoreDNS Ready).
    pub timeout: Duration,
    /// Namespaces exempt from the API server's Pod Security default `restricted`
    /// (docs/design/real-node.md#pod-security): [`POD_SECURITY_EXEMPT_NAMESPACES`] by default.
    pub pod_security_exempt_namespaces: Vec<String>,
}

/// The namespaces a real node exempts from its Pod Security default `restricted`, by name:
/// `kube-system` (CoreDNS, as on most clusters) and `deployed-agent`, the deployed tier's
/// node-agent scenarios, whose test pods are deliberately not restricted-compliant (a
/// `hostNetwork` pod, a UDP server on port 67 as root, busybox `httpd` as root). Everything
/// else, the project's charts and the other test workloads included, runs under `restricted`;
/// the agent's namespace carries its own `privileged` labels.
pub const POD_SECURITY_EXEMPT_NAMESPACES: [&str; 2] = ["kube-system", "deployed-agent"];

impl Default for RealNodeOptions {
    fn default() -> Self {
        Self {
            dir: None,
            crds: Vec::new(),
            image_archives: Vec::new(),
            coredns_image: COREDNS_IMAGE.to_owned(),
            pause_image: PAUSE_IMAGE.to_owned(),
            registry_mirrors: Vec::new(),
            timeout: Duration::from_mins(2),
            pod_security_exempt_namespaces: POD_SECURITY_EXEMPT_NAMESPACES
                .iter()
                .map(|n| (*n).to_owned())
                .collect(),
        }
    }
}

/// How long each phase of [`RealNode::start`] took.
#[derive(Debug, Clone, Default)]
pub struct NodeTimings {
    pub control_plane: Duration,
    pub containerd: Duration,
    pub images: Duration,
    /// kubelet start to Node Ready.
    pub node_ready: Duration,
    pub kube_proxy: Duration,
    /// CoreDNS apply to its Deployment Available.
    pub coredns_ready: Duration,
    /// The whole start, from the preflight checks to CoreDNS Ready.
    pub total: Duration,
}

/// What was checked before the start.
#[derive(Debug, Clone)]
pub struct Preflight {
    /// The host address (node IP, API server advertise address).
    pub host_ip: String,
    /// Paths of the system programs by name.
    programs: BTreeMap<&'static str, PathBuf>,
    kubelet: PathBuf,
    kube_proxy: PathBuf,
    crictl: PathBuf,
}

/// Checks everything [`RealNode::start`] needs, without changing anything: root, the programs,
/// the CNI plugins, the node binaries, the image archives, the fixed ports, no other node.
pub fn preflight(options: &RealNodeOptions) -> Result<Preflight, NodeError> {
    if !is_root() {
        return Err(NodeError::NotRoot);
    }
    let mut programs = BTreeMap::new();
    for (program, package) in SYSTEM_PROGRAMS {
        let path = find_program(program).ok_or_else(|| NodeError::MissingProgram {
            program: program.to_owned(),
            package: package.to_owned(),
        })?;
        programs.insert(program, path);
    }
    for plugin in CNI_PLUGINS {
        let path = Path::new(CNI_BIN_DIR).join(plugin);
        if !path.is_file() {
            return Err(NodeError::MissingCniPlugin { path });
        }
    }
    bins::kubernetes()?;
    let kubelet = bins::node_binary("kubelet")?;
    let kube_proxy = bins::node_binary("kube-proxy")?;
    bins::kube_scheduler()?;
    let crictl = bins::node_binary("crictl")?;
    for path in &options.image_archives {
        if !path.is_file() {
            return Err(NodeError::MissingImage { path: path.clone() });
        }
    }
    if let Some((pid, run_dir)) = live_owner() {
        return Err(NodeError::AlreadyRunning { pid, run_dir });
    }
    if Path::new("/sys/class/net").join(BRIDGE).exists() && read_state().is_none() {
        return Err(NodeError::BridgeExists);
    }
    for (port, owner) in NODE_PORTS {
        if std::net::TcpListener::bind(("0.0.0.0", port)).is_err() {
            return Err(NodeError::PortInUse { port, owner });
        }
    }
    let host_ip = host_address()?;
    Ok(Preflight {
        host_ip,
        programs,
        kubelet,
        kube_proxy,
        crictl,
    })
}

/// A running node and the control plane it joined. [`RealNode::down`] (or drop) stops everything
/// and restores the host (docs/design/real-node.md#teardown).
pub struct RealNode {
    // Dropped last of the processes (see Drop): the node is torn down before it.
    cp: Option<ControlPlane>,
    run: PathBuf,
    /// Where the node processes log (the cluster directory: kept after the teardown, which
    /// removes the run directory).
    logs: PathBuf,
    sock: PathBuf,
    preflight: Preflight,
    sysctls: BTreeMap<String, String>,
    kube_proxy: Option<ManagedProcess>,
    kubelet: Option<ManagedProcess>,
    containerd: Option<ManagedProcess>,
    timings: NodeTimings,
    torn_down: bool,
}

impl std::fmt::Debug for RealNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealNode")
            .field("run", &self.run)
            .field("host_ip", &self.preflight.host_ip)
            .finish_non_exhaustive()
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if !self.torn_down {
            for problem in self.teardown() {
                tracing::warn!(%problem, "real node teardown");
            }
        }
    }
}

impl RealNode {
    /// Checks the host ([`preflight`]), starts the control plane for a real node, then
    /// containerd (and imports the images), kubelet, kube-proxy and CoreDNS, and waits for Node
    /// Ready and CoreDNS Ready. On any failure everything started so far is torn down.
    pub async fn start(options: RealNodeOptions) -> Result<Self, NodeError> {
        let started = Instant::now();
        // A node that died without teardown leaves its lock and host state: clean it first.
        if is_root() && live_owner().is_none() && read_state().is_some() {
            for problem in cleanup_stale() {
                tracing::warn!(%problem, "cleaning up a stale node");
            }
        }
        let preflight = preflight(&options)?;
        let sysctls = read_sysctls();
        take_lock(&sysctls)?;

        let mut cp_options = ControlPlaneOptions {
            crds: options.crds.clone(),
            dir: options.dir.clone(),
            timeout: options.timeout,
            ..ControlPlaneOptions::default()
        }
        .for_real_node(&preflight.host_ip, API_SERVER_PORT);
        if let Some(api) = cp_options.real_node.as_mut() {
            api.pod_security_exempt_namespaces
                .clone_from(&options.pod_security_exempt_namespaces);
        }
        let phase = Instant::now();
        let cp = match ControlPlane::start(cp_options).await {
            Ok(cp) => cp,
            Err(e) => {
                remove_lock();
                return Err(e.into());
            }
        };
        let run = cp.dir().join("node");
        let logs = cp.dir().to_owned();
        let _ = write_state_run_dir(&run);
        let mut node = Self {
            logs,
            sock: run.join("containerd").join("containerd.sock"),
            cp: Some(cp),
            run,
            preflight,
            sysctls,
            kube_proxy: None,
            kubelet: None,
            containerd: None,
            timings: NodeTimings {
                control_plane: phase.elapsed(),
                ..NodeTimings::default()
            },
            torn_down: false,
        };
        match node.start_node(&options).await {
            Ok(()) => {
                node.timings.total = started.elapsed();
                Ok(node)
            }
            Err(e) => {
                for problem in node.teardown() {
                    tracing::warn!(%problem, "real node teardown after a failed start");
                }
                Err(e)
            }
        }
    }

    /// The control plane the node joined.
    pub fn control_plane(&self) -> &ControlPlane {
        self.cp
            .as_ref()
            .expect("the control plane lives until teardown")
    }

    /// The node's run directory (configs, containerd state, logs).
    pub fn run_dir(&self) -> &Path {
        &self.run
    }

    /// Log file of a node component (`containerd`, `kubelet`, `kube-proxy`).
    pub fn log_path(&self, component: &str) -> PathBuf {
        self.logs.join(format!("{component}.log"))
    }

    /// The host address (node IP).
    pub fn host_ip(&self) -> &str {
        &self.preflight.host_ip
    }

    /// How long each start phase took.
    pub fn timings(&self) -> &NodeTimings {
        &self.timings
    }

    /// The [`SYSCTLS`] values found before the start (what the teardown restores).
    pub fn sysctls_before(&self) -> &BTreeMap<String, String> {
        &self.sysctls
    }

    /// The containerd socket.
    pub fn containerd_socket(&self) -> &Path {
        &self.sock
    }

    /// Resident set size (KiB) of each node process, from `/proc/<pid>/status`.
    pub fn rss_kib(&self) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        for (name, p) in [
            ("containerd", &self.containerd),
            ("kubelet", &self.kubelet),
            ("kube-proxy", &self.kube_proxy),
        ] {
            if let Some(p) = p
                && let Some(kib) = rss_of(p.pid())
            {
                out.push((name, kib));
            }
        }
        out
    }

    /// Imports more image archives into containerd's `k8s.io` namespace.
    pub fn import_images(&self, archives: &[PathBuf]) -> Result<(), NodeError> {
        for archive in archives {
            let mut cmd = Command::new(&self.preflight.programs["ctr"]);
            cmd.arg("--address")
                .arg(&self.sock)
                .args(["-n", "k8s.io", "images", "import"])
                .arg(archive);
            run(&mut cmd)?;
        }
        Ok(())
    }

    /// Stops everything and restores the host; returns what could not be restored (empty when
    /// the host is back to its state before the start).
    pub fn down(mut self) -> Vec<String> {
        self.teardown()
    }

    async fn start_node(&mut self, options: &RealNodeOptions) -> Result<(), NodeError> {
        let deadline = options.timeout;
        self.write_configs(options)?;

        // containerd
        let phase = Instant::now();
        let containerd_log = self.logs.join("containerd.log");
        let mut cmd = nice(&self.preflight.programs["containerd"]);
        cmd.arg("--config")
            .arg(self.run.join("containerd").join("config.toml"));
        self.containerd = Some(
            ManagedProcess::spawn("containerd", cmd, &containerd_log, &[])
                .map_err(|e| NodeError::Start("containerd".into(), e))?,
        );
        let ctr = self.preflight.programs["ctr"].clone();
        let sock = self.sock.clone();
        let up = wait_for(deadline, Duration::from_millis(100), || {
            let ctr = ctr.clone();
            let sock = sock.clone();
            async move {
                let ok = Command::new(&ctr)
                    .arg("--address")
                    .arg(&sock)
                    .arg("version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                ok.then_some(())
            }
        })
        .await;
        self.check_alive()?;
        if up.is_none() {
            return Err(NodeError::NotReady {
                what: "containerd answering on its socket".into(),
                timeout: deadline,
                detail: format!("containerd log:\n{}", tail(&containerd_log)),
            });
        }
        self.timings.containerd = phase.elapsed();

        let phase = Instant::now();
        self.import_images(&options.image_archives)?;
        self.timings.images = phase.elapsed();

        // kubelet
        let phase = Instant::now();
        let mut cmd = nice(&self.preflight.kubelet);
        cmd.arg(format!(
            "--config={}",
            self.run.join("kubelet").join("config.yaml").display()
        ))
        .arg(format!(
            "--kubeconfig={}",
            self.run.join("kubelet.kubeconfig").display()
        ))
        .arg(format!(
            "--root-dir={}",
            self.run.join("kubelet").join("root").display()
        ))
        .arg(format!(
            "--cert-dir={}",
            self.run.join("kubelet").join("certs").display()
        ))
        .arg(format!("--hostname-override={NODE_NAME}"))
        .arg(format!("--node-ip={}", self.preflight.host_ip));
        self.kubelet = Some(
            ManagedProcess::spawn("kubelet", cmd, &self.logs.join("kubelet.log"), &[])
                .map_err(|e| NodeError::Start("kubelet".into(), e))?,
        );
        let nodes: Api<Node> = Api::all(self.control_plane().client()?);
        let ready = wait_for(deadline, Duration::from_millis(200), || {
            let nodes = nodes.clone();
            async move {
                let node = nodes.get_opt(NODE_NAME).await.ok().flatten()?;
                node.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
                    .then_some(())
            }
        })
        .await;
        self.check_alive()?;
        if ready.is_none() {
            return Err(NodeError::NotReady {
                what: format!("Node {NODE_NAME} Ready"),
                timeout: deadline,
                detail: format!("kubelet log:\n{}", tail(&self.logs.join("kubelet.log"))),
            });
        }
        self.timings.node_ready = phase.elapsed();

        // kube-proxy
        let phase = Instant::now();
        let mut cmd = nice(&self.preflight.kube_proxy);
        cmd.arg(format!(
            "--config={}",
            self.run.join("kube-proxy.yaml").display()
        ));
        self.kube_proxy = Some(
            ManagedProcess::spawn("kube-proxy", cmd, &self.logs.join("kube-proxy.log"), &[])
                .map_err(|e| NodeError::Start("kube-proxy".into(), e))?,
        );
        let healthy = wait_for(deadline, Duration::from_millis(100), || async {
            let Ok(mut stream) = tokio::net::TcpStream::connect("127.0.0.1:10256").await else {
                return None;
            };
            stream
                .write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .await
                .ok()?;
            let mut body = String::new();
            stream.read_to_string(&mut body).await.ok()?;
            body.starts_with("HTTP/1.0 200").then_some(())
        })
        .await;
        self.check_alive()?;
        if healthy.is_none() {
            return Err(NodeError::NotReady {
                what: "kube-proxy healthy (127.0.0.1:10256/healthz)".into(),
                timeout: deadline,
                detail: format!(
                    "kube-proxy log:\n{}",
                    tail(&self.logs.join("kube-proxy.log"))
                ),
            });
        }
        self.timings.kube_proxy = phase.elapsed();

        // CoreDNS
        let phase = Instant::now();
        let image = self.coredns_image(&options.coredns_image)?;
        let manifest = self.run.join("coredns.yaml");
        write(&manifest, &coredns_manifest(&image))?;
        let mut cmd = self.control_plane().kubectl()?;
        cmd.arg("apply").arg("-f").arg(&manifest);
        run(&mut cmd)?;
        let deployments: Api<Deployment> =
            Api::namespaced(self.control_plane().client()?, "kube-system");
        let available = wait_for(deadline, Duration::from_millis(200), || {
            let deployments = deployments.clone();
            async move {
                let d = deployments.get_opt("coredns").await.ok().flatten()?;
                (d.status?.available_replicas.unwrap_or(0) >= 1).then_some(())
            }
        })
        .await;
        self.check_alive()?;
        if available.is_none() {
            let mut cmd = self.control_plane().kubectl()?;
            cmd.args(["get", "pods,events", "-n", "kube-system", "-o", "wide"]);
            let detail = cmd.output().map_or_else(
                |e| e.to_string(),
                |o| String::from_utf8_lossy(&o.stdout).into_owned(),
            );
            return Err(NodeError::NotReady {
                what: "Deployment kube-system/coredns Available".into(),
                timeout: deadline,
                detail,
            });
        }
        self.timings.coredns_ready = phase.elapsed();
        Ok(())
    }

    /// `wanted` if containerd has it, else the first `localhost/coredns:*` image it has.
    fn coredns_image(&self, wanted: &str) -> Result<String, NodeError> {
        let mut cmd = Command::new(&self.preflight.programs["ctr"]);
        cmd.arg("--address")
            .arg(&self.sock)
            .args(["-n", "k8s.io", "images", "ls", "-q"]);
        let images = run(&mut cmd)?;
        let names: Vec<&str> = images.lines().map(str::trim).collect();
        if names.contains(&wanted) {
            return Ok(wanted.to_owned());
        }
        names
            .iter()
            .find(|n| n.starts_with("localhost/coredns:"))
            .map(|n| (*n).to_owned())
            .ok_or_else(|| NodeError::MissingImage {
                path: PathBuf::from(wanted),
            })
    }

    /// A node process that exited is an error naming it, with its log.
    fn check_alive(&mut self) -> Result<(), NodeError> {
        match crate::process::first_exited([
            ("containerd", &mut self.containerd),
            ("kubelet", &mut self.kubelet),
            ("kube-proxy", &mut self.kube_proxy),
        ]) {
            Some(exited) => Err(exited.into()),
            None => Ok(()),
        }
    }

    fn write_configs(&self, options: &RealNodeOptions) -> Result<(), NodeError> {
        let cp = self.control_plane();
        let run = &self.run;
        for d in [
            "containerd/certs.d",
            "cni/net.d",
            "cni/ipam",
            "kubelet/root",
            "kubelet/certs",
        ] {
            std::fs::create_dir_all(run.join(d)).map_err(io(format!("creating {d}")))?;
        }
        for (host, endpoint) in &options.registry_mirrors {
            let dir = run.join("containerd").join("certs.d").join(host);
            std::fs::create_dir_all(&dir).map_err(io(format!("creating certs.d/{host}")))?;
            write(&dir.join("hosts.toml"), &registry_hosts(host, endpoint))?;
        }
        let r = run.display();
        write(
            &run.join("containerd").join("config.toml"),
            &containerd_config(
                &r.to_string(),
                &options.pause_image,
                &self.preflight.programs["runc"],
            ),
        )?;
        write(
            &run.join("cni")
                .join("net.d")
                .join("10-pacto-bridge.conflist"),
            &cni_config(&r.to_string()),
        )?;
        let ca = cp.dir().join("pki").join("ca.crt");
        write(
            &run.join("kubelet").join("config.yaml"),
            &kubelet_config(&self.sock, &ca),
        )?;
        write(
            &run.join("kubelet.kubeconfig"),
            &cp.user_kubeconfig(&format!("system:node:{NODE_NAME}"), &["system:nodes"])?,
        )?;
        let proxy_kubeconfig = run.join("kube-proxy.kubeconfig");
        write(
            &proxy_kubeconfig,
            &cp.user_kubeconfig("system:kube-proxy", &[])?,
        )?;
        write(
            &run.join("kube-proxy.yaml"),
            &kube_proxy_config(&proxy_kubeconfig),
        )?;
        Ok(())
    }

    /// The full teardown (docs/design/real-node.md#teardown), in order; every step runs even when
    /// an earlier one failed. Returns the problems met.
    fn teardown(&mut self) -> Vec<String> {
        self.torn_down = true;
        let mut problems = Vec::new();
        // 1. kube-proxy, then its own cleanup of the rules it wrote.
        if let Some(mut p) = self.kube_proxy.take() {
            p.stop();
        }
        let _ = Command::new(&self.preflight.kube_proxy)
            .arg("--cleanup")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // 2. kubelet, so nothing recreates pods.
        if let Some(mut p) = self.kubelet.take() {
            p.stop();
        }
        // 3. Remove every pod sandbox through the CRI (stops containers, CNI DEL, netns).
        if self.containerd.is_some() {
            for _ in 0..2 {
                let _ = Command::new(&self.preflight.crictl)
                    .arg("--runtime-endpoint")
                    .arg(format!("unix://{}", self.sock.display()))
                    .args(["--timeout", "20s", "rmp", "-fa"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        // 4. containerd, and whatever survived in the pods' cgroups or as shims.
        if let Some(mut p) = self.containerd.take() {
            p.stop();
        }
        let sock = self.sock.display().to_string();
        host_cleanup(&mut problems, Some(&sock), &self.run, &self.sysctls);
        // The control plane last: its directory (a temporary one holds the run directory) goes
        // with it, after every mount below it is gone.
        drop(self.cp.take());
        remove_lock();
        problems
    }
}

/// Steps 4–9 of the teardown that need no running process: kill what is left in the pods'
/// cgroups and the shims (of `sock`, or every containerd shim when `None`), unmount, remove the
/// bridge, the iptables rules, the cgroups and the host directories, restore `sysctls`.
fn host_cleanup(
    problems: &mut Vec<String>,
    sock: Option<&str>,
    run: &Path,
    sysctls: &BTreeMap<String, String>,
) {
    kill_pids(&pids_in_kubepods());
    kill_pids(&shims(sock));
    // Processes killed above must be gone before their cgroups and mounts go; wait briefly.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !(pids_in_kubepods().is_empty() && shims(sock).is_empty()) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !shims(sock).is_empty() {
        problems.push("containerd shims still running after SIGKILL".to_owned());
    }
    // 5. Mounts, deepest first.
    let prefixes = [
        run.display().to_string(),
        "/run/netns/cni-".to_owned(),
        "/run/containerd".to_owned(),
        "/var/lib/kubelet".to_owned(),
    ];
    for mount in mounts_under(&prefixes) {
        let ok = Command::new("umount")
            .arg("-l")
            .arg(&mount)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            problems.push(format!("umount -l {mount} failed"));
        }
    }
    if let Ok(entries) = std::fs::read_dir("/run/netns") {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("cni-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    // 6. The bridge and the iptables rules of kube-proxy, the CNI and the bridge.
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        let ok = Command::new("ip")
            .args(["link", "del", BRIDGE])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            problems.push(format!("ip link del {BRIDGE} failed"));
        }
    }
    for family in ["iptables", "ip6tables"] {
        if let Err(e) = remove_rules(family) {
            problems.push(format!("{family}: {e}"));
        }
    }
    // 7. Cgroups, depth first.
    for root in kubepods_roots() {
        if let Err(e) = remove_cgroup_tree(&root) {
            problems.push(format!("rmdir {}: {e}", root.display()));
        }
    }
    // 8. Sysctls as found before the start.
    for (name, value) in sysctls {
        let path = sysctl_path(name);
        if std::fs::read_to_string(&path).is_ok_and(|v| v.trim() == value) {
            continue;
        }
        if let Err(e) = std::fs::write(&path, format!("{value}\n")) {
            problems.push(format!("restoring {name}={value}: {e}"));
        }
    }
    // 9. Directories the node writes outside its run directory. `/run/containerd` is also the
    // default state directory of any other containerd on the machine: while one runs, only the
    // runc state of the `k8s.io` namespace (ours) goes.
    let other_containerd = processes_named("containerd");
    for dir in HOST_DIRS {
        let dir = if dir == "/run/containerd" && !other_containerd.is_empty() {
            "/run/containerd/runc/k8s.io"
        } else {
            dir
        };
        if let Err(e) = std::fs::remove_dir_all(dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            problems.push(format!("rm -rf {dir}: {e}"));
        }
    }
    if let Err(e) = std::fs::remove_dir_all(run)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        problems.push(format!("rm -rf {}: {e}", run.display()));
    }
}

/// Tears down what a node whose process died left behind, from the state in [`STATE_DIR`]
/// (sysctls recorded at its start, its run directory). Does nothing when no state is recorded.
/// Returns the problems met.
pub fn cleanup_stale() -> Vec<String> {
    let Some(state) = read_state() else {
        return Vec::new();
    };
    if let Some((pid, run_dir)) = live_owner() {
        return vec![format!(
            "a node is running (pid {pid}, {run_dir}); not cleaning up"
        )];
    }
    let mut problems = Vec::new();
    // Processes of the dead node that may still run: its kubelet, kube-proxy and containerd
    // were killed by their watchdogs; the shims are separate process groups.
    let run = PathBuf::from(&state.run_dir);
    if let Ok(kube_proxy) = bins::node_binary("kube-proxy") {
        let _ = Command::new(kube_proxy)
            .arg("--cleanup")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let sock = (!state.run_dir.is_empty()).then(|| {
        run.join("containerd")
            .join("containerd.sock")
            .display()
            .to_string()
    });
    host_cleanup(&mut problems, sock.as_deref(), &run, &state.sysctls);
    remove_lock();
    problems
}

/// What of a node is left on the host: empty when nothing is. `run_dir` names the node's run
/// directory, so that only the shims of its containerd count (another containerd may run on the
/// machine); `None` counts every containerd shim.
pub fn host_leftovers(run_dir: Option<&Path>) -> Vec<String> {
    let sock = run_dir.map(|r| {
        r.join("containerd")
            .join("containerd.sock")
            .display()
            .to_string()
    });
    let other_containerd = !processes_named("containerd").is_empty();
    let mut found = Vec::new();
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        found.push(format!("network device {BRIDGE}"));
    }
    for root in kubepods_roots() {
        found.push(format!("cgroup {}", root.display()));
    }
    for dir in HOST_DIRS {
        let dir = if dir == "/run/containerd" && other_containerd {
            "/run/containerd/runc/k8s.io"
        } else {
            dir
        };
        if Path::new(dir).exists() {
            found.push(format!("directory {dir}"));
        }
    }
    if let Some(run) = run_dir
        && run.exists()
    {
        found.push(format!("run directory {}", run.display()));
    }
    for family in ["iptables", "ip6tables"] {
        if let Ok(rules) = Command::new(format!("{family}-save")).output() {
            let text = String::from_utf8_lossy(&rules.stdout);
            let n = text.lines().filter(|l| is_node_rule(l)).count();
            if n > 0 {
                found.push(format!("{n} {family} lines of the node"));
            }
        }
    }
    let mounts = mounts_under(&["/run/netns/cni-".to_owned(), "/run/containerd".to_owned()]);
    for m in mounts {
        found.push(format!("mount {m}"));
    }
    let shims = shims(sock.as_deref());
    if !shims.is_empty() {
        found.push(format!("containerd shims {shims:?}"));
    }
    if Path::new(STATE_DIR).join("lock").exists() {
        found.push(format!("lock {STATE_DIR}/lock"));
    }
    found
}

/// The current values of [`SYSCTLS`] (those that exist).
pub fn read_sysctls() -> BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|name| {
            let value = std::fs::read_to_string(sysctl_path(name)).ok()?;
            Some(((*name).to_owned(), value.trim().to_owned()))
        })
        .collect()
}

fn sysctl_path(name: &str) -> PathBuf {
    Path::new("/proc/sys").join(name.replace('.', "/"))
}

// ---- lock and recorded state

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct State {
    pid: u32,
    run_dir: String,
    sysctls: BTreeMap<String, String>,
}

fn state_path() -> PathBuf {
    Path::new(STATE_DIR).join("lock")
}

fn read_state() -> Option<State> {
    let text = std::fs::read_to_string(state_path()).ok()?;
    serde_json::from_str(&text).ok()
}

/// The pid and run directory of a node whose process is alive.
fn live_owner() -> Option<(u32, String)> {
    let state = read_state()?;
    (state.pid != std::process::id() && Path::new(&format!("/proc/{}", state.pid)).exists())
        .then_some((state.pid, state.run_dir))
}

fn take_lock(sysctls: &BTreeMap<String, String>) -> Result<(), NodeError> {
    std::fs::create_dir_all(STATE_DIR).map_err(io(format!("creating {STATE_DIR}")))?;
    let state = State {
        pid: std::process::id(),
        run_dir: String::new(),
        sysctls: sysctls.clone(),
    };
    let text = serde_json::to_string(&state).unwrap_or_default();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(state_path())
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                let (pid, run_dir) = read_state().map(|s| (s.pid, s.run_dir)).unwrap_or_default();
                NodeError::AlreadyRunning { pid, run_dir }
            } else {
                NodeError::Io {
                    what: format!("creating {}", state_path().display()),
                    source: e,
                }
            }
        })?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .map_err(io(format!("writing {}", state_path().display())))
}

fn write_state_run_dir(run: &Path) -> Result<(), NodeError> {
    let Some(mut state) = read_state() else {
        return Ok(());
    };
    state.run_dir = run.display().to_string();
    let text = serde_json::to_string(&state).unwrap_or_default();
    write(&state_path(), &text)
}

fn remove_lock() {
    let _ = std::fs::remove_file(state_path());
    let _ = std::fs::remove_dir(STATE_DIR);
}

// ---- host helpers

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The source address of the default route (`ip -4 route get 1.1.1.1`).
fn host_address() -> Result<String, NodeError> {
    let out = Command::new("ip")
        .args(["-4", "route", "get", "1.1.1.1"])
        .output()
        .map_err(|e| NodeError::HostAddress {
            detail: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "src"
            && let Some(ip) = words.next()
        {
            return Ok(ip.to_owned());
        }
    }
    Err(NodeError::HostAddress {
        detail: format!(
            "{}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}

fn nice(program: &Path) -> Command {
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "10"]).arg(program);
    cmd
}

fn write(path: &Path, contents: &str) -> Result<(), NodeError> {
    std::fs::write(path, contents).map_err(io(format!("writing {}", path.display())))
}

fn run(cmd: &mut Command) -> Result<String, NodeError> {
    let describe = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd.output().map_err(io(format!("running {describe}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NodeError::Command {
            command: describe,
            status: out.status.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }
}

fn tail(path: &Path) -> String {
    crate::process::log_tail(path, 4000)
}

fn rss_of(pid: u32) -> Option<u64> {
    // `nice` execs the program, so the pid is the program's.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Live processes whose command name (`/proc/<pid>/comm`) is `name`.
fn processes_named(name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // Zombies are on their way out.
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'));
            (comm.trim() == name && !zombie).then_some(pid)
        })
        .collect()
}

fn kill_pids(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("/bin/sh")
        .args(["-c", r#"kill -s KILL "$@""#, "kill-pids"])
        .args(pids.iter().map(u32::to_string))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Every `kubepods` cgroup directory: one per v1 hierarchy, in `unified`, or at the v2 root.
fn kubepods_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let base = Path::new("/sys/fs/cgroup");
    let direct = base.join("kubepods");
    if direct.is_dir() {
        roots.push(direct);
    }
    if let Ok(entries) = std::fs::read_dir(base) {
        for e in entries.flatten() {
            let p = e.path().join("kubepods");
            if p.is_dir() {
                roots.push(p);
            }
        }
    }
    roots
}

fn pids_in_kubepods() -> Vec<u32> {
    fn walk(dir: &Path, out: &mut Vec<u32>) {
        if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out);
                }
            }
        }
    }
    let mut pids = Vec::new();
    for root in kubepods_roots() {
        walk(&root, &mut pids);
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

fn remove_cgroup_tree(dir: &Path) -> std::io::Result<()> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path())?;
            }
        }
    }
    let mut last = Ok(());
    for _ in 0..50 {
        last = std::fs::remove_dir(dir);
        match &last {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    last
}

/// containerd shims serving `sock` (every containerd shim when `None`).
fn shims(sock: Option<&str>) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("containerd-shim-runc-v2") && sock.is_none_or(|s| cmdline.contains(s)) {
            pids.push(pid);
        }
    }
    pids
}

/// Mount points (from `/proc/self/mountinfo`) starting with any of `prefixes`, deepest first.
fn mounts_under(prefixes: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<String> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount)
        .filter(|m| prefixes.iter().any(|p| m.starts_with(p.as_str())))
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.matches('/').count()));
    found.dedup();
    found
}

/// `/proc/self/mountinfo` writes space, tab, newline and backslash as `\ooo`.
fn unescape_mount(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether an `iptables-save` line belongs to kube-proxy, the CNI plugins or the node's bridge.
fn is_node_rule(line: &str) -> bool {
    line.contains("KUBE-") || line.contains("CNI-") || line.contains(BRIDGE)
}

/// Rewrites every table without the node's chains and rules ([`is_node_rule`]).
fn remove_rules(family: &str) -> Result<(), String> {
    let saved = Command::new(format!("{family}-save"))
        .output()
        .map_err(|e| format!("{family}-save: {e}"))?;
    let text = String::from_utf8_lossy(&saved.stdout);
    if !text.lines().any(is_node_rule) {
        return Ok(());
    }
    let kept: String =
        text.lines()
            .filter(|l| !is_node_rule(l))
            .fold(String::new(), |mut out, l| {
                let _ = writeln!(out, "{l}");
                out
            });
    let mut child = Command::new(format!("{family}-restore"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{family}-restore: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, kept.as_bytes())
            .map_err(|e| format!("{family}-restore: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{family}-restore: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{family}-restore failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

// ---- configuration files (docs/design/real-node.md#configuration)

fn containerd_config(run: &str, pause_image: &str, runc: &Path) -> String {
    format!(
        r#"version = 2
root = "{run}/containerd/root"
state = "{run}/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{run}/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  disable_apparmor = true
  # Root here may lack CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{runc}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{run}/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{run}/containerd/certs.d"
"#,
        runc = runc.display()
    )
}

/// containerd's `hosts.toml` for `host`: pull and resolve through `endpoint` first. containerd
/// falls back to `server` (the real `host`) only when the mirror fails; the deployed tier checks
/// that every image came from the mirror (docs/testing.md).
fn registry_hosts(host: &str, endpoint: &str) -> String {
    format!(
        "server = \"https://{host}\"\n\n[host.\"{endpoint}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n"
    )
}

fn cni_config(run: &str) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": NODE_NAME,
        "plugins": [
            {
                "type": "bridge", "bridge": BRIDGE, "isGateway": true, "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": POD_CIDR }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": format!("{run}/cni/ipam"),
                },
            },
            { "type": "portmap", "capabilities": { "portMappings": true } },
        ],
    })
    .to_string()
}

fn kubelet_config(sock: &Path, ca: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://{sock}
address: 0.0.0.0
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
clusterDomain: cluster.local
clusterDNS: ["{CLUSTER_DNS}"]
resolvConf: /etc/resolv.conf
failSwapOn: false
podCIDR: {POD_CIDR}
maxPods: 50
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {{memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
protectKernelDefaults: false
staticPodPath: ""
syncFrequency: 10s
nodeStatusUpdateFrequency: 10s
logging: {{verbosity: 1}}
"#,
        sock = sock.display(),
        ca = ca.display(),
    )
}

fn kube_proxy_config(kubeconfig: &Path) -> String {
    format!(
        r"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {kubeconfig}}}
hostnameOverride: {NODE_NAME}
mode: iptables
clusterCIDR: {POD_CIDR}
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {{maxPerCore: 0}}
",
        kubeconfig = kubeconfig.display()
    )
}

/// CoreDNS as a Deployment + Service `kube-dns` (10.0.0.10:53 → 1053) in `kube-system`. It listens
/// on 1053: a non-root process does not get the added NET_BIND_SERVICE capability from
/// containerd 1.6 (docs/design/real-node.md#cluster-dns).
pub fn coredns_manifest(image: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: coredns, namespace: kube-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: "system:coredns"}}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: "system:coredns"}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}}
subjects:
  - {{kind: ServiceAccount, name: coredns, namespace: kube-system}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: coredns, namespace: kube-system}}
data:
  Corefile: |
    .:1053 {{
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {{
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }}
        forward . /etc/resolv.conf
        cache 30
        loop
        reload
        loadbalance
    }}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: coredns, namespace: kube-system, labels: {{k8s-app: kube-dns}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{k8s-app: kube-dns}}}}
  template:
    metadata: {{labels: {{k8s-app: kube-dns}}}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext: {{runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532}}
      containers:
        - name: coredns
          image: {image}
          imagePullPolicy: IfNotPresent
          args: ["-conf", "/etc/coredns/Corefile"]
          ports:
            - {{name: dns, containerPort: 1053, protocol: UDP}}
            - {{name: dns-tcp, containerPort: 1053, protocol: TCP}}
          readinessProbe:
            httpGet: {{path: /ready, port: 8181}}
            periodSeconds: 1
          livenessProbe:
            httpGet: {{path: /health, port: 8080}}
            periodSeconds: 10
          securityContext: {{readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}}
          volumeMounts:
            - {{name: config, mountPath: /etc/coredns, readOnly: true}}
      volumes:
        - name: config
          configMap: {{name: coredns}}
---
apiVersion: v1
kind: Service
metadata: {{name: kube-dns, namespace: kube-system, labels: {{k8s-app: kube-dns}}}}
spec:
  clusterIP: {CLUSTER_DNS}
  selector: {{k8s-app: kube-dns}}
  ports:
    - {{name: dns, port: 53, targetPort: 1053, protocol: UDP}}
    - {{name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_security_defaults_to_restricted_with_the_named_exemptions() {
        let exempt: Vec<String> = POD_SECURITY_EXEMPT_NAMESPACES
            .iter()
            .map(|n| (*n).to_owned())
            .collect();
        let yaml = crate::controlplane::pod_security_admission_config(&exempt);
        let doc: serde_json::Value = serde_norway::from_str(&yaml).expect("YAML");
        let plugin = &doc["plugins"][0];
        assert_eq!(plugin["name"], "PodSecurity");
        let config = &plugin["configuration"];
        for mode in ["enforce", "audit", "warn"] {
            assert_eq!(config["defaults"][mode], "restricted", "{mode}");
            assert_eq!(config["defaults"][format!("{mode}-version")], "latest");
        }
        assert_eq!(
            config["exemptions"]["namespaces"],
            serde_json::json!(["kube-system", "deployed-agent"])
        );
        assert_eq!(
            RealNodeOptions::default().pod_security_exempt_namespaces,
            exempt
        );
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape_mount(r"/run/a\040b"), "/run/a b");
        assert_eq!(unescape_mount("/plain/path"), "/plain/path");
        assert_eq!(unescape_mount(r"/end\\"), r"/end\\");
    }

    #[test]
    fn node_rules_are_kube_proxy_cni_and_bridge_lines() {
        assert!(is_node_rule(":KUBE-SERVICES - [0:0]"));
        assert!(is_node_rule("-A POSTROUTING -s 10.88.0.5/32 -j CNI-abc"));
        assert!(is_node_rule("-A FORWARD -i cni-pacto0 -j ACCEPT"));
        assert!(!is_node_rule("-A INPUT -i eth0 -j ACCEPT"));
        assert!(!is_node_rule("*filter"));
        assert!(!is_node_rule("COMMIT"));
    }

    #[test]
    fn a_registry_mirror_is_a_hosts_toml_pulling_from_the_endpoint() {
        let t = registry_hosts("ghcr.io", "http://127.0.0.1:5000");
        assert_eq!(
            t,
            "server = \"https://ghcr.io\"\n\n[host.\"http://127.0.0.1:5000\"]\n  \
             capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n"
        );
    }

    #[test]
    fn configs_use_absolute_paths_of_the_run_directory() {
        let c = containerd_config("/r/node", PAUSE_IMAGE, Path::new("/usr/sbin/runc"));
        assert!(
            c.contains("address = \"/r/node/containerd/containerd.sock\""),
            "{c}"
        );
        assert!(c.contains("restrict_oom_score_adj = true"), "{c}");
        assert!(
            c.contains(&format!("sandbox_image = \"{PAUSE_IMAGE}\"")),
            "{c}"
        );
        let cni: serde_json::Value = serde_json::from_str(&cni_config("/r/node")).unwrap();
        assert_eq!(cni["plugins"][0]["ipam"]["dataDir"], "/r/node/cni/ipam");
        assert_eq!(cni["plugins"][0]["bridge"], BRIDGE);
        let k = kubelet_config(
            Path::new("/r/node/containerd/containerd.sock"),
            Path::new("/ca"),
        );
        let k: serde_json::Value = serde_norway::from_str(&k).unwrap();
        assert_eq!(k["failCgroupV1"], false);
        assert_eq!(k["clusterDNS"][0], CLUSTER_DNS);
        assert_eq!(
            k["containerRuntimeEndpoint"],
            "unix:///r/node/containerd/containerd.sock"
        );
        let p: serde_json::Value =
            serde_norway::from_str(&kube_proxy_config(Path::new("/k"))).unwrap();
        assert_eq!(p["clientConnection"]["kubeconfig"], "/k");
    }

    #[test]
    fn coredns_manifest_parses_and_maps_port_53_to_1053() {
        let docs: Vec<serde_json::Value> =
            serde_norway::Deserializer::from_str(&coredns_manifest("img:1"))
                .map(|d| serde::Deserialize::deserialize(d).unwrap())
                .collect();
        assert_eq!(docs.len(), 6);
        let svc = &docs[5];
        assert_eq!(svc["spec"]["clusterIP"], CLUSTER_DNS);
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 1053);
        assert_eq!(
            docs[4]["spec"]["template"]["spec"]["containers"][0]["image"],
            "img:1"
        );
    }

    #[test]
    fn refusals_are_one_line() {
        for e in [
            NodeError::NotRoot,
            NodeError::PortInUse {
                port: 10250,
                owner: "kubelet",
            },
            NodeError::AlreadyRunning {
                pid: 1,
                run_dir: "/x".into(),
            },
            NodeError::MissingProgram {
                program: "containerd".into(),
                package: "containerd".into(),
            },
        ] {
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "{msg}");
        }
    }
}
