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
pub const OPERATOR_NAMESPACE: &str = "pacto-system";
/// The four service Deployments (one release each).
pub const SERVICES: [&str; 4] = [
    "pacto-contract-resolver",
    "pacto-observer",
    "pacto-evaluator",
    "pacto-status-writer",
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

/// A real node with the helm tools pointed at it, the charts and service images coming from the
/// rehearsal registry.
pub struct Deployed {
    node: Option<RealNode>,
    tools: Tools,
    kubeconfig: PathBuf,
    archives: Vec<PathBuf>,
    released: Vec<Released>,
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
        let released = rehearse(&registry, artifacts.path())?;
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
            chart_repository: format!("{}/{RELEASE_PREFIX}/charts", registry.host()),
            _artifacts: artifacts,
            _registry: registry,
        })
    }

    /// What the rehearsal released.
    pub fn released(&self) -> &[Released] {
        &self.released
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

    /// `kubectl args… -o json`, parsed.
    pub fn kubectl_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.kubectl(&all)?;
        serde_json::from_str(&text).with_context(|| format!("kubectl {args:?}: not JSON"))
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
