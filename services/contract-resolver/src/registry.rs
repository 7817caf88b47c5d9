//! The registry edge: manifest HEADs, tag lists and bundle pulls, with deadlines, bounded retries
//! with backoff on transient failures, size limits and request metrics.
//!
//! Pulls and tag lists go through `pacto-oci`'s [`RegistryClient`] (one per credential scope, kept
//! so its token cache survives between resolves). The steady-state question "which digest does
//! this tag point at now?" is answered by [`RegistryAccess::head_digest`] with exactly one
//! `HEAD /v2/<repo>/manifests/<tag>` carrying the credentials directly (anonymous, basic or a
//! static bearer token). Only when the registry demands a token exchange (a `Bearer` challenge)
//! does it fall back to the OCI client, which performs the exchange and caches the token.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use backon::Retryable as _;
use metrics::counter;
use pacto_contract::bundle::BundleError;
use pacto_contract::reference::Reference;
use pacto_oci::{ClientOptions, Credentials, ErrorClass, OciError, PulledBundle, RegistryClient};
use pacto_runtime::backoff::Backoff;

use crate::cache::CredentialScope;
use crate::metrics::REGISTRY_REQUESTS_TOTAL;

/// Manifest media types accepted on HEAD (what pull accepts, plus indexes so a HEAD of any
/// artifact reports its digest).
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// Most remembered (scope, registry) pairs that need a token exchange.
const MAX_TOKEN_EXCHANGE_ENTRIES: usize = 4096;

/// How the registry edge behaves.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// The OCI client options (plain-HTTP hosts, timeouts, size limits).
    pub client: ClientOptions,
    /// Retries after the first attempt of an operation that failed transiently.
    pub max_retries: usize,
    /// First retry delay (doubling, with jitter).
    pub retry_min_delay: Duration,
    /// Retry delay cap.
    pub retry_max_delay: Duration,
    /// How long an idle per-scope OCI client is kept.
    pub client_ttl: Duration,
    /// Most bundle pulls in flight at once.
    pub max_concurrent_pulls: usize,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            client: ClientOptions {
                operation_timeout: Duration::from_secs(30),
                ..ClientOptions::default()
            },
            max_retries: 2,
            retry_min_delay: Duration::from_millis(200),
            retry_max_delay: Duration::from_secs(2),
            client_ttl: Duration::from_mins(10),
            max_concurrent_pulls: 8,
        }
    }
}

/// A failed registry operation.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// An operation of the OCI client failed.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The manifest HEAD could not be sent or answered.
    #[error("resolve digest {reference}: registry unreachable")]
    Transport {
        /// The reference.
        reference: String,
        /// The HTTP client error.
        #[source]
        source: reqwest::Error,
    },
    /// The manifest HEAD was answered with an error status.
    #[error("resolve digest {reference}: {class_text} (HTTP {status})", class_text = class.label().replace('_', " "))]
    Status {
        /// The reference.
        reference: String,
        /// HTTP status.
        status: u16,
        /// Its class.
        class: ErrorClass,
    },
    /// The registry answered without a usable `Docker-Content-Digest`.
    #[error("resolve digest {reference}: the registry returned no sha256 Docker-Content-Digest")]
    NoDigest {
        /// The reference.
        reference: String,
    },
    /// The HTTP client could not be built.
    #[error("building the HTTP client")]
    Build(#[source] reqwest::Error),
}

impl RegistryError {
    /// The failure's class (see [`ErrorClass`]).
    pub fn class(&self) -> ErrorClass {
        match self {
            RegistryError::Oci(e) => e.class(),
            RegistryError::Transport { .. } => ErrorClass::Unreachable,
            RegistryError::Status { class, .. } => *class,
            RegistryError::NoDigest { .. } => ErrorClass::Corrupt,
            RegistryError::Build(_) => ErrorClass::Client,
        }
    }

    /// The bundle error when a pulled layer is not a valid Pacto bundle.
    pub fn bundle_error(&self) -> Option<&BundleError> {
        match self {
            RegistryError::Oci(e) => e.bundle_error(),
            _ => None,
        }
    }
}

