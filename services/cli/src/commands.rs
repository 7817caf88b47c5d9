//! The command implementations. Each returns the process exit code.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use pacto_contract::bundle::{
    BundleFiles, CONTRACT_FILE, LABEL_NAME, LABEL_PACTO_VERSION, LABEL_VERSION, Limits,
};
use pacto_contract::codes;
use pacto_contract::model::Contract;
use pacto_contract::reference::{OCI_SCHEME, Reference};
use pacto_contract::version::Constraint;
use pacto_contract::{CliOverrides, ValuesFile, apply_cli_overrides};
use pacto_contract::{
    Finding, Layer, ValidateOptions, ValidationOutcome, ValidationReport, validate_bundle,
};
use pacto_oci::{BundleMeta, ErrorClass, OciError};
use tokio::runtime::Runtime;

use crate::output::{self, print_error};
use crate::registry::{CliPolicyResolver, Registries};
use crate::{Cli, Command, EXIT_ERROR, EXIT_INVALID, EXIT_OK, OutputFormat};

/// Why a command could not proceed (all map to exit code 2 unless stated).
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Bundle(#[from] pacto_contract::bundle::BundleError),
    #[error(transparent)]
    Reference(#[from] pacto_contract::reference::ReferenceError),
    #[error(transparent)]
    Registry(#[from] OciError),
    #[error("invalid --constraint")]
    Constraint(#[from] pacto_contract::version::ConstraintError),
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("{0}")]
    Usage(String),
    /// A `pacto diff` operand (`old` or `new`) that could not be obtained.
    #[error("{operand} contract {name}")]
    Operand {
        operand: &'static str,
        name: String,
        #[source]
        inner: Box<CommandError>,
    },
}

/// Runs the parsed command line.
pub fn execute(cli: Cli) -> u8 {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PACTO_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            print_error(&CommandError::Runtime(e));
            return EXIT_ERROR;
        }
    };
    let registries = Registries::new(&cli.global);
    let ctx = Ctx {
        rt: &runtime,
        registries: &registries,
    };
    match cli.command {
        Command::Validate {
            source,
            output,
            offline,
            overrides,
        } => ctx.validate(&source, output, offline, &overrides.values, &overrides.set),
        Command::Pack {
            dir,
            output,
            overrides,
        } => ctx.pack(&dir, output.as_deref(), &overrides.values, &overrides.set),
        Command::Push {
            dir,
            reference,
            force,
            overrides,
        } => ctx.push(&dir, &reference, force, &overrides.values, &overrides.set),
        Command::Pull {
            reference,
            output,
            constraint,
        } => finish(ctx.pull(&reference, &output, constraint.as_deref())),
        Command::Inspect { reference, output } => finish(ctx.inspect(&reference, output)),
        Command::Diff(args) => ctx.diff(&args),
        Command::Evidence(command) => crate::evidence::run(&command, &runtime, &registries),
        Command::Status(args) => match runtime.block_on(crate::status::run(&args)) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                print_error(&e);
                EXIT_ERROR
            }
        },
        Command::Version { output } => {
            print_version(output);
            EXIT_OK
        }
        Command::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            match crate::reference::completions(shell, &mut out)
                .and_then(|()| std::io::Write::flush(&mut out))
            {
                Ok(()) => EXIT_OK,
                Err(e) => {
                    eprintln!("error: writing the {shell} completion script: {e}");
                    EXIT_ERROR
                }
            }
        }
    }
}

fn finish(result: Result<(), CommandError>) -> u8 {
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            print_error(&e);
            EXIT_ERROR
        }
    }
}

struct Ctx<'a> {
    rt: &'a Runtime,
    registries: &'a Registries,
}

/// A contract obtained for validation.
struct Loaded {
    files: BundleFiles,
    base_dir: Option<PathBuf>,
    subject: String,
}

fn read_overrides(values: &[PathBuf], set: &[String]) -> Result<CliOverrides, CommandError> {
    let mut values_files = Vec::new();
    for path in values {
        let bytes = std::fs::read(path).map_err(|source| CommandError::Io {
            path: path.clone(),
            source,
        })?;
        values_files.push(ValuesFile {
            name: path.display().to_string(),
            bytes,
        });
    }
    Ok(CliOverrides {
        values_files,
        set: set.to_vec(),
    })
}

