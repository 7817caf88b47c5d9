//! The release's signing path (docs/images.md, "Signatures and provenance"), rehearsed against a
//! real registry (go-containerregistry's, on loopback) with the pinned cosign
//! (`scripts/cosign.sh`) and a key pair made for the test (`--sign-key`: the release workflow signs
//! keylessly instead, with the same commands otherwise):
//! - a chart component built with `scripts/release.sh --no-push` and pushed with `--from … --sign`
//!   is signed by digest, carries an SLSA provenance attestation naming the component, version
//!   and commit, and its `SHA256SUMS` is signed; another key does not verify it;
//! - a service image is pushed from the OCI archive a `--no-push` build leaves, byte for byte (the
//!   digest in `DIGESTS` is the archive's manifest digest), and carries its SBOM as a CycloneDX
//!   attestation;
//! - a multi-arch image (docs/images.md, "Architectures"): an archive holding an OCI image index
//!   over a linux/amd64 and a linux/arm64 image is pushed byte for byte (`DIGESTS` names the
//!   index), the registry serves the index with both platforms, the index and each image are
//!   signed, the index carries the provenance and each image its own platform's SBOM;
//! - signing without a push, or `--from` with `--no-push`, is refused before anything runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use pacto_chart_tests::{repo_root, tools_dir};
use pacto_testenv::ggcr::GgcrRegistry;
use serde_json::Value;

/// The pinned cosign, built once per machine by `scripts/cosign.sh` (cached by version).
fn cosign() -> Result<PathBuf> {
    let out = Command::new(repo_root().join("scripts/cosign.sh"))
        .output()
        .context("running scripts/cosign.sh")?;
    ensure!(
        out.status.success(),
        "scripts/cosign.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `scripts/release.sh args…` with the chart tools and cosign first on PATH.
fn release(cosign: &Path, args: &[&str]) -> Result<Output> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![tools_dir()];
    if let Some(dir) = cosign.parent() {
        dirs.push(dir.to_path_buf());
    }
    dirs.extend(std::env::split_paths(&path));
    Ok(Command::new(repo_root().join("scripts/release.sh"))
        .args(args)
        .env("PATH", std::env::join_paths(dirs)?)
        .env("COSIGN_PASSWORD", "")
        .env_remove("PACTO_RELEASE_SIGN")
        .output()?)
}

fn version_of(component: &str) -> Result<String> {
    let out = Command::new(repo_root().join("scripts/release.sh"))
        .args(["--version-of", component])
        .output()?;
    ensure!(out.status.success(), "{}", text(&out));
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// A cosign key pair (empty password) in `dir`: (`cosign.key`, `cosign.pub`).
fn key_pair(cosign: &Path, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let out = Command::new(cosign)
        .arg("generate-key-pair")
        .current_dir(dir)
        .env("COSIGN_PASSWORD", "")
        .output()?;
    ensure!(out.status.success(), "generate-key-pair: {}", text(&out));
    Ok((dir.join("cosign.key"), dir.join("cosign.pub")))
}

/// `cosign ARGS…` with the flags a plain-HTTP registry and a key without the transparency log need.
fn cosign_verify(cosign: &Path, args: &[&str]) -> Result<Output> {
    Ok(Command::new(cosign)
        .args(args)
        .args(["--insecure-ignore-tlog", "--allow-http-registry"])
        .output()?)
}

/// `cosign verify --key KEY REFERENCE`, which must succeed; `what` (empty or ` (…)`) names the
/// reference in the failure.
fn verify_signed(cosign: &Path, key: &str, reference: &str, what: &str) -> Result<()> {
    let out = cosign_verify(cosign, &["verify", "--key", key, reference])?;
    ensure!(out.status.success(), "cosign verify{what}: {}", text(&out));
    Ok(())
}

/// The in-toto statements of `cosign verify-attestation --type KIND`, which must succeed.
fn attested(
    cosign: &Path,
    key: &str,
    kind: &str,
    reference: &str,
    what: &str,
) -> Result<Vec<Value>> {
    let out = cosign_verify(
        cosign,
        &[
            "verify-attestation",
            "--key",
            key,
            "--type",
            kind,
            reference,
        ],
    )?;
    ensure!(
        out.status.success(),
        "verify-attestation {kind}{what}: {}",
        text(&out)
    );
    statements(&out)
}

/// The DIGESTS file: (pushed reference, digest) per line.
fn digests(out: &Path) -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(out.join("DIGESTS"))?;
    text.lines()
        .map(|l| {
            let (r, d) = l.split_once(' ').context("DIGESTS line without a digest")?;
            ensure!(
                d.len() == 71 && d.starts_with("sha256:"),
                "DIGESTS: not a digest: {d}"
            );
            Ok((r.to_owned(), d.to_owned()))
        })
        .collect()
}

/// Standard base64 (with padding) decoded; `None` on a character outside the alphabet.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c)?;
        acc = (acc << 6) | u32::try_from(v).ok()?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// The in-toto statements `cosign verify-attestation` printed (one DSSE envelope per line).
fn statements(out: &Output) -> Result<Vec<Value>> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let envelope: Value = serde_json::from_str(l)?;
            let payload = envelope["payload"].as_str().context("no payload")?;
            let decoded = base64_decode(payload).context("payload is not base64")?;
            Ok(serde_json::from_slice(&decoded)?)
        })
        .collect()
}

