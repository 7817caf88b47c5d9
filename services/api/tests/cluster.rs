//! Cluster tier: install the generated CRDs (the checked-in chart files) into a real
//! kube-apiserver + etcd, and round-trip sample objects through it — spec defaults and
//! validation, the status subresource, and that nothing is pruned (the schemas are structural
//! and complete).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use pacto_api::testing::PactoBuilder;
use pacto_api::*;
use pacto_runtime::testing::eventually;
use pacto_testenv::{ControlPlane, ControlPlaneOptions};

fn t(secs: i64) -> Time {
    Time(Timestamp::from_second(1_787_000_000 + secs).expect("valid"))
}

fn full_status() -> PactoStatus {
    PactoStatus {
        contract_status: Some(ContractStatus::NonCompliant),
        evaluation_coverage: Some(EvaluationCoverage {
            evaluated: 3,
            required: 4,
        }),
        observation_windows: vec![ObservationWindow {
            kind: ObservationWindowKind::Interface,
            subject: "http-api".into(),
            first_observed_negative_at: t(0),
        }],
        resolution_policy: Some(ResolutionPolicy::PinnedTag),
        summary: Some(Summary {
            error_count: 1,
            warning_count: 0,
            info_count: 0,
            unknown_count: 1,
        }),
        contract_version: Some("1.2.0".into()),
        contract: Some(ContractInfo {
            service_name: "orders".into(),
            version: "1.2.0".into(),
            owner: Some(OwnerInfo {
                team: Some("shop".into()),
                dri: None,
                contacts: vec![OwnerContact {
                    contact_type: "email".into(),
                    value: "shop@example.com".into(),
                    purpose: Some("escalation".into()),
                }],
            }),
            owner_display: Some("shop".into()),
            resolved_ref: Some("ghcr.io/acme/orders-pacto:1.2.0".into()),
        }),
        validation: Some(ValidationResult {
            valid: true,
            errors: vec![],
            warnings: vec![ValidationIssue {
                code: Some("TAG_NOT_DIGEST".into()),
                path: Some("dependencies[0].ref".into()),
                message: "use a digest".into(),
            }],
            // The totals of capped lists round-trip through the schema.
            total_errors: Some(0),
            total_warnings: Some(1),
        }),
        total_findings: Some(1),
        findings: vec![FindingStatus {
            code: "INTERFACE_ABSENT".into(),
            severity: Severity::Error,
            category: "RuntimeDrift".into(),
            subject: Some("interface/http-api".into()),
            contract_path: Some("interfaces[name=http-api]".into()),
            message: "interface \"http-api\" is not available".into(),
            evidence_refs: vec![EvidenceRefStatus {
                source: "k8s".into(),
                observed_at: "2026-08-22T21:31:04Z".into(),
                collector: Some("k8s-observer+ebpf".into()),
                detected_at: Some("2026-08-22T21:31:04Z".into()),
            }],
        }],
        resources: Some(ResourcesStatus {
            service: Some(ResourceStatus {
                name: "orders".into(),
                kind: None,
                exists: true,
            }),
            workload: Some(ResourceStatus {
                name: "orders".into(),
                kind: Some("Deployment".into()),
                exists: true,
            }),
        }),
        interfaces: vec![InterfaceInfo {
            name: "http-api".into(),
            interface_type: InterfaceType::Openapi,
            r#ref: Some("api/openapi.yaml".into()),
            visibility: Some("public".into()),
        }],
        capabilities: Some(vec![CapabilityInfo {
            capability_type: "health".into(),
            r#ref: None,
        }]),
        configurations: Some(vec![ConfigurationInfo {
            name: "default".into(),
            has_schema: true,
            r#ref: None,
            value_keys: vec!["LOG_LEVEL".into()],
            secret_keys: vec!["DB_PASSWORD".into()],
            overridden_keys: vec!["LOG_LEVEL".into()],
            properties: vec![SchemaProperty {
                key: "LOG_LEVEL".into(),
                value: Some("debug".into()),
                r#type: Some("string".into()),
            }],
        }]),
        dependencies: vec![DependencyInfo {
            name: "db".into(),
            r#ref: "ghcr.io/acme/db-pacto:2.0.0".into(),
            required: true,
            compatibility: Some("^2.0.0".into()),
        }],
        policies: Some(vec![]),
        observed_runtime: Some(ObservedRuntime {
            workload_kind: Some("Deployment".into()),
            deployment_strategy: Some("RollingUpdate".into()),
            pod_management_policy: None,
            termination_grace_period_seconds: Some(30),
            container_images: vec!["acme/orders:1.2.0".into()],
            has_pvc: false,
            has_empty_dir: true,
            health_probe_initial_delay_seconds: Some(5),
            undeclared_peers: Some(vec![pacto_api::UndeclaredPeer {
                kind: pacto_api::UndeclaredPeerKind::Ip,
                name: "203.0.113.7".into(),
                ports: vec![443],
            }]),
            total_undeclared_peers: None,
        }),
        readiness: Some(ReadinessStatus {
            score: 85,
            min_score: 75,
            passing: true,
            total_weight: 100,
            earned_weight: 85,
            expires: Some("2027-03-31".into()),
            expired: false,
            days_remaining: Some(100),
            done_count: 2,
            partial_count: 1,
            not_done_count: 0,
            deferred_count: 0,
            revisions: vec![ReadinessRevision {
                date: "2026-01-01".into(),
                version: "1.2.0".into(),
                author: "j.doe".into(),
                description: "first".into(),
            }],
            claims: vec![ClaimStatus {
                id: "runbook".into(),
                claim_type: "document".into(),
                category: Some("documentation".into()),
                status: ClaimState::Partial,
                evidence: Some("docs/runbook.md".into()),
                description: None,
                weight: 30,
                earned_weight: 15,
                excluded: false,
            }],
        }),
        metadata: [("tier".to_owned(), "1".to_owned())].into(),
        conditions: vec![Condition {
            type_: "ContractValid".into(),
            status: "True".into(),
            reason: "Parsed".into(),
            message: "Contract orders v1.2.0 is valid".into(),
            last_transition_time: t(10),
            observed_generation: Some(1),
        }],
        current_revision: Some("orders-1-2-0-abcdef1".into()),
        last_reconciled_at: Some(t(20)),
        observed_generation: Some(1),
    }
}

