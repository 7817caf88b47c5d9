//! The ingestion API on `/api/evidence/v1` (docs/design/evidence-server.md#api): routing with
//! Go `ServeMux` semantics (405 for a wrong method, 404 for an unknown path, HEAD on every GET),
//! and the POST pipeline in the protocol's order, each refusal with its stable code.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use pacto_engine::{Timestamp, derive_status, evaluate};
use pacto_evidence::{ErrorCode, MAX_ENVELOPE_BYTES, TrustStore, admit};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::body;
use crate::metrics;
use crate::resolve::ContractResolver;
use crate::storage::{AcceptedRecord, ReferrersMode, Storage, SubjectMode};

/// The API prefix.
pub const PREFIX: &str = "/api/evidence/v1";
/// The response header naming the referrers mode(s) in use on `/ready`.
pub const MODE_HEADER: &str = "pacto-referrers-mode";
/// The body is read through a limit one byte over the envelope bound, so an oversized body is
/// refused by the decoder like upstream's (`MaxEnvelopeBytes + 1`).
pub const BODY_LIMIT: usize = MAX_ENVELOPE_BYTES + 1;

/// The server's fixed configuration and collaborators.
#[derive(Debug)]
pub struct Api<S> {
    /// Trusted keys.
    pub trust: TrustStore,
    /// The `--producer` values (`/producers`).
    pub producers: Vec<String>,
    /// The evidence store.
    pub storage: S,
    /// The contract-resolver client.
    pub resolver: ContractResolver,
    /// Budget of the readiness preflight (`/ready` and the POST gate).
    pub ready_timeout: Duration,
}

type Reply = Response<Full<Bytes>>;

impl<S: Storage> Api<S> {
    /// Answers one request.
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Reply {
        let path = request.uri().path().to_owned();
        let Some(route) = path.strip_prefix(PREFIX) else {
            return not_found();
        };
        let method = request.method().clone();
        let is_get = method == Method::GET || method == Method::HEAD;
        match route {
            "/envelopes" if method == Method::POST => self.ingest(request).await,
            "/envelopes" => method_not_allowed("POST"),
            "/health" if is_get => json(StatusCode::OK, body::status("ok")),
            "/ready" if is_get => self.ready().await,
            "/producers" if is_get => json(StatusCode::OK, body::producers(&self.producers)),
            "/targets" if is_get => self.targets().await,
            "/health" | "/ready" | "/producers" | "/targets" => method_not_allowed("GET, HEAD"),
            _ => not_found(),
        }
    }

    async fn preflight(&self) -> Result<Vec<SubjectMode>, String> {
        match tokio::time::timeout(self.ready_timeout, self.storage.preflight()).await {
            Ok(Ok(modes)) => {
                metrics::modes(&modes);
                Ok(modes)
            }
            Ok(Err(detail)) => Err(detail),
            Err(_) => Err(format!(
                "the registry preflight did not finish within {:?}",
                self.ready_timeout
            )),
        }
    }

    async fn ready(&self) -> Reply {
        match self.preflight().await {
            Ok(modes) => {
                let mut reply = json(StatusCode::OK, body::status("ready"));
                let mut names: Vec<ReferrersMode> = modes.iter().map(|m| m.mode).collect();
                names.sort();
                names.dedup();
                let value = names
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                if let Ok(value) = HeaderValue::from_str(&value) {
                    reply.headers_mut().insert(MODE_HEADER, value);
                }
                reply
            }
            Err(detail) => {
                tracing::warn!(%detail, "not ready");
                json(StatusCode::SERVICE_UNAVAILABLE, body::status("not ready"))
            }
        }
    }

