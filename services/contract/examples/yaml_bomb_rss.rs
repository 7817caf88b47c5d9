//! Peak resident memory of hostile documents against the YAML limits
//! (docs/design/contract.md#yaml-limits): each case runs in a child process of its own and
//! reports the outcome, the time and the growth of `VmHWM` (/proc/self/status) over the process
//! before the case. Run:
//! `cargo run --release -p pacto-contract --features test-support --example yaml_bomb_rss`
//! (one case: append its name).

use std::fmt::Write as _;
use std::time::Instant;

use pacto_contract::bundle::{BundleFiles, CONTRACT_FILE};
use pacto_contract::{ValidateOptions, YamlLimits, count_tokens, parse_contract, parse_yaml};

const CASES: &[(&str, &str)] = &[
    ("alias-bomb", "16 KiB alias bomb as pacto.yaml"),
    (
        "flow-9mb-contract",
        "9.2 MB `[1,1,…]` as pacto.yaml (the issue's document)",
    ),
    (
        "flow-9mb-document",
        "9.2 MB `[1,1,…]` as another YAML document",
    ),
    (
        "densest-contract",
        "pacto.yaml at the token ceiling, densest shape (`- ?`)",
    ),
    (
        "densest-document",
        "YAML document at the token ceiling, densest shape",
    ),
    (
        "validate-dense-contract",
        "validation of a bundle whose pacto.yaml is the densest",
    ),
    (
        "validate-dense-interface",
        "validation of a contract whose interface is the densest",
    ),
    (
        "validate-schemas",
        "validation of a contract with configuration schemas at the budget",
    ),
    (
        "validate-aliases",
        "validation of a valid contract expanding to 99,000 nodes",
    ),
];

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// `unit` repeated until the text has just under `tokens` tokens.
fn dense(head: &str, unit: &str, tokens: usize) -> String {
    let per = count_tokens(unit.as_bytes(), usize::MAX).max(1);
    let mut doc = head.to_owned();
    let have = count_tokens(doc.as_bytes(), usize::MAX);
    for _ in 0..(tokens.saturating_sub(have + 4)) / per {
        doc.push_str(unit);
    }
    doc
}

fn flow_list(bytes: usize) -> Vec<u8> {
    let mut doc = Vec::with_capacity(bytes);
    doc.push(b'[');
    while doc.len() + 3 < bytes {
        doc.extend_from_slice(b"1,");
    }
    doc.extend_from_slice(b"1]\n");
    doc
}

const HEAD: &str = "pactoVersion: \"2.0\"\nservice:\n  name: svc\n  version: 1.0.0\n";

fn validate(files: &BundleFiles) -> String {
    let outcome = pacto_contract::validate_bundle(files, &ValidateOptions::default());
    match outcome.report.errors.first() {
        None => "valid".to_owned(),
        Some(f) => format!(
            "{} errors, first {}: {}",
            outcome.report.errors.len(),
            f.code,
            f.message.chars().take(100).collect::<String>()
        ),
    }
}

fn run(case: &str) -> String {
    match case {
        "alias-bomb" => {
            let bomb = pacto_contract::testing::alias_bomb("pactoVersion: \"2.0\"\n");
            err_text(parse_contract(bomb.as_bytes()).map(drop))
        }
        "flow-9mb-contract" => err_text(parse_contract(&flow_list(9_200_000)).map(drop)),
        "flow-9mb-document" => err_text(parse_yaml(&flow_list(9_200_000)).map(drop)),
        "densest-contract" => {
            let doc = dense("", "- ?\n", YamlLimits::CONTRACT.max_tokens);
            err_text(pacto_contract::parse_contract_yaml(doc.as_bytes()).map(drop))
        }
        "densest-document" => {
            let doc = dense("", "- ?\n", YamlLimits::DOCUMENT.max_tokens);
            err_text(parse_yaml(doc.as_bytes()).map(drop))
        }
        "validate-dense-contract" => {
            let mut files = BundleFiles::new();
            let doc = dense("", "- ?\n", YamlLimits::CONTRACT.max_tokens);
            files.insert(CONTRACT_FILE, doc.into_bytes());
            validate(&files)
        }
        "validate-dense-interface" => {
            let mut files = BundleFiles::new();
            let contract = format!(
                "{HEAD}interfaces:\n  - name: api\n    type: openapi\n    ref: interfaces/api.yaml\n"
            );
            files.insert(CONTRACT_FILE, contract.into_bytes());
            let doc = dense("", "- ?\n", YamlLimits::DOCUMENT.max_tokens);
            files.insert("interfaces/api.yaml", doc.into_bytes());
            validate(&files)
        }
        "validate-schemas" => {
            // Ten configurations, each with its own schema of an enum of 9,900 values: together
            // just under the schema budget (every schema is compiled and held).
            let mut files = BundleFiles::new();
            let mut contract = format!("{HEAD}configurations:\n");
            for i in 0..10 {
                let _ = writeln!(
                    contract,
                    "  - name: c{i}\n    required: false\n    schema: configuration/s{i}.json"
                );
                let values = (0..4_900).map(|n| n.to_string()).collect::<Vec<_>>();
                let schema = format!("{{\"enum\":[{}]}}", values.join(","));
                files.insert(format!("configuration/s{i}.json"), schema.into_bytes());
            }
            files.insert(CONTRACT_FILE, contract.into_bytes());
            validate(&files)
        }
        "validate-aliases" => {
            let mut doc = format!(
                "{HEAD}metadata:\n  base: &l0 [{}]\n",
                vec!["x"; 990].join(",")
            );
            let _ = writeln!(doc, "  l1: &l1 [{}]", ["*l0"; 10].join(","));
            let _ = writeln!(doc, "  l2: [{}]", ["*l1"; 9].join(","));
            let mut files = BundleFiles::new();
            files.insert(CONTRACT_FILE, doc.into_bytes());
            validate(&files)
        }
        other => panic!("unknown case {other}"),
    }
}

fn err_text(result: Result<(), pacto_contract::ParseError>) -> String {
    match result {
        Ok(()) => "parsed".to_owned(),
        Err(e) => format!("refused: {e}"),
    }
}

fn main() {
    if let Some(case) = std::env::args().nth(1) {
        let before = peak_kib();
        let start = Instant::now();
        let outcome = run(&case);
        let elapsed = start.elapsed();
        let grown = peak_kib().saturating_sub(before);
        println!(
            "{case}: {:.1} MiB peak growth, {elapsed:.1?}: {outcome}",
            grown as f64 / 1024.0
        );
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    println!(
        "limits: pacto.yaml {:?} (peak_bytes {:.1} MiB); other documents {:?} (peak_bytes {:.1} MiB)",
        YamlLimits::CONTRACT,
        YamlLimits::CONTRACT.peak_bytes() as f64 / 1_048_576.0,
        YamlLimits::DOCUMENT,
        YamlLimits::DOCUMENT.peak_bytes() as f64 / 1_048_576.0
    );
    for (case, what) in CASES {
        let out = std::process::Command::new(&exe)
            .arg(case)
            .output()
            .expect("run a case");
        print!("{what}\n  {}", String::from_utf8_lossy(&out.stdout));
    }
}
