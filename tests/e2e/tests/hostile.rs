//! Hostile input (docs/design/contract.md#yaml-limits): an inline contract that is a ~16 KiB YAML
//! alias bomb makes its Pacto Invalid at once, with `YAML_PARSE_ERROR` at
//! `spec.contractRef.inline` and a message naming the node limit, while another Pacto in the
//! namespace keeps its verdict and the resolver process stays alive.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use pacto_api::testing::PactoBuilder;
use pacto_e2e::{STATUS_DEADLINE, Stack, expect_condition};

const VALID: &str = "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\n";

fn alias_bomb() -> String {
    pacto_contract::testing::alias_bomb(VALID)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_bomb_is_invalid_at_once_and_harms_no_one_else() {
    let stack = Stack::start().await.unwrap();

    stack
        .apply(&PactoBuilder::inline("plain", VALID).manifest())
        .await
        .unwrap();
    stack
        .wait_contract_status("plain", "Reference", STATUS_DEADLINE)
        .await
        .unwrap();

    let created = std::time::Instant::now();
    stack
        .kubectl(
            &["create", "-n", &stack.namespace, "-f", "-"],
            Some(&PactoBuilder::inline("bomb", &alias_bomb()).manifest()),
        )
        .await
        .unwrap();
    let pacto = stack
        .wait_contract_status("bomb", "Invalid", STATUS_DEADLINE)
        .await
        .unwrap();
    eprintln!("bomb Invalid {:?} after create", created.elapsed());
    expect_condition(&pacto, "ContractValid", "False", "Invalid");
    let first = &pacto["status"]["validation"]["errors"][0];
    assert_eq!(
        (first["code"].as_str(), first["path"].as_str()),
        (Some("YAML_PARSE_ERROR"), Some("spec.contractRef.inline")),
        "{:#}",
        pacto["status"]
    );
    let message = first["message"].as_str().unwrap_or_default();
    assert!(message.contains("more than 100000 nodes"), "{message}");

    // The other Pacto keeps its verdict and the resolver never died.
    let plain = stack.get_pacto("plain").await.unwrap();
    assert_eq!(plain["status"]["contractStatus"], "Reference", "{plain}");
    let resolver = stack
        .services
        .iter()
        .find(|s| s.name == "contract-resolver")
        .expect("a resolver");
    assert_eq!(
        resolver.starts, 1,
        "the resolver was started once and never again"
    );
    let health = reqwest::get(format!("http://{}/healthz", resolver.admin))
        .await
        .unwrap();
    assert!(health.status().is_success(), "{}", health.status());
}
