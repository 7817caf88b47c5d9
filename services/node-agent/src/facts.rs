//! What the collection side (the kernel program and the `/proc` snapshot) hands to the agent:
//! socket facts keyed by network namespace inode and cgroup id, before any pod attribution
//! (docs/design/node-agent.md#facts).

use std::net::SocketAddr;

/// The kind of a TCP state transition the kernel program reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SocketEventKind {
    /// A socket entered LISTEN.
    Listen,
    /// A listening socket closed (pair with its `Listen` by `cookie`: the port may read 0).
    ListenClosed,
    /// An outbound connection (this side called `connect`) reached ESTABLISHED.
    Outbound,
    /// An inbound connection (accepted from a listener) reached ESTABLISHED.
    Inbound,
}

/// One transition, as read from the kernel program's ring buffer (or synthesised from the
/// `/proc` snapshot). Attribution uses the socket's own cgroup and network namespace, never the
/// task that happened to run the transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketEvent {
    pub kind: SocketEventKind,
    /// cgroup v2 id of the socket (the inode of its cgroup directory).
    pub cgroup_id: u64,
    /// Inode of the socket's network namespace (`stat -L /proc/<pid>/ns/net`).
    pub netns_ino: u32,
    /// Local address; IPv4-mapped IPv6 addresses are already mapped to IPv4.
    pub local: SocketAddr,
    /// Peer address (unspecified with port 0 for listeners).
    pub peer: SocketAddr,
    /// The kernel's socket cookie (0 for snapshot entries).
    pub cookie: u64,
}

/// A source of socket events: the kernel collector in production, a scripted source in the
/// agent's unit tests.
pub trait EventSource: Send {
    /// Moves every event available now into `out` (never blocks).
    fn drain(&mut self, out: &mut Vec<SocketEvent>);
    /// Events the kernel could not deliver since start (ring buffer full). Growth marks the
    /// pods seen meanwhile Partial "ring buffer overflow".
    fn drops(&self) -> u64;
}

/// Why kernel collection could not start: `collection.state: Failed`, `reason` =
/// [`CollectionError::reason`], `message` = the error's text (the kernel's own message included).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollectionError {
    /// No usable BTF (CO-RE would read unrelocated offsets, so nothing is loaded).
    #[error("kernel BTF unavailable at {path}: {message}")]
    BtfUnavailable { path: String, message: String },
    /// The kernel refused the program or its maps.
    #[error("loading the kernel program failed: {0}")]
    LoadFailed(String),
    /// The program loaded but could not be attached to its hook.
    #[error("attaching the kernel program failed: {0}")]
    AttachFailed(String),
}

impl CollectionError {
    /// The machine-readable reason written to `collection.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::BtfUnavailable { .. } => "BTFUnavailable",
            Self::LoadFailed(_) => "LoadFailed",
            Self::AttachFailed(_) => "AttachFailed",
        }
    }
}

/// The host side of attribution at one instant, read from `/proc` and the cgroup v2 tree
/// (docs/design/node-agent.md#attribution). Pod uids are lowercase with dashes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostView {
    /// Inode of the host's network namespace (`/proc/1/ns/net`): sockets there belong to the host
    /// or to hostNetwork pods (split by cgroup id, always Partial "hostNetwork").
    pub host_netns: u32,
    /// Network namespace inode → uids of the pods whose processes live in it (normally one).
    pub netns_pods: std::collections::HashMap<u32, std::collections::BTreeSet<String>>,
    /// cgroup id → pod uid, for every cgroup v2 directory whose path names a pod.
    pub cgroup_pods: std::collections::HashMap<u64, String>,
    /// Sockets that existed when the scan ran, as events: listeners as `Listen`, established
    /// connections as `Inbound` when their local port is a listener's in the same namespace,
    /// `Outbound` otherwise; `cookie` 0. One entry per (netns, local, peer).
    pub snapshot: Vec<SocketEvent>,
}

/// Reads a [`HostView`]: `/proc` and the cgroup v2 mount in production, a directory tree in tests.
pub trait HostScanner: Send {
    /// Scans the host now. `with_sockets` also reads each namespace's `net/tcp` and `net/tcp6`
    /// (the start-up snapshot); without it `snapshot` is empty (the periodic refresh).
    fn scan(&mut self, with_sockets: bool) -> std::io::Result<HostView>;
}
