//! Evidence records stored in the registry (docs/design/evidence-store.md): one untagged,
//! deterministic OCI 1.1 referrer per accepted record, attached to the contract manifest it is
//! evidence for.
//!
//! - [`Subject`], [`Subjects`]: the configured contract manifests.
//! - [`Record`], [`Artifact`], [`Malformed`]: the payload document, its strict read-side
//!   validation and the artifact that carries it.
//! - [`Store`]: readiness ([`Store::preflight`]), the serialised commit ([`Store::commit`]),
//!   the read path ([`Store::scan`]) and the `/targets` projection ([`targets`]).
//!
//! Two referrer modes ([`ReferrersMode`]): the native Referrers API, and the OCI 1.1 referrers
//! tag schema for registries without it, detected once per subject. The store keeps an index
//! of the referrers it has validated (content-addressed, so a known digest is never fetched
//! again) and the replay state derived from them; a commit lists the referrers and validates
//! only what is new (docs/design/evidence-store.md#incremental-index).

mod mode;
mod record;
mod scan;
mod subject;
mod targets;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use pacto_oci::{
    ArtifactClient, ArtifactDescriptor, ClientOptions, CredentialsError, Keychain,
    OCI_INDEX_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE, OciError, Referrers, referrers_tag,
};

use crate::codes::ErrorCode;
use crate::replay::{ReplayError, ReplayIndex};

pub use mode::ReferrersMode;
pub use record::{
    Artifact, EMPTY_CONFIG_BLOB, EMPTY_CONFIG_DESCRIPTOR, EMPTY_CONFIG_DIGEST,
    EMPTY_CONFIG_MEDIA_TYPE, MAX_RECORD_BYTES, MAX_RECORD_MANIFEST_BYTES, Malformed,
    RECORD_ARTIFACT_TYPE, RECORD_SCHEMA_VERSION, Record,
};
pub use scan::{FailedSubject, Health, HealthStatus, InvalidArtifact, Scan, StoredRecord};
pub use subject::{Subject, SubjectError, Subjects, SubjectsError};
pub use targets::{
    MAX_TARGET_FINDINGS, MAX_TARGETS, TARGETS_SCHEMA_VERSION, Target, TargetsDto, target_key,
    targets,
};

/// Most referrers pages read per subject (more is an error, not a truncation).
pub const MAX_REFERRER_PAGES: usize = 1000;

/// Options of a [`Store`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// The registry client's options (plain-HTTP hosts, timeouts, limits).
    pub client: ClientOptions,
    /// The Referrers API page size (`?n=`), none by default.
    pub page_size: Option<u32>,
    /// Most referrers pages per subject.
    pub max_pages: usize,
    /// Keep the validated index between operations (the default). `false` re-reads the whole
    /// history on every operation, as upstream does (the bench's baseline).
    pub incremental: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            client: ClientOptions::default(),
            page_size: None,
            max_pages: MAX_REFERRER_PAGES,
            incremental: true,
        }
    }
}

/// A store-level failure (construction, readiness).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The credentials of a registry could not be resolved.
    #[error("credentials for {registry}: {source}")]
    Credentials {
        /// The registry.
        registry: String,
        /// Why.
        #[source]
        source: CredentialsError,
    },
    /// The registry client could not be built.
    #[error("registry client for {registry}: {source}")]
    Client {
        /// The registry.
        registry: String,
        /// Why.
        #[source]
        source: Box<OciError>,
    },
    /// A subject could not be resolved or its referrers not listed.
    #[error("subject {subject}: {source}")]
    Subject {
        /// The subject reference.
        subject: String,
        /// Why.
        #[source]
        source: Box<OciError>,
    },
}

