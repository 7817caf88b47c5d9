//! The read side of the registry client (manifest HEAD/GET, tag-list pages, blobs and the token
//! exchange) on our own HTTP client, so that a hostile registry controls neither our memory nor
//! where we connect (docs/design/resolution.md#hostile-registries):
//!
//! * every body is read in chunks up to a byte limit and refused beyond it (`Content-Length` is
//!   checked first, but never trusted);
//! * redirects are followed only to the registry's own origin (scheme, host, port) or to a host
//!   on the redirect allow-list, at most [`MAX_REDIRECTS`] hops;
//! * a `Bearer` challenge's token realm must satisfy the same rule before it is contacted;
//! * error bodies are read (bounded) only for their OCI error codes: no response text ever lands
//!   in an error message;
//! * credentials go only to the registry host they were resolved for
//!   (docs/design/resolution.md#credentials): never to a redirect target, and to a token realm
//!   only when that realm is allowed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_LENGTH, LOCATION, WWW_AUTHENTICATE};

use crate::credentials::Credentials;
use crate::error::{ErrorClass, OciError};

/// Most redirect hops followed for one request.
pub const MAX_REDIRECTS: usize = 5;
/// Largest error body read (for its OCI error codes only).
pub const MAX_ERROR_BODY_BYTES: u64 = 4 * 1024;
/// Largest token-endpoint answer read.
pub const MAX_TOKEN_BODY_BYTES: u64 = 64 * 1024;
/// Most cached bearer tokens per client (forgetting one costs one extra exchange).
const MAX_TOKENS: usize = 256;

/// `host` or `host:port` of a URL, lower-case.
fn authority(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// Whether `to` may be contacted on behalf of a request first sent to `origin`: the same origin
/// (scheme, host and port: another port of the same host is another service), or its host
/// (`host` or `host:port`) is on `allow`.
pub(crate) fn host_allowed(origin: &Url, to: &Url, allow: &[String]) -> bool {
    let same_origin = origin.scheme() == to.scheme()
        && origin.port_or_known_default() == to.port_or_known_default()
        && origin
            .host_str()
            .zip(to.host_str())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b));
    if same_origin {
        return true;
    }
    let host = to.host_str().unwrap_or_default().to_ascii_lowercase();
    let auth = authority(to);
    allow
        .iter()
        .any(|a| a.eq_ignore_ascii_case(&host) || a.eq_ignore_ascii_case(&auth))
}

/// A `Bearer` challenge: `realm`, `service`, `scope`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub realm: String,
    pub service: Option<String>,
    pub scope: Option<String>,
}

/// Parses `Bearer realm="…",service="…",scope="…"` (quoted values may contain commas).
pub(crate) fn parse_bearer_challenge(header: &str) -> Option<Challenge> {
    let rest = header.trim_start();
    let (scheme, params) = rest.split_once(' ').unwrap_or((rest, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut challenge = Challenge::default();
    let mut chars = params.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "realm" => challenge.realm = value,
            "service" => challenge.service = Some(value),
            "scope" => challenge.scope = Some(value),
            _ => {}
        }
    }
    (!challenge.realm.is_empty()).then_some(challenge)
}

/// The class of an error status (the OCI error codes of the body refine 4xx answers).
fn class_of(status: u16, codes: &[String]) -> ErrorClass {
    if codes.iter().any(|c| c == "UNAUTHORIZED" || c == "DENIED") {
        return ErrorClass::AuthRejected;
    }
    if codes.iter().any(|c| {
        matches!(
            c.as_str(),
            "MANIFEST_UNKNOWN" | "NAME_UNKNOWN" | "BLOB_UNKNOWN" | "NOT_FOUND"
        )
    }) {
        return ErrorClass::NotFound;
    }
    match status {
        401 | 403 => ErrorClass::AuthRejected,
        404 => ErrorClass::NotFound,
        429 | 500..=599 => ErrorClass::Unreachable,
        _ => ErrorClass::Corrupt,
    }
}

