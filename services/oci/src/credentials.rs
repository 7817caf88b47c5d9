//! Registry credentials: anonymous, basic, bearer token, and Docker config files
//! (`~/.docker/config.json`, `$DOCKER_CONFIG/config.json`, or a `kubernetes.io/dockerconfigjson`
//! secret's `.dockerconfigjson` value), matched to a registry by normalised host.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use pacto_contract::reference::normalize_registry_host;
use serde::Deserialize;

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Credentials {
    /// No credentials.
    #[default]
    Anonymous,
    /// HTTP basic authentication (also used for token-server exchanges).
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A registry bearer token, sent as is.
    Bearer(String),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { username, .. } => {
                write!(f, "Basic({username:?}, <redacted>)")
            }
            Credentials::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

impl Credentials {
    /// True for [`Credentials::Anonymous`].
    pub fn is_anonymous(&self) -> bool {
        matches!(self, Credentials::Anonymous)
    }

    pub(crate) fn to_registry_auth(&self) -> oci_client::secrets::RegistryAuth {
        use oci_client::secrets::RegistryAuth;
        match self {
            Credentials::Anonymous => RegistryAuth::Anonymous,
            Credentials::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            Credentials::Bearer(token) => RegistryAuth::Bearer(token.clone()),
        }
    }
}

/// Why credentials could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The docker config file exists but could not be read.
    #[error("reading docker config {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The docker config is not valid JSON of the expected shape. Only the position and the
    /// kind of fault are kept: a JSON error's text quotes the input, and the input holds
    /// credentials (docs/design/resolution.md#credentials).
    #[error("parsing docker config {origin}: {kind} at line {line}, column {column}")]
    Parse {
        /// Where the config came from.
        origin: String,
        /// `invalid JSON syntax`, `not of the expected shape` or `truncated`.
        kind: &'static str,
        /// Line of the fault.
        line: usize,
        /// Column of the fault.
        column: usize,
    },
    /// An `auth` field is not base64 of `user:pass`.
    #[error("docker config {origin}: auths[{host:?}].auth is not base64 of \"user:password\"")]
    BadAuthField {
        /// Where the config came from.
        origin: String,
        /// The auths key.
        host: String,
    },
    /// The config has no `auths` entries at all.
    #[error("docker config {origin} has no auths entries")]
    EmptyAuths {
        /// Where the config came from.
        origin: String,
    },
    /// No entry matches the registry.
    #[error("docker config {origin} has no credentials for registry {registry:?}")]
    NoMatchingRegistry {
        /// Where the config came from.
        origin: String,
        /// The registry asked for.
        registry: String,
    },
    /// An entry matches but carries no usable credentials.
    #[error(
        "docker config {origin}: auths[{host:?}] has no username/password, auth or registrytoken"
    )]
    NoCredentialsInEntry {
        /// Where the config came from.
        origin: String,
        /// The auths key.
        host: String,
    },
}

#[derive(Debug, Deserialize, Default)]
struct RawConfig {
    #[serde(default)]
    auths: BTreeMap<String, RawAuth>,
}

#[derive(Deserialize, Default)]
struct RawAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

/// What `Debug` shows of a secret field: whether it is there, never its value.
struct Redacted<'a>(&'a Option<String>);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(_) => f.write_str("Some(<redacted>)"),
            None => f.write_str("None"),
        }
    }
}

/// The user name, and only the presence of the secrets (`auth` is base64 of `user:password`).
impl fmt::Debug for RawAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawAuth")
            .field("username", &self.username)
            .field("password", &Redacted(&self.password))
            .field("auth", &Redacted(&self.auth))
            .field("registrytoken", &Redacted(&self.registrytoken))
            .finish()
    }
}

/// A parsed Docker config (`{"auths": {"host": {...}}}`). Its `Debug` shows the origin, the
/// registries and the user names; passwords, `auth` fields and tokens are redacted.
#[derive(Default)]
pub struct DockerConfig {
    origin: String,
    /// Normalised host → (original key, entry).
    auths: BTreeMap<String, (String, RawAuth)>,
}

