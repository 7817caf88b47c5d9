//! Round trips against a real docker-registry started on 127.0.0.1 by the test harness.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result};
use pacto_contract::bundle::{BundleFiles, LABEL_NAME, LABEL_VERSION};
use pacto_contract::reference::Reference;
use pacto_contract::version::Constraint;
use pacto_oci::{
    BundleMeta, ClientOptions, Credentials, ErrorClass, OciError, Progress, RegistryClient,
};
use pacto_testenv::registry::Registry;

fn contract(name: &str, version: &str) -> String {
    format!("pactoVersion: \"2.0\"\nservice:\n  name: {name}\n  version: {version}\n")
}

fn bundle(name: &str, version: &str) -> BundleFiles {
    let mut b = BundleFiles::new();
    b.insert("pacto.yaml", contract(name, version));
    b.insert(
        "interfaces/api.yaml",
        format!("openapi: 3.0.0\n# {version}\n"),
    );
    b
}

fn meta(name: &str, version: &str) -> BundleMeta {
    BundleMeta {
        name: name.into(),
        version: version.into(),
        pacto_version: "2.0".into(),
    }
}

fn options(registry: &Registry) -> ClientOptions {
    ClientOptions {
        insecure_registries: vec![registry.host()],
        operation_timeout: Duration::from_secs(30),
        ..ClientOptions::default()
    }
}

fn client(registry: &Registry, creds: &Credentials) -> RegistryClient {
    RegistryClient::new(options(registry), creds).expect("client builds")
}

fn reference(registry: &Registry, rest: &str) -> Reference {
    Reference::parse_oci(&format!("oci://{}/{rest}", registry.host())).expect("valid reference")
}

fn quiet(_: Progress) {}

async fn push(c: &RegistryClient, r: &Reference, b: &BundleFiles, force: bool) -> Result<String> {
    let version = r.tag().unwrap_or("0.0.0");
    Ok(c.push(r, b, &meta("svc", version), force, &quiet)
        .await?
        .digest)
}

#[tokio::test]
async fn plain_round_trip_by_tag_and_digest() -> Result<()> {
    let registry = Registry::start()?;
    let c = client(&registry, &Credentials::Anonymous);
    let r = reference(&registry, "team/orders:1.0.0");
    let files = bundle("orders", "1.0.0");
    let events = std::sync::Mutex::new(Vec::new());
    let pushed = c
        .push(&r, &files, &meta("orders", "1.0.0"), false, &|p| {
            events.lock().expect("lock").push(p);
        })
        .await?;
    assert!(pushed.digest.starts_with("sha256:"));
    let events = events.into_inner().expect("lock");
    assert!(matches!(events.first(), Some(Progress::Packed { .. })));
    assert!(
        matches!(events.last(), Some(Progress::ManifestPushed { digest }) if *digest == pushed.digest)
    );

    let pulled = c.pull(&r, &quiet).await?;
    assert_eq!(pulled.files, files);
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(pulled.layer, pushed.layer, "layer bytes identical");
    assert_eq!(pulled.labels[LABEL_NAME], "orders");
    assert_eq!(pulled.labels[LABEL_VERSION], "1.0.0");
    assert_eq!(pulled.reference.digest(), Some(pushed.digest.as_str()));

    let by_digest = c.pull(&pulled.reference, &quiet).await?;
    assert_eq!(by_digest.files, files);

    assert_eq!(c.resolve_digest(&r).await?, pushed.digest);
    assert_eq!(c.list_tags(&r).await?, ["1.0.0"]);

    let inspection = c.inspect(&r).await?;
    assert_eq!(inspection.digest, pushed.digest);
    assert_eq!(inspection.tags, ["1.0.0"]);
    assert_eq!(inspection.layer_bytes, pushed.layer.len() as u64);
    Ok(())
}

#[tokio::test]
async fn basic_auth_right_and_wrong_password() -> Result<()> {
    let registry = Registry::start_with_basic_auth("alice", "wonderland")?;
    let r = reference(&registry, "secure/svc:1.0.0");
    let files = bundle("svc", "1.0.0");

    let good = Credentials::Basic {
        username: "alice".into(),
        password: "wonderland".into(),
    };
    let c = client(&registry, &good);
    let digest = push(&c, &r, &files, false).await?;
    let pulled = c.pull(&r, &quiet).await?;
    assert_eq!(pulled.digest, digest);
    assert_eq!(pulled.files, files);

    let wrong = Credentials::Basic {
        username: "alice".into(),
        password: "not-it".into(),
    };
    let err = client(&registry, &wrong)
        .pull(&r, &quiet)
        .await
        .expect_err("wrong password must fail");
    assert_eq!(err.class(), ErrorClass::AuthRejected, "{err}");
    assert!(err.is_unavailable());

    let err = push(
        &client(&registry, &wrong),
        &reference(&registry, "secure/other:1.0.0"),
        &files,
        false,
    )
    .await
    .expect_err("push with wrong password must fail");
    let err = err.downcast::<OciError>()?;
    assert_eq!(err.class(), ErrorClass::AuthRejected, "{err}");

    let err = client(&registry, &Credentials::Anonymous)
        .list_tags(&r)
        .await
        .expect_err("anonymous must fail");
    assert_eq!(err.class(), ErrorClass::AuthRejected, "{err}");
    Ok(())
}