/// The OCI error codes of an error body (`{"errors":[{"code":"…"}]}`), nothing else.
fn error_codes(body: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
    }
    serde_json::from_slice::<Envelope>(body)
        .map(|e| {
            e.errors
                .into_iter()
                .map(|e| e.code)
                .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a body in chunks, refusing it past `limit` bytes.
async fn read_bounded(
    mut response: reqwest::Response,
    limit: u64,
    on_chunk: &mut (dyn FnMut(u64) + Send),
) -> Result<Vec<u8>, ReadError> {
    if let Some(declared) = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        && declared > limit
    {
        return Err(ReadError::TooLarge { size: declared });
    }
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        let size = (out.len() + chunk.len()) as u64;
        if size > limit {
            return Err(ReadError::TooLarge { size });
        }
        out.extend_from_slice(&chunk);
        on_chunk(out.len() as u64);
    }
    Ok(out)
}

enum ReadError {
    TooLarge { size: u64 },
    Transport(reqwest::Error),
}

/// What a request is for (names the step in errors).
#[derive(Clone, Copy)]
pub(crate) struct Step<'a> {
    pub operation: &'static str,
    pub what: &'static str,
    pub reference: &'a str,
}

impl Step<'_> {
    fn transport(self, source: reqwest::Error) -> OciError {
        OciError::Transport {
            operation: self.operation,
            reference: self.reference.to_owned(),
            source: source.without_url(),
        }
    }

    fn status(self, status: u16, class: ErrorClass) -> OciError {
        OciError::Status {
            operation: self.operation,
            reference: self.reference.to_owned(),
            status,
            class,
        }
    }

    fn too_large(self, size: u64, limit: u64) -> OciError {
        OciError::TooLarge {
            what: self.what,
            reference: self.reference.to_owned(),
            size,
            limit,
        }
    }

    fn refused(self, kind: &'static str, to: &Url) -> OciError {
        OciError::HostRefused {
            operation: self.operation,
            reference: self.reference.to_owned(),
            kind,
            host: authority(to),
        }
    }
}

/// A token endpoint's answer.
#[derive(serde::Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// A read-only registry session for one credential set.
pub(crate) struct Reader {
    http: reqwest::Client,
    credentials: Credentials,
    allow: Vec<String>,
    /// `(registry authority, scope)` → bearer token from an exchange.
    tokens: Mutex<HashMap<(String, String), String>>,
    /// HTTP requests sent so far (token exchanges included).
    requests: AtomicU64,
}

/// A request body and its content type.
pub(crate) struct Body<'a> {
    pub bytes: &'a [u8],
    pub content_type: &'a str,
}

impl Reader {
    pub(crate) fn new(
        credentials: &Credentials,
        connect_timeout: std::time::Duration,
        allow: &[String],
    ) -> Result<Self, reqwest::Error> {
        let redirect_allow: Vec<String> = allow.to_vec();
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                return attempt.stop();
            }
            let allowed = attempt
                .previous()
                .first()
                .is_some_and(|origin| host_allowed(origin, attempt.url(), &redirect_allow));
            if allowed {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let http = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            // The whole-operation deadline is the caller's (`RegistryClient::deadline`) and
            // covers every read.
            .redirect(policy)
            .build()?;
        Ok(Reader {
            http,
            credentials: credentials.clone(),
            allow: allow.to_vec(),
            tokens: Mutex::new(HashMap::new()),
            requests: AtomicU64::new(0),
        })
    }

    /// HTTP requests sent so far by this session (token exchanges included).
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The origin check for a URL a registry sent us to (an upload location).
    pub(crate) fn allowed(&self, origin: &Url, to: &Url) -> bool {
        host_allowed(origin, to, &self.allow)
    }