impl fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DockerConfig")
            .field("origin", &self.origin)
            .field(
                "auths",
                &self
                    .auths
                    .values()
                    .map(|(key, entry)| (key, entry))
                    .collect::<BTreeMap<_, _>>(),
            )
            .finish()
    }
}

impl DockerConfig {
    /// Parses config JSON; `origin` names the source in errors.
    pub fn from_json(bytes: &[u8], origin: &str) -> Result<Self, CredentialsError> {
        let raw: RawConfig =
            serde_json::from_slice(bytes).map_err(|e| CredentialsError::Parse {
                origin: origin.to_owned(),
                kind: match e.classify() {
                    serde_json::error::Category::Syntax => "invalid JSON syntax",
                    serde_json::error::Category::Data => "not of the expected shape",
                    serde_json::error::Category::Eof => "truncated JSON",
                    serde_json::error::Category::Io => "unreadable",
                },
                line: e.line(),
                column: e.column(),
            })?;
        let auths = raw
            .auths
            .into_iter()
            .map(|(key, entry)| (normalize_registry_host(&key), (key, entry)))
            .collect();
        Ok(DockerConfig {
            origin: origin.to_owned(),
            auths,
        })
    }

    /// Reads a config file; a missing file is an empty config.
    pub fn from_file(path: &Path) -> Result<Self, CredentialsError> {
        match std::fs::read(path) {
            Ok(bytes) => Self::from_json(&bytes, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DockerConfig {
                origin: path.display().to_string(),
                auths: BTreeMap::new(),
            }),
            Err(source) => Err(CredentialsError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The default location: `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(dir).join("config.json"));
        }
        std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|home| PathBuf::from(home).join(".docker").join("config.json"))
    }

    /// Loads the default config (empty when there is none).
    pub fn load_default() -> Result<Self, CredentialsError> {
        match Self::default_path() {
            Some(path) => Self::from_file(&path),
            None => Ok(DockerConfig::default()),
        }
    }

    /// Credentials for `registry`, if an entry matches; errors only for a malformed entry.
    pub fn credentials_for(&self, registry: &str) -> Result<Option<Credentials>, CredentialsError> {
        let host = normalize_registry_host(registry);
        let Some((key, entry)) = self.auths.get(&host) else {
            return Ok(None);
        };
        self.entry_credentials(key, entry).map(Some)
    }

    /// Strict lookup used for pull secrets: an empty config or no matching host is an error.
    pub fn require_credentials_for(&self, registry: &str) -> Result<Credentials, CredentialsError> {
        if self.auths.is_empty() {
            return Err(CredentialsError::EmptyAuths {
                origin: self.origin.clone(),
            });
        }
        self.credentials_for(registry)?
            .ok_or_else(|| CredentialsError::NoMatchingRegistry {
                origin: self.origin.clone(),
                registry: normalize_registry_host(registry),
            })
    }

    fn entry_credentials(
        &self,
        key: &str,
        entry: &RawAuth,
    ) -> Result<Credentials, CredentialsError> {
        if let Some(token) = entry.registrytoken.as_deref().filter(|t| !t.is_empty()) {
            return Ok(Credentials::Bearer(token.to_owned()));
        }
        if let (Some(u), Some(p)) = (&entry.username, &entry.password)
            && !u.is_empty()
        {
            return Ok(Credentials::Basic {
                username: u.clone(),
                password: p.clone(),
            });
        }
        if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
            let bad = || CredentialsError::BadAuthField {
                origin: self.origin.clone(),
                host: key.to_owned(),
            };
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|_| bad())?;
            let text = String::from_utf8(decoded).map_err(|_| bad())?;
            let (u, p) = text.split_once(':').ok_or_else(bad)?;
            return Ok(Credentials::Basic {
                username: u.to_owned(),
                password: p.to_owned(),
            });
        }
        Err(CredentialsError::NoCredentialsInEntry {
            origin: self.origin.clone(),
            host: key.to_owned(),
        })
    }
}

/// An ordered keychain: explicit credentials (flags / environment) first, then the Docker
/// config. The first source that has credentials wins; there is no fallback on 401. Its `Debug`
/// shows the registries and user names, never a password, `auth` field or token.
#[derive(Default)]
pub struct Keychain {
    explicit: Option<Credentials>,
    /// If set, the explicit credentials apply only to this (normalised) registry.
    explicit_registry: Option<String>,
    docker: Option<DockerConfig>,
}

impl fmt::Debug for Keychain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Each field through a redacting `Debug` (Credentials, DockerConfig), none derived.
        f.debug_struct("Keychain")
            .field("explicit", &self.explicit)
            .field("explicit_registry", &self.explicit_registry)
            .field("docker", &self.docker)
            .finish()
    }
}

impl Keychain {
    /// An empty keychain (anonymous everywhere).
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `creds` for every registry (or only `registry`, if given).
    #[must_use]
    pub fn with_explicit(mut self, creds: Credentials, registry: Option<&str>) -> Self {
        if !creds.is_anonymous() {
            self.explicit = Some(creds);
            self.explicit_registry = registry.map(normalize_registry_host);
        }
        self
    }

    /// Falls back to `config` when no explicit credentials apply.
    #[must_use]
    pub fn with_docker_config(mut self, config: DockerConfig) -> Self {
        self.docker = Some(config);
        self
    }

    /// The credentials for `registry`.
    pub fn resolve(&self, registry: &str) -> Result<Credentials, CredentialsError> {
        if let Some(creds) = &self.explicit {
            let applies = self
                .explicit_registry
                .as_deref()
                .is_none_or(|r| r == normalize_registry_host(registry));
            if applies {
                return Ok(creds.clone());
            }
        }
        if let Some(docker) = &self.docker
            && let Some(creds) = docker.credentials_for(registry)?
        {
            return Ok(creds);
        }
        Ok(Credentials::Anonymous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_matching_and_decoding() {
        let json = br#"{"auths":{
            "https://index.docker.io/v1/":{"auth":"dTpw"},
            "127.0.0.1:5000":{"username":"alice","password":"s3cret"},
            "ghcr.io":{"registrytoken":"tok"},
            "bad.example":{"auth":"!!!"},
            "empty.example":{}
        }}"#;
        let cfg = DockerConfig::from_json(json, "test").expect("parses");
        assert_eq!(
            cfg.credentials_for("docker.io").expect("ok"),
            Some(Credentials::Basic {
                username: "u".into(),
                password: "p".into()
            })
        );
        assert_eq!(
            cfg.credentials_for("127.0.0.1:5000").expect("ok"),
            Some(Credentials::Basic {
                username: "alice".into(),
                password: "s3cret".into()
            })
        );
        assert_eq!(
            cfg.credentials_for("ghcr.io").expect("ok"),
            Some(Credentials::Bearer("tok".into()))
        );
        assert_eq!(cfg.credentials_for("quay.io").expect("ok"), None);
        assert!(matches!(
            cfg.credentials_for("bad.example"),
            Err(CredentialsError::BadAuthField { .. })
        ));
        assert!(matches!(
            cfg.credentials_for("empty.example"),
            Err(CredentialsError::NoCredentialsInEntry { .. })
        ));
        assert!(matches!(
            cfg.require_credentials_for("quay.io"),
            Err(CredentialsError::NoMatchingRegistry { .. })
        ));
        let empty = DockerConfig::from_json(b"{}", "empty").expect("parses");
        assert!(matches!(
            empty.require_credentials_for("quay.io"),
            Err(CredentialsError::EmptyAuths { .. })
        ));
        assert!(matches!(
            DockerConfig::from_json(b"{not json", "broken"),
            Err(CredentialsError::Parse { .. })
        ));
    }

    #[test]
    fn malformed_config_errors_never_quote_the_input() {
        const MARKER: &str = "SECRET-MARKER-7d2e";
        for json in [
            format!(r#"{{"auths":{{"r.example":{{"auth":{MARKER}}}}}}}"#),
            format!(r#"{{"auths":{{"r.example":"{MARKER}"}}}}"#),
            format!(r#"{{"auths":["{MARKER}"]}}"#),
            format!(r#"{{"auths":{{"r.example":{{"username":"{MARKER}","password":1}}}}}}"#),
            format!(r#"{{"auths":{{"{MARKER}"#),
            MARKER.to_owned(),
        ] {
            let err = DockerConfig::from_json(json.as_bytes(), ".dockerconfigjson")
                .expect_err("malformed");
            let text = format!("{err} {err:?}");
            assert!(!text.contains(MARKER), "secret content in {text}");
            assert!(text.contains(".dockerconfigjson"), "{text}");
        }
    }

    #[test]
    fn debug_output_never_shows_a_secret() {
        // One secret per place a docker config holds one, each distinct so a leak names its field.
        let json = br#"{"auths":{
            "ghcr.io":{"registrytoken":"TOKEN-MARKER-1"},
            "127.0.0.1:5000":{"username":"alice","password":"PASSWORD-MARKER-2"},
            "https://index.docker.io/v1/":{"auth":"dTpBVVRILU1BUktFUi0z"}
        }}"#;
        let cfg = DockerConfig::from_json(json, "the-origin").expect("parses");
        let keychain = Keychain::new()
            .with_explicit(
                Credentials::Basic {
                    username: "bob".into(),
                    password: "EXPLICIT-MARKER-4".into(),
                },
                Some("quay.io"),
            )
            .with_docker_config(DockerConfig::from_json(json, "the-origin").expect("parses"));
        let raw = RawAuth {
            auth: Some("dTpBVVRILU1BUktFUi0z".into()),
            username: Some("carol".into()),
            password: Some("RAW-MARKER-5".into()),
            registrytoken: Some("RAW-TOKEN-MARKER-6".into()),
        };
        for text in [
            format!("{cfg:?}"),
            format!("{cfg:#?}"),
            format!("{keychain:?}"),
            format!("{keychain:#?}"),
            format!("{raw:?}"),
        ] {
            for secret in [
                "MARKER", // The base64 `auth` field, and its decoded form.
                "dTpB", "u:AUTH",
            ] {
                assert!(!text.contains(secret), "{secret:?} in {text}");
            }
        }
        // What stays: where the config came from, the registries it has entries for, the user
        // names, and which fields an entry has.
        let shown = format!("{keychain:?}");
        for kept in [
            "the-origin",
            "ghcr.io",
            "127.0.0.1:5000",
            "index.docker.io",
            "alice",
            "bob",
            "quay.io",
        ] {
            assert!(shown.contains(kept), "{kept:?} missing from {shown}");
        }
        let raw = format!("{raw:?}");
        assert!(
            raw.contains("carol") && raw.contains("registrytoken"),
            "{raw}"
        );
    }

    #[test]
    fn keychain_order() {
        let cfg = DockerConfig::from_json(
            br#"{"auths":{"a.example":{"username":"d","password":"x"}}}"#,
            "t",
        )
        .expect("parses");
        let explicit = Credentials::Bearer("t".into());
        let kc = Keychain::new()
            .with_explicit(explicit.clone(), Some("b.example"))
            .with_docker_config(cfg);
        assert_eq!(kc.resolve("b.example").expect("ok"), explicit);
        assert!(matches!(
            kc.resolve("a.example").expect("ok"),
            Credentials::Basic { .. }
        ));
        assert_eq!(kc.resolve("c.example").expect("ok"), Credentials::Anonymous);
        assert!(!format!("{:?}", kc.resolve("a.example")).contains("\"x\""));
    }
}
