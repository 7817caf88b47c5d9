//! The ingestion API on `/api/evidence/v1` (docs/design/evidence-server.md#api): routing with
//! Go `ServeMux` semantics (405 for a wrong method, 404 for an unknown path, HEAD on every GET),
//! and the POST pipeline in the protocol's order, each refusal with its stable code. The body is
//! read and the envelope verified before anything reaches the registry; `/ready`, the POST
//! readiness gate and `/targets` answer from [`Snapshots`] (docs/design/evidence-server.md#limits).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use pacto_engine::{Timestamp, derive_status, evaluate};
use pacto_evidence::store::{CommitError, Readiness, Record, ReferrersMode};
use pacto_evidence::{Admitted, ErrorCode, MAX_ENVELOPE_BYTES, TrustStore, admit};
use tokio::sync::Semaphore;

use crate::body;
use crate::metrics;
use crate::resolve::ContractResolver;
use crate::snapshot::Snapshots;
use crate::storage::{NotReady, Storage};
use pacto_runtime::http::Reply;

/// The API prefix.
pub const PREFIX: &str = "/api/evidence/v1";
/// The response header naming the referrers mode(s) in use on `/ready`.
pub const MODE_HEADER: &str = "pacto-referrers-mode";
/// The body is read through a limit one byte over the envelope bound, so an oversized body is
/// refused by the decoder like upstream's (`MaxEnvelopeBytes + 1`).
pub const BODY_LIMIT: usize = MAX_ENVELOPE_BYTES + 1;

/// Decoding and verifying envelopes (`pacto_evidence::admit`: up to 1 MiB of JSON, a hash and a
/// signature check) on tokio's blocking threads, as many at once as the machine has CPUs: a
/// flood of garbage keeps that many threads busy instead of the workers every other request
/// (a producer's resolve and commit) waits on.
#[derive(Debug)]
pub struct Verifier {
    trust: Arc<TrustStore>,
    slots: Arc<Semaphore>,
}

impl Verifier {
    /// A verifier of `trust`'s keys, one verification per CPU at once.
    pub fn new(trust: TrustStore) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Self {
            trust: Arc::new(trust),
            slots: Arc::new(Semaphore::new(cpus)),
        }
    }

    async fn admit(&self, bytes: Bytes, now: Timestamp) -> Result<Admitted, (ErrorCode, String)> {
        let internal = |detail: String| (ErrorCode::InternalError, detail);
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|e| internal(e.to_string()))?;
        let trust = Arc::clone(&self.trust);
        // the permit goes with the work: a client that hangs up does not free it early
        tokio::task::spawn_blocking(move || {
            let admitted = admit(&bytes, &trust, now);
            drop(permit);
            admitted
        })
        .await
        .map_err(|e| internal(format!("verification failed: {e}")))?
        .map_err(|refusal| (refusal.code(), pacto_contract::error_chain(&refusal)))
    }
}

/// The server's fixed configuration and collaborators.
#[derive(Debug)]
pub struct Api<S> {
    /// Verification against the trusted keys.
    pub verifier: Verifier,
    /// The `--producer` values (`/producers`).
    pub producers: Vec<String>,
    /// The evidence store.
    pub storage: S,
    /// The contract-resolver client.
    pub resolver: ContractResolver,
    /// Budget of the readiness preflight (`/ready` and the POST gate).
    pub ready_timeout: Duration,
    /// Time a client has to send the body once its headers are in (`--read-body-timeout`).
    pub body_timeout: Duration,
    /// The answers of `/ready` and `/targets`, kept for a while.
    pub snapshots: Snapshots,
}

/// A refused POST: its code, the detail for the log, and whether the connection must close (the
/// body was not read to its end).
struct Refusal {
    code: ErrorCode,
    detail: String,
    close: bool,
}

impl From<(ErrorCode, String)> for Refusal {
    fn from((code, detail): (ErrorCode, String)) -> Self {
        Self {
            code,
            detail,
            close: false,
        }
    }
}

/// Refusal log lines per second; beyond, they are counted and the count rides on the next line
/// (a flood of garbage must not become a flood of log lines; the metric counts every refusal).
const REFUSAL_LOG_LINES_PER_SECOND: u32 = 10;

/// The refusal log's budget: the current one-second window, lines written in it, lines held back.
static REFUSAL_LOG: Mutex<Option<(Instant, u32, u64)>> = Mutex::new(None);

