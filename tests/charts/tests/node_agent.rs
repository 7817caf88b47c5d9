//! The node agent's least privilege by default and its namespace labelled before its DaemonSet
//! exists (docs/design/node-agent.md#admission, #pod-security): the chart's default container
//! securityContext, and helmfile's `presync` hook that applies the agent namespace with the Pod
//! Security labels the status-writer keeps.

use anyhow::{Context, Result, ensure};
use pacto_chart_tests::{Tools, documents};
use pacto_status_writer::node_agent::{POD_SECURITY_LABELS, PRIVILEGED};
use serde_json::{Value, json};

/// `helm template` of the node-agent chart with `sets`; its DaemonSet's container.
fn agent_container(tools: &Tools, sets: &[&str]) -> Result<Value> {
    let mut args = vec![
        "template",
        "pacto-node-agent",
        "charts/pacto-node-agent",
        "--namespace",
        "pacto-node-agent",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let docs = documents(&tools.run("helm", &args)?)?;
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .context("no DaemonSet rendered")?;
    Ok(ds["spec"]["template"]["spec"]["containers"][0].clone())
}

/// Issue 34 item 8: by default the agent is not privileged: root in the container, no privilege
/// escalation, every capability dropped except BPF, PERFMON and SYS_PTRACE (each one needed on
/// our nodes), the runtime's default seccomp profile, a read-only root file system.
#[test]
fn the_agent_runs_with_the_fewest_capabilities_by_default() -> Result<()> {
    let tools = Tools::new()?;
    let c = agent_container(&tools, &[])?;
    let sc = &c["securityContext"];
    let expected = json!({
        "privileged": false,
        "allowPrivilegeEscalation": false,
        "runAsUser": 0,
        "capabilities": {"drop": ["ALL"], "add": ["BPF", "PERFMON", "SYS_PTRACE"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "readOnlyRootFilesystem": true,
    });
    ensure!(*sc == expected, "default securityContext {sc:#}");

    // A Localhost profile replaces the default one.
    let c = agent_container(
        &tools,
        &[
            "securityContext.seccompProfile.type=Localhost",
            "securityContext.seccompProfile.localhostProfile=profiles/pacto-node-agent.json",
        ],
    )?;
    ensure!(
        c["securityContext"]["seccompProfile"]
            == json!({"type": "Localhost", "localhostProfile": "profiles/pacto-node-agent.json"}),
        "{:#}",
        c["securityContext"]
    );

    // The documented fallback.
    let c = agent_container(&tools, &["securityContext.mode=privileged"])?;
    ensure!(
        c["securityContext"] == json!({"privileged": true, "readOnlyRootFilesystem": true}),
        "privileged mode {:#}",
        c["securityContext"]
    );
    Ok(())
}

/// The `presync` hook of the pacto-node-agent release, as `helmfile build` renders it.
fn presync_hook(tools: &Tools, env: &str, sets: &[&str]) -> Result<Value> {
    let mut args = vec![
        "--environment",
        env,
        "--state-values-set",
        "nodeAgent.enabled=true",
    ];
    for set in sets {
        args.extend(["--state-values-set", set]);
    }
    args.extend(["--selector", "name=pacto-node-agent", "build"]);
    let out = tools.run("helmfile", &args)?;
    let state = documents(&out)?;
    let release = state
        .iter()
        .flat_map(|d| d["releases"].as_array().into_iter().flatten())
        .find(|r| r["name"] == "pacto-node-agent")
        .context("no pacto-node-agent release in helmfile build")?;
    let hooks = release["hooks"].as_array().context("no hooks")?;
    ensure!(hooks.len() == 1, "{hooks:#?}");
    Ok(hooks[0].clone())
}

/// Issue 35 item 3: on a cluster whose default Pod Security level is restricted, the agent
/// namespace must carry its labels before helm creates the DaemonSet. The release's `presync`
/// hook server-side-applies the Namespace named `nodeAgent.namespace` with exactly the labels
/// the status-writer keeps (`pacto_status_writer::node_agent::POD_SECURITY_LABELS`, all
/// `privileged`), with helmfile's kube context, in every environment.
#[test]
fn helmfile_labels_the_agent_namespace_before_the_daemonset() -> Result<()> {
    let tools = Tools::new()?;
    for (env, sets, namespace) in [
        ("local", &[][..], "pacto-node-agent"),
        ("production", &[][..], "pacto-node-agent"),
        ("local", &["nodeAgent.namespace=agents"][..], "agents"),
    ] {
        let hook = presync_hook(&tools, env, sets)?;
        ensure!(hook["events"] == json!(["presync"]), "{env}: {hook:#}");
        ensure!(hook["command"] == "sh", "{env}: {hook:#}");
        let args = hook["args"].as_array().context("hook args")?;
        ensure!(args.len() == 2 && args[0] == "-c", "{env}: {hook:#}");
        let script = args[1].as_str().context("hook script")?;
        let (command, rest) = script.split_once('\n').context("script lines")?;
        ensure!(
            command
                == "kubectl {{ with .Release.KubeContext }}--context={{ . }} {{ end }}apply --server-side --force-conflicts --field-manager=pacto-helmfile -f - <<'EOF'",
            "{env}: {command}"
        );
        let manifest = rest
            .strip_suffix("EOF\n")
            .context("the heredoc ends with EOF")?;
        let ns: Value = serde_norway::from_str(manifest).context("the Namespace manifest")?;
        let labels: Value = POD_SECURITY_LABELS
            .iter()
            .map(|k| ((*k).to_owned(), Value::from(PRIVILEGED)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        ensure!(
            ns == json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": namespace, "labels": labels},
            }),
            "{env}: {ns:#}"
        );
    }
    Ok(())
}
