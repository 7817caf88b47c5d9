//! Renders the CLI reference (Markdown), the man pages and the shell completion scripts from the
//! clap definitions, so the checked-in `docs/reference/cli.md` and `docs/reference/man/` can be
//! regenerated and drift-checked by a test.

use std::fmt::Write as _;

use clap::CommandFactory as _;

use crate::{Cli, EXIT_ERROR, EXIT_INVALID, EXIT_OK};

fn arg_line(arg: &clap::Arg) -> Option<String> {
    if arg.is_hide_set() {
        return None;
    }
    let id = arg.get_id().as_str();
    if id == "help" || id == "version" {
        return None;
    }
    let mut name = match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
        (None, Some(l)) => format!("`--{l}`"),
        (Some(s), None) => format!("`-{s}`"),
        (None, None) => format!(
            "`<{}>`",
            arg.get_value_names()
                .and_then(|v| v.first())
                .map_or_else(|| id.to_uppercase(), ToString::to_string)
        ),
    };
    if arg.get_long().is_some() && arg.get_num_args().is_none_or(|n| n.takes_values()) {
        if let Some(v) = arg.get_value_names().and_then(|v| v.first()) {
            let _ = write!(name, " `<{v}>`");
        } else if !matches!(arg.get_action(), clap::ArgAction::SetTrue) {
            let _ = write!(name, " `<{}>`", id.to_uppercase());
        }
    }
    let help = arg
        .get_help()
        .map(|h| h.to_string().replace('\n', " "))
        .unwrap_or_default();
    let env = arg
        .get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_default();
    let default = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(", ");
    let possible = arg
        .get_possible_values()
        .iter()
        .map(|v| format!("`{}`", v.get_name()))
        .collect::<Vec<_>>();
    let help = if possible.is_empty() || matches!(arg.get_action(), clap::ArgAction::SetTrue) {
        help
    } else {
        format!(
            "{}. One of {}.",
            help.trim_end_matches('.'),
            possible.join(", ")
        )
    };
    let cell = |s: &str| s.replace('|', "\\|");
    Some(format!(
        "| {} | {} | {env} | {default} |",
        cell(&name),
        cell(&help)
    ))
}

fn table(out: &mut String, args: &[&clap::Arg]) {
    let rows: Vec<String> = args.iter().filter_map(|a| arg_line(a)).collect();
    if rows.is_empty() {
        return;
    }
    out.push_str("| Argument | Description | Environment | Default |\n|---|---|---|---|\n");
    for row in rows {
        out.push_str(&row);
        out.push('\n');
    }
}

/// One command's section; a command with subcommands gets one nested section per subcommand.
fn section(out: &mut String, sub: &clap::Command, parent: &str, level: usize, global_ids: &[&str]) {
    let name = format!("{parent} {}", sub.get_name());
    if !out.ends_with("\n\n") {
        out.push('\n');
    }
    let _ = writeln!(out, "{} `{name}`\n", "#".repeat(level));
    if let Some(about) = sub.get_about() {
        let _ = writeln!(out, "{about}.\n");
    }
    let mut sub = sub.clone();
    let usage = sub.render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ");
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let own: Vec<&clap::Arg> = sub
        .get_arguments()
        .filter(|a| !global_ids.contains(&a.get_id().as_str()))
        .collect();
    table(out, &own);
    for child in sub.get_subcommands() {
        if child.get_name() != "help" {
            section(out, child, &name, level + 1, global_ids);
        }
    }
}

/// The Markdown reference of every command, flag and environment variable.
pub fn markdown() -> String {
    let mut root = Cli::command();
    root.build();
    let mut out = String::from(
        "# `pacto` CLI reference\n\n\
         <!-- Generated from services/cli/src/lib.rs by services/cli/src/reference.rs; \
         regenerate with `PACTO_UPDATE_DOCS=1 cargo test -p pacto --test reference_docs`. -->\n\n",
    );
    out.push_str(
        "Shell completion: `pacto completions <shell>` prints the script for `bash`, `zsh`, `fish`, \
         `elvish` or `powershell`, e.g. `source <(pacto completions bash)` in `~/.bashrc`, or \
         `pacto completions zsh > \"${fpath[1]}/_pacto\"`. Man pages: [`man/`](man/) holds \
         `pacto.1` and one `pacto-<command>.1` per command, generated from the same definitions \
         (`man -l docs/reference/man/pacto.1`, or copy them into a `man1` directory of your \
         `MANPATH`).\n\n",
    );
    let _ = writeln!(
        out,
        "Exit codes: `{EXIT_OK}` success (for `validate`: the contract is valid), `{EXIT_INVALID}` the \
         contract is invalid, as the operator's `ContractValid=False/Invalid` (also a malformed \
         reference, a corrupt or oversized artifact, a bundle without `pacto.yaml`; for \
         `evidence`: the evidence set or envelope is refused), `{EXIT_ERROR}` usage errors or the \
         contract cannot be obtained, as the operator's `Unavailable` (a missing local path, \
         registry unreachable, authentication rejected, not found).\n"
    );
    out.push_str("## Global options\n\nAccepted by every command.\n\n");
    let globals: Vec<&clap::Arg> = root.get_arguments().collect();
    table(&mut out, &globals);
    let global_ids: Vec<&str> = globals.iter().map(|a| a.get_id().as_str()).collect();
    for sub in root.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        section(&mut out, sub, "pacto", 2, &global_ids);
    }
    out
}

/// Writes the completion script of `pacto` for `shell` to `out`.
///
/// # Errors
/// Writing to `out` failed.
pub fn completions(
    shell: clap_complete::Shell,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "pacto", &mut script);
    out.write_all(&script)
}

/// Escapes text for a roff line: backslashes, hyphens (so they print as ASCII `-` and can be
/// searched for) and a leading control character.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The ENVIRONMENT section: every environment variable an argument of `cmd` reads.
fn environment_section(cmd: &clap::Command, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let vars: Vec<(String, String)> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let env = a.get_env()?.to_string_lossy().into_owned();
            let arg = a.get_long().map_or_else(
                || {
                    let name = a
                        .get_value_names()
                        .and_then(|v| v.first())
                        .map_or_else(|| a.get_id().to_string(), ToString::to_string);
                    format!("<{name}>")
                },
                |l| format!("--{l}"),
            );
            Some((env, format!("The value of {arg} when it is not given.")))
        })
        .collect();
    if vars.is_empty() {
        return Ok(());
    }
    writeln!(w, ".SH ENVIRONMENT")?;
    for (env, text) in vars {
        writeln!(w, ".TP\n\\fB{}\\fR\n{}", roff_text(&env), roff_text(&text))?;
    }
    Ok(())
}

/// One man page: clap_mangen's sections, with an ENVIRONMENT section after the options.
fn man_page(cmd: &clap::Command, source: &str) -> std::io::Result<(String, Vec<u8>)> {
    let man = clap_mangen::Man::new(cmd.clone())
        .source(source)
        .manual("Pacto Manual");
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut page)?;
    }
    environment_section(cmd, &mut page)?;
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut page)?;
    }
    if cmd.get_version().is_some() {
        man.render_version_section(&mut page)?;
    }
    Ok((man.get_filename(), page))
}

/// The man pages: `pacto.1` and `pacto-<command>.1` for every command, as (file name, roff).
///
/// # Errors
/// Rendering a page failed (it renders into memory, so only on a clap definition it cannot
/// render).
pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let source = format!("pacto {}", root.get_version().unwrap_or_default());
    let mut pages = vec![man_page(&root, &source)?];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages.push(man_page(sub, &source)?);
    }
    pages.sort();
    Ok(pages)
}
