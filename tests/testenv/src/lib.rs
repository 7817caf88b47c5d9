//! A real Kubernetes control plane (etcd + kube-apiserver, optionally kube-controller-manager) and the
//! other real helper servers (docker-registry, Prometheus) that cluster and end-to-end tests use.
//!
//! * [`controlplane`]: start/stop the control plane, admin and per-identity clients, CRDs,
//!   namespaces, `kubectl`.
//! * [`node`]: a real node (containerd, kubelet, kube-proxy, CoreDNS) on this machine, root only.
//! * [`simulator`]: Nodes, scheduling and kubelet-written Pod status, since no kubelet runs.
//! * [`prometheus`]: a real Prometheus with a generated scrape config.
//! * [`metrics_auth`]: secure metrics from the scraper's side: the charts' RBAC and an HTTPS
//!   client with a bearer token.
//! * [`registry`]: a real docker-registry.
//! * [`ggcr`]: go-containerregistry's registry (Referrers API on) and `oras`.
//! * [`bins`]: where the binaries come from.
//! * [`process`]: child processes that never outlive the test.
//! * [`ports`]: free ports for the servers a test starts.
//! * [`privilege`]: which tiers may run (root), skipped or failing under CI.
//!
//! See `docs/testing.md` for what is real and what is simulated.

pub mod bins;
pub mod controlplane;
pub mod ggcr;
pub mod metrics_auth;
pub mod node;
pub mod pki;
pub mod ports;
pub mod privilege;
pub mod process;
pub mod prometheus;
pub mod registry;
pub mod simulator;

pub use controlplane::{ControlPlane, ControlPlaneError, ControlPlaneOptions, shared};
pub use node::{NodeError, RealNode, RealNodeOptions};
pub use simulator::{Simulator, SimulatorOptions};
