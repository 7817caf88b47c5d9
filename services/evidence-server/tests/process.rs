//! The `pacto-evidence-server` binary refuses to start on bad configuration, naming what is wrong
//! (the flag, the file, the entry), before binding anything.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::process::Command;

fn start(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pacto-evidence-server"))
        .args([
            "--insecure",
            "--listen-address=127.0.0.1:0",
            "--admin-addr=127.0.0.1:0",
        ])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_configuration_stops_the_start_with_a_precise_error() {
    let dir = tempfile::tempdir().unwrap();
    let good_subject = format!(
        "--subject=oci://127.0.0.1:5000/team/svc@sha256:{}",
        "a".repeat(64)
    );

    // a trust path that does not exist
    let missing = dir.path().join("missing.yaml");
    let (ok, err) = start(&[&format!("--trust={}", missing.display()), &good_subject]);
    assert!(!ok);
    assert!(
        err.contains("--trust") && err.contains("missing.yaml"),
        "{err}"
    );

    // a trust configuration with an unknown apiVersion
    let trust = dir.path().join("trust.yaml");
    std::fs::write(
        &trust,
        "apiVersion: pacto.dev/evidence-trust/v0\nkeys: []\n",
    )
    .unwrap();
    let (ok, err) = start(&[&format!("--trust={}", trust.display()), &good_subject]);
    assert!(!ok);
    assert!(err.contains("apiVersion"), "{err}");

    // a valid trust directory, one subject with a tag instead of a digest
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let key = pacto_evidence::keys::generate().unwrap();
    std::fs::write(
        keys.join("ci__ci-1.pub"),
        pacto_evidence::keys::verifying_key_text(&key.verifying_key()),
    )
    .unwrap();
    let (ok, err) = start(&[
        &format!("--trust={}", keys.display()),
        &good_subject,
        "--subject=oci://127.0.0.1:5000/team/svc:1.0.0",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--subject") && err.contains("oci://127.0.0.1:5000/team/svc:1.0.0"),
        "{err}"
    );
}

/// The server's CPU time (user + system) in clock ticks (100 a second).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Out of file descriptors, the accept loop backs off instead of retrying at once
/// (docs/design/evidence-server.md#limits): the binary under `prlimit --nofile=64` with 100
/// connections open — more than it has descriptors, the rest queued — stays almost idle and logs
/// the failure once (a loop that retries at once burns a core and logs megabytes a second), then
/// serves again once the connections close.
#[test]
fn out_of_file_descriptors_the_accept_loop_backs_off() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let key = pacto_evidence::keys::generate().unwrap();
    std::fs::write(
        dir.path().join("ci__ci-1.pub"),
        pacto_evidence::keys::verifying_key_text(&key.verifying_key()),
    )
    .unwrap();
    let mut child = Command::new("prlimit")
        .arg("--nofile=64:64")
        .arg(env!("CARGO_BIN_EXE_pacto-evidence-server"))
        .args([
            "--insecure",
            "--listen-address=127.0.0.1:0",
            "--admin-addr=127.0.0.1:0",
            "--log-format=json",
            "--read-header-timeout=60s",
            "--max-connections=1000",
            &format!("--trust={}", dir.path().display()),
            &format!(
                "--subject=oci://127.0.0.1:9/team/svc@sha256:{}",
                "a".repeat(64)
            ),
        ])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("prlimit (util-linux) runs the server");
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let api = loop {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "the server exited");
        if let Some(at) = line.find("\"api_addr\":\"Some(") {
            let rest = &line[at + "\"api_addr\":\"Some(".len()..];
            break rest[..rest.find(')').unwrap()].to_owned();
        }
    };
    let held: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(&api).unwrap())
        .collect();
    // wait until the server ran out of descriptors (its log says so)
    let mut failures = 0;
    while failures == 0 {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "the server exited");
        failures += usize::from(line.contains("accept failed"));
    }
    // the rest of the log, read in a thread
    let lines = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = log.read_to_string(&mut text);
        text
    });
    let before = cpu_ticks(child.id());
    std::thread::sleep(Duration::from_secs(2));
    let ticks = cpu_ticks(child.id()) - before;
    drop(held);
    // serving again: the backoff is at most 1 s, the closed connections free descriptors
    let started = Instant::now();
    let answer = loop {
        let mut stream = TcpStream::connect(&api).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream
            .write_all(
                b"GET /api/evidence/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        if answer.starts_with("HTTP/1.1 200") || started.elapsed() > Duration::from_secs(20) {
            break answer;
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let log = lines.join().unwrap();
    let failures = failures + log.matches("accept failed").count();
    println!(
        "out of descriptors: {ticks} CPU ticks in 2 s, {failures} accept-failure log lines, {} log bytes",
        log.len()
    );
    assert!(
        ticks < 40,
        "{ticks} CPU ticks (1/100 s) in 2 s: the accept loop spins"
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        failures < 100,
        "{failures} accept-failure lines:\n{}",
        &log[..log.len().min(2000)]
    );
}