/// Why a commit was refused (each maps to a stable code, [`CommitError::code`]).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The record's ContractRef is not a configured subject (`contract_ref_rejected`).
    #[error("ContractRef {contract_ref:?} is not a configured evidence subject")]
    UnknownSubject {
        /// The ContractRef.
        contract_ref: String,
    },
    /// The envelope id or sequence was accepted before (`replay`).
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Some subject could not be resolved or listed (`registry_unavailable`).
    #[error("{} of {subjects} subject(s) could not be read: {}", failed.len(), failed.iter().map(|(s, e)| format!("{s}: {e}")).collect::<Vec<_>>().join("; "))]
    RegistryUnavailable {
        /// How many subjects are configured.
        subjects: usize,
        /// The failed subjects and their errors.
        failed: Vec<(String, String)>,
    },
    /// Invalid record artifacts are stored (`registry_incomplete`): writes stay refused until
    /// they are fixed or removed.
    #[error("{} invalid evidence artifact(s) stored; first: {}", invalid.len(), invalid.first().map(|i| format!("{} on {}: {}", i.digest, i.subject, i.reason)).unwrap_or_default())]
    RegistryIncomplete {
        /// The invalid artifacts.
        invalid: Vec<InvalidArtifact>,
    },
    /// Building, pushing or confirming the record failed (`store_degraded`).
    #[error("storing the record on {subject}: {step}: {message}")]
    StoreDegraded {
        /// The subject.
        subject: String,
        /// `push config`, `push payload`, `push manifest`, `update referrers tag`, `confirm`.
        step: &'static str,
        /// What failed.
        message: String,
    },
}

impl CommitError {
    /// The stable ingestion code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::UnknownSubject { .. } => ErrorCode::ContractRefRejected,
            Self::Replay(_) => ErrorCode::Replay,
            Self::RegistryUnavailable { .. } => ErrorCode::RegistryUnavailable,
            Self::RegistryIncomplete { .. } => ErrorCode::RegistryIncomplete,
            Self::StoreDegraded { .. } => ErrorCode::StoreDegraded,
        }
    }
}

/// A committed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The record manifest's digest.
    pub digest: String,
    /// The subject it is attached to.
    pub subject: Subject,
    /// How it was made discoverable.
    pub mode: ReferrersMode,
    /// Registry requests the commit cost (listing, pushes, confirmation).
    pub requests: u64,
}

/// One subject's readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectReadiness {
    /// The subject.
    pub subject: Subject,
    /// Its referrers mode.
    pub mode: ReferrersMode,
    /// How many referrers are listed (any type).
    pub referrers: usize,
}

/// A successful preflight: every subject resolved and listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Per subject, in configuration order.
    pub subjects: Vec<SubjectReadiness>,
    /// Registry requests the preflight cost.
    pub requests: u64,
}

/// What the index knows about one listed digest.
#[derive(Debug, Clone)]
enum Entry {
    Record(Arc<Record>),
    Foreign,
    /// `transient`: the failure may go away (registry unreachable): classify again next time.
    Invalid {
        reason: Malformed,
        transient: bool,
    },
}

#[derive(Debug, Default)]
struct SubjectState {
    /// The last listing, in order.
    listing: Vec<ArtifactDescriptor>,
    entries: HashMap<String, Entry>,
    /// The last read failure, cleared by a successful read.
    error: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    subjects: Vec<SubjectState>,
    replay: ReplayIndex,
}

/// Memoised per-subject facts (resolution and mode): readable without the commit lock.
#[derive(Debug, Default, Clone)]
struct Meta {
    descriptor: Option<ArtifactDescriptor>,
    mode: Option<ReferrersMode>,
}

/// The evidence store (see the module documentation). Construction does no network I/O.
#[derive(Debug)]
pub struct Store {
    subjects: Subjects,
    clients: HashMap<String, ArtifactClient>,
    options: StoreOptions,
    state: tokio::sync::Mutex<State>,
    meta: StdMutex<Vec<Meta>>,
}

impl Store {
    /// A store for `subjects`, with one registry client per registry (credentials from
    /// `keychain`). No network I/O.
    pub fn new(
        subjects: Subjects,
        options: StoreOptions,
        keychain: &Keychain,
    ) -> Result<Self, StoreError> {
        let mut clients = HashMap::new();
        for subject in &subjects {
            let registry = subject.registry().to_owned();
            if clients.contains_key(&registry) {
                continue;
            }
            let credentials =
                keychain
                    .resolve(&registry)
                    .map_err(|source| StoreError::Credentials {
                        registry: registry.clone(),
                        source,
                    })?;
            let client =
                ArtifactClient::new(options.client.clone(), &credentials).map_err(|source| {
                    StoreError::Client {
                        registry: registry.clone(),
                        source: Box::new(source),
                    }
                })?;
            clients.insert(registry, client);
        }
        let count = subjects.len();
        Ok(Self {
            subjects,
            clients,
            options,
            state: tokio::sync::Mutex::new(State {
                subjects: (0..count).map(|_| SubjectState::default()).collect(),
                replay: ReplayIndex::new(),
            }),
            meta: StdMutex::new(vec![Meta::default(); count]),
        })
    }

