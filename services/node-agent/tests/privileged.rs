//! The privileged tier of the node agent's kernel side (docs/design/node-agent.md#kernel-program):
//! loads and attaches the real sockwatch program, runs a server in its own network namespace and
//! a pod-shaped cgroup and a client in another cgroup, and checks that every transition is
//! credited to the socket's own cgroup and namespace, and that the `/proc` scan attributes the
//! same namespace and cgroup to the same pod.
//!
//! Needs root. Off root it prints one skip line, unless CI is set or PACTO_REQUIRE_EBPF=1, which
//! make it fail instead. Names carry the test process's pid, so parallel runs cannot collide;
//! a guard removes the namespace and cgroups even when an assertion fails.

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use pacto_node_agent::{
    facts::{EventSource, HostScanner, SocketEvent, SocketEventKind},
    host::{ProcScanner, find_cgroup2_mount},
    kernel::{Collector, DEFAULT_BTF_PATH},
};

/// A tiny TCP peer run with `python3 -c` (a `[[bin]]` would make the crate's first binary a test
/// tool): `serve <ip>` listens on `<ip>:0`, prints `listening <port>`, accepts and closes
/// connections until its stdin closes, then exits (closing the listener); `connect <ip:port>`
/// connects, prints `connected <local port>` and exits.
const PEER: &str = r#"
import socket, sys, threading
if sys.argv[1] == "serve":
    listener = socket.socket()
    listener.bind((sys.argv[2], 0))
    listener.listen(16)
    print("listening", listener.getsockname()[1], flush=True)
    def accept_all():
        while True:
            conn, _ = listener.accept()
            conn.close()
    threading.Thread(target=accept_all, daemon=True).start()
    sys.stdin.read()
else:
    host, port = sys.argv[2].rsplit(":", 1)
    conn = socket.create_connection((host, int(port)))
    print("connected", conn.getsockname()[1], flush=True)
"#;

fn may_run() -> bool {
    let require = std::env::var("PACTO_REQUIRE_EBPF").is_ok_and(|v| v == "1");
    let ok = pacto_testenv::privilege::root_or_skip(
        "node-agent privileged tier: needs root to load eBPF programs and create network namespaces and cgroups",
    );
    assert!(
        ok || !require,
        "PACTO_REQUIRE_EBPF=1 but this process is not root"
    );
    ok
}

/// The test's network namespace, cgroups and child processes; removed on drop.
struct Sandbox {
    netns: String,
    cgroup_base: PathBuf,
    children: Vec<Child>,
}

impl Sandbox {
    fn new(cgroup2: &Path) -> Self {
        let pid = std::process::id();
        let sandbox = Sandbox {
            netns: format!("swtest-{pid}"),
            cgroup_base: cgroup2.join(format!("swtest-{pid}")),
            children: Vec::new(),
        };
        run("ip", &["netns", "add", &sandbox.netns]);
        run("ip", &["-n", &sandbox.netns, "link", "set", "lo", "up"]);
        sandbox
    }

    fn netns_path(&self) -> String {
        format!("/run/netns/{}", self.netns)
    }

    fn cgroup(&self, rel: &str) -> PathBuf {
        let dir = self.cgroup_base.join(rel);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        dir
    }

    /// Starts the peer inside `cgroup` and the sandbox's network namespace. The shell joins the
    /// cgroup before exec, so the test process itself never moves.
    fn spawn_peer(&mut self, cgroup: &Path, args: &[&str]) -> usize {
        let child = Command::new("sh")
            .arg("-c")
            .arg(
                r#"echo $$ > "$1/cgroup.procs" && shift && exec nsenter --net="$1" python3 -c "$2" "$3" "$4""#,
            )
            .arg("sh")
            .arg(cgroup)
            .arg(self.netns_path())
            .arg(PEER)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        self.children.push(child);
        self.children.len() - 1
    }

    /// The first stdout line of child `i`, split as `<word> <port>`.
    fn port_line(&mut self, i: usize, word: &str) -> u16 {
        let stdout = self.children[i].stdout.take().expect("stdout piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the peer's first line");
        let port = line
            .trim()
            .strip_prefix(word)
            .map(str::trim)
            .and_then(|p| p.parse().ok());
        port.unwrap_or_else(|| panic!("peer said {line:?}, expected `{word} <port>`"))
    }

    fn stdin(&mut self, i: usize) -> Option<ChildStdin> {
        self.children[i].stdin.take()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        remove_cgroups(&self.cgroup_base);
    }
}