fn head_commit() -> Result<String> {
    let out = Command::new("git")
        .current_dir(repo_root())
        .args(["rev-parse", "HEAD"])
        .output()?;
    ensure!(out.status.success(), "git rev-parse HEAD");
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

#[test]
fn a_chart_pushed_from_its_build_is_signed_and_attested_by_digest() -> Result<()> {
    let cosign = cosign()?;
    let registry = GgcrRegistry::start()?;
    let host = registry.host();
    let dir = tempfile::tempdir()?;
    let (key, public) = key_pair(&cosign, &dir.path().join("keys"))?;
    let out = dir.path().join("out");
    let out_s = out.to_str().context("utf-8 path")?;
    let version = version_of("pki")?;

    // The build job: no push, no signing.
    let built = release(
        &cosign,
        &[
            "pki",
            &version,
            "--registry",
            &host,
            "--plain-http",
            "--no-push",
            "--out",
            out_s,
        ],
    )?;
    ensure!(built.status.success(), "--no-push: {}", text(&built));
    ensure!(
        !out.join("DIGESTS").exists(),
        "a build without a push wrote DIGESTS"
    );

    // The push job.
    let key_s = key.to_str().context("utf-8 path")?;
    let pushed = release(
        &cosign,
        &[
            "pki",
            &version,
            "--registry",
            &host,
            "--plain-http",
            "--from",
            out_s,
            "--sign-key",
            key_s,
        ],
    )?;
    ensure!(
        pushed.status.success(),
        "--from --sign-key: {}",
        text(&pushed)
    );
    let listed = digests(&out)?;
    let chart_ref = format!("oci://{host}/trianalab/pacto-operator-rs/charts/pacto-pki:{version}");
    ensure!(
        listed.len() == 1 && listed[0].0 == chart_ref,
        "DIGESTS: {listed:?}"
    );
    let by_digest = format!(
        "{host}/trianalab/pacto-operator-rs/charts/pacto-pki@{}",
        listed[0].1
    );
    let public_s = public.to_str().context("utf-8 path")?;

    verify_signed(&cosign, public_s, &by_digest, "")?;

    let statements = attested(&cosign, public_s, "slsaprovenance1", &by_digest, "")?;
    let provenance = statements
        .iter()
        .find(|s| s["predicateType"] == "https://slsa.dev/provenance/v1")
        .with_context(|| format!("no SLSA v1 provenance among {statements:?}"))?;
    let predicate = &provenance["predicate"];
    ensure!(
        predicate["buildDefinition"]["externalParameters"]["component"] == "pki"
            && predicate["buildDefinition"]["externalParameters"]["version"] == version.as_str()
            && predicate["buildDefinition"]["resolvedDependencies"][0]["digest"]["gitCommit"]
                == head_commit()?.as_str(),
        "provenance predicate: {predicate}"
    );
    ensure!(
        provenance["subject"][0]["digest"]["sha256"] == listed[0].1.trim_start_matches("sha256:"),
        "provenance subject: {}",
        provenance["subject"]
    );

    let sums = out.join("SHA256SUMS");
    let blob = Command::new(&cosign)
        .args([
            "verify-blob",
            "--key",
            public_s,
            "--insecure-ignore-tlog",
            "--bundle",
        ])
        .arg(out.join("SHA256SUMS.sigstore.json"))
        .arg(&sums)
        .output()?;
    ensure!(
        blob.status.success(),
        "verify-blob SHA256SUMS: {}",
        text(&blob)
    );
    let sums_text = std::fs::read_to_string(&sums)?;
    ensure!(
        sums_text.contains("DIGESTS") && sums_text.contains(&format!("pacto-pki-{version}.tgz")),
        "SHA256SUMS: {sums_text}"
    );

    // Another key does not verify it.
    let (_, other) = key_pair(&cosign, &dir.path().join("other"))?;
    let wrong = cosign_verify(
        &cosign,
        &[
            "verify",
            "--key",
            other.to_str().context("utf-8")?,
            &by_digest,
        ],
    )?;
    ensure!(!wrong.status.success(), "verified with a foreign key");
    Ok(())
}

/// Writes an OCI image archive (`oci-archive:` as buildah saves it: a gzip layer) of a one-file
/// image whose manifest is tagged `name`, and returns its manifest digest.
fn write_oci_archive(archive: &Path, name: &str) -> Result<String> {
    let script = r#"
import gzip, hashlib, io, json, sys, tarfile
archive, name = sys.argv[1], sys.argv[2]
def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
    body = b"signed by the release test\n"
    info = tarfile.TarInfo("hello.txt"); info.size = len(body); info.mtime = 0
    t.addfile(info, io.BytesIO(body))
layer = gzip.compress(buf.getvalue(), mtime=0)
layer_digest, _ = blob(layer)
config = json.dumps({"architecture": "amd64", "os": "linux",
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(buf.getvalue()).hexdigest()]},
    "config": {}}).encode()