fn pacto(name: &str, spec: PactoSpec) -> Pacto {
    PactoBuilder::spec(name, spec).label("app", name).build()
}

async fn start() -> ControlPlane {
    pacto_testenv::bins::require_kubernetes();
    let options = ControlPlaneOptions::default().with_crds(pacto_api::crdgen::checked_in_paths());
    ControlPlane::start(options)
        .await
        .expect("start etcd + kube-apiserver (binaries: scripts/install-deps.sh)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_install_and_objects_round_trip_through_the_api_server() -> anyhow::Result<()> {
    let cp = start().await;
    let ns = cp.create_namespace("api").await?;
    let client = cp.client()?;
    let pactos: Api<Pacto> = Api::namespaced(client.clone(), &ns);

    // --- spec defaulting: checkIntervalSeconds defaults to 300 on the server
    let reference = pactos
        .create(
            &PostParams::default(),
            &pacto(
                "lib",
                PactoSpec {
                    contract_ref: ContractRef {
                        inline: Some("pactoVersion: \"2.0\"\n".into()),
                        ..ContractRef::default()
                    },
                    target: None,
                    overrides: None,
                    check_interval_seconds: None,
                },
            ),
        )
        .await?;
    assert_eq!(reference.spec.check_interval_seconds, Some(300));
    assert!(reference.spec.is_reference());

    // --- a full spec survives unchanged (nothing pruned)
    let spec = PactoSpec {
        contract_ref: ContractRef {
            oci: Some("oci://ghcr.io/acme/orders-pacto:1.2.0".into()),
            inline: None,
            pull_secret_ref: Some("regcred".into()),
        },
        target: Some(TargetRef {
            service_name: Some("orders".into()),
            workload_ref: Some(WorkloadRef {
                name: "orders".into(),
                kind: Some(WorkloadKind::StatefulSet),
            }),
            interface_bindings: vec![
                InterfaceBinding {
                    interface: "http-api".into(),
                    service_port: IntOrString::String("http".into()),
                },
                InterfaceBinding {
                    interface: "grpc-api".into(),
                    service_port: IntOrString::Int(9090),
                },
            ],
            config_bindings: vec![ConfigBinding {
                configuration: "default".into(),
                kind: ConfigBindingKind::ConfigMap,
                name: "orders-config".into(),
                key: Some("config.yaml".into()),
                format: Some(ConfigFormat::Yaml),
            }],
        }),
        overrides: Some(ContractOverrides {
            configurations: vec![ConfigurationOverride {
                name: "default".into(),
                values: [("LOG_LEVEL".to_owned(), "debug".to_owned())].into(),
            }],
        }),
        check_interval_seconds: Some(60),
    };
    let created = pactos
        .create(&PostParams::default(), &pacto("orders", spec.clone()))
        .await?;
    assert_eq!(created.spec, spec);
    assert!(created.status.is_none(), "status is ignored on create");

    // --- the status subresource: a full status round-trips unpruned
    let status = full_status();
    let patched = pactos
        .patch_status(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await?;
    assert_eq!(patched.status.as_ref(), Some(&status));
    let read = pactos.get("orders").await?;
    assert_eq!(read.status.as_ref(), Some(&status));
    assert_eq!(read.spec, spec, "a status write leaves the spec alone");
    // spec writes through the main resource do not touch status
    let mut changed = read.clone();
    changed.spec.check_interval_seconds = Some(120);
    changed.status = None;
    let replaced = pactos
        .replace("orders", &PostParams::default(), &changed)
        .await?;
    assert_eq!(replaced.status.as_ref(), Some(&status));
    assert_eq!(replaced.spec.check_interval_seconds, Some(120));

    // --- validation by the API server
    let rejections: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "interval below minimum",
            serde_json::json!({"contractRef": {"inline": "x"}, "checkIntervalSeconds": 10}),
            "checkIntervalSeconds",
        ),
        (
            "unknown workload kind",
            serde_json::json!({"contractRef": {"inline": "x"}, "target": {"workloadRef": {"name": "w", "kind": "DaemonSet"}}}),
            "kind",
        ),
        (
            "missing contractRef",
            serde_json::json!({"target": {"serviceName": "x"}}),
            "contractRef",
        ),
        (
            "empty override values",
            serde_json::json!({"contractRef": {"inline": "x"}, "overrides": {"configurations": [{"name": "a", "values": {}}]}}),
            "values",
        ),
        (
            "config binding format",
            serde_json::json!({"contractRef": {"inline": "x"}, "target": {"configBindings": [{"configuration": "c", "kind": "ConfigMap", "name": "n", "format": "toml"}]}}),
            "format",
        ),
    ];
    let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::erase::<Pacto>(&()),
    );
    for (i, (label, spec, field)) in rejections.into_iter().enumerate() {
        let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "pacto.trianalab.io/v1alpha1",
            "kind": "Pacto",
            "metadata": {"name": format!("bad-{i}")},
            "spec": spec,
        }))?;
        let err = raw
            .create(&PostParams::default(), &obj)
            .await
            .expect_err(label);
        assert!(err.to_string().contains(field), "{label}: {err}");
    }

    // --- PactoRevision with status
    let revisions: Api<PactoRevision> = Api::namespaced(client.clone(), &ns);
    let mut revision = PactoRevision::new(
        "orders-1-2-0-abcdef1",
        PactoRevisionSpec {
            version: "1.2.0".into(),
            source: RevisionSource {
                oci: Some("ghcr.io/acme/orders-pacto:1.2.0".into()),
                digest: Some("sha256:abc".into()),
                inline: None,
            },
            pacto_ref: "orders".into(),
            service_name: Some("orders".into()),
        },
    );
    revision.metadata.labels = Some(
        [
            (labels::LABEL_PACTO.to_owned(), "orders".to_owned()),
            (labels::LABEL_VERSION.to_owned(), "1.2.0".to_owned()),
        ]
        .into(),
    );
    revisions.create(&PostParams::default(), &revision).await?;
    let rev_status = PactoRevisionStatus {
        resolved: true,
        contract_hash: Some("ab".repeat(32)),
        created_at: Some(t(5)),
        observed_digest: Some("sha256:abc".into()),
        conditions: vec![],
    };
    let got = revisions
        .patch_status(
            "orders-1-2-0-abcdef1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": rev_status })),
        )
        .await?;
    assert_eq!(got.status, Some(rev_status));
    assert!(
        revisions
            .create(
                &PostParams::default(),
                &PactoRevision::new(
                    "empty-version",
                    PactoRevisionSpec {
                        version: String::new(),
                        source: RevisionSource::default(),
                        pacto_ref: "orders".into(),
                        service_name: None,
                    },
                ),
            )
            .await
            .is_err(),
        "version has minLength 1"
    );

    // --- NodeRuntimeObservation with status (server-side apply, as the agent does)
    let nros: Api<NodeRuntimeObservation> = Api::namespaced(client.clone(), &ns);
    let mut nro = NodeRuntimeObservation::new(
        "node-a",
        NodeRuntimeObservationSpec {
            node_name: "node-a".into(),
        },
    );
    nro.metadata = ObjectMeta {
        name: Some("node-a".into()),
        ..ObjectMeta::default()
    };
    nros.create(&PostParams::default(), &nro).await?;
    let nro_status = NodeRuntimeObservationStatus {
        last_published: Some(t(30)),
        agent_version: Some("0.1.0".into()),
        kernel: Some(KernelInfo {
            release: "6.8.0".into(),
            btf: true,
        }),
        collection: Some(CollectionStatus {
            state: CollectionState::Running,
            reason: None,
            message: None,
        }),
        report_stream: None,
        pod_count: 1,
        pods: vec![PodObservation {
            uid: "1b4e28ba-2fa1-11d2-883f-0016d3cca427".into(),
            namespace: ns.clone(),
            name: "orders-0".into(),
            coverage: Some(PodCoverage::Complete),
            partial_reason: None,
            listener_coverage: Some(PodCoverage::Complete),
            listener_partial_reason: None,
            host_network: false,
            listeners: vec![Listener {
                protocol: Protocol::Tcp,
                port: 8080,
                address: Some("0.0.0.0".into()),
            }],
            connections: vec![Connection {
                direction: Direction::Outbound,
                protocol: Protocol::Tcp,
                peer_ip: "10.96.0.12".into(),
                peer_port: 5432,
                first_seen: Some(t(1)),
                last_seen: Some(t(29)),
                count: 12,
            }],
        }],
        truncated: false,
    };
    let applied = nros
        .patch_status(
            "node-a",
            &PatchParams::apply("pacto-node-agent").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "pacto.trianalab.io/v1alpha1",
                "kind": "NodeRuntimeObservation",
                "status": nro_status,
            })),
        )
        .await?;
    assert_eq!(applied.status, Some(nro_status));

    // --- kubectl sees the printer columns and can explain the fields
    let out = cp
        .kubectl()?
        .args(["get", "pactos", "-n", &ns, "orders"])
        .output()?;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for header in [
        "STATUS",
        "SERVICE",
        "VERSION",
        "ERRORS",
        "WARNINGS",
        "LAST RECONCILED",
        "AGE",
    ] {
        assert!(table.contains(header), "{header} missing in\n{table}");
    }
    assert!(
        table.contains("NonCompliant") && table.contains("1.2.0"),
        "{table}"
    );

    // `kubectl explain` reads the published OpenAPI, which lags CRD establishment a little
    eventually(
        "kubectl explain to show the field description",
        Duration::from_secs(30),
        || async {
            let out = cp
                .kubectl()
                .expect("kubectl")
                .args(["explain", "pacto.spec.target.workloadRef.kind"])
                .output()
                .expect("run kubectl explain");
            let text = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && text.contains("WORKLOAD_MISMATCH") {
                Ok(())
            } else {
                Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
            }
        },
    )
    .await;
    Ok(())
}
