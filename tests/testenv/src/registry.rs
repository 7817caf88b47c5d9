//! A real docker-registry (Distribution) on loopback for tests.
//!
//! [`Registry::start`] writes a config (filesystem storage in a temp dir, `127.0.0.1:<free
//! port>`, deletes enabled, optional htpasswd bcrypt auth made with `htpasswd -B`), starts
//! `docker-registry serve`, and waits until `GET /v2/` answers (200, or 401 with auth) within a
//! deadline. Dropping the value kills the process and removes the temp dir, also while a test
//! panics. The binary is `$PACTO_DOCKER_REGISTRY_BIN`, else `docker-registry` on `PATH`, else
//! `/usr/bin/docker-registry` (Debian's `docker-registry` package).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::{ManagedProcess, ProcessError};
use std::time::{Duration, Instant};

/// How long to wait for the registry to answer.
const READY_DEADLINE: Duration = Duration::from_secs(20);
/// Attempts with fresh ports when the registry exits early (for example on a port race).
const START_ATTEMPTS: usize = 3;

/// Why the registry could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The temp dir or a file in it could not be written.
    #[error("preparing registry directory: {0}")]
    Prepare(#[source] std::io::Error),
    /// No free loopback port.
    #[error("finding a free port: {0}")]
    Port(#[source] std::io::Error),
    /// `htpasswd` failed or is missing (install apache2-utils).
    #[error("running htpasswd (install apache2-utils): {0}")]
    Htpasswd(String),
    /// The binary could not be spawned (install docker-registry).
    #[error("spawning {binary} (install docker-registry): {source}")]
    Spawn {
        /// The binary tried.
        binary: String,
        /// The spawn error.
        #[source]
        source: ProcessError,
    },
    /// The token-signing key or certificate could not be made.
    #[error("preparing registry token auth: {0}")]
    Token(String),
    /// The process exited before becoming ready.
    #[error("docker-registry exited before becoming ready ({status}); log:\n{log}")]
    Exited {
        /// The exit status.
        status: String,
        /// The registry's log.
        log: String,
    },
    /// The registry did not answer within the deadline.
    #[error("docker-registry not ready within {seconds}s; log:\n{log}")]
    NotReady {
        /// The deadline.
        seconds: u64,
        /// The registry's log.
        log: String,
    },
}

/// Options for [`Registry::start_with`].
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Require HTTP basic auth with these credentials (htpasswd, bcrypt).
    pub basic_auth: Option<(String, String)>,
    /// Require bearer tokens (JWT, ES256) issued by a key generated for this registry; mint
    /// them with [`Registry::mint_token`].
    pub token_auth: bool,
}

/// A running docker-registry; killed and cleaned up on drop.
#[derive(Debug)]
pub struct Registry {
    child: Option<ManagedProcess>,
    dir: tempfile::TempDir,
    addr: SocketAddr,
    basic_auth: Option<(String, String)>,
    token: Option<TokenIssuer>,
}

impl Registry {
    /// Starts an anonymous registry.
    pub fn start() -> Result<Self, RegistryError> {
        Self::start_with(&RegistryOptions::default())
    }

    /// Starts a registry requiring basic auth with `user`/`password`.
    pub fn start_with_basic_auth(user: &str, password: &str) -> Result<Self, RegistryError> {
        Self::start_with(&RegistryOptions {
            basic_auth: Some((user.to_owned(), password.to_owned())),
            token_auth: false,
        })
    }

    /// Starts a registry requiring bearer tokens (see [`Registry::mint_token`]).
    pub fn start_with_token_auth() -> Result<Self, RegistryError> {
        Self::start_with(&RegistryOptions {
            basic_auth: None,
            token_auth: true,
        })
    }

