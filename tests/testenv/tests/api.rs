//! The real kube-apiserver behaves like one: watches drive a kube-runtime Controller, status
//! server-side apply with field managers, optimistic concurrency, printer columns, events, leases,
//! RBAC, and CEL admission policies.
// Helper functions outside #[test] fns unwrap too: in a test a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Widget, WidgetStatus, cluster, eventually, run, widget};
use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::watcher;
use kube::{Api, Client, Resource as _, ResourceExt as _};
use serde_json::json;
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

struct Ctx {
    client: Client,
    seen: mpsc::UnboundedSender<(String, String, i64)>,
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let ns = w.namespace().unwrap_or_default();
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, "testenv.pacto.trianalab.io/cleanup", w, |event| async {
        match event {
            FinalizerEvent::Apply(w) => {
                let generation = w.metadata.generation.unwrap_or_default();
                let status = json!({
                    "apiVersion": "testenv.pacto.trianalab.io/v1",
                    "kind": "Widget",
                    "status": { "phase": "Reconciled", "observedGeneration": generation, "seen": w.spec.size }
                });
                api.patch_status(
                    &w.name_any(),
                    &PatchParams::apply("widget-controller").force(),
                    &Patch::Apply(&status),
                )
                .await?;
                let _ = ctx.seen.send(("apply".into(), w.name_any(), generation));
                Ok(Action::await_change())
            }
            FinalizerEvent::Cleanup(w) => {
                let _ = ctx.seen.send(("cleanup".into(), w.name_any(), 0));
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_reconciles_create_update_and_delete() {
    let cp = cluster().await;
    let ns = cp.create_namespace("ctrl").await.unwrap();
    let client = cp.client().unwrap();
    let api: Api<Widget> = Api::namespaced(client.clone(), &ns);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        seen: tx,
    });
    let controller = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .run(
                reconcile,
                |_, _, _| Action::requeue(Duration::from_millis(200)),
                ctx,
            )
            .for_each(|_| async {}),
    );

    // Created after the controller started: only a watch can deliver it.
    api.create(&PostParams::default(), &widget("w1", 3))
        .await
        .unwrap();
    let mut next = async || {
        tokio::time::timeout(TIMEOUT, rx.recv())
            .await
            .expect("reconcile within the deadline")
            .expect("channel open")
    };
    assert_eq!(next().await, ("apply".into(), "w1".into(), 1));
    let w = api.get("w1").await.unwrap();
    assert_eq!(
        w.status,
        Some(WidgetStatus {
            phase: Some("Reconciled".into()),
            observed_generation: Some(1),
            seen: Some(3)
        })
    );
    assert!(
        w.finalizers()
            .iter()
            .any(|f| f == "testenv.pacto.trianalab.io/cleanup")
    );

    // Update of the spec: generation 2 is reconciled.
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 5}})),
    )
    .await
    .unwrap();
    loop {
        let (kind, name, generation) = next().await;
        assert_eq!((kind.as_str(), name.as_str()), ("apply", "w1"));
        if generation == 2 {
            break;
        }
    }
    let w = api.get("w1").await.unwrap();
    assert_eq!(w.status.unwrap().seen, Some(5));

    // Delete: the finalizer's cleanup runs, then the object is gone.
    api.delete("w1", &DeleteParams::default()).await.unwrap();
    loop {
        let (kind, name, _) = next().await;
        if kind == "cleanup" {
            assert_eq!(name, "w1");
            break;
        }
    }
    eventually("w1 removed", TIMEOUT, || {
        let api = api.clone();
        async move { api.get_opt("w1").await.unwrap().is_none().then_some(()) }
    })
    .await;
    controller.abort();
}

