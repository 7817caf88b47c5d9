//! The host side of attribution: which network namespace and which cgroup belong to which pod,
//! and the sockets that already existed when collection started, read from `/proc` and the
//! cgroup v2 tree (docs/design/node-agent.md#attribution).

pub mod tcp;

use std::{
    collections::{HashMap, HashSet},
    io,
    net::SocketAddr,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::LazyLock,
};

use regex::Regex;

use crate::facts::{HostScanner, HostView, SocketEvent, SocketEventKind};

/// A pod uid inside a cgroup path: `pod<uid>` with dashes (cgroupfs driver) or underscores
/// (systemd driver, `kubepods-besteffort-pod<uid>.slice`).
static POD_UID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
        .expect("the pod uid pattern is valid")
});

/// The pod uid named by a cgroup path (the last one, if several), lowercase with dashes.
pub fn pod_uid_in(path: &str) -> Option<String> {
    let found = POD_UID.captures_iter(path).last()?;
    Some(found[1].replace('_', "-"))
}

/// Scans `proc_root` (normally `/proc`, with the host's pid namespace) and the cgroup v2 mount
/// `cgroup2_root` (normally the host's, e.g. a read-only hostPath).
#[derive(Debug, Clone)]
pub struct ProcScanner {
    pub proc_root: PathBuf,
    pub cgroup2_root: PathBuf,
}

impl ProcScanner {
    pub fn new(proc_root: impl Into<PathBuf>, cgroup2_root: impl Into<PathBuf>) -> Self {
        Self {
            proc_root: proc_root.into(),
            cgroup2_root: cgroup2_root.into(),
        }
    }
}

impl ProcScanner {
    /// The host's network namespace: init's (pid 1), or, when init cannot be inspected (a
    /// sandbox whose pid 1 holds capabilities we lack), kthreadd's (pid 2): kernel threads always
    /// live in the initial network namespace. Both need the host's pid namespace (hostPID).
    fn host_netns(&self) -> io::Result<u32> {
        netns_inode(&self.proc_root.join("1/ns/net"))
            .or_else(|first| netns_inode(&self.proc_root.join("2/ns/net")).map_err(|_| first))
    }
}

impl HostScanner for ProcScanner {
    fn scan(&mut self, with_sockets: bool) -> io::Result<HostView> {
        let host_netns = self.host_netns()?;
        let mut view = HostView {
            host_netns,
            ..HostView::default()
        };
        // One pid per namespace is enough to read its sockets.
        let mut reader_pid: HashMap<u32, PathBuf> = HashMap::new();
        for entry in std::fs::read_dir(&self.proc_root)? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let pid_dir = entry.path();
            // A process may exit at any moment: whatever cannot be read is skipped.
            let Ok(netns) = netns_inode(&pid_dir.join("ns/net")) else {
                continue;
            };
            reader_pid.entry(netns).or_insert_with(|| pid_dir.clone());
            if let Ok(cgroup) = std::fs::read_to_string(pid_dir.join("cgroup"))
                && let Some(uid) = pod_uid_in(&cgroup)
            {
                view.netns_pods.entry(netns).or_default().insert(uid);
            }
        }
        walk_cgroups(&self.cgroup2_root, "", &mut view.cgroup_pods);
        if with_sockets {
            let mut netns: Vec<_> = reader_pid.into_iter().collect();
            netns.sort_by_key(|(ino, _)| *ino);
            for (ino, pid_dir) in netns {
                view.snapshot.extend(snapshot(ino, &pid_dir));
            }
        }
        Ok(view)
    }
}

/// The inode of a namespace file: `readlink` gives `net:[4026531840]`; a plain file (a test
/// tree) is taken by its own inode number.
fn netns_inode(path: &Path) -> io::Result<u32> {
    if let Ok(target) = std::fs::read_link(path)
        && let Some(ino) = target
            .to_str()
            .and_then(|t| t.strip_prefix("net:["))
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.parse().ok())
    {
        return Ok(ino);
    }
    let ino = std::fs::metadata(path)?.ino();
    u32::try_from(ino).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: inode {ino} too large", path.display()),
        )
    })
}

/// Records every directory under `dir` whose path names a pod: cgroup id (= inode) → uid.
fn walk_cgroups(dir: &Path, rel: &str, out: &mut HashMap<u64, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let rel = format!("{rel}/{}", name.to_string_lossy());
        if let Some(uid) = pod_uid_in(&rel)
            && let Ok(meta) = entry.metadata()
        {
            out.insert(meta.ino(), uid);
        }
        walk_cgroups(&entry.path(), &rel, out);
    }
}

/// The TCP sockets of one namespace as events: listeners, then established connections
/// (inbound when their local port is one of the namespace's listening ports).
fn snapshot(netns_ino: u32, pid_dir: &Path) -> Vec<SocketEvent> {
    let mut lines = Vec::new();
    for (file, v6) in [("net/tcp", false), ("net/tcp6", true)] {
        if let Ok(text) = std::fs::read_to_string(pid_dir.join(file)) {
            lines.extend(text.lines().filter_map(|l| tcp::parse_line(l, v6)));
        }
    }
    let listening: HashSet<u16> = lines
        .iter()
        .filter(|l| l.state == tcp::STATE_LISTEN)
        .map(|l| l.local.port())
        .collect();
    let mut seen: HashSet<(SocketAddr, SocketAddr)> = HashSet::new();
    let mut events = Vec::new();
    for state in [tcp::STATE_LISTEN, tcp::STATE_ESTABLISHED] {
        for line in lines.iter().filter(|l| l.state == state) {
            if !seen.insert((line.local, line.peer)) {
                continue;
            }
            let kind = if state == tcp::STATE_LISTEN {
                SocketEventKind::Listen
            } else if listening.contains(&line.local.port()) {
                SocketEventKind::Inbound
            } else {
                SocketEventKind::Outbound
            };
            events.push(SocketEvent {
                kind,
                cgroup_id: 0,
                netns_ino,
                local: line.local,
                peer: line.peer,
                cookie: 0,
            });
        }
    }
    events
}

/// The cgroup v2 mount point named in a `mountinfo` text (the first `cgroup2` mount of the
/// hierarchy's root), e.g. `/sys/fs/cgroup` or, on hybrid hosts, `/sys/fs/cgroup/unified`.
pub fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut fields = before.split_whitespace();
        let root = fields.nth(3)?;
        let mount_point = fields.next()?;
        (root == "/").then(|| PathBuf::from(unescape_octal(mount_point)))
    })
}

/// Reads `<proc_root>/self/mountinfo` and finds the cgroup v2 mount.
pub fn find_cgroup2_mount(proc_root: &Path) -> io::Result<Option<PathBuf>> {
    Ok(cgroup2_mount(&std::fs::read_to_string(
        proc_root.join("self/mountinfo"),
    )?))
}

/// mountinfo writes space, tab, newline and backslash as `\040`-style octal escapes.
fn unescape_octal(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(code) = bytes.get(i + 1..i + 4)
            && code.iter().all(|b| (b'0'..=b'7').contains(b))
            && let Ok(value) = u8::from_str_radix(std::str::from_utf8(code).unwrap_or("x"), 8)
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