    async fn targets(&self) -> Reply {
        match self.storage.targets(Timestamp::now()).await {
            Ok(mut dto) => {
                dto.push('\n');
                json(StatusCode::OK, dto)
            }
            Err(detail) => {
                tracing::warn!(code = "registry_unavailable", status = 503, %detail, "targets refused");
                json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    body::error(ErrorCode::RegistryUnavailable),
                )
            }
        }
    }

    async fn ingest(&self, request: Request<Incoming>) -> Reply {
        match self.pipeline(request).await {
            Ok(reply) => {
                metrics::accepted();
                reply
            }
            Err((code, detail)) => {
                metrics::refused(code);
                tracing::warn!(
                    code = code.as_str(),
                    status = code.http_status(),
                    %detail,
                    "envelope refused"
                );
                let status = StatusCode::from_u16(code.http_status())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                json(status, body::error(code))
            }
        }
    }

    /// The ingestion pipeline (docs/design/evidence-server.md#pipeline); a refusal is its code and
    /// the detail for the log.
    async fn pipeline(&self, request: Request<Incoming>) -> Result<Reply, (ErrorCode, String)> {
        // 1. readiness gate, before the body is read
        self.preflight()
            .await
            .map_err(|detail| (ErrorCode::StoreNotReady, detail))?;
        // 2. the body, bounded
        let bytes = Limited::new(request.into_body(), BODY_LIMIT)
            .collect()
            .await
            .map_err(|e| {
                (
                    ErrorCode::InvalidEnvelope,
                    format!("reading the body (limit {BODY_LIMIT} bytes): {e}"),
                )
            })?
            .to_bytes();
        // 3–6. decode, verify, validate the evidence set, the ContractRef policy
        let admitted = admit(&bytes, &self.trust, Timestamp::now())
            .map_err(|refusal| (refusal.code(), refusal.to_string()))?;
        // 7. configured-subject membership
        let reference = format!(
            "oci://{}@{}",
            admitted.contract_ref.repository, admitted.contract_ref.digest
        );
        if !self.storage.is_subject(&reference) {
            return Err((
                ErrorCode::ContractRefRejected,
                format!("evidenceSet.ContractRef: {reference:?} is not a configured subject"),
            ));
        }
        // 8. resolve through the contract-resolver
        let contract = self
            .resolver
            .resolve(&reference)
            .await
            .map_err(|e| (ErrorCode::ContractResolutionFailed, e.to_string()))?;
        // 9. evaluate, derive compliance
        let evaluation = evaluate(
            &contract.assertions,
            &admitted.envelope.evidence_set.to_engine(),
        );
        let compliance = derive_status(&evaluation.findings, evaluation.coverage).to_string();
        let accepted_at = Timestamp::now();
        let id = admitted.envelope.id.clone();
        let findings = evaluation.findings.len();
        let record = AcceptedRecord {
            compliance: compliance.clone(),
            findings: evaluation
                .findings
                .iter()
                .map(pacto_engine::Finding::to_record)
                .collect(),
            coverage: evaluation.coverage,
            accepted_at,
            service: contract.service_name,
            domain: domain(&admitted.contract_ref.repository),
            digest: admitted.contract_ref.digest.clone(),
            envelope: admitted.envelope,
        };
        // 10. commit
        let started = Instant::now();
        let committed = self.storage.commit(record).await;
        let seconds = started.elapsed().as_secs_f64();
        match committed {
            Ok(()) => metrics::commit(seconds, "ok"),
            Err(failure) => {
                metrics::commit(seconds, failure.code().as_str());
                return Err((failure.code(), failure.to_string()));
            }
        }
        tracing::info!(%id, subject = %reference, %compliance, findings, commit_seconds = seconds, "envelope accepted");
        Ok(json(
            StatusCode::ACCEPTED,
            body::accepted(&accepted_at.to_rfc3339_nano(), &compliance, findings, &id),
        ))
    }
}

/// `<registry>/<repository>` cut before the last `/` (the bare registry for a one-segment
/// repository).
pub fn domain(repository: &str) -> String {
    repository
        .rsplit_once('/')
        .map_or(repository, |(head, _)| head)
        .to_owned()
}

fn json(status: StatusCode, text: String) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(text)));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    reply
}

fn plain(status: StatusCode, text: &'static str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    reply
}

fn not_found() -> Reply {
    plain(StatusCode::NOT_FOUND, "404 page not found\n")
}

fn method_not_allowed(allow: &'static str) -> Reply {
    let mut reply = plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n");
    reply
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    reply
}

/// Serves the API on `listener` until `shutdown`; in-flight requests finish first. Request
/// headers must arrive within `header_timeout`.
pub async fn serve<S: Storage>(
    listener: TcpListener,
    api: Arc<Api<S>>,
    header_timeout: Duration,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_transient(&error) => {
                    tracing::warn!(%error, "accept failed, continuing");
                    continue;
                }
                Err(error) => return Err(error),
            },
            () = shutdown.cancelled() => break,
        };
        let api = Arc::clone(&api);
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let api = Arc::clone(&api);
                async move { Ok::<_, Infallible>(api.handle(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let outcome = tokio::select! {
                outcome = connection.as_mut() => outcome,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = outcome {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    connections.close();
    connections.wait().await;
    Ok(())
}

fn is_transient(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::Interrupted
            | std::io::ErrorKind::WouldBlock
    ) || error
        .raw_os_error()
        .is_some_and(|code| code == 24 || code == 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_is_cut_before_the_last_segment() {
        assert_eq!(domain("reg.example/team/svc"), "reg.example/team");
        assert_eq!(domain("reg.example/svc"), "reg.example");
    }
}
