//! go-containerregistry's registry with the OCI Referrers API on, and `oras`, for the evidence
//! store tests (the Referrers API mode; Debian's docker-registry 2.8 in [`crate::registry`] has
//! no Referrers API and exercises the tag-schema fallback).
//!
//! Both binaries come from `scripts/registry-tools.sh`, which builds pinned versions from Go
//! modules into a cache directory. Lookup: `$PACTO_REGISTRY_TOOLS/<name>` when set, else
//! `${PACTO_CACHE:-$HOME/.cache/pacto}/registry-tools/ggcr-<GGCR>-oras-<ORAS>/bin/<name>`.
//!
//! [`GgcrRegistry::start`] runs the registry (in-memory storage) on a free loopback port and
//! waits until `GET /v2/` answers 200 within a deadline; dropping it kills the process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{ManagedProcess, ProcessError};

/// The pinned go-containerregistry version (must match `scripts/registry-tools.sh`).
pub const GGCR_VERSION: &str = "v0.22.1";
/// The pinned oras version (must match `scripts/registry-tools.sh`).
pub const ORAS_VERSION: &str = "v1.3.6";

const READY_DEADLINE: Duration = Duration::from_secs(20);
const START_ATTEMPTS: usize = 3;

/// Why the registry tools could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GgcrError {
    /// A binary is missing.
    #[error(
        "{name} not found at {path}: run `scripts/registry-tools.sh` once per machine to build \
         the pinned registry tools, or point PACTO_REGISTRY_TOOLS at a directory holding them"
    )]
    Missing {
        /// The binary.
        name: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The temp dir could not be made or no free port found.
    #[error("preparing the ggcr registry: {0}")]
    Prepare(#[source] std::io::Error),
    /// The process could not be spawned.
    #[error("spawning ggcr-registry: {0}")]
    Spawn(#[source] ProcessError),
    /// The process did not answer in time.
    #[error("ggcr-registry not ready within {seconds}s; log:\n{log}")]
    NotReady {
        /// The deadline.
        seconds: u64,
        /// The log.
        log: String,
    },
}

/// The directory holding `ggcr-registry` and `oras` (whether or not they exist yet).
pub fn registry_tools_dir() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("PACTO_REGISTRY_TOOLS") {
        return PathBuf::from(dir);
    }
    let cache = set("PACTO_CACHE").map_or_else(
        || {
            let home = set("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache").join("pacto")
        },
        PathBuf::from,
    );
    cache
        .join("registry-tools")
        .join(format!("ggcr-{GGCR_VERSION}-oras-{ORAS_VERSION}"))
        .join("bin")
}

fn tool(name: &'static str) -> Result<PathBuf, GgcrError> {
    let path = registry_tools_dir().join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(GgcrError::Missing { name, path })
    }
}

/// The `oras` binary.
pub fn oras() -> Result<PathBuf, GgcrError> {
    tool("oras")
}

/// A running go-containerregistry registry (Referrers API on); killed on drop.
#[derive(Debug)]
pub struct GgcrRegistry {
    child: Option<ManagedProcess>,
    _dir: tempfile::TempDir,
    addr: SocketAddr,
}

impl GgcrRegistry {
    /// Starts the registry on a free loopback port.
    pub fn start() -> Result<Self, GgcrError> {
        let binary = tool("ggcr-registry")?;
        let dir = tempfile::Builder::new()
            .prefix("pacto-ggcr-")
            .tempdir()
            .map_err(GgcrError::Prepare)?;
        let log = dir.path().join("registry.log");
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            let port = crate::ports::free_port().map_err(GgcrError::Prepare)?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let mut command = Command::new(&binary);
            command.arg(addr.to_string());
            let mut child = ManagedProcess::spawn("ggcr-registry", command, &log, &[dir.path()])
                .map_err(GgcrError::Spawn)?;
            let start = Instant::now();
            while start.elapsed() < READY_DEADLINE {
                if child.exited().is_some() {
                    break;
                }
                if crate::registry::http_status(addr, "/v2/") == Some(200) {
                    return Ok(Self {
                        child: Some(child),
                        _dir: dir,
                        addr,
                    });
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            last = Some(child.log_tail(4096));
            child.stop();
        }
        Err(GgcrError::NotReady {
            seconds: READY_DEADLINE.as_secs(),
            log: last.unwrap_or_default(),
        })
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for GgcrRegistry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_and_stops() {
        let registry = GgcrRegistry::start().expect("ggcr registry starts");
        let addr = registry.addr();
        assert_eq!(crate::registry::http_status(addr, "/v2/"), Some(200));
        drop(registry);
        assert_eq!(
            crate::registry::http_status(addr, "/v2/"),
            None,
            "process stopped"
        );
    }
}
