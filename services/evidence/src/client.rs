//! The ingestion client of the Evidence Server API (docs/design/envelopes.md#ingestion-client):
//! the one place that POSTs an envelope to `/api/evidence/v1/envelopes` and reads the answer.
//! `pacto evidence push` and the status-writer's producer both send through [`IngestClient`];
//! what they do with the outcome (print it; retry, count, drop) is theirs.
//!
//! - The base URL must be `http://` or `https://` with a host ([`envelopes_url`]). Credentials
//!   in its userinfo are sent (reqwest turns them into basic auth) and never shown:
//!   [`IngestClient::shown_url`] and every error carry the URL through [`crate::redact_url`].
//! - Redirects are not followed; one request has the caller's timeout, connecting at most 5 s.
//! - A 2xx answer is an [`Acceptance`]; any other answer or failure is a [`PostError`]: a refusal
//!   with one of the protocol's codes ([`ErrorCode`]), an answer without one (a proxy's), an
//!   unreadable acceptance, or a transport failure. [`PostError::is_retryable`] says whether
//!   sending the same envelope again can succeed without anyone acting.

use std::time::Duration;

use crate::ErrorCode;

/// The ingestion path, appended to the server's base URL.
pub const ENVELOPES_PATH: &str = "/api/evidence/v1/envelopes";

/// The longest connect timeout of one request.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How much of an answer that is not an error body an error shows.
const EXCERPT_CHARS: usize = 200;

/// The client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL is not an `http://` or `https://` URL with a host.
    #[error("{url:?} is not an http:// or https:// base URL")]
    Url {
        /// The base URL given, without its userinfo ([`crate::redact_url`]).
        url: String,
    },
    /// The HTTP client could not be built (its TLS backend).
    #[error("cannot build the HTTP client")]
    Build(#[source] reqwest::Error),
}

/// The ingestion URL of a base URL (a trailing `/` is allowed).
pub fn envelopes_url(base: &str) -> Result<String, ClientError> {
    let url = format!("{}{ENVELOPES_PATH}", base.trim_end_matches('/'));
    match reqwest::Url::parse(&url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {
            Ok(url)
        }
        _ => Err(ClientError::Url {
            url: crate::redact_url(base),
        }),
    }
}

/// What a transport failure was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// No connection could be made.
    Connect,
    /// No (complete) answer within the timeout.
    Timeout,
    /// Anything else: the request or the answer broke off.
    Request,
}

impl TransportKind {
    /// The words an error starts with.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "cannot connect",
            Self::Timeout => "no answer in time",
            Self::Request => "request failed",
        }
    }
}

/// The body of a 2xx answer: `{"acceptedAt","compliance","findings","id"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acceptance {
    /// `acceptedAt`, the server's RFC 3339 time.
    pub accepted_at: String,
    /// The derived compliance.
    pub compliance: String,
    /// How many findings the evaluation produced.
    pub findings: u64,
    /// The envelope id.
    pub id: String,
    /// The answer's text as received.
    pub body: String,
}

/// Why a POST did not end in an acceptance.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// The server refused with one of the protocol's error bodies `{"code","message"}`.
    #[error("[{code}] answered {status}: {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The code.
        code: ErrorCode,
        /// The server's message.
        message: String,
        /// The answer's text as received.
        body: String,
    },
    /// A non-2xx answer that is not one of the protocol's error bodies (a proxy, another server).
    #[error("[http_{status}] answered {status}: {excerpt}")]
    Unexpected {
        /// The HTTP status.
        status: u16,
        /// The start of the answer, trimmed.
        excerpt: String,
        /// The answer's text as received.
        body: String,
    },
    /// A 2xx answer whose body is not an acceptance.
    #[error("answered {status} with a body that is not an acceptance")]
    BadAcceptance {
        /// The HTTP status.
        status: u16,
        /// Why the body does not decode.
        #[source]
        source: serde_json::Error,
        /// The answer's text as received.
        body: String,
    },
    /// The server could not be reached or its answer not read.
    #[error("{}{chain}", kind.as_str())]
    Transport {
        /// What failed.
        kind: TransportKind,
        /// The error's causes, each after `: ` (without the URL's credentials).
        chain: String,
    },
}