config_digest, _ = blob(config)
manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": len(layer)}]}).encode()
manifest_digest, _ = blob(manifest)
index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": manifest_digest, "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": name}}]}).encode()
with tarfile.open(archive, mode="w") as t:
    def add(path, data):
        info = tarfile.TarInfo(path); info.size = len(data); info.mtime = 0
        t.addfile(info, io.BytesIO(data))
    add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    add("index.json", index)
    for d in (layer, config, manifest):
        add("blobs/sha256/" + hashlib.sha256(d).hexdigest(), d)
print(manifest_digest)
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(archive)
        .arg(name)
        .output()?;
    ensure!(
        out.status.success(),
        "writing the OCI archive: {}",
        text(&out)
    );
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

#[test]
fn an_image_is_pushed_from_its_archive_byte_for_byte_with_its_sbom_attested() -> Result<()> {
    let cosign = cosign()?;
    let registry = GgcrRegistry::start()?;
    let host = registry.host();
    let dir = tempfile::tempdir()?;
    let (key, public) = key_pair(&cosign, &dir.path().join("keys"))?;
    let version = version_of("evaluator")?;
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out)?;

    // What `--no-push` leaves for a service (the binary build itself is the deployed tier's
    // rehearsal): the changelog, the SBOM, the image's OCI archive and the packaged chart.
    std::fs::write(out.join("CHANGELOG.md"), "## evaluator\n")?;
    let sbom = serde_json::json!({
        "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
        "components": [{"type": "library", "name": "pacto-evaluator", "version": version}],
    });
    std::fs::write(
        out.join(format!("evaluator-{version}.cdx.json")),
        serde_json::to_vec(&sbom)?,
    )?;
    let image = format!("{host}/trianalab/pacto-operator-rs/evaluator:{version}");
    let manifest_digest =
        write_oci_archive(&out.join(format!("evaluator-{version}.oci.tar")), &image)?;
    let helm = Command::new(tools_dir().join("helm"))
        .args(["package", "charts/pacto-evaluator", "-d"])
        .arg(&out)
        .current_dir(repo_root())
        .env("HOME", dir.path())
        .output()?;
    ensure!(helm.status.success(), "helm package: {}", text(&helm));

    let pushed = release(
        &cosign,
        &[
            "evaluator",
            &version,
            "--registry",
            &host,
            "--plain-http",
            "--from",
            out.to_str().context("utf-8")?,
            "--sign-key",
            key.to_str().context("utf-8")?,
        ],
    )?;
    ensure!(
        pushed.status.success(),
        "--from --sign-key: {}",
        text(&pushed)
    );
    let listed = digests(&out)?;
    ensure!(
        listed
            .iter()
            .any(|(r, d)| *r == image && *d == manifest_digest),
        "DIGESTS {listed:?} lacks {image} {manifest_digest} (pushed byte for byte)"
    );
    ensure!(listed.len() == 2, "image and chart in DIGESTS: {listed:?}");
    let sums = std::fs::read_to_string(out.join("SHA256SUMS"))?;
    ensure!(
        !sums.contains(".oci.tar"),
        "the OCI archive is not a release asset: {sums}"
    );

    let by_digest = format!("{host}/trianalab/pacto-operator-rs/evaluator@{manifest_digest}");
    let public_s = public.to_str().context("utf-8")?;
    verify_signed(&cosign, public_s, &by_digest, "")?;
    let statements = attested(&cosign, public_s, "cyclonedx", &by_digest, "")?;
    ensure!(
        statements
            .iter()
            .any(|s| s["predicateType"] == "https://cyclonedx.org/bom"
                && s["predicate"]["components"][0]["name"] == "pacto-evaluator"),
        "no CycloneDX SBOM attestation: {statements:?}"
    );
    Ok(())
}

