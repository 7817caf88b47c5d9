//! Shared harness of the resolver's integration tests: contracts, pushing them to a real
//! docker-registry with `pacto-oci`, resolvers configured for plain-HTTP loopback registries, and
//! counting the registry's requests from its own log.

#![allow(dead_code, reason = "each test binary uses a different subset")]
#![allow(
    clippy::unwrap_used,
    reason = "test harness: a failed setup step should fail the test"
)]

use std::sync::Arc;
use std::time::Duration;

use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
use pacto_contract::reference::Reference;
use pacto_contract_resolver::RegistryOptions;
use pacto_contract_resolver::{ContractSource, Outcome, ResolveInput, ResolvedContract};
use pacto_contract_resolver::{Resolver, ResolverConfig};
use pacto_contract_resolver::{SecretData, SecretReadError, SecretSource};
use pacto_oci::{BundleMeta, ClientOptions, Credentials, RegistryClient};
use pacto_runtime::testing::eventually;
use pacto_testenv::registry::{AccessEntry, Registry};

/// A valid 2.0 contract for `name` at `version`, with an extra description to vary content.
pub fn contract_yaml(name: &str, version: &str, note: &str) -> String {
    format!(
        "pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: {version}\nmetadata:\n  note: \"{note}\"\n"
    )
}

/// A bundle holding only `pacto.yaml`.
pub fn bundle(yaml: &str) -> BundleFiles {
    let mut files = BundleFiles::new();
    files.insert(CONTRACT_FILE, yaml.as_bytes().to_vec());
    files
}

/// Client options for a plain-HTTP loopback registry.
pub fn client_options(registry: &Registry) -> ClientOptions {
    ClientOptions {
        insecure_registries: vec![registry.host()],
        ..ClientOptions::default()
    }
}

/// A pushing client (credentials as given).
pub fn pusher(registry: &Registry, credentials: &Credentials) -> RegistryClient {
    RegistryClient::new(client_options(registry), credentials).unwrap()
}

/// The credentials of a basic-auth registry (anonymous otherwise).
pub fn admin_credentials(registry: &Registry) -> Credentials {
    match registry.basic_auth() {
        Some((u, p)) => Credentials::Basic {
            username: u.to_owned(),
            password: p.to_owned(),
        },
        None => Credentials::Anonymous,
    }
}

/// Pushes `files` as `<host>/<repo>:<tag>` (overwriting) and returns the manifest digest.
pub async fn push(registry: &Registry, repo: &str, tag: &str, files: &BundleFiles) -> String {
    push_with(registry, &admin_credentials(registry), repo, tag, files).await
}

/// Like [`push`] with explicit credentials.
pub async fn push_with(
    registry: &Registry,
    credentials: &Credentials,
    repo: &str,
    tag: &str,
    files: &BundleFiles,
) -> String {
    let reference = Reference::parse(&format!("{}/{repo}:{tag}", registry.host())).unwrap();
    let meta = BundleMeta {
        name: repo.to_owned(),
        version: tag.to_owned(),
        pacto_version: "2.0".to_owned(),
    };
    pusher(registry, credentials)
        .push(&reference, files, &meta, true, &|_| {})
        .await
        .unwrap()
        .digest
}

/// Pushes a contract `name@version` under `tag` and returns (digest, yaml).
pub async fn push_contract(
    registry: &Registry,
    repo: &str,
    tag: &str,
    version: &str,
    note: &str,
) -> (String, String) {
    let yaml = contract_yaml("svc", version, note);
    let digest = push(registry, repo, tag, &bundle(&yaml)).await;
    (digest, yaml)
}

/// Resolver options for tests: the given plain-HTTP hosts, quick retries.
pub fn config(insecure: &[String]) -> ResolverConfig {
    ResolverConfig {
        registry: RegistryOptions {
            client: ClientOptions {
                insecure_registries: insecure.to_vec(),
                connect_timeout: Duration::from_secs(2),
                operation_timeout: Duration::from_secs(20),
                ..ClientOptions::default()
            },
            max_retries: 1,
            retry_min_delay: Duration::from_millis(20),
            retry_max_delay: Duration::from_millis(50),
            ..RegistryOptions::default()
        },
        ..ResolverConfig::default()
    }
}

/// A resolver for `registry` (anonymous unless `secrets` is given).
pub fn resolver(registry: &Registry, secrets: Option<Arc<dyn SecretSource>>) -> Resolver {
    Resolver::new(config(&[registry.host()]), secrets).unwrap()
}

/// A Resolve input for an OCI reference.
pub fn oci_input(reference: &str, pull_secret: Option<&str>) -> ResolveInput {
    ResolveInput {
        namespace: "team-a".to_owned(),
        pacto_name: "svc".to_owned(),
        source: ContractSource::Oci(reference.to_owned()),
        pull_secret: pull_secret.map(str::to_owned),
        overrides: Vec::new(),
        constraint: None,
        max_age: std::time::Duration::ZERO,
    }
}

