//! The registry client: push, pull (by tag or digest), tag listing, tag → digest resolution,
//! highest-semver resolution and inspection, all with size limits and deadlines.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use pacto_contract::bundle::{BundleFiles, Limits, MANIFEST_MEDIA_TYPE};
use pacto_contract::reference::Reference;
use pacto_contract::version::{Constraint, SelectError, Version, select_highest_tag};
use sha2::{Digest as _, Sha256};

use crate::credentials::Credentials;
use crate::error::{ErrorClass, OciError};
use crate::manifest::{BundleConfig, BundleMeta, ImageManifest};
use crate::tags::{TAG_PAGE_SIZE, TagPages};

/// Media types accepted when pulling a bundle manifest.
const PULL_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// Media types accepted on a digest `HEAD` (indexes too, so any artifact reports its digest).
const HEAD_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// The token service and blob CDN hosts of Docker Hub and ghcr.io: the default
/// [`ClientOptions::allowed_hosts`], so that the two most common registries work out of the box.
pub const DEFAULT_ALLOWED_HOSTS: &[&str] = &[
    "auth.docker.io",
    "production.cloudflare.docker.com",
    "pkg-containers.githubusercontent.com",
];

/// Options of a [`RegistryClient`].
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Registry hosts (`host[:port]`) reached over plain HTTP instead of HTTPS.
    pub insecure_registries: Vec<String>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Deadline for each whole operation (push, pull, list, resolve, inspect).
    pub operation_timeout: Duration,
    /// Largest accepted manifest, in bytes.
    pub max_manifest_bytes: u64,
    /// Largest accepted config blob, in bytes.
    pub max_config_bytes: u64,
    /// Largest accepted (compressed) layer, in bytes.
    pub max_layer_bytes: u64,
    /// Limits for the extracted bundle.
    pub bundle_limits: Limits,
    /// Most tag-list pages (of up to 1000 tags) fetched; a longer list is refused as too large.
    pub max_tag_pages: usize,
    /// Largest accepted tag-list page, in bytes.
    pub max_tag_page_bytes: u64,
    /// Hosts (`host` or `host:port`) besides a registry's own host that its redirects and token
    /// realms may send us to (docs/design/resolution.md#hostile-registries).
    pub allowed_hosts: Vec<String>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        let bundle_limits = Limits::default();
        ClientOptions {
            insecure_registries: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_mins(2),
            max_manifest_bytes: 4 * 1024 * 1024,
            max_config_bytes: 1024 * 1024,
            max_layer_bytes: bundle_limits.max_total_bytes,
            bundle_limits,
            max_tag_pages: 100,
            max_tag_page_bytes: 1024 * 1024,
            allowed_hosts: DEFAULT_ALLOWED_HOSTS
                .iter()
                .map(|h| (*h).to_owned())
                .collect(),
        }
    }
}

/// What a push or pull reports as it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The bundle was packed (layer size in bytes).
    Packed {
        /// Compressed layer size.
        layer_bytes: u64,
    },
    /// A blob upload started (the registry client sends it whole: the next report about it
    /// is its [`Progress::BlobUploaded`]).
    Uploading {
        /// `config` or `layer`.
        what: &'static str,
        /// Its size.
        bytes: u64,
    },
    /// A blob was uploaded.
    BlobUploaded {
        /// `config` or `layer`.
        what: &'static str,
        /// Its digest.
        digest: String,
        /// Its size.
        bytes: u64,
    },
    /// The manifest was written under the tag.
    ManifestPushed {
        /// The manifest digest.
        digest: String,
    },
    /// The manifest was fetched.
    ManifestFetched {
        /// The manifest digest.
        digest: String,
    },
    /// Layer bytes received so far.
    Downloading {
        /// Bytes so far.
        received: u64,
        /// Declared total.
        total: u64,
    },
    /// The layer was extracted.
    Extracted {
        /// Number of files.
        files: usize,
    },
}

