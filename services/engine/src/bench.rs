//! The "typical contract" workload shared by the in-process and gRPC benchmarks, and an
//! in-process throughput measurement.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::evaluate::evaluate;
use crate::evidence::{
    CapabilityValue, ConfigurationValue, DependencyValue, EvidenceSet, InterfaceValue, Observation,
    ObservationKind, Outcome, PersistenceValue, Provenance, SubjectRef, Value, WorkloadValue,
};
use crate::input::{CapabilityAssertion, ContractAssertions, NamedAssertion};
use crate::time::Timestamp;

/// A typical service contract: 3 interfaces, health + metrics + one extension capability,
/// 4 dependencies (3 required), 3 configurations (2 required), a declared workload and
/// persistent durability — 15 assertions, 13 of them required.
pub fn typical_contract() -> ContractAssertions {
    ContractAssertions {
        service_name: "orders".into(),
        interfaces: vec!["http-api".into(), "grpc-api".into(), "events".into()],
        capabilities: vec![
            CapabilityAssertion::Health,
            CapabilityAssertion::Metrics,
            CapabilityAssertion::Extension {
                reference: "example.com/tracing".into(),
            },
        ],
        dependencies: vec![
            NamedAssertion::new("postgres", true),
            NamedAssertion::new("payments", true),
            NamedAssertion::new("inventory", true),
            NamedAssertion::new("recommendations", false),
        ],
        configurations: vec![
            NamedAssertion::new("default", true),
            NamedAssertion::new("secrets", true),
            NamedAssertion::new("feature-flags", false),
        ],
        workload: Some("service".into()),
        persistent: true,
    }
}

/// Evidence for [`typical_contract`] mixing every outcome: most assertions Observed and
/// satisfied, one absent interface, one unreachable optional dependency, one Unsupported
/// (metrics), one Insufficient and one Stale observation.
pub fn typical_evidence() -> EvidenceSet {
    let at = Timestamp::from_unix(1_787_000_000, 0).unwrap_or_default();
    let k8s = Provenance::new("k8s-observer", at);
    let ebpf = Provenance::new("k8s-observer+ebpf", at);
    let observed =
        |name: &str, value: Value, p: &Provenance| Observation::observed(name, value, p.clone());
    let interface = |present| {
        Value::Interface(InterfaceValue {
            interface_type: "http".into(),
            present,
        })
    };
    let observations = vec![
        observed("http-api", interface(true), &k8s),
        observed("grpc-api", interface(true), &ebpf),
        observed("events", interface(false), &k8s),
        observed(
            "health",
            Value::Capability(CapabilityValue { present: true }),
            &k8s,
        ),
        Observation::new(
            ObservationKind::CapabilityObserved,
            "metrics",
            Outcome::Unsupported,
            k8s.clone(),
        ),
        observed(
            "postgres",
            Value::Dependency(DependencyValue { reachable: true }),
            &k8s,
        ),
        observed(
            "payments",
            Value::Dependency(DependencyValue { reachable: true }),
            &k8s,
        ),
        Observation::new(
            ObservationKind::DependencyReachable,
            "inventory",
            Outcome::Stale,
            ebpf.clone(),
        ),
        observed(
            "recommendations",
            Value::Dependency(DependencyValue { reachable: false }),
            &k8s,
        ),
        observed(
            "default",
            Value::Configuration(ConfigurationValue {
                present: true,
                conformant: true,
            }),
            &k8s,
        ),
        Observation::new(
            ObservationKind::ConfigurationPresent,
            "secrets",
            Outcome::Insufficient,
            k8s.clone(),
        ),
        observed(
            "orders",
            Value::Workload(WorkloadValue {
                workload_type: "service".into(),
            }),
            &k8s,
        ),
        observed(
            "orders",
            Value::Persistence(PersistenceValue { durable: true }),
            &k8s,
        ),
    ];
    EvidenceSet {
        subject: SubjectRef::new("service", "shop/orders"),
        contract_ref: "ghcr.io/acme/orders-pacto@sha256:0000000000000000000000000000000000000000000000000000000000000000".into(),
        source: "k8s".into(),
        observed_at: at,
        observations: Some(observations),
        subject_missing: false,
    }
}

/// Result of an in-process throughput run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    /// Evaluations performed.
    pub evaluations: u64,
    /// Wall time spent.
    pub elapsed: Duration,
}

impl Throughput {
    /// Evaluations per second.
    pub fn per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.evaluations as f64 / secs
        } else {
            0.0
        }
    }
}

/// Runs `evaluate(typical_contract, typical_evidence)` repeatedly for at least `duration` and
/// reports the count (in-process, single thread).
pub fn evaluations_per_second(duration: Duration) -> Throughput {
    let contract = typical_contract();
    let evidence = typical_evidence();
    let start = Instant::now();
    let mut evaluations = 0_u64;
    loop {
        for _ in 0..256 {
            black_box(evaluate(black_box(&contract), black_box(&evidence)));
        }
        evaluations += 256;
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return Throughput {
                evaluations,
                elapsed,
            };
        }
    }
}
