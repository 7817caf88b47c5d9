//! Fuzzes the whole validation pipeline on arbitrary `pacto.yaml` bytes: YAML parsing (merge
//! keys, multi-document, anchors), layer 1, the typed model, layer 2 with a small bundle, layer 3
//! with local policies, readiness assessment and the CLI JSON output. Nothing may panic, and the
//! report must be self-consistent.

use chrono::{TimeZone, Utc};
use pacto_contract::bundle::BundleFiles;
use pacto_contract::codes::Severity;
use pacto_contract::readiness;
use pacto_contract::{ValidateOptions, validate_bundle, validate_document};

/// One fuzz input: panics on any broken property.
pub fn check(data: &[u8]) {
    let mut bundle = BundleFiles::new();
    bundle.insert("pacto.yaml", data.to_vec());
    bundle.insert("interfaces/openapi.yaml", b"openapi: 3.0.3\n".to_vec());
    bundle.insert(
        "configuration/schema.json",
        br#"{"type":"object"}"#.to_vec(),
    );
    bundle.insert(
        "policy/schema.json",
        br#"{"required":["service"]}"#.to_vec(),
    );

    for outcome in [
        validate_bundle(&bundle, &ValidateOptions::default()),
        validate_document(data, &ValidateOptions::default()),
    ] {
        let report = &outcome.report;
        assert_eq!(report.is_valid(), report.errors.is_empty());
        assert!(
            report
                .warnings
                .iter()
                .all(|f| f.severity != Severity::Error)
        );
        let json = serde_json::to_string(&report.to_json_output()).expect("serialises");
        assert!(json.starts_with("{\"valid\":"));
        if let Some(contract) = &outcome.contract {
            let now = Utc
                .with_ymd_and_hms(2027, 1, 10, 9, 0, 0)
                .single()
                .expect("valid instant");
            if let Some(a) = readiness::assess(contract.readiness.as_ref(), now) {
                assert!(!a.passing || !a.expired);
            }
        }
    }
}