/// The outcome of a push.
#[derive(Debug, Clone)]
pub struct PushResult {
    /// The reference written (with its tag).
    pub reference: Reference,
    /// The manifest digest (`sha256:…`).
    pub digest: String,
    /// The exact layer bytes pushed (the deterministic tar.gz).
    pub layer: Vec<u8>,
}

/// The outcome of a pull.
#[derive(Debug, Clone)]
pub struct PulledBundle {
    /// The reference pulled, pinned to the manifest digest.
    pub reference: Reference,
    /// The manifest digest.
    pub digest: String,
    /// The extracted files.
    pub files: BundleFiles,
    /// The raw layer bytes (tar.gz) as stored in the registry.
    pub layer: Vec<u8>,
    /// The `io.pacto.*` labels of the config, if the config could be read as an image config.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// A resolved reference (docs/design/contract.md#references-and-versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The reference with the chosen tag (or the original tag/digest when explicit).
    pub reference: Reference,
    /// The manifest digest.
    pub digest: String,
    /// The tag chosen by semver resolution, when the input had no tag or digest.
    pub selected_tag: Option<String>,
}

/// What `inspect` reports.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The reference inspected.
    pub reference: Reference,
    /// The manifest digest.
    pub digest: String,
    /// The manifest media type.
    pub media_type: String,
    /// Layer descriptor size in bytes.
    pub layer_bytes: u64,
    /// The config labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// All tags of the repository.
    pub repository_tags: Vec<String>,
    /// The tags that point at this digest (checked among the first 100 tags).
    pub tags: Vec<String>,
}

/// A registry client for one credential set.
pub struct RegistryClient {
    inner: oci_client::Client,
    reader: crate::fetch::Reader,
    auth: oci_client::secrets::RegistryAuth,
    options: ClientOptions,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn to_oci_ref(r: &Reference) -> oci_client::Reference {
    match (r.tag(), r.digest()) {
        (_, Some(d)) => oci_client::Reference::with_digest(
            r.registry().to_owned(),
            r.repository().to_owned(),
            d.to_owned(),
        ),
        (Some(t), None) => oci_client::Reference::with_tag(
            r.registry().to_owned(),
            r.repository().to_owned(),
            t.to_owned(),
        ),
        (None, None) => oci_client::Reference::with_tag(
            r.registry().to_owned(),
            r.repository().to_owned(),
            "latest".to_owned(),
        ),
    }
}

impl RegistryClient {
    /// Builds a client. Registries listed in `options.insecure_registries` use plain HTTP.
    pub fn new(options: ClientOptions, credentials: &Credentials) -> Result<Self, OciError> {
        let protocol = if options.insecure_registries.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(options.insecure_registries.clone())
        };
        let config = ClientConfig {
            protocol,
            connect_timeout: Some(options.connect_timeout),
            read_timeout: Some(options.operation_timeout),
            platform_resolver: None,
            ..ClientConfig::default()
        };
        let inner = oci_client::Client::try_from(config)
            .map_err(|source| OciError::ClientBuild { source })?;
        let reader =
            crate::fetch::Reader::new(credentials, options.connect_timeout, &options.allowed_hosts)
                .map_err(|source| OciError::ReaderBuild { source })?;
        Ok(RegistryClient {
            inner,
            reader,
            auth: credentials.to_registry_auth(),
            options,
        })
    }

