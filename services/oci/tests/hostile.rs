//! The registry client against hostile registries served on loopback by the test itself
//! (docs/design/resolution.md#hostile-registries): oversized bodies, endless tag lists, a gzip
//! bomb, redirects and token realms pointing at a canary that must never be contacted, error
//! bodies that must never reach a message, and credentials that must never leave their registry.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pacto_contract::reference::Reference;
use pacto_oci::{ClientOptions, Credentials, ErrorClass, OciError, RegistryClient};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// A response the test server sends.
enum Body {
    Bytes(Vec<u8>),
    /// `len` bytes of `fill`, streamed without a Content-Length (read until close).
    Endless {
        fill: u8,
        len: u64,
    },
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
}

impl Reply {
    fn ok(body: Vec<u8>) -> Self {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: Body::Bytes(body),
        }
    }
    fn status(status: u16, body: &str) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Bytes(body.as_bytes().to_vec()),
        }
    }
    fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// What a server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicU64,
    body_bytes_written: AtomicU64,
    /// (method, path, Authorization header)
    requests: Mutex<Vec<(String, String, Option<String>)>>,
}

type Handler = Arc<dyn Fn(&str, &str) -> Reply + Send + Sync>;

/// Serves `handler` on a loopback port (one request per connection).
async fn serve(handler: Handler) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let host = listener.local_addr().expect("addr").to_string();
    let seen = Arc::new(Seen::default());
    let seen2 = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            seen2.connections.fetch_add(1, Ordering::SeqCst);
            let handler = Arc::clone(&handler);
            let seen = Arc::clone(&seen2);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut byte).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&byte[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let mut lines = text.lines();
                let mut first = lines.next().unwrap_or_default().split(' ');
                let method = first.next().unwrap_or_default().to_owned();
                let path = first.next().unwrap_or_default().to_owned();
                let auth = lines
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                    .map(|(_, v)| v.trim().to_owned());
                seen.requests
                    .lock()
                    .expect("lock")
                    .push((method.clone(), path.clone(), auth));
                let reply = handler(&method, &path);
                let mut out = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
                for (k, v) in &reply.headers {
                    let _ = write!(out, "{k}: {v}\r\n");
                }
                match &reply.body {
                    Body::Bytes(b) => {
                        let _ = write!(out, "Content-Length: {}\r\n\r\n", b.len());
                    }
                    Body::Endless { .. } => out.push_str("\r\n"),
                }
                if socket.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
                if method == "HEAD" {
                    return;
                }
                match reply.body {
                    Body::Bytes(b) => {
                        if socket.write_all(&b).await.is_ok() {
                            seen.body_bytes_written
                                .fetch_add(b.len() as u64, Ordering::SeqCst);
                        }
                    }
                    Body::Endless { fill, len } => {
                        let chunk = vec![fill; 64 * 1024];
                        let mut left = len;
                        while left > 0 {
                            let n = left.min(chunk.len() as u64);
                            let Ok(n_usize) = usize::try_from(n) else {
                                return;
                            };
                            if socket.write_all(&chunk[..n_usize]).await.is_err() {
                                return;
                            }
                            seen.body_bytes_written.fetch_add(n, Ordering::SeqCst);
                            left -= n;
                        }
                    }
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    (host, seen)
}

fn client(host: &str, credentials: &Credentials, allowed: &[&str]) -> RegistryClient {
    RegistryClient::new(
        ClientOptions {
            insecure_registries: vec![host.to_owned()],
            operation_timeout: Duration::from_mins(1),
            allowed_hosts: allowed.iter().map(|h| (*h).to_owned()).collect(),
            ..ClientOptions::default()
        },
        credentials,
    )
    .expect("client")
}

fn reference(host: &str, rest: &str) -> Reference {
    Reference::parse(&format!("{host}/{rest}")).expect("reference")
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The message of an error with all its sources.
fn full_text(e: &OciError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(" / ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Peak resident memory of this process so far (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A gzip bomb: 1 MiB of zeros gzip'd once, the member repeated 1024 times (multi-member gzip
/// decodes to 1 GiB) in about 1 MiB.
fn gzip_bomb() -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&vec![0u8; 1024 * 1024]).expect("gzip");
    let member = encoder.finish().expect("gzip");
    member.repeat(1024)
}

const MIB: u64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_tag_floods_and_gzip_bombs_are_refused_with_bounded_reads() {
    let bomb = Arc::new(gzip_bomb());
    let config = b"{}".to_vec();
    let bomb_manifest = Arc::new(
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&config), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.pacto.bundle.layer.v1.tar+gzip", "digest": digest(&bomb), "size": bomb.len()}],
        }))
        .expect("json"),
    );
    let one_page: Arc<Vec<u8>> = Arc::new(
        serde_json::to_vec(&serde_json::json!({
            "name": "flood/one",
            "tags": (0..300_000).map(|i| format!("1.0.{i}")).collect::<Vec<_>>(),
        }))
        .expect("json"),
    );
    let (host, seen) = serve(Arc::new(move |method, path| {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        match path {
            "/v2/" => Reply::ok(b"{}".to_vec()),
            "/v2/huge/manifests/1.0.0" => Reply {
                status: 200,
                headers: vec![(
                    "Content-Type".into(),
                    "application/vnd.oci.image.manifest.v1+json".into(),
                )],
                body: Body::Endless {
                    fill: b' ',
                    len: 200 * MIB,
                },
            },
            "/v2/flood/one/tags/list" => Reply::ok(one_page.to_vec()),
            "/v2/flood/paged/tags/list" => {
                // 300,000 distinct tags, 1000 per page, in `last=` order.
                let start: u64 = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("last="))
                    .and_then(|l| l.strip_prefix("t"))
                    .and_then(|n| n.parse::<u64>().ok())
                    .map_or(0, |n| n + 1);
                let tags: Vec<String> = (start..(start + 1000).min(300_000))
                    .map(|i| format!("t{i:06}"))
                    .collect();
                Reply::ok(
                    serde_json::to_vec(&serde_json::json!({"name": "flood/paged", "tags": tags}))
                        .expect("json"),
                )
            }
            "/v2/bomb/manifests/1.0.0" => Reply::ok(bomb_manifest.to_vec()),
            p if p.starts_with("/v2/bomb/blobs/") => {
                if p.ends_with(&digest(&bomb)) {
                    Reply::ok(bomb.to_vec())
                } else {
                    Reply::ok(b"{}".to_vec())
                }
            }
            _ => {
                let _ = method;
                Reply::status(404, r#"{"errors":[{"code":"NOT_FOUND"}]}"#)
            }
        }
    }))
    .await;
    let c = client(&host, &Credentials::Anonymous, &[]);
    let no_progress = |_: pacto_oci::Progress| {};
    let rss_before = peak_rss_kib();

    // 200 MiB manifest: refused at the 4 MiB limit, having read only a little past it.
    let started = Instant::now();
    let err = c
        .pull(&reference(&host, "huge:1.0.0"), &no_progress)
        .await
        .expect_err("a 200 MiB manifest is refused");
    let written = seen.body_bytes_written.swap(0, Ordering::SeqCst);
    println!(
        "200 MiB manifest: {err} after {:?}; server wrote {} KiB",
        started.elapsed(),
        written / 1024
    );
    assert_eq!(err.class(), ErrorClass::TooLarge, "{err}");
    assert!(
        written < 32 * MIB,
        "the client read {written} bytes of a 200 MiB manifest"
    );

    // 300,000 tags in one page: the page is over the byte limit.
    let err = c
        .list_tags(&reference(&host, "flood/one"))
        .await
        .expect_err("a 300,000-tag page is refused");
    println!("300,000 tags in one page: {err}");
    assert_eq!(err.class(), ErrorClass::TooLarge, "{err}");

    // 300,000 tags in pages: at most max_tag_pages pages are read, then a clear error.
    let started = Instant::now();
    let before = seen.requests.lock().expect("lock").len();
    let err = c
        .list_tags(&reference(&host, "flood/paged"))
        .await
        .expect_err("a 300-page tag list is refused");
    let pages = seen.requests.lock().expect("lock").len() - before;
    println!(
        "300,000 tags in pages: {err} after {:?}, {pages} pages",
        started.elapsed()
    );
    assert_eq!(err.class(), ErrorClass::TooLarge, "{err}");
    assert!(
        matches!(err, OciError::TooManyTags { seen: 100_000, .. }),
        "{err}"
    );
    assert!(pages <= 100, "{pages} pages read");

    // A gzip bomb (1 MiB expanding to 1 GiB): refused by the decompression bound.
    let started = Instant::now();
    let err = c
        .pull(&reference(&host, "bomb:1.0.0"), &no_progress)
        .await
        .expect_err("a gzip bomb is refused");
    println!("gzip bomb: {err} after {:?}", started.elapsed());
    assert_eq!(err.class(), ErrorClass::TooLarge, "{err}");

    let rss_after = peak_rss_kib();
    println!(
        "peak RSS: {} KiB before, {} KiB after (delta {} KiB)",
        rss_before,
        rss_after,
        rss_after.saturating_sub(rss_before)
    );
    assert!(
        rss_after.saturating_sub(rss_before) < 256 * 1024,
        "peak RSS grew by {} KiB",
        rss_after.saturating_sub(rss_before)
    );
}

