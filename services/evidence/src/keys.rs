//! Ed25519 keys as files, key ids and the identifier grammar (docs/design/envelopes.md#keys).
//!
//! - private key `<keyId>.key`: the 32-byte seed, standard base64 with padding, a newline;
//!   mode 0600;
//! - public key `<producer>__<keyId>.pub` (or `<keyId>.pub` when the producer is the key id):
//!   the 32-byte public key, standard base64, a newline; mode 0644.
//!
//! Readers trim surrounding whitespace and require the exact length.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest as _, Sha256};

/// The longest identifier (producer or key id).
pub const MAX_IDENTIFIER_LEN: usize = 64;

/// An identifier does not follow the grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{value:?} is not a valid identifier: {reason} (1-64 ASCII letters, digits, '.' and '-', starting with a letter or digit, no '..')"
)]
pub struct IdentifierError {
    /// The rejected text.
    pub value: String,
    /// What rule it breaks.
    pub reason: &'static str,
}

/// Checks the producer / key id grammar: 1–64 ASCII letters, digits, `.` and `-`; the first
/// character alphanumeric; no `..`; no `_` (so that `__` separates producer and key id in a
/// file name).
pub fn check_identifier(value: &str) -> Result<(), IdentifierError> {
    let fail = |reason| {
        Err(IdentifierError {
            value: value.to_owned(),
            reason,
        })
    };
    if value.is_empty() {
        return fail("empty");
    }
    if value.len() > MAX_IDENTIFIER_LEN {
        return fail("longer than 64 characters");
    }
    if !value.as_bytes()[0].is_ascii_alphanumeric() {
        return fail("does not start with a letter or digit");
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '-'))
    {
        return if bad == '_' {
            fail("contains '_'")
        } else {
            fail("contains a character other than letters, digits, '.' and '-'")
        };
    }
    if value.contains("..") {
        return fail("contains '..'");
    }
    Ok(())
}

/// The default key id: hex of the first 8 bytes of SHA-256 of the public key.
pub fn default_key_id(public: &VerifyingKey) -> String {
    let digest = Sha256::digest(public.as_bytes());
    hex::encode(&digest[..8])
}

/// Errors of reading, writing and generating keys.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read or written.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The content is not standard base64.
    #[error("{path}: not standard base64")]
    Base64 {
        /// The file.
        path: PathBuf,
        /// The decoder's error (never echoes the key).
        #[source]
        source: base64::DecodeError,
    },
    /// The decoded key has the wrong length.
    #[error("{path}: the {what} is {found} bytes, expected 32")]
    Length {
        /// The file.
        path: PathBuf,
        /// `private key seed` or `public key`.
        what: &'static str,
        /// The decoded length.
        found: usize,
    },
    /// The public key bytes are not a point on the curve.
    #[error("{path}: not a valid Ed25519 public key")]
    InvalidPublicKey {
        /// The file.
        path: PathBuf,
    },
    /// keygen would overwrite a file.
    #[error("{path}: already exists (use --force to overwrite)")]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The operating system's random source failed.
    #[error("the random source failed: {0}")]
    Random(String),
    /// A producer or key id breaks the grammar.
    #[error(transparent)]
    Identifier(#[from] IdentifierError),
}

fn decode_32(path: &Path, text: &str, what: &'static str) -> Result<[u8; 32], KeyError> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|source| KeyError::Base64 {
            path: path.to_owned(),
            source,
        })?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| KeyError::Length {
        path: path.to_owned(),
        what,
        found: bytes.len(),
    })
}

fn read(path: &Path) -> Result<String, KeyError> {
    fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Parses the text of a private key file (`path` names it in errors).
pub fn parse_signing_key(path: &Path, text: &str) -> Result<SigningKey, KeyError> {
    Ok(SigningKey::from_bytes(&decode_32(
        path,
        text,
        "private key seed",
    )?))
}

/// Parses the text of a public key file (`path` names it in errors).
pub fn parse_verifying_key(path: &Path, text: &str) -> Result<VerifyingKey, KeyError> {
    let bytes = decode_32(path, text, "public key")?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::InvalidPublicKey {
        path: path.to_owned(),
    })
}

/// Reads a private key file.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    parse_signing_key(path, &read(path)?)
}