impl PostError {
    /// Whether sending the same envelope again can succeed without anyone acting: a transport
    /// failure, a code that says so ([`ErrorCode::is_retryable`]), or an answer without a code
    /// that is not a 4xx. A 2xx whose body does not decode is not (the server stored it).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Transport { .. } => true,
            Self::Refused { code, .. } => code.is_retryable(),
            Self::Unexpected { status, .. } => !(400..500).contains(status),
            Self::BadAcceptance { .. } => false,
        }
    }

    /// Whether the server refused because it already accepted this envelope (`409 replay`): the
    /// envelope is stored.
    pub fn is_replay(&self) -> bool {
        matches!(
            self,
            Self::Refused {
                code: ErrorCode::Replay,
                ..
            }
        )
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Refused { status, .. }
            | Self::Unexpected { status, .. }
            | Self::BadAcceptance { status, .. } => Some(*status),
            Self::Transport { .. } => None,
        }
    }

    /// A bounded label of the outcome (a metric label): the protocol code, `http_<status>` for
    /// an answer without one, `bad_acceptance`, or `transport`.
    pub fn label(&self) -> String {
        match self {
            Self::Refused { code, .. } => code.as_str().to_owned(),
            Self::Unexpected { status, .. } => format!("http_{status}"),
            Self::BadAcceptance { .. } => "bad_acceptance".to_owned(),
            Self::Transport { .. } => "transport".to_owned(),
        }
    }

    /// What the server said, when it answered with an error: the message of its error body, or
    /// the start of an answer without one.
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Refused { message, .. } => Some(message),
            Self::Unexpected { excerpt, .. } => Some(excerpt),
            Self::BadAcceptance { .. } | Self::Transport { .. } => None,
        }
    }

    /// The answer's text, when the server answered.
    pub fn body(&self) -> Option<&str> {
        match self {
            Self::Refused { body, .. }
            | Self::Unexpected { body, .. }
            | Self::BadAcceptance { body, .. } => Some(body),
            Self::Transport { .. } => None,
        }
    }

    fn transport(error: &reqwest::Error) -> Self {
        let kind = if error.is_timeout() {
            TransportKind::Timeout
        } else if error.is_connect() {
            TransportKind::Connect
        } else {
            TransportKind::Request
        };
        // reqwest's own text names the URL (credentials included): only the causes are kept
        let mut chain = String::new();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            chain.push_str(": ");
            chain.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Transport { kind, chain }
    }
}

/// The decoded answer of a POST: its status and text.
fn outcome(status: u16, body: String) -> Result<Acceptance, PostError> {
    #[derive(serde::Deserialize)]
    struct AcceptanceBody {
        #[serde(rename = "acceptedAt")]
        accepted_at: String,
        compliance: String,
        findings: u64,
        id: String,
    }
    #[derive(serde::Deserialize)]
    struct Refusal {
        code: String,
        #[serde(default)]
        message: String,
    }
    if (200..300).contains(&status) {
        return match serde_json::from_str::<AcceptanceBody>(&body) {
            Ok(a) => Ok(Acceptance {
                accepted_at: a.accepted_at,
                compliance: a.compliance,
                findings: a.findings,
                id: a.id,
                body,
            }),
            Err(source) => Err(PostError::BadAcceptance {
                status,
                source,
                body,
            }),
        };
    }
    let refusal = serde_json::from_str::<Refusal>(&body)
        .ok()
        .and_then(|r| ErrorCode::parse(&r.code).map(|code| (code, r.message)));
    Err(match refusal {
        Some((code, message)) => PostError::Refused {
            status,
            code,
            message,
            body,
        },
        None => PostError::Unexpected {
            status,
            excerpt: body.trim().chars().take(EXCERPT_CHARS).collect(),
            body,
        },
    })
}

/// A client of one Evidence Server's ingestion API. Its `Debug` shows the URL without its
/// userinfo.
#[derive(Clone)]
pub struct IngestClient {
    http: reqwest::Client,
    url: String,
    shown: String,
}

impl std::fmt::Debug for IngestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestClient")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

