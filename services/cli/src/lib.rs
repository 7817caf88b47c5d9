//! The `pacto` command-line interface: validate, pack, push, pull, inspect and diff contract
//! bundles, and `status`, which explains a Pacto's verdict from the cluster (also installed as
//! the kubectl plugin `kubectl pacto status`), and `evidence`, which generates keys, signs,
//! verifies and sends evidence envelopes and lists the records stored for a contract.
//!
//! Exit codes: `0` success (for `validate`: the contract is valid), `1` the contract is invalid
//! as the operator judges it (also a malformed reference, a corrupt artifact, a bundle without
//! `pacto.yaml`; for `evidence`: the evidence set or envelope is refused), `2` usage errors or
//! when the contract cannot be obtained (a missing local path, registry unreachable,
//! authentication rejected, not found). For `diff`, `1` is its gate (the new version needs a
//! bigger bump, or what `--fail-on` names) and `2` also covers an invalid operand.

mod cache;
mod commands;
mod diff;
mod evidence;
mod explain;
mod output;
mod progress;
pub mod reference;
mod registry;
mod status;
pub mod status_view;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit code when the command succeeded (or the contract is valid).
pub const EXIT_OK: u8 = 0;
/// Exit code when the contract is invalid.
pub const EXIT_INVALID: u8 = 1;
/// Exit code for usage errors and contracts that cannot be obtained.
pub const EXIT_ERROR: u8 = 2;

/// Validate, package and publish Pacto service contracts.
#[derive(Debug, Parser)]
#[command(name = "pacto", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Registry access options shared by every command.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Registry host (`host[:port]`) to reach over plain HTTP instead of HTTPS. Repeatable; the
    /// environment variable takes a comma-separated list.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST",
        env = "PACTO_INSECURE_REGISTRIES",
        value_delimiter = ',',
        global = true
    )]
    pub insecure_registries: Vec<String>,

    /// Registry user name (basic authentication).
    #[arg(long, env = "PACTO_REGISTRY_USERNAME", global = true)]
    pub username: Option<String>,

    /// Registry password (basic authentication).
    #[arg(
        long,
        env = "PACTO_REGISTRY_PASSWORD",
        global = true,
        hide_env_values = true
    )]
    pub password: Option<String>,

    /// Registry bearer token (wins over user name and password).
    #[arg(
        long,
        env = "PACTO_REGISTRY_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub token: Option<String>,

    /// Directory holding the Docker `config.json` consulted for credentials when no explicit
    /// credentials are given (default: `~/.docker`).
    #[arg(long, value_name = "DIR", env = "DOCKER_CONFIG", global = true)]
    pub docker_config: Option<PathBuf>,

    /// Deadline for each registry operation (and for `evidence push`, the server's answer), in
    /// seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        env = "PACTO_REGISTRY_TIMEOUT",
        default_value_t = 120,
        global = true
    )]
    pub timeout: u64,

    /// Do not read the local bundle cache (`$XDG_CACHE_HOME/pacto/oci` or
    /// `~/.cache/pacto/oci`); pulled bundles are still written to it.
    #[arg(long, env = "PACTO_NO_CACHE", global = true)]
    pub no_cache: bool,

    /// Suppress progress messages on stderr. Without it, push and pull print one line per step;
    /// on a terminal, a transfer that lasts longer than `PACTO_PROGRESS_DELAY` (default `300ms`)
    /// also shows a live line with bytes, share and rate.
    #[arg(long, short, env = "PACTO_QUIET", global = true)]
    pub quiet: bool,
}

/// `-f/--values` and `--set` overrides applied to `pacto.yaml` before validation.
#[derive(Debug, Clone, Args)]
pub struct OverrideArgs {
    /// YAML values file deep-merged into the contract (repeatable, in order).
    #[arg(
        long = "values",
        short = 'f',
        value_name = "FILE",
        env = "PACTO_VALUES",
        value_delimiter = ','
    )]
    pub values: Vec<PathBuf>,

    /// `key.path=value` override applied after values files (repeatable, in order).
    #[arg(long = "set", value_name = "KEY=VALUE", env = "PACTO_SET")]
    pub set: Vec<String>,
}

/// `--values` and `--set` for `push`, where `-f` means `--force`.
#[derive(Debug, Clone, Args)]
pub struct PushOverrideArgs {
    /// YAML values file deep-merged into the contract (repeatable, in order).
    #[arg(
        long = "values",
        value_name = "FILE",
        env = "PACTO_VALUES",
        value_delimiter = ','
    )]
    pub values: Vec<PathBuf>,

    /// `key.path=value` override applied after values files (repeatable, in order).
    #[arg(long = "set", value_name = "KEY=VALUE", env = "PACTO_SET")]
    pub set: Vec<String>,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable text.
    Text,
    /// JSON on stdout.
    Json,
}

