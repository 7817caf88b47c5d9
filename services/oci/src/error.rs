//! Registry errors, classified so that callers can tell "the registry could not give us the
//! contract" (unreachable, auth rejected, not found: retry later, `Unavailable`) from "what we
//! got is wrong" (bad reference, corrupt or oversized artifact, no matching version: `Invalid`).

use oci_client::errors::{OciDistributionError, OciErrorCode};
use pacto_contract::bundle::BundleError;
use pacto_contract::reference::ReferenceError;

use crate::credentials::CredentialsError;

/// The class of a registry failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Could not connect, timed out, or the registry answered 5xx / 429.
    Unreachable,
    /// The registry rejected the credentials (401/403).
    AuthRejected,
    /// The repository, tag, manifest or blob does not exist.
    NotFound,
    /// The artifact exceeds a size limit.
    TooLarge,
    /// The artifact is not a valid Pacto bundle (bad manifest, digest mismatch, bad tarball).
    Corrupt,
    /// The reference is malformed.
    InvalidReference,
    /// No tag satisfies the request (no semver tags, or none matching a constraint).
    NoMatchingVersion,
    /// Credentials could not be loaded (unreadable or malformed docker config / secret).
    Credentials,
    /// The tag already exists and overwriting was not requested.
    AlreadyExists,
    /// The client could not be built.
    Client,
    /// The registry sent us (by a redirect or a token realm) to a host we may not contact.
    Refused,
}

impl ErrorClass {
    /// Low-cardinality label for metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            ErrorClass::Unreachable => "unreachable",
            ErrorClass::AuthRejected => "auth_rejected",
            ErrorClass::NotFound => "not_found",
            ErrorClass::TooLarge => "too_large",
            ErrorClass::Corrupt => "corrupt",
            ErrorClass::InvalidReference => "invalid_reference",
            ErrorClass::NoMatchingVersion => "no_matching_version",
            ErrorClass::Credentials => "credentials",
            ErrorClass::Refused => "refused",
            ErrorClass::AlreadyExists => "already_exists",
            ErrorClass::Client => "client",
        }
    }

    /// True when the failure says nothing about the contract itself (docs/design/resolution.md#invalid-or-unavailable:
    /// unreachable, auth rejected, not found, credential problems ⇒ `Unavailable`).
    pub fn is_unavailable(self) -> bool {
        matches!(
            self,
            ErrorClass::Unreachable
                | ErrorClass::AuthRejected
                | ErrorClass::NotFound
                | ErrorClass::Credentials
                | ErrorClass::Refused
        )
    }
}

