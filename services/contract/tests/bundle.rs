//! Bundle directory reading, deterministic packing, and hostile-archive extraction.

use std::io::{Read, Write};
use std::path::Path;

use pacto_contract::bundle::{BundleError, BundleFiles, Limits, gzip};

const CONTRACT: &str = "pactoVersion: \"2.0\"\nservice:\n  name: demo\n  version: 1.0.0\n";

fn write(dir: &Path, rel: &str, body: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
    std::fs::write(path, body).expect("write");
}

fn sample_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pacto.yaml", CONTRACT);
    write(dir.path(), "interfaces/openapi.yaml", "openapi: 3.0.0\n");
    write(dir.path(), "interfaces-extra.txt", "x\n");
    write(dir.path(), "configuration/schema.json", "{}\n");
    write(dir.path(), "docs/README.md", "# demo\n");
    dir
}

#[test]
fn from_dir_reads_files_and_applies_default_ignores() {
    let dir = sample_dir();
    write(dir.path(), ".git/HEAD", "ref\n");
    write(dir.path(), ".DS_Store", "junk");
    write(dir.path(), "docs/.DS_Store", "junk");
    let bundle = BundleFiles::from_dir(dir.path(), &Limits::default()).expect("reads");
    let paths: Vec<&str> = bundle.iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        [
            "configuration/schema.json",
            "docs/README.md",
            "interfaces-extra.txt",
            "interfaces/openapi.yaml",
            "pacto.yaml"
        ]
    );
    assert_eq!(bundle.contract(), Some(CONTRACT.as_bytes()));
}

#[test]
fn pactoignore_patterns_apply_but_never_to_pacto_yaml() {
    let dir = sample_dir();
    write(
        dir.path(),
        ".pactoignore",
        "# comment\ndocs/\n*.txt\npacto.yaml\n/configuration/*.json\n!configuration/keep.json\n",
    );
    write(dir.path(), "configuration/keep.json", "{}\n");
    write(dir.path(), "interfaces/deep/a.txt", "x\n");
    let bundle = BundleFiles::from_dir(dir.path(), &Limits::default()).expect("reads");
    let paths: Vec<&str> = bundle.iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        [
            "configuration/keep.json",
            "interfaces/openapi.yaml",
            "pacto.yaml"
        ]
    );
}

#[test]
fn from_dir_requires_pacto_yaml() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "other.yaml", "a: 1\n");
    let err = BundleFiles::from_dir(dir.path(), &Limits::default()).expect_err("no contract");
    assert!(matches!(err, BundleError::MissingContract), "{err:?}");
    assert_eq!(err.entry(), Some("pacto.yaml"));
}

#[test]
fn from_dir_refuses_symlinks_and_enforces_limits() {
    let dir = sample_dir();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("interfaces/evil.yaml"))
        .expect("symlink");
    let err = BundleFiles::from_dir(dir.path(), &Limits::default()).expect_err("symlink");
    assert!(
        matches!(&err, BundleError::SymlinkInDir { path } if path == "interfaces/evil.yaml"),
        "{err:?}"
    );

    let dir = sample_dir();
    write(dir.path(), "big.bin", &"a".repeat(2048));
    let limits = Limits {
        max_file_bytes: 1024,
        ..Limits::default()
    };
    let err = BundleFiles::from_dir(dir.path(), &limits).expect_err("too large");
    assert!(
        matches!(&err, BundleError::FileTooLarge { path, .. } if path == "big.bin"),
        "{err:?}"
    );

    let limits = Limits {
        max_entries: 3,
        ..Limits::default()
    };
    let err = BundleFiles::from_dir(sample_dir().path(), &limits).expect_err("too many");
    assert!(
        matches!(err, BundleError::TooManyEntries { limit: 3 }),
        "{err:?}"
    );

    let limits = Limits {
        max_total_bytes: 40,
        ..Limits::default()
    };
    let err = BundleFiles::from_dir(sample_dir().path(), &limits).expect_err("total");
    assert!(
        matches!(err, BundleError::TotalTooLarge { limit: 40 }),
        "{err:?}"
    );
}

