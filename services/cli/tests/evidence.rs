//! `pacto evidence keygen | sign | verify` through the built binary: key files and their
//! modes, a sign → verify round trip, a Go-signed golden envelope, and the refusals with their
//! exit codes and protocol codes.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{code, run, stderr, stdout};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// [`common::pacto`], run from `home`.
fn pacto(home: &Path) -> Command {
    let mut cmd = common::pacto(home);
    cmd.current_dir(home);
    cmd
}

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../evidence/tests/vectors")
}

fn evidence_set(subject: &str) -> String {
    format!(
        r#"{{"Subject":{{"kind":"service","name":"{subject}"}},"ContractRef":"oci://registry.example/acme/orders@{DIGEST}","Source":"edge","ObservedAt":"2026-12-04T09:59:30Z","Observations":[{{"kind":"CapabilityObserved","subject":{{"kind":"capability","name":"health"}},"outcome":"Observed","value":{{"present":true}},"provenance":{{"collector":"edge","detectedAt":"2026-12-04T09:59:00Z"}}}}]}}"#
    )
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[test]
fn keygen_sign_verify_round_trip() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path();
    let out = run(pacto(dir).args([
        "evidence",
        "keygen",
        "--out",
        "keys",
        "--producer",
        "edge-1",
        "--key-id",
        "k1",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let private = dir.join("keys/k1.key");
    let public = dir.join("keys/edge-1__k1.pub");
    assert!(stdout(&out).contains("keys/k1.key"), "{}", stdout(&out));
    #[cfg(unix)]
    {
        assert_eq!(mode(&private), 0o600);
        assert_eq!(mode(&public), 0o644);
    }
    let text = std::fs::read_to_string(&private).expect("key");
    assert_eq!(text.len(), 45, "base64 of 32 bytes and a newline: {text:?}");

    // keygen refuses to overwrite without --force
    let again = run(pacto(dir).args([
        "evidence",
        "keygen",
        "--out",
        "keys",
        "--producer",
        "edge-1",
        "--key-id",
        "k1",
    ]));
    assert_eq!(code(&again), 2);
    assert!(
        stderr(&again).contains("already exists (use --force to overwrite)"),
        "{}",
        stderr(&again)
    );
    let forced = run(pacto(dir).args([
        "evidence",
        "keygen",
        "--out",
        "keys",
        "--producer",
        "edge-1",
        "--key-id",
        "k1",
        "--force",
    ]));
    assert_eq!(code(&forced), 0, "{}", stderr(&forced));
    assert_ne!(
        std::fs::read_to_string(&private).expect("key"),
        text,
        "a new key"
    );

    std::fs::write(dir.join("evidence.json"), evidence_set("shop/orders")).expect("write");
    let signed = run(pacto(dir).args([
        "evidence",
        "sign",
        "evidence.json",
        "--key",
        "keys/k1.key",
        "--key-id",
        "k1",
        "--producer",
        "edge-1",
        "--producer-version",
        "1.2.3",
        "--sequence",
        "7",
        "--issued-at",
        "2026-12-04T10:00:00Z",
        "--ttl",
        "1h",
    ]));
    assert_eq!(code(&signed), 0, "{}", stderr(&signed));
    let envelope = stdout(&signed);
    let value: serde_json::Value = serde_json::from_str(&envelope).expect("JSON");
    assert_eq!(value["expiresAt"], "2026-12-04T11:00:00Z");
    assert_eq!(value["sequence"], 7);
    assert_eq!(value["producer"]["version"], "1.2.3");
    assert!(value["id"].as_str().expect("id").starts_with("sha256:"));
    std::fs::write(dir.join("envelope.json"), &envelope).expect("write");

    let verify = |at: &str, trust: &str, file: &str| {
        run(pacto(dir).args(["evidence", "verify", file, "--trust", trust, "--at", at]))
    };
    let ok = verify("2026-12-04T10:30:00Z", "keys", "envelope.json");
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    assert!(
        stdout(&ok).starts_with("verified: envelope \"sha256:"),
        "{}",
        stdout(&ok)
    );

    let expired = verify("2026-12-04T11:00:01Z", "keys", "envelope.json");
    assert_eq!(code(&expired), 1);
    assert!(
        stderr(&expired).contains("[unauthorized_producer]"),
        "{}",
        stderr(&expired)
    );
    assert!(
        stderr(&expired).contains("expiresAt: the envelope expired"),
        "{}",
        stderr(&expired)
    );

    let tampered = envelope.replacen("\"present\":true", "\"present\":false", 1);
    std::fs::write(dir.join("tampered.json"), tampered).expect("write");
    let out = verify("2026-12-04T10:30:00Z", "keys", "tampered.json");
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("[unauthorized_producer] tampered.json: unauthorized producer: signature verification failed for key \"k1\""),
        "{}",
        stderr(&out)
    );

    // another producer's key directory does not trust k1
    let other = run(pacto(dir).args([
        "evidence",
        "keygen",
        "--out",
        "other",
        "--producer",
        "edge-2",
    ]));
    assert_eq!(code(&other), 0, "{}", stderr(&other));
    let out = verify("2026-12-04T10:30:00Z", "other", "envelope.json");
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("producer.keyId: key \"k1\" is not trusted"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn verifies_a_go_signed_golden_envelope() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path();
    // bare trust: the file name binds producer edge-1 to key id edge-1
    std::fs::copy(vectors().join("test.pub"), dir.join("edge-1.pub")).expect("copy");
    let out = run(pacto(dir).args([
        "evidence",
        "verify",
        vectors()
            .join("01-minimal/signed.json")
            .to_str()
            .expect("utf-8"),
        "--trust",
        "edge-1.pub",
        "--at",
        "2026-12-04T10:30:00Z",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("envelope \"env-1\" from producer \"edge-1\""),
        "{}",
        stdout(&out)
    );
}

#[test]
fn refusals_and_usage_errors() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path();
    let keygen = run(pacto(dir).args([
        "evidence",
        "keygen",
        "--producer",
        "edge-1",
        "--key-id",
        "k1",
    ]));
    assert_eq!(code(&keygen), 0, "{}", stderr(&keygen));

    // invalid evidence: exit 1 with the protocol code
    std::fs::write(dir.join("empty-subject.json"), evidence_set("")).expect("write");
    let out = run(pacto(dir).args([
        "evidence",
        "sign",
        "empty-subject.json",
        "--key",
        "k1.key",
        "--producer",
        "edge-1",
    ]));
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("[invalid_evidence] empty-subject.json: invalid evidence set: Subject.name: must not be empty"),
        "{}",
        stderr(&out)
    );

    // strict decoding names the field
    std::fs::write(
        dir.join("extension.json"),
        evidence_set("a").replacen("\"Source\"", "\"SubjectMissing\":true,\"Source\"", 1),
    )
    .expect("write");
    let out = run(pacto(dir).args([
        "evidence",
        "sign",
        "extension.json",
        "--key",
        "k1.key",
        "--producer",
        "edge-1",
    ]));
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains(
            "[invalid_envelope] extension.json: SubjectMissing: unknown field `SubjectMissing`"
        ),
        "{}",
        stderr(&out)
    );

    // unreadable and malformed inputs: exit 2, naming the file or flag
    std::fs::write(dir.join("ok.json"), evidence_set("a")).expect("write");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "evidence",
                "sign",
                "ok.json",
                "--key",
                "missing.key",
                "--producer",
                "p",
            ],
            "error: missing.key\n  caused by: No such file",
        ),
        (
            vec![
                "evidence",
                "sign",
                "ok.json",
                "--key",
                "edge-1__k1.pub",
                "--producer",
                "p",
                "--ttl",
                "1d",
            ],
            "--ttl: \"1d\" is not a duration",
        ),
        (
            vec![
                "evidence",
                "sign",
                "ok.json",
                "--key",
                "k1.key",
                "--producer",
                "p",
                "--issued-at",
                "now",
            ],
            "--issued-at: \"now\" is not an RFC3339 timestamp",
        ),
        (
            vec!["evidence", "verify", "ok.json", "--trust", "nowhere"],
            "nowhere\n  caused by: No such file",
        ),
        (
            vec!["evidence", "keygen", "--producer", "edge_1"],
            "--producer: \"edge_1\" is not a valid identifier: contains '_'",
        ),
    ];
    for (args, want) in cases {
        let out = run(pacto(dir).args(&args));
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }

    // a key file of the wrong length
    std::fs::write(dir.join("short.key"), "AAAA\n").expect("write");
    let out = run(pacto(dir).args([
        "evidence",
        "sign",
        "ok.json",
        "--key",
        "short.key",
        "--producer",
        "p",
    ]));
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("short.key: the private key seed is 3 bytes, expected 32"),
        "{}",
        stderr(&out)
    );

    // verify of an evidence set (not an envelope) is an invalid envelope
    let out = run(pacto(dir).args(["evidence", "verify", "ok.json", "--trust", "edge-1__k1.pub"]));
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("[invalid_envelope]"),
        "{}",
        stderr(&out)
    );
}