/// A failed registry operation. Each variant is one failed step.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference is malformed.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The HTTP client could not be built.
    #[error("building the registry client")]
    ClientBuild {
        /// The underlying error.
        #[source]
        source: OciDistributionError,
    },
    /// The HTTP client for reads could not be built.
    #[error("building the registry HTTP client")]
    ReaderBuild {
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
    /// Credentials could not be loaded.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// A registry request failed; `class` says how.
    #[error("{operation} {reference}: {class_text}", class_text = class.label().replace('_', " "))]
    Registry {
        /// What was being done (`pull manifest`, `push blob`, `list tags`, ...).
        operation: &'static str,
        /// The reference involved.
        reference: String,
        /// The classification.
        class: ErrorClass,
        /// The client error.
        #[source]
        source: OciDistributionError,
    },
    /// A registry request could not be sent or its answer not read (no response text).
    #[error("{operation} {reference}: registry unreachable")]
    Transport {
        /// What was being done.
        operation: &'static str,
        /// The reference involved.
        reference: String,
        /// The HTTP client error (without its URL).
        #[source]
        source: reqwest::Error,
    },
    /// The registry answered with an error status. The body is never part of the message
    /// (docs/design/resolution.md#hostile-registries).
    #[error("{operation} {reference}: {class_text} (HTTP {status})", class_text = class.label().replace('_', " "))]
    Status {
        /// What was being done.
        operation: &'static str,
        /// The reference involved.
        reference: String,
        /// The HTTP status.
        status: u16,
        /// Its class.
        class: ErrorClass,
    },
    /// The registry pointed us (redirect or token realm) at a host that is neither its own nor on
    /// the allow-list.
    #[error(
        "{operation} {reference}: the registry's {kind} points at host {host:?}, which is not the \
         registry's own host; add it to --registry-allowed-hosts to trust it"
    )]
    HostRefused {
        /// What was being done.
        operation: &'static str,
        /// The reference involved.
        reference: String,
        /// `redirect` or `token realm`.
        kind: &'static str,
        /// The refused `host[:port]`.
        host: String,
    },
    /// A `Bearer` challenge whose realm is not a URL.
    #[error("token exchange {reference}: the registry's Bearer challenge has no usable realm URL")]
    BadChallenge {
        /// The reference involved.
        reference: String,
    },
    /// A registry URL could not be formed from the reference.
    #[error("{reference}: cannot form a registry URL")]
    BadUrl {
        /// The reference involved.
        reference: String,
    },
    /// A tag-list page is not the expected JSON (position only: no response text).
    #[error("list tags {reference}: the tag list is not valid JSON (line {line}, column {column})")]
    BadTagList {
        /// The repository.
        reference: String,
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
    },
    /// The repository's tag list is longer than the client reads.
    #[error(
        "list tags {reference}: more than {pages} pages of tags ({seen} tags read); the tag list \
         is too long to choose a version from"
    )]
    TooManyTags {
        /// The repository.
        reference: String,
        /// The page limit.
        pages: usize,
        /// Tags read before giving up.
        seen: usize,
    },
    /// A referrers listing has more pages than the client reads.
    #[error("list referrers {reference}: more than {pages} pages of referrers")]
    TooManyReferrerPages {
        /// The subject.
        reference: String,
        /// The page limit.
        pages: usize,
    },
    /// A referrers listing (or a referrers tag index) is not an OCI image index, or its `Link`
    /// header is unusable.
    #[error("list referrers {reference}: {reason}")]
    BadReferrers {
        /// The subject.
        reference: String,
        /// What is wrong (never response text).
        reason: String,
    },
    /// The layer stream broke while downloading.
    #[error("{operation} {reference}: download interrupted")]
    Download {
        /// What was being done.
        operation: &'static str,
        /// The reference involved.
        reference: String,
        /// The stream error.
        #[source]
        source: std::io::Error,
    },
    /// An operation exceeded its deadline.
    #[error("{operation} {reference}: timed out after {seconds}s")]
    Timeout {
        /// What was being done.
        operation: &'static str,
        /// The reference involved.
        reference: String,
        /// The deadline.
        seconds: u64,
    },
    /// A manifest, config or layer is larger than allowed.
    #[error("{what} of {reference} is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// `manifest`, `config` or `layer`.
        what: &'static str,
        /// The reference involved.
        reference: String,
        /// The size seen (declared or counted).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The manifest is not a usable image manifest.
    #[error("{reference}: invalid manifest: {reason}")]
    BadManifest {
        /// The reference involved.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// The content does not hash to its descriptor digest.
    #[error("{what} of {reference}: digest mismatch (expected {expected}, got {actual})")]
    DigestMismatch {
        /// `manifest`, `config` or `layer`.
        what: &'static str,
        /// The reference involved.
        reference: String,
        /// The digest expected.
        expected: String,
        /// The digest computed.
        actual: String,
    },
    /// The layer is not a valid Pacto bundle.
    #[error("{reference}: not a valid Pacto bundle")]
    Bundle {
        /// The reference involved.
        reference: String,
        /// Why.
        #[source]
        source: BundleError,
    },
    /// Packing a bundle for push failed.
    #[error("packing bundle")]
    Pack {
        /// Why.
        #[source]
        source: BundleError,
    },
    /// The repository has no tag that parses as a semantic version.
    #[error("{repository}: no semver tags found")]
    NoSemverTags {
        /// The repository.
        repository: String,
    },
    /// Semver tags exist but none satisfies the constraint.
    #[error("{repository}: no tags satisfy constraint {constraint:?}")]
    NoMatchingVersion {
        /// The repository.
        repository: String,
        /// The constraint.
        constraint: String,
    },
    /// The tag exists and `force` was not set.
    #[error("artifact already exists at {reference} (use --force to overwrite)")]
    AlreadyExists {
        /// The reference.
        reference: String,
    },
}

