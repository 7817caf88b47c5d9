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
//! again) and the replay state derived from them (docs/design/evidence-store.md#incremental-index).
//! The server being its records' one writer, a commit does not list the registry: the index is
//! verified at first use, by every scan and by a commit once `verify_interval` has passed
//! (docs/design/evidence-store.md#verification). In tag-schema mode our records are listed
//! through pages, so that a commit rewrites a small index
//! (docs/design/evidence-store.md#paged-tag-index).
//!
//! What a subject keeps is bounded by its [`Retention`] (by age and by count): records outside
//! it are dropped from memory, from the tag-schema index and, with the Referrers API, deleted
//! (docs/design/evidence-store.md#retention). A failure on one subject refuses writes to that
//! subject only (docs/design/evidence-store.md#commit).

mod layout;
mod mode;
mod record;
mod retention;
mod scan;
mod subject;
mod targets;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};

use pacto_oci::{
    ArtifactClient, ArtifactDescriptor, ClientOptions, CredentialsError, ErrorClass, Keychain,
    OCI_INDEX_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE, OciError, Referrers, referrers_tag,
};

use crate::codes::ErrorCode;
use crate::replay::{ReplayError, ReplayIndex};

pub use layout::{DEFAULT_PAGE_RECORDS, PAGE_ARTIFACT_TYPE};
use layout::{Page, RawIndex, is_page};
pub use mode::ReferrersMode;
pub use record::{
    Artifact, EMPTY_CONFIG_BLOB, EMPTY_CONFIG_DESCRIPTOR, EMPTY_CONFIG_DIGEST,
    EMPTY_CONFIG_MEDIA_TYPE, MAX_RECORD_BYTES, MAX_RECORD_MANIFEST_BYTES, Malformed,
    RECORD_ARTIFACT_TYPE, RECORD_SCHEMA_VERSION, Record,
};
use retention::Kept;
pub use retention::{
    DEFAULT_MAX_RECORD_AGE, DEFAULT_MAX_RECORDS_PER_SUBJECT, MAX_RECORDS_PER_SUBJECT,
    MAX_TAG_INDEX_BYTES, Retention,
};
pub use scan::{Drift, FailedSubject, Health, HealthStatus, InvalidArtifact, Scan, StoredRecord};
pub use subject::{Subject, SubjectError, Subjects, SubjectsError};
pub use targets::{
    MAX_TARGET_FINDINGS, MAX_TARGETS, TARGETS_SCHEMA_VERSION, Target, TargetsDto, target_key,
    targets,
};

/// Most referrers pages read per subject (more is an error, not a truncation).
pub const MAX_REFERRER_PAGES: usize = 1000;
/// Most expired record manifests one commit deletes (Referrers API mode); the rest go with the
/// next commits.
pub const MAX_DELETES_PER_COMMIT: usize = 16;
/// Most writes of a referrers tag-schema index in one commit when another tool keeps
/// replacing it between our write and our check.
pub const MAX_INDEX_WRITES: usize = 3;
/// Records classified between two applications of the retention while an index is built, so
/// that building it from a long listing holds at most this many records beyond the retention.
const RETENTION_CHUNK: usize = 1024;
/// How often the store checks its in-memory index against the registry unless configured
/// otherwise (docs/design/evidence-store.md#verification).
pub const DEFAULT_VERIFY_INTERVAL: Duration = Duration::from_mins(1);

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
    /// What each subject keeps (30 days, 1000 records by default).
    pub retention: Retention,
    /// The longest a commit trusts the in-memory index without listing the registry again
    /// (docs/design/evidence-store.md#verification); a scan always lists. One minute by
    /// default.
    pub verify_interval: Duration,
    /// Entries per page of the tag-schema index (records, or pages of the level below;
    /// docs/design/evidence-store.md#paged-tag-index), at least 2; [`DEFAULT_PAGE_RECORDS`]
    /// (16) by default.
    pub page_records: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            client: ClientOptions::default(),
            page_size: None,
            max_pages: MAX_REFERRER_PAGES,
            incremental: true,
            retention: Retention::default(),
            verify_interval: DEFAULT_VERIFY_INTERVAL,
            page_records: DEFAULT_PAGE_RECORDS,
        }
    }
}

