//! Against a real kube-apiserver (pacto-testenv) with the Pacto CRDs and minimal Prometheus
//! Operator and cert-manager CRD fixtures installed:
//! - everything `helmfile template` renders, per environment, passes a server-side dry-run apply;
//! - RBAC: the rendered (Cluster)Roles and bindings are applied for real, then each service's
//!   ServiceAccount does what its job needs and is refused (403) anything else;
//! - the node agent's admission policy: a token bound to a pod on node N writes only the Lease and
//!   NodeRuntimeObservation named N.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    coordination::v1::Lease,
    core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, Service, ServiceAccount},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client,
    api::{
        ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    },
    core::ObjectMeta,
};
use pacto_chart_tests::{Tools, documents, repo_root};
use pacto_runtime::testing::within;
use pacto_testenv::{ControlPlane, ControlPlaneOptions};

const DEADLINE: Duration = Duration::from_secs(20);

fn crd_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files: Vec<PathBuf> = [
        "pacto.trianalab.io_pactos.yaml",
        "pacto.trianalab.io_pactorevisions.yaml",
        "pacto.trianalab.io_noderuntimeobservations.yaml",
    ]
    .iter()
    .map(|f| root.join("charts/pacto-crds/templates").join(f))
    .collect();
    files.push(root.join("tests/charts/fixtures/crds/monitoring.coreos.com.yaml"));
    files.push(root.join("tests/charts/fixtures/crds/cert-manager.io.yaml"));
    files
}

async fn cluster() -> &'static ControlPlane {
    pacto_testenv::controlplane::ensure_crypto_provider();
    pacto_testenv::shared(|| {
        crd_files().into_iter().fold(
            ControlPlaneOptions::default(),
            ControlPlaneOptions::with_crd,
        )
    })
    .await
    .expect("control plane")
}

async fn ensure_namespace(client: &Client, name: &str) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e).context(format!("create namespace {name}")),
    }
}

fn kubectl_apply(cp: &ControlPlane, file: &std::path::Path, dry_run: bool) -> Result<String> {
    let mut cmd = cp.kubectl()?;
    cmd.args([
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=pacto-chart-tests",
        "-f",
    ])
    .arg(file);
    if dry_run {
        cmd.arg("--dry-run=server");
    }
    let out = pacto_chart_tests::run(&mut cmd)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_helmfile_renders_passes_a_server_side_dry_run() -> Result<()> {
    let cp = cluster().await;
    let client = cp.client()?;
    let tools = Tools::new()?;
    for ns in ["pacto-operator-system", "pacto-node-agent"] {
        ensure_namespace(&client, ns).await?;
    }
    let dir = tempfile::tempdir()?;
    for env in ["local", "production"] {
        let text = tools.run(
            "helmfile",
            [
                "--environment",
                env,
                "template",
                "--concurrency",
                "1",
                "--skip-deps",
            ],
        )?;
        let count = documents(&text)?.len();
        let file = dir.path().join(format!("{env}.yaml"));
        std::fs::write(&file, &text)?;
        let out = kubectl_apply(cp, &file, true)?;
        let applied = out
            .lines()
            .filter(|l| l.contains("(server dry run)"))
            .count();
        ensure!(
            applied == count,
            "{env}: {count} objects rendered, {applied} accepted by the dry run:\n{out}"
        );
        if env == "production" {
            for kind in [
                "servicemonitor",
                "prometheusrule",
                "certificate",
                "issuer",
                "networkpolicy",
            ] {
                ensure!(
                    out.lines().any(|l| l.starts_with(&format!("{kind}."))),
                    "production renders no {kind}:\n{out}"
                );
            }
        }
    }
    Ok(())
}

/// Whether a request passed authorisation: success, or a failure that only happens after
/// authorisation (not found, conflict, invalid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Allowed,
    Forbidden,
}

struct Checks {
    failures: Vec<String>,
    done: usize,
}

impl Checks {
    fn check<T>(&mut self, who: &str, what: &str, want: Want, result: Result<T, kube::Error>) {
        self.done += 1;
        let got = match result.map(drop) {
            Ok(()) => Ok(Want::Allowed),
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(Want::Forbidden),
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => Ok(Want::Allowed),
            Err(e) => Err(e.to_string()),
        };
        match got {
            Ok(got) if got == want => {}
            Ok(got) => self
                .failures
                .push(format!("{who}: {what}: expected {want:?}, got {got:?}")),
            Err(e) => self
                .failures
                .push(format!("{who}: {what}: unexpected error {e}")),
        }
    }
}

