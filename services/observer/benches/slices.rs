//! The cost of the lookup Observe makes on every call for its target's EndpointSlices
//! (docs/design/observation.md#indexed-lookups): the observer's caches filled through their
//! watch's index with N slices (one per Service, in 10 namespaces), then 10,000 lookups of random
//! Services. Prints the mean lookup time for each N (default 1,000 and 10,000). No cluster.
//!
//! `cargo bench -p pacto-observer --bench slices [-- N ...]`

#![allow(clippy::unwrap_used, reason = "bench")]

use std::collections::BTreeMap;
use std::time::Instant;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use kube::api::ObjectMeta;
use pacto_observer::Caches;
use pacto_runtime::index::Index as _;

const NAMESPACES: usize = 10;
const LOOKUPS: usize = 10_000;

fn slice(i: usize) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            namespace: Some(format!("team-{}", i % NAMESPACES)),
            name: Some(format!("svc-{i}-x7k2p")),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/service-name".to_owned(),
                format!("svc-{i}"),
            )])),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: Some(vec![Endpoint {
            addresses: vec![format!("10.0.{}.{}", i / 250, i % 250)],
            ..Endpoint::default()
        }]),
        ..EndpointSlice::default()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000]
    } else {
        sizes
    };
    for n in sizes {
        let (caches, mut feeds): (Caches, _) = Caches::new(None);
        let feed = &mut feeds.endpoint_slices;
        feed.reset((0..n).map(slice).collect());
        // A fixed pseudo-random sequence of Services (xorshift), the same for every N.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut found = 0;
        let started = Instant::now();
        for _ in 0..LOOKUPS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = usize::try_from(x % n as u64).unwrap();
            let slices = caches
                .endpoint_slices(&format!("team-{}", i % NAMESPACES), &format!("svc-{i}"))
                .await
                .unwrap();
            found += slices.len();
        }
        let mean = started.elapsed().as_secs_f64() / LOOKUPS as f64;
        println!(
            "{n:>6} EndpointSlices cached: {:.2} µs per lookup of one Service's slices (mean of {LOOKUPS}; {found} found)",
            mean * 1e6
        );
    }
}