/// Writes an OCI image archive whose `index.json` names one image index (tagged `name`) over two
/// one-file images, linux/amd64 and linux/arm64 (as `buildah manifest push --all` saves a
/// multi-arch image), and returns the index's digest and each platform's manifest digest.
fn write_oci_index_archive(archive: &Path, name: &str) -> Result<(String, Vec<(String, String)>)> {
    let script = r#"
import gzip, hashlib, io, json, sys, tarfile
archive, name = sys.argv[1], sys.argv[2]
blobs = []
def blob(data):
    blobs.append(data)
    return "sha256:" + hashlib.sha256(data).hexdigest()
manifests = []
for arch in ("amd64", "arm64"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        body = f"the {arch} image of the release test\n".encode()
        info = tarfile.TarInfo("hello.txt"); info.size = len(body); info.mtime = 0
        t.addfile(info, io.BytesIO(body))
    layer = gzip.compress(buf.getvalue(), mtime=0)
    config = json.dumps({"architecture": arch, "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(buf.getvalue()).hexdigest()]},
        "config": {}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": blob(layer), "size": len(layer)}]}).encode()
    manifests.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": blob(manifest),
        "size": len(manifest), "platform": {"architecture": arch, "os": "linux"}})
image_index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": manifests}).encode()
index_digest = blob(image_index)
layout_index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
    "digest": index_digest, "size": len(image_index), "annotations": {"org.opencontainers.image.ref.name": name}}]}).encode()
with tarfile.open(archive, mode="w") as t:
    def add(path, data):
        info = tarfile.TarInfo(path); info.size = len(data); info.mtime = 0
        t.addfile(info, io.BytesIO(data))
    add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    add("index.json", layout_index)
    for d in blobs:
        add("blobs/sha256/" + hashlib.sha256(d).hexdigest(), d)
