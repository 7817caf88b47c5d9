//! The deployed tier's harness: a real node ([`pacto_testenv::node`]), the charts installed on it
//! with `helmfile -e local sync`, `kubectl` against it, and waits with deadlines.
//!
//! The tier needs root. [`may_run`] decides: as root it runs; without root on a developer machine
//! the test prints one line and passes; without root under CI (`CI` set and not `0`/`false`) it
//! fails, since CI must run every tier.
//!
//! The released components come from a registry, as users get them: [`Deployed::start`] starts a
//! local docker-registry, runs `scripts/release.sh` for every component of `release/components`
//! against it (the release rehearsal, docs/upgrade.md), points the node's containerd at it as the
//! mirror of `ghcr.io` (the charts' default image host) and makes every `helmfile` run install the
//! charts from it as OCI charts (`chartRepository`). Only the node's own images (pause, CoreDNS,
//! busybox, the sample workload) are imported, from `scripts/node-images.sh --node-only`: the
//! archives listed (whitespace separated) in `$PACTO_NODE_IMAGES`, else the script is run here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use pacto_chart_tests::{Tools, repo_root};
use pacto_testenv::node::{self, RealNode, RealNodeOptions};
use pacto_testenv::process::wait_for;
use pacto_testenv::registry::Registry;

/// The registry the charts' images default to (`pacto.image` in the library chart), mirrored to
/// the rehearsal registry on the node.
pub const IMAGE_HOST: &str = "ghcr.io";
/// The repository path scripts/release.sh pushes under (its default `PACTO_RELEASE_PREFIX`).
pub const RELEASE_PREFIX: &str = "trianalab/pacto-operator-rs";

/// The namespace the `local` helmfile environment installs the services into.
pub const OPERATOR_NAMESPACE: &str = "pacto-operator-system";
/// The four services (one release each): their releases, ServiceAccounts and metrics Services
/// (`<service>-metrics`) carry these names.
pub const SERVICES: [&str; 4] = [
    "pacto-contract-resolver",
    "pacto-observer",
    "pacto-evaluator",
    "pacto-status-writer",
];
/// The four services' Deployments, in the order of [`SERVICES`]: the status-writer's is the
/// operator's, `pacto-operator` (the chart value `deploymentName`), as the troubleshooting guide's
/// `kubectl logs deploy/pacto-operator` reads it.
pub const DEPLOYMENTS: [&str; 4] = [
    "pacto-contract-resolver",
    "pacto-observer",
    "pacto-evaluator",
    "pacto-operator",
];
/// The HTTP workload image of `scripts/node-images.sh` (`/healthz`, `/readyz`, `/metrics` on 8080).
pub const SAMPLE_HTTP_IMAGE: &str = "localhost/pacto-sample-http:0.1";

/// Whether this process may run the tier (see the crate docs). Prints the reason when it may not.
pub fn may_run() -> bool {
    pacto_testenv::privilege::root_or_skip(
        "the deployed tier needs root (a real node changes iptables, sysctls, cgroups and \
         mounts); run `sudo -E cargo test -p pacto-deployed` or scripts/test.sh as root",
    )
}

