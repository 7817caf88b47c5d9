//! OCI registry access for Pacto bundles: push, pull, tags, digests and credentials.
//!
//! A bundle artifact (docs/design/contract.md#bundle-packing) is an OCI image manifest with one config blob (an image
//! config carrying the `io.pacto.*` labels) and exactly one layer
//! (`application/vnd.pacto.bundle.layer.v1.tar+gzip`) holding the deterministic tar.gz of the
//! bundle directory. Registries are reached over HTTPS unless their `host[:port]` is in the
//! plain-HTTP allow-list. Every failure is an [`OciError`] whose [`ErrorClass`] separates
//! "registry unavailable" from "artifact invalid".

mod artifacts;
mod client;
mod credentials;
mod error;
mod fetch;
mod manifest;
mod tags;

pub use artifacts::{
    ArtifactClient, ArtifactDescriptor, FetchedManifest, MAX_REFERRERS_PAGE_BYTES,
    OCI_INDEX_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE, Referrers, Repository, referrers_tag,
    sha256_digest,
};
pub use client::{
    ClientOptions, DEFAULT_ALLOWED_HOSTS, Inspection, Progress, PulledBundle, PushResult,
    RegistryClient, Resolved,
};
pub use credentials::{Credentials, CredentialsError, DockerConfig, Keychain};
pub use error::{ErrorClass, OciError};
pub use manifest::{BundleConfig, BundleMeta, Descriptor, ImageManifest};
pub use tags::{BadPage, TAG_PAGE_SIZE, TagPages};