    /// The options in use.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    async fn deadline<T>(
        &self,
        operation: &'static str,
        reference: &Reference,
        fut: impl Future<Output = Result<T, OciError>>,
    ) -> Result<T, OciError> {
        match tokio::time::timeout(self.options.operation_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(OciError::Timeout {
                operation,
                reference: reference.to_string(),
                seconds: self.options.operation_timeout.as_secs(),
            }),
        }
    }

    /// Whether the manifest at `reference` exists (HEAD). Not found is `Ok(false)`.
    pub async fn exists(&self, reference: &Reference) -> Result<bool, OciError> {
        match self.resolve_digest(reference).await {
            Ok(_) => Ok(true),
            Err(e) if e.class() == ErrorClass::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The base URL of a registry (`https://host[:port]`, plain HTTP when allow-listed).
    fn base_url(&self, reference: &Reference) -> Result<reqwest::Url, OciError> {
        let registry = reference.registry();
        let host = match registry {
            "docker.io" | "index.docker.io" => "registry-1.docker.io",
            other => other,
        };
        let scheme = if self
            .options
            .insecure_registries
            .iter()
            .any(|h| h == registry)
        {
            "http"
        } else {
            "https"
        };
        reqwest::Url::parse(&format!("{scheme}://{host}/")).map_err(|_| OciError::BadUrl {
            reference: reference.to_string(),
        })
    }

    fn url(&self, reference: &Reference, path: &str) -> Result<reqwest::Url, OciError> {
        let base = self.base_url(reference)?;
        base.join(&format!("v2/{}/{path}", reference.repository()))
            .map_err(|_| OciError::BadUrl {
                reference: reference.to_string(),
            })
    }

    fn pull_scope(reference: &Reference) -> String {
        format!("repository:{}:pull", reference.repository())
    }

    fn version_of(reference: &Reference) -> &str {
        reference.digest().or(reference.tag()).unwrap_or("latest")
    }

    /// The manifest digest a tag (or digest) reference points at: one `HEAD` (a `GET` of the
    /// bounded manifest when the registry sends no digest header).
    pub async fn resolve_digest(&self, reference: &Reference) -> Result<String, OciError> {
        self.deadline("resolve digest", reference, async {
            let text = reference.to_string();
            let step = crate::fetch::Step {
                operation: "resolve digest",
                what: "manifest",
                reference: &text,
            };
            let url = self.url(
                reference,
                &format!("manifests/{}", Self::version_of(reference)),
            )?;
            let scope = Self::pull_scope(reference);
            let response = self
                .reader
                .send(step, reqwest::Method::HEAD, &url, Some(HEAD_ACCEPT), &scope)
                .await?;
            let header = response
                .headers()
                .get("docker-content-digest")
                .and_then(|v| v.to_str().ok())
                .filter(|d| pacto_contract::reference::validate_digest(d).is_ok())
                .map(str::to_owned);
            let digest = if let Some(d) = header {
                d
            } else {
                let (bytes, _) = self
                    .reader
                    .get_bounded(
                        step,
                        &url,
                        Some(HEAD_ACCEPT),
                        &scope,
                        self.options.max_manifest_bytes,
                        &mut |_| {},
                    )
                    .await?;
                sha256_digest(&bytes)
            };
            if let Some(expected) = reference.digest()
                && expected != digest
            {
                return Err(OciError::DigestMismatch {
                    what: "manifest",
                    reference: text,
                    expected: expected.to_owned(),
                    actual: digest,
                });
            }
            Ok(digest)
        })
        .await
    }

    /// Every tag of the repository, following `last=` pagination. Each page is bounded in bytes;
    /// a list longer than `max_tag_pages` pages is refused as too large rather than cut short
    /// (a cut list could hide the highest version). De-duplication is linear.
    pub async fn list_tags(&self, repository: &Reference) -> Result<Vec<String>, OciError> {
        let repo = repository.without_version();
        self.deadline("list tags", &repo, async {
            let text = repo.to_string();
            let step = crate::fetch::Step {
                operation: "list tags",
                what: "tag list page",
                reference: &text,
            };
            let scope = Self::pull_scope(&repo);
            let mut pages = TagPages::new();
            for _ in 0..self.options.max_tag_pages {
                let mut url = self.url(&repo, "tags/list")?;
                {
                    let mut query = url.query_pairs_mut();
                    query.append_pair("n", &TAG_PAGE_SIZE.to_string());
                    if let Some(last) = pages.last() {
                        query.append_pair("last", last);
                    }
                }
                let (body, _) = self
                    .reader
                    .get_bounded(
                        step,
                        &url,
                        Some("application/json"),
                        &scope,
                        self.options.max_tag_page_bytes,
                        &mut |_| {},
                    )
                    .await?;
                let more = pages.add_page(&body).map_err(|e| OciError::BadTagList {
                    reference: text.clone(),
                    line: e.line,
                    column: e.column,
                })?;
                if !more {
                    return Ok(pages.into_tags());
                }
            }
            Err(OciError::TooManyTags {
                reference: text,
                pages: self.options.max_tag_pages,
                seen: pages.len(),
            })
        })
        .await
    }

    /// The tags that parse as (lenient) semantic versions, highest first, with their original
    /// spelling; equal versions are ordered by the tie rule of docs/design/contract.md#references-and-versions (no `v` first, then lexical).
    pub async fn list_semver_tags(
        &self,
        repository: &Reference,
    ) -> Result<Vec<(Version, String)>, OciError> {
        let mut tags: Vec<(Version, String)> = self
            .list_tags(repository)
            .await?
            .into_iter()
            .filter_map(|t| Version::parse(&t).ok().map(|v| (v, t)))
            .collect();
        tags.sort_by(|(va, ta), (vb, tb)| {
            vb.cmp(va)
                .then_with(|| ta.starts_with('v').cmp(&tb.starts_with('v')))
                .then_with(|| ta.cmp(tb))
        });
        Ok(tags)
    }

    /// Resolves a reference per docs/design/contract.md#references-and-versions: an explicit tag or digest is used as is (resolved to a
    /// digest); an untagged reference selects the highest semver tag (optionally within
    /// `constraint`) and resolves it.
    pub async fn resolve(
        &self,
        reference: &Reference,
        constraint: Option<&Constraint>,
    ) -> Result<Resolved, OciError> {
        if reference.has_explicit_version() {
            let digest = match reference.digest() {
                Some(d) => d.to_owned(),
                None => self.resolve_digest(reference).await?,
            };
            return Ok(Resolved {
                reference: reference.clone(),
                digest,
                selected_tag: None,
            });
        }
        let tags = self.list_tags(reference).await?;
        let tag =
            select_highest_tag(tags.iter().map(String::as_str), constraint).map_err(
                |e| match e {
                    SelectError::NoSemverTags => OciError::NoSemverTags {
                        repository: reference.repository_url(),
                    },
                    SelectError::NoMatchingVersion { constraint } => OciError::NoMatchingVersion {
                        repository: reference.repository_url(),
                        constraint,
                    },
                },
            )?;
        let tagged = reference.with_tag(tag)?;
        let digest = self.resolve_digest(&tagged).await?;
        Ok(Resolved {
            reference: tagged,
            digest,
            selected_tag: Some(tag.to_owned()),
        })
    }

    /// Packs and pushes `files` to `reference` (which must carry a tag). Unless `force`, an
    /// existing tag is refused with [`OciError::AlreadyExists`].
    pub async fn push(
        &self,
        reference: &Reference,
        files: &BundleFiles,
        meta: &BundleMeta,
        force: bool,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<PushResult, OciError> {
        let tar = files.to_tar().map_err(|source| OciError::Pack { source })?;
        let layer =
            pacto_contract::bundle::gzip(&tar).map_err(|source| OciError::Pack { source })?;
        progress(Progress::Packed {
            layer_bytes: layer.len() as u64,
        });
        if layer.len() as u64 > self.options.max_layer_bytes {
            return Err(OciError::TooLarge {
                what: "layer",
                reference: reference.to_string(),
                size: layer.len() as u64,
                limit: self.options.max_layer_bytes,
            });
        }
        if !force && self.exists(reference).await? {
            return Err(OciError::AlreadyExists {
                reference: reference.to_oci_string(),
            });
        }
        let config = BundleConfig::new(meta, &sha256_digest(&tar)).to_json();
        let digest = self
            .push_artifact(reference, config, layer.clone(), progress)
            .await?;
        Ok(PushResult {
            reference: reference.clone(),
            digest,
            layer,
        })
    }

    /// Uploads `config` and `layer` as-is and writes a bundle manifest (docs/design/contract.md#bundle-packing) under the
    /// reference's tag, returning the manifest digest. No size or content checks: `push` is
    /// the checked entry point; this one also serves tests that need hostile artifacts.
    pub async fn push_artifact(
        &self,
        reference: &Reference,
        config: Vec<u8>,
        layer: Vec<u8>,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<String, OciError> {
        let config_digest = sha256_digest(&config);
        let layer_digest = sha256_digest(&layer);
        let manifest = ImageManifest::bundle(
            (&config_digest, config.len() as u64),
            (&layer_digest, layer.len() as u64),
        )
        .to_json();
        let manifest_digest = sha256_digest(&manifest);
        let oref = to_oci_ref(reference);
        self.deadline("push", reference, async {
            // Authenticate for push up front so that blob uploads carry the token.
            if self.auth_is_anonymous() {
                self.inner
                    .store_auth_if_needed(oref.resolve_registry(), &self.auth)
                    .await;
            } else {
                self.inner
                    .auth(&oref, &self.auth, oci_client::RegistryOperation::Push)
                    .await
                    .map_err(|e| OciError::registry("authenticate", reference, e))?;
            }
            let layer_len = layer.len() as u64;
            progress(Progress::Uploading {
                what: "layer",
                bytes: layer_len,
            });
            self.inner
                .push_blob(&oref, layer, &layer_digest)
                .await
                .map_err(|e| OciError::registry("push layer", reference, e))?;
            progress(Progress::BlobUploaded {
                what: "layer",
                digest: layer_digest.clone(),
                bytes: layer_len,
            });
            let config_len = config.len() as u64;
            progress(Progress::Uploading {
                what: "config",
                bytes: config_len,
            });
            self.inner
                .push_blob(&oref, config, &config_digest)
                .await
                .map_err(|e| OciError::registry("push config", reference, e))?;
            progress(Progress::BlobUploaded {
                what: "config",
                digest: config_digest.clone(),
                bytes: config_len,
            });
            self.inner
                .push_manifest_raw(
                    &oref,
                    manifest,
                    http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
                )
                .await
                .map_err(|e| OciError::registry("push manifest", reference, e))?;
            progress(Progress::ManifestPushed {
                digest: manifest_digest.clone(),
            });
            Ok(())
        })
        .await?;
        Ok(manifest_digest)
    }

    fn auth_is_anonymous(&self) -> bool {
        matches!(self.auth, oci_client::secrets::RegistryAuth::Anonymous)
    }

    async fn fetch_manifest(
        &self,
        reference: &Reference,
    ) -> Result<(ImageManifest, String, String), OciError> {
        let text = reference.to_string();
        let step = crate::fetch::Step {
            operation: "pull manifest",
            what: "manifest",
            reference: &text,
        };
        let url = self.url(
            reference,
            &format!("manifests/{}", Self::version_of(reference)),
        )?;
        let (bytes, _) = self
            .reader
            .get_bounded(
                step,
                &url,
                Some(PULL_ACCEPT),
                &Self::pull_scope(reference),
                self.options.max_manifest_bytes,
                &mut |_| {},
            )
            .await?;
        let actual = sha256_digest(&bytes);
        if let Some(expected) = reference.digest()
            && expected != actual
        {
            return Err(OciError::DigestMismatch {
                what: "manifest",
                reference: text,
                expected: expected.to_owned(),
                actual,
            });
        }
        let manifest = ImageManifest::parse(&bytes).map_err(|reason| OciError::BadManifest {
            reference: reference.to_string(),
            reason,
        })?;
        let media_type = manifest
            .media_type
            .clone()
            .unwrap_or_else(|| MANIFEST_MEDIA_TYPE.to_owned());
        Ok((manifest, actual, media_type))
    }

    async fn fetch_blob(
        &self,
        reference: &Reference,
        what: &'static str,
        digest: &str,
        declared: u64,
        limit: u64,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<Vec<u8>, OciError> {
        if declared > limit {
            return Err(OciError::TooLarge {
                what,
                reference: reference.to_string(),
                size: declared,
                limit,
            });
        }
        if pacto_contract::reference::validate_digest(digest).is_err() {
            return Err(OciError::BadManifest {
                reference: reference.to_string(),
                reason: format!("the {what} descriptor has a malformed digest"),
            });
        }
        let operation = if what == "layer" {
            "pull layer"
        } else {
            "pull config"
        };
        let text = reference.to_string();
        let step = crate::fetch::Step {
            operation,
            what,
            reference: &text,
        };
        let url = self.url(reference, &format!("blobs/{digest}"))?;
        let report = what == "layer";
        let (out, _) = self
            .reader
            .get_bounded(
                step,
                &url,
                None,
                &Self::pull_scope(reference),
                limit,
                &mut |received| {
                    if report {
                        progress(Progress::Downloading {
                            received,
                            total: declared,
                        });
                    }
                },
            )
            .await?;
        let actual = sha256_digest(&out);
        if digest.starts_with("sha256:") && actual != digest {
            return Err(OciError::DigestMismatch {
                what,
                reference: text,
                expected: digest.to_owned(),
                actual,
            });
        }
        Ok(out)
    }

    /// Pulls and extracts a bundle by tag or digest (docs/design/contract.md#bundle-extraction: exactly one layer, media types not
    /// checked, extraction limits enforced).
    pub async fn pull(
        &self,
        reference: &Reference,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<PulledBundle, OciError> {
        self.deadline("pull", reference, async {
            let (manifest, digest, _) = self.fetch_manifest(reference).await?;
            progress(Progress::ManifestFetched {
                digest: digest.clone(),
            });
            let layer_desc = match manifest.layers.as_slice() {
                [one] => one,
                [] => {
                    return Err(OciError::BadManifest {
                        reference: reference.to_string(),
                        reason: "image has no layers".to_owned(),
                    });
                }
                many => {
                    return Err(OciError::BadManifest {
                        reference: reference.to_string(),
                        reason: format!("expected exactly one layer, found {}", many.len()),
                    });
                }
            };
            let layer = self
                .fetch_blob(
                    reference,
                    "layer",
                    &layer_desc.digest,
                    layer_desc.size,
                    self.options.max_layer_bytes,
                    progress,
                )
                .await?;
            let labels = self.fetch_labels(reference, &manifest).await;
            let files = BundleFiles::from_tar_gz(layer.as_slice(), &self.options.bundle_limits)
                .map_err(|source| OciError::Bundle {
                    reference: reference.to_string(),
                    source,
                })?;
            progress(Progress::Extracted { files: files.len() });
            let pinned = reference.with_digest(&digest)?;
            Ok(PulledBundle {
                reference: pinned,
                digest,
                files,
                layer,
                labels,
            })
        })
        .await
    }

    /// Reads the `io.pacto.*` labels; any failure yields no labels (pull accepts any config).
    async fn fetch_labels(
        &self,
        reference: &Reference,
        manifest: &ImageManifest,
    ) -> std::collections::BTreeMap<String, String> {
        let no_progress = |_: Progress| {};
        match self
            .fetch_blob(
                reference,
                "config",
                &manifest.config.digest,
                manifest.config.size,
                self.options.max_config_bytes,
                &no_progress,
            )
            .await
        {
            Ok(bytes) => BundleConfig::labels_from_json(&bytes),
            Err(e) => {
                tracing::debug!(
                    error = %pacto_contract::error_chain(&e),
                    "config blob unreadable; no labels"
                );
                std::collections::BTreeMap::new()
            }
        }
    }

    /// Digest, labels, layer size and tags of an artifact.
    pub async fn inspect(&self, reference: &Reference) -> Result<Inspection, OciError> {
        self.deadline("inspect", reference, async {
            let (manifest, digest, media_type) = self.fetch_manifest(reference).await?;
            let labels = self.fetch_labels(reference, &manifest).await;
            let repository_tags = self.list_tags(reference).await?;
            let mut tags = Vec::new();
            for tag in repository_tags.iter().take(100) {
                let tagged = reference.with_tag(tag)?;
                if self.resolve_digest(&tagged).await.ok().as_deref() == Some(digest.as_str()) {
                    tags.push(tag.clone());
                }
            }
            Ok(Inspection {
                reference: reference.clone(),
                digest,
                media_type,
                layer_bytes: manifest.layers.iter().map(|l| l.size).sum(),
                labels,
                repository_tags,
                tags,
            })
        })
        .await
    }
}
