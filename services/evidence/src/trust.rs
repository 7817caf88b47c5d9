//! The trust store (docs/design/envelopes.md#trust): which public keys are trusted, the one
//! producer each key may claim, the subjects it may report and the contract repositories its
//! evidence may reference.
//!
//! Two sources, chosen by `--trust`:
//! - a `.yaml`/`.yml` file: the structured configuration `pacto.dev/evidence-trust/v1`;
//! - a `.pub` file or a directory of `*.pub` files (bare mode): the file stem
//!   `<producer>__<keyId>` (or `<keyId>`, producer = key id) binds the producer; no scopes.
//!
//! Rotation is an added entry for the same producer under a new key id; removing the old entry
//! retires the old key.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;

use crate::codes::ErrorCode;
use crate::glob;
use crate::keys::{self, IdentifierError, KeyError};

/// The structured configuration's apiVersion.
pub const TRUST_API_VERSION: &str = "pacto.dev/evidence-trust/v1";

/// One trusted key and what it may claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustEntry {
    /// Verifies the signature.
    pub public_key: VerifyingKey,
    /// The only producer id an envelope signed with this key may claim; empty means unbound
    /// (the loaders never produce that).
    pub producer_id: String,
    /// `path.Match` globs over `evidenceSet.Subject.name`; empty means any subject.
    pub subjects: Vec<String>,
    /// `<registry>/<repository>` prefixes (on path-segment boundaries) the ContractRef must fall
    /// in; empty means any repository.
    pub contract_repos: Vec<String>,
}

impl TrustEntry {
    /// An entry bound to `producer_id` with no scopes.
    pub fn new(public_key: VerifyingKey, producer_id: impl Into<String>) -> Self {
        Self {
            public_key,
            producer_id: producer_id.into(),
            subjects: Vec::new(),
            contract_repos: Vec::new(),
        }
    }

    /// Whether the subject name is within the key's scope.
    pub fn subject_allowed(&self, name: &str) -> bool {
        self.subjects.is_empty()
            || self
                .subjects
                .iter()
                .any(|p| glob::matches(p, name).unwrap_or(false))
    }

    /// Whether `<registry>/<repository>` is within the key's repositories.
    pub fn repository_allowed(&self, repository: &str) -> bool {
        self.contract_repos.is_empty()
            || self.contract_repos.iter().any(|p| {
                repository == p
                    || (repository.starts_with(p.as_str())
                        && repository.as_bytes().get(p.len()) == Some(&b'/'))
            })
    }

    /// The ContractRef policy of ingestion (docs/design/envelopes.md#contract-ref): the ref
    /// must be `oci://<registry>/<repository>@sha256:<64 lower-case hex>` and within the key's
    /// repositories.
    pub fn authorize_contract_ref(
        &self,
        key_id: &str,
        contract_ref: &str,
    ) -> Result<ContractRef, ContractRefError> {
        let parsed = ContractRef::parse(contract_ref)?;
        if !self.repository_allowed(&parsed.repository) {
            return Err(ContractRefError::RepositoryNotAllowed {
                repository: parsed.repository,
                key_id: key_id.to_owned(),
            });
        }
        Ok(parsed)
    }
}

/// A ContractRef that passed the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractRef {
    /// `<registry>/<repository>` (everything between `oci://` and `@`).
    pub repository: String,
    /// `sha256:<64 hex>`.
    pub digest: String,
}

impl ContractRef {
    /// Parses `oci://<registry>/<repository>@sha256:<64 lower-case hex>` (split at the first
    /// `@`).
    pub fn parse(value: &str) -> Result<Self, ContractRefError> {
        let rest = value
            .strip_prefix("oci://")
            .ok_or_else(|| ContractRefError::Scheme {
                value: value.to_owned(),
            })?;
        let (repository, digest) =
            rest.split_once('@')
                .ok_or_else(|| ContractRefError::MissingDigest {
                    value: value.to_owned(),
                })?;
        let hex = digest
            .strip_prefix("sha256:")
            .ok_or_else(|| ContractRefError::Digest {
                value: value.to_owned(),
            })?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(ContractRefError::Digest {
                value: value.to_owned(),
            });
        }
        if repository.is_empty() {
            return Err(ContractRefError::EmptyRepository {
                value: value.to_owned(),
            });
        }
        Ok(Self {
            repository: repository.to_owned(),
            digest: digest.to_owned(),
        })
    }
}

