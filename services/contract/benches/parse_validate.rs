//! Parse + validate throughput for a typical contract (the worked example 7.1 of docs/design/contract.md#worked-examples bundle from the fixture
//! corpus: an OpenAPI interface, a configuration schema with values, two dependencies, two
//! capabilities and readiness claims).
//!
//! Run: `cargo bench -p pacto-contract --bench parse_validate`

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pacto_contract::bundle::BundleFiles;
use pacto_contract::parse_contract;
use pacto_contract::{ValidateOptions, validate_bundle};

fn typical_bundle() -> BundleFiles {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/contracts/valid/spec-7.1-stateless-http-api");
    let mut b = BundleFiles::new();
    for rel in [
        "pacto.yaml",
        "interfaces/openapi.yaml",
        "configuration/schema.json",
    ] {
        let bytes = std::fs::read(dir.join(rel)).expect("fixture file");
        b.insert(rel, bytes);
    }
    b
}

fn bench(c: &mut Criterion) {
    let bundle = typical_bundle();
    let yaml = bundle.contract().expect("pacto.yaml").to_vec();
    let opts = ValidateOptions::default();
    // Sanity: the typical contract is valid, so every layer runs.
    assert!(validate_bundle(&bundle, &opts).report.is_valid());

    let mut g = c.benchmark_group("contract");
    g.throughput(Throughput::Bytes(yaml.len() as u64));
    g.bench_function("parse_yaml_and_model", |b| {
        b.iter(|| parse_contract(black_box(&yaml)).expect("parses"));
    });
    g.bench_function("parse_and_validate_bundle", |b| {
        b.iter(|| validate_bundle(black_box(&bundle), &opts));
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