/// A report holding one `PARSE_ERROR` (docs/design/contract.md#cli-level-codes).
fn parse_error_report(message: String) -> ValidationReport {
    let mut report = ValidationReport::default();
    report.push(Finding::new(codes::PARSE_ERROR, "", message, Layer::Load));
    report
}

/// Whether a contract that could not be loaded is invalid, by the operator's rule
/// (docs/design/resolution.md#invalid-or-unavailable): a failure that says something about the
/// contract itself (a malformed reference, a corrupt or oversized artifact, a bundle without
/// `pacto.yaml`, no tag matching) is Invalid, like `ContractValid=False/Invalid`; one that does not
/// (the registry unreachable, credentials rejected, not found, no semver tag at all, a local path
/// that cannot be read, a usage error) means the contract cannot be obtained (`Unavailable`).
fn load_error_is_invalid(e: &CommandError) -> bool {
    use pacto_contract::bundle::BundleError;
    match e {
        CommandError::Reference(_) => true,
        CommandError::Bundle(b) => !matches!(
            b,
            BundleError::ReadDir { .. } | BundleError::ReadFile { .. }
        ),
        CommandError::Registry(r) => {
            // No semver tag at all is Unavailable for the operator too (a repository not pushed
            // to yet), although its class is NoMatchingVersion.
            let class = r.class();
            !matches!(r, OciError::NoSemverTags { .. })
                && !class.is_unavailable()
                && class != ErrorClass::Client
        }
        CommandError::Io { .. }
        | CommandError::Constraint(_)
        | CommandError::Runtime(_)
        | CommandError::Usage(_)
        | CommandError::Operand { .. } => false,
    }
}

/// `validate`'s exit code for a contract that could not be loaded: 1 when the operator would call
/// it Invalid, else 2 ([`load_error_is_invalid`]).
fn load_exit_code(e: &CommandError) -> u8 {
    if load_error_is_invalid(e) {
        EXIT_INVALID
    } else {
        EXIT_ERROR
    }
}

fn print_report(subject: &str, report: &ValidationReport, format: OutputFormat) {
    match format {
        OutputFormat::Json => println!("{}", output::json(report)),
        OutputFormat::Text => print!("{}", output::text(subject, report)),
    }
}