/// Why a ContractRef is refused (`contract_ref_rejected`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractRefError {
    /// Not an `oci://` reference.
    #[error("evidenceSet.ContractRef: {value:?} does not start with oci://")]
    Scheme {
        /// The ref.
        value: String,
    },
    /// No `@digest`.
    #[error("evidenceSet.ContractRef: {value:?} has no @sha256:<digest> (a tag is not immutable)")]
    MissingDigest {
        /// The ref.
        value: String,
    },
    /// The digest is not `sha256:` + 64 lower-case hex characters.
    #[error("evidenceSet.ContractRef: {value:?} does not end in sha256:<64 lower-case hex>")]
    Digest {
        /// The ref.
        value: String,
    },
    /// Nothing between `oci://` and `@`.
    #[error("evidenceSet.ContractRef: {value:?} names no repository")]
    EmptyRepository {
        /// The ref.
        value: String,
    },
    /// The repository is outside the key's `allowedContractRepos`.
    #[error("evidenceSet.ContractRef: repository {repository:?} is not allowed for key {key_id:?}")]
    RepositoryNotAllowed {
        /// `<registry>/<repository>`.
        repository: String,
        /// The signing key.
        key_id: String,
    },
}

impl ContractRefError {
    /// The stable code: always `contract_ref_rejected`.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::ContractRefRejected
    }
}

/// Trusted keys by key id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustStore {
    entries: BTreeMap<String, TrustEntry>,
}

impl TrustStore {
    /// An empty store (verification then refuses every key).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an entry (rotation: add the new key id, later remove the old one).
    pub fn insert(&mut self, key_id: impl Into<String>, entry: TrustEntry) {
        self.entries.insert(key_id.into(), entry);
    }

    /// Removes an entry (retiring a key).
    pub fn remove(&mut self, key_id: &str) -> Option<TrustEntry> {
        self.entries.remove(key_id)
    }

    /// The entry of a key id.
    pub fn entry(&self, key_id: &str) -> Option<&TrustEntry> {
        self.entries.get(key_id)
    }