/// An HTTP server on loopback answering each request with the next `(status, body)` of
/// `answers`, and handing the requests (path, body) it got to the test.
struct Answering {
    addr: std::net::SocketAddr,
    requests: std::sync::mpsc::Receiver<(String, String)>,
}

fn answering(answers: Vec<(u16, &'static str)>) -> Answering {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, requests) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (status, body) in answers {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            reader.read_line(&mut line).expect("request line");
            let path = line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let mut length = 0usize;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).expect("header");
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().expect("length");
                }
            }
            let mut content = vec![0; length];
            reader.read_exact(&mut content).expect("body");
            tx.send((path, String::from_utf8_lossy(&content).into_owned()))
                .expect("send");
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .expect("answer");
        }
    });
    Answering { addr, requests }
}

/// A signed envelope in `dir/envelope.json`.
fn signed_envelope(dir: &Path) -> PathBuf {
    let out = run(pacto(dir).args([
        "evidence",
        "keygen",
        "--out",
        "keys",
        "--producer",
        "edge-1",
        "--key-id",
        "k1",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    std::fs::write(dir.join("evidence.json"), evidence_set("shop/orders")).expect("write");
    let out = run(pacto(dir).args([
        "evidence",
        "sign",
        "evidence.json",
        "--key",
        "keys/k1.key",
        "--key-id",
        "k1",
        "--producer",
        "edge-1",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let path = dir.join("envelope.json");
    std::fs::write(&path, stdout(&out)).expect("write");
    path
}

#[test]
fn push_prints_the_answer_and_names_the_servers_code() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path();
    let envelope = signed_envelope(dir);
    let sent = std::fs::read_to_string(&envelope).expect("read");
    let server = answering(vec![
        (
            202,
            r#"{"acceptedAt":"2026-12-04T10:00:01.5Z","compliance":"NonCompliant","findings":1,"id":"sha256:abc"}"#,
        ),
        (
            409,
            r#"{"code":"replay","message":"envelope already accepted"}"#,
        ),
        (
            503,
            r#"{"code":"registry_unavailable","message":"registry unavailable"}"#,
        ),
        (
            202,
            r#"{"acceptedAt":"2026-12-04T10:00:02Z","compliance":"Compliant","findings":0,"id":"sha256:def"}"#,
        ),
    ]);
    let url = format!("http://{}/", server.addr);
    let push = |extra: &[&str]| {
        let mut cmd = pacto(dir);
        cmd.args(["evidence", "push", "envelope.json", "--url", &url]);
        cmd.args(extra);
        run(&mut cmd)
    };

    let out = push(&[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "accepted: envelope \"sha256:abc\" at 2026-12-04T10:00:01.5Z: compliance NonCompliant, 1 finding\n"
    );
    let (path, body) = server.requests.recv().expect("request");
    assert_eq!(path, "/api/evidence/v1/envelopes");
    assert_eq!(body.trim_end(), sent.trim_end(), "the envelope as signed");

    let out = push(&[]);
    assert_eq!(code(&out), 1, "a 4xx refuses the envelope");
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: [replay] http://{}/api/evidence/v1/envelopes answered 409: envelope already accepted",
            server.addr
        )
    );

    let out = push(&[]);
    assert_eq!(code(&out), 2, "a 5xx is the server's failure");
    assert!(
        stderr(&out).starts_with("error: [registry_unavailable] "),
        "{}",
        stderr(&out)
    );

    let out = push(&["-o", "json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let answer: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(answer["id"], "sha256:def");
    assert_eq!(server.requests.iter().count(), 3);
}

#[test]
fn push_refusals_before_and_without_a_server() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path();
    signed_envelope(dir);
    // Nothing listens on the port.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr")
    };
    let out = run(pacto(dir).args([
        "evidence",
        "push",
        "envelope.json",
        "--url",
        &format!("http://{closed}"),
    ]));
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).starts_with(&format!(
            "error: http://{closed}/api/evidence/v1/envelopes\n  caused by: cannot connect"
        )),
        "{}",
        stderr(&out)
    );

    // A malformed envelope is refused without being sent.
    std::fs::write(
        dir.join("bad.json"),
        r#"{"apiVersion":"pacto.dev/evidence/v1","kind":"EvidenceEnvelope","id":"x","bogus":1}"#,
    )
    .expect("write");
    let server = answering(vec![]);
    let out = run(pacto(dir).args([
        "evidence",
        "push",
        "bad.json",
        "--url",
        &format!("http://{}", server.addr),
    ]));
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).starts_with("error: [invalid_envelope] bad.json: "),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("bogus"), "{}", stderr(&out));

    // Credentials in the URL's userinfo are never printed.
    let out = run(pacto(dir).args([
        "evidence",
        "push",
        "envelope.json",
        "--url",
        &format!("http://ci:s3cret@{closed}"),
    ]));
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).starts_with(&format!(
            "error: http://***@{closed}/api/evidence/v1/envelopes\n  caused by: cannot connect"
        )),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("s3cret"), "{}", stderr(&out));

    let out = run(pacto(dir).args([
        "evidence",
        "push",
        "envelope.json",
        "--url",
        "localhost:8686",
    ]));
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--url: "), "{}", stderr(&out));
}