impl IngestClient {
    /// A client of the server at `base` (the ingestion path is appended); each request has
    /// `timeout`, its connection at most 5 s of it.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, ClientError> {
        let url = envelopes_url(base)?;
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(ClientError::Build)?;
        Ok(Self {
            http,
            shown: crate::redact_url(&url),
            url,
        })
    }

    /// The ingestion URL as logs and errors show it: credentials in its userinfo replaced by
    /// `***` ([`crate::redact_url`]).
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// POSTs one envelope (its JSON bytes) and reads the answer.
    pub async fn post(&self, envelope: impl Into<reqwest::Body>) -> Result<Acceptance, PostError> {
        let response = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(envelope)
            .send()
            .await
            .map_err(|e| PostError::transport(&e))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| PostError::transport(&e))?;
        outcome(status, body)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn urls_are_http_with_a_host_and_never_show_credentials() {
        assert_eq!(
            envelopes_url("http://evidence:8686/").unwrap(),
            "http://evidence:8686/api/evidence/v1/envelopes"
        );
        assert_eq!(
            envelopes_url("https://e.example/base").unwrap(),
            "https://e.example/base/api/evidence/v1/envelopes"
        );
        for bad in ["evidence:8686", "ftp://x", ""] {
            assert!(
                matches!(envelopes_url(bad), Err(ClientError::Url { .. })),
                "{bad}"
            );
        }
        assert_eq!(
            envelopes_url("ftp://ci:s3cret@x").unwrap_err().to_string(),
            "\"ftp://***@x\" is not an http:// or https:// base URL"
        );
        let client =
            IngestClient::new("https://ci:s3cret@e.example:8686/", Duration::from_secs(1)).unwrap();
        assert_eq!(
            client.shown_url(),
            "https://***@e.example:8686/api/evidence/v1/envelopes"
        );
        assert!(client.url.contains("s3cret"), "sent");
        assert!(!format!("{client:?}").contains("s3cret"), "{client:?}");
    }

    #[test]
    fn answers_are_typed_with_the_protocol_codes() {
        let accepted = outcome(
            202,
            r#"{"acceptedAt":"2026-12-04T10:00:00Z","compliance":"Compliant","findings":0,"id":"x"}"#
                .to_owned(),
        )
        .unwrap();
        assert_eq!((accepted.id.as_str(), accepted.findings), ("x", 0));

        let replay = outcome(
            409,
            r#"{"code":"replay","message":"envelope replayed"}"#.to_owned(),
        )
        .unwrap_err();
        assert!(replay.is_replay() && !replay.is_retryable());
        assert_eq!(
            replay.to_string(),
            "[replay] answered 409: envelope replayed"
        );
        assert_eq!(
            (replay.status(), replay.message()),
            (Some(409), Some("envelope replayed"))
        );

        let degraded = outcome(503, r#"{"code":"store_degraded"}"#.to_owned()).unwrap_err();
        assert!(degraded.is_retryable() && !degraded.is_replay());
        let incomplete = outcome(503, r#"{"code":"registry_incomplete"}"#.to_owned()).unwrap_err();
        assert!(!incomplete.is_retryable(), "stays until an operator acts");

        // an answer without a protocol code: a bounded label, retried unless a 4xx
        let proxy = outcome(502, "<html>bad gateway</html>".to_owned()).unwrap_err();
        assert_eq!(proxy.label(), "http_502");
        assert!(proxy.is_retryable());
        assert_eq!(
            proxy.to_string(),
            "[http_502] answered 502: <html>bad gateway</html>"
        );
        let unknown = outcome(418, r#"{"code":"whatever","message":"x"}"#.to_owned()).unwrap_err();
        assert_eq!(unknown.label(), "http_418");
        assert!(!unknown.is_retryable());

        let garbled = outcome(202, "{".to_owned()).unwrap_err();
        assert!(matches!(garbled, PostError::BadAcceptance { .. }));
        assert!(!garbled.is_retryable());
        assert_eq!(garbled.body(), Some("{"));
    }

    #[tokio::test]
    async fn a_transport_failure_is_retryable_and_never_shows_credentials() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let secret = "s3cret-Pa55";
        let client = IngestClient::new(
            &format!("http://ci:{secret}@{closed}"),
            Duration::from_secs(5),
        )
        .unwrap();
        let error = client.post("{}").await.unwrap_err();
        assert!(error.is_retryable());
        assert!(
            matches!(
                error,
                PostError::Transport {
                    kind: TransportKind::Connect,
                    ..
                }
            ),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(text.starts_with("cannot connect"), "{text}");
        assert!(!text.contains(secret), "{text}");
    }
}
