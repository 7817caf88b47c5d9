//! Locating the real binaries the test environment runs.
//!
//! Kubernetes binaries (`etcd`, `kube-apiserver`, `kube-controller-manager`, `kubectl`) come from
//! `scripts/k8s-binaries.sh`, which builds pinned versions from Go modules into a cache directory.
//! Lookup order for each binary:
//!
//! 1. `$PACTO_K8S_BIN/<name>` when `PACTO_K8S_BIN` is set (a directory);
//! 2. `${PACTO_CACHE:-$HOME/.cache/pacto}/k8s/<K8S_VERSION>-etcd-<ETCD_VERSION>/bin/<name>`, the
//!    script's default output.
//!
//! Tests reach a control plane through [`require_kubernetes`] (called by [`crate::shared`]): when
//! a binary is missing, every such test fails at once with one line naming
//! `scripts/k8s-binaries.sh`, before any setup.
//!
//! Prometheus comes from Debian (`/usr/bin/prometheus`), overridable with `$PACTO_PROMETHEUS`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The pinned Kubernetes release (must match `scripts/k8s-binaries.sh`).
pub const K8S_VERSION: &str = "v1.37.2";
/// The pinned etcd release (must match `scripts/k8s-binaries.sh`).
pub const ETCD_VERSION: &str = "v3.6.16";

/// A required binary is missing.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    #[error(
        "{name} not found at {path} ({from}): run `scripts/k8s-binaries.sh` once per machine to \
         build the pinned Kubernetes binaries into the default cache path, or point \
         PACTO_K8S_BIN at a directory holding them"
    )]
    Kubernetes {
        name: String,
        path: PathBuf,
        /// Where the directory came from: `PACTO_K8S_BIN` or the default cache path.
        from: &'static str,
    },
    #[error(
        "{name} not found at {path} ({from}): run `scripts/k8s-binaries.sh --node` once per \
         machine to build the node binaries next to the control-plane ones, or point \
         PACTO_K8S_BIN at a directory holding all of them"
    )]
    Node {
        name: String,
        path: PathBuf,
        from: &'static str,
    },
    #[error(
        "{name} not found at {path}. Install it with `scripts/install-deps.sh` (Debian package \
         `{package}`) or point {env} at the binary"
    )]
    System {
        name: String,
        path: PathBuf,
        package: String,
        env: String,
    },
}

/// The four Kubernetes binaries `scripts/k8s-binaries.sh` builds.
pub const K8S_BINARIES: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
];

/// The node binaries `scripts/k8s-binaries.sh --node` adds to the same directory (a real node,
/// [`crate::node`]).
pub const NODE_BINARIES: [&str; 4] = ["kubelet", "kube-proxy", "kube-scheduler", "crictl"];

const FROM_OVERRIDE: &str = "PACTO_K8S_BIN";
const FROM_CACHE: &str = "the default cache path; PACTO_K8S_BIN is unset";

/// The directory holding the Kubernetes binaries (whether or not they exist yet).
pub fn k8s_bin_dir() -> PathBuf {
    k8s_bin_dir_from().0
}

/// [`k8s_bin_dir`] and where it came from (for error messages).
fn k8s_bin_dir_from() -> (PathBuf, &'static str) {
    k8s_bin_dir_with(|name| std::env::var_os(name))
}

/// [`k8s_bin_dir_from`] with the environment given as a lookup function.
fn k8s_bin_dir_with(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> (PathBuf, &'static str) {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("PACTO_K8S_BIN") {
        return (PathBuf::from(dir), FROM_OVERRIDE);
    }
    let cache = set("PACTO_CACHE").map_or_else(
        || {
            let home = set("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache").join("pacto")
        },
        PathBuf::from,
    );
    let dir = cache
        .join("k8s")
        .join(format!("{K8S_VERSION}-etcd-{ETCD_VERSION}"))
        .join("bin");
    (dir, FROM_CACHE)
}

fn k8s_binary(name: &str) -> Result<PathBuf, BinaryError> {
    let (dir, from) = k8s_bin_dir_from();
    let path = dir.join(name);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(BinaryError::Kubernetes {
            name: name.to_owned(),
            path,
            from,
        })
    }
}