/// A store-level failure (construction, readiness).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The credentials of a registry could not be resolved.
    #[error("credentials for {registry}")]
    Credentials {
        /// The registry.
        registry: String,
        /// Why.
        #[source]
        source: CredentialsError,
    },
    /// The registry client could not be built.
    #[error("registry client for {registry}")]
    Client {
        /// The registry.
        registry: String,
        /// Why.
        #[source]
        source: Box<OciError>,
    },
    /// A subject could not be resolved or its referrers not listed.
    #[error("subject {subject}")]
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
    /// The record's subject could not be resolved or listed (`registry_unavailable`). Other
    /// subjects' failures do not refuse a write.
    #[error("{} of {subjects} subject(s) could not be read: {}", failed.len(), failed.iter().map(|(s, e)| format!("{s}: {e}")).collect::<Vec<_>>().join("; "))]
    RegistryUnavailable {
        /// How many subjects are configured.
        subjects: usize,
        /// The failed subject (the record's) and its error.
        failed: Vec<(String, String)>,
    },
    /// Invalid record artifacts are stored on the record's subject (`registry_incomplete`):
    /// writes to that subject stay refused until they are fixed or removed; other subjects
    /// are not affected.
    #[error("{} invalid evidence artifact(s) stored on {subject}; first: {}", invalid.len(), invalid.first().map(|i| format!("{}: {}", i.digest, i.reason)).unwrap_or_default())]
    RegistryIncomplete {
        /// The subject (its reference).
        subject: String,
        /// The invalid artifacts.
        invalid: Vec<InvalidArtifact>,
    },
    /// Building, pushing or confirming the record failed (`store_degraded`).
    #[error("storing the record on {subject}: {step}: {message}")]
    StoreDegraded {
        /// The subject.
        subject: String,
        /// `push config`, `push payload`, `push manifest`, `update referrers tag`, `confirm`.
        /// `confirm` also covers another tool replacing the referrers tag after every one of
        /// [`MAX_INDEX_WRITES`] writes.
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
    /// Records of the subject that left the retention with this commit.
    pub expired: usize,
    /// Expired record manifests this commit deleted (Referrers API mode).
    pub deleted: usize,
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
    /// A valid record outside the retention: the record itself is not held; its id left the
    /// replay state and its sequence stays in the producer's floor.
    Expired,
    Foreign,
    /// `transient`: the failure may go away (registry unreachable): classify again next time.
    Invalid {
        reason: Malformed,
        transient: bool,
    },
}

#[derive(Debug, Default)]
struct SubjectState {
    /// The last listing, in order; in tag-schema mode with our pages expanded into the records
    /// they list (the pages themselves are in `pages`).
    listing: Vec<ArtifactDescriptor>,
    /// Tag-schema mode: our pages as last listed or written, oldest first.
    pages: Vec<Page>,
    /// Whether the subject has been read once (what a later read finds new is drift).
    loaded: bool,
    /// How many invalid artifacts the index holds (so that a commit need not count them).
    invalid: usize,
    /// The held records in retention order, for commits (`None`: built by the next commit).
    kept: Option<Kept>,
    /// Referrers API mode: expired records still listed, to delete (oldest first).
    to_delete: std::collections::VecDeque<String>,
    /// What each listed digest is (and each of `unlisted`).
    entries: HashMap<String, Entry>,
    /// Tag-schema mode: records of ours that another tool's write of the referrers tag left
    /// out while their manifests are still stored. They stay records (served, and history for
    /// replay) and the next commit lists them again.
    unlisted: Vec<ArtifactDescriptor>,
    /// Referrers API mode: the registry refused to delete an expired record (deletes
    /// disabled, or no delete right): not tried again by this store.
    delete_refused: Option<String>,
    /// The last read failure, cleared by a successful read.
    error: Option<String>,
}

impl SubjectState {
    /// The listing and the unlisted records, each digest once.
    fn known(&self) -> impl Iterator<Item = &ArtifactDescriptor> {
        let mut seen = HashSet::new();
        self.listing
            .iter()
            .chain(&self.unlisted)
            .filter(move |d| seen.insert(d.digest.as_str()))
    }

    /// The records held, with their digests.
    fn records(&self) -> Vec<(&str, &Record)> {
        self.entries
            .iter()
            .filter_map(|(digest, entry)| match entry {
                Entry::Record(r) => Some((digest.as_str(), r.as_ref())),
                _ => None,
            })
            .collect()
    }
}

#[derive(Debug, Default)]
struct State {
    subjects: Vec<SubjectState>,
    replay: ReplayIndex,
    /// Per producer, the highest sequence among records that left the retention (kept in the
    /// replay state when it is rebuilt).
    floor: HashMap<String, u64>,
    /// When every subject was last listed (docs/design/evidence-store.md#verification).
    verified_at: Option<Instant>,
    /// What the last listing of each subject found changed by someone else.
    drift: Vec<Drift>,
}

impl State {
    /// Applies the retention to one subject: records outside it become [`Entry::Expired`]
    /// (their ids forgotten by the replay state, their sequences kept in the floor); expired
    /// unlisted records are dropped. Returns how many records expired.
    fn expire(&mut self, index: usize, retention: &Retention) -> usize {
        let gone = retention.expired(&self.subjects[index].records());
        if !gone.is_empty() {
            self.subjects[index].kept = None;
        }
        self.drop_records(index, &gone)
    }