impl Ctx<'_> {
    fn load(&self, source: &str) -> Result<Loaded, CommandError> {
        if source.starts_with(OCI_SCHEME) {
            let reference = Reference::parse_oci(source)?;
            let pulled = self.registries.pull(self.rt, &reference, None)?;
            return Ok(Loaded {
                files: pulled.files,
                base_dir: None,
                subject: pulled.reference.to_oci_string(),
            });
        }
        if source.contains("://") {
            return Err(CommandError::Usage(format!(
                "{source}: unsupported scheme (use a directory, a pacto.yaml file, a bundle .tar.gz or oci://)"
            )));
        }
        let path = Path::new(source);
        let meta = std::fs::metadata(path).map_err(|e| CommandError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        let lower = source.to_ascii_lowercase();
        if meta.is_file() && [".tar.gz", ".tgz"].iter().any(|ext| lower.ends_with(ext)) {
            // A bundle file, as `pacto pack` writes it.
            let file = std::fs::File::open(path).map_err(|e| CommandError::Io {
                path: path.to_path_buf(),
                source: e,
            })?;
            return Ok(Loaded {
                files: BundleFiles::from_tar_gz(std::io::BufReader::new(file), &Limits::default())?,
                base_dir: None,
                subject: path.display().to_string(),
            });
        }
        if meta.is_dir() {
            return Ok(Loaded {
                files: BundleFiles::from_dir(path, &Limits::default())?,
                base_dir: Some(path.to_path_buf()),
                subject: path.display().to_string(),
            });
        }
        // A contract file: its directory supplies the bundle files.
        let bytes = std::fs::read(path).map_err(|e| CommandError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut files = BundleFiles::read_dir(dir, &Limits::default())?;
        files.insert(CONTRACT_FILE, bytes);
        Ok(Loaded {
            files,
            base_dir: Some(dir.to_path_buf()),
            subject: path.display().to_string(),
        })
    }

    /// Applies overrides to `pacto.yaml` and validates with a policy resolver.
    fn check(
        &self,
        loaded: &mut Loaded,
        values: &[PathBuf],
        set: &[String],
        allow_local_refs: bool,
        offline: bool,
    ) -> Result<ValidationOutcome, CommandError> {
        let overrides = read_overrides(values, set)?;
        if !overrides.is_empty() {
            let base = loaded.files.contract().unwrap_or_default().to_vec();
            match apply_cli_overrides(&base, &overrides) {
                Ok(Cow::Owned(bytes)) => loaded.files.insert(CONTRACT_FILE, bytes),
                Ok(Cow::Borrowed(_)) => {}
                Err(e) => {
                    return Ok(ValidationOutcome {
                        report: parse_error_report(format!(
                            "applying overrides: {}",
                            pacto_contract::error_chain(&e)
                        )),
                        ..ValidationOutcome::default()
                    });
                }
            }
        }
        let resolver = CliPolicyResolver {
            registries: self.registries,
            runtime: self.rt,
            base_dir: loaded.base_dir.clone(),
            allow_local: allow_local_refs,
        };
        let options = ValidateOptions {
            policy_resolver: if offline { None } else { Some(&resolver) },
            inline: false,
        };
        Ok(validate_bundle(&loaded.files, &options))
    }

    fn validate(
        &self,
        source: &str,
        format: OutputFormat,
        offline: bool,
        values: &[PathBuf],
        set: &[String],
    ) -> u8 {
        let mut loaded = match self.load(source) {
            Ok(l) => l,
            Err(e) => {
                print_error(&e);
                if format == OutputFormat::Json {
                    print_report(
                        source,
                        &parse_error_report(pacto_contract::error_chain(&e)),
                        format,
                    );
                }
                return load_exit_code(&e);
            }
        };
        let outcome = match self.check(&mut loaded, values, set, true, offline) {
            Ok(o) => o,
            Err(e) => {
                print_error(&e);
                return EXIT_ERROR;
            }
        };
        print_report(&loaded.subject, &outcome.report, format);
        if outcome.is_valid() {
            EXIT_OK
        } else {
            EXIT_INVALID
        }
    }

    /// Loads, overrides and validates a bundle directory; prints the report on stderr when
    /// invalid. `Err(code)` is the exit code to return.
    fn valid_bundle(
        &self,
        dir: &Path,
        values: &[PathBuf],
        set: &[String],
        allow_local_refs: bool,
    ) -> Result<(BundleFiles, Contract), u8> {
        let mut loaded = self.load(&dir.display().to_string()).map_err(|e| {
            print_error(&e);
            EXIT_ERROR
        })?;
        if loaded.base_dir.as_deref().is_none_or(|d| d != dir) {
            eprintln!("error: {} is not a bundle directory", dir.display());
            return Err(EXIT_ERROR);
        }
        let outcome = self
            .check(&mut loaded, values, set, allow_local_refs, false)
            .map_err(|e| {
                print_error(&e);
                EXIT_ERROR
            })?;
        if let (true, Some(contract)) = (outcome.is_valid(), outcome.contract) {
            if !self.registries.quiet() && !outcome.report.warnings.is_empty() {
                eprint!("{}", output::text(&loaded.subject, &outcome.report));
            }
            Ok((loaded.files, contract))
        } else {
            eprint!("{}", output::text(&loaded.subject, &outcome.report));
            Err(EXIT_INVALID)
        }
    }

    fn pack(&self, dir: &Path, output: Option<&Path>, values: &[PathBuf], set: &[String]) -> u8 {
        let (files, contract) = match self.valid_bundle(dir, values, set, true) {
            Ok(v) => v,
            Err(code) => return code,
        };
        let out = output.map_or_else(
            || {
                PathBuf::from(format!(
                    "{}-{}.tar.gz",
                    contract.service.name, contract.service.version
                ))
            },
            Path::to_path_buf,
        );
        let result = files
            .to_tar_gz()
            .map_err(CommandError::from)
            .and_then(|bytes| {
                std::fs::write(&out, &bytes)
                    .map(|()| bytes.len())
                    .map_err(|source| CommandError::Io {
                        path: out.clone(),
                        source,
                    })
            });
        match result {
            Ok(len) => {
                println!("{}", out.display());
                if !self.registries.quiet() {
                    eprintln!(
                        "wrote {} ({len} bytes, {} files)",
                        out.display(),
                        files.len()
                    );
                }
                EXIT_OK
            }
            Err(e) => {
                print_error(&e);
                EXIT_ERROR
            }
        }
    }

    fn push(
        &self,
        dir: &Path,
        reference: &str,
        force: bool,
        values: &[PathBuf],
        set: &[String],
    ) -> u8 {
        let reference = match Reference::parse_oci(reference) {
            Ok(r) => r,
            Err(e) => {
                print_error(&e);
                return EXIT_ERROR;
            }
        };
        if reference.digest().is_some() {
            eprintln!(
                "error: push needs a tag, not a digest: {}",
                reference.to_oci_string()
            );
            return EXIT_ERROR;
        }
        let (files, contract) = match self.valid_bundle(dir, values, set, false) {
            Ok(v) => v,
            Err(code) => return code,
        };
        let local: Vec<String> = local_refs(&contract);
        if !local.is_empty() {
            eprintln!(
                "error: refusing to push a contract with local references (publish them to a registry and use oci://): {}",
                local.join(", ")
            );
            return EXIT_INVALID;
        }
        let target = if reference.tag().is_some() {
            reference
        } else {
            match reference.with_tag(&contract.service.version) {
                Ok(r) => r,
                Err(e) => {
                    print_error(&e);
                    return EXIT_ERROR;
                }
            }
        };
        let meta = BundleMeta {
            name: contract.service.name.clone(),
            version: contract.service.version.clone(),
            pacto_version: contract.pacto_version.clone(),
        };
        let client = match self.registries.client_for(&target) {
            Ok(c) => c,
            Err(e) => {
                print_error(&e);
                return EXIT_ERROR;
            }
        };
        let progress = self.registries.progress();
        match self
            .rt
            .block_on(client.push(&target, &files, &meta, force, &*progress))
        {
            Ok(pushed) => {
                println!("{}@{}", target.to_oci_string(), pushed.digest);
                EXIT_OK
            }
            Err(e) if e.class() == ErrorClass::AlreadyExists => {
                eprintln!("warning: {}", pacto_contract::error_chain(&e));
                EXIT_OK
            }
            Err(e) => {
                print_error(&e);
                EXIT_ERROR
            }
        }
    }

    /// `pacto diff`: loads and validates both operands (as `validate --offline` does, with each
    /// side's overrides), computes the diff in the contract library and renders it
    /// (docs/design/contract.md#diff).
    fn diff(&self, args: &crate::DiffArgs) -> u8 {
        let old = self.diff_operand("old", &args.old, &args.old_values, &args.old_set);
        let new = self.diff_operand("new", &args.new, &args.new_values, &args.new_set);
        let (Some((old, old_contract)), Some((new, new_contract))) = (old, new) else {
            return EXIT_ERROR;
        };
        let diff = pacto_contract::diff::diff_contracts(
            pacto_contract::diff::DiffSide {
                contract: &old_contract,
                files: &old.files,
            },
            pacto_contract::diff::DiffSide {
                contract: &new_contract,
                files: &new.files,
            },
        );
        let sides = [
            crate::diff::Operand {
                source: &old.subject,
                contract: &old_contract,
            },
            crate::diff::Operand {
                source: &new.subject,
                contract: &new_contract,
            },
        ];
        let rendered = match args.output {
            OutputFormat::Json => format!("{}\n", crate::diff::json(&sides, &diff)),
            OutputFormat::Text => crate::diff::text(&sides, &diff),
        };
        // A closed pipe (`| head`) is not an error; anything else is.
        let mut stdout = std::io::stdout().lock();
        match std::io::Write::write_all(&mut stdout, rendered.as_bytes())
            .and_then(|()| std::io::Write::flush(&mut stdout))
        {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                eprintln!("error: writing the diff: {e}");
                EXIT_ERROR
            }
            _ => crate::diff::exit_code(&diff, args.fail_on),
        }
    }

    /// One operand of `diff`, loaded, overridden and validated; `None` after printing why not.
    fn diff_operand(
        &self,
        operand: &'static str,
        source: &str,
        values: &[PathBuf],
        set: &[String],
    ) -> Option<(Loaded, Contract)> {
        let context = |e: CommandError| CommandError::Operand {
            operand,
            name: source.to_owned(),
            inner: Box::new(e),
        };
        let mut loaded = match self.load(source) {
            Ok(l) => l,
            Err(e) => {
                print_error(&context(e));
                return None;
            }
        };
        let outcome = match self.check(&mut loaded, values, set, true, true) {
            Ok(o) => o,
            Err(e) => {
                print_error(&context(e));
                return None;
            }
        };
        if let (true, Some(contract)) = (outcome.is_valid(), outcome.contract) {
            return Some((loaded, contract));
        }
        eprintln!("error: {operand} contract {source} is invalid; diff compares valid contracts");
        eprint!("{}", output::text(&loaded.subject, &outcome.report));
        None
    }

    fn pull(
        &self,
        reference: &str,
        output: &Path,
        constraint: Option<&str>,
    ) -> Result<(), CommandError> {
        let reference = Reference::parse_oci(reference)?;
        let constraint = constraint.map(Constraint::parse).transpose()?;
        let pulled = self
            .registries
            .pull(self.rt, &reference, constraint.as_ref())?;
        pulled.files.write_to_dir(output)?;
        println!("{}", pulled.reference.to_oci_string());
        if !self.registries.quiet() {
            eprintln!("wrote {} files to {}", pulled.files.len(), output.display());
        }
        Ok(())
    }

    fn inspect(&self, reference: &str, format: OutputFormat) -> Result<(), CommandError> {
        let reference = Reference::parse_oci(reference)?;
        let client = self.registries.client_for(&reference)?;
        let inspection = self.rt.block_on(async {
            let resolved = client.resolve(&reference, None).await?;
            client.inspect(&resolved.reference).await
        })?;
        let label = |k: &str| inspection.labels.get(k).cloned().unwrap_or_default();
        match format {
            OutputFormat::Json => {
                let doc = serde_json::json!({
                    "reference": inspection.reference.to_oci_string(),
                    "digest": inspection.digest,
                    "mediaType": inspection.media_type,
                    "name": label(LABEL_NAME),
                    "version": label(LABEL_VERSION),
                    "pactoVersion": label(LABEL_PACTO_VERSION),
                    "tags": inspection.tags,
                    "repositoryTags": inspection.repository_tags,
                    "layerBytes": inspection.layer_bytes,
                    "labels": inspection.labels,
                });
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            }
            OutputFormat::Text => {
                println!("Reference:     {}", inspection.reference.to_oci_string());
                println!("Digest:        {}", inspection.digest);
                println!("Media type:    {}", inspection.media_type);
                println!("Name:          {}", label(LABEL_NAME));
                println!("Version:       {}", label(LABEL_VERSION));
                println!("Pacto version: {}", label(LABEL_PACTO_VERSION));
                println!("Tags:          {}", inspection.tags.join(", "));
                println!("Layer size:    {} bytes", inspection.layer_bytes);
            }
        }
        Ok(())
    }
}

