//! The pacto command-line interface.

fn main() -> std::process::ExitCode {
    pacto_cli::run()
}
