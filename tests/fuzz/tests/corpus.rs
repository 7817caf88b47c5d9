//! Replays through each fuzz target's check every committed seed (`fuzz/seeds/<target>/`) and every
//! input that once broke a property (`fuzz/regressions/<target>/`, see fuzz/README.md): a crash
//! found by the fuzz tier becomes a test here, on the stable toolchain, and stays one.

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(kind: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind);
    let mut replayed = 0;
    for (target, check) in pacto_fuzz_checks::TARGETS {
        for file in inputs(&root.join(target)) {
            let data = std::fs::read(&file).expect("input");
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(
                outcome.is_ok(),
                "fuzz target {target}: {} breaks its properties (see the panic above)",
                file.display()
            );
            replayed += 1;
        }
    }
    replayed
}

#[test]
fn every_seed_passes_its_target() {
    let n = replay("seeds");
    // The committed corpus has inputs for every target; none found means a wrong path.
    assert!(
        n >= pacto_fuzz_checks::TARGETS.len(),
        "only {n} seeds found"
    );
}

#[test]
fn every_kept_crash_input_passes_its_target() {
    let n = replay("regressions");
    assert!(n >= 1, "fuzz/regressions/ holds no input: wrong path?");
}

#[test]
fn every_target_has_a_seed_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    for (target, _) in pacto_fuzz_checks::TARGETS {
        assert!(root.join(target).is_dir(), "fuzz/seeds/{target} is missing");
    }
}