/// Dependency, configuration and policy references that are local (`file://` or no scheme).
fn local_refs(contract: &Contract) -> Vec<String> {
    let is_local = |r: &str| !r.is_empty() && !r.starts_with(OCI_SCHEME);
    let mut out = Vec::new();
    for (i, d) in contract.dependencies.iter().enumerate() {
        if is_local(&d.reference) {
            out.push(format!("dependencies[{i}].ref {:?}", d.reference));
        }
    }
    for (i, c) in contract.configurations.iter().enumerate() {
        if let Some(r) = c.reference.as_deref().filter(|r| is_local(r)) {
            out.push(format!("configurations[{i}].ref {r:?}"));
        }
    }
    for (i, p) in contract.policies.iter().enumerate() {
        if let Some(r) = p.reference.as_deref().filter(|r| is_local(r)) {
            out.push(format!("policies[{i}].ref {r:?}"));
        }
    }
    out
}

/// `pacto version`: the crate version, the commit and the build time the build script captured
/// (services/runtime/build-info.rs), as text or one JSON object.
fn print_version(output: OutputFormat) {
    let (version, commit, built) = (
        env!("CARGO_PKG_VERSION"),
        env!("PACTO_BUILD_COMMIT"),
        env!("PACTO_BUILD_TIME"),
    );
    match output {
        OutputFormat::Text => println!("pacto {version} (commit {commit}, built {built})"),
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({"name": "pacto", "version": version, "commit": commit, "buildTime": built})
        ),
    }
}
