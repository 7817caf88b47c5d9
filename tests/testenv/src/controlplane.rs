//! A real Kubernetes control plane on loopback: etcd + kube-apiserver, optionally
//! kube-controller-manager. No kubelet, no scheduler (see [`crate::simulator`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::Deserialize as _;

use crate::bins::{self, BinaryError};
use crate::pki::{Ca, PkiError, SigningKey};
use crate::process::{ManagedProcess, ProcessError, wait_for};

/// The user name of the admin identity (in group `system:masters`).
pub const ADMIN_USER: &str = "pacto-testenv-admin";
/// The cluster IP range given to the API server.
pub const SERVICE_CLUSTER_IP_RANGE: &str = "10.0.0.0/24";

/// Errors while starting, using or stopping the control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error(transparent)]
    Binary(#[from] BinaryError),
    #[error("generating certificates")]
    Pki(#[from] PkiError),
    #[error("creating the working directory")]
    WorkDir(#[source] std::io::Error),
    #[error("writing {path}")]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {path}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("finding a free loopback port")]
    FreePort(#[source] std::io::Error),
    #[error("starting {0}")]
    Start(String, #[source] ProcessError),
    #[error(transparent)]
    Exited(#[from] crate::process::Exited),
    #[error("building the /readyz request")]
    ReadyzRequest(#[source] http::Error),
    #[error(
        "kube-apiserver not ready (/readyz) within {timeout:?}; last error: {last}; apiserver log:\n{log}"
    )]
    NotReady {
        timeout: Duration,
        last: String,
        log: String,
    },
    #[error(
        "kube-controller-manager did not create the default ServiceAccount within {timeout:?}; log:\n{log}"
    )]
    ControllerManagerNotReady { timeout: Duration, log: String },
    #[error("parsing the generated kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    #[error("building a client")]
    Client(#[source] kube::Error),
    #[error("parsing CRD file {path}: document {index}")]
    CrdParse {
        path: PathBuf,
        index: usize,
        #[source]
        source: serde_norway::Error,
    },
    #[error("CRD file {path}: document {index} is a {kind}, expected CustomResourceDefinition")]
    CrdKind {
        path: PathBuf,
        index: usize,
        kind: String,
    },
    #[error("CRD file {path}: document {index} is not a valid CustomResourceDefinition")]
    CrdDecode {
        path: PathBuf,
        index: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("CRD {name}: the CustomResourceDefinition has no metadata.name")]
    CrdName { name: String },
    #[error("applying CRD {name}")]
    CrdApply {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("CRD {name} not Established within {timeout:?}")]
    CrdNotEstablished { name: String, timeout: Duration },
    #[error("creating namespace {name}")]
    Namespace {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("creating ServiceAccount {namespace}/{name}")]
    ServiceAccount {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("requesting a token for ServiceAccount {namespace}/{name}")]
    TokenRequest {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("etcd's HTTP API failed")]
    Etcd(#[source] reqwest::Error),
    #[error("etcd answered without a revision: {0}")]
    EtcdAnswer(String),
    #[error("the TokenRequest for {namespace}/{name} returned no token")]
    EmptyToken { namespace: String, name: String },
}

/// How to start a [`ControlPlane`].
#[derive(Debug, Clone)]
pub struct ControlPlaneOptions {
    /// Also run kube-controller-manager (Deployments, ReplicaSets, EndpointSlices, namespaces,
    /// garbage collection, service accounts, ...).
    pub controller_manager: bool,
    /// CRD YAML files (multi-document allowed) installed and awaited before `start` returns.
    pub crds: Vec<PathBuf>,
    /// Work in this directory (created if missing, kept afterwards) instead of a fresh temporary
    /// directory that is removed on drop. Used by the dev cluster.
    pub dir: Option<PathBuf>,
    /// Deadline for the whole start-up (processes ready and CRDs established).
    pub timeout: Duration,
    /// Keep the `ServiceAccount` admission plugin. Off by default: without kube-controller-manager
    /// nobody creates the `default` ServiceAccount and every Pod create would be refused.
    pub service_account_admission: bool,
    /// Extra `--flag=value` arguments for kube-apiserver.
    pub extra_apiserver_args: Vec<String>,
    /// The API server's port; `None` picks a free loopback port.
    pub secure_port: Option<u16>,
    /// Serve a real node (see [`crate::node`]): set by [`ControlPlaneOptions::for_real_node`].
    pub real_node: Option<RealNodeApi>,
    /// Also run kube-scheduler (a real node needs it; the simulator schedules by itself).
    pub scheduler: bool,
}

/// The API server settings a real kubelet and real pods need (docs/design/real-node.md#control-plane):
/// reachable on the host address, the `kubernetes` Service endpoint published, the Node authorizer
/// and `NodeRestriction`, a client certificate for calls to the kubelet, ServiceAccount admission,
/// and kube-controller-manager with one credential per controller.
#[derive(Debug, Clone)]
pub struct RealNodeApi {
    /// The host address pods reach the API server at (the endpoint of Service `kubernetes`).
    pub advertise_address: String,
    /// Namespaces exempt from the cluster-wide Pod Security default, which is `restricted`
    /// (enforce, audit and warn) as on a demanding user's cluster
    /// (docs/design/real-node.md#pod-security). A namespace's own `pod-security.kubernetes.io/*`
    /// labels still override the default.
    pub pod_security_exempt_namespaces: Vec<String>,
}

/// The `AdmissionConfiguration` of a real node's API server (`--admission-control-config-file`):
/// the PodSecurity plugin's default level `restricted` for enforce, audit and warn, with
/// `exempt` (namespace names) exempted.
pub fn pod_security_admission_config(exempt: &[String]) -> String {
    let namespaces = exempt
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: PodSecurity
    configuration:
      apiVersion: pod-security.admission.config.k8s.io/v1
      kind: PodSecurityConfiguration
      defaults:
        enforce: restricted
        enforce-version: latest
        audit: restricted
        audit-version: latest
        warn: restricted
        warn-version: latest
      exemptions:
        usernames: []
        runtimeClasses: []
        namespaces: [{namespaces}]
"
    )
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        Self {
            controller_manager: false,
            crds: Vec::new(),
            dir: None,
            timeout: Duration::from_mins(1),
            service_account_admission: false,
            extra_apiserver_args: Vec::new(),
            secure_port: None,
            real_node: None,
            scheduler: false,
        }
    }
}

impl ControlPlaneOptions {
    /// Enables kube-controller-manager.
    #[must_use]
    pub fn with_controller_manager(mut self) -> Self {
        self.controller_manager = true;
        self
    }

    /// The options of a control plane for a real node on `advertise_address`, API server on
    /// `port`: kube-controller-manager, kube-scheduler and ServiceAccount admission on.
    #[must_use]
    pub fn for_real_node(mut self, advertise_address: &str, port: u16) -> Self {
        self.controller_manager = true;
        self.scheduler = true;
        self.service_account_admission = true;
        self.secure_port = Some(port);
        self.real_node = Some(RealNodeApi {
            advertise_address: advertise_address.to_owned(),
            pod_security_exempt_namespaces: vec!["kube-system".to_owned()],
        });
        self
    }

    /// Adds a CRD file to install at start.
    #[must_use]
    pub fn with_crd(mut self, path: impl Into<PathBuf>) -> Self {
        self.crds.push(path.into());
        self
    }

    /// Adds CRD files to install at start.
    #[must_use]
    pub fn with_crds(mut self, paths: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        self.crds.extend(paths.into_iter().map(Into::into));
        self
    }
}

/// A running etcd + kube-apiserver (+ kube-controller-manager). Everything stops, and the
/// temporary directory is removed, when the value is dropped (also during a panic); a watchdog
/// per process covers the test process dying without dropping it (see [`crate::process`]).
pub struct ControlPlane {
    dir: PathBuf,
    server: String,
    etcd_url: String,
    ca: Ca,
    ca_pem: String,
    admin_kubeconfig: PathBuf,
    admin_config: Config,
    scheduler: Option<ManagedProcess>,
    kcm: Option<ManagedProcess>,
    // Behind a lock: tests stop and restart it through a shared `&ControlPlane`.
    apiserver: std::sync::Mutex<Option<ManagedProcess>>,
    // How to start kube-apiserver again (same flags, same port): program and arguments.
    apiserver_command: (PathBuf, Vec<std::ffi::OsString>),
    cleanup_dirs: Vec<PathBuf>,
    etcd: std::sync::Mutex<Option<ManagedProcess>>,
    // Last: removed after the processes are gone.
    _tempdir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server", &self.server)
            .field("dir", &self.dir)
            .field("controller_manager", &self.kcm.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Controllers first, then the API server, then its storage.
        if let Some(mut p) = self.scheduler.take() {
            p.stop();
        }
        if let Some(mut p) = self.kcm.take() {
            p.stop();
        }
        if let Some(mut p) = self.apiserver_slot().take() {
            p.stop();
        }
        if let Some(mut p) = lock(&self.etcd).take() {
            p.stop();
        }
    }
}

/// Locks a process slot; a panic while holding the lock leaves the slot usable (it holds no
/// invariant).
fn lock<T>(slot: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Installs the `ring` rustls provider as the process default (kube builds its TLS config from the
/// process default; several providers are compiled into this workspace, so none is chosen
/// automatically). Harmless when one is already installed.
pub fn ensure_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn free_port() -> Result<u16, ControlPlaneError> {
    crate::ports::free_port().map_err(ControlPlaneError::FreePort)
}

fn write_file(path: &Path, contents: &str) -> Result<(), ControlPlaneError> {
    std::fs::write(path, contents).map_err(|source| ControlPlaneError::WriteFile {
        path: path.to_owned(),
        source,
    })
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

/// Renders a kubeconfig for `server` with the given credentials.
fn kubeconfig_yaml(server: &str, ca_pem: &str, user: &str, credentials: &Credentials) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: pacto-testenv\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: {user}\n  context:\n    cluster: pacto-testenv\n    user: {user}\ncurrent-context: {user}\nusers:\n- name: {user}\n  user:\n",
        ca = b64(ca_pem),
    );
    match credentials {
        Credentials::Certificate { cert_pem, key_pem } => {
            let _ = write!(
                out,
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                b64(cert_pem),
                b64(key_pem)
            );
        }
        Credentials::Token(token) => {
            let _ = writeln!(out, "    token: {token}");
        }
    }
    out
}

enum Credentials {
    Certificate { cert_pem: String, key_pem: String },
    Token(String),
}

async fn config_from_yaml(yaml: &str) -> Result<Config, ControlPlaneError> {
    ensure_crypto_provider();
    let kubeconfig = Kubeconfig::from_yaml(yaml).map_err(ControlPlaneError::Kubeconfig)?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(ControlPlaneError::Kubeconfig)
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A name unique within this process and very likely across processes: `<prefix>-<pid>-<n>`.
pub fn unique_name(prefix: &str) -> String {
    let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver (and kube-controller-manager when asked), waits for
    /// `/readyz`, installs the CRDs and waits until they are Established.
    ///
    /// Ports are picked free just before use; if another process takes one in between (the
    /// server exits with "address already in use"), start-up is retried with new ports, at most
    /// three times.
    pub async fn start(options: ControlPlaneOptions) -> Result<Self, ControlPlaneError> {
        let mut attempt = 1;
        loop {
            match Self::start_once(&options).await {
                Err(ControlPlaneError::Exited(exited))
                    if attempt < 3 && exited.log.contains("address already in use") =>
                {
                    tracing::warn!(
                        attempt,
                        "port taken during start-up; retrying with new ports"
                    );
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(options: &ControlPlaneOptions) -> Result<Self, ControlPlaneError> {
        ensure_crypto_provider();
        let started = Instant::now();
        let deadline = started + options.timeout;
        let etcd_bin = bins::etcd()?;
        let apiserver_bin = bins::kube_apiserver()?;
        let kcm_bin = if options.controller_manager || options.real_node.is_some() {
            Some(bins::kube_controller_manager()?)
        } else {
            None
        };
        let scheduler_bin = if options.scheduler {
            Some(bins::kube_scheduler()?)
        } else {
            None
        };

        let (tempdir, dir) = if let Some(d) = &options.dir {
            std::fs::create_dir_all(d).map_err(ControlPlaneError::WorkDir)?;
            (None, d.clone())
        } else {
            let t = tempfile::Builder::new()
                .prefix("pacto-testenv-")
                .tempdir()
                .map_err(ControlPlaneError::WorkDir)?;
            let p = t.path().to_owned();
            (Some(t), p)
        };
        // Only temporary directories are removed by the watchdogs if this process dies.
        let cleanup_dirs: Vec<PathBuf> = tempdir.iter().map(|t| t.path().to_owned()).collect();
        let cleanup: Vec<&Path> = cleanup_dirs.iter().map(PathBuf::as_path).collect();

        // --- certificates and keys
        let ca = Ca::generate("pacto-testenv-ca")?;
        let mut sans = vec![
            "localhost",
            "127.0.0.1",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ];
        if let Some(node) = &options.real_node {
            sans.push(&node.advertise_address);
        }
        let serving = ca.issue_server("kube-apiserver", &sans)?;
        let admin = ca.issue_client(ADMIN_USER, &["system:masters"])?;
        let sa = SigningKey::generate()?;
        let pki = dir.join("pki");
        std::fs::create_dir_all(&pki).map_err(ControlPlaneError::WorkDir)?;
        let mut files = vec![
            ("ca.crt", ca.cert_pem().to_owned()),
            ("ca.key", ca.key_pem()),
            ("apiserver.crt", serving.cert_pem.clone()),
            ("apiserver.key", serving.key_pem.clone()),
            ("sa.key", sa.private_pem.clone()),
            ("sa.pub", sa.public_pem.clone()),
        ];
        if options.real_node.is_some() {
            // The API server's identity towards kubelets (logs, exec, port-forward, node proxy).
            let kubelet_client =
                ca.issue_client("kube-apiserver-kubelet-client", &["system:masters"])?;
            files.push(("apiserver-kubelet-client.crt", kubelet_client.cert_pem));
            files.push(("apiserver-kubelet-client.key", kubelet_client.key_pem));
        }
        for (name, contents) in files {
            write_file(&pki.join(name), &contents)?;
        }

        // --- etcd
        let etcd_client_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_client_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        let etcd_data = dir.join("etcd");
        let _ = std::fs::remove_dir_all(&etcd_data);
        let mut cmd = Command::new(&etcd_bin);
        cmd.arg("--name=default")
            .arg(format!("--data-dir={}", etcd_data.display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=default={peer_url}"))
            .arg("--unsafe-no-fsync=true")
            .arg("--log-level=warn");
        let etcd = ManagedProcess::spawn("etcd", cmd, &dir.join("etcd.log"), &cleanup)
            .map_err(|e| ControlPlaneError::Start("etcd".into(), e))?;

        // --- kube-apiserver
        let port = match options.secure_port {
            Some(port) => port,
            None => free_port()?,
        };
        let server = format!("https://127.0.0.1:{port}");
        let p = |n: &str| pki.join(n).display().to_string();
        let mut cmd = Command::new(&apiserver_bin);
        cmd.arg(format!("--etcd-servers={etcd_url}"));
        if let Some(node) = &options.real_node {
            // Pods reach the API server as Service `kubernetes` (10.0.0.1:443), whose endpoint
            // the default (lease) reconciler publishes as the host address
            // (docs/design/real-node.md#control-plane).
            cmd.arg("--bind-address=0.0.0.0")
                .arg(format!("--advertise-address={}", node.advertise_address))
                .arg("--authorization-mode=Node,RBAC")
                .arg("--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement")
                .arg(format!(
                    "--kubelet-client-certificate={}",
                    p("apiserver-kubelet-client.crt")
                ))
                .arg(format!(
                    "--kubelet-client-key={}",
                    p("apiserver-kubelet-client.key")
                ))
                .arg("--kubelet-preferred-address-types=InternalIP,Hostname");
            // Pod Security `restricted` by default, as a demanding user's cluster has it
            // (docs/design/real-node.md#pod-security).
            let admission = dir.join("admission.yaml");
            write_file(
                &admission,
                &pod_security_admission_config(&node.pod_security_exempt_namespaces),
            )?;
            cmd.arg(format!(
                "--admission-control-config-file={}",
                admission.display()
            ));
        } else {
            cmd.arg("--bind-address=127.0.0.1")
                .arg("--advertise-address=127.0.0.1")
                // The endpoint reconciler refuses a loopback address; nothing in this cluster
                // needs endpoints for the `kubernetes` Service.
                .arg("--endpoint-reconciler-type=none")
                .arg("--authorization-mode=RBAC")
                // As on clusters that enforce `blockOwnerDeletion` (OpenShift, hardened
                // installs): an owner reference that blocks deletion needs `update` on the
                // owner's `finalizers` subresource (docs/design/architecture.md#kubernetes-access).
                .arg("--enable-admission-plugins=OwnerReferencesPermissionEnforcement");
        }
        cmd.arg(format!("--secure-port={port}"))
            .arg(format!(
                "--cert-dir={}",
                dir.join("apiserver-certs").display()
            ))
            .arg(format!("--tls-cert-file={}", p("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", p("apiserver.key")))
            .arg(format!("--client-ca-file={}", p("ca.crt")))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!("--service-account-key-file={}", p("sa.pub")))
            .arg(format!(
                "--service-account-signing-key-file={}",
                p("sa.key")
            ))
            .arg(format!(
                "--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"
            ))
            .arg("--allow-privileged=true")
            .arg("--profiling=false")
            .arg("--v=1");
        if !options.service_account_admission && options.real_node.is_none() {
            cmd.arg("--disable-admission-plugins=ServiceAccount");
        }
        cmd.args(&options.extra_apiserver_args);
        let apiserver_command = (
            cmd.get_program().into(),
            cmd.get_args().map(std::ffi::OsStr::to_os_string).collect(),
        );
        let apiserver = ManagedProcess::spawn(
            "kube-apiserver",
            cmd,
            &dir.join("kube-apiserver.log"),
            &cleanup,
        )
        .map_err(|e| ControlPlaneError::Start("kube-apiserver".into(), e))?;

        let admin_yaml = kubeconfig_yaml(
            &server,
            ca.cert_pem(),
            ADMIN_USER,
            &Credentials::Certificate {
                cert_pem: admin.cert_pem,
                key_pem: admin.key_pem,
            },
        );
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        write_file(&admin_kubeconfig, &admin_yaml)?;
        let admin_config = config_from_yaml(&admin_yaml).await?;
        let ca_pem = ca.cert_pem().to_owned();

        let mut cp = Self {
            dir,
            server,
            etcd_url: etcd_url.clone(),
            ca,
            ca_pem,
            admin_kubeconfig,
            admin_config,
            scheduler: None,
            kcm: None,
            apiserver: std::sync::Mutex::new(Some(apiserver)),
            apiserver_command,
            cleanup_dirs: cleanup_dirs.clone(),
            etcd: std::sync::Mutex::new(Some(etcd)),
            _tempdir: tempdir,
        };
        cp.wait_ready(deadline, started).await?;

        if let Some(kcm_bin) = kcm_bin {
            let mut cmd = Command::new(kcm_bin);
            cmd.arg(format!("--kubeconfig={}", cp.admin_kubeconfig.display()))
                .arg("--leader-elect=false")
                .arg("--controllers=*")
                .arg("--secure-port=0")
                .arg(format!(
                    "--service-account-private-key-file={}",
                    p("sa.key")
                ))
                .arg(format!("--root-ca-file={}", p("ca.crt")))
                .arg(format!("--cluster-signing-cert-file={}", p("ca.crt")))
                .arg(format!("--cluster-signing-key-file={}", p("ca.key")))
                .arg(format!(
                    "--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"
                ))
                .arg("--v=1");
            if options.real_node.is_some() {
                // One ServiceAccount per controller: with the Node authorizer on, the shared admin
                // identity would hide missing controller rights.
                let admin = cp.admin_kubeconfig.display().to_string();
                cmd.arg("--use-service-account-credentials=true")
                    .arg(format!("--authentication-kubeconfig={admin}"))
                    .arg(format!("--authorization-kubeconfig={admin}"));
            }
            let kcm = ManagedProcess::spawn(
                "kube-controller-manager",
                cmd,
                &cp.dir.join("kube-controller-manager.log"),
                &cleanup,
            )
            .map_err(|e| ControlPlaneError::Start("kube-controller-manager".into(), e))?;
            cp.kcm = Some(kcm);
            cp.wait_controller_manager(deadline, started).await?;
        }

        if let Some(scheduler_bin) = scheduler_bin {
            let kubeconfig = cp.write_kubeconfig(
                "kube-scheduler.kubeconfig",
                &cp.user_kubeconfig("system:kube-scheduler", &[])?,
            )?;
            let kubeconfig = kubeconfig.display().to_string();
            let mut cmd = Command::new(scheduler_bin);
            cmd.arg(format!("--kubeconfig={kubeconfig}"))
                .arg(format!("--authentication-kubeconfig={kubeconfig}"))
                .arg(format!("--authorization-kubeconfig={kubeconfig}"))
                .arg("--leader-elect=false")
                .arg("--bind-address=127.0.0.1")
                .arg(format!("--secure-port={}", free_port()?))
                .arg("--v=1");
            let scheduler = ManagedProcess::spawn(
                "kube-scheduler",
                cmd,
                &cp.dir.join("kube-scheduler.log"),
                &cleanup,
            )
            .map_err(|e| ControlPlaneError::Start("kube-scheduler".into(), e))?;
            cp.scheduler = Some(scheduler);
        }

        let remaining = deadline.saturating_duration_since(Instant::now());
        let crds = options.crds.clone();
        cp.install_crds(&crds, remaining).await?;
        Ok(cp)
    }

    async fn wait_ready(
        &self,
        deadline: Instant,
        started: Instant,
    ) -> Result<(), ControlPlaneError> {
        let client = self.client()?;
        let mut last;
        loop {
            let exited = {
                let mut etcd = lock(&self.etcd);
                let mut apiserver = self.apiserver_slot();
                crate::process::first_exited([
                    ("etcd", &mut *etcd),
                    ("kube-apiserver", &mut *apiserver),
                ])
            };
            if let Some(exited) = exited {
                return Err(exited.into());
            }
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(ControlPlaneError::ReadyzRequest)?;
            match tokio::time::timeout(Duration::from_secs(2), client.request_text(req)).await {
                Ok(Ok(body)) if body.trim() == "ok" => return Ok(()),
                Ok(Ok(body)) => last = body,
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "GET /readyz took longer than 2 s".to_owned(),
            }
            if Instant::now() >= deadline {
                return Err(ControlPlaneError::NotReady {
                    timeout: deadline - started,
                    last,
                    log: self
                        .apiserver_slot()
                        .as_ref()
                        .map(|p| p.log_tail(4000))
                        .unwrap_or_default(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_controller_manager(
        &mut self,
        deadline: Instant,
        started: Instant,
    ) -> Result<(), ControlPlaneError> {
        // The serviceaccount controller creating `default/default` proves the controllers run.
        let api: Api<ServiceAccount> = Api::namespaced(self.client()?, "default");
        let timeout = deadline.saturating_duration_since(Instant::now());
        let found = wait_for(timeout, Duration::from_millis(100), || {
            let api = api.clone();
            async move { api.get_opt("default").await.ok().flatten() }
        })
        .await;
        if found.is_some() {
            return Ok(());
        }
        let log = self
            .kcm
            .as_mut()
            .map(|p| p.log_tail(4000))
            .unwrap_or_default();
        Err(ControlPlaneError::ControllerManagerNotReady {
            timeout: deadline - started,
            log,
        })
    }

    fn apiserver_slot(&self) -> std::sync::MutexGuard<'_, Option<ManagedProcess>> {
        lock(&self.apiserver)
    }

    /// Stops kube-apiserver (etcd and the controllers keep running): every client's requests
    /// and watches fail until [`ControlPlane::restart_apiserver`].
    pub fn stop_apiserver(&self) {
        if let Some(mut p) = self.apiserver_slot().take() {
            p.stop();
        }
    }

    /// Starts kube-apiserver again with the same flags and port (after
    /// [`ControlPlane::stop_apiserver`]) and waits until `/readyz` answers `ok`. Its log goes to
    /// `kube-apiserver.restart-<n>.log` in the work directory.
    pub async fn restart_apiserver(&self, timeout: Duration) -> Result<(), ControlPlaneError> {
        self.stop_apiserver();
        let started = Instant::now();
        let (program, args) = &self.apiserver_command;
        let mut cmd = Command::new(program);
        cmd.args(args);
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
        let cleanup: Vec<&Path> = self.cleanup_dirs.iter().map(PathBuf::as_path).collect();
        let process = ManagedProcess::spawn(
            "kube-apiserver",
            cmd,
            &self.dir.join(format!("kube-apiserver.restart-{n}.log")),
            &cleanup,
        )
        .map_err(|e| ControlPlaneError::Start("kube-apiserver".into(), e))?;
        *self.apiserver_slot() = Some(process);
        self.wait_ready(started + timeout, started).await
    }

    /// Compacts etcd at its current revision and returns that revision: any watch that resumes
    /// from an older resourceVersion (a client reconnecting to a restarted API server) is
    /// answered `410 Gone` and must list again.
    pub async fn compact_etcd(&self) -> Result<i64, ControlPlaneError> {
        let http = reqwest::Client::new();
        let call = |path: &str, body: serde_json::Value| {
            let request = http
                .post(format!("{}{path}", self.etcd_url))
                .header("content-type", "application/json")
                .body(body.to_string());
            async move {
                let response = request.send().await?.error_for_status()?;
                let bytes = response.bytes().await?;
                Ok::<serde_json::Value, reqwest::Error>(
                    serde_json::from_slice(&bytes).unwrap_or_default(),
                )
            }
        };
        // A count-only range over every key answers with the store's current revision.
        let range = call(
            "/v3/kv/range",
            serde_json::json!({"key": "AA==", "range_end": "AA==", "count_only": true}),
        )
        .await
        .map_err(ControlPlaneError::Etcd)?;
        let revision = range["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse::<i64>().ok())
            .ok_or_else(|| ControlPlaneError::EtcdAnswer(range.to_string()))?;
        call(
            "/v3/kv/compaction",
            serde_json::json!({"revision": revision.to_string(), "physical": true}),
        )
        .await
        .map_err(ControlPlaneError::Etcd)?;
        Ok(revision)
    }

    /// The API server URL (`https://127.0.0.1:<port>`).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The etcd client URL (`http://127.0.0.1:<port>`; etcd also serves `/metrics` there).
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The working directory (logs, certificates, kubeconfigs, etcd data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cluster CA certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Path of the admin kubeconfig (user in group `system:masters`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The admin client configuration.
    pub fn admin_config(&self) -> Config {
        self.admin_config.clone()
    }

    /// A new admin client. Clients are cheap; create one per test (a client is bound to the Tokio
    /// runtime it first runs on, and every `#[tokio::test]` has its own).
    pub fn client(&self) -> Result<Client, ControlPlaneError> {
        ensure_crypto_provider();
        Client::try_from(self.admin_config.clone()).map_err(ControlPlaneError::Client)
    }

    /// Whether kube-scheduler runs.
    pub fn has_scheduler(&self) -> bool {
        self.scheduler.is_some()
    }

    /// Whether kube-controller-manager runs.
    pub fn has_controller_manager(&self) -> bool {
        self.kcm.is_some()
    }

    /// Log file of a component (`etcd`, `kube-apiserver`, `kube-controller-manager`,
    /// `kube-scheduler`).
    pub fn log_path(&self, component: &str) -> PathBuf {
        self.dir.join(format!("{component}.log"))
    }

    /// A kubeconfig (YAML text) that authenticates with a client certificate for `user` in
    /// `groups` (the certificate's CN and O).
    pub fn user_kubeconfig(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<String, ControlPlaneError> {
        let cert = self.ca.issue_client(user, groups)?;
        Ok(kubeconfig_yaml(
            &self.server,
            &self.ca_pem,
            user,
            &Credentials::Certificate {
                cert_pem: cert.cert_pem,
                key_pem: cert.key_pem,
            },
        ))
    }

    /// A client acting as `user` in `groups` (client certificate).
    pub async fn user_client(
        &self,
        user: &str,
        groups: &[&str],
    ) -> Result<Client, ControlPlaneError> {
        let cfg = config_from_yaml(&self.user_kubeconfig(user, groups)?).await?;
        Client::try_from(cfg).map_err(ControlPlaneError::Client)
    }

    /// Creates ServiceAccount `namespace/name` if missing and returns a kubeconfig (YAML text) with
    /// a bound token for it from the TokenRequest API (signed by the API server, valid one hour).
    /// The identity is `system:serviceaccount:<namespace>:<name>`.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, ControlPlaneError> {
        let token = self
            .service_account_token(namespace, name, None, &[])
            .await?;
        Ok(kubeconfig_yaml(
            &self.server,
            &self.ca_pem,
            &format!("{namespace}-{name}"),
            &Credentials::Token(token),
        ))
    }

    /// A token of ServiceAccount `namespace/name` (created if missing) from the TokenRequest API,
    /// valid one hour, for `audiences` (empty: the API server's own). With `node`, the token is
    /// bound to a new Pod of that ServiceAccount on that node (the Node object is created if
    /// missing; nothing runs the Pod), so the API server puts the node's name into it
    /// (`authentication.kubernetes.io/node-name`), as into a node agent's projected token.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        node: Option<&str>,
        audiences: &[&str],
    ) -> Result<String, ControlPlaneError> {
        let client = self.client()?;
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        let account_error = |source| ControlPlaneError::ServiceAccount {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        };
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(source) => return Err(account_error(source)),
        }
        let bound_object_ref = match node {
            None => None,
            Some(node) => Some(
                Self::bound_pod(client, namespace, name, node)
                    .await
                    .map_err(account_error)?,
            ),
        };
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(3600),
                audiences: (!audiences.is_empty())
                    .then(|| audiences.iter().map(|a| (*a).to_owned()).collect()),
                bound_object_ref,
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let response = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|source| ControlPlaneError::TokenRequest {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?;
        response
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ControlPlaneError::EmptyToken {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
    }

    /// Creates Node `node` (if missing) and a Pod of ServiceAccount `namespace/account` bound to
    /// it; returns the reference a TokenRequest binds to.
    async fn bound_pod(
        client: Client,
        namespace: &str,
        account: &str,
        node: &str,
    ) -> Result<BoundObjectReference, kube::Error> {
        let meta = |name: String| ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        };
        let nodes: Api<Node> = Api::all(client.clone());
        let object = Node {
            metadata: meta(node.to_owned()),
            ..Node::default()
        };
        match nodes.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
        let pod = Pod {
            metadata: meta(unique_name(&format!("{account}-"))),
            spec: Some(PodSpec {
                node_name: Some(node.to_owned()),
                service_account_name: Some(account.to_owned()),
                automount_service_account_token: Some(false),
                containers: vec![Container {
                    name: "agent".into(),
                    image: Some("registry.invalid/agent:1".into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let pod = Api::<Pod>::namespaced(client, namespace)
            .create(&PostParams::default(), &pod)
            .await?;
        Ok(BoundObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: pod.metadata.name,
            uid: pod.metadata.uid,
        })
    }

    /// A client acting as ServiceAccount `namespace/name` (created if missing).
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Client, ControlPlaneError> {
        let cfg =
            config_from_yaml(&self.service_account_kubeconfig(namespace, name).await?).await?;
        Client::try_from(cfg).map_err(ControlPlaneError::Client)
    }

    /// Writes a kubeconfig text into the working directory and returns its path (for `kubectl`).
    pub fn write_kubeconfig(
        &self,
        file_name: &str,
        yaml: &str,
    ) -> Result<PathBuf, ControlPlaneError> {
        let path = self.dir.join(file_name);
        write_file(&path, yaml)?;
        Ok(path)
    }

    /// A `kubectl` command using the admin kubeconfig.
    pub fn kubectl(&self) -> Result<Command, ControlPlaneError> {
        self.kubectl_with(&self.admin_kubeconfig)
    }

    /// A `kubectl` command using the given kubeconfig file.
    pub fn kubectl_with(&self, kubeconfig: &Path) -> Result<Command, ControlPlaneError> {
        let mut cmd = Command::new(bins::kubectl()?);
        cmd.env("KUBECONFIG", kubeconfig)
            .env("HOME", &self.dir)
            .env_remove("KUBECTL_EXTERNAL_DIFF");
        Ok(cmd)
    }

    /// Creates a namespace named `<prefix>-<pid>-<n>` and returns its name (test isolation on a
    /// shared control plane).
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, ControlPlaneError> {
        let name = unique_name(prefix);
        let api: Api<Namespace> = Api::all(self.client()?);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        api.create(&PostParams::default(), &ns)
            .await
            .map_err(|source| ControlPlaneError::Namespace {
                name: name.clone(),
                source,
            })?;
        Ok(name)
    }

    /// Installs (server-side applies) every CustomResourceDefinition in `files` and waits until
    /// each is Established, within `timeout` in total.
    pub async fn install_crds(
        &self,
        files: &[PathBuf],
        timeout: Duration,
    ) -> Result<Vec<String>, ControlPlaneError> {
        let mut crds = Vec::new();
        for path in files {
            crds.extend(parse_crds(path)?);
        }
        self.apply_crds(&crds, timeout).await
    }

    /// Server-side applies the given CRDs and waits until each is Established.
    pub async fn apply_crds(
        &self,
        crds: &[CustomResourceDefinition],
        timeout: Duration,
    ) -> Result<Vec<String>, ControlPlaneError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client()?);
        let params = PatchParams::apply("pacto-testenv").force();
        let mut names = Vec::new();
        for crd in crds {
            let name = crd
                .metadata
                .name
                .clone()
                .ok_or_else(|| ControlPlaneError::CrdName {
                    name: crd.spec.names.kind.clone(),
                })?;
            let mut crd = crd.clone();
            crd.metadata.managed_fields = None;
            crd.metadata.resource_version = None;
            crd.status = None;
            api.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .map_err(|source| ControlPlaneError::CrdApply {
                    name: name.clone(),
                    source,
                })?;
            names.push(name);
        }
        for name in &names {
            let established = wait_for(timeout, Duration::from_millis(50), || {
                let api = api.clone();
                let name = name.clone();
                async move {
                    let crd = api.get_opt(&name).await.ok().flatten()?;
                    let conditions = crd.status?.conditions?;
                    conditions
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                        .then_some(())
                }
            })
            .await;
            if established.is_none() {
                return Err(ControlPlaneError::CrdNotEstablished {
                    name: name.clone(),
                    timeout,
                });
            }
        }
        Ok(names)
    }
}

/// Reads the CustomResourceDefinitions of a (multi-document) YAML file; empty documents are
/// skipped, any other kind is an error.
pub fn parse_crds(path: &Path) -> Result<Vec<CustomResourceDefinition>, ControlPlaneError> {
    let text = std::fs::read_to_string(path).map_err(|source| ControlPlaneError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    let mut out = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(&text).enumerate() {
        let value =
            serde_json::Value::deserialize(doc).map_err(|source| ControlPlaneError::CrdParse {
                path: path.to_owned(),
                index,
                source,
            })?;
        if value.is_null() {
            continue;
        }
        let kind = value
            .get("kind")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("<no kind>");
        if kind != "CustomResourceDefinition" {
            return Err(ControlPlaneError::CrdKind {
                path: path.to_owned(),
                index,
                kind: kind.to_owned(),
            });
        }
        let crd: CustomResourceDefinition =
            serde_json::from_value(value).map_err(|source| ControlPlaneError::CrdDecode {
                path: path.to_owned(),
                index,
                source,
            })?;
        out.push(crd);
    }
    Ok(out)
}

/// One control plane shared by all tests of a test binary, started on first use with the options
/// returned by `options` (only the first caller's options count). It is never dropped: the
/// watchdogs stop its processes and remove its directory when the test binary exits. Isolate tests
/// with [`ControlPlane::create_namespace`].
///
/// On a machine without the Kubernetes binaries the calling test fails here, before any setup,
/// with one line naming `scripts/k8s-binaries.sh` (see [`bins::require_kubernetes`]).
pub async fn shared(
    options: impl FnOnce() -> ControlPlaneOptions,
) -> Result<&'static ControlPlane, ControlPlaneError> {
    static SHARED: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    bins::require_kubernetes();
    SHARED
        .get_or_try_init(|| ControlPlane::start(options()))
        .await
}
