//! `tracing` initialisation.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::args::{LogArgs, LogFormat};

/// Logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `--log-level` is not a valid `EnvFilter` directive.
    #[error("invalid --log-level {filter:?}")]
    Filter {
        /// The rejected filter.
        filter: String,
        /// The parser's complaint.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber was already installed.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
}

/// Installs the global subscriber: JSON lines (or text) on stderr, filtered by `--log-level`.
/// Text carries colour only on a terminal (and never with `NO_COLOR` set): a container's log,
/// read with `kubectl logs … | grep`, holds plain lines.
pub fn init_tracing(args: &LogArgs) -> Result<(), TelemetryError> {
    let filter = EnvFilter::try_new(&args.level).map_err(|source| TelemetryError::Filter {
        filter: args.level.clone(),
        source,
    })?;
    let registry = tracing_subscriber::registry().with(filter);
    let result = match args.format {
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_ansi(colour_on_stderr())
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    result.map_err(TelemetryError::AlreadyInstalled)
}

/// Whether text logs may carry ANSI colour: stderr is a terminal and `NO_COLOR` (no-color.org)
/// is unset or empty.
fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