    fn token(&self, registry: &Url, scope: &str) -> Option<String> {
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(authority(registry), scope.to_owned()))
            .cloned()
    }

    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        registry: &Url,
        scope: &str,
    ) -> reqwest::RequestBuilder {
        if let Some(token) = self.token(registry, scope) {
            return request.bearer_auth(token);
        }
        match &self.credentials {
            Credentials::Anonymous => request,
            Credentials::Basic { username, password } => {
                request.basic_auth(username, Some(password))
            }
            Credentials::Bearer(token) => request.bearer_auth(token),
        }
    }

    /// Sends `method url` (with `accept`), answering one `Bearer` challenge by a token exchange.
    /// Returns a 2xx response; any other answer is an error without its body text.
    pub(crate) async fn send(
        &self,
        step: Step<'_>,
        method: reqwest::Method,
        url: &Url,
        accept: Option<&str>,
        scope: &str,
    ) -> Result<reqwest::Response, OciError> {
        self.send_body(step, method, url, accept, scope, None).await
    }

    /// [`Reader::send`] with a request body (uploads).
    pub(crate) async fn send_body(
        &self,
        step: Step<'_>,
        method: reqwest::Method,
        url: &Url,
        accept: Option<&str>,
        scope: &str,
        body: Option<Body<'_>>,
    ) -> Result<reqwest::Response, OciError> {
        let mut exchanged = false;
        loop {
            let mut request = self.http.request(method.clone(), url.clone());
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            if let Some(body) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, body.content_type)
                    .body(body.bytes.to_vec());
            }
            self.requests.fetch_add(1, Ordering::Relaxed);
            let response = self
                .authorize(request, url, scope)
                .send()
                .await
                .map_err(|e| step.transport(e))?;
            let status = response.status().as_u16();
            if (200..300).contains(&status) {
                return Ok(response);
            }
            if (300..400).contains(&status) {
                let target = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| response.url().join(l).ok());
                return Err(match target {
                    Some(to) if !host_allowed(url, &to, &self.allow) => {
                        step.refused("redirect", &to)
                    }
                    _ => step.status(status, ErrorClass::Unreachable),
                });
            }
            if status == 401
                && !exchanged
                && !matches!(self.credentials, Credentials::Bearer(_))
                && let Some(challenge) = response
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_bearer_challenge)
            {
                self.exchange(step, url, scope, &challenge).await?;
                exchanged = true;
                continue;
            }
            let body = read_bounded(response, MAX_ERROR_BODY_BYTES, &mut |_| {})
                .await
                .unwrap_or_default();
            return Err(step.status(status, class_of(status, &error_codes(&body))));
        }
    }

    /// Fetches a token from the challenge's realm (which must be an allowed host) and caches it.
    async fn exchange(
        &self,
        step: Step<'_>,
        registry: &Url,
        scope: &str,
        challenge: &Challenge,
    ) -> Result<(), OciError> {
        let step = Step {
            operation: "token exchange",
            ..step
        };
        let mut realm = Url::parse(&challenge.realm).map_err(|_| OciError::BadChallenge {
            reference: step.reference.to_owned(),
        })?;
        if !host_allowed(registry, &realm, &self.allow) {
            return Err(step.refused("token realm", &realm));
        }
        {
            let mut query = realm.query_pairs_mut();
            if let Some(service) = &challenge.service {
                query.append_pair("service", service);
            }
            query.append_pair("scope", challenge.scope.as_deref().unwrap_or(scope));
        }
        let mut request = self.http.get(realm.clone());
        if let Credentials::Basic { username, password } = &self.credentials {
            request = request.basic_auth(username, Some(password));
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let response = request.send().await.map_err(|e| step.transport(e))?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            if (300..400).contains(&status) {
                return Err(step.refused("token realm redirect", response.url()));
            }
            return Err(step.status(status, class_of(status, &[])));
        }
        let body = read_bounded(response, MAX_TOKEN_BODY_BYTES, &mut |_| {})
            .await
            .map_err(|e| match e {
                ReadError::TooLarge { size } => OciError::TooLarge {
                    what: "token answer",
                    reference: step.reference.to_owned(),
                    size,
                    limit: MAX_TOKEN_BODY_BYTES,
                },
                ReadError::Transport(e) => step.transport(e),
            })?;
        let token = serde_json::from_slice::<TokenAnswer>(&body)
            .ok()
            .and_then(|a| a.token.or(a.access_token))
            .filter(|t| !t.is_empty())
            .ok_or_else(|| step.status(status, ErrorClass::AuthRejected))?;
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        if tokens.len() >= MAX_TOKENS {
            tokens.clear();
        }
        tokens.insert((authority(registry), scope.to_owned()), token);
        Ok(())
    }

    /// Reads a 2xx response's body, refused past `limit` bytes.
    pub(crate) async fn read_body(
        step: Step<'_>,
        response: reqwest::Response,
        limit: u64,
    ) -> Result<Vec<u8>, OciError> {
        read_bounded(response, limit, &mut |_| {})
            .await
            .map_err(|e| match e {
                ReadError::TooLarge { size } => step.too_large(size, limit),
                ReadError::Transport(e) => step.transport(e),
            })
    }

    /// GETs `url` and reads the body, refused past `limit` bytes.
    pub(crate) async fn get_bounded(
        &self,
        step: Step<'_>,
        url: &Url,
        accept: Option<&str>,
        scope: &str,
        limit: u64,
        on_chunk: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(Vec<u8>, reqwest::header::HeaderMap), OciError> {
        let response = self
            .send(step, reqwest::Method::GET, url, accept, scope)
            .await?;
        let headers = response.headers().clone();
        let body = read_bounded(response, limit, on_chunk)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge { size } => step.too_large(size, limit),
                ReadError::Transport(e) => step.transport(e),
            })?;
        Ok((body, headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("url")
    }

    #[test]
    fn hosts_are_allowed_by_host_or_list() {
        let origin = url("https://reg.example:5000/v2/x/manifests/1");
        assert!(host_allowed(
            &origin,
            &url("https://REG.example:5000/token"),
            &[]
        ));
        assert!(!host_allowed(
            &origin,
            &url("https://reg.example/token"),
            &[]
        ));
        assert!(host_allowed(
            &url("https://reg.example/v2/"),
            &url("https://reg.example:443/token"),
            &[]
        ));
        assert!(!host_allowed(
            &origin,
            &url("http://reg.example:5000/x"),
            &[]
        ));
        assert!(!host_allowed(
            &origin,
            &url("https://canary.example/x"),
            &[]
        ));
        let allow = ["cdn.example".to_owned(), "auth.example:8443".to_owned()];
        assert!(host_allowed(
            &origin,
            &url("https://cdn.example/blob"),
            &allow
        ));
        assert!(host_allowed(
            &origin,
            &url("https://auth.example:8443/t"),
            &allow
        ));
        assert!(!host_allowed(
            &origin,
            &url("https://auth.example/t"),
            &allow
        ));
        assert!(!host_allowed(
            &origin,
            &url("https://169.254.169.254/"),
            &allow
        ));
    }

    #[test]
    fn bearer_challenges_parse() {
        let c = parse_bearer_challenge(
            r#"Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull,push""#,
        )
        .expect("parses");
        assert_eq!(c.realm, "https://auth.example/token");
        assert_eq!(c.service.as_deref(), Some("reg"));
        assert_eq!(c.scope.as_deref(), Some("repository:a/b:pull,push"));
        assert!(parse_bearer_challenge(r#"Basic realm="x""#).is_none());
        assert!(parse_bearer_challenge("Bearer service=x").is_none());
    }

    #[test]
    fn error_bodies_yield_codes_only() {
        let body = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"SECRET-TEXT"},{"code":"lower case <script>"}]}"#;
        assert_eq!(error_codes(body), vec!["MANIFEST_UNKNOWN".to_owned()]);
        assert_eq!(class_of(404, &error_codes(body)), ErrorClass::NotFound);
        assert_eq!(class_of(500, &[]), ErrorClass::Unreachable);
        assert_eq!(class_of(403, &[]), ErrorClass::AuthRejected);
    }
}