fn pacto_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("pacto.trianalab.io", "v1alpha1", "Pacto"),
        "pactos",
    )
}

fn revision_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("pacto.trianalab.io", "v1alpha1", "PactoRevision"),
        "pactorevisions",
    )
}

fn observation_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("pacto.trianalab.io", "v1alpha1", "NodeRuntimeObservation"),
        "noderuntimeobservations",
    )
}

fn service_monitor_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    )
}

fn dynamic(resource: &ApiResource, name: &str, body: serde_json::Value) -> Result<DynamicObject> {
    let mut object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": { "name": name },
    }))?;
    object.data = body;
    Ok(object)
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    }
}

/// Waits until the RBAC authoriser has seen the bindings: `probe` stops returning 403.
async fn wait_authorised<F, Fut, T>(what: &str, probe: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let what = format!("{what} to be authorised");
    within(&what, DEADLINE, || async {
        match probe().await {
            Err(kube::Error::Api(s)) if s.code == 403 => Err(s.message),
            _ => Ok(()),
        }
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_service_account_gets_exactly_its_rights() -> Result<()> {
    let cp = cluster().await;
    let admin = cp.client()?;
    let tools = Tools::new()?;
    let ns = cp.create_namespace("pacto-rbac").await?;
    let agents = cp.create_namespace("pacto-agents").await?;
    let team = cp.create_namespace("team").await?;

    // Render each chart's RBAC into `ns` and apply it for real.
    let dir = tempfile::tempdir()?;
    for chart in pacto_chart_tests::SERVICE_CHARTS {
        let mut args = vec![
            "template".to_owned(),
            (*chart).to_owned(),
            format!("charts/{chart}"),
            "--namespace".to_owned(),
            ns.clone(),
        ];
        if matches!(*chart, "pacto-observer" | "pacto-status-writer") {
            args.extend([
                "--set".to_owned(),
                "nodeAgent.enabled=true".to_owned(),
                "--set".to_owned(),
                format!("nodeAgent.namespace={agents}"),
            ]);
        }
        let text = tools.run("helm", &args)?;
        let rbac: Vec<serde_json::Value> = documents(&text)?
            .into_iter()
            .filter(|d| {
                matches!(
                    d["kind"].as_str(),
                    Some(
                        "ServiceAccount"
                            | "Role"
                            | "ClusterRole"
                            | "RoleBinding"
                            | "ClusterRoleBinding"
                    )
                )
            })
            .collect();
        let file = dir.path().join(format!("{chart}.yaml"));
        let yaml: Vec<String> = rbac
            .iter()
            .map(serde_norway::to_string)
            .collect::<Result<_, _>>()?;
        std::fs::write(&file, yaml.join("---\n"))?;
        kubectl_apply(cp, &file, false)?;
    }

    // Fixtures, created by the admin.
    Api::<Secret>::namespaced(admin.clone(), &team)
        .create(
            &PostParams::default(),
            &Secret {
                metadata: meta("pull"),
                string_data: Some([("token".to_owned(), "s3cret".to_owned())].into()),
                ..Secret::default()
            },
        )
        .await?;
    let pactos = Api::<DynamicObject>::namespaced_with(admin.clone(), &team, &pacto_resource());
    pactos
        .create(
            &PostParams::default(),
            &dynamic(
                &pacto_resource(),
                "svc",
                serde_json::json!({
                    "spec": { "contractRef": { "oci": "ghcr.io/example/svc-pacto" } }
                }),
            )?,
        )
        .await?;
    Api::<Lease>::namespaced(admin.clone(), &ns)
        .create(
            &PostParams::default(),
            &Lease {
                metadata: meta("someone-else"),
                ..Lease::default()
            },
        )
        .await?;

    let sa = |name: &'static str| {
        let ns = ns.clone();
        async move { cp.service_account_client(&ns, name).await }
    };
    let observer = sa("pacto-observer").await?;
    let resolver = sa("pacto-contract-resolver").await?;
    let evaluator = sa("pacto-evaluator").await?;
    let writer = sa("pacto-status-writer").await?;

    // Wait for the authoriser to see each binding.
    wait_authorised("observer", || {
        let api = Api::<Service>::namespaced(observer.clone(), &team);
        async move { api.list(&ListParams::default()).await.map(drop) }
    })
    .await?;
    wait_authorised("resolver", || {
        let api = Api::<Secret>::namespaced(resolver.clone(), &team);
        async move { api.get("pull").await.map(drop) }
    })
    .await?;
    wait_authorised("status-writer", || {
        let api = Api::<DynamicObject>::namespaced_with(writer.clone(), &team, &pacto_resource());
        async move { api.list(&ListParams::default()).await.map(drop) }
    })
    .await?;
    wait_authorised("status-writer lease", || {
        let api = Api::<Lease>::namespaced(writer.clone(), &ns);
        async move { api.get("pacto-status-writer").await.map(drop) }
    })
    .await?;
    wait_authorised("observer agents", || {
        let api = Api::<Lease>::namespaced(observer.clone(), &agents);
        async move { api.list(&ListParams::default()).await.map(drop) }
    })
    .await?;

    let clients = [
        ("observer", &observer),
        ("contract-resolver", &resolver),
        ("evaluator", &evaluator),
        ("status-writer", &writer),
    ];
    let mut checks = Checks {
        failures: Vec::new(),
        done: 0,
    };
    for row in rbac_matrix(&team, &agents) {
        let client = clients
            .iter()
            .find(|(name, _)| *name == row.who)
            .map(|(_, c)| (*c).clone())
            .context(row.who)?;
        let namespace = match row.scope {
            Scope::Team => Some(team.as_str()),
            Scope::Own => Some(ns.as_str()),
            Scope::Agents => Some(agents.as_str()),
            Scope::All => None,
        };
        let what = format!("{:?} {} ({:?})", row.verb, row.resource.plural, row.scope);
        let result = row.verb.send(client, &row.resource, namespace).await;
        checks.check(row.who, &what, row.want, result);
    }
    ensure!(
        checks.failures.is_empty(),
        "{} of {} RBAC checks failed:\n{}",
        checks.failures.len(),
        checks.done,
        checks.failures.join("\n")
    );
    Ok(())
}

/// Where a request of the RBAC matrix goes.
#[derive(Debug, Clone, Copy)]
enum Scope {
    /// The application namespace (`team`).
    Team,
    /// The service's own release namespace.
    Own,
    /// The node agent's namespace.
    Agents,
    /// All namespaces (a list) or a cluster-scoped object.
    All,
}

/// One request of the RBAC matrix. Bodies are JSON; created objects carry their own name.
#[derive(Debug, Clone)]
enum Verb<'a> {
    Get(&'a str),
    GetMetadata(&'a str),
    List,
    Create(serde_json::Value),
    Patch(&'a str, serde_json::Value),
    PatchStatus(&'a str, serde_json::Value),
    Delete(&'a str),
}

impl Verb<'_> {
    async fn send(
        &self,
        client: Client,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> Result<(), kube::Error> {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        };
        let pp = PatchParams::default();
        match self {
            Self::Get(name) => api.get(name).await.map(drop),
            Self::GetMetadata(name) => api.get_metadata(name).await.map(drop),
            Self::List => api.list(&ListParams::default()).await.map(drop),
            Self::Create(body) => {
                let mut object: DynamicObject =
                    serde_json::from_value(body.clone()).map_err(kube::Error::SerdeError)?;
                object.types = Some(kube::core::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                });
                api.create(&PostParams::default(), &object).await.map(drop)
            }
            Self::Patch(name, body) => api.patch(name, &pp, &Patch::Merge(body)).await.map(drop),
            Self::PatchStatus(name, body) => api
                .patch_status(name, &pp, &Patch::Merge(body))
                .await
                .map(drop),
            Self::Delete(name) => api
                .delete(name, &kube::api::DeleteParams::default())
                .await
                .map(drop),
        }
    }
}

struct Row<'a> {
    who: &'static str,
    want: Want,
    resource: ApiResource,
    scope: Scope,
    verb: Verb<'a>,
}

/// What each service account may and may not do: the observer reads what observation needs (no
/// Secrets, no writes); the resolver GETs pull Secrets only; the evaluator has no rights at all;
/// the status-writer writes Pacto status, revisions, events, its own Lease and the agent
/// namespace's labels, and nothing else.
fn rbac_matrix<'a>(team: &'a str, agents: &'a str) -> Vec<Row<'a>> {
    use Scope::{Agents, All, Own, Team};
    use Verb::{Create, Delete, Get, GetMetadata, List, Patch, PatchStatus};
    use Want::{Allowed, Forbidden};
    let services = ApiResource::erase::<Service>(&());
    let pods = ApiResource::erase::<Pod>(&());
    let slices = ApiResource::erase::<EndpointSlice>(&());
    let deployments = ApiResource::erase::<Deployment>(&());
    let configmaps = ApiResource::erase::<ConfigMap>(&());
    let secrets = ApiResource::erase::<Secret>(&());
    let leases = ApiResource::erase::<Lease>(&());
    let daemonsets = ApiResource::erase::<DaemonSet>(&());
    let nodes = ApiResource::erase::<Node>(&());
    let events = ApiResource::erase::<Event>(&());
    let namespaces = ApiResource::erase::<Namespace>(&());
    let (pactos, revisions) = (pacto_resource(), revision_resource());
    let named = |name: &str| serde_json::json!({ "metadata": { "name": name } });
    let event = |name: &str| {
        serde_json::json!({
            "metadata": { "name": name },
            "involvedObject": {
                "apiVersion": "pacto.trianalab.io/v1alpha1", "kind": "Pacto",
                "name": "svc", "namespace": team,
            },
            "reason": "RevisionCreated", "message": "test", "type": "Normal",
        })
    };
    let status = serde_json::json!({ "status": { "contractStatus": "Unknown" } });
    let holder = serde_json::json!({ "spec": { "holderIdentity": "me" } });
    let privileged = serde_json::json!({ "metadata": { "labels": {
        "pod-security.kubernetes.io/enforce": "privileged" } } });
    let revision = serde_json::json!({
        "metadata": { "name": "svc-1-0-0" },
        "spec": { "pactoRef": "svc", "source": { "oci": "ghcr.io/example/svc-pacto" },
                  "version": "1.0.0" },
    });
    let row = |who, want, resource: &ApiResource, scope, verb| Row {
        who,
        want,
        resource: resource.clone(),
        scope,
        verb,
    };
    let (o, r, e, w) = (
        "observer",
        "contract-resolver",
        "evaluator",
        "status-writer",
    );
    vec![
        row(o, Allowed, &services, Team, List),
        // No Pods and no DaemonSets outside the agents' namespace: the observer reads neither.
        row(o, Forbidden, &pods, All, List),
        row(o, Forbidden, &pods, Team, Get("absent")),
        row(o, Forbidden, &daemonsets, Team, List),
        row(o, Forbidden, &daemonsets, All, List),
        row(o, Allowed, &slices, Team, List),
        row(o, Allowed, &deployments, Team, List),
        row(o, Allowed, &configmaps, Team, Get("absent")),
        row(o, Allowed, &pactos, All, List),
        row(o, Allowed, &observation_resource(), Agents, List),
        row(o, Allowed, &leases, Agents, List),
        row(o, Allowed, &daemonsets, Agents, List),
        row(o, Allowed, &nodes, All, List),
        row(o, Forbidden, &secrets, Team, Get("pull")),
        row(o, Forbidden, &secrets, Team, GetMetadata("pull")),
        row(o, Forbidden, &secrets, Team, List),
        row(
            o,
            Forbidden,
            &pactos,
            Team,
            PatchStatus("svc", status.clone()),
        ),
        row(o, Forbidden, &configmaps, Team, Create(named("x"))),
        row(o, Forbidden, &events, Team, Create(event("o"))),
        row(o, Forbidden, &leases, Own, List),
        // Metrics observation is off: no monitor access.
        row(o, Forbidden, &service_monitor_resource(), Team, List),
        row(r, Allowed, &secrets, Team, Get("pull")),
        row(r, Forbidden, &secrets, Team, List),
        row(r, Forbidden, &secrets, Team, Create(named("x"))),
        row(r, Forbidden, &configmaps, Team, Get("absent")),
        row(r, Forbidden, &pods, Team, List),
        row(r, Forbidden, &pactos, Team, Get("svc")),
        row(e, Forbidden, &secrets, Team, Get("pull")),
        row(e, Forbidden, &pods, All, List),
        row(e, Forbidden, &services, Team, List),
        row(e, Forbidden, &configmaps, Team, Get("absent")),
        row(e, Forbidden, &pactos, All, List),
        row(e, Forbidden, &events, Team, Create(event("e"))),
        row(e, Forbidden, &leases, Own, List),
        row(w, Allowed, &pactos, Team, List),
        row(w, Allowed, &pactos, Team, PatchStatus("svc", status)),
        row(w, Allowed, &revisions, Team, Create(revision)),
        row(w, Allowed, &events, Team, Create(event("w"))),
        row(w, Allowed, &events, Team, Get("w")),
        row(
            w,
            Allowed,
            &events,
            Team,
            Patch("w", serde_json::json!({ "count": 2 })),
        ),
        row(w, Forbidden, &events, Team, List),
        row(
            w,
            Allowed,
            &leases,
            Own,
            Create(named("pacto-status-writer")),
        ),
        row(
            w,
            Allowed,
            &leases,
            Own,
            Patch("pacto-status-writer", holder.clone()),
        ),
        row(w, Forbidden, &leases, Own, Patch("someone-else", holder)),
        row(
            w,
            Allowed,
            &namespaces,
            All,
            Patch(agents, privileged.clone()),
        ),
        row(w, Forbidden, &namespaces, All, Patch(team, privileged)),
        row(
            w,
            Forbidden,
            &pactos,
            Team,
            Patch(
                "svc",
                serde_json::json!({ "spec": { "checkIntervalSeconds": 60 } }),
            ),
        ),
        row(w, Forbidden, &pactos, Team, Delete("svc")),
        row(w, Forbidden, &secrets, Team, Get("pull")),
        row(w, Forbidden, &pods, Team, List),
        row(w, Forbidden, &services, Team, List),
    ]
}

/// Applies the RBAC and admission objects `helm template` renders for `chart` into `namespace`.
fn apply_rbac(
    cp: &ControlPlane,
    tools: &Tools,
    chart: &str,
    namespace: &str,
    sets: &[&str],
) -> Result<()> {
    let mut args = vec![
        "template".to_owned(),
        chart.to_owned(),
        format!("charts/{chart}"),
        "--namespace".to_owned(),
        namespace.to_owned(),
    ];
    for set in sets {
        args.push("--set".to_owned());
        args.push((*set).to_owned());
    }
    let text = tools.run("helm", &args)?;
    let docs: Vec<String> = documents(&text)?
        .iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some(
                    "ServiceAccount"
                        | "Role"
                        | "ClusterRole"
                        | "RoleBinding"
                        | "ClusterRoleBinding"
                        | "ValidatingAdmissionPolicy"
                        | "ValidatingAdmissionPolicyBinding"
                )
            )
        })
        .map(serde_norway::to_string)
        .collect::<Result<_, _>>()?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join(format!("{chart}.yaml"));
    std::fs::write(&file, docs.join("---\n"))?;
    kubectl_apply(cp, &file, false)?;
    Ok(())
}

