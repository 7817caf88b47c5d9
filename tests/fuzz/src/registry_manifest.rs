//! Fuzzes what the registry client decodes from a manifest body (`ImageManifest::parse`) and a
//! config blob (`BundleConfig::labels_from_json`), within the client's default byte limits (a
//! body over the limit is refused before it is decoded). Nothing may panic; an accepted manifest
//! is schema version 2 and survives an encode → decode round trip unchanged.

use pacto_oci::{BundleConfig, ClientOptions, ImageManifest};

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    let options = ClientOptions::default();
    let len = data.len() as u64;
    if len <= options.max_manifest_bytes
        && let Ok(manifest) = ImageManifest::parse(data)
    {
        assert_eq!(manifest.schema_version, 2);
        let again = ImageManifest::parse(&manifest.to_json()).expect("its own encoding parses");
        assert_eq!(again, manifest);
    }
    if len <= options.max_config_bytes {
        for (key, value) in BundleConfig::labels_from_json(data) {
            assert!(key.len() + value.len() <= data.len());
        }
    }
}