/// Output format of `pacto status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusOutput {
    /// Human-readable text (coloured only on a terminal without `NO_COLOR`).
    Text,
    /// JSON on stdout.
    Json,
    /// YAML on stdout.
    Yaml,
}

/// The arguments of `pacto status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The Pacto; without it, a table of every Pacto in the namespace (`-n`) or the cluster.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Namespace of the Pacto (default: the kubeconfig context's namespace).
    #[arg(long, short = 'n', value_name = "NS", env = "PACTO_NAMESPACE")]
    pub namespace: Option<String>,
    /// A table of every Pacto in every namespace, with counts by verdict.
    #[arg(long, short = 'A', env = "PACTO_ALL_NAMESPACES")]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = StatusOutput::Text, env = "PACTO_OUTPUT")]
    pub output: StatusOutput,
    /// Keep running and print the status again whenever the Pacto changes or (for one Pacto) a
    /// new Event about it is recorded.
    #[arg(long, short, env = "PACTO_WATCH")]
    pub watch: bool,
    /// Namespace of the node agents' Leases (read for EVIDENCE_STALE findings).
    #[arg(
        long,
        value_name = "NS",
        env = "PACTO_NODE_AGENT_NAMESPACE",
        default_value = "pacto-node-agent"
    )]
    pub node_agent_namespace: String,
}

/// When `pacto diff` exits 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// The new service.version is bumped less than the changes imply.
    Bump,
    /// Any breaking change, whatever the version.
    Breaking,
    /// Any change, informational ones included.
    Any,
    /// Never (report only).
    None,
}