fn forbidden_with<T: std::fmt::Debug>(result: Result<T, kube::Error>, needle: &str) -> Result<()> {
    match result {
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains(needle) => Ok(()),
        other => anyhow::bail!("expected 403 containing {needle:?}, got {other:?}"),
    }
}

fn lease(name: &str) -> Lease {
    Lease {
        metadata: meta(name),
        ..Lease::default()
    }
}

/// A client acting as ServiceAccount `sa` with a token bound to a new Pod on a new Node `node`
/// (the token then carries the node name, as the agent's projected token does).
async fn agent_client(cp: &ControlPlane, ns: &str, sa: &str, node: &str) -> Result<Client> {
    Api::<ServiceAccount>::namespaced(cp.client()?, ns)
        .get(sa)
        .await?;
    let token = cp.service_account_token(ns, sa, Some(node), &[]).await?;
    let mut config = cp.admin_config();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..kube::config::AuthInfo::default()
    };
    Ok(Client::try_from(config)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_agent_writes_only_the_objects_named_after_its_node() -> Result<()> {
    let cp = cluster().await;
    let admin = cp.client()?;
    let tools = Tools::new()?;
    let agents = cp.create_namespace("agents").await?;
    apply_rbac(cp, &tools, "pacto-node-agent", &agents, &[])?;
    let sa = "pacto-node-agent";

    // A token without a node name: RBAC lets it reach the admission policy, which refuses.
    let plain = cp.service_account_client(&agents, sa).await?;
    let leases = Api::<Lease>::namespaced(plain.clone(), &agents);
    within(
        "the admission policy to refuse a token without node name",
        DEADLINE,
        || async {
            match leases
                .create(&PostParams::default(), &lease("node-x"))
                .await
            {
                Err(kube::Error::Api(s))
                    if s.code == 403 && s.message.contains("carries no node name") =>
                {
                    Ok(())
                }
                other => {
                    if other.is_ok() {
                        Api::<Lease>::namespaced(admin.clone(), &agents)
                            .delete("node-x", &kube::api::DeleteParams::default())
                            .await
                            .expect("delete the admitted lease");
                    }
                    Err(format!("{other:?}"))
                }
            }
        },
    )
    .await?;
    forbidden_with(
        Api::<Secret>::namespaced(plain.clone(), &agents)
            .list(&ListParams::default())
            .await,
        "forbidden",
    )?;
    // It reads pods cluster-wide (the ClusterRole; it keeps those of its own node).
    Api::<Pod>::all(plain.clone())
        .list(&ListParams::default())
        .await
        .context("the agent lists pods")?;
    forbidden_with(
        Api::<Pod>::namespaced(plain.clone(), &agents)
            .delete("anything", &kube::api::DeleteParams::default())
            .await,
        "forbidden",
    )?;

    // Tokens bound to a pod on node `node` (A) and on `node_b` (B): each agent may write Lease
    // and NodeRuntimeObservation named after its own node, and nothing named otherwise.
    let node = pacto_testenv::controlplane::unique_name("node-a");
    let node_b = pacto_testenv::controlplane::unique_name("node-b");
    let bound = agent_client(cp, &agents, sa, &node).await?;
    let bound_b = agent_client(cp, &agents, sa, &node_b).await?;
    let leases = Api::<Lease>::namespaced(bound.clone(), &agents);
    leases
        .create(&PostParams::default(), &lease(&node))
        .await
        .context("its own Lease")?;
    leases
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": { "holderIdentity": "agent" } })),
        )
        .await
        .context("renewing its own Lease")?;
    forbidden_with(
        leases
            .create(&PostParams::default(), &lease("another-node"))
            .await,
        "may only write the objects named after its node",
    )?;
    let observations =
        Api::<DynamicObject>::namespaced_with(bound.clone(), &agents, &observation_resource());
    observations
        .create(
            &PostParams::default(),
            &dynamic(
                &observation_resource(),
                &node,
                serde_json::json!({ "spec": { "nodeName": node } }),
            )?,
        )
        .await
        .context("its own NodeRuntimeObservation")?;
    observations
        .patch_status(
            &node,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": { "agentVersion": "test" } })),
        )
        .await
        .context("publishing its own observation status")?;
    forbidden_with(
        observations
            .create(
                &PostParams::default(),
                &dynamic(
                    &observation_resource(),
                    "another-node",
                    serde_json::json!({ "spec": { "nodeName": "another-node" } }),
                )?,
            )
            .await,
        "may only write the objects named after its node",
    )?;

    // The agent on node B: its own Lease is fine; node A's Lease and observation status are not.
    let leases_b = Api::<Lease>::namespaced(bound_b.clone(), &agents);
    leases_b
        .create(&PostParams::default(), &lease(&node_b))
        .await
        .context("agent B's own Lease")?;
    forbidden_with(
        leases_b
            .patch(
                &node,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": { "holderIdentity": "b" } })),
            )
            .await,
        "may only write the objects named after its node",
    )?;
    forbidden_with(
        Api::<DynamicObject>::namespaced_with(bound_b, &agents, &observation_resource())
            .patch_status(
                &node,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": { "agentVersion": "b" } })),
            )
            .await,
        "may only write the objects named after its node",
    )?;
    Ok(())
}
