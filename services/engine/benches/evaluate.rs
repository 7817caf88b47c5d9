//! In-process `evaluate` throughput for the typical contract.
//!
//! `cargo bench -p pacto-engine --bench evaluate` — criterion statistics plus a plain
//! evaluations/s line from a fixed 2 s run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use pacto_engine::bench::{evaluations_per_second, typical_contract, typical_evidence};
use pacto_engine::evaluate;

fn bench(c: &mut Criterion) {
    let contract = typical_contract();
    let evidence = typical_evidence();
    c.bench_function("evaluate/typical", |b| {
        b.iter(|| evaluate(black_box(&contract), black_box(&evidence)));
    });
    c.bench_function("evidence/decode+validate", |b| {
        let json = evidence.to_json().expect("encode");
        b.iter(|| {
            let set = pacto_engine::EvidenceSet::from_json(black_box(&json)).expect("decode");
            set.validate().expect("valid");
            set
        });
    });
    let run = evaluations_per_second(Duration::from_secs(2));
    println!(
        "in-process evaluate (typical contract): {:.0} evaluations/s ({} in {:?})",
        run.per_second(),
        run.evaluations,
        run.elapsed
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