impl OciError {
    /// The classification of this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            OciError::Reference(_) | OciError::BadUrl { .. } => ErrorClass::InvalidReference,
            OciError::ClientBuild { .. } | OciError::ReaderBuild { .. } => ErrorClass::Client,
            OciError::Credentials(_) => ErrorClass::Credentials,
            OciError::Registry { class, .. } | OciError::Status { class, .. } => *class,
            OciError::Download { source, .. } => {
                if source.get_ref().is_some_and(
                    <dyn std::error::Error + Send + Sync>::is::<oci_client::errors::DigestError>,
                ) {
                    ErrorClass::Corrupt
                } else {
                    ErrorClass::Unreachable
                }
            }
            OciError::Timeout { .. } | OciError::Transport { .. } => ErrorClass::Unreachable,
            OciError::HostRefused { .. } => ErrorClass::Refused,
            OciError::BadChallenge { .. } => ErrorClass::AuthRejected,
            OciError::TooLarge { .. }
            | OciError::TooManyTags { .. }
            | OciError::TooManyReferrerPages { .. } => ErrorClass::TooLarge,
            OciError::Bundle { source, .. } => match source {
                BundleError::FileTooLarge { .. }
                | BundleError::TotalTooLarge { .. }
                | BundleError::TooManyEntries { .. }
                | BundleError::StreamTooLarge { .. } => ErrorClass::TooLarge,
                _ => ErrorClass::Corrupt,
            },
            OciError::BadManifest { .. }
            | OciError::BadReferrers { .. }
            | OciError::BadTagList { .. }
            | OciError::DigestMismatch { .. }
            | OciError::Pack { .. } => ErrorClass::Corrupt,
            OciError::NoSemverTags { .. } | OciError::NoMatchingVersion { .. } => {
                ErrorClass::NoMatchingVersion
            }
            OciError::AlreadyExists { .. } => ErrorClass::AlreadyExists,
        }
    }

    /// Shorthand for `self.class().is_unavailable()`.
    pub fn is_unavailable(&self) -> bool {
        self.class().is_unavailable()
    }

    /// The bundle error when the layer was downloaded but is not a valid Pacto bundle (for the
    /// entry it names, see [`BundleError::entry`]).
    pub fn bundle_error(&self) -> Option<&BundleError> {
        match self {
            OciError::Bundle { source, .. } => Some(source),
            _ => None,
        }
    }

    pub(crate) fn registry(
        operation: &'static str,
        reference: &impl ToString,
        source: OciDistributionError,
    ) -> Self {
        OciError::Registry {
            operation,
            reference: reference.to_string(),
            class: classify(&source),
            source,
        }
    }
}

/// Maps an `oci-client` error to a class.
pub(crate) fn classify(err: &OciDistributionError) -> ErrorClass {
    match err {
        OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => {
            ErrorClass::Unreachable
        }
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => ErrorClass::AuthRejected,
        OciDistributionError::ImageManifestNotFoundError(_) => ErrorClass::NotFound,
        OciDistributionError::RegistryError { envelope, .. } => {
            let mut class = ErrorClass::Unreachable;
            for e in &envelope.errors {
                match e.code {
                    OciErrorCode::Unauthorized | OciErrorCode::Denied => {
                        return ErrorClass::AuthRejected;
                    }
                    OciErrorCode::ManifestUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::BlobUnknown
                    | OciErrorCode::NotFound => class = ErrorClass::NotFound,
                    OciErrorCode::ManifestInvalid
                    | OciErrorCode::DigestInvalid
                    | OciErrorCode::SizeInvalid
                    | OciErrorCode::NameInvalid
                    | OciErrorCode::TagInvalid
                        if class != ErrorClass::NotFound =>
                    {
                        class = ErrorClass::Corrupt;
                    }
                    _ => {}
                }
            }
            class
        }
        OciDistributionError::ServerError { code, .. } => match code {
            401 | 403 => ErrorClass::AuthRejected,
            404 => ErrorClass::NotFound,
            400 | 405..=428 | 430..=499 => ErrorClass::Corrupt,
            _ => ErrorClass::Unreachable,
        },
        OciDistributionError::DigestError(_)
        | OciDistributionError::JsonError(_)
        | OciDistributionError::ManifestEncodingError(_)
        | OciDistributionError::ManifestParsingError(_)
        | OciDistributionError::VersionedParsingError(_)
        | OciDistributionError::UnsupportedMediaTypeError(_)
        | OciDistributionError::UnsupportedSchemaVersionError(_)
        | OciDistributionError::IncompatibleLayerMediaTypeError(_)
        | OciDistributionError::PullNoLayersError
        | OciDistributionError::ImageIndexParsingNoPlatformResolverError => ErrorClass::Corrupt,
        _ => ErrorClass::Unreachable,
    }
}
