//! PactoRevisions and their two events end to end, read through kubectl: `TagOverwritten` once per
//! force-push whichever of a reconcile and the revision mirror sees it first, `RevisionCreated`
//! even when the status write of the pass that created the revision is refused, and a Pacto whose
//! name is longer than a label value (docs/design/status.md#revisions-and-the-mirror).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::path::PathBuf;

use pacto_api::testing::PactoBuilder;
use pacto_e2e::{STATUS_DEADLINE, Stack, StackOptions, inline_pacto, oci_pacto, times_emitted};
use pacto_runtime::testing::within;

/// A bundle directory of service `ledger` whose `pacto.yaml` carries `note`.
struct Bundle {
    dir: PathBuf,
}

impl Bundle {
    fn new(stack: &Stack, name: &str) -> Self {
        let dir = stack.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    fn write(&self, note: &str) {
        std::fs::write(
            self.dir.join("pacto.yaml"),
            format!(
                "pactoVersion: \"2.0\"\nservice:\n  name: ledger\n  version: 1.0.0\nmetadata:\n  note: {note}\n"
            ),
        )
        .unwrap();
    }

    /// `pacto push [--force]`; returns the pushed digest.
    async fn push(&self, stack: &Stack, reference: &str, force: bool) -> String {
        let dir = self.dir.to_str().unwrap();
        let mut args = vec!["push"];
        if force {
            args.push("--force");
        }
        args.extend([dir, reference]);
        // It prints `oci://<reference>@<digest>`.
        let out = stack.pacto_cli(&args).await.unwrap();
        let (_, digest) = out
            .trim()
            .rsplit_once('@')
            .unwrap_or_else(|| panic!("no digest in `pacto push` output: {out}"));
        digest.to_owned()
    }
}

/// The events of `reason` on Pacto `name` as (message, count).
async fn events(stack: &Stack, name: &str, reason: &str) -> Vec<(String, u64)> {
    let events = stack.pacto_events(name, &[]).await.unwrap();
    events
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| {
            let message = e["message"].as_str().unwrap_or_default().to_owned();
            let count = times_emitted(std::slice::from_ref(e), reason).unwrap();
            (message, count)
        })
        .collect()
}

/// How many times `reason` was reported on Pacto `name` (the events' counts summed).
async fn times(stack: &Stack, name: &str, reason: &str) -> u64 {
    let events = stack.pacto_events(name, &[]).await.unwrap();
    times_emitted(&events, reason).unwrap()
}

/// Waits for an event of `reason` on Pacto `name` whose message is `message`.
async fn wait_event(stack: &Stack, name: &str, reason: &str, message: &str) {
    within(
        &format!("a {reason} event `{message}`"),
        STATUS_DEADLINE,
        || async {
            let seen = events(stack, name, reason).await;
            if seen.iter().any(|(m, _)| m == message) {
                Ok(())
            } else {
                Err(format!("{seen:?}"))
            }
        },
    )
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}\n{}", stack.logs()));
}

/// The PactoRevisions of Pacto `name` (by `spec.pactoRef`).
async fn revisions(stack: &Stack, name: &str) -> Vec<serde_json::Value> {
    let json = stack
        .kubectl(
            &[
                "get",
                "pactorevisions",
                "-n",
                &stack.namespace,
                "-o",
                "json",
            ],
            None,
        )
        .await
        .unwrap();
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["spec"]["pactoRef"] == name)
        .cloned()
        .collect()
}

/// Waits until Pacto `name` has `n` revisions.
async fn wait_revisions(stack: &Stack, name: &str, n: usize) -> Vec<serde_json::Value> {
    within(
        &format!("{n} revisions of {name}"),
        STATUS_DEADLINE,
        || async {
            let listed = revisions(stack, name).await;
            if listed.len() == n {
                Ok(listed)
            } else {
                Err(serde_json::to_string_pretty(&listed).unwrap_or_default())
            }
        },
    )
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}\n{}", stack.logs()))
}

/// The TagOverwritten message of a force-push of tag `1.0.0` from `old` to `new`.
fn overwritten(old: &str, new: &str) -> String {
    format!(
        "Tag 1.0.0 was force-pushed (digest changed from {} to {})",
        &old[..12],
        &new[..12]
    )
}

