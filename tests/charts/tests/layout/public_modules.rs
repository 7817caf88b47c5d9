//! The public-module rule of docs/design/crates.md#public-modules: a service-side crate's
//! `lib.rs` makes a module public only when another crate, or the crate's own integration
//! tests, benches and binaries, use it by path. [`PUBLIC_MODULES`] names each public module with
//! who uses it; a new `pub mod` fails until it is listed (or made private), and an entry whose
//! module is no longer public fails until it is removed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::{without_tests, workspace_root};

/// Every public module of every crate under `services/`, and who uses it.
const PUBLIC_MODULES: &[(&str, &[(&str, &str)])] = &[
    (
        "services/api",
        &[
            (
                "conditions",
                "the status-writer and the CLI set and read conditions",
            ),
            (
                "crdgen",
                "its crdgen binary; the CRD YAML for the cluster tests",
            ),
            (
                "labels",
                "the status-writer's labels and event reasons; the chart tests",
            ),
            (
                "testing",
                "PactoBuilder for other crates' tests (feature test-support)",
            ),
        ],
    ),
    (
        "services/cli",
        &[
            (
                "reference",
                "tests/reference_docs.rs checks the generated CLI reference",
            ),
            (
                "status_view",
                "the end-to-end harness renders pacto status reports",
            ),
        ],
    ),
    (
        "services/contract",
        &[
            (
                "bundle",
                "the CLI, the resolver, the OCI client, the Evidence Server, tests",
            ),
            (
                "codes",
                "the finding registry: the engine, the proto conversions, the CLI",
            ),
            ("diff", "pacto diff in the CLI"),
            ("model", "the typed contract every service reads"),
            ("readiness", "the evaluator and the proto conversions"),
            (
                "reference",
                "OCI references: the CLI, the resolver, the observer, pacto-oci",
            ),
            ("schema", "the observer's configuration dimension"),
            (
                "testing",
                "contract fixtures for other crates' tests (feature test-support)",
            ),
            (
                "version",
                "semver constraints: the CLI, the resolver, the observer, pacto-oci",
            ),
        ],
    ),
    (
        "services/engine",
        &[(
            "bench",
            "the typical-contract fixture of the benches (feature bench)",
        )],
    ),
    (
        "services/evidence",
        &[
            (
                "client",
                "IngestClient: pacto evidence push and the status-writer's producer",
            ),
            ("gojson", "the Evidence Server's Go-exact bodies"),
            (
                "keys",
                "key files: the CLI, the Evidence Server, the producer",
            ),
            (
                "store",
                "evidence records: the Evidence Server, the CLI, the producer",
            ),
        ],
    ),
    (
        "services/evidence-server",
        &[(
            "testing",
            "the server in process for the CLI's and the producer's tests (feature testing)",
        )],
    ),
    (
        "services/node-agent",
        &[
            ("aggregate", "tests/agent.rs drives the aggregation"),
            (
                "facts",
                "the collection interface: tests/agent.rs, the privileged test, the bench",
            ),
            (
                "host",
                "the privileged test scans /proc and finds the cgroup2 mount",
            ),
            ("kernel", "the overhead bench loads the kernel program"),
            (
                "report",
                "tests/agent.rs streams reports to a real observer",
            ),
        ],
    ),
    (
        "services/observer",
        &[
            (
                "node_evidence",
                "tests/node_evidence.rs, tests/node_reports.rs and the bench",
            ),
            ("node_reports", "tests/node_reports.rs"),
            (
                "watch",
                "the status-writer's WatchTargets client; the observer's tests",
            ),
        ],
    ),
    (
        "services/proto",
        &[
            (
                "convert",
                "every wire <-> domain conversion (crates.md rule 3)",
            ),
            (
                "node_limits",
                "the node agent's and the observer's shared report limits",
            ),
        ],
    ),
    (
        "services/runtime",
        &[
            ("admin", "every service's admin port"),
            ("args", "every service's shared flags"),
            (
                "backoff",
                "Backoff and spawn_retrying: every service's retries",
            ),
            (
                "balance",
                "the node agent's and the status-writer's client-side balancing",
            ),
            ("build_info", "every service's /version and build metric"),
            ("grpc", "every gRPC server and client"),
            (
                "http",
                "the Evidence Server's HTTP API on the one connection loop",
            ),
            (
                "index",
                "the indexes of the observer, the status-writer and the node agent",
            ),
            (
                "memo",
                "the parse memo of the status-writer, the observer and the evaluator",
            ),
            ("metrics", "every service's metric recorder and RPC metrics"),
            (
                "scope",
                "the observer's and the status-writer's namespace scope",
            ),
            (
                "service",
                "ServeConfig and ServiceNames of the services' serve (and their tests)",
            ),
            (
                "testing",
                "certificates, admin helpers, JsonLog, eventually (feature test-support)",
            ),
            ("tls", "the mTLS material every service loads"),
            (
                "watch",
                "the watches of the observer, the status-writer and the node agent",
            ),
        ],
    ),
    (
        "services/status-writer",
        &[
            ("agent_log", "tests/node_agent_namespace.rs"),
            (
                "node_agent",
                "tests/node_agent_namespace.rs and the chart tests",
            ),
            ("policy_report", "tests/policy_report.rs"),
            ("producer", "tests/producer.rs"),
        ],
    ),
];