/// Whether a refusal line may be written now, and how many were held back before it.
fn refusal_log_budget() -> Option<u64> {
    let mut budget = REFUSAL_LOG.lock().unwrap_or_else(PoisonError::into_inner);
    let now = Instant::now();
    let (window, used, held) = budget.get_or_insert((now, 0, 0));
    if now.duration_since(*window) >= Duration::from_secs(1) {
        (*window, *used) = (now, 0);
    }
    if *used < REFUSAL_LOG_LINES_PER_SECOND {
        *used += 1;
        Some(std::mem::take(held))
    } else {
        *held += 1;
        None
    }
}

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

    /// The readiness preflight under `ready_timeout`, from the snapshot (one registry preflight
    /// per [`crate::snapshot::READY_MAX_AGE`] at most, whatever the request rate).
    async fn preflight(self: &Arc<Self>) -> Result<Readiness, NotReady> {
        let api = Arc::clone(self);
        self.snapshots
            .ready
            .get(move || async move {
                let outcome =
                    match tokio::time::timeout(api.ready_timeout, api.storage.preflight()).await {
                        Ok(Ok(readiness)) => {
                            metrics::modes(&readiness);
                            Ok(readiness)
                        }
                        Ok(Err(error)) => Err(NotReady::Store(Arc::new(error))),
                        Err(_) => Err(NotReady::Timeout(api.ready_timeout)),
                    };
                if let Err(error) = &outcome {
                    tracing::warn!(detail = %error, "not ready");
                }
                outcome
            })
            .await
    }

    async fn ready(self: &Arc<Self>) -> Reply {
        match self.preflight().await {
            Ok(readiness) => {
                let mut reply = json(StatusCode::OK, body::status("ready"));
                let mut names: Vec<ReferrersMode> =
                    readiness.subjects.iter().map(|s| s.mode).collect();
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
            Err(_) => json(StatusCode::SERVICE_UNAVAILABLE, body::status("not ready")),
        }
    }

    /// `/targets` from the snapshot: one scan (under the store's commit lock) per
    /// `--targets-max-age` at most, whatever the request rate.
    async fn targets(self: &Arc<Self>) -> Reply {
        let api = Arc::clone(self);
        let snapshot = self
            .snapshots
            .targets
            .get(move || async move {
                let outcome = api.storage.targets(Timestamp::now()).await;
                if let Err(error) = &outcome {
                    tracing::warn!(code = "registry_unavailable", status = 503, detail = %error, "targets refused");
                }
                outcome.map(|dto| {
                    let mut text = dto.to_json();
                    text.push('\n');
                    Bytes::from(text)
                })
            })
            .await;
        match snapshot {
            Ok(dto) => json_bytes(StatusCode::OK, dto),
            Err(_) => json(
                StatusCode::SERVICE_UNAVAILABLE,
                body::error(ErrorCode::RegistryUnavailable),
            ),
        }
    }

    async fn ingest(self: &Arc<Self>, request: Request<Incoming>) -> Reply {
        match self.pipeline(request).await {
            Ok(reply) => {
                metrics::accepted();
                reply
            }
            Err(Refusal {
                code,
                detail,
                close,
            }) => {
                metrics::refused(code);
                if let Some(held_back) = refusal_log_budget() {
                    tracing::warn!(
                        code = code.as_str(),
                        status = code.http_status(),
                        %detail,
                        held_back,
                        "envelope refused"
                    );
                }
                let status = StatusCode::from_u16(code.http_status())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut reply = json(status, body::error(code));
                if close {
                    reply
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                reply
            }
        }
    }

    /// The ingestion pipeline (docs/design/evidence-server.md#pipeline): everything a client
    /// controls is checked before the registry is read. A refusal is its code and the detail for
    /// the log.
    async fn pipeline(self: &Arc<Self>, request: Request<Incoming>) -> Result<Reply, Refusal> {
        // 1. the body, bounded in size and in time
        let body = Limited::new(request.into_body(), BODY_LIMIT).collect();
        let bytes = match tokio::time::timeout(self.body_timeout, body).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) => {
                return Err(Refusal {
                    code: ErrorCode::InvalidEnvelope,
                    detail: format!("reading the body (limit {BODY_LIMIT} bytes): {e}"),
                    close: true,
                });
            }
            Err(_) => {
                return Err(Refusal {
                    code: ErrorCode::InvalidEnvelope,
                    detail: format!(
                        "the body did not arrive within {:?} (--read-body-timeout)",
                        self.body_timeout
                    ),
                    close: true,
                });
            }
        };
        // 2–5. decode, verify, validate the evidence set, the ContractRef policy
        let admitted = self.verifier.admit(bytes, Timestamp::now()).await?;
        // 6. configured-subject membership
        let reference = format!(
            "oci://{}@{}",
            admitted.contract_ref.repository, admitted.contract_ref.digest
        );
        if !self.storage.is_subject(&reference) {
            return Err((
                ErrorCode::ContractRefRejected,
                format!("evidenceSet.ContractRef: {reference:?} is not a configured subject"),
            )
                .into());
        }
        // 7. readiness gate, for verified envelopes only (the snapshot of /ready)
        self.preflight()
            .await
            .map_err(|error| (ErrorCode::StoreNotReady, error.to_string()))?;
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
        let record = Record {
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
        let committed = self.storage.commit(&record).await;
        let seconds = started.elapsed().as_secs_f64();
        match committed {
            Ok(committed) => {
                tracing::debug!(digest = %committed.digest, mode = committed.mode.as_str(), requests = committed.requests, "record committed");
                metrics::commit(seconds, "ok");
            }
            Err(error) => {
                let code = commit_code(&error);
                metrics::commit(seconds, code.as_str());
                return Err((code, error.to_string()).into());
            }
        }
        tracing::info!(%id, subject = %reference, %compliance, findings, commit_seconds = seconds, "envelope accepted");
        Ok(json(
            StatusCode::ACCEPTED,
            body::accepted(&accepted_at.to_rfc3339_nano(), &compliance, findings, &id),
        ))
    }
}

/// The code a failed commit answers with: the store's own code, except a subject the pipeline
/// found configured (step 6) and the store did not, a race with the configuration that is the
/// server's own failure (`internal_error`).
fn commit_code(error: &CommitError) -> ErrorCode {
    match error {
        CommitError::UnknownSubject { .. } => ErrorCode::InternalError,
        other => other.code(),
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
    json_bytes(status, Bytes::from(text))
}

fn json_bytes(status: StatusCode, bytes: Bytes) -> Reply {
    let mut reply = Response::new(Full::new(bytes));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_is_cut_before_the_last_segment() {
        assert_eq!(domain("reg.example/team/svc"), "reg.example/team");
        assert_eq!(domain("reg.example/svc"), "reg.example");
    }
}
