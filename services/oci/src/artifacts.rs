//! Generic OCI artifact access by digest (docs/design/evidence-store.md#registry-access): the
//! manifest `HEAD` that resolves a subject descriptor, the Referrers API (unfiltered, `Link`
//! pagination), the OCI 1.1 referrers tag schema for registries without that API, bounded
//! manifest and blob reads with digest (and size) verification, and untagged pushes by digest.
//!
//! Every request goes through the hardened reader of [`crate::fetch`] (bounded bodies, origin
//! checks for redirects, token realms and upload locations) and is counted, so a caller can
//! report the registry requests an operation cost ([`ArtifactClient::requests`]).

use reqwest::Method;
use reqwest::Url;
use reqwest::header::{HeaderMap, LINK, LOCATION};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::client::ClientOptions;
use crate::credentials::Credentials;
use crate::error::{ErrorClass, OciError};
use crate::fetch::{Body, Reader, Step};

/// `application/vnd.oci.image.manifest.v1+json`.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// `application/vnd.oci.image.index.v1+json`.
pub const OCI_INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// Media types accepted when reading a manifest by digest or tag.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// Largest referrers page (or referrers tag index) read, in bytes.
pub const MAX_REFERRERS_PAGE_BYTES: u64 = 16 * 1024 * 1024;

/// A repository on a registry (`registry/name`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Repository {
    /// `host[:port]`.
    pub registry: String,
    /// The repository path.
    pub name: String,
}

impl Repository {
    /// A repository.
    pub fn new(registry: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            registry: registry.into(),
            name: name.into(),
        }
    }

    fn at(&self, reference: &str) -> String {
        let sep = if reference.starts_with("sha256:") {
            '@'
        } else {
            ':'
        };
        format!("{}/{}{sep}{reference}", self.registry, self.name)
    }
}

impl std::fmt::Display for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.registry, self.name)
    }
}

/// An OCI content descriptor as listed in an image index (read leniently: unknown fields are
/// ignored; written with `artifactType` only when set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactDescriptor {
    /// Media type of the referenced content.
    #[serde(default)]
    pub media_type: String,
    /// Digest (`sha256:…`).
    #[serde(default)]
    pub digest: String,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// The artifact type, when the listing states one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
}

/// An image index, leniently read (only `manifests` matters).
#[derive(Debug, Deserialize)]
struct IndexIn {
    #[serde(default)]
    manifests: Option<Vec<ArtifactDescriptor>>,
}

/// The answer of a referrers listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Referrers {
    /// The registry answered 404 on the Referrers API: it has none.
    Unsupported,
    /// Every descriptor of every page, in listing order.
    Listed(Vec<ArtifactDescriptor>),
}

/// A manifest read by digest or tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedManifest {
    /// The bytes as stored.
    pub bytes: Vec<u8>,
    /// Their digest (verified against the requested digest when one was requested).
    pub digest: String,
    /// The `Content-Type` the registry sent (empty when none).
    pub media_type: String,
}

/// `sha256:<hex>` of bytes.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The OCI 1.1 referrers tag schema tag of a digest: `sha256-<hex>`.
pub fn referrers_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

/// Parses the `next` target of a `Link` header (`<url>; rel="next"`).
fn next_link(headers: &HeaderMap) -> Option<String> {
    for value in headers.get_all(LINK) {
        let Ok(text) = value.to_str() else { continue };
        for part in text.split(',') {
            let part = part.trim();
            let Some(rest) = part.strip_prefix('<') else {
                continue;
            };
            let Some((target, params)) = rest.split_once('>') else {
                continue;
            };
            let is_next = params.split(';').any(|p| {
                let p = p.trim().replace(' ', "");
                p.eq_ignore_ascii_case("rel=\"next\"") || p.eq_ignore_ascii_case("rel=next")
            });
            if is_next {
                return Some(target.to_owned());
            }
        }
    }
    None
}

/// Generic artifact access for one credential set (see the module documentation).
pub struct ArtifactClient {
    reader: Reader,
    options: ClientOptions,
}

