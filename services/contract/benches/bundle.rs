//! Bundle packing and extraction throughput: the worked example 7.1 of docs/design/contract.md#worked-examples fixture bundle (typical size), a
//! 2 MiB bundle of 64 files, and the cost of refusing a 100 MiB gzip bomb (bounded by the
//! decompressed-stream limit, not by the bomb's size).
//!
//! Run: `cargo bench -p pacto-contract --bench bundle`

use std::hint::black_box;
use std::io::Write as _;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pacto_contract::bundle::{BundleFiles, Limits};

fn typical() -> BundleFiles {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/contracts/valid/spec-7.1-stateless-http-api");
    BundleFiles::from_dir(&dir, &Limits::default()).expect("fixture bundle")
}

fn large() -> BundleFiles {
    let mut b = BundleFiles::new();
    b.insert(
        "pacto.yaml",
        "pactoVersion: \"2.0\"\nservice:\n  name: big\n  version: 1.0.0\n",
    );
    for i in 0..64u32 {
        let body: Vec<u8> = (0..32 * 1024u32)
            .map(|j| (i.wrapping_mul(31).wrapping_add(j.wrapping_mul(7)) % 251) as u8)
            .collect();
        b.insert(format!("docs/part-{i:02}.bin"), body);
    }
    b
}

fn bomb() -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..100 {
        e.write_all(&zeros).expect("write");
    }
    e.finish().expect("finish")
}

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    for (name, bundle) in [("typical", typical()), ("2MiB-64-files", large())] {
        let gz = bundle.to_tar_gz().expect("packs");
        let mut g = c.benchmark_group(format!("bundle/{name}"));
        g.throughput(Throughput::Bytes(bundle.total_bytes()));
        g.bench_function("pack", |b| {
            b.iter(|| black_box(&bundle).to_tar_gz().expect("packs"));
        });
        g.bench_function("extract", |b| {
            b.iter(|| {
                BundleFiles::from_tar_gz(black_box(gz.as_slice()), &limits).expect("extracts")
            });
        });
        g.finish();
    }
    let bomb = bomb();
    let mut g = c.benchmark_group("bundle/gzip-bomb-100MiB");
    g.sample_size(10);
    g.bench_function("refuse", |b| {
        b.iter(|| {
            BundleFiles::from_tar_gz(black_box(bomb.as_slice()), &limits).expect_err("refused")
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