    /// Makes the records `gone` of one subject [`Entry::Expired`] (see [`State::expire`]);
    /// returns how many there were.
    fn drop_records(&mut self, index: usize, gone: &HashSet<String>) -> usize {
        let s = &mut self.subjects[index];
        for digest in gone {
            if let Some(Entry::Record(r)) = s.entries.insert(digest.clone(), Entry::Expired) {
                let e = &r.envelope;
                let floor = self
                    .floor
                    .entry(e.producer.id.clone())
                    .or_insert(e.sequence);
                *floor = (*floor).max(e.sequence);
                self.replay.forget(&e.id);
            }
        }
        if !gone.is_empty() {
            s.unlisted.retain(|d| {
                let expired = gone.contains(&d.digest);
                if expired {
                    s.entries.remove(&d.digest);
                }
                !expired
            });
        }
        gone.len()
    }
}

/// Tag-schema mode: the index layout a commit writes (`Store::plan_pages`).
struct PagePlan {
    /// Our pages the tag index lists, deepest first.
    pages: Vec<Page>,
    /// The new pages (digest, bytes), in creation order.
    pushed: Vec<(String, Vec<u8>)>,
    /// Our records the tag index lists directly, oldest first.
    tail: Vec<ArtifactDescriptor>,
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
                floor: HashMap::new(),
                verified_at: None,
                drift: Vec::new(),
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
                message: pacto_contract::error_chain(&e),
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