/// The class of an HTTP error status of a manifest request.
pub fn class_of_status(status: u16) -> ErrorClass {
    match status {
        401 | 403 => ErrorClass::AuthRejected,
        404 => ErrorClass::NotFound,
        429 | 500..=599 => ErrorClass::Unreachable,
        _ => ErrorClass::Corrupt,
    }
}

/// Whether a failure may go away on retry (registry down, overloaded or timing out).
pub fn is_transient(class: ErrorClass) -> bool {
    class == ErrorClass::Unreachable
}

type ClientEntry = (Arc<RegistryClient>, Instant);

/// Registry access for every credential scope.
pub struct RegistryAccess {
    options: RegistryOptions,
    http: reqwest::Client,
    clients: Mutex<HashMap<CredentialScope, ClientEntry>>,
    /// (scope, registry) pairs whose registry wants a token exchange or redirects manifest HEADs:
    /// HEADs go through the OCI client there.
    token_exchange: Mutex<HashSet<(CredentialScope, String)>>,
    /// Slots for bundle pulls (docs/design/resolution.md#hostile-registries).
    pulls: tokio::sync::Semaphore,
}

impl std::fmt::Debug for RegistryAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryAccess")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn record(kind: &'static str) {
    counter!(REGISTRY_REQUESTS_TOTAL, "kind" => kind).increment(1);
}