impl std::fmt::Debug for ArtifactClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactClient")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ArtifactClient {
    /// A client (no network I/O). Registries in `options.insecure_registries` use plain HTTP.
    pub fn new(options: ClientOptions, credentials: &Credentials) -> Result<Self, OciError> {
        let reader = Reader::new(credentials, options.connect_timeout, &options.allowed_hosts)
            .map_err(|source| OciError::ReaderBuild { source })?;
        Ok(Self { reader, options })
    }

    /// HTTP requests sent so far (token exchanges included).
    pub fn requests(&self) -> u64 {
        self.reader.requests()
    }

    /// The options in use.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    fn url(&self, repo: &Repository, path: &str) -> Result<Url, OciError> {
        let host = match repo.registry.as_str() {
            "docker.io" | "index.docker.io" => "registry-1.docker.io",
            other => other,
        };
        let scheme = if self
            .options
            .insecure_registries
            .iter()
            .any(|h| h == &repo.registry)
        {
            "http"
        } else {
            "https"
        };
        Url::parse(&format!("{scheme}://{host}/v2/{}/{path}", repo.name)).map_err(|_| {
            OciError::BadUrl {
                reference: repo.to_string(),
            }
        })
    }

    fn pull_scope(repo: &Repository) -> String {
        format!("repository:{}:pull", repo.name)
    }

    fn push_scope(repo: &Repository) -> String {
        format!("repository:{}:pull,push", repo.name)
    }

    async fn deadline<T>(
        &self,
        operation: &'static str,
        reference: &str,
        fut: impl Future<Output = Result<T, OciError>>,
    ) -> Result<T, OciError> {
        match tokio::time::timeout(self.options.operation_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(OciError::Timeout {
                operation,
                reference: reference.to_owned(),
                seconds: self.options.operation_timeout.as_secs(),
            }),
        }
    }

    /// Resolves a manifest by digest (`HEAD`): its descriptor as the registry reports it
    /// (media type from `Content-Type`, size from `Content-Length`). The registry's
    /// `Docker-Content-Digest`, when sent, must equal the digest asked for.
    pub async fn head_manifest(
        &self,
        repo: &Repository,
        digest: &str,
    ) -> Result<ArtifactDescriptor, OciError> {
        let reference = repo.at(digest);
        self.deadline("resolve subject", &reference, async {
            let step = Step {
                operation: "resolve subject",
                what: "manifest",
                reference: &reference,
            };
            let url = self.url(repo, &format!("manifests/{digest}"))?;
            let response = self
                .reader
                .send(
                    step,
                    Method::HEAD,
                    &url,
                    Some(MANIFEST_ACCEPT),
                    &Self::pull_scope(repo),
                )
                .await?;
            let headers = response.headers();
            let header = |name: &str| {
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            if let Some(sent) = header("docker-content-digest")
                && sent != digest
            {
                return Err(OciError::DigestMismatch {
                    what: "manifest",
                    reference: reference.clone(),
                    expected: digest.to_owned(),
                    actual: sent,
                });
            }
            let media_type = header("content-type")
                .map(|t| t.split(';').next().unwrap_or_default().trim().to_owned())
                .unwrap_or_default();
            let size = header("content-length").and_then(|v| v.parse::<u64>().ok());
            match size {
                Some(size) if !media_type.is_empty() => Ok(ArtifactDescriptor {
                    media_type,
                    digest: digest.to_owned(),
                    size,
                    artifact_type: None,
                }),
                // no usable headers: read the (bounded) manifest itself
                _ => {
                    let fetched = self.manifest(repo, digest).await?;
                    Ok(ArtifactDescriptor {
                        media_type: fetched.media_type,
                        digest: digest.to_owned(),
                        size: fetched.bytes.len() as u64,
                        artifact_type: None,
                    })
                }
            }
        })
        .await
    }

    /// Lists the referrers of `digest` with the Referrers API, unfiltered, following `Link`
    /// pagination (same origin only) up to `max_pages` pages; more is an error
    /// ([`OciError::TooManyReferrerPages`]), not a truncation. A 404 answer means the registry
    /// has no Referrers API ([`Referrers::Unsupported`]).
    pub async fn referrers(
        &self,
        repo: &Repository,
        digest: &str,
        page_size: Option<u32>,
        max_pages: usize,
    ) -> Result<Referrers, OciError> {
        let reference = repo.at(digest);
        self.deadline("list referrers", &reference, async {
            let step = Step {
                operation: "list referrers",
                what: "referrers page",
                reference: &reference,
            };
            let mut url = self.url(repo, &format!("referrers/{digest}"))?;
            if let Some(n) = page_size {
                url.query_pairs_mut().append_pair("n", &n.to_string());
            }
            let origin = url.clone();
            let mut out = Vec::new();
            let mut pages = 0usize;
            loop {
                if pages == max_pages {
                    return Err(OciError::TooManyReferrerPages {
                        reference: reference.clone(),
                        pages: max_pages,
                    });
                }
                pages += 1;
                let response = match self
                    .reader
                    .send(
                        step,
                        Method::GET,
                        &url,
                        Some(OCI_INDEX_MEDIA_TYPE),
                        &Self::pull_scope(repo),
                    )
                    .await
                {
                    Ok(r) => r,
                    Err(OciError::Status { status: 404, .. }) if pages == 1 => {
                        return Ok(Referrers::Unsupported);
                    }
                    Err(e) => return Err(e),
                };
                let next = next_link(response.headers());
                let body = Reader::read_body(step, response, MAX_REFERRERS_PAGE_BYTES).await?;
                let index: IndexIn =
                    serde_json::from_slice(&body).map_err(|e| OciError::BadReferrers {
                        reference: reference.clone(),
                        reason: format!(
                            "page {pages} is not an image index (line {}, column {})",
                            e.line(),
                            e.column()
                        ),
                    })?;
                out.extend(index.manifests.unwrap_or_default());
                let Some(next) = next else { break };
                let target = url.join(&next).map_err(|_| OciError::BadReferrers {
                    reference: reference.clone(),
                    reason: "the Link header's next page is not a URL".to_owned(),
                })?;
                if !self.reader.allowed(&origin, &target) {
                    return Err(OciError::HostRefused {
                        operation: "list referrers",
                        reference: reference.clone(),
                        kind: "next page",
                        host: target.host_str().unwrap_or_default().to_owned(),
                    });
                }
                url = target;
            }
            Ok(Referrers::Listed(out))
        })
        .await
    }

    /// Reads the referrers tag-schema index of `digest` (tag `sha256-<hex>`): `None` when the
    /// tag does not exist, else the index's descriptors and the index manifest's digest.
    pub async fn referrers_tag_index(
        &self,
        repo: &Repository,
        digest: &str,
    ) -> Result<Option<(Vec<ArtifactDescriptor>, String)>, OciError> {
        let tag = referrers_tag(digest);
        let fetched = match self
            .manifest_limited(repo, &tag, MAX_REFERRERS_PAGE_BYTES)
            .await
        {
            Ok(f) => f,
            Err(e) if e.class() == ErrorClass::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let index: IndexIn =
            serde_json::from_slice(&fetched.bytes).map_err(|e| OciError::BadReferrers {
                reference: repo.at(&tag),
                reason: format!(
                    "the referrers tag is not an image index (line {}, column {})",
                    e.line(),
                    e.column()
                ),
            })?;
        Ok(Some((index.manifests.unwrap_or_default(), fetched.digest)))
    }

    /// The image index text of a referrers tag-schema index listing `manifests`.
    pub fn referrers_index_bytes(manifests: &[ArtifactDescriptor]) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct IndexOut<'a> {
            schema_version: u32,
            media_type: &'static str,
            manifests: &'a [ArtifactDescriptor],
        }
        serde_json::to_vec(&IndexOut {
            schema_version: 2,
            media_type: OCI_INDEX_MEDIA_TYPE,
            manifests,
        })
        .unwrap_or_default()
    }

    /// Reads a manifest by digest or tag, bounded by the client's manifest limit; a digest
    /// reference is verified against the bytes.
    pub async fn manifest(
        &self,
        repo: &Repository,
        reference: &str,
    ) -> Result<FetchedManifest, OciError> {
        self.manifest_limited(repo, reference, self.options.max_manifest_bytes)
            .await
    }

    async fn manifest_limited(
        &self,
        repo: &Repository,
        reference: &str,
        limit: u64,
    ) -> Result<FetchedManifest, OciError> {
        let text = repo.at(reference);
        self.deadline("fetch manifest", &text, async {
            let step = Step {
                operation: "fetch manifest",
                what: "manifest",
                reference: &text,
            };
            let url = self.url(repo, &format!("manifests/{reference}"))?;
            let (bytes, headers) = self
                .reader
                .get_bounded(
                    step,
                    &url,
                    Some(MANIFEST_ACCEPT),
                    &Self::pull_scope(repo),
                    limit,
                    &mut |_| {},
                )
                .await?;
            let digest = sha256_digest(&bytes);
            if reference.starts_with("sha256:") && digest != reference {
                return Err(OciError::DigestMismatch {
                    what: "manifest",
                    reference: text.clone(),
                    expected: reference.to_owned(),
                    actual: digest,
                });
            }
            let media_type = headers
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(|t| t.split(';').next().unwrap_or_default().trim().to_owned())
                .unwrap_or_default();
            Ok(FetchedManifest {
                bytes,
                digest,
                media_type,
            })
        })
        .await
    }

    /// Reads a blob whose descriptor says `digest` and `size`; a size over `limit` is refused
    /// before any read, and the bytes must match both.
    pub async fn blob(
        &self,
        repo: &Repository,
        digest: &str,
        size: u64,
        limit: u64,
    ) -> Result<Vec<u8>, OciError> {
        let text = repo.at(digest);
        self.deadline("fetch blob", &text, async {
            let step = Step {
                operation: "fetch blob",
                what: "blob",
                reference: &text,
            };
            if size > limit {
                return Err(OciError::TooLarge {
                    what: "blob",
                    reference: text.clone(),
                    size,
                    limit,
                });
            }
            let url = self.url(repo, &format!("blobs/{digest}"))?;
            let (bytes, _) = self
                .reader
                .get_bounded(step, &url, None, &Self::pull_scope(repo), size, &mut |_| {})
                .await?;
            let actual = sha256_digest(&bytes);
            if actual != digest || bytes.len() as u64 != size {
                return Err(OciError::DigestMismatch {
                    what: "blob",
                    reference: text.clone(),
                    expected: format!("{digest} ({size} bytes)"),
                    actual: format!("{actual} ({} bytes)", bytes.len()),
                });
            }
            Ok(bytes)
        })
        .await
    }

    /// Uploads a blob (a monolithic `POST` + `PUT ?digest=`); with `check_exists`, a `HEAD`
    /// first skips the upload when the registry has it. Returns whether it was uploaded.
    pub async fn push_blob(
        &self,
        repo: &Repository,
        bytes: &[u8],
        check_exists: bool,
    ) -> Result<bool, OciError> {
        let digest = sha256_digest(bytes);
        let text = repo.at(&digest);
        self.deadline("push blob", &text, async {
            let step = Step {
                operation: "push blob",
                what: "blob",
                reference: &text,
            };
            let scope = Self::push_scope(repo);
            if check_exists {
                let url = self.url(repo, &format!("blobs/{digest}"))?;
                match self
                    .reader
                    .send(step, Method::HEAD, &url, None, &scope)
                    .await
                {
                    Ok(_) => return Ok(false),
                    Err(e) if e.class() == ErrorClass::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            let start = self.url(repo, "blobs/uploads/")?;
            let response = self
                .reader
                .send_body(
                    step,
                    Method::POST,
                    &start,
                    None,
                    &scope,
                    Some(Body {
                        bytes: &[],
                        content_type: "application/octet-stream",
                    }),
                )
                .await?;
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|l| start.join(l).ok())
                .ok_or_else(|| OciError::BadManifest {
                    reference: text.clone(),
                    reason: "the upload answer has no usable Location".to_owned(),
                })?;
            if !self.reader.allowed(&start, &location) {
                return Err(OciError::HostRefused {
                    operation: "push blob",
                    reference: text.clone(),
                    kind: "upload location",
                    host: location.host_str().unwrap_or_default().to_owned(),
                });
            }
            let mut put = location;
            put.query_pairs_mut().append_pair("digest", &digest);
            self.reader
                .send_body(
                    step,
                    Method::PUT,
                    &put,
                    None,
                    &scope,
                    Some(Body {
                        bytes,
                        content_type: "application/octet-stream",
                    }),
                )
                .await?;
            Ok(true)
        })
        .await
    }

    /// Writes a manifest under `reference` (its digest for an untagged push, or a tag) and
    /// returns its digest. A `Docker-Content-Digest` answer must equal the computed digest.
    pub async fn put_manifest(
        &self,
        repo: &Repository,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<String, OciError> {
        let digest = sha256_digest(bytes);
        let text = repo.at(reference);
        self.deadline("push manifest", &text, async {
            let step = Step {
                operation: "push manifest",
                what: "manifest",
                reference: &text,
            };
            let url = self.url(repo, &format!("manifests/{reference}"))?;
            let response = self
                .reader
                .send_body(
                    step,
                    Method::PUT,
                    &url,
                    None,
                    &Self::push_scope(repo),
                    Some(Body {
                        bytes,
                        content_type: media_type,
                    }),
                )
                .await?;
            if let Some(sent) = response
                .headers()
                .get("docker-content-digest")
                .and_then(|v| v.to_str().ok())
                && sent != digest
            {
                return Err(OciError::DigestMismatch {
                    what: "manifest",
                    reference: text.clone(),
                    expected: digest.clone(),
                    actual: sent.to_owned(),
                });
            }
            Ok(digest.clone())
        })
        .await
    }

    /// Deletes a manifest by digest (tests and operators; the evidence store never deletes).
    pub async fn delete_manifest(&self, repo: &Repository, digest: &str) -> Result<(), OciError> {
        let text = repo.at(digest);
        self.deadline("delete manifest", &text, async {
            let step = Step {
                operation: "delete manifest",
                what: "manifest",
                reference: &text,
            };
            let url = self.url(repo, &format!("manifests/{digest}"))?;
            self.reader
                .send(
                    step,
                    Method::DELETE,
                    &url,
                    None,
                    &format!("repository:{}:delete", repo.name),
                )
                .await?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn link_next_is_parsed() {
        let mut h = HeaderMap::new();
        h.append(
            LINK,
            HeaderValue::from_static("</v2/a/referrers/sha256:x?n=2&last=b>; rel=\"next\""),
        );
        assert_eq!(
            next_link(&h).as_deref(),
            Some("/v2/a/referrers/sha256:x?n=2&last=b")
        );
        let mut h = HeaderMap::new();
        h.append(LINK, HeaderValue::from_static("</x>; rel=\"prev\""));
        assert_eq!(next_link(&h), None);
    }

    #[test]
    fn referrers_tag_replaces_the_colon() {
        assert_eq!(referrers_tag("sha256:abc"), "sha256-abc");
    }

    #[test]
    fn index_is_written_with_artifact_types() {
        let text = ArtifactClient::referrers_index_bytes(&[ArtifactDescriptor {
            media_type: OCI_MANIFEST_MEDIA_TYPE.to_owned(),
            digest: "sha256:1".to_owned(),
            size: 3,
            artifact_type: Some("t".to_owned()),
        }]);
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\
             \"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
             \"digest\":\"sha256:1\",\"size\":3,\"artifactType\":\"t\"}]}"
        );
    }
}
