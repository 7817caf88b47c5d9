//! Active HTTP probing with an SSRF-safe URL: the authority is built only from trusted parts
//! (the Service name, the namespace and the Service port number, all validated), the contract's
//! path goes into the path component only, redirects are never followed, the body read is
//! bounded, and nothing read is kept.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use reqwest::Url;

/// The probe timeout.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most body bytes ever read.
pub const MAX_BODY_BYTES: usize = 4096;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A name that must be a DNS-1123 label is not one.
    #[error("{field} {value:?} is not a DNS-1123 label")]
    NotALabel {
        /// `service` or `namespace`.
        field: &'static str,
        /// The rejected value.
        value: String,
    },
    /// The port is outside 1..=65535.
    #[error("port {0} is outside 1..65535")]
    Port(i32),
    /// The assembled URL does not parse.
    #[error("probe URL {url:?} does not parse: {message}")]
    Parse {
        /// The text.
        url: String,
        /// The parser's message (the `url` crate is not a direct dependency).
        message: String,
    },
    /// The parsed URL's authority differs from the trusted one (the path tried to escape).
    #[error("probe URL {url:?} does not target {host}:{port}")]
    Authority {
        /// The text.
        url: String,
        /// The trusted host.
        host: String,
        /// The trusted port.
        port: u16,
    },
    /// The HTTP client could not be built.
    #[error("building the HTTP client failed")]
    Client(#[source] reqwest::Error),
}

/// Whether a pod IP may be scraped (docs/design/observation.md#probe-safety): never loopback,
/// link-local (where cloud metadata services live), unspecified, multicast or broadcast.
pub fn is_scrapable_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_scrapable_ip(IpAddr::V4(v4)),
            None => {
                !(v6.is_loopback()
                    || v6.is_unicast_link_local()
                    || v6.is_unspecified()
                    || v6.is_multicast())
            }
        },
    }
}

fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Percent-encodes everything outside RFC 3986 `pchar`, `/` and `?` (so `#`, `\`, spaces,
/// controls and non-ASCII bytes cannot change how the URL is read); adds a leading `/`.
pub fn sanitize_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        out.push('/');
    }
    for byte in path.bytes() {
        let keep = byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&byte);
        if keep {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// `http://<service>.<namespace>.svc:<port><path>`, verified to target exactly that authority.
pub fn service_url(
    service: &str,
    namespace: &str,
    port: i32,
    path: &str,
) -> Result<Url, ProbeError> {
    if !is_dns_label(service) {
        return Err(ProbeError::NotALabel {
            field: "service",
            value: service.to_owned(),
        });
    }
    if !is_dns_label(namespace) {
        return Err(ProbeError::NotALabel {
            field: "namespace",
            value: namespace.to_owned(),
        });
    }
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(ProbeError::Port(port))?;
    let host = format!("{service}.{namespace}.svc");
    let text = format!("http://{host}:{port}{}", sanitize_path(path));
    let url = Url::parse(&text).map_err(|error| ProbeError::Parse {
        url: text.clone(),
        message: error.to_string(),
    })?;
    if url.host_str() != Some(host.as_str())
        || url.port_or_known_default() != Some(port)
        || !url.username().is_empty()
    {
        return Err(ProbeError::Authority {
            url: text,
            host,
            port,
        });
    }
    Ok(url)
}

/// What a probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    /// The server answered with this status.
    Status(u16),
    /// No HTTP answer (connect, timeout, protocol error).
    Transport(String),
}

/// A scrape's answer (metrics): status, content type and at most [`MAX_BODY_BYTES`] of body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The body prefix.
    pub body: Vec<u8>,
}

/// An HTTP client for probes: no redirects, no proxy, [`PROBE_TIMEOUT`].
#[derive(Debug, Clone)]
pub struct Prober {
    client: reqwest::Client,
}

impl Prober {
    /// A prober using the system resolver.
    pub fn new() -> Result<Self, ProbeError> {
        Self::with_overrides(&[])
    }

    /// A prober that resolves the given host names to fixed addresses (tests: a Service DNS name
    /// to a local server; only the address is taken, the URL keeps its port).
    pub fn with_overrides(overrides: &[(String, SocketAddr)]) -> Result<Self, ProbeError> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(PROBE_TIMEOUT)
            .connect_timeout(PROBE_TIMEOUT);
        for (host, addr) in overrides {
            builder = builder.resolve(host, *addr);
        }
        builder
            .build()
            .map(|client| Self { client })
            .map_err(ProbeError::Client)
    }

    /// GETs `url`, reading at most [`MAX_BODY_BYTES`] of body.
    pub async fn fetch(&self, url: Url) -> Result<Fetch, String> {
        let mut response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| pacto_runtime::tls::error_chain(&e))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        while body.len() < MAX_BODY_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = MAX_BODY_BYTES - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                Ok(None) | Err(_) => break,
            }
        }
        Ok(Fetch {
            status,
            content_type,
            body,
        })
    }

    /// A health probe: the status only; the body is read (bounded) and discarded.
    pub async fn probe(&self, url: Url) -> ProbeResult {
        match self.fetch(url).await {
            Ok(fetch) => ProbeResult::Status(fetch.status),
            Err(message) => ProbeResult::Transport(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_table() {
        let ok = [
            (
                "orders",
                "team",
                80,
                "/healthz",
                "http://orders.team.svc/healthz",
            ),
            (
                "orders",
                "team",
                8080,
                "healthz",
                "http://orders.team.svc:8080/healthz",
            ),
            ("a", "b", 1, "", "http://a.b.svc:1/"),
            (
                "orders",
                "team",
                80,
                "//evil.example.com/x",
                "http://orders.team.svc//evil.example.com/x",
            ),
            (
                "orders",
                "team",
                80,
                "@evil.example.com",
                "http://orders.team.svc/@evil.example.com",
            ),
            (
                "orders",
                "team",
                80,
                "/a#frag",
                "http://orders.team.svc/a%23frag",
            ),
            (
                "orders",
                "team",
                80,
                "/a b\\c",
                "http://orders.team.svc/a%20b%5Cc",
            ),
            (
                "orders",
                "team",
                80,
                "/ready?full=1",
                "http://orders.team.svc/ready?full=1",
            ),
            ("orders", "team", 80, "/é", "http://orders.team.svc/%C3%A9"),
        ];
        for (svc, ns, port, path, want) in ok {
            let url = service_url(svc, ns, port, path).map(|u| u.to_string());
            assert_eq!(
                url.as_deref().map_err(ToString::to_string),
                Ok(want),
                "{path}"
            );
        }
        let bad = [
            ("Orders", "team", 80, "/"),
            ("orders.evil.com", "team", 80, "/"),
            ("orders", "team@evil", 80, "/"),
            ("orders", "", 80, "/"),
            ("-x", "team", 80, "/"),
            ("orders", "team", 0, "/"),
            ("orders", "team", 70_000, "/"),
        ];
        for (svc, ns, port, path) in bad {
            assert!(
                service_url(svc, ns, port, path).is_err(),
                "{svc} {ns} {port}"
            );
        }
    }
}
