//! What checking one received envelope costs: `admit` (strict decode, Ed25519 verification over
//! the canonical bytes, evidence validation, ContractRef policy) for a small envelope (10
//! observations) and one near the 1 MiB bound (5,000 observations), plus signing.
//!
//! `cargo bench -p pacto-evidence --bench admit` — criterion statistics plus a plain
//! envelopes/s line per size from a fixed 2 s run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use ed25519_dalek::SigningKey;
use pacto_engine::Timestamp;
use pacto_evidence::{
    Envelope, MAX_ENVELOPE_BYTES, Producer, SignedEvidenceSet, TrustEntry, TrustStore, admit, sign,
};

fn envelope(observations: usize, key: &SigningKey) -> Vec<u8> {
    let list: Vec<String> = (0..observations)
        .map(|i| {
            format!(
                r#"{{"kind":"DependencyReachable","subject":{{"kind":"dependency","name":"d{i}"}},"outcome":"Observed","value":{{"reachable":true}},"provenance":{{"collector":"c","detectedAt":"2026-12-04T09:59:00Z"}}}}"#
            )
        })
        .collect();
    let set = format!(
        r#"{{"Subject":{{"kind":"service","name":"shop/orders"}},"ContractRef":"oci://r.example/acme/orders@sha256:{}","Source":"edge","ObservedAt":"2026-12-04T09:59:30Z","Observations":[{}]}}"#,
        "0".repeat(64),
        list.join(",")
    );
    let set = SignedEvidenceSet::from_json(set.as_bytes()).expect("set");
    let mut e = Envelope::new(
        "id",
        Producer {
            id: "edge".into(),
            version: String::new(),
            key_id: "k".into(),
        },
        1,
        Timestamp::parse("2026-12-04T10:00:00Z").expect("time"),
        Timestamp::zero(),
        set,
    );
    sign(&mut e, key).expect("sign");
    e.to_json().into_bytes()
}

fn bench(c: &mut Criterion) {
    let key = SigningKey::from_bytes(&[3u8; 32]);
    let mut trust = TrustStore::new();
    trust.insert("k", TrustEntry::new(key.verifying_key(), "edge"));
    let now = Timestamp::parse("2026-12-04T10:30:00Z").expect("now");
    // 5,000 observations of this shape fill most of the 1 MiB bound
    for n in [10, 5_000] {
        let body = envelope(n, &key);
        assert!(body.len() <= MAX_ENVELOPE_BYTES, "{}", body.len());
        admit(&body, &trust, now).expect("admitted");
        c.bench_function(&format!("admit/{n} observations"), |b| {
            b.iter(|| admit(black_box(&body), &trust, now).expect("admitted"));
        });
        let started = Instant::now();
        let mut count = 0u32;
        while started.elapsed() < Duration::from_secs(2) {
            admit(black_box(&body), &trust, now).expect("admitted");
            count += 1;
        }
        let elapsed = started.elapsed();
        println!(
            "admit, {n} observations ({} bytes): {:.0} envelopes/s ({count} in {elapsed:?})",
            body.len(),
            f64::from(count) / elapsed.as_secs_f64()
        );
    }
    let decoded = Envelope::decode(&envelope(10, &key)).expect("decode");
    c.bench_function("sign/10 observations", |b| {
        b.iter(|| {
            let mut e = decoded.clone();
            sign(&mut e, &key).expect("sign");
            e
        });
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