#[tokio::test]
async fn force_pushed_tag_moves_and_unforced_push_is_refused() -> Result<()> {
    let registry = Registry::start()?;
    let c = client(&registry, &Credentials::Anonymous);
    let r = reference(&registry, "svc:1.0.0");
    let first = bundle("svc", "1.0.0");
    let d1 = push(&c, &r, &first, false).await?;

    let mut second = first.clone();
    second.insert("docs/CHANGES.md", "rebuilt\n");
    let err = push(&c, &r, &second, false).await.expect_err("exists");
    let err = err.downcast::<OciError>()?;
    assert_eq!(err.class(), ErrorClass::AlreadyExists, "{err}");
    assert_eq!(c.resolve_digest(&r).await?, d1, "tag unchanged");

    let d2 = push(&c, &r, &second, true).await?;
    assert_ne!(d1, d2);
    assert_eq!(c.resolve_digest(&r).await?, d2);
    assert_eq!(c.pull(&r, &quiet).await?.files, second);
    // The old manifest stays reachable by digest.
    let old = c.pull(&r.with_digest(&d1)?, &quiet).await?;
    assert_eq!(old.files, first);
    Ok(())
}

#[tokio::test]
async fn missing_tag_and_repository_are_not_found() -> Result<()> {
    let registry = Registry::start()?;
    let c = client(&registry, &Credentials::Anonymous);
    push(
        &c,
        &reference(&registry, "svc:1.0.0"),
        &bundle("svc", "1.0.0"),
        false,
    )
    .await?;

    let err = c
        .pull(&reference(&registry, "svc:9.9.9"), &quiet)
        .await
        .expect_err("missing tag");
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
    assert!(err.is_unavailable());
    assert!(!c.exists(&reference(&registry, "svc:9.9.9")).await?);
    assert!(c.exists(&reference(&registry, "svc:1.0.0")).await?);

    let err = c
        .list_tags(&reference(&registry, "nothing/here"))
        .await
        .expect_err("missing repository");
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");

    let digest = format!("sha256:{}", "0".repeat(64));
    let err = c
        .pull(&reference(&registry, "svc").with_digest(&digest)?, &quiet)
        .await
        .expect_err("missing digest");
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
    Ok(())
}