// ---- pacto evidence list, against a real registry (docker-registry: the tag-schema mode) ----

mod list {
    use pacto_engine::{Coverage, Timestamp};
    use pacto_evidence::Envelope;
    use pacto_evidence::store::{
        EMPTY_CONFIG_BLOB, Record, Store, StoreOptions, Subject, Subjects,
    };
    use pacto_oci::{
        ArtifactClient, ClientOptions, Credentials, Keychain, OCI_INDEX_MEDIA_TYPE,
        OCI_MANIFEST_MEDIA_TYPE, Repository, referrers_tag, sha256_digest,
    };

    use super::{code, pacto, run, stderr, stdout};

    fn options(host: &str) -> ClientOptions {
        ClientOptions {
            insecure_registries: vec![host.to_owned()],
            ..ClientOptions::default()
        }
    }

    fn client(host: &str) -> ArtifactClient {
        ArtifactClient::new(options(host), &Credentials::Anonymous).expect("client")
    }

    /// A contract manifest in `host/acme/orders`; its subject.
    async fn push_subject(host: &str) -> Subject {
        let c = client(host);
        let repository = Repository::new(host, "acme/orders");
        c.push_blob(&repository, EMPTY_CONFIG_BLOB, true)
            .await
            .expect("config");
        let layer = b"contract of orders".to_vec();
        c.push_blob(&repository, &layer, true).await.expect("layer");
        let manifest = format!(
            "{{\"schemaVersion\":2,\"mediaType\":\"{OCI_MANIFEST_MEDIA_TYPE}\",\"config\":{{\"mediaType\":\"application/vnd.oci.empty.v1+json\",\"digest\":\"{}\",\"size\":2}},\"layers\":[{{\"mediaType\":\"application/octet-stream\",\"digest\":\"{}\",\"size\":{}}}]}}",
            sha256_digest(EMPTY_CONFIG_BLOB),
            sha256_digest(&layer),
            layer.len()
        );
        let digest = c
            .put_manifest(
                &repository,
                "1.0.0",
                OCI_MANIFEST_MEDIA_TYPE,
                manifest.as_bytes(),
            )
            .await
            .expect("subject manifest");
        Subject::parse(&format!("oci://{host}/acme/orders@{digest}")).expect("subject")
    }

