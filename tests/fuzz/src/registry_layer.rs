//! Fuzzes what the registry client does with a pulled bundle layer: refuse it past
//! `max_layer_bytes`, else extract it with the client's default bundle limits
//! (`BundleFiles::from_tar_gz`, the same call as `RegistryClient::pull`). Nothing may panic and a
//! decompression bomb must be refused within the limits (the run's memory limit catches a bound
//! that does not hold); an accepted bundle respects every limit.

use pacto_contract::bundle::BundleFiles;
use pacto_oci::ClientOptions;

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    let options = ClientOptions::default();
    if data.len() as u64 > options.max_layer_bytes {
        return;
    }
    let limits = &options.bundle_limits;
    if let Ok(bundle) = BundleFiles::from_tar_gz(data, limits) {
        assert!(bundle.contract().is_some());
        assert!(bundle.len() <= limits.max_entries);
        assert!(bundle.total_bytes() <= limits.max_total_bytes);
        for (_, bytes) in bundle.iter() {
            assert!(bytes.len() as u64 <= limits.max_file_bytes);
        }
    }
}
