//! What the status-writer's Pacto cache keeps (docs/design/status.md#what-the-caches-keep):
//! every field a reconcile, the triggers or the revision mirror read (metadata, spec, the whole
//! status), and not the managed fields or the `kubectl apply` copy, which none of them reads and
//! which would otherwise be most of each cached object (a managed-fields entry per writer, ours
//! listing every status field).

use pacto_api::Pacto;

/// The annotation `kubectl apply` stores: a full copy of the applied object.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no reader of the Pacto cache reads, before the object enters the store.
pub(crate) fn trim_pacto(pacto: &mut Pacto) {
    pacto.metadata.managed_fields = None;
    if let Some(annotations) = pacto.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// The mirror's copy of a Pacto: as [`trim_pacto`], and without the status, which the mirror
/// never reads (docs/design/status.md#what-the-caches-keep).
pub(crate) fn trim_pacto_for_mirror(pacto: &mut Pacto) {
    trim_pacto(pacto);
    pacto.status = None;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::ResourceExt;
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::reflector::ObjectRef;
    use pacto_api::PactoStatus;
    use pacto_api::testing::PactoBuilder;
    use pacto_testenv::ControlPlaneOptions;

    use super::*;

    const DEADLINE: Duration = Duration::from_secs(30);

    fn full() -> Pacto {
        let mut pacto = PactoBuilder::inline("orders", "x")
            .namespace("shop")
            .build();
        pacto.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        pacto.metadata.annotations = Some(BTreeMap::from([
            (LAST_APPLIED.to_owned(), "{…}".to_owned()),
            ("team".to_owned(), "a".to_owned()),
        ]));
        pacto.status = Some(PactoStatus {
            contract_version: Some("1.0.0".into()),
            ..PactoStatus::default()
        });
        pacto
    }

    #[test]
    fn the_cache_keeps_spec_status_and_other_annotations_only() {
        let mut pacto = full();
        trim_pacto(&mut pacto);
        assert_eq!(pacto.metadata.managed_fields, None);
        assert_eq!(
            pacto.metadata.annotations,
            Some(BTreeMap::from([("team".to_owned(), "a".to_owned())]))
        );
        assert_eq!(pacto.spec, full().spec);
        assert_eq!(pacto.status, full().status, "a reconcile reads the status");
    }

    #[test]
    fn the_mirror_keeps_no_status() {
        let mut pacto = full();
        trim_pacto_for_mirror(&mut pacto);
        assert_eq!(pacto.metadata.managed_fields, None);
        assert_eq!(pacto.status, None);
        assert_eq!(pacto.spec, full().spec);
    }

    /// Backends nobody answers: the Pacto watch does not call them.
    fn unreachable_backends() -> crate::Backends {
        use pacto_runtime::balance::BalanceConfig;
        use pacto_runtime::grpc::{self, ChannelSpec, Transport};
        let channel = || {
            let spec = ChannelSpec {
                address: "http://127.0.0.1:1".to_owned(),
                server_name: None,
                connect_timeout: Duration::from_secs(1),
                request_timeout: Duration::from_secs(1),
            };
            grpc::balanced_channel(&spec, &Transport::Insecure, BalanceConfig::new("test"))
                .expect("a balanced channel")
        };
        crate::Backends::new(
            channel(),
            channel(),
            channel(),
            pacto_runtime::grpc::RetryPolicy {
                max_retries: 0,
                min_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(1),
            },
        )
    }

    /// The controller's store, filled by the real watch ([`crate::triggers::pactos`]) of a
    /// real kube-apiserver, holds Pactos without managed fields or the last-applied copy, and
    /// with their status: after the initial list and after a watch event. The API server's own
    /// copy is checked to carry both, so the test cannot pass on objects that never had them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_controller_store_holds_pactos_without_managed_fields() {
        pacto_testenv::controlplane::ensure_crypto_provider();
        let cp = pacto_testenv::shared(|| {
            ControlPlaneOptions::default().with_crds(pacto_api::crdgen::checked_in_paths())
        })
        .await
        .expect("start etcd + kube-apiserver (scripts/k8s-binaries.sh)");
        let client = cp.client().unwrap();
        let ns = cp.create_namespace("cached").await.unwrap();
        let api: Api<Pacto> = Api::namespaced(client.clone(), &ns);

        // As `kubectl apply --server-side` would, plus the client-side apply annotation, then a
        // status written by a second field manager: two managed-fields entries.
        let mut pacto = PactoBuilder::inline("orders", "x").namespace(&ns).build();
        pacto.metadata.annotations = Some(BTreeMap::from([
            (LAST_APPLIED.to_owned(), r#"{"kind":"Pacto"}"#.to_owned()),
            ("team".to_owned(), "a".to_owned()),
        ]));
        let status = serde_json::json!({ "contractVersion": "1.0.0" });
        let served = pacto_api::testing::apply_as_two_managers(&api, &pacto, status)
            .await
            .unwrap();
        assert!(served.annotations().contains_key(LAST_APPLIED));

        let ctx = Arc::new(crate::Context::new(
            client,
            unreachable_backends(),
            crate::Gauges::new(),
            None,
            None,
        ));
        let (store, stream) = crate::triggers::pactos(api.clone(), ctx);
        let driver = tokio::spawn(stream.for_each(|_| futures::future::ready(())));
        tokio::time::timeout(DEADLINE, store.wait_until_ready())
            .await
            .expect("the initial list within the deadline")
            .unwrap();
        let key = ObjectRef::new("orders").within(&ns);
        let listed = store.get(&key).expect("the listed Pacto is cached");
        assert_eq!(listed.metadata.managed_fields, None);
        assert_eq!(
            listed.metadata.annotations,
            Some(BTreeMap::from([("team".to_owned(), "a".to_owned())]))
        );
        assert_eq!(listed.spec, served.spec);
        assert_eq!(listed.status, served.status, "a reconcile reads the status");
        assert_eq!(
            listed.metadata.resource_version,
            served.metadata.resource_version
        );

        // A watch event (not the list) goes through the same trimming.
        api.patch(
            "orders",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { "tier": "gold" } } })),
        )
        .await
        .unwrap();
        let store_ = store.clone();
        let updated =
            pacto_runtime::testing::eventually("the label in the store", DEADLINE, || {
                let found = store_.get(&key).filter(|p| p.labels().contains_key("tier"));
                async move { found }
            })
            .await;
        assert_eq!(updated.metadata.managed_fields, None);
        assert!(!updated.annotations().contains_key(LAST_APPLIED));
        assert_eq!(updated.status, served.status);
        driver.abort();
    }
}