#[tokio::test]
async fn highest_semver_resolution_and_no_semver_tags() -> Result<()> {
    let registry = Registry::start()?;
    let c = client(&registry, &Credentials::Anonymous);
    for tag in [
        "1.0.0",
        "2.0.0",
        "v2.3.0",
        "2.4.0-beta.1",
        "3.0.0",
        "latest",
    ] {
        push(
            &c,
            &reference(&registry, &format!("lib:{tag}")),
            &bundle("lib", tag),
            false,
        )
        .await?;
    }
    let untagged = reference(&registry, "lib");
    let semver: Vec<String> = c
        .list_semver_tags(&untagged)
        .await?
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        semver,
        ["3.0.0", "2.4.0-beta.1", "v2.3.0", "2.0.0", "1.0.0"]
    );
    let resolved = c.resolve(&untagged, None).await?;
    assert_eq!(resolved.selected_tag.as_deref(), Some("3.0.0"));
    assert_eq!(
        resolved.digest,
        c.resolve_digest(&reference(&registry, "lib:3.0.0")).await?
    );

    let caret = Constraint::parse("^2.0.0")?;
    let resolved = c.resolve(&untagged, Some(&caret)).await?;
    assert_eq!(
        resolved.selected_tag.as_deref(),
        Some("v2.3.0"),
        "original spelling kept"
    );
    assert_eq!(resolved.reference.tag(), Some("v2.3.0"));

    let none = Constraint::parse("^9")?;
    let err = c
        .resolve(&untagged, Some(&none))
        .await
        .expect_err("no match");
    assert!(matches!(err, OciError::NoMatchingVersion { .. }), "{err}");
    assert!(!err.is_unavailable());

    // Explicit tags are used as is, without a constraint check (docs/design/contract.md#references-and-versions).
    let pinned = c
        .resolve(&reference(&registry, "lib:1.0.0"), Some(&caret))
        .await?;
    assert_eq!(pinned.selected_tag, None);

    for tag in ["latest", "main"] {
        push(
            &c,
            &reference(&registry, &format!("nosemver:{tag}")),
            &bundle("n", "1.0.0"),
            false,
        )
        .await?;
    }
    let err = c
        .resolve(&reference(&registry, "nosemver"), None)
        .await
        .expect_err("no semver tags");
    assert!(matches!(err, OciError::NoSemverTags { .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::NoMatchingVersion);
    Ok(())
}

#[tokio::test]
async fn unreachable_host_is_classified() -> Result<()> {
    // Bind and drop a listener to get a port that nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let host = format!("127.0.0.1:{port}");
    let c = RegistryClient::new(
        ClientOptions {
            insecure_registries: vec![host.clone()],
            connect_timeout: Duration::from_secs(2),
            operation_timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )?;
    let r = Reference::parse_oci(&format!("oci://{host}/svc:1.0.0"))?;
    let err = c.pull(&r, &quiet).await.expect_err("nothing listens");
    assert_eq!(err.class(), ErrorClass::Unreachable, "{err}");
    assert!(err.is_unavailable());
    let err = c.list_tags(&r).await.expect_err("nothing listens");
    assert_eq!(err.class(), ErrorClass::Unreachable, "{err}");
    let err = push(&c, &r, &bundle("svc", "1.0.0"), true)
        .await
        .expect_err("nothing listens");
    assert_eq!(err.downcast::<OciError>()?.class(), ErrorClass::Unreachable);
    Ok(())
}

#[tokio::test]
async fn size_limits_and_hostile_layers_are_refused() -> Result<()> {
    let registry = Registry::start()?;
    let c = client(&registry, &Credentials::Anonymous);
    let r = reference(&registry, "big:1.0.0");
    let mut files = bundle("big", "1.0.0");
    // Incompressible-ish content so the layer is genuinely large.
    let noise: Vec<u8> = (0u32..200_000)
        .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
        .collect();
    files.insert("docs/noise.bin", noise);
    push(&c, &r, &files, false).await?;

    let small = RegistryClient::new(
        ClientOptions {
            max_layer_bytes: 64 * 1024,
            ..options(&registry)
        },
        &Credentials::Anonymous,
    )?;
    let err = small.pull(&r, &quiet).await.expect_err("layer too large");
    assert!(
        matches!(err, OciError::TooLarge { what: "layer", .. }),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::TooLarge);
    assert!(!err.is_unavailable());

    // A layer whose tarball escapes the root.
    let mut tar = Vec::new();
    for (name, body) in [
        ("pacto.yaml", contract("evil", "1.0.0")),
        ("../escape", "x".into()),
    ] {
        let mut header = tar::Header::new_ustar();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_size(body.len() as u64);
        header.set_cksum();
        tar.extend_from_slice(header.as_bytes());
        tar.extend_from_slice(body.as_bytes());
        tar.extend(std::iter::repeat_n(0u8, (512 - body.len() % 512) % 512));
    }
    tar.extend(std::iter::repeat_n(0u8, 1024));
    let layer = pacto_contract::bundle::gzip(&tar)?;
    let evil = reference(&registry, "evil:1.0.0");
    c.push_artifact(&evil, b"{}".to_vec(), layer, &quiet)
        .await?;
    let err = c.pull(&evil, &quiet).await.expect_err("hostile layer");
    assert!(matches!(err, OciError::Bundle { .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::Corrupt);

    // A layer that is not gzip at all.
    let junk = reference(&registry, "junk:1.0.0");
    c.push_artifact(&junk, b"{}".to_vec(), b"not a tarball".to_vec(), &quiet)
        .await?;
    let err = c.pull(&junk, &quiet).await.expect_err("corrupt layer");
    assert_eq!(err.class(), ErrorClass::Corrupt, "{err}");
    Ok(())
}

fn skopeo(args: &[&str]) -> Result<String> {
    let out = Command::new("skopeo")
        .args(args)
        .output()
        .context("running skopeo (install skopeo)")?;
    anyhow::ensure!(
        out.status.success(),
        "skopeo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn skopeo_copies_a_bundle_that_pulls_back_byte_identical() -> Result<()> {
    let registry = Registry::start()?;
    let c = client(&registry, &Credentials::Anonymous);
    let r = reference(&registry, "team/svc:1.2.0");
    let files = bundle("svc", "1.2.0");
    let pushed = c
        .push(&r, &files, &meta("svc", "1.2.0"), false, &quiet)
        .await?;

    let host = registry.host();
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{host}/team/svc:1.2.0"),
    ])?;
    let manifest: serde_json::Value = serde_json::from_str(&raw)?;
    assert_eq!(
        manifest["layers"][0]["mediaType"],
        pacto_contract::bundle::LAYER_MEDIA_TYPE
    );

    // Registry to registry.
    skopeo(&[
        "copy",
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
        &format!("docker://{host}/team/svc:1.2.0"),
        &format!("docker://{host}/mirror/svc:1.2.0"),
    ])?;
    let copied = c
        .pull(&reference(&registry, "mirror/svc:1.2.0"), &quiet)
        .await?;
    assert_eq!(copied.layer, pushed.layer);
    assert_eq!(copied.files, files);
    assert_eq!(copied.digest, pushed.digest, "manifest copied unchanged");

    // Through an OCI layout directory and back.
    let dir = tempfile::tempdir()?;
    let layout = format!("oci:{}:svc", dir.path().join("layout").display());
    skopeo(&[
        "copy",
        "--src-tls-verify=false",
        &format!("docker://{host}/team/svc:1.2.0"),
        &layout,
    ])?;
    skopeo(&[
        "copy",
        "--dest-tls-verify=false",
        &layout,
        &format!("docker://{host}/roundtrip/svc:1.2.0"),
    ])?;
    let back = c
        .pull(&reference(&registry, "roundtrip/svc:1.2.0"), &quiet)
        .await?;
    assert_eq!(back.layer, pushed.layer);
    assert_eq!(back.files, files);
    Ok(())
}

#[tokio::test]
async fn bearer_token_accepted_and_untrusted_token_rejected() -> Result<()> {
    let registry = Registry::start_with_token_auth()?;
    let r = reference(&registry, "tokened/svc:1.0.0");
    let files = bundle("svc", "1.0.0");

    let token = registry
        .mint_token("tokened/svc", &["pull", "push"])
        .context("token")?;
    let c = client(&registry, &Credentials::Bearer(token));
    let digest = push(&c, &r, &files, false).await?;
    let pulled = c.pull(&r, &quiet).await?;
    assert_eq!(pulled.digest, digest);
    assert_eq!(pulled.files, files);
    assert_eq!(c.list_tags(&r).await?, ["1.0.0"]);

    // A pull-only token cannot push.
    let read_only = registry
        .mint_token("tokened/svc", &["pull"])
        .context("token")?;
    let ro = client(&registry, &Credentials::Bearer(read_only));
    assert_eq!(ro.pull(&r, &quiet).await?.digest, digest);
    let err = push(
        &ro,
        &reference(&registry, "tokened/svc:2.0.0"),
        &files,
        true,
    )
    .await
    .expect_err("pull-only token pushes");
    assert_eq!(
        err.downcast::<OciError>()?.class(),
        ErrorClass::AuthRejected
    );

    // A token for another repository, and one signed by an untrusted key.
    let other = registry
        .mint_token("other/repo", &["pull"])
        .context("token")?;
    let err = client(&registry, &Credentials::Bearer(other))
        .pull(&r, &quiet)
        .await
        .expect_err("wrong scope");
    assert_eq!(err.class(), ErrorClass::AuthRejected, "{err}");
    let forged = registry.mint_untrusted_token("tokened/svc", &["pull"])?;
    let err = client(&registry, &Credentials::Bearer(forged))
        .pull(&r, &quiet)
        .await
        .expect_err("untrusted signer");
    assert_eq!(err.class(), ErrorClass::AuthRejected, "{err}");
    Ok(())
}

#[tokio::test]
async fn silent_server_hits_the_deadline() -> Result<()> {
    // Accepts connections and never answers: the operation deadline must fire.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let host = listener.local_addr()?.to_string();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        listener.set_nonblocking(true).ok();
        let mut held = Vec::new();
        while stop_rx.try_recv().is_err() {
            if let Ok((conn, _)) = listener.accept() {
                held.push(conn);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let c = RegistryClient::new(
        ClientOptions {
            insecure_registries: vec![host.clone()],
            operation_timeout: Duration::from_secs(1),
            ..ClientOptions::default()
        },
        &Credentials::Anonymous,
    )?;
    let r = Reference::parse_oci(&format!("oci://{host}/svc:1.0.0"))?;
    let err = c.pull(&r, &quiet).await.expect_err("no answer");
    assert!(matches!(err, OciError::Timeout { .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::Unreachable);
    stop_tx.send(()).ok();
    holder.join().ok();
    Ok(())
}