    /// The key ids, sorted.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is trusted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Loads `--trust`: a `.yaml`/`.yml` structured configuration, one `.pub` file, or a
    /// directory whose `*.pub` files are loaded (subdirectories and other files are ignored).
    pub fn load(path: &Path) -> Result<Self, TrustError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        if ext == "yaml" || ext == "yml" {
            let text = std::fs::read_to_string(path).map_err(|source| TrustError::Io {
                path: path.to_owned(),
                source,
            })?;
            let dir = path.parent().unwrap_or_else(|| Path::new("."));
            return Self::from_config(path, &text, dir);
        }
        let meta = std::fs::metadata(path).map_err(|source| TrustError::Io {
            path: path.to_owned(),
            source,
        })?;
        if meta.is_dir() {
            let mut files = Vec::new();
            let read = std::fs::read_dir(path).map_err(|source| TrustError::Io {
                path: path.to_owned(),
                source,
            })?;
            for item in read {
                let item = item.map_err(|source| TrustError::Io {
                    path: path.to_owned(),
                    source,
                })?;
                let file = item.path();
                if file.extension().is_some_and(|e| e == "pub") && file.is_file() {
                    files.push(file);
                }
            }
            files.sort();
            Self::from_pub_files(path, &files)
        } else if ext == "pub" {
            Self::from_pub_files(path, &[path.to_owned()])
        } else {
            Err(TrustError::UnknownSource {
                path: path.to_owned(),
            })
        }
    }

    /// Bare mode: each `<producer>__<keyId>.pub` or `<keyId>.pub` file.
    fn from_pub_files(source: &Path, files: &[PathBuf]) -> Result<Self, TrustError> {
        let mut store = Self::new();
        for file in files {
            let stem = file
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            let (producer, key_id) = stem.split_once("__").unwrap_or((stem, stem));
            if producer.is_empty() || key_id.is_empty() {
                return Err(TrustError::BareName { path: file.clone() });
            }
            let public_key = keys::read_verifying_key(file)?;
            if store.entry(key_id).is_some() {
                return Err(TrustError::DuplicateKeyId {
                    field: file.display().to_string(),
                    key_id: key_id.to_owned(),
                });
            }
            store.insert(key_id, TrustEntry::new(public_key, producer));
        }
        if store.is_empty() {
            return Err(TrustError::Empty {
                path: source.to_owned(),
            });
        }
        Ok(store)
    }

    /// The structured configuration; `publicKeyFile`s are resolved in `dir`. `source` names the
    /// configuration in errors.
    pub fn from_config(source: &Path, text: &str, dir: &Path) -> Result<Self, TrustError> {
        let config: TrustConfig = serde_norway::from_str(text).map_err(|e| TrustError::Config {
            path: source.to_owned(),
            message: e.to_string(),
        })?;
        let invalid = |field: String, message: String| TrustError::Invalid {
            path: source.to_owned(),
            field,
            message,
        };
        if config.api_version != TRUST_API_VERSION {
            return Err(invalid(
                "apiVersion".into(),
                format!(
                    "unsupported {:?} (expected {TRUST_API_VERSION:?})",
                    config.api_version
                ),
            ));
        }
        if config.keys.is_empty() {
            return Err(TrustError::Empty {
                path: source.to_owned(),
            });
        }
        let mut store = Self::new();
        let mut file_owner: HashMap<&str, &str> = HashMap::new();
        for (i, key) in config.keys.iter().enumerate() {
            let at = |leaf: &str| format!("keys[{i}].{leaf}");
            keys::check_identifier(&key.key_id)
                .map_err(|e| TrustError::Identifier(at("keyId"), e))?;
            keys::check_identifier(&key.producer_id)
                .map_err(|e| TrustError::Identifier(at("producerId"), e))?;
            if store.entry(&key.key_id).is_some() {
                return Err(TrustError::DuplicateKeyId {
                    field: at("keyId"),
                    key_id: key.key_id.clone(),
                });
            }
            let file = key.public_key_file.as_str();
            if file.is_empty()
                || file == "."
                || file == ".."
                || file.contains('/')
                || file.contains('\\')
            {
                return Err(invalid(
                    at("publicKeyFile"),
                    format!("{file:?} must be a bare file name in the configuration's directory"),
                ));
            }
            if let Some(owner) = file_owner.get(file)
                && *owner != key.producer_id
            {
                return Err(invalid(
                    at("publicKeyFile"),
                    format!(
                        "{file:?} is already bound to producer {owner:?}, not {:?}",
                        key.producer_id
                    ),
                ));
            }
            file_owner.insert(file, &key.producer_id);
            for (j, pattern) in key.allowed_subjects.iter().enumerate() {
                glob::validate(pattern).map_err(|e| {
                    invalid(format!("keys[{i}].allowedSubjects[{j}]"), e.to_string())
                })?;
            }
            for (j, prefix) in key.allowed_contract_repos.iter().enumerate() {
                let problem = if prefix.is_empty() {
                    Some("is empty")
                } else if prefix.chars().any(char::is_whitespace) {
                    Some("contains whitespace")
                } else if prefix.contains("oci://") {
                    Some("must not contain oci:// (write <registry>/<repository>)")
                } else if prefix.contains('@') {
                    Some("must not contain @ (a repository prefix, not a reference)")
                } else {
                    None
                };
                if let Some(problem) = problem {
                    return Err(invalid(
                        format!("keys[{i}].allowedContractRepos[{j}]"),
                        format!("{prefix:?} {problem}"),
                    ));
                }
            }
            let public_key = keys::read_verifying_key(&dir.join(file))?;
            store.insert(
                key.key_id.clone(),
                TrustEntry {
                    public_key,
                    producer_id: key.producer_id.clone(),
                    subjects: key.allowed_subjects.clone(),
                    contract_repos: key.allowed_contract_repos.clone(),
                },
            );
        }
        Ok(store)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustConfig {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    keys: Vec<TrustKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TrustKey {
    #[serde(default)]
    key_id: String,
    #[serde(default)]
    producer_id: String,
    #[serde(default)]
    public_key_file: String,
    #[serde(default)]
    allowed_subjects: Vec<String>,
    #[serde(default)]
    allowed_contract_repos: Vec<String>,
}

/// Why a trust store could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A file or directory could not be read.
    #[error("{path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `--trust` names neither a YAML file, a `.pub` file nor a directory.
    #[error("{path}: not a trust configuration (.yaml/.yml), a .pub file or a directory")]
    UnknownSource {
        /// The path.
        path: PathBuf,
    },
    /// No key.
    #[error("{path}: the trust store is empty")]
    Empty {
        /// The path.
        path: PathBuf,
    },
    /// A bare file name has an empty producer or key id.
    #[error("{path}: expected <producer>__<keyId>.pub or <keyId>.pub")]
    BareName {
        /// The file.
        path: PathBuf,
    },
    /// The same key id twice.
    #[error("{field}: duplicate key id {key_id:?}")]
    DuplicateKeyId {
        /// Where (a config path or the file).
        field: String,
        /// The key id.
        key_id: String,
    },
    /// The YAML does not decode (unknown keys, wrong types).
    #[error("{path}: {message}")]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// The decoder's message (with the field and position).
        message: String,
    },
    /// A field of the configuration is invalid.
    #[error("{path}: {field}: {message}")]
    Invalid {
        /// The configuration file.
        path: PathBuf,
        /// The field path (`keys[1].allowedSubjects[0]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A producer or key id breaks the grammar.
    #[error("{0}")]
    Identifier(String, #[source] IdentifierError),
    /// A public key file is missing or malformed.
    #[error(transparent)]
    Key(#[from] KeyError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(repos: &[&str]) -> TrustEntry {
        let key = ed25519_dalek::SigningKey::from_bytes(&[1u8; 32]);
        TrustEntry {
            contract_repos: repos.iter().map(|s| (*s).to_owned()).collect(),
            ..TrustEntry::new(key.verifying_key(), "p")
        }
    }

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn contract_ref_policy() {
        let e = entry(&["ghcr.io/acme"]);
        let ok = e
            .authorize_contract_ref("k", &format!("oci://ghcr.io/acme/orders@{DIGEST}"))
            .unwrap();
        assert_eq!(ok.repository, "ghcr.io/acme/orders");
        assert!(
            e.authorize_contract_ref("k", &format!("oci://ghcr.io/acme@{DIGEST}"))
                .is_ok()
        );
        let refused = e
            .authorize_contract_ref("k", &format!("oci://ghcr.io/acme-evil/x@{DIGEST}"))
            .unwrap_err();
        assert!(matches!(
            refused,
            ContractRefError::RepositoryNotAllowed { .. }
        ));
        assert_eq!(refused.code(), ErrorCode::ContractRefRejected);
        for bad in [
            format!("ghcr.io/acme/orders@{DIGEST}"),
            "oci://ghcr.io/acme/orders:1.0.0".to_owned(),
            "oci://ghcr.io/acme/orders@sha256:ABC".to_owned(),
            format!("oci://ghcr.io/acme/orders@{}", DIGEST.to_uppercase()),
            format!("oci://@{DIGEST}"),
        ] {
            assert!(
                entry(&[]).authorize_contract_ref("k", &bad).is_err(),
                "{bad}"
            );
        }
    }
}