    /// Starts a registry with `options`.
    pub fn start_with(options: &RegistryOptions) -> Result<Self, RegistryError> {
        let dir = tempfile::Builder::new()
            .prefix("pacto-registry-")
            .tempdir()
            .map_err(RegistryError::Prepare)?;
        std::fs::create_dir_all(dir.path().join("data")).map_err(RegistryError::Prepare)?;
        let htpasswd = match &options.basic_auth {
            Some((user, password)) => Some(write_htpasswd(dir.path(), user, password)?),
            None => None,
        };
        let token = if options.token_auth {
            let issuer = TokenIssuer::generate()?;
            std::fs::write(dir.path().join("token-root.pem"), &issuer.cert_pem)
                .map_err(RegistryError::Prepare)?;
            Some(issuer)
        } else {
            None
        };
        let auth = if htpasswd.is_some() {
            Auth::Htpasswd(htpasswd.as_deref())
        } else if token.is_some() {
            Auth::Token
        } else {
            Auth::None
        };
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let config = dir.path().join("config.yml");
            std::fs::write(&config, render_config(dir.path(), addr, &auth))
                .map_err(RegistryError::Prepare)?;
            let log_path = dir.path().join("registry.log");
            let binary = binary();
            let mut command = Command::new(&binary);
            command.arg("serve").arg(&config);
            // Its own process group plus a watchdog: the registry never outlives the test
            // process, even when Drop does not run.
            let child = ManagedProcess::spawn("docker-registry", command, &log_path, &[dir.path()])
                .map_err(|source| RegistryError::Spawn {
                    binary: binary.clone(),
                    source,
                })?;
            let mut child = Some(child);
            match wait_ready(&mut child, addr, dir.path(), !matches!(auth, Auth::None)) {
                Ok(()) => {
                    return Ok(Registry {
                        child,
                        dir,
                        addr,
                        basic_auth: options.basic_auth.clone(),
                        token,
                    });
                }
                Err(e) => {
                    stop(&mut child);
                    if matches!(e, RegistryError::Exited { .. }) {
                        // Probably lost a port race: retry with a fresh port.
                        last_err = Some(e);
                    } else {
                        return Err(e);
                    }
                }
            }
        }
        Err(last_err.unwrap_or(RegistryError::NotReady {
            seconds: READY_DEADLINE.as_secs(),
            log: String::new(),
        }))
    }

    /// `127.0.0.1:<port>`, the registry host for references.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The basic-auth credentials, if the registry requires them.
    pub fn basic_auth(&self) -> Option<(&str, &str)> {
        self.basic_auth
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// A bearer token granting `actions` (`pull`, `push`) on `repository`, valid for an hour,
    /// signed by this registry's trusted key. `None` unless started with token auth.
    pub fn mint_token(&self, repository: &str, actions: &[&str]) -> Option<String> {
        self.token
            .as_ref()
            .and_then(|t| t.mint(repository, actions).ok())
    }

    /// A well-formed token for `repository` signed by a key the registry does not trust.
    pub fn mint_untrusted_token(
        &self,
        repository: &str,
        actions: &[&str],
    ) -> Result<String, RegistryError> {
        TokenIssuer::generate()?.mint(repository, actions)
    }

    /// The registry's storage directory.
    pub fn storage_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        read_log(self.dir.path())
    }

    /// Every request the registry has answered so far, oldest first, from its own access log
    /// (the readiness probes of [`Registry::start_with`] included: filter by path). This is how
    /// tests and benches count the requests a client really sent.
    pub fn access_log(&self) -> Vec<AccessEntry> {
        parse_access_log(&self.log())
    }
}

/// One request of the registry's access log (the combined log format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessEntry {
    /// `GET`, `HEAD`, `PUT`, …
    pub method: String,
    /// The request path with its query, e.g. `/v2/team/api/manifests/1.0.0`.
    pub path: String,
    /// The response status.
    pub status: u16,
}

impl AccessEntry {
    /// Whether this is a manifest request (`/v2/<name>/manifests/<reference>`).
    pub fn is_manifest(&self) -> bool {
        self.path.starts_with("/v2/") && self.path.contains("/manifests/")
    }

    /// Whether this is a blob request (`/v2/<name>/blobs/<digest>`).
    pub fn is_blob(&self) -> bool {
        self.path.starts_with("/v2/") && self.path.contains("/blobs/")
    }

    /// Whether this is a tag list request (`/v2/<name>/tags/list`).
    pub fn is_tag_list(&self) -> bool {
        self.path.starts_with("/v2/") && self.path.contains("/tags/list")
    }
}

/// The access-log entries of a docker-registry log; every other line (the registry's own
/// structured `time=… level=…` lines) is skipped.
pub fn parse_access_log(log: &str) -> Vec<AccessEntry> {
    log.lines().filter_map(parse_access_line).collect()
}

/// `127.0.0.1 - - [04/Dec/2026:19:51:05 +0000] "HEAD /v2/foo/manifests/1.0 HTTP/1.1" 404 93 "" "ua"`
fn parse_access_line(line: &str) -> Option<AccessEntry> {
    let (_, rest) = line.split_once("] \"")?;
    let (request, rest) = rest.split_once('"')?;
    let mut parts = request.split(' ');
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let status = rest.split_whitespace().next()?.parse().ok()?;
    Some(AccessEntry {
        method,
        path,
        status,
    })
}

impl Drop for Registry {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

fn stop(child: &mut Option<ManagedProcess>) {
    if let Some(mut child) = child.take() {
        child.stop();
    }
}

fn read_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("registry.log")).unwrap_or_default()
}

