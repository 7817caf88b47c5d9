//! The cost of a `/metrics` scrape of the status-writer's per-Pacto gauges
//! (docs/design/status.md#gauges): the registry filled with N Pactos (default 1,000 and
//! 10,000), a third of them with readiness, and for each N the time to render it, the bytes and
//! series rendered, and the time of a steady `set` (an existing Pacto, as a periodic reconcile
//! records it). Prints numbers; asserts nothing.
//!
//! `cargo bench -p pacto-status-writer --bench gauges [-- N ...]`

use std::hint::black_box;
use std::time::Instant;

use pacto_api::{ContractStatus, ReadinessStatus};
use pacto_status_writer::Gauges;

fn filled(n: usize) -> Gauges {
    let gauges = Gauges::new();
    let readiness = ReadinessStatus {
        score: 80,
        passing: true,
        ..ReadinessStatus::default()
    };
    for i in 0..n {
        gauges.set(
            &format!("team-{}", i % 50),
            &format!("service-{i}"),
            ContractStatus::Compliant,
            (i % 3 == 0).then_some(&readiness),
            None,
        );
    }
    gauges
}

fn main() {
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
        let gauges = filled(n);
        let rounds = (200_000 / n.max(1)).clamp(5, 200);
        let started = Instant::now();
        let mut bytes = 0;
        for _ in 0..rounds {
            bytes = black_box(gauges.render()).len();
        }
        let render = started.elapsed().as_secs_f64() / rounds as f64;
        let series = gauges
            .render()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count();
        let sets: u32 = 100_000;
        let started = Instant::now();
        for i in 0..sets {
            let i = i as usize % n.max(1);
            gauges.set(
                &format!("team-{}", i % 50),
                &format!("service-{i}"),
                ContractStatus::NonCompliant,
                None,
                None,
            );
        }
        let set = started.elapsed().as_secs_f64() / f64::from(sets);
        println!(
            "{n:>6} Pactos: render {:.2} ms ({series} series, {:.1} KiB; mean of {rounds}), steady set {:.2} µs (incl. formatting the key)",
            render * 1e3,
            bytes as f64 / 1024.0,
            set * 1e6
        );
    }
}
