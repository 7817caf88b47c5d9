//! Shared runtime of the Pacto services.
//!
//! Everything a Pacto service binary needs besides its own business logic. The modules that stay
//! public are namespaces whose item names read well only qualified (`admin::bind`,
//! `service::ServeConfig`, `grpc::channel`, `testing::TestCa`); the rest is re-exported
//! flat.
//!
//! - [`args`]: clap argument groups (flattened into each service's `Args`) with an env var per flag;
//! - `tracing` initialisation (JSON logs by default, [`TelemetryError`]);
//! - [`metrics`]: the process-wide Prometheus recorder and the shared RPC metrics;
//! - [`admin`]: the admin HTTP server (`/metrics`, `/healthz`, `/readyz`, `/version`);
//! - `secure_metrics`: `/metrics` over HTTPS with each scrape reviewed by the API server
//!   (`--metrics-secure`, [`SecureMetricsError`]);
//! - [`build_info`]: a binary's version, commit and build time ([`build_info!`]);
//! - [`tls`]: rustls mTLS server and client configuration from PEM files, reloaded on change;
//! - the peer identity of a client certificate ([`PeerIdentity`], its SANs) and per-service
//!   allow-lists ([`AllowList`], [`Authorizer`]);
//! - [`grpc`]: serving a tonic router over mTLS (or plaintext behind `--insecure`) and building
//!   client channels with timeouts and retries for transient errors;
//! - [`Runtime`]: one service process from start to stop: crypto provider, logging, signals,
//!   transport, the admin server, optional gRPC and HTTP servers, the service's tasks (each in a
//!   span), and one drain (docs/design/architecture.md#runtime); [`Tasks`], its task list for
//!   code that spawns later;
//! - [`service`]: what a gRPC service's `serve` is given ([`service::ServeConfig`]) and how it
//!   names itself ([`service::ServiceNames`]);
//! - `watch` and `index` (feature `watch`): Kubernetes watches with the shared retry policy,
//!   fed into the indexes a service keeps of each kind, and the namespace scope;
//! - [`RuntimeError`], wrapped by each service's own error;
//! - SIGTERM/SIGINT handling through a [`CancellationToken`] ([`ShutdownError`]);
//! - [`parse_duration`] for duration flags (`30s`, `5m`).

pub mod admin;
pub mod args;
pub mod backoff;
pub mod balance;
pub mod build_info;
mod duration;
mod error;
pub mod grpc;
pub mod http;
mod identity;
#[cfg(feature = "watch")]
pub mod index;
pub mod memo;
pub mod metrics;
mod runtime;
#[cfg(feature = "watch")]
pub mod scope;
mod secure_metrics;
pub mod service;
mod shutdown;
mod tasks;
mod telemetry;
pub mod tls;
#[cfg(feature = "watch")]
pub mod watch;

pub use duration::{DurationError, parse_duration};
pub use error::RuntimeError;
pub use identity::{
    AllowList, Authorizer, DEFAULT_NODE_AGENT_IDENTITY, DEFAULT_STATUS_WRITER_IDENTITY,
    DEFAULT_TRUST_DOMAIN, IdentityError, PeerIdentity, PeerInfo, spiffe_id,
};
pub use runtime::{Runtime, TASK_STOP_TIMEOUT};
pub use secure_metrics::SecureMetricsError;
pub use shutdown::ShutdownError;
pub use tasks::Tasks;
pub use telemetry::TelemetryError;
pub use tokio_util::sync::CancellationToken;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