#[tokio::test]
async fn status_server_side_apply_records_field_managers_and_conflicts() {
    let cp = cluster().await;
    let ns = cp.create_namespace("ssa").await.unwrap();
    let api: Api<Widget> = Api::namespaced(cp.client().unwrap(), &ns);
    api.create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();

    let status = |phase: &str| {
        json!({
            "apiVersion": "testenv.pacto.trianalab.io/v1",
            "kind": "Widget",
            "status": { "phase": phase }
        })
    };
    let w = api
        .patch_status(
            "w",
            &PatchParams::apply("writer-a"),
            &Patch::Apply(status("Ready")),
        )
        .await
        .unwrap();
    assert_eq!(w.status.unwrap().phase.as_deref(), Some("Ready"));
    let managers = w.metadata.managed_fields.unwrap();
    let entry = managers
        .iter()
        .find(|m| m.manager.as_deref() == Some("writer-a"))
        .expect("writer-a in managedFields");
    assert_eq!(entry.operation.as_deref(), Some("Apply"));
    assert_eq!(entry.subresource.as_deref(), Some("status"));

    // Another manager applying the same field without force: 409 conflict naming the owner.
    let err = api
        .patch_status(
            "w",
            &PatchParams::apply("writer-b"),
            &Patch::Apply(status("Failed")),
        )
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409, "{s:?}");
            assert!(s.message.contains("writer-a"), "{}", s.message);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // With force it takes ownership.
    let w = api
        .patch_status(
            "w",
            &PatchParams::apply("writer-b").force(),
            &Patch::Apply(status("Failed")),
        )
        .await
        .unwrap();
    assert_eq!(w.status.unwrap().phase.as_deref(), Some("Failed"));
    // The spec is untouched by status writes.
    assert_eq!(api.get("w").await.unwrap().spec.size, 1);
}

#[tokio::test]
async fn stale_resource_version_update_gets_409() {
    let cp = cluster().await;
    let ns = cp.create_namespace("rv").await.unwrap();
    let api: Api<Widget> = Api::namespaced(cp.client().unwrap(), &ns);
    let created = api
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();

    let mut fresh = created.clone();
    fresh.spec.size = 2;
    let updated = api
        .replace("w", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(updated.resource_version(), created.resource_version());

    let mut stale = created;
    stale.spec.size = 3;
    match api.replace("w", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
        }
        other => panic!("expected 409, got {other:?}"),
    }
    assert_eq!(api.get("w").await.unwrap().spec.size, 2);
}

#[tokio::test]
async fn kubectl_shows_printer_columns_and_events() {
    let cp = cluster().await;
    let ns = cp.create_namespace("kubectl").await.unwrap();
    let client = cp.client().unwrap();
    let api: Api<Widget> = Api::namespaced(client.clone(), &ns);
    let w = api
        .create(&PostParams::default(), &widget("gadget", 7))
        .await
        .unwrap();
    api.patch_status(
        "gadget",
        &PatchParams::apply("t").force(),
        &Patch::Apply(json!({
            "apiVersion": "testenv.pacto.trianalab.io/v1", "kind": "Widget",
            "status": { "phase": "Shiny" }
        })),
    )
    .await
    .unwrap();

    let mut get = cp.kubectl().unwrap();
    get.args(["get", "widgets", "-n", &ns]);
    let out = run(get);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "PHASE", "AGE"], "{out}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["gadget", "7", "Shiny"], "{out}");

    let recorder = Recorder::new(client, Reporter::from("widget-controller"));
    recorder
        .publish(
            &Event {
                type_: EventType::Warning,
                reason: "TooShiny".into(),
                note: Some("the gadget reflects too much light".into()),
                action: "Inspect".into(),
                secondary: None,
            },
            &w.object_ref(&()),
        )
        .await
        .unwrap();
    let mut describe = cp.kubectl().unwrap();
    describe.args(["describe", "widget", "gadget", "-n", &ns]);
    let out = run(describe);
    let events = out
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{out}"));
    assert!(events.contains("Warning"), "{out}");
    assert!(events.contains("TooShiny"), "{out}");
    assert!(
        events.contains("the gadget reflects too much light"),
        "{out}"
    );
}

#[tokio::test]
async fn lease_is_acquired_renewed_and_guarded() {
    let cp = cluster().await;
    let ns = cp.create_namespace("lease").await.unwrap();
    let api: Api<Lease> = Api::namespaced(cp.client().unwrap(), &ns);
    let lease = |holder: &str| Lease {
        metadata: ObjectMeta {
            name: Some("leader".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(Timestamp::now())),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    let acquired = api
        .create(&PostParams::default(), &lease("a"))
        .await
        .unwrap();
    // A second candidate cannot create it again.
    match api.create(&PostParams::default(), &lease("b")).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 409),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    let first_renew = acquired.spec.as_ref().unwrap().renew_time.clone().unwrap();
    // Renew (optimistic concurrency on resourceVersion).
    let mut renew = acquired.clone();
    renew.spec.as_mut().unwrap().renew_time = Some(MicroTime(
        first_renew.0 + std::time::Duration::from_millis(1500),
    ));
    let renewed = api
        .replace("leader", &PostParams::default(), &renew)
        .await
        .unwrap();
    assert_ne!(renewed.resource_version(), acquired.resource_version());
    let spec = renewed.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert!(spec.renew_time.unwrap().0 > first_renew.0);
    // A takeover based on the pre-renewal version loses.
    let mut takeover = acquired;
    takeover.spec.as_mut().unwrap().holder_identity = Some("b".into());
    match api
        .replace("leader", &PostParams::default(), &takeover)
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 409),
        other => panic!("expected 409, got {other:?}"),
    }
}

