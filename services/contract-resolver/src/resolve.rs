//! Resolving: fetch (Secret, registry, caches) → validate (pure) → outcome.
//!
//! OCI flow for one reference (docs/design/contract.md#references-and-versions):
//!
//! * digest: the bundle cache is consulted first, so a cached digest costs no request at all;
//! * tag: one manifest HEAD gives the current digest (a force-pushed tag shows up as a new
//!   digest); the bundle comes from the cache when that digest was seen before;
//! * unversioned: the tag list (cached with a TTL) selects the highest semver tag, which is then
//!   handled like a tag.
//!
//! Bundles are always pulled as `<repository>@<digest>`, so content and identity come from one
//! observation.
//!
//! Every registry operation goes through [`Shared`] (docs/design/resolution.md#shared-resolves):
//! a request with a max age reuses a tag's digest answer younger than that, identical concurrent
//! operations share one round trip, and failures are remembered for `--failure-cache-ttl`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{counter, histogram};
use pacto_contract::ConfigurationOverride;
use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
use pacto_contract::codes;
use pacto_contract::model::Contract;
use pacto_contract::reference::Reference;
use pacto_contract::version::{Constraint, SelectError, Version, select_highest_tag};
use pacto_contract::{Finding, Layer, ValidateOptions, ValidationReport};
use pacto_contract::{MAX_POLICY_DEPTH, PolicyResolveError, PolicyResolver};
use pacto_oci::{Credentials, ErrorClass};
use pacto_runtime::memo::{DEFAULT_MEMO_ENTRIES, MAX_MEMO_DOCUMENT_BYTES, Memo, ParseMemo};
use sha2::{Digest as _, Sha256};

use crate::cache::{BundleKey, CredentialScope, DigestKey, Salt, TagsKey, TtlCache};
use crate::metrics::{CACHE_LOOKUPS_TOTAL, RESOLVE_SECONDS, RESOLVES_TOTAL, SECRET_READS_TOTAL};
use crate::outcome::{
    Class, ContractSource, ListInput, Outcome, ResolutionPolicy, ResolveError, ResolveInput,
    ResolvedContract,
};
use crate::registry::{RegistryAccess, RegistryError, RegistryOptions};
use crate::secrets::{SecretData, SecretReadError, SecretSource, credentials_from_secret};
use crate::shared::{Answer, Freshness, Shared};

/// Most tag → digest answers kept (each a few hundred bytes); they live `--bundle-cache-ttl`.
const DIGEST_ANSWERS: usize = 16 * 1024;

/// Tunables of the resolver.
#[derive(Debug, Clone)]
pub struct ResolverConfig {
    /// Registry access.
    pub registry: RegistryOptions,
    /// How long a pulled bundle (keyed by digest) is kept.
    pub bundle_ttl: Duration,
    /// Most bundles kept.
    pub bundle_capacity: usize,
    /// Most bytes of bundle files kept (file contents plus names).
    pub bundle_cache_bytes: u64,
    /// How long a tag list is kept.
    pub tags_ttl: Duration,
    /// Most tag lists kept.
    pub tags_capacity: usize,
    /// Most bytes of tags kept over all cached tag lists.
    pub tags_cache_bytes: u64,
    /// Largest inline contract, in bytes.
    pub max_inline_bytes: usize,
    /// Most policy bundles fetched for one contract (over all nesting levels).
    pub max_policy_fetches: usize,
    /// How long a registry failure is remembered and shared with requests whose max age allows
    /// it; zero disables (docs/design/resolution.md#shared-resolves).
    pub failure_ttl: Duration,
    /// Most validations (parses of a contract and its documents) at once, each on a blocking
    /// thread (docs/design/resolution.md#memory).
    pub max_concurrent_validations: usize,
}

impl Default for ResolverConfig {
    fn default() -> Self {
        Self {
            registry: RegistryOptions::default(),
            bundle_ttl: Duration::from_hours(1),
            bundle_capacity: 512,
            bundle_cache_bytes: 256 * 1024 * 1024,
            tags_ttl: Duration::from_mins(5),
            tags_capacity: 1024,
            tags_cache_bytes: 64 * 1024 * 1024,
            max_inline_bytes: 1024 * 1024,
            max_policy_fetches: 16,
            failure_ttl: Duration::from_secs(10),
            max_concurrent_validations: crate::budget::MAX_CONCURRENT_VALIDATIONS,
        }
    }
}

/// The current state of one tag (ListRevisions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagRevision {
    /// The tag.
    pub tag: String,
    /// `repo:tag` without scheme.
    pub resolved_ref: String,
    /// Current manifest digest (empty on error).
    pub digest: String,
    /// `service.version` at that digest (empty on error).
    pub version: String,
    /// SHA-256 hex of its pacto.yaml (empty on error).
    pub content_hash: String,
    /// `service.name` at that digest (empty on error).
    pub service_name: String,
    /// Why the tag could not be resolved (empty on success).
    pub error: String,
    /// Whether `error` is transient.
    pub transient: bool,
}

/// A pull Secret read for one request: used to derive per-registry credentials, then dropped.
struct Access<'a> {
    namespace: &'a str,
    secret: Option<(&'a str, SecretData)>,
    salt: Salt,
}

impl Access<'_> {
    fn for_registry(&self, registry: &str) -> Result<(CredentialScope, Credentials), ResolveError> {
        match &self.secret {
            None => Ok((CredentialScope::Anonymous, Credentials::Anonymous)),
            Some((name, data)) => {
                let credentials = credentials_from_secret(data, registry).map_err(|source| {
                    ResolveError::SecretContent {
                        name: (*name).to_owned(),
                        source,
                    }
                })?;
                let scope =
                    CredentialScope::for_secret(self.namespace, name, &credentials, self.salt);
                Ok((scope, credentials))
            }
        }
    }

    fn secret_name(&self) -> Option<&str> {
        self.secret.as_ref().map(|(n, _)| *n)
    }
}

