//! Pull secrets (docs/design/resolution.md#pull-secrets): reading the Secret named by `spec.contractRef.pullSecretRef`
//! from the Pacto's namespace with one direct GET, and deriving registry credentials from it.
//!
//! Three kinds are accepted:
//!
//! 1. `kubernetes.io/dockerconfigjson`: key `.dockerconfigjson`, the `auths` entry whose normalised
//!    host equals the reference's registry (username+password, else the base64 `auth`).
//! 2. any other type (normally `Opaque`) with a `token` key: a registry bearer token (wins over 3);
//! 3. any other type with `username` + `password`: HTTP basic authentication.
//!
//! A key-based Secret (kinds 2 and 3) must carry a `registry` key binding the credentials to that
//! registry: a request for any other registry is refused rather than leaking the credentials, and
//! so is a Secret without the key (docs/design/resolution.md#credentials).
//!
//! Secret values never leave this module except as [`Credentials`] (whose `Debug` redacts them);
//! [`SecretData`]'s `Debug` prints key names only. Nothing here logs.

use std::collections::BTreeMap;
use std::fmt;

use pacto_contract::reference::normalize_registry_host;
use pacto_oci::{Credentials, DockerConfig};

/// The Secret type of Docker config secrets.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// The data key of Docker config secrets.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";

/// The type and data of a Secret, as read from the API server.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretData {
    /// `type` (empty is treated like `Opaque`).
    pub kind: String,
    /// `data`, decoded.
    pub data: BTreeMap<String, Vec<u8>>,
}

impl fmt::Debug for SecretData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretData")
            .field("kind", &self.kind)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Why a Secret's content cannot be turned into credentials. Messages name keys, never values.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// A dockerconfigjson Secret without its key.
    #[error(
        "the secret is of type {DOCKER_CONFIG_JSON_TYPE} but has no {DOCKER_CONFIG_JSON_KEY:?} key"
    )]
    MissingDockerConfig,
    /// The Docker config is malformed or has no entry for the registry.
    #[error(transparent)]
    DockerConfig(pacto_oci::CredentialsError),
    /// A key-based Secret with neither a token nor a username/password pair.
    #[error("no \"token\" key and no \"username\"/\"password\" pair (keys present: {keys})")]
    NoCredentials {
        /// The keys that are present.
        keys: String,
    },
    /// A key that must be UTF-8 text is not.
    #[error("key {key:?} is not UTF-8 text")]
    NotUtf8 {
        /// The key.
        key: &'static str,
    },
    /// A required key is present but empty.
    #[error("key {key:?} is empty")]
    Empty {
        /// The key.
        key: &'static str,
    },
    /// A key-based Secret without a `registry` key: its credentials are not for any particular
    /// registry, so they are sent to none (docs/design/resolution.md#credentials).
    #[error(
        "the secret has no \"registry\" key: credentials from \"token\" or \"username\"/\"password\" are sent \
         only to the registry a \"registry\" key names; add one (for example registry: {requested})"
    )]
    Unscoped {
        /// The registry of the reference (normalised).
        requested: String,
    },
    /// The Secret is bound to another registry.
    #[error(
        "the secret is scoped to registry {scoped:?} but credentials were requested for {requested:?}"
    )]
    WrongRegistry {
        /// The Secret's `registry` (normalised).
        scoped: String,
        /// The registry of the reference (normalised).
        requested: String,
    },
}

fn text<'a>(
    data: &'a BTreeMap<String, Vec<u8>>,
    key: &'static str,
) -> Result<Option<&'a str>, SecretError> {
    match data.get(key) {
        None => Ok(None),
        Some(bytes) => std::str::from_utf8(bytes)
            .map(|s| Some(s.trim_end_matches(['\n', '\r'])))
            .map_err(|_| SecretError::NotUtf8 { key }),
    }
}

/// Derives the credentials for `registry` from a Secret's content (the pure middle; see the
/// module docs for the rules).
pub fn credentials_from_secret(
    secret: &SecretData,
    registry: &str,
) -> Result<Credentials, SecretError> {
    let requested = normalize_registry_host(registry);
    if secret.kind == DOCKER_CONFIG_JSON_TYPE {
        let bytes = secret
            .data
            .get(DOCKER_CONFIG_JSON_KEY)
            .ok_or(SecretError::MissingDockerConfig)?;
        let config = DockerConfig::from_json(bytes, DOCKER_CONFIG_JSON_KEY)
            .map_err(SecretError::DockerConfig)?;
        return config
            .require_credentials_for(&requested)
            .map_err(SecretError::DockerConfig);
    }
    let scope = text(&secret.data, "registry")?;
    if let Some(scope) = scope {
        let scoped = normalize_registry_host(scope.trim());
        if scope.trim().is_empty() || scoped != requested {
            return Err(SecretError::WrongRegistry { scoped, requested });
        }
    }
    let credentials = key_credentials(&secret.data)?;
    if scope.is_none() {
        return Err(SecretError::Unscoped { requested });
    }
    Ok(credentials)
}

