//! What the `pacto` binary tests share: running the built binary with a clean environment, its
//! output, and the command list from the clap definitions.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::Path;
use std::process::{Command, Output};

/// A `pacto` command with a clean environment: no inherited credentials or docker config.
pub fn pacto(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pacto"));
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("pacto runs")
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The names of the `pacto` commands, from the clap definitions.
pub fn command_names() -> Vec<String> {
    use clap::CommandFactory as _;
    let names: Vec<String> = pacto_cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    assert!(
        names.len() >= 7 && names.iter().any(|n| n == "completions"),
        "{names:?}"
    );
    names
}