#[test]
fn packing_is_deterministic_and_independent_of_file_metadata() {
    let a = sample_dir();
    let b = sample_dir();
    // Different permissions and modification times must not matter.
    for rel in ["pacto.yaml", "docs/README.md"] {
        let p = b.path().join(rel);
        let mut perms = std::fs::metadata(&p).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
        std::fs::set_permissions(&p, perms).expect("chmod");
        let f = std::fs::File::options().write(true).open(&p).expect("open");
        f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(12345))
            .expect("touch");
    }
    let ba = BundleFiles::from_dir(a.path(), &Limits::default()).expect("a");
    let bb = BundleFiles::from_dir(b.path(), &Limits::default()).expect("b");
    let ga = ba.to_tar_gz().expect("pack a");
    assert_eq!(ga, bb.to_tar_gz().expect("pack b"));
    assert_eq!(ga, ba.to_tar_gz().expect("pack a again"));
}

#[test]
fn tar_layout_matches_the_spec() {
    let bundle = BundleFiles::from_dir(sample_dir().path(), &Limits::default()).expect("reads");
    let tar_bytes = bundle.to_tar().expect("tar");
    let mut archive = tar::Archive::new(tar_bytes.as_slice());
    let mut seen = Vec::new();
    for entry in archive.entries().expect("entries") {
        let entry = entry.expect("entry");
        let h = entry.header();
        let name = String::from_utf8(entry.path_bytes().into_owned()).expect("utf8");
        assert_eq!(h.mtime().expect("mtime"), 0, "{name}");
        assert_eq!(h.uid().expect("uid"), 0);
        assert_eq!(h.gid().expect("gid"), 0);
        assert_eq!(h.username().expect("uname"), Some(""));
        assert_eq!(h.groupname().expect("gname"), Some(""));
        let mode = h.mode().expect("mode");
        if h.entry_type().is_dir() {
            assert_eq!(mode, 0o755, "{name}");
        } else {
            assert_eq!(mode, 0o644, "{name}");
        }
        assert!(!name.starts_with("./"));
        seen.push(name.trim_end_matches('/').to_owned());
    }
    assert_eq!(
        seen,
        [
            "configuration",
            "configuration/schema.json",
            "docs",
            "docs/README.md",
            "interfaces",
            "interfaces/openapi.yaml",
            "interfaces-extra.txt",
            "pacto.yaml"
        ]
    );
}

#[test]
fn round_trip_through_tar_gz_and_a_directory() {
    let bundle = BundleFiles::from_dir(sample_dir().path(), &Limits::default()).expect("reads");
    let gz = bundle.to_tar_gz().expect("pack");
    let back = BundleFiles::from_tar_gz(gz.as_slice(), &Limits::default()).expect("extract");
    assert_eq!(back, bundle);

    let out = tempfile::tempdir().expect("tempdir");
    let target = out.path().join("pulled");
    back.write_to_dir(&target).expect("write");
    let again = BundleFiles::from_dir(&target, &Limits::default()).expect("re-read");
    assert_eq!(again, bundle);
}

#[test]
fn long_paths_round_trip() {
    let mut bundle = BundleFiles::new();
    bundle.insert("pacto.yaml", CONTRACT);
    let long = format!("{}/{}.yaml", "d".repeat(120), "f".repeat(150));
    bundle.insert(long.clone(), "x");
    let gz = bundle.to_tar_gz().expect("pack");
    let back = BundleFiles::from_tar_gz(gz.as_slice(), &Limits::default()).expect("extract");
    assert_eq!(back.get(&long), Some(&b"x"[..]));
}