/// The node's image archives: `$PACTO_NODE_IMAGES`, else the output of
/// `scripts/node-images.sh --node-only`.
pub fn image_archives() -> Result<Vec<PathBuf>> {
    let listed = match std::env::var("PACTO_NODE_IMAGES") {
        Ok(v) if !v.trim().is_empty() => v,
        _ => {
            let script = repo_root().join("scripts").join("node-images.sh");
            let out = Command::new(&script)
                .arg("--node-only")
                .current_dir(repo_root())
                .stderr(std::process::Stdio::inherit())
                .output()
                .with_context(|| format!("running {}", script.display()))?;
            ensure!(
                out.status.success(),
                "{} failed ({}); set PACTO_NODE_IMAGES to the archives it prints",
                script.display(),
                out.status
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    Ok(listed.split_whitespace().map(PathBuf::from).collect())
}

/// Prints how long a step took (the tier's timing report).
pub fn timed(step: &str, started: Instant) {
    eprintln!("deployed: {step}: {:.1} s", started.elapsed().as_secs_f64());
}

/// Runs one scenario of the tier and prints its time (also when it fails, so a slow failure
/// shows where the time went).
pub async fn step<T>(
    name: &str,
    scenario: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let started = Instant::now();
    let result = scenario.await;
    timed(name, started);
    result
}

/// One component of `release/components` as the rehearsal released it.
#[derive(Debug, Clone)]
pub struct Released {
    /// The component's name (`observer`, `crds`, …).
    pub name: String,
    /// Its kind (`service`, `chart`, `cli`).
    pub kind: String,
    /// The version released (the one its files carry).
    pub version: String,
    /// The directory of its artifacts (`scripts/release.sh --out`).
    pub out: PathBuf,
}

/// The release rehearsal: every component of `release/components` released to `registry` by
/// `scripts/release.sh` (debug binaries, reusing the test build), its summary on stderr.
pub fn rehearse(registry: &Registry, out: &Path) -> Result<Vec<Released>> {
    let script = repo_root().join("scripts").join("release.sh");
    let list = std::fs::read_to_string(repo_root().join("release").join("components"))
        .context("reading release/components")?;
    let mut released = Vec::new();
    for line in list.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let [name, kind, ..] = cols[..] else {
            continue;
        };
        let version = Command::new(&script)
            .args(["--version-of", name])
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        ensure!(
            version.status.success(),
            "release.sh --version-of {name}: {}",
            String::from_utf8_lossy(&version.stderr)
        );
        let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
        let dir = out.join(name);
        let status = Command::new(&script)
            .args([
                name,
                &version,
                "--registry",
                &registry.host(),
                "--plain-http",
            ])
            .args(["--profile", "debug", "--out"])
            .arg(&dir)
            .current_dir(repo_root())
            .stdout(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit())
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        ensure!(
            status.success(),
            "scripts/release.sh {name} {version} failed ({status})"
        );
        released.push(Released {
            name: name.to_owned(),
            kind: kind.to_owned(),
            version,
            out: dir,
        });
    }
    Ok(released)
}

/// `git rev-parse HEAD` of the repository.
fn head_commit() -> Result<String> {
    let out = Command::new("git")
        .current_dir(repo_root())
        .args(["rev-parse", "HEAD"])
        .output()
        .context("git rev-parse HEAD")?;
    ensure!(out.status.success(), "git rev-parse HEAD failed");
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A real node with the helm tools pointed at it, the charts and service images coming from the
/// rehearsal registry.
pub struct Deployed {
    node: Option<RealNode>,
    tools: Tools,
    kubeconfig: PathBuf,
    archives: Vec<PathBuf>,
    released: Vec<Released>,
    commit: String,
    chart_repository: String,
    _artifacts: tempfile::TempDir,
    // Dropped after the node (fields drop in order): containerd pulls from it until the end.
    _registry: Registry,
}

impl std::fmt::Debug for Deployed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployed")
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

impl Deployed {
    /// Releases every component to a local registry ([`rehearse`]), then starts the node (Node
    /// Ready, CoreDNS Ready) with the node images imported and `ghcr.io` mirrored to the registry.
    pub async fn start() -> Result<Self> {
        let tools = Tools::new()?;
        let archives = image_archives()?;
        let registry = Registry::start().context("starting the rehearsal registry")?;
        let artifacts = tempfile::Builder::new()
            .prefix("pacto-rehearsal-")
            .tempdir()
            .context("creating the rehearsal's artifact directory")?;
        let started = Instant::now();
        let commit = head_commit()?;
        let released = rehearse(&registry, artifacts.path())?;
        let after = head_commit()?;
        ensure!(
            after == commit,
            "HEAD moved from {commit} to {after} during the release rehearsal (a commit meanwhile): \
             the released components may carry different commits; run the tier again"
        );
        timed(
            &format!(
                "release rehearsal: {} components to {}",
                released.len(),
                registry.host()
            ),
            started,
        );
        let node = RealNode::start(RealNodeOptions {
            image_archives: archives.clone(),
            registry_mirrors: vec![(IMAGE_HOST.to_owned(), format!("http://{}", registry.host()))],
            ..RealNodeOptions::default()
        })
        .await?;
        let kubeconfig = node.control_plane().kubeconfig_path().to_owned();
        Ok(Self {
            node: Some(node),
            tools,
            kubeconfig,
            archives,
            released,
            commit,
            chart_repository: format!("{}/{RELEASE_PREFIX}/charts", registry.host()),
            _artifacts: artifacts,
            _registry: registry,
        })
    }

    /// What the rehearsal released.
    pub fn released(&self) -> &[Released] {
        &self.released
    }

    /// The commit (`git rev-parse HEAD`) the rehearsal released, read when it began.
    pub fn released_commit(&self) -> &str {
        &self.commit
    }

    /// The OCI chart repository every `helmfile` run installs from.
    pub fn chart_repository(&self) -> &str {
        &self.chart_repository
    }

    /// `helmfile` with the rehearsal's chart repository set (before `args`).
    fn helmfile_command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = self.tools.command("helmfile");
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .arg("--state-values-set")
            .arg(format!("chartRepository={}", self.chart_repository))
            .args(args);
        cmd
    }

    /// The node.
    pub fn node(&self) -> &RealNode {
        self.node.as_ref().expect("the node runs until down")
    }

    /// The node image archives imported into the node.
    pub fn image_archives(&self) -> &[PathBuf] {
        &self.archives
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `helmfile args…` from the repository root against the node; returns stdout.
    pub fn helmfile<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Result<String> {
        let mut cmd = self.helmfile_command(args);
        let out = pacto_chart_tests::run(&mut cmd)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `helmfile args…` like [`Deployed::helmfile`], for a run that may fail: its exit status
    /// and both streams, whatever the status.
    pub fn helmfile_output<S: AsRef<std::ffi::OsStr>>(
        &self,
        args: &[S],
    ) -> Result<std::process::Output> {
        self.helmfile_command(args)
            .output()
            .context("starting helmfile")
    }

    /// `helm args…` against the node; returns stdout.
    pub fn helm(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.tools.command("helm");
        cmd.env("KUBECONFIG", &self.kubeconfig).args(args);
        let out = pacto_chart_tests::run(&mut cmd)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl args…` as admin; returns stdout, an error with both streams on failure.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.node().control_plane().kubectl()?;
        cmd.args(args);
        let out = pacto_chart_tests::run(&mut cmd)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `script` run by `sh -c` as a user types it (kubectl from the node's binaries first on
    /// `PATH`, the admin kubeconfig); returns stdout, an error with stderr when it fails (a
    /// `| grep` that matched nothing fails too).
    pub fn shell(&self, script: &str) -> Result<String> {
        self.shell_with(&self.kubeconfig, script)
    }

    /// [`Deployed::shell`] with another kubeconfig (a copy whose context a script may change
    /// without touching the tier's own).
    pub fn shell_with(&self, kubeconfig: &Path, script: &str) -> Result<String> {
        let kubectl = self.node().control_plane().kubectl()?;
        let bin = Path::new(kubectl.get_program())
            .parent()
            .context("kubectl's directory")?
            .to_owned();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("sh")
            .args(["-c", script])
            .env("KUBECONFIG", kubeconfig)
            .env("PATH", &path)
            .output()
            .context("starting sh")?;
        ensure!(
            out.status.success(),
            "`{script}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl args… -o json`, parsed.
    pub fn kubectl_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.kubectl(&all)?;
        serde_json::from_str(&text).with_context(|| format!("kubectl {args:?}: not JSON"))
    }

    /// The pods of `namespace` matching the label `selector`, as (name, Ready), terminating ones
    /// left out.
    pub fn pod_readiness(&self, namespace: &str, selector: &str) -> Result<Vec<(String, bool)>> {
        let pods = self.kubectl_json(&["get", "pods", "-n", namespace, "-l", selector])?;
        Ok(pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| {
                let ready = p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                (
                    p["metadata"]["name"].as_str().unwrap_or("?").to_owned(),
                    ready,
                )
            })
            .collect())
    }

    /// `kubectl apply -f -` of `yaml` in `namespace`.
    pub fn apply(&self, namespace: &str, yaml: &str) -> Result<()> {
        let mut cmd = self.node().control_plane().kubectl()?;
        cmd.args(["apply", "-n", namespace, "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().context("starting kubectl apply")?;
        if let Some(mut stdin) = child.stdin.take() {
            std::io::Write::write_all(&mut stdin, yaml.as_bytes())
                .context("writing to kubectl apply")?;
        }
        let out = child.wait_with_output().context("kubectl apply")?;
        ensure!(
            out.status.success(),
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }

    /// Polls `check` every 500 ms until it returns `Ok`, up to `timeout`; the error names `what`
    /// and the last reason `check` gave.
    pub async fn wait<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Self) -> Result<T, String>,
    ) -> Result<T> {
        let mut last = String::from("never checked");
        let found = wait_for(timeout, Duration::from_millis(500), || {
            let r = check(self);
            let out = match r {
                Ok(v) => Some(v),
                Err(e) => {
                    last = e;
                    None
                }
            };
            async move { out }
        })
        .await;
        match found {
            Some(v) => Ok(v),
            None => bail!("{what}: not within {timeout:?}; last: {last}"),
        }
    }

    /// Checks `check` every 500 ms for `duration`: an error naming `what` and the reason at the
    /// first failed check, `Ok` once `duration` has passed with every check holding.
    pub async fn hold(
        &self,
        what: &str,
        duration: Duration,
        mut check: impl FnMut(&Self) -> Result<(), String>,
    ) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Err(e) = check(self) {
                bail!(
                    "{what}: broken after {:.1} s: {e}",
                    started.elapsed().as_secs_f64()
                );
            }
            if started.elapsed() >= duration {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until Deployment `namespace/name` has all its replicas updated and available.
    pub async fn wait_available(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<()> {
        self.wait(
            &format!("Deployment {namespace}/{name} Available"),
            timeout,
            |d| {
                let v = d
                    .kubectl_json(&["get", "deployment", "-n", namespace, name])
                    .map_err(|e| e.to_string())?;
                let want = v["spec"]["replicas"].as_i64().unwrap_or(1);
                let available = v["status"]["availableReplicas"].as_i64().unwrap_or(0);
                let updated = v["status"]["updatedReplicas"].as_i64().unwrap_or(0);
                if available >= want && updated >= want {
                    Ok(())
                } else {
                    Err(format!("status {}", v["status"]))
                }
            },
        )
        .await
        .map_err(|e| {
            let pods = self
                .kubectl(&["get", "pods,events", "-n", namespace, "-o", "wide"])
                .unwrap_or_default();
            e.context(pods)
        })
    }

    /// Stops the node and checks the host is restored: no teardown problem, nothing of a node
    /// left ([`node::host_leftovers`]), the sysctls as before the start.
    pub fn down(mut self) -> Result<Duration> {
        let node = self.node.take().context("already down")?;
        let before = node.sysctls_before().clone();
        let run = node.run_dir().to_owned();
        let started = Instant::now();
        let problems = node.down();
        let took = started.elapsed();
        ensure!(problems.is_empty(), "teardown problems: {problems:#?}");
        let left = node::host_leftovers(Some(&run));
        ensure!(left.is_empty(), "left on the host after down: {left:#?}");
        let now = node::read_sysctls();
        ensure!(
            now == before,
            "sysctls not restored: before {before:?}, after {now:?}"
        );
        Ok(took)
    }
}

/// A `kubectl get … --watch` whose output lines are read by a thread and stamped with the time
/// they arrived, measured from a base instant shared between watches (so that two timelines
/// line up).
pub struct KubectlWatch {
    child: std::process::Child,
    rx: tokio::sync::mpsc::UnboundedReceiver<(Instant, String)>,
    base: Instant,
    lines: Vec<(Duration, String)>,
    ended: bool,
}

impl std::fmt::Debug for KubectlWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubectlWatch")
            .field("lines", &self.lines.len())
            .finish_non_exhaustive()
    }
}

impl KubectlWatch {
    /// Starts `kubectl args… --watch` (`args` should carry the output format).
    pub fn start(d: &Deployed, args: &[&str], base: Instant) -> Result<Self> {
        let mut cmd = d.node().control_plane().kubectl()?;
        cmd.args(args)
            .arg("--watch")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting kubectl {args:?} --watch"))?;
        let stdout = child.stdout.take().context("kubectl stdout")?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line.trim().to_owned())).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            rx,
            base,
            lines: Vec::new(),
            ended: false,
        })
    }

    fn push(&mut self, at: Instant, line: String) {
        self.lines
            .push((at.saturating_duration_since(self.base), line));
    }

    /// Takes in every line received so far; an error when the watch has ended.
    pub fn drain(&mut self) -> Result<&[(Duration, String)]> {
        loop {
            match self.rx.try_recv() {
                Ok((at, line)) => self.push(at, line),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    self.ended = true;
                    break;
                }
            }
        }
        ensure!(!self.ended, "kubectl --watch ended");
        Ok(&self.lines)
    }

    /// Waits for one more line until `deadline`; `None` when the deadline passed.
    pub async fn next_line(&mut self, deadline: tokio::time::Instant) -> Result<Option<()>> {
        match tokio::time::timeout_at(deadline, self.rx.recv()).await {
            Ok(Some((at, line))) => {
                self.push(at, line);
                Ok(Some(()))
            }
            Ok(None) => {
                self.ended = true;
                bail!("kubectl --watch ended")
            }
            Err(_) => Ok(None),
        }
    }

    /// Every line so far.
    pub fn lines(&self) -> &[(Duration, String)] {
        &self.lines
    }
}

impl Drop for KubectlWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One change of a Pacto's `contractStatus`, as a [`VerdictWatch`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictChange {
    /// Since the watch's base instant.
    pub at: Duration,
    /// `namespace/name`.
    pub pacto: String,
    /// The status before.
    pub from: String,
    /// The status after.
    pub to: String,
}

impl std::fmt::Display for VerdictChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} -> {} at +{:.1} s",
            self.pacto,
            self.from,
            self.to,
            self.at.as_secs_f64()
        )
    }
}

/// `kubectl get pactos --watch` (one namespace or all) printing `namespace/name=contractStatus`
/// for every write of every Pacto. Unlike polling it sees every status the API server stored,
/// even one that lasted less than a poll: [`VerdictWatch::changes`] lists every change of a
/// Pacto's `contractStatus` after its first line (its state when the watch's list was taken).
#[derive(Debug)]
pub struct VerdictWatch {
    watch: KubectlWatch,
    read: usize,
    current: std::collections::BTreeMap<String, String>,
    changes: Vec<VerdictChange>,
}

impl VerdictWatch {
    /// Starts the watch over `namespace` (every namespace when `None`), its times measured from
    /// `base`, and waits until its initial list has printed every Pacto that exists now, so
    /// that no change after this returns is missed.
    pub async fn start(d: &Deployed, namespace: Option<&str>, base: Instant) -> Result<Self> {
        let mut args = vec!["get", "pactos"];
        match namespace {
            Some(ns) => args.extend(["-n", ns]),
            None => args.push("-A"),
        }
        let existing = d.kubectl_json(&args)?["items"]
            .as_array()
            .map_or(0, Vec::len);
        args.extend([
            "-o",
            "jsonpath={.metadata.namespace}/{.metadata.name}={.status.contractStatus}{\"\\n\"}",
        ]);
        let watch = KubectlWatch::start(d, &args, base)?;
        let mut watch = Self {
            watch,
            read: 0,
            current: std::collections::BTreeMap::new(),
            changes: Vec::new(),
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while watch.current.len() < existing {
            if watch.watch.next_line(deadline).await?.is_none() {
                bail!(
                    "the Pacto watch listed {} of {existing} Pactos in 30 s",
                    watch.current.len()
                );
            }
            watch.absorb();
        }
        Ok(watch)
    }

    fn absorb(&mut self) {
        let lines = self.watch.lines();
        for (at, line) in &lines[self.read..] {
            let Some((pacto, status)) = line.split_once('=') else {
                continue;
            };
            if let Some(before) = self.current.get(pacto)
                && before != status
                && !before.is_empty()
            {
                self.changes.push(VerdictChange {
                    at: *at,
                    pacto: pacto.to_owned(),
                    from: before.clone(),
                    to: status.to_owned(),
                });
            }
            self.current.insert(pacto.to_owned(), status.to_owned());
        }
        self.read = lines.len();
    }

    /// Every change seen so far.
    pub fn changes(&mut self) -> Result<Vec<VerdictChange>> {
        self.watch.drain()?;
        self.absorb();
        Ok(self.changes.clone())
    }

    /// How long since the watch's base instant.
    pub fn elapsed(&self) -> Duration {
        self.watch.base.elapsed()
    }

    /// The latest status of every Pacto seen, by `namespace/name`.
    pub fn current(&mut self) -> Result<std::collections::BTreeMap<String, String>> {
        self.watch.drain()?;
        self.absorb();
        Ok(self.current.clone())
    }
}

/// The pods of `namespaces` over time: one `kubectl get pods --watch` per namespace printing
/// `namespace/name ready=<Ready condition> deleting=<deletionTimestamp>` for every write, its
/// times from `base`. Shows which component was rolling when a verdict changed.
#[derive(Debug)]
pub struct PodTimeline {
    watches: Vec<KubectlWatch>,
}

impl PodTimeline {
    /// Starts the watches.
    pub fn start(d: &Deployed, namespaces: &[&str], base: Instant) -> Result<Self> {
        let watches = namespaces
            .iter()
            .map(|ns| {
                KubectlWatch::start(
                    d,
                    &[
                        "get",
                        "pods",
                        "-n",
                        ns,
                        "-o",
                        "jsonpath={.metadata.namespace}/{.metadata.name} ready={.status.conditions[?(@.type==\"Ready\")].status} deleting={.metadata.deletionTimestamp}{\"\\n\"}",
                    ],
                    base,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { watches })
    }

    /// Every distinct line so far (a pod's line repeated unchanged is left out), in time order,
    /// as `+<seconds> s <line>`.
    pub fn lines(&mut self) -> Vec<String> {
        let mut all: Vec<(Duration, String)> = Vec::new();
        for w in &mut self.watches {
            let _ = w.drain();
            all.extend(w.lines().iter().cloned());
        }
        all.sort();
        let mut last = std::collections::BTreeMap::<String, String>::new();
        let mut out = Vec::new();
        for (at, line) in all {
            let pod = line.split(' ').next().unwrap_or_default().to_owned();
            if last.get(&pod) == Some(&line) {
                continue;
            }
            last.insert(pod, line.clone());
            out.push(format!("+{:.1} s {line}", at.as_secs_f64()));
        }
        out
    }
}

/// One Pacto event (core/v1 Event whose involved object is a Pacto).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PactoEvent {
    /// `namespace/name` of the Pacto.
    pub pacto: String,
    /// The event's reason (`ValidationFailed`, `ContractRecovered`, …).
    pub reason: String,
    /// How many times it was recorded (`count`, 1 when absent).
    pub count: u64,
    /// Its message.
    pub message: String,
    /// When it was last recorded (`lastTimestamp`, else `eventTime`).
    pub last: String,
}

impl Deployed {
    /// Every event about a Pacto of the cluster, sorted.
    pub fn pacto_events(&self) -> Result<Vec<PactoEvent>> {
        let list = self.kubectl_json(&[
            "get",
            "events",
            "-A",
            "--field-selector",
            "involvedObject.kind=Pacto",
        ])?;
        let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_owned();
        let mut out: Vec<PactoEvent> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| PactoEvent {
                pacto: format!(
                    "{}/{}",
                    text(&e["involvedObject"]["namespace"]),
                    text(&e["involvedObject"]["name"])
                ),
                reason: text(&e["reason"]),
                count: e["count"].as_u64().unwrap_or(1),
                message: e["message"].as_str().unwrap_or_default().to_owned(),
                last: e["lastTimestamp"]
                    .as_str()
                    .or_else(|| e["eventTime"].as_str())
                    .unwrap_or("?")
                    .to_owned(),
            })
            .collect();
        out.sort_by(|a, b| (&a.pacto, &a.reason, &a.last).cmp(&(&b.pacto, &b.reason, &b.last)));
        Ok(out)
    }
}

/// The Pacto events recorded between `before` and `after` (both from
/// [`Deployed::pacto_events`]): per Pacto and reason, how many more times than before, with the
/// latest message and time, as `namespace/name reason +N at <time>: <message>`.
pub fn new_pacto_events(before: &[PactoEvent], after: &[PactoEvent]) -> Vec<String> {
    let mut counts = std::collections::BTreeMap::<(String, String), u64>::new();
    for e in before {
        *counts
            .entry((e.pacto.clone(), e.reason.clone()))
            .or_insert(0) += e.count;
    }
    let mut now = std::collections::BTreeMap::<(String, String), (u64, &PactoEvent)>::new();
    for e in after {
        let entry = now
            .entry((e.pacto.clone(), e.reason.clone()))
            .or_insert((0, e));
        entry.0 += e.count;
        if e.last >= entry.1.last {
            entry.1 = e;
        }
    }
    now.into_iter()
        .filter_map(|(key, (count, latest))| {
            let new = count.saturating_sub(counts.get(&key).copied().unwrap_or(0));
            (new > 0).then(|| {
                format!(
                    "{} {} +{new} at {}: {}",
                    key.0, key.1, latest.last, latest.message
                )
            })
        })
        .collect()
}

/// Host pids of the node agent (it runs with hostPID; the tier and its benches run on the host).
pub fn agent_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let exe = std::fs::read_link(e.path().join("exe")).ok()?;
            (exe.file_name()? == "pacto-node-agent").then_some(pid)
        })
        .collect()
}

/// A process's memory (KiB) and CPU time (clock ticks, all threads) from `/proc`.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub ticks: u64,
}

/// VmRSS, VmHWM and utime + stime (all threads) of `pid`.
pub fn usage(pid: u32) -> Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("/proc/{pid}/status (has the agent restarted?)"))?;
    let kib = |key: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{key} in /proc/{pid}/status"))
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // After the parenthesised command: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .context("/proc/<pid>/stat")?;
    let tick = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .context("utime/stime in /proc/<pid>/stat")
    };
    Ok(Usage {
        rss_kib: kib("VmRSS:")?,
        hwm_kib: kib("VmHWM:")?,
        ticks: tick(11)? + tick(12)?,
    })
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 when unreadable).
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}
