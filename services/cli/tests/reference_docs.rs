//! `docs/reference/cli.md` and the man pages in `docs/reference/man/` are generated from the clap
//! definitions; these tests fail when they drift. Regenerate with
//! `PACTO_UPDATE_DOCS=1 cargo test -p pacto --test reference_docs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

mod common;

use common::command_names;

#[test]
fn cli_reference_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference/cli.md");
    let rendered = pacto_cli::reference::markdown();
    if std::env::var_os("PACTO_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
        std::fs::write(&path, &rendered).expect("write docs");
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == rendered,
        "{} is out of date; run PACTO_UPDATE_DOCS=1 cargo test -p pacto --test reference_docs",
        path.display()
    );
    for env in [
        "PACTO_INSECURE_REGISTRIES",
        "PACTO_REGISTRY_TOKEN",
        "DOCKER_CONFIG",
    ] {
        assert!(rendered.contains(env), "{env} documented");
    }
}

#[test]
fn man_pages_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference/man");
    let want: BTreeMap<String, Vec<u8>> = pacto_cli::reference::man_pages()
        .expect("render the man pages")
        .into_iter()
        .collect();
    let on_disk = || -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "1"))
            .map(|p| {
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                (name, std::fs::read(&p).expect("read a man page"))
            })
            .collect()
    };
    if std::env::var_os("PACTO_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(&dir).expect("mkdir");
        for stale in on_disk().keys().filter(|n| !want.contains_key(*n)) {
            std::fs::remove_file(dir.join(stale)).expect("remove a stale man page");
        }
        for (name, page) in &want {
            std::fs::write(dir.join(name), page).expect("write a man page");
        }
    }
    let have = on_disk();
    let regenerate = "run PACTO_UPDATE_DOCS=1 cargo test -p pacto --test reference_docs";
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&have),
        names(&want),
        "{}: the man pages on disk are not one per command; {regenerate}",
        dir.display()
    );
    for (name, page) in &want {
        assert!(
            have.get(name) == Some(page),
            "{} is out of date; {regenerate}",
            dir.join(name).display()
        );
    }
    for page in [
        "pacto.1",
        "pacto-status.1",
        "pacto-completions.1",
        "pacto-validate.1",
    ] {
        assert!(
            want.contains_key(page),
            "{page} generated: {:?}",
            names(&want)
        );
    }
}

#[test]
fn man_renders_the_pages_with_every_command_and_flag() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference/man");
    let man = |page: &str| {
        let out = Command::new("man")
            .arg("-l")
            .arg(dir.join(page))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .expect("run man (apt-get install man-db groff-base)");
        assert!(out.status.success(), "man -l {page}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let root = man("pacto.1");
    for command in command_names() {
        assert!(
            root.contains(&format!("pacto-{command}(1)")),
            "pacto.1 lists {command}:\n{root}"
        );
    }
    let status = man("pacto-status.1");
    for flag in [
        "--all-namespaces",
        "--output",
        "--watch",
        "PACTO_REGISTRY_TOKEN",
    ] {
        assert!(
            status.contains(flag),
            "pacto-status.1 names {flag}:\n{status}"
        );
    }
}