#[tokio::test]
async fn rbac_refuses_restricted_identities_until_granted() {
    let cp = cluster().await;
    let ns = cp.create_namespace("rbac").await.unwrap();
    let admin: Api<Widget> = Api::namespaced(cp.client().unwrap(), &ns);
    admin
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();

    let sa: Api<Widget> =
        Api::namespaced(cp.service_account_client(&ns, "reader").await.unwrap(), &ns);
    let user: Api<Widget> = Api::namespaced(
        cp.user_client("alice", &["pacto:viewers"]).await.unwrap(),
        &ns,
    );
    for (who, api) in [("service account", &sa), ("user", &user)] {
        match api.list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 403, "{who}: {s:?}");
                assert_eq!(s.reason, "Forbidden");
            }
            other => panic!("{who}: expected 403, got {other:?}"),
        }
    }
    assert_eq!(
        admin
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // Grant read access to the service account and to the group.
    let client = cp.client().unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "widget-reader" },
        "rules": [{ "apiGroups": ["testenv.pacto.trianalab.io"], "resources": ["widgets"], "verbs": ["get", "list", "watch"] }]
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "widget-reader" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "widget-reader" },
        "subjects": [
            { "kind": "ServiceAccount", "name": "reader", "namespace": ns },
            { "kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "pacto:viewers" }
        ]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client, &ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    for api in [&sa, &user] {
        let listed = eventually("RBAC grant to take effect", TIMEOUT, || async {
            api.list(&ListParams::default()).await.ok()
        })
        .await;
        assert_eq!(listed.items.len(), 1);
    }
    // Reading is granted, writing still is not.
    match sa.create(&PostParams::default(), &widget("x", 1)).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403),
        other => panic!("expected 403, got {other:?}"),
    }
}

#[tokio::test]
async fn validating_admission_policy_rejects_writes_with_cel() {
    let cp = cluster().await;
    let ns = cp.create_namespace("vap").await.unwrap();
    let client = cp.client().unwrap();
    Api::<Namespace>::all(client.clone())
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"vap-test": &ns}}})),
        )
        .await
        .unwrap();
    let policy_name = format!("max-size-{ns}");
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": { "name": policy_name },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [{
                "apiGroups": ["testenv.pacto.trianalab.io"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]
            }]},
            "validations": [{
                "expression": "object.spec.size <= 10",
                "messageExpression": "'size ' + string(object.spec.size) + ' exceeds 10'",
                "reason": "Invalid"
            }]
        }
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": { "name": policy_name },
        "spec": {
            "policyName": policy_name,
            "validationActions": ["Deny"],
            "matchResources": { "namespaceSelector": { "matchLabels": { "vap-test": ns } } }
        }
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let api: Api<Widget> = Api::namespaced(client.clone(), &ns);
    // Policies are loaded asynchronously: retry a too-large widget until the policy rejects it.
    let mut attempt = 0;
    let rejection = eventually("the policy to reject a write", TIMEOUT, || {
        attempt += 1;
        let api = api.clone();
        let name = format!("big-{attempt}");
        async move {
            match api.create(&PostParams::default(), &widget(&name, 20)).await {
                Ok(_) => {
                    api.delete(&name, &DeleteParams::default()).await.unwrap();
                    None
                }
                Err(kube::Error::Api(s)) => Some(s),
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
    })
    .await;
    assert_eq!(rejection.code, 422, "{rejection:?}");
    assert!(
        rejection.message.contains("size 20 exceeds 10"),
        "{}",
        rejection.message
    );
    assert!(
        rejection.message.contains(&policy_name),
        "{}",
        rejection.message
    );
    // A valid write passes, and the policy does not apply outside the selected namespace.
    api.create(&PostParams::default(), &widget("small", 10))
        .await
        .unwrap();
    let other = cp.create_namespace("vap-other").await.unwrap();
    Api::<Widget>::namespaced(client, &other)
        .create(&PostParams::default(), &widget("big", 20))
        .await
        .unwrap();
}