/// The arguments of `pacto diff`.
#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    /// The old contract: `<dir>`, `<path/to/pacto.yaml>`, a bundle file (`.tar.gz`, `.tgz`) or
    /// `oci://registry/repo[:tag|@digest]`.
    #[arg(value_name = "OLD")]
    pub old: String,
    /// The new contract, in the same forms.
    #[arg(value_name = "NEW")]
    pub new: String,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = OutputFormat::Text, env = "PACTO_OUTPUT")]
    pub output: OutputFormat,
    /// When to exit 1: `bump` when the new service.version is bumped less than the changes
    /// imply, `breaking` on any breaking change whatever the version, `any` on any change,
    /// `none` never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = FailOn::Bump, env = "PACTO_DIFF_FAIL_ON")]
    pub fail_on: FailOn,
    /// YAML values file deep-merged into the old contract (repeatable, in order).
    #[arg(
        long = "old-values",
        value_name = "FILE",
        env = "PACTO_OLD_VALUES",
        value_delimiter = ','
    )]
    pub old_values: Vec<PathBuf>,
    /// `key.path=value` override of the old contract, applied after its values files
    /// (repeatable, in order).
    #[arg(long = "old-set", value_name = "KEY=VALUE", env = "PACTO_OLD_SET")]
    pub old_set: Vec<String>,
    /// YAML values file deep-merged into the new contract (repeatable, in order).
    #[arg(
        long = "new-values",
        value_name = "FILE",
        env = "PACTO_NEW_VALUES",
        value_delimiter = ','
    )]
    pub new_values: Vec<PathBuf>,
    /// `key.path=value` override of the new contract, applied after its values files
    /// (repeatable, in order).
    #[arg(long = "new-set", value_name = "KEY=VALUE", env = "PACTO_NEW_SET")]
    pub new_set: Vec<String>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a contract: a bundle directory, a pacto.yaml file, a bundle file, or an oci://
    /// reference.
    Validate {
        /// `<dir>`, `<path/to/pacto.yaml>`, a bundle file (`.tar.gz`, `.tgz`, as `pacto pack`
        /// writes) or `oci://registry/repo[:tag|@digest]`.
        #[arg(value_name = "SOURCE", env = "PACTO_SOURCE")]
        source: String,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = OutputFormat::Text, env = "PACTO_OUTPUT")]
        output: OutputFormat,
        /// Local-only validation: do not fetch `ref` policies (each is skipped with a
        /// POLICY_REF_NOT_ENFORCED warning).
        #[arg(long, env = "PACTO_OFFLINE")]
        offline: bool,
        #[command(flatten)]
        overrides: OverrideArgs,
    },
    /// Validate a bundle directory and write it as a deterministic tar.gz.
    Pack {
        /// The bundle directory.
        #[arg(value_name = "DIR", env = "PACTO_DIR")]
        dir: PathBuf,
        /// Output file (default: `<name>-<version>.tar.gz`).
        #[arg(long, short, value_name = "FILE", env = "PACTO_PACK_OUTPUT")]
        output: Option<PathBuf>,
        #[command(flatten)]
        overrides: OverrideArgs,
    },
    /// Validate a bundle directory and push it to an OCI registry.
    Push {
        /// The bundle directory.
        #[arg(value_name = "DIR", env = "PACTO_DIR")]
        dir: PathBuf,
        /// `oci://registry/repo[:tag]`; without a tag, `service.version` is used.
        #[arg(value_name = "REF", env = "PACTO_REF")]
        reference: String,
        /// Overwrite an existing tag.
        #[arg(long, short, env = "PACTO_FORCE")]
        force: bool,
        #[command(flatten)]
        overrides: PushOverrideArgs,
    },
    /// Pull a bundle (highest semver tag when untagged) and write its files to a directory.
    Pull {
        /// `oci://registry/repo[:tag|@digest]`.
        #[arg(value_name = "REF", env = "PACTO_REF")]
        reference: String,
        /// Destination directory (created if missing).
        #[arg(long, short, value_name = "DIR", env = "PACTO_PULL_OUTPUT")]
        output: PathBuf,
        /// Only consider tags satisfying this semver constraint (untagged references only).
        #[arg(long, value_name = "CONSTRAINT", env = "PACTO_CONSTRAINT")]
        constraint: Option<String>,
    },
    /// Show the digest, tags and version labels of a bundle in a registry.
    Inspect {
        /// `oci://registry/repo[:tag|@digest]`.
        #[arg(value_name = "REF", env = "PACTO_REF")]
        reference: String,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = OutputFormat::Text, env = "PACTO_OUTPUT")]
        output: OutputFormat,
    },
    /// Show what a new version of a contract changes (interfaces, configurations, dependencies,
    /// capabilities, ...), each change breaking, non-breaking or informational, and whether the
    /// new service.version is bumped enough (major for breaking changes). Exits 0 when there are
    /// no changes or the version bump covers them, 1 when the new version needs a bigger bump
    /// (or what --fail-on names), 2 on usage errors or when either contract cannot be obtained or
    /// is invalid
    Diff(DiffArgs),
    /// Explain a Pacto's verdict from the cluster (kubeconfig): conditions, findings, the
    /// troubleshooting guide's next step, readiness, events and the next check.
    Status(StatusArgs),
    /// Print this binary's version, the git commit it was built from and its build time.
    Version {
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = OutputFormat::Text, env = "PACTO_OUTPUT")]
        output: OutputFormat,
    },
    /// Print the shell completion script of `pacto` for a shell (bash, zsh, fish, elvish,
    /// powershell) to standard output.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Signed evidence envelopes (pacto.dev/evidence/v1): generate keys, sign an evidence set,
    /// verify an envelope, send it to an Evidence Server, list the records stored for a contract.
    #[command(subcommand)]
    Evidence(EvidenceCommand),
}

