//! Shared runtime of the Pacto services.
//!
//! Everything a Pacto service binary needs besides its own business logic:
//!
//! - [`args`]: clap argument groups (flattened into each service's `Args`) with an env var per flag;
//! - [`telemetry`]: `tracing` initialisation (JSON logs by default);
//! - [`metrics`]: the process-wide Prometheus recorder and the shared RPC metrics;
//! - [`admin`]: the admin HTTP server (`/metrics`, `/healthz`, `/readyz`);
//! - [`tls`]: rustls mTLS server and client configuration from PEM files, reloaded on change;
//! - [`identity`]: the peer identity (SANs) of a client certificate and per-service allow-lists;
//! - [`grpc`]: serving a tonic router over mTLS (or plaintext behind `--insecure`) and building
//!   client channels with timeouts and retries for transient errors;
//! - [`process`]: starting a service process (crypto provider, logging, signals, transport);
//! - [`service`]: one service process: gRPC and admin servers with readiness and drain;
//! - [`error`]: [`RuntimeError`], wrapped by each service's own error;
//! - [`shutdown`]: SIGTERM/SIGINT handling through a `CancellationToken`.

pub mod admin;
pub mod args;
pub mod duration;
pub mod error;
pub mod grpc;
pub mod identity;
pub mod metrics;
pub mod process;
pub mod service;
pub mod shutdown;
pub mod telemetry;
pub mod tls;
#[cfg(feature = "watch")]
pub mod watch;

pub use error::RuntimeError;
pub use tokio_util::sync::CancellationToken;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
