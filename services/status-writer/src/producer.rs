//! The status-writer as an evidence producer (docs/design/status.md#evidence-producer): on each
//! verdict change it signs the evidence set the verdict rests on and posts it to the Evidence
//! Server (`POST /api/evidence/v1/envelopes`).
//!
//! The reconcile only *offers* a record ([`Producer::offer`]): a non-blocking push onto a
//! bounded queue. One worker task drains the queue in order, signs each record just before it
//! sends it (so sequences increase in the order records reach the server) and retries server
//! errors and transport failures with a capped exponential backoff. Nothing here can change a
//! verdict or delay a reconcile: a full queue drops the new record (counted), a refused record
//! is counted and logged, a record still queued at shutdown is counted as dropped.
//!
//! - Sequence: the wall clock in Unix nanoseconds, and at least one more than the last one this
//!   process signed ([`Sequencer`]). It survives restarts without state as long as the clock
//!   does not go back by more than the time between two records.
//! - Id: derived from the Pacto, the persisted status the verdict moves away from (the events'
//!   occurrence key) and the new verdict ([`record_id`]): a pass replayed after a crash or a
//!   failed status write offers the same id, and the server answers `409 replay`, which counts
//!   as delivered.
//! - The signing key is read once at start; it is never logged and no error carries it.
//! - Only the Lease holder posts ([`Producer::post_during`]): when the term ends the worker stops
//!   at once (an attempt in flight is abandoned, a retry wait ends) and keeps its records, the
//!   one it was sending first, until it holds the Lease again. Two replicas never post at the
//!   same time, so their sequences never interleave at the server.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use metrics::counter;
use pacto_engine::{EvidenceSet, Timestamp};
use pacto_evidence::client::ClientError;
use pacto_evidence::{
    Envelope, IngestClient, PostError, Producer as ProducerId, SignedEvidenceSet,
};
use pacto_runtime::backoff::Backoff;
use pacto_runtime::{CancellationToken, Tasks};
use sha2::{Digest as _, Sha256};
use tokio::sync::{Notify, watch};

use crate::metrics::{
    EVIDENCE_DROPPED_TOTAL, EVIDENCE_FAILED_TOTAL, EVIDENCE_RETRIES_TOTAL, EVIDENCE_SENT_TOTAL,
};

/// The ingestion path appended to the base URL.
pub use pacto_evidence::client::ENVELOPES_PATH;
/// The producer id unless `--evidence-producer` says otherwise.
pub const DEFAULT_PRODUCER: &str = "pacto-status-writer";
/// Records waiting to be sent unless `--evidence-queue-size` says otherwise.
pub const DEFAULT_QUEUE_SIZE: usize = 1000;
/// How long a signed envelope stays valid (`expiresAt - issuedAt`). Each attempt signs anew, so
/// a retried record never expires in the queue.
pub const ENVELOPE_TTL: Duration = Duration::from_mins(10);