/// Reads a public key file.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey, KeyError> {
    parse_verifying_key(path, &read(path)?)
}

/// The text of a private key file.
pub fn signing_key_text(key: &SigningKey) -> String {
    format!("{}\n", STANDARD.encode(key.to_bytes()))
}

/// The text of a public key file.
pub fn verifying_key_text(key: &VerifyingKey) -> String {
    format!("{}\n", STANDARD.encode(key.as_bytes()))
}

/// A new key from the operating system's random source.
pub fn generate() -> Result<SigningKey, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The public key file name for a producer and key id.
pub fn public_key_file_name(producer: &str, key_id: &str) -> String {
    if producer == key_id {
        format!("{key_id}.pub")
    } else {
        format!("{producer}__{key_id}.pub")
    }
}

/// What [`write_key_pair`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPairFiles {
    /// The key id used.
    pub key_id: String,
    /// `<dir>/<keyId>.key`.
    pub private: PathBuf,
    /// `<dir>/<producer>__<keyId>.pub` or `<dir>/<keyId>.pub`.
    pub public: PathBuf,
}

/// Writes a key pair into `dir` (created if missing). The key id defaults to
/// [`default_key_id`]. Refuses to overwrite either file unless `force`.
pub fn write_key_pair(
    dir: &Path,
    producer: &str,
    key_id: Option<&str>,
    key: &SigningKey,
    force: bool,
) -> Result<KeyPairFiles, KeyError> {
    check_identifier(producer)?;
    let key_id = match key_id {
        Some(id) => id.to_owned(),
        None => default_key_id(&key.verifying_key()),
    };
    check_identifier(&key_id)?;
    fs::create_dir_all(dir).map_err(|source| KeyError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let private = dir.join(format!("{key_id}.key"));
    let public = dir.join(public_key_file_name(producer, &key_id));
    if !force {
        for path in [&private, &public] {
            if path.exists() {
                return Err(KeyError::Exists { path: path.clone() });
            }
        }
    }
    write_file(&private, &signing_key_text(key), 0o600)?;
    write_file(&public, &verifying_key_text(&key.verifying_key()), 0o644)?;
    Ok(KeyPairFiles {
        key_id,
        private,
        public,
    })
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_owned(),
        source,
    };
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(mode);
    }
    let mut file = options.open(path).map_err(io)?;
    #[cfg(unix)]
    {
        // an existing file (with --force) keeps its old mode through open(); set it explicitly
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io)?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_grammar() {
        for ok in ["a", "A1", "prod-1.eu", "0", &"a".repeat(64)] {
            assert!(check_identifier(ok).is_ok(), "{ok}");
        }
        for (bad, reason) in [
            ("", "empty"),
            (".a", "does not start"),
            ("-a", "does not start"),
            ("a_b", "'_'"),
            ("a..b", "'..'"),
            ("a b", "other than"),
            ("é", "does not start"),
        ] {
            let err = check_identifier(bad).unwrap_err();
            assert!(err.reason.contains(reason), "{bad}: {err}");
        }
        assert!(check_identifier(&"a".repeat(65)).is_err());
    }

    #[test]
    fn key_files_round_trip_and_reject_bad_lengths() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let path = Path::new("k.key");
        let parsed = parse_signing_key(path, &format!("  {}", signing_key_text(&key))).unwrap();
        assert_eq!(parsed.to_bytes(), key.to_bytes());
        let public = parse_verifying_key(path, &verifying_key_text(&key.verifying_key())).unwrap();
        assert_eq!(public, key.verifying_key());
        let short = STANDARD.encode([1u8; 31]);
        let err = parse_signing_key(path, &short).unwrap_err();
        assert_eq!(
            err.to_string(),
            "k.key: the private key seed is 31 bytes, expected 32"
        );
        let err = parse_verifying_key(path, "not base64!").unwrap_err();
        assert!(
            err.to_string().starts_with("k.key: not standard base64"),
            "{err}"
        );
    }

    #[test]
    fn default_key_id_is_16_hex() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let id = default_key_id(&key.verifying_key());
        assert_eq!(id.len(), 16);
        assert!(check_identifier(&id).is_ok());
    }
}