/// A pulled bundle as the resolver keeps it (docs/design/resolution.md#memory): the layer is
/// gone, and when `pacto.yaml` parsed, only the files its contract can read are left.
#[derive(Clone)]
pub(crate) struct Pulled {
    files: Arc<BundleFiles>,
    /// Whether `pacto.yaml` parsed within the limits: only such a bundle is cached.
    parsed: bool,
}

/// A fetched bundle and where it came from.
struct Fetched {
    reference: Reference,
    digest: String,
    files: Arc<BundleFiles>,
}

/// Policy bundles fetched ahead of validation (the contract crate's resolver is synchronous).
#[derive(Default)]
struct PolicyBundles {
    fetched: HashMap<String, PolicyFetch>,
    /// (top-level policy index, ref, reason) of refs that could not be resolved from OCI.
    unresolvable: Vec<(usize, String, String)>,
}

enum PolicyFetch {
    /// The bundle at `digest`.
    Files {
        digest: String,
        files: Arc<BundleFiles>,
    },
    /// Not resolvable from OCI with the Pacto's credentials: skipped with a warning.
    Unresolvable,
    /// Fetched (or addressed) but unusable: fail closed.
    Broken(String),
}

/// A stand-in for an unresolvable policy: an always-true schema, so the contract crate enforces
/// nothing for it; the resolver reports it as `POLICY_REF_NOT_ENFORCED` instead.
fn permissive_policy() -> BundleFiles {
    let mut files = BundleFiles::new();
    files.insert(pacto_contract::FALLBACK_POLICY_SCHEMA, b"{}".to_vec());
    files
}

impl PolicyResolver for PolicyBundles {
    fn resolve(&self, reference: &str) -> Result<BundleFiles, PolicyResolveError> {
        match self.fetched.get(reference) {
            Some(PolicyFetch::Files { files, .. }) => Ok((**files).clone()),
            Some(PolicyFetch::Unresolvable) => Ok(permissive_policy()),
            Some(PolicyFetch::Broken(reason)) => Err(PolicyResolveError::Fetch {
                reference: reference.to_owned(),
                source: reason.clone().into(),
            }),
            None => Err(PolicyResolveError::NotFound {
                reference: reference.to_owned(),
            }),
        }
    }
}

