//! The agent's flags; the chart (charts/pacto-node-agent) passes them, and the environment of the
//! DaemonSet's pod (`NODE_NAME`, `POD_NAME`, `POD_NAMESPACE`) fills the identity ones.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use pacto_runtime::args::{EndpointArgs, GrpcClientArgs, RuntimeArgs, service_env};
use pacto_runtime::parse_duration;

use crate::agent::AgentConfig;
use crate::aggregate::Limits;

pacto_runtime::peer!(
    /// The observer's report endpoint, as the agent calls it.
    pub ObserverReports: "observer" is "observer",
    default "pacto-observer.pacto-operator-system.svc:8443",
    help "Address of the observer's gRPC port (`NodeAgentReports`)"
);

/// Command line of `pacto-node-agent`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pacto-node-agent",
    version,
    about = "Watches the sockets of the pods on its node with eBPF and publishes them per node.",
    mut_args(service_env("NODE_AGENT"))
)]
pub struct Args {
    /// The node this agent runs on (the DaemonSet sets it from `spec.nodeName`).
    #[arg(long = "node-name", env = "NODE_NAME", value_name = "NODE")]
    pub node_name: String,
    /// The agent's pod name: the Lease's `holderIdentity`.
    #[arg(long = "pod-name", env = "POD_NAME", value_name = "NAME")]
    pub pod_name: Option<String>,
    /// The agent namespace, where `NodeRuntimeObservation/<node>` and `Lease/<node>` live (the
    /// pod's own namespace in the chart).
    #[arg(
        long = "namespace",
        env = "POD_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "pacto-node-agent"
    )]
    pub namespace: String,
    /// `--observer-addr`, `--observer-server-name`.
    #[command(flatten)]
    pub observer: EndpointArgs<ObserverReports>,
    /// How often the NodeRuntimeObservation status is written and a report sent. Go duration
    /// syntax.
    #[arg(
        long = "publish-interval",
        value_name = "DURATION",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub publish_interval: Duration,
    /// How often `Lease/<node>` is renewed (its duration is four times this, 40 s by default).
    #[arg(
        long = "lease-renew",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub lease_renew: Duration,
    /// Kernel BTF; without it collection reads Failed/BTFUnavailable.
    #[arg(
        long = "btf-path",
        value_name = "PATH",
        default_value = "/sys/kernel/btf/vmlinux"
    )]
    pub btf_path: PathBuf,
    /// The host's proc file system (the pod runs with hostPID).
    #[arg(long = "proc-root", value_name = "PATH", default_value = "/proc")]
    pub proc_root: PathBuf,
    /// The host's cgroup v2 mount (default: the first cgroup2 mount in
    /// `<proc-root>/self/mountinfo`, else /sys/fs/cgroup).
    #[arg(long = "cgroup-root", value_name = "PATH")]
    pub cgroup_root: Option<PathBuf>,
    /// The pod-bound service-account token sent as `authorization: Bearer` on the report stream,
    /// re-read on every connect.
    #[arg(
        long = "token-path",
        value_name = "PATH",
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )]
    pub token_path: Option<PathBuf>,
    /// Connections published per pod (the most frequent, then the most recent); more set
    /// `truncated`.
    #[arg(long = "top-connections", value_name = "N", default_value_t = 50)]
    pub top_connections: usize,
    /// After collection starts, pods that were already running read Partial "started after
    /// pod" for this long (connections they made before the agent started are unknown).
    #[arg(
        long = "warm-up",
        value_name = "DURATION",
        default_value = "5m",
        value_parser = parse_duration
    )]
    pub warm_up: Duration,
    /// Timeouts of the observer channel.
    #[command(flatten)]
    pub client: GrpcClientArgs,
    /// mTLS (the client certificate presented to the observer), admin port, logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

impl Args {
    /// What the agent loop needs from the flags.
    pub fn config(&self) -> AgentConfig {
        AgentConfig {
            node_name: self.node_name.clone(),
            namespace: self.namespace.clone(),
            holder: self
                .pod_name
                .clone()
                .unwrap_or_else(|| format!("pacto-node-agent-{}", self.node_name)),
            publish_interval: self.publish_interval,
            lease_renew: self.lease_renew,
            lease_duration_seconds: i32::try_from(self.lease_renew.as_secs().saturating_mul(4))
                .unwrap_or(i32::MAX)
                .max(1),
            btf_path: self.btf_path.clone(),
            limits: Limits {
                top_connections: self.top_connections,
                ..Limits::default()
            },
            warm_up: self.warm_up,
        }
    }

    /// `--cgroup-root`, or the cgroup2 mount the proc root's mountinfo names.
    pub fn cgroup_root(&self) -> PathBuf {
        self.cgroup_root.clone().unwrap_or_else(|| {
            std::fs::read_to_string(self.proc_root.join("self/mountinfo"))
                .ok()
                .and_then(|text| cgroup2_mount(&text))
                .unwrap_or_else(|| Path::new("/sys/fs/cgroup").to_owned())
        })
    }
}

/// The mount point of the first cgroup2 file system in a `mountinfo` text.
pub fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        if fs.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        // Fields: id parent major:minor root mount-point ...
        let point = mount.split_whitespace().nth(4)?;
        Some(PathBuf::from(point.replace("\\040", " ")))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn flags_match_the_chart_and_the_env_rule() {
        Args::command().debug_assert();
        // NODE_NAME comes from the DaemonSet's downward API like POD_NAME/POD_NAMESPACE.
        assert_eq!(
            pacto_runtime::args::env_rule_violations(&Args::command(), "NODE_AGENT"),
            Vec::<String>::new()
        );
        // The chart's arguments (charts/pacto-node-agent/templates/daemonset.yaml).
        let args = Args::try_parse_from([
            "pacto-node-agent",
            "--node-name=n1",
            "--observer-addr=pacto-observer.pacto-operator-system.svc:8443",
            "--publish-interval=30s",
            "--admin-addr=0.0.0.0:9090",
            "--log-level=info",
            "--log-format=json",
            "--tls-ca=/etc/pacto/tls/ca.crt",
            "--tls-cert=/etc/pacto/tls/tls.crt",
            "--tls-key=/etc/pacto/tls/tls.key",
        ])
        .unwrap();
        let config = args.config();
        assert_eq!(config.publish_interval, Duration::from_secs(30));
        assert_eq!(config.lease_renew, Duration::from_secs(10));
        assert_eq!(config.lease_duration_seconds, 40);
        assert_eq!(config.limits.top_connections, 50);
        assert_eq!(args.btf_path, Path::new("/sys/kernel/btf/vmlinux"));
    }

    #[test]
    fn cgroup2_mount_is_read_from_mountinfo() {
        let text = "\
25 30 0:23 / /proc rw,nosuid - proc proc rw
35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate
36 25 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu";
        assert_eq!(
            cgroup2_mount(text),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(cgroup2_mount("garbage\n - \n"), None);
    }
}