    /// Reads the page `d` and, recursively, the pages it lists (a page known by digest is not
    /// fetched again: content-addressed). The error is the page's invalid entry.
    fn page_tree<'a>(
        &'a self,
        subject: &'a Subject,
        d: ArtifactDescriptor,
        known: &'a HashMap<&'a str, &'a Page>,
        depth: usize,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Page, Entry>> + Send + 'a>> {
        Box::pin(async move {
            if let Some(p) = known.get(d.digest.as_str()) {
                return Ok((*p).clone());
            }
            let invalid = |message: String| Entry::Invalid {
                reason: Malformed::Manifest {
                    field: "page",
                    message,
                },
                transient: false,
            };
            if depth > layout::MAX_PAGE_DEPTH {
                return Err(invalid(format!(
                    "pages nested more than {} levels deep",
                    layout::MAX_PAGE_DEPTH
                )));
            }
            let entries = match self
                .client(subject)
                .manifest(&subject.oci_repository(), &d.digest)
                .await
            {
                Ok(m) => layout::read_page(&m.bytes, subject.digest()).map_err(invalid)?,
                Err(e) => {
                    return Err(Entry::Invalid {
                        transient: e.is_unavailable(),
                        reason: Malformed::Fetch {
                            what: "page",
                            message: pacto_contract::error_chain(&e),
                        },
                    });
                }
            };
            let mut page = Page {
                descriptor: d,
                direct: Vec::new(),
                children: Vec::new(),
                records: Vec::new(),
            };
            for e in entries {
                if is_page(&e) {
                    let child = self.page_tree(subject, e, known, depth + 1).await?;
                    page.records.extend(child.records.iter().cloned());
                    page.children.push(child);
                } else {
                    page.records.push(e.clone());
                    page.direct.push(e);
                }
            }
            Ok(page)
        })
    }

    /// Tag-schema mode: the listing with our pages expanded into the records they list, the
    /// pages read, and the entries of pages that could not be read (invalid, listed as they
    /// are).
    async fn expand(
        &self,
        index: usize,
        state: &State,
        top: Vec<ArtifactDescriptor>,
    ) -> (Vec<ArtifactDescriptor>, Vec<Page>, Vec<(String, Entry)>) {
        let subject = &self.subjects.as_slice()[index];
        let mut all = Vec::new();
        for p in &state.subjects[index].pages {
            p.walk(&mut all);
        }
        let known: HashMap<&str, &Page> = all
            .into_iter()
            .map(|p| (p.descriptor.digest.as_str(), p))
            .collect();
        let mut listing = Vec::with_capacity(top.len());
        let mut pages = Vec::new();
        let mut bad = Vec::new();
        let mut rest = Vec::new();
        for d in top {
            if !is_page(&d) {
                rest.push(d);
                continue;
            }
            match self.page_tree(subject, d.clone(), &known, 1).await {
                Ok(page) => {
                    listing.extend(page.records.iter().cloned());
                    pages.push(page);
                }
                Err(entry) => {
                    bad.push((d.digest.clone(), entry));
                    rest.push(d);
                }
            }
        }
        // pages first (the older records), then what the index lists directly
        listing.extend(rest);
        (listing, pages, bad)
    }

    /// Brings one subject's index up to date: resolve, list, validate what is new, apply the
    /// retention. A known digest that left the listing (or whose listing entry changed) drops
    /// the subject's index and revalidates everything listed, except, in tag-schema mode, a
    /// record of ours whose manifest is still stored: another tool's write of the referrers
    /// tag left it out, it stays a record (docs/design/evidence-store.md#concurrent-tag-writers).
    /// What changed outside the store since it last read or wrote is logged and kept as the
    /// subject's drift (docs/design/evidence-store.md#verification).
    /// Returns whether the replay state must be rebuilt.
    async fn refresh(&self, index: usize, state: &mut State) -> bool {
        let subject = &self.subjects.as_slice()[index];
        let listed = match self.descriptor(index).await {
            Ok(_) => self.list(index).await,
            Err(e) => Err(e),
        };
        let (mode, top) = match listed {
            Ok(listed) => listed,
            Err(e) => {
                state.subjects[index].error = Some(pacto_contract::error_chain(&e));
                return false;
            }
        };
        let (listing, pages, bad_pages) = if mode == ReferrersMode::TagSchema {
            self.expand(index, state, top).await
        } else {
            (top, Vec::new(), Vec::new())
        };
        let now: HashMap<&str, &ArtifactDescriptor> =
            listing.iter().map(|d| (d.digest.as_str(), d)).collect();
        // drift: what someone else added or took away since our last read or write
        let drift = {
            let current = &state.subjects[index];
            let added = now
                .keys()
                .filter(|d| !current.entries.contains_key(**d))
                .count();
            let removed = current
                .known()
                .filter(|d| !now.contains_key(d.digest.as_str()))
                .count();
            (current.loaded && (added > 0 || removed > 0)).then(|| Drift {
                subject: subject.clone(),
                added,
                removed,
            })
        };
        if let Some(d) = &drift {
            tracing::warn!(
                subject = %subject.reference(),
                added = d.added,
                removed = d.removed,
                "the subject's referrers changed outside this Evidence Server; resyncing its index"
            );
        }
        state.drift.retain(|d| &d.subject != subject);
        state.drift.extend(drift);
        let mut unlisted = Vec::new();
        if mode == ReferrersMode::TagSchema {
            let current = &state.subjects[index];
            let missing: Vec<ArtifactDescriptor> = current
                .known()
                .filter(|d| {
                    !now.contains_key(d.digest.as_str())
                        && matches!(current.entries.get(&d.digest), Some(Entry::Record(_)))
                })
                .cloned()
                .collect();
            for d in missing {
                match self
                    .client(subject)
                    .head_manifest(&subject.oci_repository(), &d.digest)
                    .await
                {
                    // deleted: it leaves the history
                    Err(e) if e.class() == ErrorClass::NotFound => {}
                    // still stored (or not known to be gone): still a record
                    _ => unlisted.push(d),
                }
            }
        }
        let mut rebuild = !self.options.incremental;
        {
            let kept: HashSet<&str> = unlisted.iter().map(|d| d.digest.as_str()).collect();
            for old in state.subjects[index].known() {
                match now.get(old.digest.as_str()) {
                    // content-addressed: how a registry presents the artifact type may differ
                    // from what we wrote, the digest and size may not
                    Some(new) if new.size == old.size => {}
                    None if kept.contains(old.digest.as_str()) => {}
                    _ => rebuild = true,
                }
            }
        }
        let s = &mut state.subjects[index];
        if rebuild {
            // content-addressed: the unlisted records stay validated
            let kept: Vec<(String, Entry)> = unlisted
                .iter()
                .filter_map(|d| s.entries.remove(&d.digest).map(|e| (d.digest.clone(), e)))
                .collect();
            s.entries.clear();
            s.entries.extend(kept);
        }
        for (digest, entry) in bad_pages {
            let known = matches!(
                s.entries.get(&digest),
                Some(Entry::Invalid {
                    transient: false,
                    ..
                })
            );
            if !known {
                s.entries.insert(digest, entry);
            }
        }
        s.unlisted = unlisted;
        s.pages = pages;
        let mut seen = HashSet::new();
        let mut fresh = 0usize;
        for listed in &listing {
            if !seen.insert(listed.digest.as_str()) {
                continue;
            }
            let s = &mut state.subjects[index];
            let known = !matches!(
                s.entries.get(&listed.digest),
                None | Some(Entry::Invalid {
                    transient: true,
                    ..
                })
            );
            if known {
                continue;
            }
            let entry = self.classify(subject, listed).await;
            let is_record = matches!(entry, Entry::Record(_));
            if let Entry::Record(r) = &entry
                && !rebuild
            {
                let e = &r.envelope;
                state.replay.record(&e.id, &e.producer.id, e.sequence);
            }
            state.subjects[index]
                .entries
                .insert(listed.digest.clone(), entry);
            if is_record {
                fresh += 1;
                if fresh.is_multiple_of(RETENTION_CHUNK) {
                    // bound what a long listing holds while it is read
                    state.expire(index, &self.options.retention);
                }
            }
        }
        let s = &mut state.subjects[index];
        s.listing = listing;
        s.error = None;
        s.loaded = true;
        if rebuild || fresh > 0 {
            s.kept = None;
        }
        state.expire(index, &self.options.retention);
        let s = &mut state.subjects[index];
        if mode == ReferrersMode::Api {
            // listing order: the oldest listed first
            s.to_delete = s
                .listing
                .iter()
                .filter(|d| matches!(s.entries.get(&d.digest), Some(Entry::Expired)))
                .map(|d| d.digest.clone())
                .collect();
        }
        s.invalid = s
            .known()
            .filter(|d| matches!(s.entries.get(&d.digest), Some(Entry::Invalid { .. })))
            .count();
        rebuild
    }

    fn rebuild_replay(state: &mut State) {
        let mut replay = ReplayIndex::new();
        for (producer, &sequence) in &state.floor {
            replay.record_sequence(producer, sequence);
        }
        for s in &state.subjects {
            for (_, r) in s.records() {
                let e = &r.envelope;
                replay.record(&e.id, &e.producer.id, e.sequence);
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

    /// One subject's invalid artifacts, in listing order.
    fn invalid(&self, state: &State, index: usize) -> Vec<InvalidArtifact> {
        let subject = &self.subjects.as_slice()[index];
        let s = &state.subjects[index];
        s.known()
            .filter_map(|listed| match s.entries.get(&listed.digest) {
                Some(Entry::Invalid { reason, .. }) => Some(InvalidArtifact {
                    subject: subject.clone(),
                    digest: listed.digest.clone(),
                    reason: reason.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    fn snapshot(&self, state: &State, requests: u64) -> Scan {
        let mut records = Vec::new();
        let mut invalid = Vec::new();
        let mut failed = Vec::new();
        let mut foreign = 0;
        let mut expired = 0;
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
            for listed in s.known() {
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
                    Some(Entry::Expired) => expired += 1,
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
            expired,
            modes,
            requests,
            drift: state.drift.clone(),
        }
    }

    /// The read path: every subject listed, new referrers validated, a snapshot of all valid
    /// records within the retention, invalid artifacts (with reasons) and failed subjects.
    /// Never fails: failures degrade the health. Writes nothing.
    pub async fn scan(&self) -> Scan {
        let mut state = self.state.lock().await;
        let before = self.requests();
        self.refresh_all(&mut state).await;
        state.verified_at = Some(Instant::now());
        self.snapshot(&state, self.requests() - before)
    }

    /// Drops the whole index and re-reads every listed referrer (what upstream does on every
    /// operation; also how a registry-side corruption of a known digest is found).
    pub async fn rescan(&self) -> Scan {
        let mut state = self.state.lock().await;
        for s in &mut state.subjects {
            s.entries.clear();
            s.listing.clear();
            s.unlisted.clear();
            s.pages.clear();
            s.loaded = false;
            s.kept = None;
        }
        let before = self.requests();
        self.refresh_all(&mut state).await;
        state.verified_at = Some(Instant::now());
        Self::rebuild_replay(&mut state);
        self.snapshot(&state, self.requests() - before)
    }

    /// Brings the index up to date for a commit to subject `index`
    /// (docs/design/evidence-store.md#verification): every subject is listed when the last
    /// listing is older than [`StoreOptions::verify_interval`] (or never happened, or the store
    /// is not incremental); otherwise only the record's subject, and only when its last read
    /// failed or found invalid artifacts (so that a fix is seen at once). Otherwise nothing:
    /// the store is its records' one writer and its index is what the registry holds.
    async fn verify_for_commit(&self, state: &mut State, index: usize) {
        let due = !self.options.incremental
            || state
                .verified_at
                .is_none_or(|at| at.elapsed() >= self.options.verify_interval);
        if due {
            self.refresh_all(state).await;
            state.verified_at = Some(Instant::now());
            return;
        }
        let s = &state.subjects[index];
        if (s.error.is_some() || s.invalid > 0 || !s.loaded) && self.refresh(index, state).await {
            Self::rebuild_replay(state);
        }
    }

    fn page_records(&self) -> usize {
        self.options.page_records.max(2)
    }

    /// Tag-schema mode: the index layout after adding `new` with `leaving` expired
    /// (docs/design/evidence-store.md#paged-tag-index): a page whose records all expired is
    /// dropped; a page with half or more expired is dissolved (its pages considered in its
    /// place, its own records listed directly again); every other kept record of ours and the
    /// new one are listed directly (the tail); then while the tail holds a page's worth its
    /// oldest become a page, and while a level holds a page's worth of pages its oldest become
    /// a page of the next level. Returns the pages and the new pages' bytes, and the tail.
    fn plan_pages(
        &self,
        s: &SubjectState,
        subject: &ArtifactDescriptor,
        new: &ArtifactDescriptor,
        leaving: &HashSet<String>,
    ) -> PagePlan {
        let kept = |d: &str| {
            d == new.digest
                || (matches!(s.entries.get(d), Some(Entry::Record(_))) && !leaving.contains(d))
        };
        let mut seen: HashSet<String> = HashSet::new();
        let mut pages = Vec::new();
        let mut tail = Vec::new();
        let mut todo: Vec<&Page> = s.pages.iter().rev().collect();
        while let Some(p) = todo.pop() {
            let live = p.records.iter().filter(|d| kept(&d.digest)).count();
            if live == 0 {
                continue;
            }
            if live * 2 <= p.records.len() {
                // its pages in its place (oldest first), its own records to the tail
                todo.extend(p.children.iter().rev());
                for d in p.direct.iter().filter(|d| kept(&d.digest)) {
                    if seen.insert(d.digest.clone()) {
                        tail.push(d.clone());
                    }
                }
                continue;
            }
            seen.extend(p.records.iter().map(|d| d.digest.clone()));
            pages.push(p.clone());
        }
        for d in s.known() {
            if !is_page(d) && kept(&d.digest) && seen.insert(d.digest.clone()) {
                tail.push(d.clone());
            }
        }
        if seen.insert(new.digest.clone()) {
            tail.push(new.clone());
        }
        let size = self.page_records();
        let mut pushed = Vec::new();
        while tail.len() >= size {
            let (page, bytes) = Page::new(subject, tail.drain(..size).collect());
            pushed.push((page.descriptor.digest.clone(), bytes));
            pages.push(page);
        }
        // merge a level's oldest pages while it holds a page's worth (levels bottom up)
        let mut level = 1;
        while pages.iter().any(|p| p.level() >= level) {
            let at: Vec<usize> = pages
                .iter()
                .enumerate()
                .filter(|(_, p)| p.level() == level)
                .map(|(i, _)| i)
                .take(size)
                .collect();
            if at.len() < size {
                level += 1;
                continue;
            }
            let first = at[0];
            let mut children = Vec::with_capacity(size);
            for &i in at.iter().rev() {
                children.push(pages.remove(i));
            }
            children.reverse();
            let (page, bytes) = Page::of_pages(subject, children);
            pushed.push((page.descriptor.digest.clone(), bytes));
            pages.insert(first, page);
        }
        // deepest first, as an independent reader would meet them
        pages.sort_by_key(|p| std::cmp::Reverse(p.level()));
        PagePlan {
            pages,
            pushed,
            tail,
        }
    }

    /// Commits a record (docs/design/evidence-store.md#commit): under the store's one lock,
    /// verify the index when due, refuse when the record's subject failed or holds an invalid
    /// artifact (fail-closed per subject), check replay, push the artifact untagged by digest
    /// (and, in tag-schema mode, push any new page and write the referrers index: the pages
    /// and records of ours that stay, expired ones left out, checked after the write), and
    /// delete expired records (Referrers API mode). Nothing of the index changes unless every
    /// write succeeded.
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
        self.verify_for_commit(&mut state, index).await;
        // fail-closed per subject: another subject's failure or invalid artifact does not
        // refuse this write (docs/design/evidence-store.md#commit)
        if let Some(error) = &state.subjects[index].error {
            return Err(CommitError::RegistryUnavailable {
                subjects: self.subjects.len(),
                failed: vec![(subject.reference(), error.clone())],
            });
        }
        if state.subjects[index].invalid > 0 {
            return Err(CommitError::RegistryIncomplete {
                subject: subject.reference(),
                invalid: self.invalid(&state, index),
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
        if let Err((step, e)) = self.push(&subject, &artifact).await {
            if e.is_unavailable() {
                // what a listing would have found: the subject is unreadable, and the next
                // commit to it lists it again (docs/design/evidence-store.md#verification)
                let message = pacto_contract::error_chain(&e);
                state.subjects[index].error = Some(message.clone());
                return Err(CommitError::RegistryUnavailable {
                    subjects: self.subjects.len(),
                    failed: vec![(subject.reference(), message)],
                });
            }
            return Err(CommitError::StoreDegraded {
                subject: subject.reference(),
                step,
                message: pacto_contract::error_chain(&e),
            });
        }
        // the retention with the new record in: what stays listed, what leaves (the index in
        // retention order is put back only once every write succeeded)
        let s = &mut state.subjects[index];
        let mut kept = s.kept.take().unwrap_or_else(|| Kept::build(&s.records()));
        let leaving = kept.add(&artifact.digest, record, &self.options.retention);
        let s = &state.subjects[index];
        let written = match mode {
            // the PUT of a manifest with a subject is what lists it: nothing to rewrite
            ReferrersMode::Api => None,
            ReferrersMode::TagSchema => {
                let PagePlan {
                    pages,
                    pushed,
                    tail,
                } = self.plan_pages(s, &descriptor, &artifact.descriptor(), &leaving);
                let client = self.client(&subject);
                let repo = subject.oci_repository();
                // in creation order: a page's pages exist before it (the registry checks)
                for (digest, bytes) in &pushed {
                    client
                        .put_manifest(&repo, digest, OCI_INDEX_MEDIA_TYPE, bytes)
                        .await
                        .map_err(|e| CommitError::StoreDegraded {
                            subject: subject.reference(),
                            step: "push page",
                            message: pacto_contract::error_chain(&e),
                        })?;
                }
                let want: Vec<ArtifactDescriptor> = pages
                    .iter()
                    .map(|p| p.descriptor.clone())
                    .chain(tail.iter().cloned())
                    .collect();
                // ours: every record and page of this store the index may list
                let ours: HashSet<String> = s
                    .entries
                    .iter()
                    .filter(|(_, e)| matches!(e, Entry::Record(_) | Entry::Expired))
                    .map(|(d, _)| d.clone())
                    .chain(s.pages.iter().map(|p| p.descriptor.digest.clone()))
                    .collect();
                // (pages under another page are never listed in the tag index by this store)
                let confirmed = self.write_tag_index(&subject, &want, &ours).await?;
                Some((pages, tail, confirmed))
            }
        };
        let s = &mut state.subjects[index];
        s.entries.insert(
            artifact.digest.clone(),
            Entry::Record(Arc::new(record.clone())),
        );
        state.replay.record(&e.id, &e.producer.id, e.sequence);
        let expired = state.drop_records(index, &leaving);
        let s = &mut state.subjects[index];
        s.kept = Some(kept);
        match written {
            None => {
                s.listing.push(artifact.descriptor());
                s.to_delete.extend(leaving);
            }
            Some((pages, tail, confirmed)) => {
                // the listing as a read would expand it: other tools' entries, our pages'
                // records, then the records listed directly
                let ours: HashSet<&str> = pages
                    .iter()
                    .map(|p| p.descriptor.digest.as_str())
                    .chain(tail.iter().map(|d| d.digest.as_str()))
                    .collect();
                let mut listing: Vec<ArtifactDescriptor> = confirmed
                    .into_iter()
                    .filter(|d| !ours.contains(d.digest.as_str()) && !is_page(d))
                    .collect();
                listing.extend(pages.iter().flat_map(|p| p.records.iter().cloned()));
                listing.extend(tail);
                let listed: HashSet<&str> = listing.iter().map(|d| d.digest.as_str()).collect();
                // expired records out of the index are forgotten; those still in a page stay
                // known (not read again)
                s.entries
                    .retain(|d, e| !matches!(e, Entry::Expired) || listed.contains(d.as_str()));
                s.listing = listing;
                s.pages = pages;
                s.unlisted.clear();
            }
        }
        let deleted = if mode == ReferrersMode::Api {
            self.delete_expired(index, &mut state).await
        } else {
            0
        };
        Ok(Committed {
            digest: artifact.digest,
            subject,
            mode,
            requests: self.requests() - before,
            expired,
            deleted,
        })
    }

    /// Pushes the empty config (skipped when the registry has it), the payload, then the
    /// manifest by digest, untagged.
    async fn push(
        &self,
        subject: &Subject,
        artifact: &Artifact,
    ) -> Result<(), (&'static str, OciError)> {
        let client = self.client(subject);
        let repo = subject.oci_repository();
        let degraded = |step: &'static str, e: OciError| (step, e);
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
        Ok(())
    }

    /// Tag-schema mode: writes the referrers index so that it lists every descriptor of `want`
    /// (our pages and the records of ours listed directly, in that order) and no other of
    /// `ours` (our expired or paged records, our dropped pages), keeping every other entry
    /// (other tools' referrers) as read, every field included, and the index's own fields,
    /// then reads it back. Another tool may have written the tag between our read and our
    /// write, or between our write and our check (the OCI 1.1 race; none of the registries
    /// tested honours `If-Match` on a manifest `PUT`,
    /// docs/design/evidence-store.md#concurrent-tag-writers): when a wanted descriptor is
    /// missing from what we read back, the read-merge-write is done again, up to
    /// [`MAX_INDEX_WRITES`] times. Returns the confirming listing (as written, pages not
    /// expanded).
    async fn write_tag_index(
        &self,
        subject: &Subject,
        want: &[ArtifactDescriptor],
        ours: &HashSet<String>,
    ) -> Result<Vec<ArtifactDescriptor>, CommitError> {
        let client = self.client(subject);
        let repo = subject.oci_repository();
        let tag = referrers_tag(subject.digest());
        let degraded = |step: &'static str, message: String| CommitError::StoreDegraded {
            subject: subject.reference(),
            step,
            message,
        };
        let (repo, tag_ref) = (&repo, &tag);
        let read = |step: &'static str| async move {
            match client.manifest(repo, tag_ref).await {
                Ok(m) => RawIndex::parse(&m.bytes).map_err(|reason| {
                    degraded(step, format!("the referrers tag {tag_ref}: {reason}"))
                }),
                Err(e) if e.class() == ErrorClass::NotFound => Ok(RawIndex::default()),
                Err(e) => Err(degraded(step, pacto_contract::error_chain(&e))),
            }
        };
        let wanted: HashSet<&str> = want.iter().map(|d| d.digest.as_str()).collect();
        let mut missing = 0;
        for _ in 0..MAX_INDEX_WRITES {
            let current = read("update referrers tag").await?;
            let mut seen: HashSet<&str> = HashSet::new();
            let mut entries: Vec<serde_json::Value> = current
                .entries
                .iter()
                .filter(|(d, _)| {
                    !ours.contains(&d.digest)
                        && !wanted.contains(d.digest.as_str())
                        && seen.insert(d.digest.as_str())
                })
                .map(|(_, v)| v.clone())
                .collect();
            let foreign = entries.len();
            entries.extend(want.iter().map(layout::entry));
            let unchanged = entries.len() == current.entries.len()
                && entries
                    .iter()
                    .zip(&current.entries)
                    .all(|(a, (_, b))| a == b);
            if !unchanged {
                let bytes = current.bytes_with(entries);
                if bytes.len() as u64 > MAX_TAG_INDEX_BYTES {
                    return Err(degraded(
                        "update referrers tag",
                        format!(
                            "the referrers index {tag} would be {} bytes ({} entries, {foreign} \
                             of them not this store's), over the {MAX_TAG_INDEX_BYTES} \
                             bytes a registry accepts for a manifest",
                            bytes.len(),
                            foreign + want.len()
                        ),
                    ));
                }
                client
                    .put_manifest(repo, &tag, OCI_INDEX_MEDIA_TYPE, &bytes)
                    .await
                    .map_err(|e| {
                        degraded("update referrers tag", pacto_contract::error_chain(&e))
                    })?;
            }
            let confirmed = read("confirm").await?;
            let listed: HashSet<&str> = confirmed
                .entries
                .iter()
                .map(|(d, _)| d.digest.as_str())
                .collect();
            missing = wanted.iter().filter(|d| !listed.contains(**d)).count();
            if missing == 0 {
                return Ok(confirmed.entries.into_iter().map(|(d, _)| d).collect());
            }
        }
        Err(degraded(
            "confirm",
            format!(
                "{missing} record(s) or page(s) of this store are still not listed in the \
                 referrers index {tag} after {MAX_INDEX_WRITES} writes: another tool keeps \
                 replacing it"
            ),
        ))
    }

    /// Referrers API mode: deletes up to [`MAX_DELETES_PER_COMMIT`] expired records (the only
    /// way to take a referrer out of the registry's listing). A refusal (deletes disabled, no
    /// delete right) stops deleting for this store; an unreachable registry is tried again
    /// by the next commit. Returns how many were deleted.
    async fn delete_expired(&self, index: usize, state: &mut State) -> usize {
        let subject = &self.subjects.as_slice()[index];
        let s = &mut state.subjects[index];
        if s.delete_refused.is_some() {
            return 0;
        }
        let mut deleted = 0;
        for _ in 0..MAX_DELETES_PER_COMMIT {
            let Some(digest) = s.to_delete.front().cloned() else {
                break;
            };
            if !matches!(s.entries.get(&digest), Some(Entry::Expired)) {
                // no longer an expired record of ours (a rescan, another writer)
                s.to_delete.pop_front();
                continue;
            }
            match self
                .client(subject)
                .delete_manifest(&subject.oci_repository(), &digest)
                .await
            {
                Ok(()) => deleted += 1,
                Err(e) if e.class() == ErrorClass::NotFound => {}
                Err(e) if e.class() == ErrorClass::Unreachable => break,
                Err(e) => {
                    s.delete_refused = Some(pacto_contract::error_chain(&e));
                    break;
                }
            }
            // gone from the listing by our own hand: not a reason to rebuild
            s.to_delete.pop_front();
            s.entries.remove(&digest);
            s.listing.retain(|d| d.digest != digest);
        }
        deleted
    }
}