/// The public modules each crate's `lib.rs` declares at its top level (`pub mod x;` or
/// `pub mod x {`), test items left out: crate directory (relative to `root`) to module names.
pub(super) fn public_modules(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut found = BTreeMap::new();
    let Ok(entries) = fs::read_dir(root.join("services")) else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(text) = fs::read_to_string(entry.path().join("src/lib.rs")) else {
            continue;
        };
        let modules = without_tests(&text)
            .lines()
            .filter_map(|line| line.strip_prefix("pub mod "))
            .map(|rest| {
                rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let name = entry.file_name().to_string_lossy().into_owned();
        found.insert(format!("services/{name}"), modules);
    }
    found
}

/// The public modules not in `allowed`, and the `allowed` entries that are not public modules.
pub(super) fn against_allow_list(
    found: &BTreeMap<String, BTreeSet<String>>,
    allowed: &[(&str, &[(&str, &str)])],
) -> (Vec<String>, Vec<String>) {
    let allowed: BTreeSet<(&str, &str)> = allowed
        .iter()
        .flat_map(|(krate, modules)| modules.iter().map(move |(module, _)| (*krate, *module)))
        .collect();
    let public: BTreeSet<(&str, &str)> = found
        .iter()
        .flat_map(|(krate, modules)| modules.iter().map(move |m| (krate.as_str(), m.as_str())))
        .collect();
    let show = |(krate, module): &(&str, &str)| format!("{krate}: pub mod {module}");
    (
        public.difference(&allowed).map(show).collect(),
        allowed.difference(&public).map(show).collect(),
    )
}

#[test]
fn every_public_module_is_in_the_allow_list_with_its_users() {
    let found = public_modules(&workspace_root());
    assert!(found.len() >= 10, "found only {found:?}");
    let (unlisted, stale) = against_allow_list(&found, PUBLIC_MODULES);
    assert!(
        unlisted.is_empty(),
        "public modules nobody declared a user for: make them private, or add them to \
         PUBLIC_MODULES with the crate or test that uses them (docs/design/crates.md#public-modules):\n{}",
        unlisted.join("\n")
    );
    assert!(
        stale.is_empty(),
        "PUBLIC_MODULES lists modules that are not public; remove these entries:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_public_module_check_sees_an_unlisted_module_and_a_stale_entry() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    fs::create_dir_all(root.join("services/svc/src")).expect("mkdir");
    fs::write(
        root.join("services/svc/src/lib.rs"),
        "pub mod used;\npub mod new;\nmod private;\npub(crate) mod inner;\n\
         #[cfg(feature = \"test-support\")]\npub mod testing;\nmod generated {\n    pub mod v1 {}\n}\n\
         #[cfg(test)]\npub mod tests;\n",
    )
    .expect("write");
    let found = public_modules(root);
    let names: Vec<&str> = found["services/svc"].iter().map(String::as_str).collect();
    assert_eq!(names, ["new", "testing", "used"]);
    let allowed: &[(&str, &[(&str, &str)])] = &[(
        "services/svc",
        &[
            ("used", "a user"),
            ("testing", "tests"),
            ("gone", "was public"),
        ],
    )];
    let (unlisted, stale) = against_allow_list(&found, allowed);
    assert_eq!(unlisted, ["services/svc: pub mod new"]);
    assert_eq!(stale, ["services/svc: pub mod gone"]);
}