/// The credentials of a key-based Secret (`token`, else `username` + `password`).
fn key_credentials(data: &BTreeMap<String, Vec<u8>>) -> Result<Credentials, SecretError> {
    if let Some(token) = text(data, "token")? {
        if token.is_empty() {
            return Err(SecretError::Empty { key: "token" });
        }
        return Ok(Credentials::Bearer(token.to_owned()));
    }
    match (text(data, "username")?, text(data, "password")?) {
        (Some(""), Some(_)) => Err(SecretError::Empty { key: "username" }),
        (Some(username), Some(password)) => Ok(Credentials::Basic {
            username: username.to_owned(),
            password: password.to_owned(),
        }),
        _ => Err(SecretError::NoCredentials {
            keys: data
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Why a Secret could not be read from the API server.
#[derive(Debug, thiserror::Error)]
pub enum SecretReadError {
    /// The resolver runs without Kubernetes access.
    #[error("the contract resolver has no Kubernetes API access")]
    NoKubernetes,
    /// The Secret does not exist.
    #[error("secret {name:?} not found in namespace {namespace:?}")]
    NotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// RBAC refused the GET.
    #[error(
        "the contract resolver may not get secret {name:?} in namespace {namespace:?} (grant it \
         `get` on secrets there): {message}"
    )]
    Forbidden {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The API server's message.
        message: String,
    },
    /// Any other API failure.
    #[error("reading secret {name:?} in namespace {namespace:?}")]
    Api {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
}

/// Where Secrets are read from.
pub trait SecretSource: Send + Sync {
    /// Reads one Secret with a direct GET (never a list or a watch).
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<SecretData, SecretReadError>> + Send + 'a>>;
}

/// Reads Secrets from the Kubernetes API with a direct GET per call: values are never cached or
/// held in an informer.
#[derive(Clone)]
pub struct KubeSecrets {
    client: kube::Client,
}

impl fmt::Debug for KubeSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeSecrets").finish_non_exhaustive()
    }
}

impl KubeSecrets {
    /// Reads with `client` (the resolver's own least-privilege identity).
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl SecretSource for KubeSecrets {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<SecretData, SecretReadError>> + Send + 'a>>
    {
        Box::pin(async move {
            let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
                kube::Api::namespaced(self.client.clone(), namespace);
            let secret = api.get(name).await.map_err(|source| match &source {
                kube::Error::Api(status) if status.code == 404 => SecretReadError::NotFound {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                },
                kube::Error::Api(status) if status.code == 403 => SecretReadError::Forbidden {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    message: status.message.clone(),
                },
                _ => SecretReadError::Api {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    source: Box::new(source),
                },
            })?;
            let mut data: BTreeMap<String, Vec<u8>> = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            // stringData is write-only in the API, but accept it if a server returns it.
            for (k, v) in secret.string_data.unwrap_or_default() {
                data.entry(k).or_insert_with(|| v.into_bytes());
            }
            Ok(SecretData {
                kind: secret.type_.unwrap_or_default(),
                data,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(kind: &str, pairs: &[(&str, &str)]) -> SecretData {
        SecretData {
            kind: kind.to_owned(),
            data: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn opaque_token_wins_over_basic() {
        let s = secret(
            "Opaque",
            &[
                ("registry", "ghcr.io"),
                ("token", "tok\n"),
                ("username", "u"),
                ("password", "p"),
            ],
        );
        assert_eq!(
            credentials_from_secret(&s, "ghcr.io").unwrap(),
            Credentials::Bearer("tok".into())
        );
    }

    #[test]
    fn opaque_basic_and_empty_type() {
        let s = secret(
            "",
            &[
                ("registry", "127.0.0.1:5000"),
                ("username", "alice"),
                ("password", "pw"),
            ],
        );
        assert_eq!(
            credentials_from_secret(&s, "127.0.0.1:5000").unwrap(),
            Credentials::Basic {
                username: "alice".into(),
                password: "pw".into()
            }
        );
        let missing = secret("Opaque", &[("username", "alice")]);
        let err = credentials_from_secret(&missing, "x.io").unwrap_err();
        assert!(matches!(err, SecretError::NoCredentials { .. }), "{err}");
        assert!(err.to_string().contains("username"), "{err}");
        assert!(matches!(
            credentials_from_secret(&secret("Opaque", &[("token", "")]), "x.io"),
            Err(SecretError::Empty { key: "token" })
        ));
        let binary = SecretData {
            kind: "Opaque".into(),
            data: [("token".to_owned(), vec![0xff, 0xfe])].into(),
        };
        assert!(matches!(
            credentials_from_secret(&binary, "x.io"),
            Err(SecretError::NotUtf8 { key: "token" })
        ));
    }

    #[test]
    fn registry_key_binds_credentials() {
        let s = secret(
            "Opaque",
            &[("registry", "https://ghcr.io/v2/"), ("token", "t")],
        );
        assert!(credentials_from_secret(&s, "ghcr.io").is_ok());
        let err = credentials_from_secret(&s, "quay.io").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the secret is scoped to registry \"ghcr.io\" but credentials were requested for \
             \"quay.io\""
        );
        let docker = secret("Opaque", &[("registry", "docker.io"), ("token", "t")]);
        assert!(credentials_from_secret(&docker, "index.docker.io").is_ok());
        let empty = secret("Opaque", &[("registry", ""), ("token", "t")]);
        assert!(matches!(
            credentials_from_secret(&empty, "ghcr.io"),
            Err(SecretError::WrongRegistry { .. })
        ));
    }

    #[test]
    fn unscoped_key_secrets_are_sent_nowhere() {
        for pairs in [
            &[("token", "t0ken-value")][..],
            &[("username", "alice"), ("password", "pw-value")][..],
        ] {
            let err = credentials_from_secret(&secret("Opaque", pairs), "ghcr.io").unwrap_err();
            assert!(matches!(err, SecretError::Unscoped { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains("\"registry\" key") && text.contains("ghcr.io"),
                "{text}"
            );
            assert!(!text.contains("value"), "{text}");
        }
        // Missing credentials are reported first: that is what to fix.
        assert!(matches!(
            credentials_from_secret(&secret("Opaque", &[("user", "x")]), "ghcr.io"),
            Err(SecretError::NoCredentials { .. })
        ));
    }

    #[test]
    fn malformed_dockerconfigjson_names_the_key_never_the_content() {
        const MARKER: &str = "PULL-SECRET-MARKER-91ab";
        for json in [
            format!(r#"{{"auths":{{"ghcr.io":{{"auth":{MARKER}}}}}}}"#),
            format!(r#"{{"auths":{{"ghcr.io":"{MARKER}"}}}}"#),
            format!(r#"{{"auths":{{"ghcr.io":{{"password":"{MARKER}","username":7}}}}}}"#),
        ] {
            let s = secret(DOCKER_CONFIG_JSON_TYPE, &[(DOCKER_CONFIG_JSON_KEY, &json)]);
            let err = credentials_from_secret(&s, "ghcr.io").unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(!text.contains(MARKER), "secret content in {text}");
            assert!(text.contains(DOCKER_CONFIG_JSON_KEY), "{text}");
        }
    }

    #[test]
    fn dockerconfigjson_matches_host() {
        let json = r#"{"auths":{"https://127.0.0.1:5000":{"auth":"YWxpY2U6cHc="},"ghcr.io":{"username":"g","password":"h"}}}"#;
        let s = secret(DOCKER_CONFIG_JSON_TYPE, &[(DOCKER_CONFIG_JSON_KEY, json)]);
        assert_eq!(
            credentials_from_secret(&s, "127.0.0.1:5000").unwrap(),
            Credentials::Basic {
                username: "alice".into(),
                password: "pw".into()
            }
        );
        assert!(matches!(
            credentials_from_secret(&s, "quay.io"),
            Err(SecretError::DockerConfig(
                pacto_oci::CredentialsError::NoMatchingRegistry { .. }
            ))
        ));
        assert!(matches!(
            credentials_from_secret(&secret(DOCKER_CONFIG_JSON_TYPE, &[]), "ghcr.io"),
            Err(SecretError::MissingDockerConfig)
        ));
        let broken = secret(
            DOCKER_CONFIG_JSON_TYPE,
            &[(DOCKER_CONFIG_JSON_KEY, "{nope")],
        );
        assert!(matches!(
            credentials_from_secret(&broken, "ghcr.io"),
            Err(SecretError::DockerConfig(
                pacto_oci::CredentialsError::Parse { .. }
            ))
        ));
        let empty = secret(DOCKER_CONFIG_JSON_TYPE, &[(DOCKER_CONFIG_JSON_KEY, "{}")]);
        assert!(matches!(
            credentials_from_secret(&empty, "ghcr.io"),
            Err(SecretError::DockerConfig(
                pacto_oci::CredentialsError::EmptyAuths { .. }
            ))
        ));
    }

    #[test]
    fn debug_never_shows_values() {
        let s = secret(
            "Opaque",
            &[
                ("registry", "x.io"),
                ("username", "alice"),
                ("password", "hunter2"),
            ],
        );
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("password"),
            "{shown}"
        );
        let creds = credentials_from_secret(&s, "x.io").unwrap();
        assert!(!format!("{creds:?}").contains("hunter2"));
    }
}