/// Removes a cgroup tree depth-first (cgroup directories go with rmdir only).
fn remove_cgroups(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroups(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

fn run(cmd: &str, args: &[&str]) {
    let status = Command::new(cmd)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(status.success(), "{cmd} {args:?}: {status}");
}

fn ino(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .ino()
}

#[test]
fn transitions_are_credited_to_the_sockets_own_cgroup_and_netns() {
    if !may_run() {
        return;
    }
    let started = Instant::now();
    let mut collector =
        Collector::start(Path::new(DEFAULT_BTF_PATH)).expect("load and attach sockwatch");
    let cgroup2 = find_cgroup2_mount(Path::new("/proc"))
        .expect("read mountinfo")
        .expect("a cgroup2 mount");
    let mut sandbox = Sandbox::new(&cgroup2);
    let pid = std::process::id();
    let uid = format!("{pid:08x}-5a0c-4e7d-9b1f-0123456789ab");
    let srv = sandbox.cgroup(&format!(
        "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-srv.scope",
        uid.replace('-', "_")
    ));
    let cli = sandbox.cgroup("cli");
    let netns = u32::try_from(ino(Path::new(&sandbox.netns_path()))).expect("netns inode fits u32");
    let (srv_id, cli_id) = (ino(&srv), ino(&cli));

    let server = sandbox.spawn_peer(&srv, &["serve", "127.0.0.1"]);
    let port = sandbox.port_line(server, "listening");

    // The listener existed before the scan: the snapshot and the attribution must both see it.
    let view = ProcScanner::new("/proc", &cgroup2)
        .scan(true)
        .expect("scan /proc");
    assert!(
        view.snapshot
            .iter()
            .any(|e| e.kind == SocketEventKind::Listen
                && e.netns_ino == netns
                && e.local == format!("127.0.0.1:{port}").parse().unwrap()),
        "no listener 127.0.0.1:{port} in netns {netns} among {:?}",
        view.snapshot
            .iter()
            .filter(|e| e.netns_ino == netns)
            .collect::<Vec<_>>()
    );
    assert!(
        view.netns_pods
            .get(&netns)
            .is_some_and(|p| p.contains(&uid)),
        "netns {netns} not credited to {uid}: {:?}",
        view.netns_pods.get(&netns)
    );
    assert_eq!(
        view.cgroup_pods.get(&srv_id),
        Some(&uid),
        "server cgroup {srv_id}"
    );
    assert_ne!(view.host_netns, netns);

    let client = sandbox.spawn_peer(&cli, &["connect", &format!("127.0.0.1:{port}")]);
    let client_port = sandbox.port_line(client, "connected");
    drop(sandbox.stdin(server)); // the server exits and closes its listener
    assert!(
        sandbox.children[server]
            .wait()
            .expect("wait server")
            .success()
    );

    let ours = |e: &SocketEvent| e.netns_ino == netns;
    let mut seen: Vec<SocketEvent> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let find = |seen: &[SocketEvent], kind| seen.iter().find(|e| e.kind == kind).copied();
    loop {
        let mut batch = Vec::new();
        collector.drain(&mut batch);
        seen.extend(batch.into_iter().filter(ours));
        let all = [
            SocketEventKind::Listen,
            SocketEventKind::Inbound,
            SocketEventKind::Outbound,
            SocketEventKind::ListenClosed,
        ];
        if all.iter().all(|k| find(&seen, *k).is_some()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every transition arrived within 5 s: {seen:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let listen = find(&seen, SocketEventKind::Listen).unwrap();
    assert_eq!(
        (listen.cgroup_id, listen.local.port()),
        (srv_id, port),
        "{listen:?}"
    );
    let inbound = find(&seen, SocketEventKind::Inbound).unwrap();
    assert_eq!(
        inbound.cgroup_id, srv_id,
        "inbound runs in the client's context but belongs to the server: {inbound:?}"
    );
    assert_eq!(
        (inbound.local.port(), inbound.peer.port()),
        (port, client_port),
        "{inbound:?}"
    );
    let outbound = find(&seen, SocketEventKind::Outbound).unwrap();
    assert_eq!(outbound.cgroup_id, cli_id, "{outbound:?}");
    assert_eq!(
        (outbound.local.port(), outbound.peer),
        (client_port, format!("127.0.0.1:{port}").parse().unwrap()),
        "{outbound:?}"
    );
    let closed = find(&seen, SocketEventKind::ListenClosed).unwrap();
    assert_eq!(
        (closed.cgroup_id, closed.cookie),
        (srv_id, listen.cookie),
        "{closed:?}"
    );
    assert_ne!(listen.cookie, 0);
    assert_eq!(collector.drops(), 0);
    assert_eq!(collector.malformed(), 0);
    eprintln!(
        "privileged tier: {} events in our netns, program stats {:?}, {:?}",
        seen.len(),
        collector.program_stats(),
        started.elapsed()
    );
}

#[test]
fn a_missing_btf_path_is_btf_unavailable() {
    let path = Path::new("/nonexistent/pacto-test/vmlinux");
    let Err(err) = Collector::start(path) else {
        panic!("started without BTF")
    };
    assert_eq!(err.reason(), "BTFUnavailable");
    assert!(
        err.to_string().contains("/nonexistent/pacto-test/vmlinux"),
        "{err}"
    );
    let _ = std::io::stderr().flush();
}
