//! OCI references (`oci://registry/repository[:tag][@digest]`), their validation and
//! normalisation (docs/design/contract.md#references-and-versions; docs/design/resolution.md#sources-and-resolution-policy).
//!
//! Grammar (after the optional `oci://` scheme):
//!
//! ```text
//! reference  := [registry "/"] repository [":" tag] ["@" digest]
//! registry   := the first "/"-separated segment when it contains "." or ":" or is "localhost";
//!               otherwise the registry is "index.docker.io" (and "docker.io" is rewritten to it)
//! repository := component ("/" component)*
//! component  := [a-z0-9]+ (("." | "_" | "__" | "-"+) [a-z0-9]+)*
//! tag        := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
//! digest     := "sha256:" 64 lowercase hex | "sha512:" 128 lowercase hex
//! ```
//!
//! A `:` is a tag separator only when it comes after the last `/` (before it, it is a registry
//! port). On Docker Hub a single-component repository gets the `library/` prefix, as Docker does.
//! Both a tag and a digest may be present (`repo:1.0@sha256:…`); the digest then identifies the
//! content and the tag is informational.

use std::fmt;
use std::str::FromStr;

/// The scheme every OCI reference carries on the command line and in contracts.
pub const OCI_SCHEME: &str = "oci://";
/// The registry that unqualified references resolve to.
pub const DEFAULT_REGISTRY: &str = "index.docker.io";

/// Why a reference was rejected. Every variant names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The reference was empty (after the scheme).
    #[error("OCI reference is empty")]
    Empty,
    /// The `oci://` scheme is required here but absent.
    #[error("OCI reference {input:?} must start with \"oci://\"")]
    MissingScheme {
        /// The whole input.
        input: String,
    },
    /// A different URL scheme was used.
    #[error("OCI reference {input:?} has unsupported scheme {scheme:?} (only \"oci://\")")]
    UnsupportedScheme {
        /// The whole input.
        input: String,
        /// The scheme found.
        scheme: String,
    },
    /// The registry host is malformed.
    #[error("OCI reference {input:?}: invalid registry {registry:?}: {reason}")]
    InvalidRegistry {
        /// The whole input.
        input: String,
        /// The registry part.
        registry: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The repository is missing.
    #[error("OCI reference {input:?} has no repository")]
    MissingRepository {
        /// The whole input.
        input: String,
    },
    /// A repository path component is malformed.
    #[error(
        "OCI reference {input:?}: invalid repository component {component:?} (lowercase letters, digits and single separators . _ __ - between them)"
    )]
    InvalidRepository {
        /// The whole input.
        input: String,
        /// The offending component.
        component: String,
    },
    /// The tag is malformed.
    #[error(
        "OCI reference {input:?}: invalid tag {tag:?} (1-128 characters of [A-Za-z0-9_.-], not starting with . or -)"
    )]
    InvalidTag {
        /// The whole input.
        input: String,
        /// The tag found.
        tag: String,
    },
    /// The digest is malformed or uses an unsupported algorithm.
    #[error("OCI reference {input:?}: invalid digest {digest:?}: {reason}")]
    InvalidDigest {
        /// The whole input.
        input: String,
        /// The digest found.
        digest: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A percent escape was malformed.
    #[error("OCI reference {input:?}: malformed percent-encoding")]
    BadPercentEncoding {
        /// The whole input.
        input: String,
    },
}

