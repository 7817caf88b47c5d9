use std::{collections::BTreeSet, fs, os::unix::fs::symlink};

use super::*;
use crate::host::tcp::format_endpoint;

const SYSTEMD_UID: &str = "0f3c2a8e-1b2c-4d5e-8f90-123456789abc";
const CGROUPFS_UID: &str = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9";
const SYSTEMD_POD: &str = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f3c2a8e_1b2c_4d5e_8f90_123456789abc.slice";
const CGROUPFS_POD: &str = "kubepods/burstable/pod5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9";

fn tcp_line(local: &str, peer: &str, state: u8) -> String {
    format!(
        "   0: {} {} {state:02X} 00000000:00000000 00:00000000 00000000     0        0 1234 1",
        format_endpoint(local.parse().unwrap()),
        format_endpoint(peer.parse().unwrap())
    )
}

const HEADER: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";

fn process(root: &Path, pid: &str, netns: u32, cgroup: &str, tcp: &[String], tcp6: &[String]) {
    let dir = root.join(pid);
    fs::create_dir_all(dir.join("ns")).unwrap();
    fs::create_dir_all(dir.join("net")).unwrap();
    symlink(format!("net:[{netns}]"), dir.join("ns/net")).unwrap();
    fs::write(dir.join("cgroup"), cgroup).unwrap();
    let with_header = |lines: &[String]| format!("{HEADER}\n{}\n", lines.join("\n"));
    fs::write(dir.join("net/tcp"), with_header(tcp)).unwrap();
    fs::write(dir.join("net/tcp6"), with_header(tcp6)).unwrap();
}

struct Fake {
    _dir: tempfile::TempDir,
    scanner: ProcScanner,
    systemd_pod: u64,
    systemd_container: u64,
    cgroupfs_container: u64,
}

fn fake_host() -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let proc_root = dir.path().join("proc");
    let cg = dir.path().join("cgroup");
    for path in [
        format!("{SYSTEMD_POD}/cri-containerd-4f1e9c.scope"),
        format!("{SYSTEMD_POD}/cri-containerd-77aa01.scope"),
        format!("{CGROUPFS_POD}/abc123"),
        "system.slice/containerd.service".to_string(),
        "kubepods/burstable/not-a-pod".to_string(),
    ] {
        fs::create_dir_all(cg.join(path)).unwrap();
    }
    let ino = |p: &str| fs::metadata(cg.join(p)).unwrap().ino();

    // The host: pid 1 with a listener on 22.
    process(
        &proc_root,
        "1",
        4_026_531_840,
        "0::/init.scope\n",
        &[tcp_line("0.0.0.0:22", "0.0.0.0:0", 0x0A)],
        &[],
    );
    // A pod on the systemd driver: the pause process and an app share one netns.
    let app = format!("0::/{SYSTEMD_POD}/cri-containerd-4f1e9c.scope\n");
    process(
        &proc_root,
        "100",
        4_026_532_174,
        &app,
        &[
            tcp_line("0.0.0.0:8080", "0.0.0.0:0", 0x0A),
            tcp_line("10.0.0.5:8080", "10.0.0.9:50000", 0x01),
            tcp_line("10.0.0.5:40000", "10.96.0.1:443", 0x01),
            tcp_line("10.0.0.5:40001", "10.96.0.1:443", 0x06), // TIME_WAIT: not reported
            "   9: garbage line".to_string(),
        ],
        &[
            tcp_line("[::]:9090", "[::]:0", 0x0A),
            tcp_line("[::ffff:10.0.0.5]:9090", "[::ffff:10.0.0.7]:41000", 0x01),
        ],
    );
    process(
        &proc_root,
        "101",
        4_026_532_174,
        &format!("0::/{SYSTEMD_POD}/cri-containerd-77aa01.scope\n"),
        &[],
        &[],
    );
    // A pod on the cgroupfs driver, hybrid host: v1 lines before the v2 one.
    let hybrid = format!(
        "12:memory:/{CGROUPFS_POD}/abc123\n1:name=systemd:/{CGROUPFS_POD}/abc123\n0::/{CGROUPFS_POD}/abc123\n"
    );
    process(
        &proc_root,
        "200",
        4_026_532_300,
        &hybrid,
        &[],
        &[tcp_line("[2001:db8::5]:7000", "[::]:0", 0x0A)],
    );
    // A process that exited mid-scan (no ns/net) and entries that are not processes.
    fs::create_dir_all(proc_root.join("300")).unwrap();
    fs::create_dir_all(proc_root.join("self")).unwrap();
    fs::write(proc_root.join("uptime"), "1.0 1.0").unwrap();

    Fake {
        scanner: ProcScanner::new(&proc_root, &cg),
        systemd_pod: ino(SYSTEMD_POD),
        systemd_container: ino(&format!("{SYSTEMD_POD}/cri-containerd-4f1e9c.scope")),
        cgroupfs_container: ino(&format!("{CGROUPFS_POD}/abc123")),
        _dir: dir,
    }
}

fn event(kind: SocketEventKind, netns_ino: u32, local: &str, peer: &str) -> SocketEvent {
    SocketEvent {
        kind,
        cgroup_id: 0,
        netns_ino,
        local: local.parse().unwrap(),
        peer: peer.parse().unwrap(),
        cookie: 0,
    }
}