    /// The configured subjects.
    pub fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// The subject a ContractRef names exactly, if configured (upstream's `AuthorizeSubject`).
    pub fn authorize_subject(&self, contract_ref: &str) -> Option<&Subject> {
        self.subjects.find(contract_ref)
    }

    /// The referrers mode of a subject, once detected (by a preflight, scan or commit).
    pub fn mode(&self, subject: &Subject) -> Option<ReferrersMode> {
        let index = self.subjects.iter().position(|s| s == subject)?;
        self.meta.lock().unwrap_or_else(PoisonError::into_inner)[index].mode
    }

    /// Registry requests sent so far by this store (all registries).
    pub fn requests(&self) -> u64 {
        self.clients.values().map(ArtifactClient::requests).sum()
    }

    fn client(&self, subject: &Subject) -> &ArtifactClient {
        // every subject's registry got a client in `new`
        &self.clients[subject.registry()]
    }

    fn meta(&self, index: usize) -> Meta {
        self.meta.lock().unwrap_or_else(PoisonError::into_inner)[index].clone()
    }

    fn set_meta(&self, index: usize, f: impl FnOnce(&mut Meta)) {
        f(&mut self.meta.lock().unwrap_or_else(PoisonError::into_inner)[index]);
    }

    /// The subject's descriptor (HEAD by digest, memoised once it succeeds).
    async fn descriptor(&self, index: usize) -> Result<ArtifactDescriptor, OciError> {
        if let Some(d) = self.meta(index).descriptor {
            return Ok(d);
        }
        let subject = &self.subjects.as_slice()[index];
        let d = self
            .client(subject)
            .head_manifest(&subject.oci_repository(), subject.digest())
            .await?;
        self.set_meta(index, |m| m.descriptor = Some(d.clone()));
        Ok(d)
    }

    /// Lists a subject's referrers in its mode (detecting the mode on first use).
    async fn list(
        &self,
        index: usize,
    ) -> Result<(ReferrersMode, Vec<ArtifactDescriptor>), OciError> {
        let subject = &self.subjects.as_slice()[index];
        let client = self.client(subject);
        let repo = subject.oci_repository();
        if self.meta(index).mode != Some(ReferrersMode::TagSchema) {
            match client
                .referrers(
                    &repo,
                    subject.digest(),
                    self.options.page_size,
                    self.options.max_pages,
                )
                .await?
            {
                Referrers::Listed(list) => {
                    self.set_meta(index, |m| m.mode = Some(ReferrersMode::Api));
                    return Ok((ReferrersMode::Api, list));
                }
                Referrers::Unsupported if self.meta(index).mode == Some(ReferrersMode::Api) => {
                    // switching now would hide every record the API listed: a failure instead
                    return Err(OciError::BadReferrers {
                        reference: subject.reference(),
                        reason: "the Referrers API answered 404 after it had been detected; \
                                 not falling back to the tag schema"
                            .to_owned(),
                    });
                }
                Referrers::Unsupported => {
                    self.set_meta(index, |m| m.mode = Some(ReferrersMode::TagSchema));
                }
            }
        }
        let list = client
            .referrers_tag_index(&repo, subject.digest())
            .await?
            .map(|(list, _)| list)
            .unwrap_or_default();
        Ok((ReferrersMode::TagSchema, list))
    }

    /// Readiness (upstream's preflight): every subject resolved (memoised) and its referrers
    /// listed, nothing fetched. The first failure is returned. The caller applies the time
    /// budget (3 s for `/ready`). Does not wait for a running commit.
    pub async fn preflight(&self) -> Result<Readiness, StoreError> {
        let before = self.requests();
        let mut subjects = Vec::with_capacity(self.subjects.len());
        for (index, subject) in self.subjects.iter().enumerate() {
            let fail = |source| StoreError::Subject {
                subject: subject.reference(),
                source: Box::new(source),
            };
            self.descriptor(index).await.map_err(fail)?;
            let (mode, list) = self.list(index).await.map_err(fail)?;
            subjects.push(SubjectReadiness {
                subject: subject.clone(),
                mode,
                referrers: list.len(),
            });
        }
        Ok(Readiness {
            subjects,
            requests: self.requests() - before,
        })
    }