impl RegistryAccess {
    /// Builds the edge.
    pub fn new(options: RegistryOptions) -> Result<Self, RegistryError> {
        let http = reqwest::Client::builder()
            .connect_timeout(options.client.connect_timeout)
            .timeout(options.client.operation_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(RegistryError::Build)?;
        Ok(Self {
            http,
            clients: Mutex::new(HashMap::new()),
            token_exchange: Mutex::new(HashSet::new()),
            pulls: tokio::sync::Semaphore::new(options.max_concurrent_pulls.max(1)),
            options,
        })
    }

    fn client(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
    ) -> Result<Arc<RegistryClient>, RegistryError> {
        let now = Instant::now();
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((client, used)) = clients.get_mut(scope) {
            *used = now;
            return Ok(Arc::clone(client));
        }
        let ttl = self.options.client_ttl;
        clients.retain(|_, (_, used)| now.saturating_duration_since(*used) < ttl);
        let client = Arc::new(RegistryClient::new(
            self.options.client.clone(),
            credentials,
        )?);
        clients.insert(scope.clone(), (Arc::clone(&client), now));
        Ok(client)
    }

    async fn retrying<T, F, Fut>(&self, mut call: F) -> Result<T, RegistryError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RegistryError>>,
    {
        // The shared backoff with jitter (docs/design/architecture.md#backoff).
        let backoff = Backoff::new(self.options.retry_min_delay, self.options.retry_max_delay)
            .with_jitter()
            .delays()
            .take(self.options.max_retries);
        (|| call())
            .retry(backoff)
            .when(|e: &RegistryError| is_transient(e.class()))
            .notify(|e: &RegistryError, delay: Duration| {
                tracing::debug!(
                    error = %pacto_contract::error_chain(e),
                    ?delay,
                    "retrying registry operation"
                );
            })
            .await
    }

    fn base_url(&self, registry: &str) -> String {
        let host = if registry == pacto_contract::reference::DEFAULT_REGISTRY {
            "registry-1.docker.io"
        } else {
            registry
        };
        let insecure = self
            .options
            .client
            .insecure_registries
            .iter()
            .any(|h| h == registry);
        format!("{}://{host}", if insecure { "http" } else { "https" })
    }

    /// The manifest digest a tag (or digest) reference points at now: one HEAD request.
    pub async fn head_digest(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
        reference: &Reference,
    ) -> Result<String, RegistryError> {
        let exchange_key = (scope.clone(), reference.registry().to_owned());
        let needs_exchange = self
            .token_exchange
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&exchange_key);
        if needs_exchange {
            return self.head_via_client(scope, credentials, reference).await;
        }
        let version = reference
            .digest()
            .or(reference.tag())
            .unwrap_or("latest")
            .to_owned();
        let url = format!(
            "{}/v2/{}/manifests/{version}",
            self.base_url(reference.registry()),
            reference.repository()
        );
        let outcome = self
            .retrying(|| async {
                record("manifest_head");
                let request = self
                    .http
                    .head(&url)
                    .header(http::header::ACCEPT, MANIFEST_ACCEPT);
                let request = match credentials {
                    Credentials::Anonymous => request,
                    Credentials::Basic { username, password } => {
                        request.basic_auth(username, Some(password))
                    }
                    Credentials::Bearer(token) => request.bearer_auth(token),
                };
                let response = request
                    .send()
                    .await
                    .map_err(|source| RegistryError::Transport {
                        reference: reference.to_string(),
                        source,
                    })?;
                let status = response.status().as_u16();
                // A redirect: the OCI client follows it within the rules of
                // docs/design/resolution.md#hostile-registries (or refuses it as Unavailable).
                if (300..400).contains(&status) {
                    return Ok(None);
                }
                if status == 401
                    && !matches!(credentials, Credentials::Bearer(_))
                    && response
                        .headers()
                        .get(http::header::WWW_AUTHENTICATE)
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("bearer"))
                {
                    return Ok(None);
                }
                if !(200..300).contains(&status) {
                    return Err(RegistryError::Status {
                        reference: reference.to_string(),
                        status,
                        class: class_of_status(status),
                    });
                }
                let digest = response
                    .headers()
                    .get("docker-content-digest")
                    .and_then(|v| v.to_str().ok())
                    .filter(|d| pacto_contract::reference::validate_digest(d).is_ok())
                    .map(str::to_owned)
                    .ok_or_else(|| RegistryError::NoDigest {
                        reference: reference.to_string(),
                    })?;
                if let Some(expected) = reference.digest()
                    && expected != digest
                {
                    return Err(RegistryError::Status {
                        reference: reference.to_string(),
                        status,
                        class: ErrorClass::Corrupt,
                    });
                }
                Ok(Some(digest))
            })
            .await?;
        if let Some(digest) = outcome {
            return Ok(digest);
        }
        {
            let mut exchange = self
                .token_exchange
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // Bounded: forgetting entries only costs one extra challenged HEAD each.
            if exchange.len() >= MAX_TOKEN_EXCHANGE_ENTRIES {
                exchange.clear();
            }
            exchange.insert(exchange_key);
        }
        self.head_via_client(scope, credentials, reference).await
    }

    async fn head_via_client(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
        reference: &Reference,
    ) -> Result<String, RegistryError> {
        let client = self.client(scope, credentials)?;
        self.retrying(|| async {
            record("manifest_head");
            client.resolve_digest(reference).await.map_err(Into::into)
        })
        .await
    }

    /// Every tag of the reference's repository.
    pub async fn list_tags(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
        reference: &Reference,
    ) -> Result<Vec<String>, RegistryError> {
        let client = self.client(scope, credentials)?;
        self.retrying(|| async {
            record("tags_list");
            client.list_tags(reference).await.map_err(Into::into)
        })
        .await
    }

    /// A slot for one bundle pull (docs/design/resolution.md#memory): the caller holds it from
    /// the pull until only what it keeps of the bundle is left. A closed semaphore cannot happen
    /// (it is never closed); the caller then goes on without a slot.
    pub async fn pull_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.pulls.acquire().await.ok()
    }

    /// Pulls and extracts the bundle at `reference` (pinned to a digest by the caller, who holds
    /// a [`RegistryAccess::pull_slot`]).
    pub async fn pull(
        &self,
        scope: &CredentialScope,
        credentials: &Credentials,
        reference: &Reference,
    ) -> Result<PulledBundle, RegistryError> {
        let client = self.client(scope, credentials)?;
        let no_progress = |_: pacto_oci::Progress| {};
        self.retrying(|| async {
            record("bundle_pull");
            client
                .pull(reference, &no_progress)
                .await
                .map_err(Into::into)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        assert_eq!(class_of_status(401), ErrorClass::AuthRejected);
        assert_eq!(class_of_status(403), ErrorClass::AuthRejected);
        assert_eq!(class_of_status(404), ErrorClass::NotFound);
        assert_eq!(class_of_status(429), ErrorClass::Unreachable);
        assert_eq!(class_of_status(503), ErrorClass::Unreachable);
        assert_eq!(class_of_status(400), ErrorClass::Corrupt);
        assert!(is_transient(ErrorClass::Unreachable));
        assert!(!is_transient(ErrorClass::NotFound));
        assert!(!is_transient(ErrorClass::AuthRejected));
    }
}