const MARKER: &str = "HOSTILE-BODY-MARKER-4f1c";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_and_token_realms_never_reach_other_hosts_and_bodies_stay_out_of_messages() {
    let (canary, canary_seen) = serve(Arc::new(|_: &str, _: &str| {
        Reply::ok(b"{\"token\":\"x\"}".to_vec())
    }))
    .await;
    let (allowed, allowed_seen) = serve(Arc::new(|_: &str, _: &str| {
        Reply::status(404, r#"{"errors":[{"code":"BLOB_UNKNOWN"}]}"#)
    }))
    .await;
    let canary_url = format!("http://{canary}");
    let allowed_url = format!("http://{allowed}");
    let (host, seen) = serve(Arc::new(move |_: &str, path: &str| {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        match path {
            // Redirects to the canary, for every kind of request.
            "/v2/redir/manifests/1.0.0" => Reply::status(302, "")
                .header("Location", &format!("{canary_url}/v2/redir/manifests/1.0.0")),
            "/v2/redir/tags/list" => {
                Reply::status(307, "").header("Location", &format!("{canary_url}/steal"))
            }
            // A token realm on the canary.
            "/v2/realm/manifests/1.0.0" | "/v2/realm/tags/list" => Reply::status(401, "")
                .header(
                    "WWW-Authenticate",
                    &format!(r#"Bearer realm="{canary_url}/token",service="x",scope="repository:realm:pull""#),
                ),
            // A redirect on the same host is followed.
            "/v2/same/tags/list" => Reply::status(302, "").header("Location", "/v2/same2/tags/list"),
            "/v2/same2/tags/list" => Reply::ok(br#"{"name":"same","tags":["1.0.0"]}"#.to_vec()),
            // A redirect to an allow-listed host is followed (and carries no credentials).
            "/v2/cdn/tags/list" => {
                Reply::status(302, "").header("Location", &format!("{allowed_url}/cdn/tags"))
            }
            // Error bodies carrying a marker.
            "/v2/err500/manifests/1.0.0" => Reply::status(500, &format!("<html>{MARKER}</html>")),
            "/v2/err404/manifests/1.0.0" => Reply::status(
                404,
                &format!(r#"{{"errors":[{{"code":"MANIFEST_UNKNOWN","message":"{MARKER}","detail":"{MARKER}"}}]}}"#),
            ),
            "/v2/err400/tags/list" => Reply::status(400, &format!(r#"{{"errors":[{{"code":"{MARKER}"}}]}}"#)),
            "/v2/badjson/tags/list" => Reply::ok(format!(r#"{{"tags":[{MARKER}]}}"#).into_bytes()),
            _ => Reply::status(404, ""),
        }
    }))
    .await;
    let creds = Credentials::Basic {
        username: "alice".into(),
        password: "wonderland".into(),
    };
    let c = client(&host, &creds, &[&allowed]);
    let no_progress = |_: pacto_oci::Progress| {};

    let err = c
        .pull(&reference(&host, "redir:1.0.0"), &no_progress)
        .await
        .expect_err("redirect refused");
    println!("redirect: {err}");
    assert_eq!(err.class(), ErrorClass::Refused, "{err}");
    assert!(err.to_string().contains(&canary), "{err}");
    let err = c
        .list_tags(&reference(&host, "redir"))
        .await
        .expect_err("redirect refused");
    assert_eq!(err.class(), ErrorClass::Refused, "{err}");
    let err = c
        .resolve_digest(&reference(&host, "realm:1.0.0"))
        .await
        .expect_err("realm refused");
    println!("realm: {err}");
    assert_eq!(err.class(), ErrorClass::Refused, "{err}");
    let err = c
        .list_tags(&reference(&host, "realm"))
        .await
        .expect_err("realm refused");
    assert_eq!(err.class(), ErrorClass::Refused, "{err}");
    assert_eq!(
        canary_seen.connections.load(Ordering::SeqCst),
        0,
        "the canary was contacted"
    );

    assert_eq!(
        c.list_tags(&reference(&host, "same"))
            .await
            .expect("same-host redirect"),
        vec!["1.0.0".to_owned()]
    );
    let err = c
        .list_tags(&reference(&host, "cdn"))
        .await
        .expect_err("the allowed host answers 404");
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
    let on_allowed = allowed_seen.requests.lock().expect("lock").clone();
    assert_eq!(on_allowed.len(), 1, "{on_allowed:?}");
    assert_eq!(
        on_allowed[0].2, None,
        "credentials followed a redirect to another host"
    );
    assert!(
        seen.requests
            .lock()
            .expect("lock")
            .iter()
            .any(|r| r.2.is_some()),
        "the registry itself gets the credentials"
    );

    for (what, result) in [
        (
            "500",
            c.pull(&reference(&host, "err500:1.0.0"), &no_progress)
                .await
                .map(|_| ()),
        ),
        (
            "404",
            c.pull(&reference(&host, "err404:1.0.0"), &no_progress)
                .await
                .map(|_| ()),
        ),
        (
            "400",
            c.list_tags(&reference(&host, "err400")).await.map(|_| ()),
        ),
        (
            "bad json",
            c.list_tags(&reference(&host, "badjson")).await.map(|_| ()),
        ),
    ] {
        let err = result.expect_err(what);
        let text = full_text(&err);
        println!("{what}: {text}");
        assert!(
            !text.contains(MARKER),
            "{what}: response text in the message: {text}"
        );
        assert!(
            !format!("{err:?}").contains(MARKER),
            "{what}: response text in Debug"
        );
    }
}
