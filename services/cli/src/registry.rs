//! Registry clients, credentials and progress reporting for the commands, plus the policy
//! resolver that `validate` and `push` use for `ref` policies.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pacto_contract::bundle::{BundleFiles, Limits};
use pacto_contract::reference::{OCI_SCHEME, Reference};
use pacto_contract::{PolicyResolveError, PolicyResolver};
use pacto_oci::{
    ClientOptions, Credentials, DockerConfig, ErrorClass, Keychain, OciError, Progress,
    PulledBundle, RegistryClient,
};
use tokio::runtime::Runtime;

use crate::GlobalArgs;

/// Builds registry clients from the global flags.
pub struct Registries {
    global: GlobalArgs,
}

impl Registries {
    pub fn new(global: &GlobalArgs) -> Self {
        Registries {
            global: global.clone(),
        }
    }

    pub(crate) fn keychain(&self) -> Result<Keychain, OciError> {
        let explicit = if let Some(token) = self.global.token.as_ref().filter(|t| !t.is_empty()) {
            Credentials::Bearer(token.clone())
        } else if let Some(user) = self.global.username.as_ref().filter(|u| !u.is_empty()) {
            Credentials::Basic {
                username: user.clone(),
                password: self.global.password.clone().unwrap_or_default(),
            }
        } else {
            Credentials::Anonymous
        };
        let docker = match &self.global.docker_config {
            Some(dir) => DockerConfig::from_file(&dir.join("config.json"))?,
            None => DockerConfig::load_default()?,
        };
        Ok(Keychain::new()
            .with_explicit(explicit, None)
            .with_docker_config(docker))
    }

    /// The registry client options of the global flags (plain-HTTP hosts, timeout).
    pub(crate) fn client_options(&self) -> ClientOptions {
        ClientOptions {
            insecure_registries: self
                .global
                .insecure_registries
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
            operation_timeout: Duration::from_secs(self.global.timeout.max(1)),
            ..ClientOptions::default()
        }
    }

    /// The deadline of one operation (`--timeout`).
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.global.timeout.max(1))
    }

    /// A client carrying the credentials for `reference`'s registry.
    pub fn client_for(&self, reference: &Reference) -> Result<RegistryClient, OciError> {
        let creds = self.keychain()?.resolve(reference.registry())?;
        let options = ClientOptions {
            insecure_registries: self
                .global
                .insecure_registries
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
            operation_timeout: Duration::from_secs(self.global.timeout.max(1)),
            ..ClientOptions::default()
        };
        RegistryClient::new(options, &creds)
    }

    /// Resolves (highest semver when untagged) and pulls a bundle.
    pub fn pull(
        &self,
        rt: &Runtime,
        reference: &Reference,
        constraint: Option<&pacto_contract::version::Constraint>,
    ) -> Result<PulledBundle, OciError> {
        let client = self.client_for(reference)?;
        let progress = self.progress();
        rt.block_on(async {
            let resolved = client.resolve(reference, constraint).await?;
            if let Some(tag) = &resolved.selected_tag
                && !self.global.quiet
            {
                eprintln!("resolved {reference} to tag {tag}");
            }
            let pinned = resolved.reference.with_digest(&resolved.digest)?;
            let cache = crate::cache::root();
            if let Some(root) = cache.as_deref().filter(|_| !self.global.no_cache)
                && let Some(hit) =
                    crate::cache::read(root, &pinned, &client.options().bundle_limits)
            {
                if !self.global.quiet {
                    eprintln!("using cached {}", pinned.to_oci_string());
                }
                return Ok(hit);
            }
            let pulled = client.pull(&pinned, &*progress).await?;
            if let Some(root) = cache.as_deref() {
                crate::cache::write(root, &pulled);
            }
            Ok(pulled)
        })
    }

    /// The progress callback (docs of [`crate::progress`]): nothing with `--quiet`, summary
    /// lines on stderr, and live transfer lines when stderr is a terminal.
    pub fn progress(&self) -> Box<dyn Fn(Progress) + Send + Sync> {
        let reporter = crate::progress::Reporter::for_stderr(self.global.quiet);
        Box::new(move |p| reporter.report(p))
    }

    pub fn quiet(&self) -> bool {
        self.global.quiet
    }
}

/// Resolves `ref` policies: `oci://` from the registry; `file://` and bare paths relative to
/// the bundle directory (when there is one and `allow_local`).
pub struct CliPolicyResolver<'a> {
    pub registries: &'a Registries,
    pub runtime: &'a Runtime,
    pub base_dir: Option<PathBuf>,
    pub allow_local: bool,
}

impl PolicyResolver for CliPolicyResolver<'_> {
    fn resolve(&self, reference: &str) -> Result<BundleFiles, PolicyResolveError> {
        if reference.starts_with(OCI_SCHEME) {
            let parsed =
                Reference::parse_oci(reference).map_err(|e| PolicyResolveError::Unsupported {
                    reference: reference.to_owned(),
                    reason: e.to_string(),
                })?;
            return match self.registries.pull(self.runtime, &parsed, None) {
                Ok(pulled) => Ok(pulled.files),
                Err(e) if e.class() == ErrorClass::NotFound => Err(PolicyResolveError::NotFound {
                    reference: reference.to_owned(),
                }),
                Err(e) => Err(PolicyResolveError::Fetch {
                    reference: reference.to_owned(),
                    source: Box::new(e),
                }),
            };
        }
        if !self.allow_local {
            return Err(PolicyResolveError::Unsupported {
                reference: reference.to_owned(),
                reason: "local policy references cannot be published; use oci://".to_owned(),
            });
        }
        let Some(base) = &self.base_dir else {
            return Err(PolicyResolveError::Unsupported {
                reference: reference.to_owned(),
                reason: "no bundle directory to resolve a local path against".to_owned(),
            });
        };
        let rel = reference.strip_prefix("file://").unwrap_or(reference);
        let path = if Path::new(rel).is_absolute() {
            PathBuf::from(rel)
        } else {
            base.join(rel)
        };
        if !path.is_dir() {
            return Err(PolicyResolveError::NotFound {
                reference: reference.to_owned(),
            });
        }
        BundleFiles::read_dir(&path, &Limits::default()).map_err(|e| PolicyResolveError::Fetch {
            reference: reference.to_owned(),
            source: Box::new(e),
        })
    }
}