#[test]
fn write_to_dir_refuses_symlinks_in_destination() {
    let bundle = BundleFiles::from_dir(sample_dir().path(), &Limits::default()).expect("reads");
    let out = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(elsewhere.path(), out.path().join("docs")).expect("symlink");
    let err = bundle.write_to_dir(out.path()).expect_err("symlink");
    assert!(
        matches!(err, BundleError::DestinationSymlink { .. }),
        "{err:?}"
    );
    assert!(
        std::fs::read_dir(elsewhere.path())
            .expect("ls")
            .next()
            .is_none()
    );
}

// ---- hostile archives -------------------------------------------------------------------

/// Appends a raw entry with exactly `name` (no sanitising by the tar crate).
fn raw_entry(
    out: &mut Vec<u8>,
    name: &[u8],
    kind: tar::EntryType,
    data: &[u8],
    link: Option<&[u8]>,
) {
    let mut header = tar::Header::new_ustar();
    {
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name);
        if let Some(link) = link {
            old.linkname[..link.len()].copy_from_slice(link);
        }
    }
    header.set_entry_type(kind);
    header.set_mode(0o644);
    header.set_size(data.len() as u64);
    header.set_mtime(0);
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    let pad = (512 - data.len() % 512) % 512;
    out.extend(std::iter::repeat_n(0u8, pad));
}

fn finish(mut tar: Vec<u8>) -> Vec<u8> {
    tar.extend(std::iter::repeat_n(0u8, 1024));
    gzip(&tar).expect("gzip")
}

fn with_contract() -> Vec<u8> {
    let mut out = Vec::new();
    raw_entry(
        &mut out,
        b"pacto.yaml",
        tar::EntryType::Regular,
        CONTRACT.as_bytes(),
        None,
    );
    out
}

fn extract(gz: &[u8]) -> Result<BundleFiles, BundleError> {
    BundleFiles::from_tar_gz(gz, &Limits::default())
}

#[test]
fn accepts_dot_slash_prefix_and_root_entries() {
    let mut tar = Vec::new();
    raw_entry(&mut tar, b"./", tar::EntryType::Directory, b"", None);
    raw_entry(
        &mut tar,
        b"./pacto.yaml",
        tar::EntryType::Regular,
        CONTRACT.as_bytes(),
        None,
    );
    raw_entry(&mut tar, b"./docs/", tar::EntryType::Directory, b"", None);
    raw_entry(
        &mut tar,
        b"./docs/a.md",
        tar::EntryType::Regular,
        b"a",
        None,
    );
    let bundle = extract(&finish(tar)).expect("valid");
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle.get("docs/a.md"), Some(&b"a"[..]));
}

#[test]
fn rejects_absolute_paths() {
    let mut tar = with_contract();
    raw_entry(
        &mut tar,
        b"/etc/cron.d/evil",
        tar::EntryType::Regular,
        b"x",
        None,
    );
    let err = extract(&finish(tar)).expect_err("absolute");
    assert!(
        matches!(&err, BundleError::AbsolutePath { path } if path == "/etc/cron.d/evil"),
        "{err:?}"
    );
    assert_eq!(err.kind(), "absolute_path");
}

#[test]
fn rejects_parent_traversal() {
    let mut tar = with_contract();
    raw_entry(
        &mut tar,
        b"docs/../../evil",
        tar::EntryType::Regular,
        b"x",
        None,
    );
    let err = extract(&finish(tar)).expect_err("dotdot");
    assert!(
        matches!(err, BundleError::ParentTraversal { .. }),
        "{err:?}"
    );
}

