//! Fuzzes bundle extraction (`BundleFiles::from_tar_gz` / `from_tar`) on arbitrary bytes with
//! small limits. Nothing may panic; whatever is accepted must respect the limits, hold only
//! safe relative paths, and survive a deterministic pack → extract round trip unchanged.

use pacto_contract::bundle::{BundleFiles, Limits};

const LIMITS: Limits = Limits {
    max_file_bytes: 64 * 1024,
    max_total_bytes: 256 * 1024,
    max_entries: 64,
};

fn check_bundle(bundle: &BundleFiles) {
    assert!(bundle.len() <= LIMITS.max_entries);
    assert!(bundle.total_bytes() <= LIMITS.max_total_bytes);
    assert!(bundle.contract().is_some());
    for (path, bytes) in bundle.iter() {
        assert!(bytes.len() as u64 <= LIMITS.max_file_bytes);
        assert!(!path.is_empty() && !path.starts_with('/'), "{path:?}");
        assert!(
            path.split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."),
            "{path:?}"
        );
    }
    let packed = bundle.to_tar_gz().expect("a valid bundle packs");
    let again =
        BundleFiles::from_tar_gz(packed.as_slice(), &LIMITS).expect("its own pack extracts");
    assert_eq!(&again, bundle);
    assert_eq!(
        again.to_tar_gz().expect("packs"),
        packed,
        "packing is deterministic"
    );
}

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    if let Ok(bundle) = BundleFiles::from_tar_gz(data, &LIMITS) {
        check_bundle(&bundle);
    }
    if let Ok(bundle) = BundleFiles::from_tar(data, &LIMITS) {
        check_bundle(&bundle);
    }
}