    /// Classifies one listed descriptor (docs/design/evidence-store.md#scan).
    async fn classify(&self, subject: &Subject, listed: &ArtifactDescriptor) -> Entry {
        let claims = listed.artifact_type.as_deref() == Some(RECORD_ARTIFACT_TYPE);
        if listed.size > MAX_RECORD_MANIFEST_BYTES {
            return if claims {
                Entry::Invalid {
                    reason: Malformed::ManifestTooLarge { size: listed.size },
                    transient: false,
                }
            } else {
                Entry::Foreign
            };
        }
        let client = self.client(subject);
        let repo = subject.oci_repository();
        let fetch_failed = |what: &'static str, e: OciError| Entry::Invalid {
            transient: e.is_unavailable(),
            reason: Malformed::Fetch {
                what,
                message: e.to_string(),
            },
        };
        let manifest = match client.manifest(&repo, &listed.digest).await {
            Ok(m) => m,
            Err(e) => return fetch_failed("manifest", e),
        };
        let own = record::ManifestIn::artifact_type(&manifest.bytes);
        if !claims && own.as_deref() != Some(RECORD_ARTIFACT_TYPE) {
            return Entry::Foreign;
        }
        let layer = match record::ManifestIn::check(&manifest.bytes, subject) {
            Ok(layer) => layer,
            Err(reason) => {
                return Entry::Invalid {
                    reason,
                    transient: false,
                };
            }
        };
        let payload = match client
            .blob(&repo, &layer.digest, layer.size, MAX_RECORD_BYTES)
            .await
        {
            Ok(p) => p,
            Err(e) => return fetch_failed("payload", e),
        };
        match Record::from_payload(&payload, subject) {
            Ok(record) => Entry::Record(Arc::new(record)),
            Err(reason) => Entry::Invalid {
                reason,
                transient: false,
            },
        }
    }

    /// Brings one subject's index up to date: resolve, list, validate what is new. A known
    /// digest that left the listing (or whose listing entry changed) drops the subject's index
    /// and revalidates everything listed. Returns whether the replay state must be rebuilt.
    async fn refresh(&self, index: usize, state: &mut State) -> bool {
        let subject = &self.subjects.as_slice()[index];
        let listed = match self.descriptor(index).await {
            Ok(_) => self.list(index).await,
            Err(e) => Err(e),
        };
        let listing = match listed {
            Ok((_, list)) => list,
            Err(e) => {
                state.subjects[index].error = Some(e.to_string());
                return false;
            }
        };
        let mut rebuild = !self.options.incremental;
        {
            let current = &state.subjects[index];
            let now: HashMap<&str, &ArtifactDescriptor> =
                listing.iter().map(|d| (d.digest.as_str(), d)).collect();
            let before: HashMap<&str, &ArtifactDescriptor> = current
                .listing
                .iter()
                .map(|d| (d.digest.as_str(), d))
                .collect();
            for (digest, old) in &before {
                match now.get(digest) {
                    Some(new) if new == old => {}
                    _ => rebuild = true,
                }
            }
        }
        let subject_state = &mut state.subjects[index];
        if rebuild {
            subject_state.entries.clear();
        }
        let mut fresh = Vec::new();
        let mut seen = HashSet::new();
        for listed in &listing {
            if !seen.insert(listed.digest.clone()) {
                continue;
            }
            let known = !matches!(
                subject_state.entries.get(&listed.digest),
                None | Some(Entry::Invalid {
                    transient: true,
                    ..
                })
            );
            if !known {
                let entry = self.classify(subject, listed).await;
                if let Entry::Record(r) = &entry {
                    fresh.push(Arc::clone(r));
                }
                subject_state.entries.insert(listed.digest.clone(), entry);
            }
        }
        subject_state.listing = listing;
        subject_state.error = None;
        if !rebuild {
            for r in fresh {
                let e = &r.envelope;
                state.replay.record(&e.id, &e.producer.id, e.sequence);
            }
        }
        rebuild
    }

    fn rebuild_replay(state: &mut State) {
        let mut replay = ReplayIndex::new();
        for s in &state.subjects {
            for entry in s.entries.values() {
                if let Entry::Record(r) = entry {
                    let e = &r.envelope;
                    replay.record(&e.id, &e.producer.id, e.sequence);
                }
            }
        }
        state.replay = replay;
    }

    async fn refresh_all(&self, state: &mut State) {
        let mut rebuild = false;
        for index in 0..self.subjects.len() {
            rebuild |= self.refresh(index, state).await;
        }
        if rebuild {
            Self::rebuild_replay(state);
        }
    }

    fn snapshot(&self, state: &State, requests: u64) -> Scan {
        let mut records = Vec::new();
        let mut invalid = Vec::new();
        let mut failed = Vec::new();
        let mut foreign = 0;
        let mut modes = Vec::new();
        for (index, subject) in self.subjects.iter().enumerate() {
            let s = &state.subjects[index];
            if let Some(error) = &s.error {
                failed.push(FailedSubject {
                    subject: subject.clone(),
                    error: error.clone(),
                });
                continue;
            }
            if let Some(mode) = self.meta(index).mode {
                modes.push((subject.clone(), mode));
            }
            let mut seen = HashSet::new();
            for listed in &s.listing {
                if !seen.insert(listed.digest.as_str()) {
                    continue;
                }
                match s.entries.get(&listed.digest) {
                    Some(Entry::Record(r)) => records.push(StoredRecord {
                        subject: subject.clone(),
                        digest: listed.digest.clone(),
                        record: Arc::clone(r),
                    }),
                    Some(Entry::Invalid { reason, .. }) => invalid.push(InvalidArtifact {
                        subject: subject.clone(),
                        digest: listed.digest.clone(),
                        reason: reason.clone(),
                    }),
                    Some(Entry::Foreign) | None => foreign += 1,
                }
            }
        }
        let status = if failed.len() == self.subjects.len() {
            HealthStatus::Unavailable
        } else if !failed.is_empty() || !invalid.is_empty() {
            HealthStatus::Partial
        } else {
            HealthStatus::Ready
        };
        Scan {
            health: Health {
                status,
                subjects: self.subjects.len(),
                failed_subjects: failed.len(),
                invalid_artifacts: invalid.len(),
            },
            records,
            invalid,
            failed,
            foreign,
            modes,
            requests,
        }
    }

    /// The read path: every subject listed, new referrers validated, a snapshot of all valid
    /// records, invalid artifacts (with reasons) and failed subjects. Never fails: failures
    /// degrade the health.
    pub async fn scan(&self) -> Scan {
        let mut state = self.state.lock().await;
        let before = self.requests();
        self.refresh_all(&mut state).await;
        self.snapshot(&state, self.requests() - before)
    }

    /// Drops the whole index and re-reads every referrer (what upstream does on every
    /// operation; also how a registry-side corruption of a known digest is found).
    pub async fn rescan(&self) -> Scan {
        let mut state = self.state.lock().await;
        for s in &mut state.subjects {
            s.entries.clear();
            s.listing.clear();
        }
        let before = self.requests();
        self.refresh_all(&mut state).await;
        Self::rebuild_replay(&mut state);
        self.snapshot(&state, self.requests() - before)
    }

    /// Commits a record (docs/design/evidence-store.md#commit): under the store's one lock,
    /// bring the index up to date, refuse when any subject failed or any artifact is invalid
    /// (fail-closed), check replay, push the artifact untagged by digest (and, in tag-schema
    /// mode, add it to the referrers index), and confirm it is listed.
    pub async fn commit(&self, record: &Record) -> Result<Committed, CommitError> {
        let contract_ref = &record.envelope.evidence_set.contract_ref;
        let index = self
            .subjects
            .iter()
            .position(|s| &s.reference() == contract_ref)
            .ok_or_else(|| CommitError::UnknownSubject {
                contract_ref: contract_ref.clone(),
            })?;
        let subject = self.subjects.as_slice()[index].clone();
        let mut state = self.state.lock().await;
        let before = self.requests();
        self.refresh_all(&mut state).await;
        let scan = self.snapshot(&state, 0);
        if !scan.failed.is_empty() {
            return Err(CommitError::RegistryUnavailable {
                subjects: self.subjects.len(),
                failed: scan
                    .failed
                    .into_iter()
                    .map(|f| (f.subject.reference(), f.error))
                    .collect(),
            });
        }
        if !scan.invalid.is_empty() {
            return Err(CommitError::RegistryIncomplete {
                invalid: scan.invalid,
            });
        }
        let e = &record.envelope;
        state.replay.check(&e.id, &e.producer.id, e.sequence)?;
        let meta = self.meta(index);
        let (Some(descriptor), Some(mode)) = (meta.descriptor, meta.mode) else {
            return Err(CommitError::RegistryUnavailable {
                subjects: self.subjects.len(),
                failed: vec![(subject.reference(), "not resolved".to_owned())],
            });
        };
        let artifact = record.artifact(&descriptor);
        let listing = self.publish(&subject, mode, &artifact).await?;
        // the confirming listing is the subject's listing now; anything else new in it is
        // classified by the next refresh
        // (a known digest missing from it stays, so that the next refresh sees it leave)
        let s = &mut state.subjects[index];
        let known: HashSet<&str> = s.listing.iter().map(|d| d.digest.as_str()).collect();
        let confirmed: HashSet<&str> = listing.iter().map(|d| d.digest.as_str()).collect();
        let mut next: Vec<ArtifactDescriptor> = listing
            .iter()
            .filter(|d| known.contains(d.digest.as_str()) || d.digest == artifact.digest)
            .cloned()
            .collect();
        next.extend(
            s.listing
                .iter()
                .filter(|d| !confirmed.contains(d.digest.as_str()))
                .cloned(),
        );
        s.listing = next;
        s.entries.insert(
            artifact.digest.clone(),
            Entry::Record(Arc::new(record.clone())),
        );
        state.replay.record(&e.id, &e.producer.id, e.sequence);
        Ok(Committed {
            digest: artifact.digest,
            subject,
            mode,
            requests: self.requests() - before,
        })
    }

    async fn publish(
        &self,
        subject: &Subject,
        mode: ReferrersMode,
        artifact: &Artifact,
    ) -> Result<Vec<ArtifactDescriptor>, CommitError> {
        let client = self.client(subject);
        let repo = subject.oci_repository();
        let degraded = |step: &'static str, e: OciError| CommitError::StoreDegraded {
            subject: subject.reference(),
            step,
            message: e.to_string(),
        };
        client
            .push_blob(&repo, EMPTY_CONFIG_BLOB, true)
            .await
            .map_err(|e| degraded("push config", e))?;
        client
            .push_blob(&repo, &artifact.payload, false)
            .await
            .map_err(|e| degraded("push payload", e))?;
        client
            .put_manifest(
                &repo,
                &artifact.digest,
                OCI_MANIFEST_MEDIA_TYPE,
                &artifact.manifest,
            )
            .await
            .map_err(|e| degraded("push manifest", e))?;
        let listed = match mode {
            ReferrersMode::Api => match client
                .referrers(
                    &repo,
                    subject.digest(),
                    self.options.page_size,
                    self.options.max_pages,
                )
                .await
                .map_err(|e| degraded("confirm", e))?
            {
                Referrers::Listed(list) => list,
                Referrers::Unsupported => Vec::new(),
            },
            ReferrersMode::TagSchema => {
                let mut list = client
                    .referrers_tag_index(&repo, subject.digest())
                    .await
                    .map_err(|e| degraded("update referrers tag", e))?
                    .map(|(list, _)| list)
                    .unwrap_or_default();
                if !list.iter().any(|d| d.digest == artifact.digest) {
                    list.push(artifact.descriptor());
                    let index = ArtifactClient::referrers_index_bytes(&list);
                    client
                        .put_manifest(
                            &repo,
                            &referrers_tag(subject.digest()),
                            OCI_INDEX_MEDIA_TYPE,
                            &index,
                        )
                        .await
                        .map_err(|e| degraded("update referrers tag", e))?;
                }
                client
                    .referrers_tag_index(&repo, subject.digest())
                    .await
                    .map_err(|e| degraded("confirm", e))?
                    .map(|(list, _)| list)
                    .unwrap_or_default()
            }
        };
        if listed.iter().any(|d| d.digest == artifact.digest) {
            Ok(listed)
        } else {
            Err(CommitError::StoreDegraded {
                subject: subject.reference(),
                step: "confirm",
                message: format!(
                    "{} is not listed among the subject's referrers after the push",
                    artifact.digest
                ),
            })
        }
    }
}