/// Path of a node binary ([`NODE_BINARIES`]).
pub fn node_binary(name: &str) -> Result<PathBuf, BinaryError> {
    let (dir, from) = k8s_bin_dir_from();
    let path = dir.join(name);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(BinaryError::Node {
            name: name.to_owned(),
            path,
            from,
        })
    }
}

/// Path of `kube-scheduler` (built with `scripts/k8s-binaries.sh --node`).
pub fn kube_scheduler() -> Result<PathBuf, BinaryError> {
    node_binary("kube-scheduler")
}

/// The directory holding all four [`K8S_BINARIES`], or the error for the first one missing.
pub fn kubernetes() -> Result<PathBuf, BinaryError> {
    for name in K8S_BINARIES {
        k8s_binary(name)?;
    }
    Ok(k8s_bin_dir())
}

/// For tests: the directory holding all four [`K8S_BINARIES`], checked once per process. When
/// one is missing, the calling test fails (it must not pass or skip on a machine without them)
/// with a single line naming `scripts/k8s-binaries.sh`; the line also goes to stderr once, so it
/// heads the output of a test binary whose every test fails the same way.
pub fn require_kubernetes() -> &'static Path {
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        kubernetes().map_err(|e| {
            let line = e.to_string();
            // Not through eprintln!: the test harness would capture it with the first test.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("pacto-testenv: {line}\n").as_bytes(),
            );
            line
        })
    });
    match checked {
        Ok(dir) => dir,
        Err(line) => panic!("{line}"),
    }
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Path of `etcd`.
pub fn etcd() -> Result<PathBuf, BinaryError> {
    k8s_binary("etcd")
}

/// Path of `kube-apiserver`.
pub fn kube_apiserver() -> Result<PathBuf, BinaryError> {
    k8s_binary("kube-apiserver")
}

/// Path of `kube-controller-manager`.
pub fn kube_controller_manager() -> Result<PathBuf, BinaryError> {
    k8s_binary("kube-controller-manager")
}

/// Path of `kubectl`.
pub fn kubectl() -> Result<PathBuf, BinaryError> {
    k8s_binary("kubectl")
}

/// Path of `prometheus` (`$PACTO_PROMETHEUS` or `/usr/bin/prometheus`).
pub fn prometheus() -> Result<PathBuf, BinaryError> {
    let path = std::env::var_os("PACTO_PROMETHEUS")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/prometheus"), PathBuf::from);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(BinaryError::System {
            name: "prometheus".into(),
            path,
            package: "prometheus".into(),
            env: "PACTO_PROMETHEUS".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn bin_dir_prefers_the_override_then_the_cache_then_home() {
        assert_eq!(
            k8s_bin_dir_with(env(&[("PACTO_K8S_BIN", "/opt/k8s"), ("PACTO_CACHE", "/c")])),
            (PathBuf::from("/opt/k8s"), FROM_OVERRIDE)
        );
        let key = format!("{K8S_VERSION}-etcd-{ETCD_VERSION}");
        assert_eq!(
            k8s_bin_dir_with(env(&[("PACTO_K8S_BIN", ""), ("PACTO_CACHE", "/c")])),
            (PathBuf::from(format!("/c/k8s/{key}/bin")), FROM_CACHE)
        );
        assert_eq!(
            k8s_bin_dir_with(env(&[("HOME", "/home/u")])),
            (
                PathBuf::from(format!("/home/u/.cache/pacto/k8s/{key}/bin")),
                FROM_CACHE
            )
        );
    }

    #[test]
    fn versions_match_the_build_script() {
        let script = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/k8s-binaries.sh"
        ))
        .unwrap();
        assert!(script.contains(&format!("PACTO_K8S_VERSION:-{K8S_VERSION}}}")));
        assert!(script.contains(&format!("PACTO_ETCD_VERSION:-{ETCD_VERSION}}}")));
    }

    #[test]
    fn missing_binary_error_says_how_to_build() {
        let err = BinaryError::Kubernetes {
            name: "etcd".into(),
            path: PathBuf::from("/nowhere/etcd"),
            from: FROM_CACHE,
        };
        let msg = err.to_string();
        assert!(msg.contains("scripts/k8s-binaries.sh"), "{msg}");
        assert!(msg.contains("PACTO_K8S_BIN"), "{msg}");
        assert!(msg.contains("/nowhere/etcd"), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
    }
}