print(index_digest)
for m in manifests:
    print("linux/" + m["platform"]["architecture"], m["digest"])
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(archive)
        .arg(name)
        .output()?;
    ensure!(
        out.status.success(),
        "writing the OCI archive: {}",
        text(&out)
    );
    let stdout = String::from_utf8(out.stdout)?;
    let mut lines = stdout.lines();
    let index = lines.next().context("no index digest")?.to_owned();
    let platforms = lines
        .map(|l| {
            let (p, d) = l.split_once(' ').context("platform line")?;
            Ok((p.to_owned(), d.to_owned()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((index, platforms))
}

#[test]
fn a_multi_arch_image_is_pushed_as_its_index_with_each_platform_signed_and_attested() -> Result<()>
{
    let cosign = cosign()?;
    let registry = GgcrRegistry::start()?;
    let host = registry.host();
    let dir = tempfile::tempdir()?;
    let (key, public) = key_pair(&cosign, &dir.path().join("keys"))?;
    let version = version_of("evaluator")?;
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out)?;

    // What `--no-push --platforms linux/amd64,linux/arm64` leaves: one SBOM per platform and
    // the index's archive (the cross build itself is scripts/arm64-smoke.sh's).
    std::fs::write(out.join("CHANGELOG.md"), "## evaluator\n")?;
    for (file, arch) in [
        (format!("evaluator-{version}.cdx.json"), "amd64"),
        (format!("evaluator-{version}-arm64.cdx.json"), "arm64"),
    ] {
        let sbom = serde_json::json!({
            "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
            "components": [{"type": "library", "name": format!("glibc for {arch}"), "version": version}],
        });
        std::fs::write(out.join(file), serde_json::to_vec(&sbom)?)?;
    }
    let image = format!("{host}/trianalab/pacto-operator-rs/evaluator:{version}");
    let (index_digest, platforms) =
        write_oci_index_archive(&out.join(format!("evaluator-{version}.oci.tar")), &image)?;
    let helm = Command::new(tools_dir().join("helm"))
        .args(["package", "charts/pacto-evaluator", "-d"])
        .arg(&out)
        .current_dir(repo_root())
        .env("HOME", dir.path())
        .output()?;
    ensure!(helm.status.success(), "helm package: {}", text(&helm));

    let pushed = release(
        &cosign,
        &[
            "evaluator",
            &version,
            "--registry",
            &host,
            "--plain-http",
            "--platforms",
            "linux/amd64,linux/arm64",
            "--from",
            out.to_str().context("utf-8")?,
            "--sign-key",
            key.to_str().context("utf-8")?,
        ],
    )?;
    ensure!(
        pushed.status.success(),
        "--platforms --from --sign-key: {}",
        text(&pushed)
    );
    let listed = digests(&out)?;
    ensure!(
        listed
            .iter()
            .any(|(r, d)| *r == image && *d == index_digest),
        "DIGESTS {listed:?} lacks {image} {index_digest} (the index, pushed byte for byte)"
    );

    // The registry serves the tag as the index, with both platforms.
    let served = Command::new("curl")
        .args([
            "-fsS",
            "-H",
            "Accept: application/vnd.oci.image.index.v1+json",
        ])
        .arg(format!(
            "http://{host}/v2/trianalab/pacto-operator-rs/evaluator/manifests/{version}"
        ))
        .output()?;
    ensure!(served.status.success(), "GET the index: {}", text(&served));
    let served: Value = serde_json::from_slice(&served.stdout)?;
    let served_platforms: Vec<(String, String)> = served["manifests"]
        .as_array()
        .context("the tag is not an index")?
        .iter()
        .map(|m| {
            (
                format!(
                    "{}/{}",
                    m["platform"]["os"].as_str().unwrap_or_default(),
                    m["platform"]["architecture"].as_str().unwrap_or_default()
                ),
                m["digest"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    ensure!(
        served_platforms == platforms,
        "the registry's index {served_platforms:?} is not the archive's {platforms:?}"
    );

    let public_s = public.to_str().context("utf-8")?;
    let repo = format!("{host}/trianalab/pacto-operator-rs/evaluator");
    let by_index = format!("{repo}@{index_digest}");
    verify_signed(&cosign, public_s, &by_index, " (index)")?;
    attested(&cosign, public_s, "slsaprovenance1", &by_index, " (index)")?;
    for (platform, digest) in &platforms {
        let arch = platform.trim_start_matches("linux/");
        let by_digest = format!("{repo}@{digest}");
        let what = format!(" ({platform}, signed with the index)");
        verify_signed(&cosign, public_s, &by_digest, &what)?;
        let what = format!(" ({platform})");
        let statements = attested(&cosign, public_s, "cyclonedx", &by_digest, &what)?;
        ensure!(
            !statements.is_empty()
                && statements.iter().all(|s| s["predicate"]["components"][0]["name"]
                    == format!("glibc for {arch}")),
            "{platform} must carry its own SBOM only: {statements:?}"
        );
    }
    Ok(())
}

#[test]
fn signing_without_a_push_is_refused_before_anything_runs() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let version = version_of("pki")?;
    let out = dir.path().to_str().context("utf-8")?;
    for (args, needle) in [
        (
            vec!["pki", &version, "--registry", "none", "--no-push", "--sign"],
            "--sign signs what is pushed",
        ),
        (
            vec![
                "pki",
                &version,
                "--registry",
                "none",
                "--no-push",
                "--from",
                out,
            ],
            "cannot be combined with --no-push",
        ),
        (
            vec![
                "pki",
                &version,
                "--registry",
                "none",
                "--from",
                out,
                "--out",
                out,
            ],
            "--out does not apply",
        ),
        (
            vec![
                "pki",
                &version,
                "--registry",
                "none",
                "--sign-key",
                "/nonexistent/cosign.key",
            ],
            "no key file",
        ),
    ] {
        let run = Command::new(repo_root().join("scripts/release.sh"))
            .args(&args)
            .env_remove("PACTO_RELEASE_SIGN")
            .output()?;
        let stderr = String::from_utf8_lossy(&run.stderr);
        ensure!(!run.status.success(), "{args:?} went ahead: {stderr}");
        ensure!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let run = Command::new(repo_root().join("scripts/release.sh"))
        .args(["pki", &version, "--registry", "none", "--no-push"])
        .env("PACTO_RELEASE_SIGN", "yes")
        .output()?;
    ensure!(
        !run.status.success()
            && String::from_utf8_lossy(&run.stderr).contains("PACTO_RELEASE_SIGN"),
        "PACTO_RELEASE_SIGN=yes: {}",
        text(&run)
    );
    Ok(())
}