#[test]
fn rejects_symlinks_and_hard_links() {
    let mut tar = with_contract();
    raw_entry(
        &mut tar,
        b"escape",
        tar::EntryType::Symlink,
        b"",
        Some(b"../../etc/passwd"),
    );
    let err = extract(&finish(tar)).expect_err("symlink");
    assert!(
        matches!(&err, BundleError::Link { kind: "symbolic link", target, .. } if target == "../../etc/passwd"),
        "{err:?}"
    );

    let mut tar = with_contract();
    raw_entry(
        &mut tar,
        b"inside",
        tar::EntryType::Symlink,
        b"",
        Some(b"pacto.yaml"),
    );
    assert!(matches!(
        extract(&finish(tar)),
        Err(BundleError::Link { .. })
    ));

    let mut tar = with_contract();
    raw_entry(
        &mut tar,
        b"hard",
        tar::EntryType::Link,
        b"",
        Some(b"/etc/shadow"),
    );
    let err = extract(&finish(tar)).expect_err("hard link");
    assert!(
        matches!(
            err,
            BundleError::Link {
                kind: "hard link",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn rejects_device_files_and_fifos() {
    for (kind, label) in [
        (tar::EntryType::Char, "character device"),
        (tar::EntryType::Block, "block device"),
        (tar::EntryType::Fifo, "FIFO"),
    ] {
        let mut tar = with_contract();
        raw_entry(&mut tar, b"dev", kind, b"", None);
        let err = extract(&finish(tar)).expect_err(label);
        assert!(
            matches!(&err, BundleError::SpecialFile { kind, .. } if *kind == label),
            "{err:?}"
        );
    }
}

#[test]
fn rejects_too_many_files() {
    let mut tar = with_contract();
    for i in 0..20 {
        raw_entry(
            &mut tar,
            format!("f{i}").as_bytes(),
            tar::EntryType::Regular,
            b"x",
            None,
        );
    }
    let limits = Limits {
        max_entries: 10,
        ..Limits::default()
    };
    let err = BundleFiles::from_tar_gz(finish(tar).as_slice(), &limits).expect_err("too many");
    assert!(
        matches!(err, BundleError::TooManyEntries { limit: 10 }),
        "{err:?}"
    );
}

#[test]
fn rejects_oversized_file_without_reading_it_all() {
    // 11 MiB of zeros compresses to a few KiB; the default 10 MiB per-file limit applies.
    let mut tar = with_contract();
    raw_entry(
        &mut tar,
        b"big",
        tar::EntryType::Regular,
        &vec![0u8; 11 * 1024 * 1024],
        None,
    );
    let gz = finish(tar);
    assert!(gz.len() < 200 * 1024);
    let err = extract(&gz).expect_err("too large");
    assert!(
        matches!(&err, BundleError::FileTooLarge { path, limit } if path == "big" && *limit == 10 * 1024 * 1024),
        "{err:?}"
    );
    assert_eq!(
        err.entry(),
        Some("big"),
        "the error names the entry at fault"
    );
}

#[test]
fn header_size_lies_are_not_trusted() {
    // A header claiming 1 TiB with only a few real bytes: refused up front by the per-file
    // limit, without allocating.
    let mut tar = with_contract();
    let mut header = tar::Header::new_ustar();
    header.as_old_mut().name[..4].copy_from_slice(b"huge");
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(1 << 40);
    header.set_cksum();
    tar.extend_from_slice(header.as_bytes());
    tar.extend_from_slice(&[1u8; 512]);
    let err = extract(&finish(tar)).expect_err("lying header");
    assert!(matches!(err, BundleError::FileTooLarge { .. }), "{err:?}");
}

#[test]
fn rejects_total_too_large() {
    let mut tar = with_contract();
    for i in 0..6 {
        raw_entry(
            &mut tar,
            format!("f{i}").as_bytes(),
            tar::EntryType::Regular,
            &[7u8; 4096],
            None,
        );
    }
    let limits = Limits {
        max_total_bytes: 16 * 1024,
        ..Limits::default()
    };
    let err = BundleFiles::from_tar_gz(finish(tar).as_slice(), &limits).expect_err("total");
    assert!(matches!(err, BundleError::TotalTooLarge { .. }), "{err:?}");
}

#[test]
fn gzip_bomb_stops_at_the_stream_limit() {
    // A valid small archive followed by 100 MiB of zeros (end-of-archive blocks, then more):
    // about 100 KiB compressed. Extraction must stop at the decompressed-stream limit.
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&with_contract()).expect("write");
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..100 {
        encoder.write_all(&zeros).expect("write");
    }
    let gz = encoder.finish().expect("finish");
    assert!(gz.len() < 1024 * 1024, "bomb is {} bytes", gz.len());
    let limits = Limits::default();
    let err = extract(&gz).expect_err("bomb");
    assert!(
        matches!(err, BundleError::StreamTooLarge { limit } if limit == limits.max_stream_bytes()),
        "{err:?}"
    );
}

#[test]
fn rejects_corrupt_input_and_missing_contract() {
    let err = extract(b"definitely not gzip").expect_err("garbage");
    assert!(matches!(err, BundleError::Corrupt { .. }), "{err:?}");

    let mut gz = finish(with_contract());
    let n = gz.len();
    gz[n - 6] ^= 0xff; // break the CRC trailer
    let err = extract(&gz).expect_err("bad crc");
    assert!(matches!(err, BundleError::Corrupt { .. }), "{err:?}");

    let mut tar = Vec::new();
    raw_entry(
        &mut tar,
        b"other.yaml",
        tar::EntryType::Regular,
        b"a: 1",
        None,
    );
    assert!(matches!(
        extract(&finish(tar)),
        Err(BundleError::MissingContract)
    ));
}

#[test]
fn rejects_duplicates_and_non_utf8_names() {
    let mut tar = with_contract();
    raw_entry(
        &mut tar,
        b"./pacto.yaml",
        tar::EntryType::Regular,
        b"again",
        None,
    );
    let err = extract(&finish(tar)).expect_err("dup");
    assert!(matches!(err, BundleError::DuplicateEntry { .. }), "{err:?}");

    let mut tar = with_contract();
    raw_entry(&mut tar, b"bad\xff", tar::EntryType::Regular, b"x", None);
    let err = extract(&finish(tar)).expect_err("non utf8");
    assert!(
        matches!(err, BundleError::NonUtf8EntryName { .. }),
        "{err:?}"
    );
}

#[test]
fn pulled_archive_from_go_style_tar_is_accepted() {
    // A plain tar written by the tar crate's own builder with a ./ prefix (as some producers do).
    let mut builder = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(CONTRACT.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    builder
        .append_data(&mut h, "./pacto.yaml", CONTRACT.as_bytes())
        .expect("append");
    let tar = builder.into_inner().expect("tar");
    let mut gz = Vec::new();
    flate2::read::GzEncoder::new(tar.as_slice(), flate2::Compression::default())
        .read_to_end(&mut gz)
        .expect("gz");
    let bundle = extract(&gz).expect("valid");
    assert_eq!(bundle.contract(), Some(CONTRACT.as_bytes()));
}

#[test]
fn pax_path_records_are_honoured() {
    // Go's archive/tar writes PAX records for long or non-ASCII names; the PAX path wins over
    // the ustar name, and is checked like any other name.
    let build = |pax_path: &str| {
        let mut builder = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_ustar();
        h.set_size(CONTRACT.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        builder
            .append_data(&mut h, "pacto.yaml", CONTRACT.as_bytes())
            .expect("append");
        builder
            .append_pax_extensions([("path", pax_path.as_bytes())])
            .expect("pax");
        let mut h = tar::Header::new_ustar();
        h.set_size(1);
        h.set_mode(0o644);
        h.set_cksum();
        builder
            .append_data(&mut h, "placeholder", &b"x"[..])
            .expect("append");
        gzip(&builder.into_inner().expect("tar")).expect("gzip")
    };
    let long = format!("docs/{}/ünïcode.md", "n".repeat(150));
    let bundle = extract(&build(&long)).expect("valid");
    assert_eq!(bundle.get(&long), Some(&b"x"[..]));
    assert!(bundle.get("placeholder").is_none());

    let err = extract(&build("../../escape")).expect_err("pax traversal");
    assert!(
        matches!(err, BundleError::ParentTraversal { .. }),
        "{err:?}"
    );
    let err = extract(&build("/abs/path")).expect_err("pax absolute");
    assert!(matches!(err, BundleError::AbsolutePath { .. }), "{err:?}");
}