/// `pacto evidence …`. Exit codes: `0` success, `1` the evidence set or envelope is refused
/// (the message starts with the protocol's error code; for `push`, the server refused it with a
/// 4xx), `2` usage errors, unreadable files, and for `push` a server that could not be reached
/// or failed (5xx).
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Generate an Ed25519 key pair: `<keyId>.key` (private, mode 0600) and
    /// `<producer>__<keyId>.pub` (or `<keyId>.pub` when producer and key id are equal; mode 0644)
    Keygen {
        /// Directory the two files are written to (created if missing).
        #[arg(
            long,
            value_name = "DIR",
            env = "PACTO_EVIDENCE_OUT",
            default_value = "."
        )]
        out: PathBuf,
        /// The producer the key is for (1-64 letters, digits, `.`, `-`; starts alphanumeric).
        #[arg(long, value_name = "ID", env = "PACTO_EVIDENCE_PRODUCER")]
        producer: String,
        /// The key id (same grammar; default: the hex of the first 8 bytes of SHA-256 of the
        /// public key).
        #[arg(long, value_name = "ID", env = "PACTO_EVIDENCE_KEY_ID")]
        key_id: Option<String>,
        /// Overwrite existing key files.
        #[arg(long, env = "PACTO_FORCE")]
        force: bool,
    },
    /// Strictly decode and validate an evidence set (JSON), wrap it in an envelope, sign it and
    /// print the envelope on stdout
    Sign {
        /// The evidence set (`-` for stdin).
        #[arg(value_name = "EVIDENCE")]
        evidence: PathBuf,
        /// The private key file written by `pacto evidence keygen`.
        #[arg(long, value_name = "FILE", env = "PACTO_EVIDENCE_KEY")]
        key: PathBuf,
        /// The key id put in `producer.keyId` (default: derived from the key like keygen's).
        #[arg(long, value_name = "ID", env = "PACTO_EVIDENCE_KEY_ID")]
        key_id: Option<String>,
        /// The producer id put in `producer.id`.
        #[arg(long, value_name = "ID", env = "PACTO_EVIDENCE_PRODUCER")]
        producer: String,
        /// The producer's version put in `producer.version`.
        #[arg(long, value_name = "VERSION", env = "PACTO_EVIDENCE_PRODUCER_VERSION")]
        producer_version: Option<String>,
        /// The envelope sequence, strictly increasing per producer (default: the issue time in
        /// Unix milliseconds).
        #[arg(long, value_name = "N", env = "PACTO_EVIDENCE_SEQUENCE")]
        sequence: Option<u64>,
        /// Validity after the issue time (`24h`, `90m`, `1h30m`, `45s`); `0` for no expiry.
        #[arg(
            long,
            value_name = "DURATION",
            env = "PACTO_EVIDENCE_TTL",
            default_value = "24h"
        )]
        ttl: String,
        /// The envelope id (default: `sha256:` of the producer, the sequence and the content).
        #[arg(long, value_name = "ID", env = "PACTO_EVIDENCE_ID")]
        id: Option<String>,
        /// The issue time, RFC3339 (default: now, UTC).
        #[arg(long, value_name = "TIME", env = "PACTO_EVIDENCE_ISSUED_AT")]
        issued_at: Option<String>,
    },
    /// Verify an envelope like the Evidence Server does before it stores it: strict decode,
    /// signature, producer binding, subject scope, freshness, evidence validation and the
    /// ContractRef policy
    Verify {
        /// The envelope (`-` for stdin).
        #[arg(value_name = "ENVELOPE")]
        envelope: PathBuf,
        /// The trust store: a `pacto.dev/evidence-trust/v1` YAML file, one `.pub` file, or a
        /// directory of `.pub` files.
        #[arg(long, value_name = "PATH", env = "PACTO_EVIDENCE_TRUST")]
        trust: PathBuf,
        /// Check freshness at this instant, RFC3339 (default: now).
        #[arg(long, value_name = "TIME", env = "PACTO_EVIDENCE_AT")]
        at: Option<String>,
    },
    /// Send a signed envelope to an Evidence Server (`POST <url>/api/evidence/v1/envelopes`)
    /// and print what it answered: the record's id, compliance and finding count, or the
    /// server's error code
    Push {
        /// The envelope (`-` for stdin), e.g. the output of `pacto evidence sign`.
        #[arg(value_name = "ENVELOPE")]
        envelope: PathBuf,
        /// The Evidence Server's base URL (`http://host:8686`); the ingestion path is appended.
        #[arg(long, value_name = "URL", env = "PACTO_EVIDENCE_URL")]
        url: String,
        /// Output format: the answer as text, or the server's JSON body.
        #[arg(long, short, value_enum, default_value_t = OutputFormat::Text, env = "PACTO_OUTPUT")]
        output: OutputFormat,
    },
    /// List the evidence records stored in the registry for a contract and check them, without
    /// the server: each record's producer, sequence, subject and compliance, its signature
    /// against `--trust`, and every artifact that claims to be a record but is not a valid one.
    /// Exits 1 with a "partial" summary when any record is malformed or badly signed
    List {
        /// The contract manifest: `oci://<registry>/<repository>@sha256:<digest>`.
        #[arg(value_name = "SUBJECT")]
        subject: String,
        /// Check each record's signature against this trust store (as for `verify`): verified,
        /// unverified (key not trusted), bad-signature, or refused (producer, scope, validity
        /// at acceptance). Without it every record is unverified.
        #[arg(long, value_name = "PATH", env = "PACTO_EVIDENCE_TRUST")]
        trust: Option<PathBuf>,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = OutputFormat::Text, env = "PACTO_OUTPUT")]
        output: OutputFormat,
    },
}

/// Parses the command line and runs the command, returning the process exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let code = commands::execute(cli);
    ExitCode::from(code)
}