fn wait_ready(
    child: &mut Option<ManagedProcess>,
    addr: SocketAddr,
    dir: &Path,
    auth: bool,
) -> Result<(), RegistryError> {
    let start = Instant::now();
    while start.elapsed() < READY_DEADLINE {
        if let Some(child) = child.as_mut()
            && let Some(status) = child.exited()
        {
            return Err(RegistryError::Exited {
                status: status.to_string(),
                log: read_log(dir),
            });
        }
        if let Some(code) = http_status(addr, "/v2/")
            && (code == 200 || (code == 401 && auth))
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err(RegistryError::NotReady {
        seconds: READY_DEADLINE.as_secs(),
        log: read_log(dir),
    })
}

fn binary() -> String {
    if let Ok(bin) = std::env::var("PACTO_DOCKER_REGISTRY_BIN")
        && !bin.is_empty()
    {
        return bin;
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("docker-registry"))
            .find(|p| p.is_file())
    });
    on_path.map_or_else(
        || "/usr/bin/docker-registry".to_owned(),
        |p| p.display().to_string(),
    )
}

fn free_port() -> Result<u16, RegistryError> {
    crate::ports::free_port().map_err(RegistryError::Port)
}

fn write_htpasswd(dir: &Path, user: &str, password: &str) -> Result<PathBuf, RegistryError> {
    let out = Command::new("htpasswd")
        .args(["-B", "-b", "-n", user, password])
        .output()
        .map_err(|e| RegistryError::Htpasswd(e.to_string()))?;
    if !out.status.success() {
        return Err(RegistryError::Htpasswd(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    let path = dir.join("htpasswd");
    std::fs::write(&path, &out.stdout).map_err(RegistryError::Prepare)?;
    Ok(path)
}

/// How the registry authenticates clients.
enum Auth<'a> {
    None,
    Htpasswd(Option<&'a Path>),
    Token,
}

const TOKEN_SERVICE: &str = "pacto-test-registry";
const TOKEN_ISSUER: &str = "pacto-test-issuer";

fn render_config(dir: &Path, addr: SocketAddr, auth: &Auth<'_>) -> String {
    let mut cfg = format!(
        "version: 0.1\n\
         log:\n  level: info\n  accesslog:\n    disabled: false\n\
         storage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\n  \
         maintenance:\n    uploadpurging:\n      enabled: false\n\
         http:\n  addr: {addr}\n  secret: pacto-test-secret\n\
         health:\n  storagedriver:\n    enabled: false\n",
        data = dir.join("data").display(),
    );
    match auth {
        Auth::None | Auth::Htpasswd(None) => {}
        Auth::Htpasswd(Some(path)) => {
            cfg.push_str("auth:\n  htpasswd:\n    realm: pacto-test\n    path: ");
            cfg.push_str(&path.display().to_string());
            cfg.push('\n');
        }
        Auth::Token => {
            // The realm is never contacted: clients present tokens minted by the test.
            cfg.push_str("auth:\n  token:\n    realm: http://127.0.0.1:9/token\n");
            cfg.push_str("    service: ");
            cfg.push_str(TOKEN_SERVICE);
            cfg.push_str("\n    issuer: ");
            cfg.push_str(TOKEN_ISSUER);
            cfg.push_str("\n    rootcertbundle: ");
            cfg.push_str(&dir.join("token-root.pem").display().to_string());
            cfg.push('\n');
        }
    }
    cfg
}

/// Signs registry bearer tokens (JWT, ES256, with the signing certificate in `x5c`, which the
/// registry verifies against its `rootcertbundle`).
#[derive(Debug)]
struct TokenIssuer {
    key: rcgen::KeyPair,
    cert_der: Vec<u8>,
    cert_pem: String,
}

impl TokenIssuer {
    fn generate() -> Result<Self, RegistryError> {
        let err = |e: rcgen::Error| RegistryError::Token(e.to_string());
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(err)?;
        let cert = rcgen::CertificateParams::new(vec!["pacto-token-issuer".to_owned()])
            .map_err(err)?
            .self_signed(&key)
            .map_err(err)?;
        Ok(TokenIssuer {
            cert_der: cert.der().to_vec(),
            cert_pem: cert.pem(),
            key,
        })
    }

    fn mint(&self, repository: &str, actions: &[&str]) -> Result<String, RegistryError> {
        use base64::Engine as _;
        use rcgen::SigningKey as _;
        let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let header = serde_json::json!({
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64::engine::general_purpose::STANDARD.encode(&self.cert_der)],
        });
        let claims = serde_json::json!({
            "iss": TOKEN_ISSUER,
            "sub": "pacto-test",
            "aud": TOKEN_SERVICE,
            "exp": now + 3600,
            "nbf": now.saturating_sub(60),
            "iat": now.saturating_sub(60),
            "jti": format!("{now}-{repository}"),
            "access": [{"type": "repository", "name": repository, "actions": actions}],
        });
        let signing_input = format!(
            "{}.{}",
            b64url.encode(header.to_string()),
            b64url.encode(claims.to_string())
        );
        let der = self
            .key
            .sign(signing_input.as_bytes())
            .map_err(|e| RegistryError::Token(e.to_string()))?;
        let raw = ecdsa_der_to_raw(&der)
            .ok_or_else(|| RegistryError::Token("unexpected ECDSA signature encoding".into()))?;
        Ok(format!("{signing_input}.{}", b64url.encode(raw)))
    }
}

/// Converts an ASN.1 `SEQUENCE { INTEGER r, INTEGER s }` P-256 signature to JWS `r || s`.
fn ecdsa_der_to_raw(der: &[u8]) -> Option<[u8; 64]> {
    fn integer(input: &[u8]) -> Option<(&[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&len, rest) = rest.split_first()?;
        if tag != 0x02 || usize::from(len) > rest.len() {
            return None;
        }
        Some(rest.split_at(usize::from(len)))
    }
    let (&tag, rest) = der.split_first()?;
    let (_, body) = rest.split_first()?;
    if tag != 0x30 {
        return None;
    }
    let (r, rest) = integer(body)?;
    let (s, _) = integer(rest)?;
    let mut out = [0u8; 64];
    let (left, right) = out.split_at_mut(32);
    for (value, slot) in [(r, left), (s, right)] {
        let value = &value[value.len().saturating_sub(32)..];
        slot[32 - value.len()..].copy_from_slice(value);
    }
    Some(out)
}

/// A minimal HTTP/1.0 GET returning the status code, or `None` if the server is not answering.
pub(crate) fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf).ok()?;
    let head = std::str::from_utf8(&buf[..n]).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_and_cleans_up() {
        let registry = Registry::start().expect("registry starts");
        assert_eq!(http_status(registry.addr(), "/v2/"), Some(200));
        let dir = registry.storage_dir();
        let addr = registry.addr();
        drop(registry);
        assert!(!dir.exists(), "temp dir removed");
        assert_eq!(http_status(addr, "/v2/"), None, "process stopped");
    }

    #[test]
    fn the_access_log_lists_every_request() {
        let registry = Registry::start().expect("registry starts");
        assert_eq!(
            http_status(registry.addr(), "/v2/team/api/manifests/1.0.0"),
            Some(404)
        );
        // The registry writes an entry once the response has gone out: wait for it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let manifests = loop {
            let manifests: Vec<AccessEntry> = registry
                .access_log()
                .into_iter()
                .filter(AccessEntry::is_manifest)
                .collect();
            if !manifests.is_empty() || std::time::Instant::now() > deadline {
                break manifests;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(
            manifests,
            vec![AccessEntry {
                method: "GET".to_owned(),
                path: "/v2/team/api/manifests/1.0.0".to_owned(),
                status: 404,
            }]
        );
        assert!(registry.access_log().iter().any(|e| e.path == "/v2/"));
    }

    #[test]
    fn access_lines_parse_and_other_lines_are_skipped() {
        let log = "time=\"2026-12-04T19:51:05Z\" level=error msg=\"response completed with error\"\n\
                   127.0.0.1 - - [04/Dec/2026:19:51:05 +0000] \"HEAD /v2/foo/manifests/1.0 HTTP/1.1\" 404 93 \"\" \"curl/7.88.1\"\n\
                   127.0.0.1 - - [04/Dec/2026:19:51:05 +0000] \"GET /v2/foo/tags/list?n=100 HTTP/1.1\" 200 20 \"\" \"ua\"\n";
        let entries = parse_access_log(log);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].method, "HEAD");
        assert!(entries[0].is_manifest() && !entries[0].is_blob());
        assert_eq!(entries[0].status, 404);
        assert!(entries[1].is_tag_list());
        assert_eq!(entries[1].path, "/v2/foo/tags/list?n=100");
    }

    #[test]
    fn token_auth_accepts_minted_tokens_only() {
        let registry = Registry::start_with_token_auth().expect("starts");
        assert_eq!(http_status(registry.addr(), "/v2/"), Some(401));
        let token = registry.mint_token("x/y", &["pull"]).expect("token");
        assert_eq!(token.split('.').count(), 3);
        assert!(registry.mint_untrusted_token("x/y", &["pull"]).is_ok());
    }

    #[test]
    fn basic_auth_requires_credentials() {
        let registry = Registry::start_with_basic_auth("alice", "wonderland").expect("starts");
        assert_eq!(http_status(registry.addr(), "/v2/"), Some(401));
        assert_eq!(registry.basic_auth(), Some(("alice", "wonderland")));
    }
}