    /// Signs an evidence set about `subject` with the CLI (key `k1` of producer `edge-1`).
    fn signed(dir: &std::path::Path, subject: &Subject, id: &str, sequence: u64) -> Envelope {
        let set = format!(
            r#"{{"Subject":{{"kind":"service","name":"shop/orders"}},"ContractRef":"{}","Source":"edge","ObservedAt":"2026-12-04T09:59:30Z","Observations":[]}}"#,
            subject.reference()
        );
        std::fs::write(dir.join("set.json"), set).expect("write");
        let out = run(pacto(dir).args([
            "evidence",
            "sign",
            "set.json",
            "--key",
            "keys/k1.key",
            "--key-id",
            "k1",
            "--producer",
            "edge-1",
            "--id",
            id,
            "--sequence",
            &sequence.to_string(),
            "--ttl",
            "1h",
        ]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        Envelope::decode(stdout(&out).trim().as_bytes()).expect("envelope")
    }

    fn record(subject: &Subject, envelope: Envelope) -> Record {
        Record {
            envelope,
            compliance: "Compliant".into(),
            findings: Vec::new(),
            coverage: Coverage::default(),
            accepted_at: Timestamp::now(),
            service: "orders".into(),
            domain: subject.domain(),
            digest: subject.digest().to_owned(),
        }
    }

    /// Pushes `record`'s artifact without the store's checks and lists it in the tag-schema
    /// index (a registry writer other than the server).
    async fn push_raw(subject: &Subject, record: &Record) -> String {
        let c = client(subject.registry());
        let repo = subject.oci_repository();
        let descriptor = c
            .head_manifest(&repo, subject.digest())
            .await
            .expect("descriptor");
        let artifact = record.artifact(&descriptor);
        c.push_blob(&repo, EMPTY_CONFIG_BLOB, true)
            .await
            .expect("config");
        c.push_blob(&repo, &artifact.payload, true)
            .await
            .expect("payload");
        c.put_manifest(
            &repo,
            &artifact.digest,
            OCI_MANIFEST_MEDIA_TYPE,
            &artifact.manifest,
        )
        .await
        .expect("manifest");
        let mut list = c
            .referrers_tag_index(&repo, subject.digest())
            .await
            .expect("index")
            .map(|(l, _)| l)
            .unwrap_or_default();
        list.push(artifact.descriptor());
        c.put_manifest(
            &repo,
            &referrers_tag(subject.digest()),
            OCI_INDEX_MEDIA_TYPE,
            &ArtifactClient::referrers_index_bytes(&list),
        )
        .await
        .expect("index update");
        artifact.digest
    }

    fn list(
        dir: &std::path::Path,
        host: &str,
        subject: &Subject,
        extra: &[&str],
    ) -> std::process::Output {
        let mut cmd = pacto(dir);
        cmd.args([
            "evidence",
            "list",
            &subject.reference(),
            "--insecure-registry",
            host,
        ]);
        cmd.args(extra);
        run(&mut cmd)
    }

    #[tokio::test]
    async fn list_verifies_each_record_and_reports_tampered_and_malformed_ones_as_partial() {
        let registry = pacto_testenv::registry::Registry::start().expect("docker-registry");
        let host = registry.host();
        let home = tempfile::tempdir().expect("tempdir");
        let dir = home.path();
        let out = run(pacto(dir).args([
            "evidence",
            "keygen",
            "--out",
            "keys",
            "--producer",
            "edge-1",
            "--key-id",
            "k1",
        ]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let subject = push_subject(&host).await;
        let store = Store::new(
            Subjects::parse(&[subject.reference()]).expect("subjects"),
            StoreOptions {
                client: options(&host),
                ..StoreOptions::default()
            },
            &Keychain::new(),
        )
        .expect("store");
        let good = store
            .commit(&record(&subject, signed(dir, &subject, "rec-1", 1)))
            .await
            .expect("commit");

        // One good record: verified with the trust store, unverified without.
        let out = list(dir, &host, &subject, &["--trust", "keys"]);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        let text = stdout(&out);
        assert!(
            text.starts_with(&format!(
                "{}: 1 record, 0 malformed, 0 with a bad signature (complete)\n",
                subject.reference()
            )),
            "{text}"
        );
        assert!(
            text.contains(&good.digest) && text.contains("producer edge-1 (key k1) sequence 1"),
            "{text}"
        );
        assert!(text.trim_end().ends_with("verified"), "{text}");
        let out = list(dir, &host, &subject, &["-o", "json"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(json["summary"], "complete");
        assert_eq!(json["records"][0]["signature"], "unverified");
        assert_eq!(json["records"][0]["id"], "rec-1");

        // A record whose content was changed after signing (written by someone with push
        // rights, not through the server), and an artifact that is not a valid record.
        let mut forged = record(&subject, signed(dir, &subject, "rec-2", 2));
        forged.envelope.evidence_set.source = "forged".into();
        let forged_digest = push_raw(&subject, &forged).await;
        let mut broken = record(&subject, signed(dir, &subject, "rec-3", 3));
        broken.service = String::new();
        let broken_digest = push_raw(&subject, &broken).await;

        let out = list(dir, &host, &subject, &["--trust", "keys"]);
        assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
        let text = stdout(&out);
        assert!(
            text.starts_with(&format!(
                "{}: 2 records, 1 malformed, 1 with a bad signature (partial)\n",
                subject.reference()
            )),
            "{text}"
        );
        let forged_line = text
            .lines()
            .find(|l| l.contains(&forged_digest))
            .expect("forged listed");
        assert!(forged_line.contains("bad-signature: "), "{forged_line}");
        let broken_line = text
            .lines()
            .find(|l| l.contains(&broken_digest))
            .expect("malformed listed");
        assert!(broken_line.contains("MALFORMED: "), "{broken_line}");
        assert_eq!(
            stderr(&out).trim_end(),
            format!(
                "error: {}: partial: 1 malformed artifact(s), 1 record(s) with a bad signature",
                subject.reference()
            )
        );
        let out = list(dir, &host, &subject, &["-o", "json", "--trust", "keys"]);
        assert_eq!(code(&out), 1);
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(json["summary"], "partial");
        assert_eq!(json["malformed"][0]["digest"], broken_digest.as_str());

        // A subject that is not a digest reference is a usage error.
        let out = run(pacto(dir).args([
            "evidence",
            "list",
            &format!("oci://{host}/acme/orders:1.0.0"),
        ]));
        assert_eq!(code(&out), 2, "{}", stderr(&out));
    }
}

// ---- pacto evidence push to the real Evidence Server, then list what it stored ----

mod real_server {
    use pacto_evidence::TrustStore;
    use pacto_evidence_server::testing::{ServerOptions, push_bundle, start};
    use pacto_runtime::CancellationToken;

    use super::{code, pacto, run, stderr, stdout};

    /// Runs `pacto` off the runtime's threads (the server in process keeps serving).
    async fn pacto_async(dir: &std::path::Path, args: Vec<String>) -> std::process::Output {
        let mut cmd = pacto(dir);
        cmd.args(args);
        tokio::task::spawn_blocking(move || run(&mut cmd))
            .await
            .expect("pacto ran")
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|&a| a.to_owned()).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn push_to_the_real_server_then_replay_then_list_the_verified_record() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let registry = pacto_testenv::registry::Registry::start().expect("docker-registry");
        let host = registry.host();
        let home = tempfile::tempdir().expect("tempdir");
        let dir = home.path();
        let stop = CancellationToken::new();
        let _stop = stop.clone().drop_guard();

        let digest = push_bundle(
            &host,
            "acme/orders",
            "1.0.0",
            "pactoVersion: \"2.0\"\nservice:\n  name: orders\n  version: 1.0.0\nworkload: service\n",
        )
        .await;
        let subject = format!("oci://{host}/acme/orders@{digest}");
        let out = pacto_async(
            dir,
            args(&[
                "evidence",
                "keygen",
                "--out",
                "keys",
                "--producer",
                "edge-1",
                "--key-id",
                "k1",
            ]),
        )
        .await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        std::fs::write(
            dir.join("set.json"),
            format!(
                r#"{{"Subject":{{"kind":"service","name":"shop/orders"}},"ContractRef":"{subject}","Source":"edge","ObservedAt":"2026-12-04T09:59:30Z","Observations":[{{"kind":"WorkloadObserved","subject":{{"kind":"service","name":"orders"}},"outcome":"Observed","value":{{"type":"service"}},"provenance":{{"collector":"edge","detectedAt":"2026-12-04T09:59:00Z"}}}}]}}"#
            ),
        )
        .expect("write");
        let out = pacto_async(
            dir,
            args(&[
                "evidence",
                "sign",
                "set.json",
                "--key",
                "keys/k1.key",
                "--key-id",
                "k1",
                "--producer",
                "edge-1",
                "--id",
                "edge-rec-1",
                "--sequence",
                "1",
                "--ttl",
                "1h",
            ]),
        )
        .await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        std::fs::write(dir.join("envelope.json"), stdout(&out)).expect("write");

        // The server trusts the same public key file `pacto evidence list --trust` reads.
        let trust = TrustStore::load(&dir.join("keys")).expect("trust");
        let server = start(
            dir,
            ServerOptions::new(
                &host,
                vec![subject.clone()],
                trust,
                vec!["edge-1".to_owned()],
            ),
            &stop,
        )
        .await;
        let url = server.url();
        let push = |extra: &[&str]| {
            let mut all = args(&["evidence", "push", "envelope.json", "--url", &url]);
            all.extend(args(extra));
            pacto_async(dir, all)
        };

        let out = push(&[]).await;
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        let text = stdout(&out);
        let accepted = text
            .strip_prefix("accepted: envelope \"")
            .unwrap_or_else(|| panic!("{text}"));
        let (id, rest) = accepted.split_once('"').expect("the id");
        assert_eq!(id, "edge-rec-1", "the envelope's id: {text}");
        assert!(
            rest.ends_with(": compliance Compliant, 0 findings\n"),
            "{text}"
        );

        // The same file again: the server refuses the replay (exit 1, a 4xx).
        let out = push(&[]).await;
        assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
        assert!(
            stderr(&out).starts_with(&format!(
                "error: [replay] {url}/api/evidence/v1/envelopes answered 409: "
            )),
            "{}",
            stderr(&out)
        );

        // What the server stored, read from the registry and verified with the CLI's trust.
        let out = pacto_async(
            dir,
            args(&[
                "evidence",
                "list",
                &subject,
                "--insecure-registry",
                &host,
                "--trust",
                "keys",
            ]),
        )
        .await;
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        let text = stdout(&out);
        assert!(
            text.starts_with(&format!(
                "{subject}: 1 record, 0 malformed, 0 with a bad signature (complete)\n"
            )),
            "{text}"
        );
        let line = text
            .lines()
            .find(|l| l.contains("producer edge-1 (key k1) sequence 1"))
            .unwrap_or_else(|| panic!("the record listed: {text}"));
        assert!(line.contains("Compliant, 0 finding(s)"), "{line}");
        assert!(line.trim_end().ends_with("verified"), "{line}");
        let out = pacto_async(
            dir,
            args(&[
                "evidence",
                "list",
                &subject,
                "--insecure-registry",
                &host,
                "--trust",
                "keys",
                "-o",
                "json",
            ]),
        )
        .await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(json["records"][0]["id"], "edge-rec-1");
        assert_eq!(json["records"][0]["signature"], "verified");
        assert_eq!(json["records"][0]["compliance"], "Compliant");
    }
}