/// The resolved contract, or a panic naming the outcome.
pub fn expect_resolved(outcome: Outcome) -> ResolvedContract {
    match outcome {
        Outcome::Resolved(r) => *r,
        other => panic!("expected Resolved, got {other:?}"),
    }
}

/// The Unavailable reason, or a panic naming the outcome.
pub fn expect_unavailable(outcome: Outcome) -> String {
    match outcome {
        Outcome::Unavailable { reason, .. } => reason,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// The Invalid message, or a panic naming the outcome. Also checks the rule that every Invalid
/// carries a validation report whose errors each name a code and a path.
pub fn expect_invalid(outcome: Outcome) -> String {
    expect_invalid_report(outcome).0
}

/// The Invalid message and the (code, path) of each error of its report, or a panic naming the
/// outcome; panics too when the report has no error, or an error without a code or a path.
pub fn expect_invalid_report(outcome: Outcome) -> (String, Vec<(String, String)>) {
    match outcome {
        Outcome::Invalid {
            message, report, ..
        } => {
            assert!(!report.errors.is_empty(), "{message}: no error reported");
            for error in &report.errors {
                assert!(
                    !error.code.is_empty() && !error.path.is_empty(),
                    "{message}: an error without code or path: {error:?}"
                );
            }
            let issues = report
                .errors
                .into_iter()
                .map(|e| (e.code, e.path))
                .collect();
            (message, issues)
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

/// HTTP requests the registry has answered so far, from its own log (one
/// `msg="response completed…"` line per request).
pub fn registry_requests(registry: &Registry) -> Vec<String> {
    registry
        .log()
        .lines()
        .filter(|l| l.contains("msg=\"response completed"))
        .map(|l| {
            let field = |name: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(name))
                    .unwrap_or("?")
                    .to_owned()
            };
            format!(
                "{} {}",
                field("http.request.method="),
                field("http.request.uri=")
            )
        })
        .collect()
}

/// The registry's requests so far, excluding markers, once a fresh marker request (a 404 for
/// a unique repository) shows up in the log: every request answered before the marker was sent
/// is then logged too. Waits with a deadline.
pub async fn registry_requests_settled(registry: &Registry) -> Vec<String> {
    let marker = send_marker(registry).await;
    eventually(
        "the marker request in the registry log",
        Duration::from_secs(10),
        || {
            let requests = registry_requests(registry);
            let logged = requests.iter().any(|r| r.contains(&marker));
            std::future::ready(logged.then(|| {
                requests
                    .into_iter()
                    .filter(|r| !r.contains("/v2/marker"))
                    .collect()
            }))
        },
    )
    .await
}

/// The registry's access log (every request it answered, refused ones included), excluding
/// markers and readiness probes, once a fresh marker request shows up in it. Waits with a
/// deadline.
pub async fn access_log_settled(registry: &Registry) -> Vec<AccessEntry> {
    let marker = send_marker(registry).await;
    eventually(
        "the marker request in the registry's access log",
        Duration::from_secs(10),
        || {
            let entries = registry.access_log();
            let logged = entries.iter().any(|e| e.path.contains(&marker));
            std::future::ready(logged.then(|| {
                entries
                    .into_iter()
                    .filter(|e| !e.path.starts_with("/v2/marker") && e.path != "/v2/")
                    .collect()
            }))
        },
    )
    .await
}

/// Sends a request for a unique repository (answered 404, or 401 on a registry with
/// authentication) and returns its marker.
async fn send_marker(registry: &Registry) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    static MARKER: AtomicU64 = AtomicU64::new(0);
    let marker = format!(
        "marker{}x{}",
        std::process::id(),
        MARKER.fetch_add(1, Ordering::Relaxed)
    );
    let mut stream = tokio::net::TcpStream::connect(registry.addr())
        .await
        .unwrap();
    // Authenticated on a registry with basic authentication, whose application log names only
    // requests that got past it.
    let authorization = registry
        .basic_auth()
        .map_or_else(String::new, |(user, password)| {
            use base64::Engine as _;
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Authorization: Basic {token}\r\n")
        });
    stream
        .write_all(
            format!(
                "GET /v2/{marker}/tags/list HTTP/1.0\r\nHost: {}\r\n{authorization}\r\n",
                registry.host()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut sink = Vec::new();
    stream.read_to_end(&mut sink).await.unwrap();
    marker
}

/// A loopback port with nothing listening.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// One Secret held in memory: name, type, data.
pub type FakeSecret = (&'static str, &'static str, Vec<(&'static str, String)>);

/// Secrets held in memory.
pub struct Secrets(pub Vec<FakeSecret>);

impl SecretSource for Secrets {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<SecretData, SecretReadError>> + Send + 'a>>
    {
        let found = self
            .0
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, kind, data)| SecretData {
                kind: (*kind).to_owned(),
                data: data
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                    .collect(),
            });
        Box::pin(async move {
            found.ok_or_else(|| SecretReadError::NotFound {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
        })
    }
}