/// The producer mode could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    /// `--evidence-url` is not an http(s) URL.
    #[error("--evidence-url: {url:?} is not an http:// or https:// URL")]
    Url {
        /// The value given, without its userinfo ([`pacto_evidence::redact_url`]).
        url: String,
    },
    /// `--evidence-url` without `--evidence-key`, or the reverse.
    #[error("{given} needs {missing}")]
    Incomplete {
        /// The flag given.
        given: &'static str,
        /// The flag missing.
        missing: &'static str,
    },
    /// The key file cannot be read or is not an Ed25519 seed (the error names the file, never
    /// its content).
    #[error("--evidence-key")]
    Key(#[from] pacto_evidence::keys::KeyError),
    /// The producer id or key id breaks the identifier grammar.
    #[error("{flag}")]
    Identifier {
        /// `--evidence-producer` or `--evidence-key-id`.
        flag: &'static str,
        /// Why.
        #[source]
        source: pacto_evidence::keys::IdentifierError,
    },
    /// The queue size is zero.
    #[error("--evidence-queue-size must be at least 1")]
    QueueSize,
    /// The HTTP client could not be built.
    #[error("cannot build the evidence HTTP client")]
    Client(#[source] ClientError),
}

/// The signing key, read once; its `Debug` shows nothing of it.
pub struct Key(SigningKey);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Reads a private key file (`pacto evidence keygen`'s `<keyId>.key`).
    pub fn read(path: &Path) -> Result<Self, ProducerError> {
        Ok(Self(pacto_evidence::keys::read_signing_key(path)?))
    }

    /// Wraps a key (tests).
    pub fn from_signing_key(key: SigningKey) -> Self {
        Self(key)
    }
}

/// How the producer mode is configured. Its `Debug` shows the URL without its userinfo
/// ([`ProducerConfig::shown_url`]) and nothing of the key.
pub struct ProducerConfig {
    /// The Evidence Server's base URL (the ingestion path is appended).
    pub url: String,
    /// The signing key.
    pub key: Key,
    /// `producer.keyId`.
    pub key_id: String,
    /// `producer.id`.
    pub producer_id: String,
    /// `producer.version` (this binary's version).
    pub producer_version: String,
    /// Records waiting to be sent at most; more are dropped.
    pub queue_size: usize,
    /// The first retry delay; doubled per attempt up to `max_backoff`.
    pub min_backoff: Duration,
    /// The longest retry delay.
    pub max_backoff: Duration,
    /// The timeout of one POST.
    pub request_timeout: Duration,
}

impl std::fmt::Debug for ProducerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerConfig")
            .field("url", &self.shown_url())
            .field("key", &self.key)
            .field("key_id", &self.key_id)
            .field("producer_id", &self.producer_id)
            .field("producer_version", &self.producer_version)
            .field("queue_size", &self.queue_size)
            .field("min_backoff", &self.min_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl ProducerConfig {
    /// The URL as logs and errors show it: credentials in its userinfo
    /// (`https://user:pass@host`) replaced by `***`. They are still sent (as basic auth).
    pub fn shown_url(&self) -> String {
        pacto_evidence::redact_url(&self.url)
    }

    /// A configuration with the default queue size, backoff and timeout.
    pub fn new(url: impl Into<String>, key: Key, key_id: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            key,
            key_id: key_id.into(),
            producer_id: DEFAULT_PRODUCER.to_owned(),
            producer_version: env!("CARGO_PKG_VERSION").to_owned(),
            queue_size: DEFAULT_QUEUE_SIZE,
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
        }
    }

    /// The key id of a key file named as keygen names it: `<keyId>.key` → `keyId`.
    pub fn key_id_of(path: &Path) -> Option<String> {
        let name = path.file_name()?.to_str()?;
        let stem = name.strip_suffix(".key").unwrap_or(name);
        (!stem.is_empty()).then(|| stem.to_owned())
    }

    fn check(&self) -> Result<(), ProducerError> {
        pacto_evidence::client::envelopes_url(&self.url).map_err(|_| ProducerError::Url {
            url: pacto_evidence::redact_url(&self.url),
        })?;
        for (flag, value) in [
            ("--evidence-producer", &self.producer_id),
            ("--evidence-key-id", &self.key_id),
        ] {
            pacto_evidence::keys::check_identifier(value)
                .map_err(|source| ProducerError::Identifier { flag, source })?;
        }
        if self.queue_size == 0 {
            return Err(ProducerError::QueueSize);
        }
        Ok(())
    }
}

/// One record to send: the evidence of one verdict change.
#[derive(Debug, Clone)]
pub struct Record {
    /// The envelope id ([`record_id`]).
    pub id: String,
    /// The evidence set, in the wire's shape.
    pub set: SignedEvidenceSet,
    /// The Pacto (`namespace/name`), for logs.
    pub pacto: String,
}

/// The envelope id of the record of a verdict change: `sha256:` + hex SHA-256 over the
/// length-prefixed producer id, Pacto namespace and name, occurrence key (the persisted status
/// the change moves away from) and new verdict. The same transition replayed gives the same id.
pub fn record_id(
    producer: &str,
    namespace: &str,
    name: &str,
    occurrence: &str,
    verdict: &str,
) -> String {
    let mut hasher = Sha256::new();
    for part in [
        "pacto-status-writer/verdict/v1",
        producer,
        namespace,
        name,
        occurrence,
        verdict,
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// `oci://<registry>/<repository>@sha256:<hex>` of a resolved contract: the resolved reference
/// without its tag, pinned to the digest the resolver read. `None` for inline contracts or a
/// reference that does not parse.
pub fn contract_ref(resolved_ref: Option<&str>, digest: Option<&str>) -> Option<String> {
    let reference = pacto_contract::reference::Reference::parse(resolved_ref?).ok()?;
    let digest = digest.or(reference.digest())?;
    let hex = digest.strip_prefix("sha256:")?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    Some(format!(
        "oci://{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    ))
}

/// The observer's evidence set in the wire's shape: the contract pinned by digest, and without
/// the operator's extensions, which the protocol cannot carry (an observation's `detail` is
/// dropped; `SubjectMissing` is dropped, the observations themselves record the absence).
pub fn wire_set(set: &EvidenceSet, contract_ref: String) -> Option<SignedEvidenceSet> {
    let mut set = set.clone();
    set.contract_ref = contract_ref;
    set.subject_missing = false;
    if let Some(observations) = set.observations.as_mut() {
        for observation in observations {
            observation.detail = None;
        }
    }
    SignedEvidenceSet::from_engine(&set).ok()
}

/// Sequences: the wall clock in Unix nanoseconds, strictly above the last one handed out.
#[derive(Debug, Default)]
pub struct Sequencer {
    last: u64,
}

impl Sequencer {
    /// A sequencer that hands out values above `last`.
    pub fn after(last: u64) -> Self {
        Self { last }
    }

    /// The next sequence at the wall-clock instant `now_nanos`.
    pub fn next(&mut self, now_nanos: u64) -> u64 {
        self.last = now_nanos.max(self.last.saturating_add(1));
        self.last
    }

    /// The wall clock in Unix nanoseconds.
    pub fn clock() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// What happened to the records offered so far (also exported as metrics).
#[derive(Debug, Default)]
pub struct Counters {
    offered: AtomicU64,
    accepted: AtomicU64,
    replayed: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    retries: AtomicU64,
    last_sequence: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delivery {
    /// Records offered by reconciles.
    pub offered: u64,
    /// Answered 202.
    pub accepted: u64,
    /// Answered 409 replay (already stored: delivered).
    pub replayed: u64,
    /// Refused with another 4xx (not retried).
    pub failed: u64,
    /// Dropped: the queue was full, or still queued at shutdown.
    pub dropped: u64,
    /// Attempts retried after a 5xx or a transport error.
    pub retries: u64,
    /// The last sequence signed.
    pub last_sequence: u64,
}

impl Delivery {
    /// Records whose fate is decided (delivered, refused or dropped).
    pub fn settled(&self) -> u64 {
        self.accepted + self.replayed + self.failed + self.dropped
    }
}

struct Queue {
    records: Mutex<VecDeque<Record>>,
    capacity: usize,
    ready: Notify,
}

/// The producer: the bounded queue the reconciles offer to and the counters of its worker.
#[derive(Debug, Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

struct Inner {
    producer_id: String,
    queue: Queue,
    counters: Counters,
    /// The worker posts while this token is not cancelled. Every token here is the producer's
    /// own (a child of a term's token at most), so cancelling one never ends anything else.
    permit: watch::Sender<CancellationToken>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("producer_id", &self.producer_id)
            .field("capacity", &self.queue.capacity)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// Checks `config` and spawns the worker as the `evidence-producer` task of `tasks` (the
    /// runtime's, [`pacto_runtime::Runtime::tasks`], so the drain joins it; a bare token in
    /// tests), which runs until their shutdown.
    pub fn start(config: ProducerConfig, tasks: impl Into<Tasks>) -> Result<Self, ProducerError> {
        Self::start_after(config, 0, tasks)
    }

    /// [`Producer::start`] whose sequences start above `last_sequence` (tests: a clock that
    /// went back).
    pub fn start_after(
        config: ProducerConfig,
        last_sequence: u64,
        tasks: impl Into<Tasks>,
    ) -> Result<Self, ProducerError> {
        config.check()?;
        // the one ingestion client (docs/design/envelopes.md#ingestion-client)
        let client =
            IngestClient::new(&config.url, config.request_timeout).map_err(|e| match e {
                ClientError::Url { url } => ProducerError::Url { url },
                ClientError::Build(_) => ProducerError::Client(e),
            })?;
        let producer = Self {
            inner: Arc::new(Inner {
                producer_id: config.producer_id.clone(),
                queue: Queue {
                    records: Mutex::new(VecDeque::new()),
                    capacity: config.queue_size,
                    ready: Notify::new(),
                },
                counters: Counters::default(),
                // No leader election unless told: posting is allowed from the start.
                permit: watch::Sender::new(CancellationToken::new()),
            }),
        };
        let worker = Worker {
            inner: Arc::clone(&producer.inner),
            client,
            config,
            sequencer: Sequencer::after(last_sequence),
        };
        let tasks: Tasks = tasks.into();
        tasks.spawn("evidence-producer", worker.run(tasks.shutdown()));
        Ok(producer)
    }

    /// The producer id records are signed as.
    pub fn producer_id(&self) -> &str {
        &self.inner.producer_id
    }

    /// Posts only until `term` is cancelled (the term of a Lease holder), from now on. When it
    /// is, the worker stops posting at once: an attempt in flight is abandoned (the server may
    /// have stored it; sent again, it is answered as a replay), a retry wait ends, and the
    /// records stay queued, the one being sent first, until the next `post_during`. Without a
    /// call, the producer posts from its start (no leader election).
    pub fn post_during(&self, term: &CancellationToken) {
        let previous = self.inner.permit.send_replace(term.child_token());
        previous.cancel();
    }

    /// Posts nothing until the next [`Producer::post_during`] (a replica that has no term yet).
    pub fn pause(&self) {
        let closed = CancellationToken::new();
        closed.cancel();
        self.inner.permit.send_replace(closed).cancel();
    }

    /// Queues `record` without waiting; a full queue drops it (counted, logged).
    pub fn offer(&self, record: Record) {
        let counters = &self.inner.counters;
        counters.offered.fetch_add(1, Ordering::SeqCst);
        {
            let mut records = self
                .inner
                .queue
                .records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if records.len() >= self.inner.queue.capacity {
                drop(records);
                counters.dropped.fetch_add(1, Ordering::SeqCst);
                counter!(EVIDENCE_DROPPED_TOTAL, "reason" => "queue_full").increment(1);
                tracing::warn!(pacto = %record.pacto, id = %record.id, "evidence queue full: record dropped");
                return;
            }
            records.push_back(record);
        }
        self.inner.queue.ready.notify_one();
    }

    /// What happened to the records so far.
    pub fn delivery(&self) -> Delivery {
        let c = &self.inner.counters;
        Delivery {
            offered: c.offered.load(Ordering::SeqCst),
            accepted: c.accepted.load(Ordering::SeqCst),
            replayed: c.replayed.load(Ordering::SeqCst),
            failed: c.failed.load(Ordering::SeqCst),
            dropped: c.dropped.load(Ordering::SeqCst),
            retries: c.retries.load(Ordering::SeqCst),
            last_sequence: c.last_sequence.load(Ordering::SeqCst),
        }
    }

    /// Records waiting in the queue (not counting the one being sent).
    pub fn queued(&self) -> usize {
        self.inner
            .queue
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    fn pop(&self) -> Option<Record> {
        self.inner
            .queue
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
    }
}

/// How [`Worker::deliver`] ended.
enum Delivered {
    /// The record's fate is decided (accepted, replayed, refused).
    Settled,
    /// The term ended first: the record is kept for the next one.
    Paused,
    /// Shut down first: the record is not delivered.
    Shutdown,
}

/// How one attempt ended.
enum Attempt {
    Accepted,
    Replayed,
    /// A 4xx other than replay, or a code that stays until an operator acts: not retried.
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// A 5xx or a transport error: retried.
    Retry {
        reason: PostError,
    },
}

struct Worker {
    inner: Arc<Inner>,
    client: IngestClient,
    config: ProducerConfig,
    sequencer: Sequencer,
}

impl Worker {
    async fn run(mut self, shutdown: CancellationToken) {
        let producer = Producer {
            inner: Arc::clone(&self.inner),
        };
        let mut permits = self.inner.permit.subscribe();
        // The record taken from the queue and not settled yet (kept across a pause).
        let mut current: Option<Record> = None;
        'run: loop {
            // Post only with a live permit: wait for one.
            let permit = loop {
                if shutdown.is_cancelled() {
                    break 'run;
                }
                let permit = permits.borrow_and_update().clone();
                if !permit.is_cancelled() {
                    break permit;
                }
                tokio::select! {
                    () = shutdown.cancelled() => break 'run,
                    changed = permits.changed() => if changed.is_err() { break 'run },
                }
            };
            let Some(record) = current.take().or_else(|| producer.pop()) else {
                tokio::select! {
                    () = shutdown.cancelled() => break 'run,
                    () = permit.cancelled() => {}
                    () = self.inner.queue.ready.notified() => {}
                }
                continue;
            };
            match self.deliver(&record, &permit, &shutdown).await {
                Delivered::Settled => {}
                Delivered::Paused => {
                    tracing::info!(
                        pacto = %record.pacto,
                        id = %record.id,
                        queued = producer.queued() + 1,
                        "not the leader any more: evidence posting paused, records kept until the Lease is held again"
                    );
                    current = Some(record);
                }
                Delivered::Shutdown => {
                    current = Some(record);
                    break 'run;
                }
            }
        }
        // What is queued, and a record taken but not settled, is not delivered.
        let left = {
            let mut records = self
                .inner
                .queue
                .records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let left = records.len() + usize::from(current.is_some());
            records.clear();
            left
        };
        self.dropped_at_shutdown(left as u64);
    }

    fn dropped_at_shutdown(&self, count: u64) {
        if count == 0 {
            return;
        }
        self.inner
            .counters
            .dropped
            .fetch_add(count, Ordering::SeqCst);
        counter!(EVIDENCE_DROPPED_TOTAL, "reason" => "shutdown").increment(count);
        tracing::warn!(records = count, "evidence records not sent before shutdown");
    }

    /// Sends `record` until it is settled, while `permit` is live and until `shutdown`.
    async fn deliver(
        &mut self,
        record: &Record,
        permit: &CancellationToken,
        shutdown: &CancellationToken,
    ) -> Delivered {
        let inner = Arc::clone(&self.inner);
        let counters = &inner.counters;
        // Each record starts a fresh streak (docs/design/architecture.md#backoff); every retry
        // is logged here, with the record it holds up.
        let mut backoff = Backoff::new(self.config.min_backoff, self.config.max_backoff);
        loop {
            let attempt = match self.sign(record) {
                // Dropping the request abandons it: nothing more is sent once the term ended.
                Ok(body) => tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Delivered::Shutdown,
                    () = permit.cancelled() => return Delivered::Paused,
                    attempt = self.post(body) => attempt,
                },
                Err(message) => Attempt::Refused {
                    status: 0,
                    code: "unsignable".to_owned(),
                    message,
                },
            };
            match attempt {
                Attempt::Accepted => {
                    counters.accepted.fetch_add(1, Ordering::SeqCst);
                    counter!(EVIDENCE_SENT_TOTAL, "result" => "accepted").increment(1);
                    tracing::debug!(pacto = %record.pacto, id = %record.id, "evidence record accepted");
                    return Delivered::Settled;
                }
                Attempt::Replayed => {
                    counters.replayed.fetch_add(1, Ordering::SeqCst);
                    counter!(EVIDENCE_SENT_TOTAL, "result" => "replay").increment(1);
                    tracing::debug!(pacto = %record.pacto, id = %record.id, "evidence record already stored");
                    return Delivered::Settled;
                }
                Attempt::Refused {
                    status,
                    code,
                    message,
                } => {
                    counters.failed.fetch_add(1, Ordering::SeqCst);
                    counter!(EVIDENCE_FAILED_TOTAL, "code" => code.clone()).increment(1);
                    tracing::warn!(pacto = %record.pacto, id = %record.id, status, %code, %message, "evidence record refused (not retried)");
                    return Delivered::Settled;
                }
                Attempt::Retry { reason } => {
                    counters.retries.fetch_add(1, Ordering::SeqCst);
                    counter!(EVIDENCE_RETRIES_TOTAL).increment(1);
                    let delay = backoff.next_delay();
                    tracing::info!(pacto = %record.pacto, id = %record.id, %reason, retry_in = ?delay, "evidence server unavailable: retrying");
                    tokio::select! {
                        biased;
                        () = shutdown.cancelled() => return Delivered::Shutdown,
                        () = permit.cancelled() => return Delivered::Paused,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// The record as a signed envelope, with a fresh sequence and validity window.
    fn sign(&mut self, record: &Record) -> Result<String, String> {
        let sequence = self.sequencer.next(Sequencer::clock());
        let issued_at = Timestamp::now();
        let (seconds, nanos) = issued_at.unix_parts();
        let ttl = i64::try_from(ENVELOPE_TTL.as_secs()).unwrap_or(i64::MAX);
        let expires_at = Timestamp::from_unix(seconds.saturating_add(ttl), nanos)
            .unwrap_or_else(Timestamp::zero);
        let mut envelope = Envelope::new(
            record.id.clone(),
            ProducerId {
                id: self.config.producer_id.clone(),
                version: self.config.producer_version.clone(),
                key_id: self.config.key_id.clone(),
            },
            sequence,
            issued_at,
            expires_at,
            record.set.clone(),
        );
        pacto_evidence::sign(&mut envelope, &self.config.key.0).map_err(|e| e.to_string())?;
        self.inner
            .counters
            .last_sequence
            .store(sequence, Ordering::SeqCst);
        Ok(envelope.to_json())
    }

    async fn post(&self, body: String) -> Attempt {
        match self.client.post(body).await {
            // a 2xx is stored, whatever its body says
            Ok(_) | Err(PostError::BadAcceptance { .. }) => Attempt::Accepted,
            Err(error) if error.is_replay() => Attempt::Replayed,
            // Final: a refusal of the envelope itself (4xx), or a code that stays until an
            // operator acts (`registry_incomplete`: an invalid artifact on this record's subject).
            // Retrying it would stall the one queue, and every other subject's records, behind
            // it (docs/design/evidence-store.md#commit).
            Err(error) if !error.is_retryable() => Attempt::Refused {
                status: error.status().unwrap_or(0),
                code: error.label(),
                message: error
                    .message()
                    .map_or_else(|| error.to_string(), str::to_owned),
            },
            Err(reason) => Attempt::Retry { reason },
        }
    }
}

/// The record of the pass that composed `composed` for the Pacto `key` from the persisted
/// status `previous`, if the pass changes the verdict (`contractStatus`) and the new verdict
/// rests on evidence: a contract resolved from a registry (pinned by digest) and an observation
/// the evaluator evaluated. A steady pass, a verdict from a failed backend, an invalid or
/// inline contract, or a reference-only Pacto gives none.
pub fn verdict_record(
    producer_id: &str,
    key: (&str, &str),
    previous: Option<&pacto_api::PactoStatus>,
    composed: &crate::compose::Composed,
    resolution: &crate::model::Resolution,
    runtime: Option<&crate::model::Runtime>,
) -> Option<Record> {
    use crate::model::{Resolution, Runtime};
    if !composed.changed {
        return None;
    }
    let verdict = composed.status.contract_status?;
    if previous.and_then(|s| s.contract_status) == Some(verdict) {
        return None;
    }
    let Resolution::Resolved(resolved) = resolution else {
        return None;
    };
    let Some(Runtime::Observed {
        observed,
        evaluated: Ok(_),
    }) = runtime
    else {
        return None;
    };
    let evidence = observed.evidence.as_ref()?;
    let contract = contract_ref(resolved.resolved_ref.as_deref(), resolved.digest.as_deref())?;
    let set = wire_set(evidence, contract)?;
    let (namespace, name) = key;
    Some(Record {
        id: record_id(
            producer_id,
            namespace,
            name,
            &composed.occurrence,
            verdict.as_str(),
        ),
        set,
        pacto: format!("{namespace}/{name}"),
    })
}

/// The flags of the producer mode, resolved into a configuration (`None`: mode off).
pub fn config_from_flags(
    url: Option<&str>,
    key: Option<&PathBuf>,
    key_id: Option<&str>,
    producer: &str,
    queue_size: usize,
) -> Result<Option<ProducerConfig>, ProducerError> {
    let url = url.filter(|u| !u.is_empty());
    let key = key.filter(|k| !k.as_os_str().is_empty());
    let (url, key) = match (url, key) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(ProducerError::Incomplete {
                given: "--evidence-url",
                missing: "--evidence-key",
            });
        }
        (None, Some(_)) => {
            return Err(ProducerError::Incomplete {
                given: "--evidence-key",
                missing: "--evidence-url",
            });
        }
        (Some(url), Some(key)) => (url, key),
    };
    let key_id = match key_id.filter(|k| !k.is_empty()) {
        Some(id) => id.to_owned(),
        None => ProducerConfig::key_id_of(key).unwrap_or_default(),
    };
    let mut config = ProducerConfig::new(url, Key::read(key)?, key_id);
    producer.clone_into(&mut config.producer_id);
    config.queue_size = queue_size;
    config.check()?;
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_follow_the_clock_and_never_repeat() {
        let mut s = Sequencer::default();
        assert_eq!(s.next(100), 100);
        // The same instant, or a clock that went back: still strictly increasing.
        assert_eq!(s.next(100), 101);
        assert_eq!(s.next(50), 102);
        assert_eq!(s.next(1_000), 1_000);
        // A restarted process starts from the clock, above anything signed before it.
        let before = Sequencer::clock();
        let mut restarted = Sequencer::default();
        assert!(restarted.next(Sequencer::clock()) >= before);
    }

    #[test]
    fn record_ids_are_stable_per_transition() {
        let a = record_id("p", "ns", "orders", "status:1", "Compliant");
        assert_eq!(a, record_id("p", "ns", "orders", "status:1", "Compliant"));
        for other in [
            record_id("q", "ns", "orders", "status:1", "Compliant"),
            record_id("p", "ns2", "orders", "status:1", "Compliant"),
            record_id("p", "ns", "orders2", "status:1", "Compliant"),
            record_id("p", "ns", "orders", "status:2", "Compliant"),
            record_id("p", "ns", "orders", "status:1", "NonCompliant"),
            // Length prefixes: moving a character between fields changes the id.
            record_id("p", "nso", "rders", "status:1", "Compliant"),
        ] {
            assert_ne!(a, other);
        }
        assert!(a.starts_with("sha256:") && a.len() == 71, "{a}");
    }

    #[test]
    fn contract_refs_are_pinned_by_digest_without_the_tag() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            contract_ref(Some("registry.local:5000/team/orders:1.0.0"), Some(&digest)),
            Some(format!("oci://registry.local:5000/team/orders@{digest}"))
        );
        assert_eq!(
            contract_ref(Some(&format!("ghcr.io/acme/orders@{digest}")), None),
            Some(format!("oci://ghcr.io/acme/orders@{digest}"))
        );
        assert_eq!(contract_ref(None, Some(&digest)), None, "inline");
        assert_eq!(
            contract_ref(Some("ghcr.io/acme/orders:1"), None),
            None,
            "no digest"
        );
        assert_eq!(
            contract_ref(Some("ghcr.io/acme/orders:1"), Some("sha256:ABC")),
            None
        );
    }

    #[test]
    fn flags_need_each_other_and_name_the_key_file_not_its_content() {
        assert!(
            config_from_flags(None, None, None, DEFAULT_PRODUCER, 10)
                .unwrap()
                .is_none()
        );
        let err =
            config_from_flags(Some("http://x"), None, None, DEFAULT_PRODUCER, 10).unwrap_err();
        assert_eq!(err.to_string(), "--evidence-url needs --evidence-key");
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("sw-2026.key");
        std::fs::write(&key, "not base64 at all, secret-ish\n").unwrap();
        let err = config_from_flags(Some("http://x"), Some(&key), None, DEFAULT_PRODUCER, 10)
            .unwrap_err();
        // The flag, then its cause, each once (docs/design/architecture.md#failure-handling).
        assert_eq!(err.to_string(), "--evidence-key");
        let text = pacto_runtime::tls::error_chain(&err);
        assert!(text.starts_with("--evidence-key: "), "{text}");
        assert_eq!(text.matches("sw-2026.key").count(), 1, "{text}");
        assert!(!text.contains("secret-ish"), "{text}");

        let signing = SigningKey::from_bytes(&[7; 32]);
        std::fs::write(&key, pacto_evidence::keys::signing_key_text(&signing)).unwrap();
        let config = config_from_flags(Some("http://x/"), Some(&key), None, "sw", 10)
            .unwrap()
            .unwrap();
        assert_eq!(
            (config.key_id.as_str(), config.producer_id.as_str()),
            ("sw-2026", "sw")
        );
        assert_eq!(format!("{:?}", config.key), "Key(..)");
        let err = config_from_flags(Some("ftp://x"), Some(&key), None, "sw", 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--evidence-url: \"ftp://x\" is not an http:// or https:// URL"
        );
        let err = config_from_flags(Some("http://x"), Some(&key), None, "bad_id", 10).unwrap_err();
        assert_eq!(err.to_string(), "--evidence-producer");
        let text = pacto_runtime::tls::error_chain(&err);
        assert!(text.starts_with("--evidence-producer: "), "{text}");
        let err = config_from_flags(Some("http://x"), Some(&key), None, "sw", 0).unwrap_err();
        assert_eq!(err.to_string(), "--evidence-queue-size must be at least 1");
    }

    #[test]
    fn credentials_in_the_evidence_url_are_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("sw-2026.key");
        let signing = SigningKey::from_bytes(&[7; 32]);
        std::fs::write(&key, pacto_evidence::keys::signing_key_text(&signing)).unwrap();
        let secret = "s3cret-Pa55";
        let config = config_from_flags(
            Some(&format!("https://ci:{secret}@evidence.example:8686/")),
            Some(&key),
            None,
            "sw",
            10,
        )
        .unwrap()
        .unwrap();
        // Sent as given (reqwest turns the userinfo into basic auth), shown without it.
        assert!(config.url.contains(secret));
        assert_eq!(config.shown_url(), "https://***@evidence.example:8686/");
        let debug = format!("{config:?}");
        assert!(!debug.contains(secret), "{debug}");
        assert!(
            debug.contains("https://***@evidence.example:8686/"),
            "{debug}"
        );

        let err = config_from_flags(
            Some(&format!("ftp://ci:{secret}@x")),
            Some(&key),
            None,
            "sw",
            10,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--evidence-url: \"ftp://***@x\" is not an http:// or https:// URL"
        );
        // A transport failure's reason (logged on each retry) does not carry them either: the
        // client's own test (`pacto_evidence::client`).
    }
}
