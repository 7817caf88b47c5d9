//! The process-wide Prometheus recorder and metrics shared by every gRPC service.

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, histogram};
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets (seconds) used for every `*_seconds` histogram.
const LATENCY_BUCKETS: &[f64] = &[
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// gRPC requests handled, by service, method and gRPC status code.
const GRPC_REQUESTS_TOTAL: &str = "pacto_grpc_server_requests_total";
/// gRPC requests that ended with a non-OK status, by service, method and code.
const GRPC_ERRORS_TOTAL: &str = "pacto_grpc_server_errors_total";
/// Handling latency of gRPC requests.
const GRPC_HANDLING_SECONDS: &str = "pacto_grpc_server_handling_seconds";
/// TLS handshakes refused on a server port, by reason.
pub const TLS_HANDSHAKE_FAILURES_TOTAL: &str = "pacto_tls_handshake_failures_total";
/// Certificate reloads, by result.
pub const TLS_RELOADS_TOTAL: &str = "pacto_tls_reloads_total";
/// gRPC requests refused by the identity allow-list, by service.
pub const GRPC_UNAUTHORIZED_TOTAL: &str = "pacto_grpc_server_unauthorized_total";

/// Resolved endpoints of a balanced client channel, by backend.
pub const GRPC_CLIENT_ENDPOINTS: &str = "pacto_grpc_client_endpoints";
/// Endpoints of a balanced client channel ejected after a connection failure, by backend.
pub const GRPC_CLIENT_EJECTIONS_TOTAL: &str = "pacto_grpc_client_ejections_total";

static HANDLE: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// The Prometheus recorder could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Building or installing the recorder failed (e.g. another recorder is installed).
    #[error("cannot install the Prometheus recorder")]
    Install(#[source] BuildError),
}

/// Installs the global Prometheus recorder once per process and returns its handle; later calls
/// return the same handle. Also describes the runtime's own metrics.
pub fn install_recorder() -> Result<PrometheusHandle, MetricsError> {
    let mut installed = HANDLE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = installed.as_ref() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(LATENCY_BUCKETS)
        .map_err(MetricsError::Install)?
        .install_recorder()
        .map_err(MetricsError::Install)?;
    describe_runtime_metrics();
    *installed = Some(handle.clone());
    Ok(handle)
}

fn describe_runtime_metrics() {
    describe_counter!(
        GRPC_REQUESTS_TOTAL,
        Unit::Count,
        "gRPC requests handled, by service, method and gRPC status code."
    );
    describe_counter!(
        GRPC_ERRORS_TOTAL,
        Unit::Count,
        "gRPC requests that ended with a non-OK status, by service, method and code."
    );
    describe_histogram!(
        GRPC_HANDLING_SECONDS,
        Unit::Seconds,
        "Time spent handling a gRPC request, by service and method."
    );
    describe_gauge!(
        GRPC_CLIENT_ENDPOINTS,
        Unit::Count,
        "Addresses a balanced gRPC client spreads its calls over (the backend's ready replicas), by backend."
    );
    describe_counter!(
        GRPC_CLIENT_EJECTIONS_TOTAL,
        Unit::Count,
        "Backend endpoints ejected for a cooldown after their connection failed (the call went to another endpoint), by backend."
    );
    describe_counter!(
        TLS_HANDSHAKE_FAILURES_TOTAL,
        Unit::Count,
        "TLS handshakes refused on the gRPC port (no or untrusted client certificate, timeout)."
    );
    describe_counter!(
        TLS_RELOADS_TOTAL,
        Unit::Count,
        "Reloads of the TLS certificate files after a change, by result."
    );
    describe_counter!(
        GRPC_UNAUTHORIZED_TOTAL,
        Unit::Count,
        "gRPC requests refused because the client certificate identity is not allowed."
    );
}

/// Records one handled RPC: count by code, error count, latency.
fn record_rpc(service: &'static str, method: &'static str, code: tonic::Code, elapsed: Duration) {
    let code_label = code_name(code);
    counter!(GRPC_REQUESTS_TOTAL, "service" => service, "method" => method, "code" => code_label)
        .increment(1);
    if code != tonic::Code::Ok {
        counter!(GRPC_ERRORS_TOTAL, "service" => service, "method" => method, "code" => code_label)
            .increment(1);
    }
    histogram!(GRPC_HANDLING_SECONDS, "service" => service, "method" => method)
        .record(elapsed.as_secs_f64());
}

/// Measures an RPC handler: call [`RpcTimer::finish`] with the handler's result.
#[derive(Debug)]
pub struct RpcTimer {
    service: &'static str,
    method: &'static str,
    start: Instant,
}

impl RpcTimer {
    /// Starts timing a call of `service`/`method`.
    pub fn start(service: &'static str, method: &'static str) -> Self {
        Self {
            service,
            method,
            start: Instant::now(),
        }
    }

    /// Records the outcome and passes the result through.
    pub fn finish<T>(self, result: Result<T, tonic::Status>) -> Result<T, tonic::Status> {
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(status) => status.code(),
        };
        record_rpc(self.service, self.method, code, self.start.elapsed());
        result
    }
}

/// The canonical upper-snake name of a gRPC status code (as used by grpc-go metrics).
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
