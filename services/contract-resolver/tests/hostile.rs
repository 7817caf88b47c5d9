//! The resolver against a hostile registry served on loopback by the test
//! (docs/design/resolution.md#hostile-registries): oversized answers become a clear Invalid,
//! refused redirects an Unavailable, no response text reaches an outcome, a redirect never
//! reaches the canary, and concurrent pulls stay under `max_concurrent_pulls`.

#![allow(
    clippy::unwrap_used,
    reason = "test: a failed setup step should fail the test"
)]

mod common;

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::Secrets;
use pacto_contract_resolver::{Outcome, Resolver, SecretSource};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

const MARKER: &str = "HOSTILE-RESOLVER-MARKER-77e0";
const MIB: u64 = 1024 * 1024;

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Stream this many filler bytes after `body`, without a Content-Length.
    endless: u64,
    /// Hold the answer this long (counts as in flight meanwhile).
    delay: Duration,
}

fn reply(status: u16, body: &str) -> Reply {
    Reply {
        status,
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
        endless: 0,
        delay: Duration::ZERO,
    }
}

#[derive(Default)]
struct Seen {
    /// Authorization headers received.
    authorizations: std::sync::Mutex<Vec<String>>,
    connections: AtomicU64,
    written: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

type Handler = Arc<dyn Fn(&str, &str) -> Reply + Send + Sync>;

async fn serve(handler: Handler) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Seen::default());
    let all = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            all.connections.fetch_add(1, Ordering::SeqCst);
            let (handler, seen) = (Arc::clone(&handler), Arc::clone(&all));
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                if let Some((_, v)) = text
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                {
                    seen.authorizations
                        .lock()
                        .unwrap()
                        .push(v.trim().to_owned());
                }
                let mut first = text.lines().next().unwrap_or_default().split(' ');
                let method = first.next().unwrap_or_default().to_owned();
                let path = first.next().unwrap_or_default().to_owned();
                let r = handler(&method, &path);
                if !r.delay.is_zero() {
                    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    seen.max_in_flight.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(r.delay).await;
                    seen.in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                let mut out = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", r.status);
                for (k, v) in &r.headers {
                    let _ = write!(out, "{k}: {v}\r\n");
                }
                if r.endless == 0 {
                    let _ = write!(out, "Content-Length: {}\r\n", r.body.len());
                }
                out.push_str("\r\n");
                if socket.write_all(out.as_bytes()).await.is_err() || method == "HEAD" {
                    return;
                }
                if socket.write_all(&r.body).await.is_err() {
                    return;
                }
                let chunk = vec![b' '; 64 * 1024];
                let mut left = r.endless;
                while left > 0 {
                    let n = left.min(chunk.len() as u64);
                    let Ok(len) = usize::try_from(n) else { return };
                    if socket.write_all(&chunk[..len]).await.is_err() {
                        return;
                    }
                    seen.written.fetch_add(n, Ordering::SeqCst);
                    left -= n;
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    (host, seen)
}

fn digest_of(n: u32) -> String {
    format!("sha256:{n:064x}")
}

fn outcome_text(outcome: &Outcome) -> String {
    format!("{outcome:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_registry_outcomes_are_bounded_clear_and_never_echo_answers() {
    let (canary, canary_seen) = serve(Arc::new(|_: &str, _: &str| reply(200, "{}"))).await;
    let canary_url = format!("http://{canary}");
    let flood: Arc<String> = Arc::new(
        serde_json::json!({
            "name": "flood",
            "tags": (0..300_000).map(|i| format!("1.0.{i}")).collect::<Vec<_>>(),
        })
        .to_string(),
    );
    let (host, seen) = serve(Arc::new(move |method: &str, path: &str| {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        let parts: Vec<&str> = path.split('/').collect();
        // /v2/<repo>/manifests/<version>
        match (method, parts.get(2).copied(), parts.get(3).copied()) {
            (_, Some("flood"), Some("tags")) => reply(200, &flood),
            (_, Some("errtags"), Some("tags")) => reply(
                400,
                &format!(r#"{{"errors":[{{"code":"X","message":"{MARKER}"}}]}}"#),
            ),
            ("HEAD", Some("headredir"), Some("manifests")) => {
                let mut r = reply(307, "");
                r.headers
                    .push(("Location".into(), format!("{canary_url}/v2/x/manifests/y")));
                r
            }
            ("HEAD", Some(_), Some("manifests")) => {
                let mut r = reply(200, "");
                r.headers
                    .push(("Docker-Content-Digest".into(), digest_of(1)));
                r
            }
            ("GET", Some("huge"), Some("manifests")) => Reply {
                endless: 200 * MIB,
                ..reply(200, "")
            },
            ("GET", Some("err500"), Some("manifests")) => {
                reply(500, &format!("<html><body>{MARKER}</body></html>"))
            }
            ("GET", Some("redir"), Some("manifests")) => {
                let mut r = reply(302, "");
                r.headers
                    .push(("Location".into(), format!("{canary_url}/v2/x/manifests/y")));
                r
            }
            ("GET", Some(repo), Some("manifests")) if repo.starts_with("slow") => Reply {
                delay: Duration::from_millis(300),
                ..reply(404, r#"{"errors":[{"code":"MANIFEST_UNKNOWN"}]}"#)
            },
            _ => reply(404, ""),
        }
    }))
    .await;
    let mut config = common::config(std::slice::from_ref(&host));
    config.registry.max_retries = 0;
    config.registry.max_concurrent_pulls = 2;
    let resolver = Arc::new(Resolver::new(config, None).unwrap());

    // 300,000 tags: the tag-list page is over its byte limit, a clear Invalid.
    let outcome = resolver
        .resolve(&common::oci_input(&format!("{host}/flood"), None))
        .await;
    let message = common::expect_invalid(outcome);
    println!("300,000 tags: {message}");
    assert!(message.contains("over the"), "{message}");

    // A 200 MiB manifest: Invalid, having read about the 4 MiB limit.
    let outcome = resolver
        .resolve(&common::oci_input(&format!("{host}/huge:1.0.0"), None))
        .await;
    let written = seen.written.load(Ordering::SeqCst);
    let message = common::expect_invalid(outcome);
    println!(
        "200 MiB manifest: {message}; the registry wrote {} KiB",
        written / 1024
    );
    assert!(message.contains("manifest"), "{message}");
    assert!(
        written < 32 * MIB,
        "read {written} bytes of a 200 MiB manifest"
    );

    // Error bodies never reach an outcome.
    for reference in [format!("{host}/err500:1.0.0"), format!("{host}/errtags")] {
        let outcome = resolver.resolve(&common::oci_input(&reference, None)).await;
        let text = outcome_text(&outcome);
        println!("{reference}: {text}");
        assert!(
            !text.contains(MARKER),
            "response text in the outcome: {text}"
        );
    }

    // A redirect to another host: Unavailable, naming the host and the flag; canary untouched.
    let outcome = resolver
        .resolve(&common::oci_input(&format!("{host}/redir:1.0.0"), None))
        .await;
    let reason = common::expect_unavailable(outcome);
    println!("redirect: {reason}");
    assert!(
        reason.contains(&canary) && reason.contains("--registry-allowed-hosts"),
        "{reason}"
    );
    let reason = common::expect_unavailable(
        resolver
            .resolve(&common::oci_input(&format!("{host}/headredir:1.0.0"), None))
            .await,
    );
    println!("HEAD redirect: {reason}");
    assert!(reason.contains("--registry-allowed-hosts"), "{reason}");
    assert_eq!(canary_seen.connections.load(Ordering::SeqCst), 0);

    // Six pulls at once (distinct repositories): at most two in flight.
    let pulls: Vec<_> = (0..6)
        .map(|i| {
            let resolver = Arc::clone(&resolver);
            let reference = format!("{host}/slow{i}:1.0.0");
            tokio::spawn(
                async move { resolver.resolve(&common::oci_input(&reference, None)).await },
            )
        })
        .collect();
    for pull in pulls {
        common::expect_unavailable(pull.await.unwrap());
    }
    let max = seen.max_in_flight.load(Ordering::SeqCst);
    println!("concurrent pulls: at most {max} in flight");
    assert!((1..=2).contains(&max), "{max} pulls in flight");
}

const SECRET_MARKER: &str = "PULL-SECRET-CONTENT-5c3a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_secret_credentials_reach_only_their_registry_and_are_never_echoed() {
    // A registry that wants credentials for everything and records what it is sent.
    let (host, seen) = serve(Arc::new(|_: &str, _: &str| {
        reply(401, r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#)
    }))
    .await;
    let malformed = format!(r#"{{"auths":{{"{host}":{{"auth":{SECRET_MARKER}}}}}}}"#);
    let secrets = Secrets(vec![
        (
            "unscoped",
            "Opaque",
            vec![("token", format!("tok-{SECRET_MARKER}"))],
        ),
        (
            "other-registry",
            "Opaque",
            vec![
                ("registry", "ghcr.io".to_owned()),
                ("username", "alice".to_owned()),
                ("password", format!("pw-{SECRET_MARKER}")),
            ],
        ),
        (
            "dockercfg-other",
            "kubernetes.io/dockerconfigjson",
            vec![(
                ".dockerconfigjson",
                format!(
                    r#"{{"auths":{{"ghcr.io":{{"username":"a","password":"{SECRET_MARKER}"}}}}}}"#
                ),
            )],
        ),
        (
            "malformed",
            "kubernetes.io/dockerconfigjson",
            vec![(".dockerconfigjson", malformed)],
        ),
        (
            "scoped-here",
            "Opaque",
            vec![
                ("registry", host.clone()),
                ("token", "right-token".to_owned()),
            ],
        ),
    ]);
    let mut config = common::config(std::slice::from_ref(&host));
    config.registry.max_retries = 0;
    let resolver = Resolver::new(config, Some(Arc::new(secrets) as Arc<dyn SecretSource>)).unwrap();
    let reference = format!("{host}/acme/svc:1.0.0");
    for name in ["unscoped", "other-registry", "dockercfg-other", "malformed"] {
        let outcome = resolver
            .resolve(&common::oci_input(&reference, Some(name)))
            .await;
        let text = outcome_text(&outcome);
        println!("{name}: {text}");
        let reason = common::expect_unavailable(outcome);
        assert!(
            reason.contains(name),
            "the message names the Secret: {reason}"
        );
        assert!(
            !text.contains(SECRET_MARKER),
            "Secret content echoed: {text}"
        );
    }
    assert!(
        seen.authorizations.lock().unwrap().is_empty(),
        "credentials of another registry were sent: {:?}",
        seen.authorizations.lock().unwrap()
    );
    // The malformed config is reported by key and position.
    let reason = common::expect_unavailable(
        resolver
            .resolve(&common::oci_input(&reference, Some("malformed")))
            .await,
    );
    assert!(
        reason.contains(".dockerconfigjson") && reason.contains("line 1"),
        "{reason}"
    );
    // A Secret scoped to this registry is sent, and only that.
    let _ = resolver
        .resolve(&common::oci_input(&reference, Some("scoped-here")))
        .await;
    assert_eq!(
        *seen.authorizations.lock().unwrap(),
        ["Bearer right-token".to_owned()]
    );
}