/// Everything a validation reads (docs/design/resolution.md#validation-memo): the contract
/// (a bundle by its manifest digest, which fixes its files; an inline document by its bytes),
/// the overrides, and each policy bundle as prefetched (by digest, or why it could not be had).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ValidationKey {
    contract: ContractIdentity,
    overrides: Vec<ConfigurationOverride>,
    /// By reference, in reference order.
    policies: Vec<(String, PolicyIdentity)>,
    /// (top-level policy index, ref, reason), in the order the prefetch met them.
    unresolvable: Vec<(usize, String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ContractIdentity {
    Bundle { digest: String },
    Inline(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PolicyIdentity {
    Bundle { digest: String },
    Unresolvable,
    Broken(String),
}

impl ValidationKey {
    fn new(
        contract: ContractIdentity,
        overrides: &[ConfigurationOverride],
        policies: &PolicyBundles,
    ) -> Self {
        let mut by_ref: Vec<(String, PolicyIdentity)> = policies
            .fetched
            .iter()
            .map(|(reference, fetch)| {
                let identity = match fetch {
                    PolicyFetch::Files { digest, .. } => PolicyIdentity::Bundle {
                        digest: digest.clone(),
                    },
                    PolicyFetch::Unresolvable => PolicyIdentity::Unresolvable,
                    PolicyFetch::Broken(reason) => PolicyIdentity::Broken(reason.clone()),
                };
                (reference.clone(), identity)
            })
            .collect();
        by_ref.sort_by(|a, b| a.0.cmp(&b.0));
        Self {
            contract,
            overrides: overrides.to_vec(),
            policies: by_ref,
            unresolvable: policies.unresolvable.clone(),
        }
    }
}

/// The outcome of the pure validation step.
struct Validated {
    report: ValidationReport,
    effective_yaml: Vec<u8>,
    schemas: BTreeMap<String, Vec<u8>>,
}

/// Validates a bundle (pure): overrides on the raw document and the model, the three layers
/// (with pre-fetched policy bundles for OCI contracts), then the effective YAML and the
/// configuration schemas.
fn validate_contract(
    files: &BundleFiles,
    inline: bool,
    overrides: &[ConfigurationOverride],
    policies: Option<&PolicyBundles>,
) -> Result<Validated, ResolveError> {
    let options = ValidateOptions {
        policy_resolver: policies.map(|p| p as &dyn PolicyResolver),
        inline,
    };
    let outcome = pacto_contract::validate_bundle_with_overrides(files, overrides, &options)
        .map_err(|source| ResolveError::Override { source })?;
    let mut report = outcome.report;
    let earlier_errors = report.errors.iter().any(|f| f.layer != Layer::Policy);
    if let Some(policies) = policies
        && !earlier_errors
    {
        for (index, reference, reason) in &policies.unresolvable {
            report.push(Finding::new(
                codes::POLICY_REF_NOT_ENFORCED,
                format!("policies[{index}].ref"),
                format!(
                    "policy ref {reference:?} was not enforced: it could not be resolved from \
                     OCI with the Pacto's credentials ({reason})"
                ),
                Layer::Policy,
            ));
        }
    }
    if !report.is_valid() {
        if inline
            && let Some(parse) = report
                .errors
                .iter()
                .find(|f| f.code == codes::YAML_PARSE_ERROR)
        {
            return Err(ResolveError::InlineParse {
                message: parse.message.clone(),
                report,
            }
            .locate_document(inline));
        }
        return Err(ResolveError::validation(report).locate_document(inline));
    }
    let raw = files.contract().unwrap_or_default();
    let effective_yaml = match (&outcome.raw, overrides.is_empty()) {
        (Some(value), false) => serde_norway::to_string(value)
            .map(String::into_bytes)
            .map_err(|source| ResolveError::Override {
                source: pacto_contract::OverrideError::Serialize { source },
            })?,
        _ => raw.to_vec(),
    };
    // docs/design/resolution.md#what-a-resolve-returns: `schema` is read first as a bundle-relative file (bundles only), then
    // as inline JSON; a configuration with a `ref` has no local schema.
    let mut schemas = BTreeMap::new();
    if let Some(contract) = &outcome.contract {
        for configuration in &contract.configurations {
            let Some(schema) = configuration
                .schema
                .as_deref()
                .filter(|s| !s.trim().is_empty())
            else {
                continue;
            };
            if configuration.reference.is_some() {
                continue;
            }
            let from_bundle = (!inline)
                .then(|| pacto_contract::bundle::read_file(files, schema))
                .flatten();
            if let Some(bytes) = from_bundle {
                schemas.insert(configuration.name.clone(), bytes.to_vec());
            } else if serde_json::from_str::<serde_json::Value>(schema)
                .is_ok_and(|v| v.is_object() || v.is_boolean())
            {
                schemas.insert(configuration.name.clone(), schema.as_bytes().to_vec());
            }
        }
    }
    Ok(Validated {
        report,
        effective_yaml,
        schemas,
    })
}

/// SHA-256 hex of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Sorts tag revisions by semver, highest first; non-semver tags last, by name.
fn sort_revisions(revisions: &mut [TagRevision]) {
    revisions.sort_by(
        |a, b| match (Version::parse(&a.tag).ok(), Version::parse(&b.tag).ok()) {
            (Some(x), Some(y)) => y.cmp(&x).then_with(|| a.tag.cmp(&b.tag)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.tag.cmp(&b.tag),
        },
    );
}

/// What a remembered failure weighs.
const FAILURE_WEIGHT: u64 = 512;

/// What a cached bundle weighs: the memory it holds (buffers' capacity, names, entries).
fn bundle_weight(answer: &Answer<Pulled>) -> u64 {
    match answer {
        Ok(pulled) => pulled.files.held_bytes(),
        Err(_) => FAILURE_WEIGHT,
    }
}

/// Only a bundle whose `pacto.yaml` parsed is cached (failures are, briefly).
fn bundle_cacheable(answer: &Answer<Pulled>) -> bool {
    answer.as_ref().is_ok_and(|p| p.parsed)
}

/// Keeps the files of `files` that validation and the answer can read (after extraction, the
/// rest is dropped), when `pacto.yaml` parses within the limits; else only `pacto.yaml`.
fn vet(mut files: BundleFiles) -> Pulled {
    let contract = files.contract().map(pacto_contract::parse_contract);
    let (keep, parsed) = match contract {
        Some(Ok((_, contract))) => (pacto_contract::bundle::files_used_by(&contract), true),
        // The YAML parsed, the typed model did not: validation reports why from `pacto.yaml`.
        Some(Err(pacto_contract::ParseError::Model { .. })) => {
            (std::iter::once(CONTRACT_FILE.to_owned()).collect(), true)
        }
        _ => (std::iter::once(CONTRACT_FILE.to_owned()).collect(), false),
    };
    files.retain_paths(&keep);
    Pulled {
        files: Arc::new(files),
        parsed,
    }
}

/// What a cached tag list weighs: its tags plus a per-tag overhead.
fn tags_weight(answer: &Answer<Arc<Vec<String>>>) -> u64 {
    match answer {
        Ok(tags) => tags.iter().map(|t| (t.len() + 24) as u64).sum(),
        Err(_) => FAILURE_WEIGHT,
    }
}

/// The contract resolver: holds the registry edge, the Secret source and the caches.
pub struct Resolver {
    config: ResolverConfig,
    registry: RegistryAccess,
    secrets: Option<Arc<dyn SecretSource>>,
    bundles: Shared<BundleKey, Pulled>,
    tags: Shared<TagsKey, Arc<Vec<String>>>,
    digests: Shared<DigestKey, String>,
    salt: Salt,
    /// Slots for validations and parses (docs/design/resolution.md#memory).
    validations: Arc<tokio::sync::Semaphore>,
    /// Turns of the requests that hold bundles (from their fetch to the end of their validation),
    /// as many as pulls and validations together (docs/design/resolution.md#memory).
    turns: tokio::sync::Semaphore,
    /// The contracts of pulled bundles, parsed once per document, for their policies.
    contracts: ParseMemo<Contract>,
    /// Successful validations by what they read (docs/design/resolution.md#validation-memo).
    validated: Memo<ValidationKey, Validated>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("config", &self.config)
            .field("kubernetes", &self.secrets.is_some())
            .finish_non_exhaustive()
    }
}

impl Resolver {
    /// A resolver reading pull Secrets from `secrets` (`None`: no Kubernetes access, so any
    /// pull Secret is Unavailable).
    pub fn new(
        config: ResolverConfig,
        secrets: Option<Arc<dyn SecretSource>>,
    ) -> Result<Self, RegistryError> {
        Ok(Self {
            registry: RegistryAccess::new(config.registry.clone())?,
            bundles: Shared::new(
                "bundle",
                "bundle_pull",
                TtlCache::new(config.bundle_ttl, config.bundle_capacity)
                    .with_max_bytes(config.bundle_cache_bytes, bundle_weight),
            )
            .with_keep(bundle_cacheable),
            tags: Shared::new(
                "tags",
                "tags_list",
                TtlCache::new(config.tags_ttl, config.tags_capacity)
                    .with_max_bytes(config.tags_cache_bytes, tags_weight),
            ),
            digests: Shared::new(
                "digest",
                "manifest_head",
                TtlCache::new(config.bundle_ttl, DIGEST_ANSWERS),
            ),
            secrets,
            salt: Salt::random(),
            validations: Arc::new(tokio::sync::Semaphore::new(
                config.max_concurrent_validations.max(1),
            )),
            turns: tokio::sync::Semaphore::new(
                config.max_concurrent_validations.max(1)
                    + config.registry.max_concurrent_pulls.max(1),
            ),
            contracts: ParseMemo::labelled(DEFAULT_MEMO_ENTRIES, CACHE_LOOKUPS_TOTAL, "contract"),
            validated: Memo::new(
                DEFAULT_MEMO_ENTRIES,
                CACHE_LOOKUPS_TOTAL,
                Some("validation"),
            ),
            config,
        })
    }

    /// Runs `work` on a blocking thread once a validation slot is free, holding the slot until
    /// it returns (also when the request that waits for it goes away).
    async fn blocking<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        // A closed semaphore cannot happen (it is never closed); run without a slot then.
        let slot = Arc::clone(&self.validations).acquire_owned().await.ok();
        match tokio::task::spawn_blocking(move || {
            let _slot = slot;
            work()
        })
        .await
        {
            Ok(value) => value,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Cancelled: the runtime is shutting down, and this request with it.
                Err(_) => std::future::pending().await,
            },
        }
    }

    /// The validation `key` describes: the kept one, or `work`'s (run on a blocking thread with
    /// the key's overrides), kept when it succeeded and is not oversized
    /// (docs/design/resolution.md#validation-memo).
    async fn validate(
        &self,
        key: ValidationKey,
        work: impl FnOnce(&[ConfigurationOverride]) -> Result<Validated, ResolveError> + Send + 'static,
    ) -> Result<Arc<Validated>, ResolveError> {
        if let Some(hit) = self.validated.get(&key) {
            return Ok(hit);
        }
        let overrides = key.overrides.clone();
        let validated = Arc::new(self.blocking(move || work(&overrides)).await?);
        let kept_bytes = validated.effective_yaml.len()
            + validated.schemas.values().map(Vec::len).sum::<usize>();
        if kept_bytes <= MAX_MEMO_DOCUMENT_BYTES {
            self.validated.insert(key, Arc::clone(&validated));
        }
        Ok(validated)
    }

    /// What a request with `max_age` accepts of a shared answer whose successes stay valid for
    /// `ok` (docs/design/resolution.md#shared-resolves): failures at most `--failure-cache-ttl`.
    fn freshness(&self, ok: Duration, max_age: Duration) -> Freshness {
        Freshness {
            ok,
            failure: max_age.min(self.config.failure_ttl),
        }
    }

    async fn access<'a>(
        &self,
        namespace: &'a str,
        pull_secret: Option<&'a str>,
    ) -> Result<Access<'a>, ResolveError> {
        let secret = match pull_secret {
            None => None,
            Some(name) => {
                let read = match &self.secrets {
                    None => Err(SecretReadError::NoKubernetes),
                    Some(source) => source.get(namespace, name).await,
                };
                let result = if read.is_ok() { "ok" } else { "error" };
                counter!(SECRET_READS_TOTAL, "result" => result).increment(1);
                let data = read.map_err(|source| ResolveError::SecretRead {
                    name: name.to_owned(),
                    source,
                })?;
                Some((name, data))
            }
        };
        Ok(Access {
            namespace,
            secret,
            salt: self.salt,
        })
    }

    /// Resolves one request. Never fails: every failure is an Invalid or Unavailable outcome.
    pub async fn resolve(&self, input: &ResolveInput) -> Outcome {
        let start = Instant::now();
        let outcome = self.resolve_inner(input).await;
        let label = outcome.label();
        counter!(RESOLVES_TOTAL, "source" => input.source.label(), "outcome" => label).increment(1);
        histogram!(RESOLVE_SECONDS, "outcome" => label).record(start.elapsed().as_secs_f64());
        match &outcome {
            Outcome::Resolved(r) => tracing::debug!(
                namespace = %input.namespace, pacto = %input.pacto_name,
                resolved_ref = %r.resolved_ref, digest = %r.digest, "contract resolved"
            ),
            Outcome::Invalid { message, .. } => tracing::info!(
                namespace = %input.namespace, pacto = %input.pacto_name, %message, "contract invalid"
            ),
            Outcome::Unavailable { reason, .. } => tracing::info!(
                namespace = %input.namespace, pacto = %input.pacto_name, %reason, "contract unavailable"
            ),
        }
        outcome
    }

    async fn resolve_inner(&self, input: &ResolveInput) -> Outcome {
        // A closed semaphore cannot happen (it is never closed); go on without a turn then.
        let _turn = self.turns.acquire().await.ok();
        match &input.source {
            ContractSource::None => ResolveError::NoSource.into_outcome(ResolutionPolicy::None),
            ContractSource::Inline(yaml) => match self.resolve_inline(yaml, &input.overrides).await
            {
                Ok(resolved) => Outcome::Resolved(Box::new(resolved)),
                Err(e) => e.into_outcome(ResolutionPolicy::None),
            },
            ContractSource::Oci(text) => {
                let reference = match Reference::parse_url_encoded(text) {
                    Ok(r) => r,
                    Err(source) => {
                        return ResolveError::Reference {
                            input: text.clone(),
                            source,
                        }
                        .into_outcome(ResolutionPolicy::None);
                    }
                };
                let policy = ResolutionPolicy::of(&reference);
                match self.resolve_oci(input, &reference, policy).await {
                    Ok(resolved) => Outcome::Resolved(Box::new(resolved)),
                    Err(e) => e.into_outcome(policy),
                }
            }
        }
    }

    async fn resolve_inline(
        &self,
        yaml: &str,
        overrides: &[ConfigurationOverride],
    ) -> Result<ResolvedContract, ResolveError> {
        if yaml.len() > self.config.max_inline_bytes {
            return Err(ResolveError::InlineTooLarge {
                size: yaml.len(),
                limit: self.config.max_inline_bytes,
            });
        }
        let key = ValidationKey::new(
            ContractIdentity::Inline(yaml.as_bytes().to_vec()),
            overrides,
            &PolicyBundles::default(),
        );
        let mut files = BundleFiles::new();
        files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
        let validated = self
            .validate(key, move |overrides| {
                validate_contract(&files, true, overrides, None)
            })
            .await?;
        Ok(ResolvedContract {
            effective_yaml: validated.effective_yaml.clone(),
            raw_yaml: yaml.as_bytes().to_vec(),
            content_hash: sha256_hex(yaml.as_bytes()),
            resolved_ref: String::new(),
            digest: String::new(),
            policy: ResolutionPolicy::None,
            report: validated.report.clone(),
            configuration_schemas: validated.schemas.clone(),
        })
    }

    async fn resolve_oci(
        &self,
        input: &ResolveInput,
        reference: &Reference,
        policy: ResolutionPolicy,
    ) -> Result<ResolvedContract, ResolveError> {
        let access = self
            .access(&input.namespace, input.pull_secret.as_deref())
            .await?;
        let fetched = self
            .fetch(&access, reference, input.constraint.as_ref(), input.max_age)
            .await?;
        let raw = fetched
            .files
            .contract()
            .ok_or_else(|| ResolveError::MissingContract {
                reference: fetched.reference.to_string(),
            })?
            .to_vec();
        let contract = if let Some(contract) = self.contracts.get(&raw) {
            Some(contract)
        } else {
            let document = raw.clone();
            let parsed = self
                .blocking(move || pacto_contract::parse_contract(&document).ok())
                .await
                .map(|(_, contract)| Arc::new(contract));
            if let Some(contract) = &parsed {
                self.contracts.insert(&raw, Arc::clone(contract));
            }
            parsed
        };
        // Without a parse, validation reports the parse error.
        let policies = if let Some(contract) = contract {
            self.prefetch_policies(&access, &contract, input.max_age)
                .await
        } else {
            PolicyBundles::default()
        };
        let key = ValidationKey::new(
            ContractIdentity::Bundle {
                digest: fetched.digest.clone(),
            },
            &input.overrides,
            &policies,
        );
        let files = Arc::clone(&fetched.files);
        let validated = self
            .validate(key, move |overrides| {
                validate_contract(&files, false, overrides, Some(&policies))
            })
            .await?;
        Ok(ResolvedContract {
            effective_yaml: validated.effective_yaml.clone(),
            content_hash: sha256_hex(&raw),
            raw_yaml: raw,
            resolved_ref: fetched.reference.to_string(),
            digest: fetched.digest,
            policy,
            report: validated.report.clone(),
            configuration_schemas: validated.schemas.clone(),
        })
    }

    /// Resolves a reference to a digest and its bundle, using the shared answers no older than
    /// `max_age`.
    async fn fetch(
        &self,
        access: &Access<'_>,
        reference: &Reference,
        constraint: Option<&Constraint>,
        max_age: Duration,
    ) -> Result<Fetched, ResolveError> {
        let (scope, credentials) = access.for_registry(reference.registry())?;
        let secret = access.secret_name();
        let wrap = |e: Arc<RegistryError>, r: &Reference| ResolveError::registry(e, r, secret);
        let (resolved, digest) = if let Some(digest) = reference.digest() {
            (reference.clone(), digest.to_owned())
        } else if reference.tag().is_some() {
            let digest = self
                .digest(&scope, &credentials, reference, max_age)
                .await
                .map_err(|e| wrap(e, reference))?;
            (reference.clone(), digest)
        } else {
            let tags = self
                .tags(&scope, &credentials, reference, secret, max_age)
                .await?;
            let tag =
                select_highest_tag(tags.iter().map(String::as_str), constraint).map_err(|e| {
                    let repository = reference.repository_url();
                    let seen = if tags.is_empty() {
                        "none".to_owned()
                    } else {
                        tags.iter().take(20).cloned().collect::<Vec<_>>().join(", ")
                    };
                    match e {
                        SelectError::NoSemverTags => ResolveError::NoSemverTags {
                            repository,
                            tags: seen,
                        },
                        other @ SelectError::NoMatchingVersion { .. } => ResolveError::NoVersion {
                            repository,
                            reason: other.to_string(),
                            tags: seen,
                        },
                    }
                })?;
            let tagged = reference
                .with_tag(tag)
                .map_err(|source| ResolveError::Reference {
                    input: reference.to_string(),
                    source,
                })?;
            let digest = self
                .digest(&scope, &credentials, &tagged, max_age)
                .await
                .map_err(|e| wrap(e, &tagged))?;
            (tagged, digest)
        };
        let files = self
            .bundle(&scope, &credentials, reference, &digest, max_age)
            .await
            .map_err(|e| wrap(e, &resolved))?;
        Ok(Fetched {
            reference: resolved,
            digest,
            files,
        })
    }

    /// The repository's tags: a tag list lives `--tags-cache-ttl` whatever the request's max age.
    async fn tags(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
        reference: &Reference,
        secret: Option<&str>,
        max_age: Duration,
    ) -> Result<Arc<Vec<String>>, ResolveError> {
        let key = TagsKey {
            scope: scope.clone(),
            repository: reference.repository_url(),
        };
        let accept = self.freshness(Duration::MAX, max_age);
        self.tags
            .get(&key, accept, || async {
                Ok(Arc::new(
                    self.registry
                        .list_tags(scope, credentials, reference)
                        .await?,
                ))
            })
            .await
            .map_err(|e| ResolveError::registry(e, &reference.without_version(), secret))
    }

    /// The digest a tag points at: a shared answer younger than `max_age`, else one HEAD (shared
    /// with identical requests in flight).
    async fn digest(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
        tagged: &Reference,
        max_age: Duration,
    ) -> Answer<String> {
        let key = DigestKey {
            scope: scope.clone(),
            repository: tagged.repository_url(),
            tag: tagged.tag().unwrap_or_default().to_owned(),
        };
        let accept = self.freshness(max_age, max_age);
        self.digests
            .get(&key, accept, || {
                self.registry.head_digest(scope, credentials, tagged)
            })
            .await
    }

    /// The bundle at a digest: cached while it lives (content-addressed), else one pull shared
    /// with identical requests in flight.
    async fn bundle(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
        reference: &Reference,
        digest: &str,
        max_age: Duration,
    ) -> Answer<Arc<BundleFiles>> {
        let key = BundleKey {
            scope: scope.clone(),
            repository: reference.repository_url(),
            digest: digest.to_owned(),
        };
        let accept = self.freshness(Duration::MAX, max_age);
        self.bundles
            .get(&key, accept, || async {
                let pinned = reference
                    .with_digest(digest)
                    .map_err(|e| RegistryError::Oci(e.into()))?;
                // One slot from the pull until only the kept files are left
                // (docs/design/resolution.md#memory).
                let _slot = self.registry.pull_slot().await;
                let pulled = self.registry.pull(scope, credentials, &pinned).await?;
                let files = pulled.files;
                drop(pulled.layer);
                Ok(self.blocking(move || vet(files)).await)
            })
            .await
            .map(|pulled| pulled.files)
    }

    /// Fetches the bundles of `ref` policies (recursively, bounded) with the Pacto's credentials.
    async fn prefetch_policies(
        &self,
        access: &Access<'_>,
        contract: &Contract,
        max_age: Duration,
    ) -> PolicyBundles {
        let mut bundles = PolicyBundles::default();
        let mut queue: VecDeque<(usize, String, usize)> = contract
            .policies
            .iter()
            .enumerate()
            .filter(|(_, p)| p.schema.is_none())
            .filter_map(|(i, p)| p.reference.clone().map(|r| (i, r, 0)))
            .collect();
        let mut fetches = 0;
        while let Some((index, reference, depth)) = queue.pop_front() {
            if let Some(existing) = bundles.fetched.get(&reference) {
                if matches!(existing, PolicyFetch::Unresolvable)
                    && !bundles
                        .unresolvable
                        .iter()
                        .any(|(i, r, _)| *i == index && *r == reference)
                {
                    let reason = "see the first report of this ref".to_owned();
                    bundles.unresolvable.push((index, reference, reason));
                }
                continue;
            }
            let fetched = if !reference.starts_with(pacto_contract::reference::OCI_SCHEME) {
                Err((
                    Class::Unavailable,
                    "only oci:// policy references can be fetched by the operator".to_owned(),
                ))
            } else if fetches >= self.config.max_policy_fetches {
                Err((
                    Class::Invalid,
                    format!(
                        "more than {} policy bundles",
                        self.config.max_policy_fetches
                    ),
                ))
            } else {
                fetches += 1;
                match Reference::parse_oci(&reference) {
                    Err(e) => Err((Class::Invalid, e.to_string())),
                    Ok(r) => self
                        .fetch(access, &r, None, max_age)
                        .await
                        .map_err(|e| (e.class(), e.message())),
                }
            };
            let entry = match fetched {
                Ok(fetched) => {
                    if depth + 1 < MAX_POLICY_DEPTH
                        && let Some(Ok((_, nested))) =
                            fetched.files.contract().map(pacto_contract::parse_contract)
                    {
                        for policy in nested.policies.iter().filter(|p| p.schema.is_none()) {
                            if let Some(r) = &policy.reference {
                                queue.push_back((index, r.clone(), depth + 1));
                            }
                        }
                    }
                    PolicyFetch::Files {
                        digest: fetched.digest,
                        files: fetched.files,
                    }
                }
                Err((Class::Unavailable, reason)) => {
                    bundles
                        .unresolvable
                        .push((index, reference.clone(), reason));
                    PolicyFetch::Unresolvable
                }
                Err((Class::Invalid, reason)) => PolicyFetch::Broken(reason),
            };
            bundles.fetched.insert(reference, entry);
        }
        bundles
    }

    /// ListRevisions: the current digest, version and content hash of tags of the repository.
    pub async fn list_revisions(
        &self,
        input: &ListInput,
    ) -> Result<Vec<TagRevision>, ResolveError> {
        let reference =
            Reference::parse_url_encoded(&input.oci).map_err(|source| ResolveError::Reference {
                input: input.oci.clone(),
                source,
            })?;
        let base = reference.without_version();
        let _turn = self.turns.acquire().await.ok();
        let access = self
            .access(&input.namespace, input.pull_secret.as_deref())
            .await?;
        let (scope, credentials) = access.for_registry(base.registry())?;
        let secret = access.secret_name();
        let tags: Vec<String> = if input.tags.is_empty() {
            self.tags(&scope, &credentials, &base, secret, input.max_age)
                .await?
                .iter()
                .filter(|t| Version::parse(t).is_ok())
                .cloned()
                .collect()
        } else {
            input.tags.clone()
        };
        let mut out = Vec::with_capacity(tags.len());
        for tag in tags {
            let mut revision = TagRevision {
                resolved_ref: format!("{}:{tag}", base.repository_url()),
                tag: tag.clone(),
                digest: String::new(),
                version: String::new(),
                content_hash: String::new(),
                service_name: String::new(),
                error: String::new(),
                transient: false,
            };
            let tagged = match base.with_tag(&tag) {
                Ok(t) => t,
                Err(e) => {
                    revision.error = e.to_string();
                    out.push(revision);
                    continue;
                }
            };
            // A shared answer younger than the request's max age, else asked of the registry,
            // which also refreshes the shared answer the Pactos of this tag read
            // (docs/design/resolution.md#shared-resolves).
            let result = async {
                let digest = self
                    .digest(&scope, &credentials, &tagged, input.max_age)
                    .await?;
                let files = self
                    .bundle(&scope, &credentials, &base, &digest, input.max_age)
                    .await?;
                Ok::<_, Arc<RegistryError>>((digest, files))
            }
            .await;
            match result {
                Ok((digest, files)) => {
                    let raw = files.contract().unwrap_or_default();
                    revision.digest = digest;
                    revision.content_hash = sha256_hex(raw);
                    let parsed = {
                        let raw = raw.to_vec();
                        self.blocking(move || pacto_contract::parse_contract(&raw).ok())
                            .await
                    };
                    if let Some((_, contract)) = parsed {
                        revision.version = contract.service.version;
                        revision.service_name = contract.service.name;
                    }
                    if raw.is_empty() {
                        revision.error = format!(
                            "{tagged}: not a valid Pacto bundle: pacto.yaml missing at the bundle root"
                        );
                    }
                }
                Err(e) => {
                    let class = e.class();
                    let wrapped = ResolveError::registry(e, &tagged, secret);
                    revision.transient = matches!(wrapped.class(), Class::Unavailable)
                        && class != ErrorClass::Client;
                    revision.error = wrapped.message();
                }
            }
            out.push(revision);
        }
        sort_revisions(&mut out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\n";

    #[test]
    fn inline_validation_and_overrides() {
        let mut files = BundleFiles::new();
        files.insert(CONTRACT_FILE, VALID.as_bytes().to_vec());
        let ok = validate_contract(&files, true, &[], None).expect("valid");
        assert_eq!(ok.effective_yaml, VALID.as_bytes());
        let err = validate_contract(
            &files,
            true,
            &[ConfigurationOverride {
                name: "db".into(),
                values: [("a".to_owned(), "b".to_owned())].into(),
            }],
            None,
        )
        .err()
        .expect("unknown configuration");
        assert_eq!(err.class(), Class::Invalid);
        assert!(err.message().starts_with("override error: "), "{err}");

        let mut bad = BundleFiles::new();
        bad.insert(CONTRACT_FILE, b"service: [unclosed".to_vec());
        let err = validate_contract(&bad, true, &[], None)
            .err()
            .expect("parse error");
        assert!(
            err.to_string()
                .starts_with("failed to parse inline contract:"),
            "{err}"
        );
    }

    fn inline(yaml: &str, overrides: Vec<ConfigurationOverride>) -> ResolveInput {
        ResolveInput {
            namespace: "ns".into(),
            pacto_name: "p".into(),
            source: ContractSource::Inline(yaml.into()),
            pull_secret: None,
            overrides,
            constraint: None,
            max_age: Duration::ZERO,
        }
    }

    #[tokio::test]
    async fn a_validation_is_kept_by_what_it_reads_and_an_invalid_one_is_not() {
        let resolver = Resolver::new(ResolverConfig::default(), None).unwrap();
        let first = resolver.resolve(&inline(VALID, vec![])).await;
        let again = resolver.resolve(&inline(VALID, vec![])).await;
        assert!(matches!(first, Outcome::Resolved(_)), "{first:?}");
        assert_eq!(format!("{first:?}"), format!("{again:?}"));
        assert_eq!(resolver.validated.len(), 1);

        // Another document is another key.
        let other = VALID.replace("1.0.0", "1.0.1");
        let Outcome::Resolved(resolved) = resolver.resolve(&inline(&other, vec![])).await else {
            panic!("the other document resolves");
        };
        assert_eq!(resolved.effective_yaml, other.as_bytes());
        assert_eq!(resolver.validated.len(), 2);

        // Other overrides are another key; an Invalid outcome is not kept and is the same again.
        let unknown = vec![ConfigurationOverride {
            name: "db".into(),
            values: [("a".to_owned(), "b".to_owned())].into(),
        }];
        let invalid = resolver.resolve(&inline(VALID, unknown.clone())).await;
        let invalid_again = resolver.resolve(&inline(VALID, unknown)).await;
        assert!(matches!(invalid, Outcome::Invalid { .. }), "{invalid:?}");
        assert_eq!(format!("{invalid:?}"), format!("{invalid_again:?}"));
        assert_eq!(resolver.validated.len(), 2);
    }

    #[test]
    fn a_policy_is_part_of_the_validation_key_by_digest_or_by_why_it_is_missing() {
        let fetched = |fetch: PolicyFetch| {
            let mut bundles = PolicyBundles::default();
            bundles.fetched.insert("oci://r/p:1".into(), fetch);
            ValidationKey::new(
                ContractIdentity::Bundle {
                    digest: "sha256:c".into(),
                },
                &[],
                &bundles,
            )
        };
        let files = Arc::new(BundleFiles::new());
        let at = |digest: &str| PolicyFetch::Files {
            digest: digest.into(),
            files: Arc::clone(&files),
        };
        assert_eq!(fetched(at("sha256:a")), fetched(at("sha256:a")));
        assert_ne!(fetched(at("sha256:a")), fetched(at("sha256:b")));
        assert_ne!(fetched(at("sha256:a")), fetched(PolicyFetch::Unresolvable));
        assert_ne!(
            fetched(PolicyFetch::Broken("x".into())),
            fetched(PolicyFetch::Broken("y".into()))
        );
    }

    #[test]
    fn unresolvable_policies_are_skipped_with_a_warning() {
        let yaml = "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\npolicies:\n  - name: org\n    ref: oci://ghcr.io/acme/policy:1.0.0\n";
        let mut files = BundleFiles::new();
        files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
        let mut policies = PolicyBundles::default();
        policies.fetched.insert(
            "oci://ghcr.io/acme/policy:1.0.0".into(),
            PolicyFetch::Unresolvable,
        );
        policies.unresolvable.push((
            0,
            "oci://ghcr.io/acme/policy:1.0.0".into(),
            "registry unreachable".into(),
        ));
        let ok = validate_contract(&files, false, &[], Some(&policies)).expect("valid");
        let warning = ok
            .report
            .warnings
            .iter()
            .find(|w| w.code == codes::POLICY_REF_NOT_ENFORCED)
            .expect("warning");
        assert_eq!(warning.path, "policies[0].ref");

        // A resolvable policy is enforced.
        let mut policy = BundleFiles::new();
        policy.insert(
            "policy/schema.json",
            br#"{"properties":{"service":{"properties":{"name":{"const":"other"}}}}}"#.to_vec(),
        );
        let mut enforced = PolicyBundles::default();
        enforced.fetched.insert(
            "oci://ghcr.io/acme/policy:1.0.0".into(),
            PolicyFetch::Files {
                digest: "sha256:policy".into(),
                files: Arc::new(policy),
            },
        );
        let err = validate_contract(&files, false, &[], Some(&enforced))
            .err()
            .expect("violation");
        let report = err.report();
        assert!(
            report
                .errors
                .iter()
                .any(|f| f.code == codes::POLICY_VIOLATION),
            "{report:?}"
        );

        // A broken policy bundle fails closed.
        let mut broken = PolicyBundles::default();
        broken.fetched.insert(
            "oci://ghcr.io/acme/policy:1.0.0".into(),
            PolicyFetch::Broken("corrupt".into()),
        );
        let err = validate_contract(&files, false, &[], Some(&broken))
            .err()
            .expect("unresolved");
        assert!(
            err.report()
                .errors
                .iter()
                .any(|f| f.code == codes::POLICY_REF_UNRESOLVED)
        );
    }

    #[test]
    fn inline_contracts_take_their_configuration_schemas_as_inline_json() {
        let yaml = "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\nconfigurations:\n  - name: app\n    required: true\n    schema: '{\"type\":\"object\",\"required\":[\"port\"]}'\n  - name: path\n    required: false\n    schema: configuration/missing.json\n";
        let mut files = BundleFiles::new();
        files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
        let ok = validate_contract(&files, true, &[], Some(&PolicyBundles::default()))
            .expect("an inline contract has no bundle files to check");
        assert_eq!(
            ok.schemas.get("app").map(Vec::as_slice),
            Some(&br#"{"type":"object","required":["port"]}"#[..])
        );
        assert!(!ok.schemas.contains_key("path"));
        // In a bundle, `schema` must name a file of the bundle (FILE_NOT_FOUND otherwise).
        let Err(err) = validate_contract(&files, false, &[], Some(&PolicyBundles::default()))
        else {
            panic!("a bundle without the schema files is invalid");
        };
        assert!(format!("{err:?}").contains("FILE_NOT_FOUND"), "{err:?}");
    }

    #[test]
    fn configuration_schemas_come_from_the_bundle() {
        let yaml = "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\nconfigurations:\n  - name: app\n    required: true\n    schema: configuration/schema.json\n    values:\n      port: \"8080\"\n";
        let schema = br#"{"type":"object","properties":{"port":{"type":"string"}}}"#;
        let mut files = BundleFiles::new();
        files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
        files.insert("configuration/schema.json", schema.to_vec());
        let ok =
            validate_contract(&files, false, &[], Some(&PolicyBundles::default())).expect("valid");
        assert_eq!(ok.schemas.get("app").map(Vec::as_slice), Some(&schema[..]));
        let overridden = validate_contract(
            &files,
            false,
            &[ConfigurationOverride {
                name: "app".into(),
                values: [("port".to_owned(), "9090".to_owned())].into(),
            }],
            Some(&PolicyBundles::default()),
        )
        .expect("valid");
        let text = String::from_utf8(overridden.effective_yaml).unwrap();
        assert!(text.contains("9090") && !text.contains("8080"), "{text}");
    }

    #[test]
    fn revisions_sort_by_semver() {
        let rev = |tag: &str| TagRevision {
            tag: tag.into(),
            resolved_ref: String::new(),
            digest: String::new(),
            version: String::new(),
            content_hash: String::new(),
            service_name: String::new(),
            error: String::new(),
            transient: false,
        };
        let mut list = vec![
            rev("1.0.0"),
            rev("latest"),
            rev("2.0.0-rc.1"),
            rev("1.10.0"),
        ];
        sort_revisions(&mut list);
        let tags: Vec<_> = list.iter().map(|r| r.tag.as_str()).collect();
        assert_eq!(tags, ["2.0.0-rc.1", "1.10.0", "1.0.0", "latest"]);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