/// Waits until the status-writer's revision mirror has finished `passes` passes.
async fn wait_mirror_passes(stack: &Stack, passes: f64) {
    const PASSES: &str = "pacto_status_writer_mirror_passes_total";
    within("revision-mirror passes", STATUS_DEADLINE, || async {
        match stack.metric_sum("status-writer", PASSES).await {
            Ok(done) if done >= passes => Ok(()),
            Ok(done) => Err(format!("{PASSES} {done}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|timeout| panic!("{timeout}\n{}", stack.logs()));
}

/// With the mirror at a long interval (as with the defaults), the nudge the guide recommends
/// resolves a force-pushed tag first: that reconcile reports TagOverwritten, once per change of
/// digest, also when only the digest moved (same pacto.yaml), and a restarted status-writer
/// whose mirror re-checks the tag does not report it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_pushed_tag_seen_first_by_a_reconcile() {
    let mut stack = Stack::start_with(StackOptions {
        status_writer_args: vec!["--revision-mirror-interval=1h".into()],
        ..StackOptions::default()
    })
    .await
    .unwrap();
    let bundle = Bundle::new(&stack, "ledger");
    bundle.write("first");
    let reference = format!("oci://{}/pacto/ledger:1.0.0", stack.registry.host());
    let first = bundle.push(&stack, &reference, false).await;
    stack
        .apply(&oci_pacto("ledger", &reference, None))
        .await
        .unwrap();
    stack
        .wait_contract_status("ledger", "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    wait_revisions(&stack, "ledger", 1).await;

    // Force-push new content and nudge at once: the reconcile sees the new digest first.
    bundle.write("second");
    let second = bundle.push(&stack, &reference, true).await;
    assert_ne!(first, second, "the force-push changed the digest");
    stack.nudge("ledger", "1").await.unwrap();
    wait_event(
        &stack,
        "ledger",
        "TagOverwritten",
        &overwritten(&first, &second),
    )
    .await;
    let listed = wait_revisions(&stack, "ledger", 2).await;
    assert!(
        listed
            .iter()
            .any(|r| r["spec"]["source"]["digest"] == second.as_str()),
        "{listed:?}"
    );

    // Force-push the same pacto.yaml with another file: only the digest moves.
    std::fs::write(bundle.dir.join("README.md"), "ledger\n").unwrap();
    let third = bundle.push(&stack, &reference, true).await;
    assert_ne!(second, third);
    stack.nudge("ledger", "2").await.unwrap();
    wait_event(
        &stack,
        "ledger",
        "TagOverwritten",
        &overwritten(&second, &third),
    )
    .await;
    assert_eq!(revisions(&stack, "ledger").await.len(), 2, "same content");

    // Restarted, the status-writer's mirror re-checks the tag at once; neither it nor another
    // reconcile reports the change again.
    stack.restart_service("status-writer").await.unwrap();
    wait_mirror_passes(&stack, 1.0).await;
    stack.nudge("ledger", "3").await.unwrap();
    let seen = events(&stack, "ledger", "TagOverwritten").await;
    assert_eq!(
        times(&stack, "ledger", "TagOverwritten").await,
        2,
        "once per change: {seen:?}"
    );
}

/// A Pacto named with 200 characters: its revision keeps the content hash in its name and a
/// label value that fits, the revision mirror finds it and reports a force-push once, and the
/// revision the mirror creates names the contract's service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_pacto_name_is_mirrored() {
    let stack = Stack::start().await.unwrap();
    let name = format!("ledger-{}", "a".repeat(193));
    assert_eq!(name.len(), 200);
    let bundle = Bundle::new(&stack, "ledger");
    bundle.write("first");
    let reference = format!("oci://{}/pacto/ledger:1.0.0", stack.registry.host());
    let first = bundle.push(&stack, &reference, false).await;
    // Checked hourly: after the force-push only the mirror (every second here) looks at the tag.
    stack
        .apply(
            &PactoBuilder::oci(&name, &reference)
                .check_interval(3600)
                .manifest(),
        )
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status(&name, "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    let listed = wait_revisions(&stack, &name, 1).await;
    let revision = &listed[0];
    let hash = revision["status"]["contractHash"].as_str().unwrap();
    let revision_name = revision["metadata"]["name"].as_str().unwrap();
    assert_eq!(pacto["status"]["currentRevision"], revision_name);
    assert_eq!(revision_name, format!("{name}-1-0-0-{}", &hash[..7]));
    assert_eq!(revision["spec"]["serviceName"], "ledger", "{revision}");
    let label = revision["metadata"]["labels"]["pacto.trianalab.io/pacto"]
        .as_str()
        .unwrap();
    assert!(label.len() <= 63, "{label}");
    assert!(label.starts_with(&name[..52]), "{label}");

    bundle.write("second");
    let second = bundle.push(&stack, &reference, true).await;
    wait_event(
        &stack,
        &name,
        "TagOverwritten",
        &overwritten(&first, &second),
    )
    .await;
    let listed = wait_revisions(&stack, &name, 2).await;
    for revision in &listed {
        assert_eq!(revision["spec"]["serviceName"], "ledger", "{revision}");
        assert_eq!(
            revision["metadata"]["labels"]["pacto.trianalab.io/pacto"],
            label
        );
    }
    let passes = stack
        .metric_sum("status-writer", "pacto_status_writer_mirror_passes_total")
        .await
        .unwrap();
    wait_mirror_passes(&stack, passes + 3.0).await;
    assert_eq!(times(&stack, &name, "TagOverwritten").await, 1);
}

/// The ValidatingAdmissionPolicy (and its binding) that refuses status writes of the Pactos
/// `probe` and `refused` in the stack's namespace.
fn refusing_policy(namespace: &str) -> (String, String) {
    let name = format!("e2e-refuse-status-{namespace}");
    let yaml = format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [pacto.trianalab.io]
        apiVersions: ['*']
        operations: [UPDATE]
        resources: [pactos/status]
  validations:
    - expression: \"!(object.metadata.name in ['probe', 'refused'])\"
      message: e2e refuses this status write
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {namespace}
"
    );
    (name, yaml)
}

/// The API server refuses the status write of the pass that created the revision: the
/// RevisionCreated event is reported all the same (it was published when the revision was
/// created), and the status lands once the refusal is lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_created_survives_a_refused_status_write() {
    let stack = Stack::start().await.unwrap();
    let contract = "pactoVersion: \"2.0\"\nservice:\n  name: refused\n  version: 1.0.0\n";
    let (policy, yaml) = refusing_policy(&stack.namespace);
    stack
        .kubectl(&["apply", "-f", "-"], Some(&yaml))
        .await
        .unwrap();
    // The policy is in force once it refuses a status write of the Pacto `probe`.
    stack
        .apply(&inline_pacto("probe", contract, None))
        .await
        .unwrap();
    within(
        "the policy to refuse status writes",
        STATUS_DEADLINE,
        || async {
            let patched = stack
                .kubectl(
                    &[
                        "patch",
                        "pacto",
                        "probe",
                        "-n",
                        &stack.namespace,
                        "--subresource=status",
                        "--type=merge",
                        "-p",
                        "{\"status\":{\"contractVersion\":\"probe\"}}",
                    ],
                    None,
                )
                .await;
            match patched {
                Err(e) if e.to_string().contains("e2e refuses this status write") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
    .unwrap();

    stack
        .apply(&inline_pacto("refused", contract, None))
        .await
        .unwrap();
    // The status-writer's first status write of `refused` is refused (its log says so).
    let log = stack.dir.path().join("status-writer.log");
    let refused = format!(
        "cannot apply the status of Pacto {}/refused",
        stack.namespace
    );
    within(
        "the status write to be refused",
        STATUS_DEADLINE,
        || async {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains(&refused) {
                Ok(())
            } else {
                Err(text.lines().rev().take(5).collect::<Vec<_>>().join("\n"))
            }
        },
    )
    .await
    .unwrap();
    for kind in [
        "validatingadmissionpolicybinding",
        "validatingadmissionpolicy",
    ] {
        stack
            .kubectl(&["delete", kind, &policy], None)
            .await
            .unwrap();
    }

    let pacto = stack
        .wait_contract_status("refused", "Reference", STATUS_DEADLINE)
        .await
        .unwrap();
    let revision = pacto["status"]["currentRevision"].as_str().unwrap();
    wait_event(
        &stack,
        "refused",
        "RevisionCreated",
        &format!("Created revision {revision} for contract v1.0.0"),
    )
    .await;
    assert_eq!(times(&stack, "refused", "RevisionCreated").await, 1);
}