/// A parsed, normalised OCI reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl Reference {
    /// Parses a reference that must start with `oci://` (the CLI and contract form).
    pub fn parse_oci(input: &str) -> Result<Self, ReferenceError> {
        let Some(rest) = input.strip_prefix(OCI_SCHEME) else {
            if let Some((scheme, _)) = input.split_once("://") {
                return Err(ReferenceError::UnsupportedScheme {
                    input: input.to_owned(),
                    scheme: scheme.to_owned(),
                });
            }
            return Err(ReferenceError::MissingScheme {
                input: input.to_owned(),
            });
        };
        Self::parse_bare(input, rest)
    }

    /// Parses a reference with an optional `oci://` prefix (the operator's `contractRef.oci`).
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        let rest = input.strip_prefix(OCI_SCHEME).unwrap_or(input);
        if let Some((scheme, _)) = rest.split_once("://") {
            return Err(ReferenceError::UnsupportedScheme {
                input: input.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        Self::parse_bare(input, rest)
    }

    /// Like [`Reference::parse`], but first URL-decodes percent escapes (`%2F`, `%3A`, `%40`).
    pub fn parse_url_encoded(input: &str) -> Result<Self, ReferenceError> {
        let decoded = percent_decode(input).ok_or_else(|| ReferenceError::BadPercentEncoding {
            input: input.to_owned(),
        })?;
        Self::parse(&decoded)
    }

    fn parse_bare(input: &str, rest: &str) -> Result<Self, ReferenceError> {
        if rest.is_empty() {
            return Err(ReferenceError::Empty);
        }
        let (name_tag, digest) = match rest.split_once('@') {
            Some((a, d)) => (a, Some(d)),
            None => (rest, None),
        };
        let last_slash = name_tag.rfind('/');
        let (name, tag) = match name_tag.rfind(':') {
            Some(colon) if last_slash.is_none_or(|s| colon > s) => {
                (&name_tag[..colon], Some(&name_tag[colon + 1..]))
            }
            _ => (name_tag, None),
        };
        let (registry, repository) = split_registry(name);
        validate_registry(input, registry)?;
        if repository.is_empty() {
            return Err(ReferenceError::MissingRepository {
                input: input.to_owned(),
            });
        }
        for component in repository.split('/') {
            if !valid_component(component) {
                return Err(ReferenceError::InvalidRepository {
                    input: input.to_owned(),
                    component: component.to_owned(),
                });
            }
        }
        if let Some(tag) = tag
            && !is_valid_tag(tag)
        {
            return Err(ReferenceError::InvalidTag {
                input: input.to_owned(),
                tag: tag.to_owned(),
            });
        }
        if let Some(digest) = digest {
            validate_digest(digest).map_err(|reason| ReferenceError::InvalidDigest {
                input: input.to_owned(),
                digest: digest.to_owned(),
                reason,
            })?;
        }
        let registry = if registry == "docker.io" {
            DEFAULT_REGISTRY
        } else {
            registry
        };
        let repository = if registry == DEFAULT_REGISTRY && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository.to_owned()
        };
        Ok(Reference {
            registry: registry.to_owned(),
            repository,
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        })
    }

    /// The registry host (with port, if any).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository path.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest (`sha256:…`), if any.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// True when a tag or digest is present, i.e. no semver resolution is needed (docs/design/contract.md#references-and-versions).
    pub fn has_explicit_version(&self) -> bool {
        self.tag.is_some() || self.digest.is_some()
    }

    /// The same repository with `tag` and no digest.
    pub fn with_tag(&self, tag: &str) -> Result<Self, ReferenceError> {
        if !is_valid_tag(tag) {
            return Err(ReferenceError::InvalidTag {
                input: self.to_string(),
                tag: tag.to_owned(),
            });
        }
        Ok(Reference {
            tag: Some(tag.to_owned()),
            digest: None,
            ..self.without_version()
        })
    }

    /// The same repository pinned to `digest`, dropping any tag (digest pinning, docs/design/contract.md#references-and-versions).
    pub fn with_digest(&self, digest: &str) -> Result<Self, ReferenceError> {
        validate_digest(digest).map_err(|reason| ReferenceError::InvalidDigest {
            input: self.to_string(),
            digest: digest.to_owned(),
            reason,
        })?;
        Ok(Reference {
            digest: Some(digest.to_owned()),
            ..self.without_version()
        })
    }

    /// The repository alone (`registry/repository`), no tag or digest.
    #[must_use]
    pub fn without_version(&self) -> Self {
        Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: None,
        }
    }

    /// `registry/repository` as a string.
    pub fn repository_url(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The reference with the `oci://` scheme.
    pub fn to_oci_string(&self) -> String {
        format!("{OCI_SCHEME}{self}")
    }
}

impl fmt::Display for Reference {
    /// Without the scheme: `registry/repository[:tag][@digest]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reference::parse(s)
    }
}

/// Splits `name` into (registry, repository) with the Docker host rule.
fn split_registry(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first, rest)
        }
        _ => (DEFAULT_REGISTRY, name),
    }
}

/// The registry host of a reference-like string, normalised with the same rule as
/// [`Reference`] (scheme and path stripped, `docker.io` → `index.docker.io`). Used to match
/// credentials (docker config `auths` keys) to a registry.
pub fn normalize_registry_host(value: &str) -> String {
    let value = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"))
        .or_else(|| value.strip_prefix(OCI_SCHEME))
        .unwrap_or(value);
    let host = value.split('/').next().unwrap_or(value);
    match host {
        "docker.io" | "registry-1.docker.io" | "index.docker.io" => DEFAULT_REGISTRY.to_owned(),
        h => h.to_owned(),
    }
}

fn validate_registry(input: &str, registry: &str) -> Result<(), ReferenceError> {
    let err = |reason| ReferenceError::InvalidRegistry {
        input: input.to_owned(),
        registry: registry.to_owned(),
        reason,
    };
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        // [ipv6]:port
        let Some((addr, after)) = rest.split_once(']') else {
            return Err(err("unterminated IPv6 address"));
        };
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return Err(err("invalid IPv6 address"));
        }
        match after {
            "" => return Ok(()),
            p => match p.strip_prefix(':') {
                Some(port) => ("ipv6", Some(port)),
                None => return Err(err("unexpected characters after IPv6 address")),
            },
        }
    } else {
        match registry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (registry, None),
        }
    };
    if host.is_empty() {
        return Err(err("empty host"));
    }
    for label in host.split('.') {
        if label.is_empty()
            || label.starts_with('-')
            || label.ends_with('-')
            || !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(err("host labels are letters, digits and inner hyphens"));
        }
    }
    if let Some(port) = port
        && (port.is_empty()
            || !port.bytes().all(|b| b.is_ascii_digit())
            || port.parse::<u16>().is_err())
    {
        return Err(err("port must be a number from 0 to 65535"));
    }
    Ok(())
}

/// One repository path component: `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn valid_component(c: &str) -> bool {
    let bytes = c.as_bytes();
    if bytes.is_empty() {
        return false;
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if alnum(b) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or "-"+.
        let start = i;
        match b {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if bytes.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
        if i == start || !bytes.get(i).copied().is_some_and(alnum) {
            return false;
        }
    }
    true
}

/// Whether `tag` is a valid OCI tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub fn is_valid_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks a digest string: `sha256:` + 64 or `sha512:` + 128 lowercase hex characters.
pub fn validate_digest(digest: &str) -> Result<(), &'static str> {
    let Some((algo, hex)) = digest.split_once(':') else {
        return Err("expected <algorithm>:<hex>");
    };
    let want = match algo {
        "sha256" => 64,
        "sha512" => 128,
        _ => return Err("unsupported algorithm (sha256 or sha512)"),
    };
    if hex.len() != want {
        return Err("wrong hex length for the algorithm");
    }
    if !hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err("hex must be lowercase 0-9a-f");
    }
    Ok(())
}

fn percent_decode(input: &str) -> Option<String> {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let s = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(s, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
