//! The pacto command-line interface as the kubectl plugin `kubectl pacto …` (kubectl runs a
//! `kubectl-pacto` found on PATH); the same code as the `pacto` binary.

fn main() -> std::process::ExitCode {
    pacto_cli::run()
}