#[test]
fn pod_uid_in_both_layouts() {
    assert_eq!(pod_uid_in(SYSTEMD_POD).as_deref(), Some(SYSTEMD_UID));
    assert_eq!(
        pod_uid_in(&format!("/{CGROUPFS_POD}/abc")).as_deref(),
        Some(CGROUPFS_UID)
    );
    assert_eq!(
        pod_uid_in(
            "0::/../kubepods.slice/kubepods-pod0f3c2a8e_1b2c_4d5e_8f90_123456789abc.slice/x"
        )
        .as_deref(),
        Some(SYSTEMD_UID)
    );
    assert_eq!(pod_uid_in("0::/system.slice/pod.service"), None);
    assert_eq!(
        pod_uid_in("0::/kubepods/pod0F3C2A8E-1B2C-4D5E-8F90-123456789ABC"),
        None
    );
}

#[test]
fn scan_attributes_netns_and_cgroups_and_snapshots_sockets_once_per_netns() {
    let mut fake = fake_host();
    let view = fake.scanner.scan(true).unwrap();
    assert_eq!(view.host_netns, 4_026_531_840);
    assert_eq!(view.netns_pods.len(), 2, "{:?}", view.netns_pods);
    assert_eq!(
        view.netns_pods[&4_026_532_174],
        BTreeSet::from([SYSTEMD_UID.to_string()])
    );
    assert_eq!(
        view.netns_pods[&4_026_532_300],
        BTreeSet::from([CGROUPFS_UID.to_string()])
    );

    assert_eq!(
        view.cgroup_pods.get(&fake.systemd_pod).map(String::as_str),
        Some(SYSTEMD_UID)
    );
    assert_eq!(
        view.cgroup_pods
            .get(&fake.systemd_container)
            .map(String::as_str),
        Some(SYSTEMD_UID)
    );
    assert_eq!(
        view.cgroup_pods
            .get(&fake.cgroupfs_container)
            .map(String::as_str),
        Some(CGROUPFS_UID)
    );
    assert_eq!(
        view.cgroup_pods.len(),
        5,
        "two pod directories and three containers: {:?}",
        view.cgroup_pods
    );

    let pod = 4_026_532_174;
    let mut expected = vec![
        event(
            SocketEventKind::Listen,
            4_026_531_840,
            "0.0.0.0:22",
            "0.0.0.0:0",
        ),
        event(SocketEventKind::Listen, pod, "0.0.0.0:8080", "0.0.0.0:0"),
        event(SocketEventKind::Listen, pod, "[::]:9090", "[::]:0"),
        event(
            SocketEventKind::Inbound,
            pod,
            "10.0.0.5:8080",
            "10.0.0.9:50000",
        ),
        event(
            SocketEventKind::Outbound,
            pod,
            "10.0.0.5:40000",
            "10.96.0.1:443",
        ),
        event(
            SocketEventKind::Inbound,
            pod,
            "10.0.0.5:9090",
            "10.0.0.7:41000",
        ),
        event(
            SocketEventKind::Listen,
            4_026_532_300,
            "[2001:db8::5]:7000",
            "[::]:0",
        ),
    ];
    let key = |e: &SocketEvent| (e.netns_ino, e.kind as u8, e.local, e.peer);
    let mut got = view.snapshot.clone();
    got.sort_by_key(key);
    expected.sort_by_key(key);
    assert_eq!(got, expected);

    let without = fake.scanner.scan(false).unwrap();
    assert!(without.snapshot.is_empty());
    assert_eq!(without.netns_pods, view.netns_pods);
}

#[test]
fn a_missing_proc_is_an_error_not_a_panic() {
    let mut scanner = ProcScanner::new("/nonexistent/proc", "/nonexistent/cgroup");
    assert!(scanner.scan(true).is_err());
}

#[test]
fn host_netns_falls_back_to_kthreadd_when_init_is_unreadable() {
    let mut fake = fake_host();
    let proc_root = fake.scanner.proc_root.clone();
    fs::remove_file(proc_root.join("1/ns/net")).unwrap();
    assert!(
        fake.scanner.scan(false).is_err(),
        "neither pid 1 nor pid 2 readable"
    );
    process(&proc_root, "2", 4_026_531_840, "0::/\n", &[], &[]);
    assert_eq!(fake.scanner.scan(false).unwrap().host_netns, 4_026_531_840);
}

#[test]
fn cgroup2_mount_on_hybrid_and_unified_hosts() {
    let hybrid = "\
25 30 0:22 / /sys ro,nosuid shared:7 - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw
33 31 0:28 / /sys/fs/cgroup/systemd rw shared:11 - cgroup cgroup rw,name=systemd
";
    assert_eq!(
        cgroup2_mount(hybrid),
        Some(PathBuf::from("/sys/fs/cgroup/unified"))
    );
    let unified = "40 30 0:35 / /host/sys/fs\\040cgroup ro - cgroup2 cgroup2 rw,nsdelegate\n";
    assert_eq!(
        cgroup2_mount(unified),
        Some(PathBuf::from("/host/sys/fs cgroup"))
    );
    // A bind of a subtree is not the hierarchy's root; garbage is skipped.
    let subtree = "41 30 0:35 /kubepods /mnt rw - cgroup2 cgroup2 rw\nnonsense\n - cgroup2\n";
    assert_eq!(cgroup2_mount(subtree), None);
    assert_eq!(cgroup2_mount(""), None);
}
