//! `docs/reference/cli.md` is generated from the clap definitions; this test fails when it
//! drifts. Regenerate with `PACTO_UPDATE_DOCS=1 cargo test -p pacto --test reference_docs`.

use std::path::Path;

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
