//! Graceful shutdown: SIGTERM or SIGINT cancels a [`CancellationToken`] that servers and streams
//! drain on.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// The signal handlers could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    /// Registering a handler for the named signal failed.
    #[error("cannot install the {signal} handler")]
    Install {
        /// `SIGTERM` or `SIGINT`.
        signal: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Returns a token that is cancelled on the first SIGTERM or SIGINT. The handlers are installed
/// before this returns, so a signal arriving right afterwards is not lost.
pub fn on_signal() -> Result<CancellationToken, ShutdownError> {
    let mut term = signal(SignalKind::terminate()).map_err(|source| ShutdownError::Install {
        signal: "SIGTERM",
        source,
    })?;
    let mut int = signal(SignalKind::interrupt()).map_err(|source| ShutdownError::Install {
        signal: "SIGINT",
        source,
    })?;
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            () = trigger.cancelled() => return,
        };
        tracing::info!(signal = name, "shutdown requested, draining");
        trigger.cancel();
    });
    Ok(token)
}
